defmodule Calc.MixProject do
  use Mix.Project

  def project do
    [app: :calc, version: "0.1.0", elixir: "~> 1.99", deps: []]
  end
end
