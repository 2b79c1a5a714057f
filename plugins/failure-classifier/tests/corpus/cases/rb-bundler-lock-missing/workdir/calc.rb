module Calc
  def self.add(a, b) = a + b
end
