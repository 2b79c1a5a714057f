module Calc
  def self.add(a, b) = [a, b].find { |x| x > 9 }.abs
end
