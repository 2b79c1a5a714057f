"""The ``loopctl`` command line: :mod:`loopctl.cli.app` (typer) and :mod:`loopctl.cli.fast`
(commands that must start quickly, without typer)."""
