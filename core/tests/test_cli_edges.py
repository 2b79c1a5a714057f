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


# --- demo ----------------------------------------------------------------------------------------


def test_demo_keeps_its_project_and_writes_nothing_in_the_users_directories(
    tmp_path: Path,
) -> None:
    home, data, temp = tmp_path / "home", tmp_path / "xdg-data", tmp_path / "tmp"
    for directory in (home, data, temp):
        directory.mkdir()
    env = clean_env(
        HOME=str(home),
        XDG_DATA_HOME=str(data),
        TMPDIR=str(temp),
        # the user's own settings do not reach the demo: not the agent, not the memory's place
        LOOPCTL_AGENT="no-such-agent",
        LOOPCTL_FAILURE_MEMORY=str(home / "failures.sqlite3"),
    )
    result = loopctl("demo", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert list(home.iterdir()) == [] and list(data.iterdir()) == []
    report = next(
        line.removeprefix("report: ") for line in result.stdout.splitlines() if "report: " in line
    )
    assert Path(report).is_file()  # after loopctl exited
    assert "complete" in Path(report).read_text(encoding="utf-8")
    project = Path(report).parent.parent
    assert project.parent == temp.resolve()
    assert f"the demo project is kept in {project}" in result.stdout
    # per-user data the loop's plugins keep (the failure memory) stayed inside the project
    from importlib.util import find_spec

    if find_spec("loopctl_context_errors") is not None:
        assert list(project.rglob("failures.sqlite3"))


def test_demo_dir_puts_the_project_there(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = loopctl("demo", "--dir", str(target), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (target / ".loopctl" / "report.md").is_file()
    assert f"the demo project is kept in {target.resolve()}" in result.stdout
