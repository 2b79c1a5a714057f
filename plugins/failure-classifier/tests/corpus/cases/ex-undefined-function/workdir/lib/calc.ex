defmodule Calc do
  def sum(a, b), do: a + b
end
