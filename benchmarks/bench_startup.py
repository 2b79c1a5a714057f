"""Startup time of the commands people type most: ``loopctl --version`` and ``loopctl plugins list``.

Measured with the ``loopctl`` console script of the environment running this file (``nox -s
bench`` installs core and every plugin there, compiled, as users get them). Baselines in the same
run: an empty Python start, and the plain way to build this CLI: a typer app that scans the
entry points (what the issue measured at ~250 ms on this machine). The commands are timed in
turns, 21 rounds of one run each, so the machine's slow spells fall on all of them alike.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, median_ms, print_table, time_commands

PLAIN_TYPER_APP = """
import typer
import importlib_metadata
import rich

app = typer.Typer()

@app.command()
def plugins_list() -> None:
    for ep in importlib_metadata.entry_points(group="loopctl.plugins"):
        print(ep.name, ep.value)

@app.command()
def version() -> None:
    print("x")

app()
"""


def figures() -> list[Figure]:
    bindir = Path(sys.executable).parent
    loopctl = str(bindir / "loopctl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    with tempfile.TemporaryDirectory() as tmp:  # no loopctl.toml found from here
        os.chdir(tmp)
        script = Path(tmp) / "plain_typer.py"
        script.write_text(PLAIN_TYPER_APP)
        samples = time_commands(
            {
                "python": [sys.executable, "-c", "pass"],
                "plain": [sys.executable, str(script), "plugins-list"],
                "version": [loopctl, "--version"],
                "plugins": [loopctl, "plugins", "list"],
                "plugins_json": [loopctl, "plugins", "list", "--json"],
            },
            env=env,
        )
        python, plain, version, plugins, plugins_json = (
            median_ms(samples[name])
            for name in ("python", "plain", "version", "plugins", "plugins_json")
        )
        help_ = median_ms(time_commands({"help": [loopctl, "--help"]}, runs=7, env=env)["help"])
    return [
        Figure("loopctl --version (median)", version, "ms", "<= 60 ms", version <= 60),
        Figure("loopctl plugins list (median)", plugins, "ms", "<= 150 ms", plugins <= 150),
        Figure(
            "loopctl plugins list --json (median)",
            plugins_json,
            "ms",
            "<= 150 ms",
            plugins_json <= 150,
        ),
        Figure("loopctl --help (median)", help_, "ms", note="typer; informational"),
        Figure("  baseline: python -c pass", python, "ms", note="same run"),
        Figure("  baseline: plain typer app + entry-point scan", plain, "ms", note="same run"),
        Figure("  --version / python start", version / python, "x"),
        Figure("  plugins list / plain typer app", plugins / plain, "x"),
    ]


if __name__ == "__main__":
    print_table(figures())
