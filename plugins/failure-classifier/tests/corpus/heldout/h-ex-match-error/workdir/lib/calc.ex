defmodule Calc do
  def add(a, b) do
    {:ok, s} = {:error, a + b}
    s
  end
end
