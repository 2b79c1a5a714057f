"""``loopctl demo``: a bundled example project with failing tests and a scripted agent scenario
that fixes it, so a complete loop runs offline in seconds.

The project is kept afterwards (in a new temporary directory, or the one given), so its report
can be read. The demo's loop touches nothing outside it: it runs with the user's ``LOOPCTL_*``
settings set aside (``LOOPCTL_AGENT`` must not turn the demo into a paid run; the plugin
switches stay, as they say which code may load) and with the per-user data directories (``XDG_DATA_HOME``, ``XDG_STATE_HOME``, ``XDG_CACHE_HOME``) inside
the project, so a plugin that keeps per-user data (a failure memory, say) keeps the demo's in
the demo, whichever plugins are installed.
"""

from __future__ import annotations

import os
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
    (target / ".gitignore").write_text(
        f".loopctl/\n{USER_DATA_DIR}/\n__pycache__/\n", encoding="utf-8"
    )
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


def prepare_demo(directory: Path | None) -> DemoProject:
    """The demo project, written into ``directory`` (created if need be) or, by default, into a
    new temporary directory; either is kept."""
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        target = directory.resolve()
    else:
        target = Path(tempfile.mkdtemp(prefix="loopctl-demo-")).resolve()
    return write_demo_project(target)


#: The directory, inside the demo project, that stands in for the user's data directories.
USER_DATA_DIR = ".demo-home"
#: The per-user directories the demo's loop sees inside the project (the XDG base directories).
USER_DIRS = {"XDG_DATA_HOME": "data", "XDG_STATE_HOME": "state", "XDG_CACHE_HOME": "cache"}


@contextmanager
def demo_environment(project: DemoProject) -> Iterator[None]:
    """``os.environ`` for the demo's loop: no ``LOOPCTL_*`` variable of the user's but the
    plugin switches (the demo runs on its own config file) and the per-user data directories
    inside the project. Restored afterwards."""
    from loopctl.configfile import ENV_DISABLE_AUTOLOAD, ENV_PLUGINS

    saved = dict(os.environ)
    try:
        for name in list(os.environ):
            switch = name == ENV_DISABLE_AUTOLOAD or name.split("__")[0] == ENV_PLUGINS
            if name.startswith("LOOPCTL_") and not switch:
                del os.environ[name]
        for name, sub in USER_DIRS.items():
            os.environ[name] = str(project.workdir / USER_DATA_DIR / sub)
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)
