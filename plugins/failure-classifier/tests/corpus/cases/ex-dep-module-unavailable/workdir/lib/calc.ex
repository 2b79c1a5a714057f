defmodule Calc do
  def add(a, b), do: Decimal.add(a, b) |> Decimal.to_integer()
end
