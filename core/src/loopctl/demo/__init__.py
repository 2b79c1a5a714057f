"""``loopctl demo``: a bundled example project with failing tests and a scripted agent scenario
that fixes it, so a complete loop runs offline in seconds."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

HERE = Path(__file__).parent
GOAL = (
    "Make the test suite of the inventory package pass: fix total_units, stock_value and slug "
    "in inventory/stock.py without changing the tests."
)


@attrs.define
class DemoProject:
    workdir: Path
    goal: str
    config_file: Path


def write_demo_project(target: Path) -> DemoProject:
    """Copy the example project into ``target`` (a git repository when git is installed)."""
    shutil.copytree(HERE / "project", target, dirs_exist_ok=True)
    shutil.copyfile(HERE / "scenario.toml", target / "scenario.toml")
    config = target / "loopctl.toml"
    python = sys.executable.replace("\\", "/")
    config.write_text(
        "# Written by `loopctl demo`.\n"
        'agent = "scripted"\n'
        'session = "resume"\n'
        f'test_cmd = "{python} -m unittest discover -s tests -q"\n'
        "\n[limits]\nmax_iterations = 8\n"
        "\n[agents.scripted]\n"
        'scenario = "scenario.toml"\n'
        'model = "claude-sonnet-4-5"\n',
        encoding="utf-8",
    )
    (target / ".gitignore").write_text(".loopctl/\n__pycache__/\n", encoding="utf-8")
    if shutil.which("git"):
        for args in (
            ["init", "-q"],
            ["add", "-A"],
            [
                "-c",
                "user.name=loopctl demo",
                "-c",
                "user.email=demo@loopctl.invalid",
                "commit",
                "-q",
                "-m",
                "demo project",
            ],
        ):
            subprocess.run(["git", *args], cwd=target, check=False, capture_output=True)
    return DemoProject(workdir=target, goal=GOAL, config_file=config)


@contextmanager
def prepare_demo(keep: Path | None) -> Iterator[DemoProject]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        yield write_demo_project(keep.resolve())
        return
    with tempfile.TemporaryDirectory(prefix="loopctl-demo-") as tmp:
        yield write_demo_project(Path(tmp))
