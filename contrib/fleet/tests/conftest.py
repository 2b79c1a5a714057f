"""Fixtures: a team's remote (a bare repository whose test fails until a file says "fixed"),
and a worker's home directory. Every loop runs without the user's plugins or failure memory."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest


def run_git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


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


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, waiting for its parent to reap it, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def marked(task: str) -> list[int]:
    """Live processes started for ``task`` (the activity marks the loop's environment, and
    every descendant inherits it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"LOOPCTL_FLEET_TASK={task}".encode() in environ and alive(int(entry)):
            found.append(int(entry))
    return found
