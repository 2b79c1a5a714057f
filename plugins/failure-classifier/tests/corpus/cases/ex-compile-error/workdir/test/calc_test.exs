defmodule CalcTest do
  use ExUnit.Case

  test "add" do
    assert Calc.add(2, 3) == 5
  end
end
