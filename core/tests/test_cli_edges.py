"""The command line's rough edges a new user meets first: a closed pipe, typos in the plugin
switches and misplaced keys, a missing agent command, the demo's files, shell completion,
``-v``/``-q`` and the help's choices and examples."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopctl.testing import Project, make_project


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOOPCTL_", "_LOOPCTL_")) and k not in ("NO_COLOR", "PYTHONPATH")
    }
    env.update(extra)
    return env


def loopctl(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "loopctl", *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "project")


# --- a reader that goes away -----------------------------------------------------------------------


def into_closed_pipe(*args: str, cwd: Path) -> tuple[int, str]:
    """Run ``loopctl ARGS`` with stdout a pipe whose reader has already closed it (as in
    ``loopctl … | true`` once ``true`` exits); (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the process starts: its first write meets a closed pipe
    try:
        result = subprocess.run(
            [sys.executable, "-m", "loopctl", *args],
            cwd=cwd,
            env=clean_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["plugins", "list", "--json"], id="plugins-list-json"),
        pytest.param(["plugins", "list"], id="plugins-list"),
        pytest.param(["plugins", "list", "--json", "--config", "loopctl.toml"], id="typer-path"),
        pytest.param(["agents", "list", "--json"], id="agents-list"),
        pytest.param(["--help"], id="help"),
        pytest.param(["config", "show"], id="config-show"),
    ],
)
def test_a_closed_pipe_ends_the_command_quietly(project: Project, args: list[str]) -> None:
    project.write("loopctl.toml", "")
    code, stderr = into_closed_pipe(*args, cwd=project.path)
    assert stderr == ""  # no traceback, no "Exception ignored"
    assert code == 1
