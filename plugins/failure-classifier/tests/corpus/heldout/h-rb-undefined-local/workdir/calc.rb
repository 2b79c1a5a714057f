module Calc
  def self.add(a, b)
    total = a + b
    totl
  end
end
