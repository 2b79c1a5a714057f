"""Fixtures: a team's remote (a bare repository whose test fails until a file says "fixed"),
and a worker's home directory. Every loop runs without the user's plugins or failure memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_testkit import run_git


@pytest.fixture(autouse=True)
def quiet_loops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPCTL_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", "off")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def bare(tmp_path: Path) -> Path:
    """A bare repository with one commit on main: ``check.sh`` passes once ``f.txt`` says
    "fixed"."""
    work = tmp_path / "work"
    work.mkdir()
    run_git("init", "-q", "-b", "main", cwd=work)
    (work / "f.txt").write_text("broken\n")
    (work / "check.sh").write_text(
        'grep -q fixed f.txt || { echo "FAILED test_f - not fixed"; exit 1; }\n'
    )
    run_git("add", "-A", cwd=work)
    run_git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=work)
    bare = tmp_path / "remote.git"
    run_git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare
