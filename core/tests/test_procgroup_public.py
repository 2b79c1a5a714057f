"""loopctl.ending_descendants: nothing started inside the block outlives it, however it hid."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a subreaper is Linux's"),
    pytest.mark.process,  # orphans, sessions and a subreaper: the OS's, run once
]

#: A child that starts a grandchild in a session of its own and exits at once: the grandchild is
#: an orphan, which only a subreaper gets back.
HIDE = "setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & sleep 0.01; exit 0"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def _run_in_child(code: str) -> None:
    """Run ``code`` in a fresh Python (a subreaper setting stays with the process)."""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_an_orphaned_descendant_in_its_own_session_is_ended_and_reaped(tmp_path: Path) -> None:
    pidfile = tmp_path / "hidden.pid"
    _run_in_child(
        f"""
import subprocess, time, pathlib, loopctl
with loopctl.ending_descendants(grace_s=1) as caught:
    assert caught
    subprocess.run(["sh", "-c", {HIDE.format(pidfile=pidfile)!r}], check=True)
    while not pathlib.Path({str(pidfile)!r}).exists():
        time.sleep(0.01)
"""
    )
    assert not _alive(int(pidfile.read_text()))


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    pidfile = tmp_path / "stubborn.pid"
    _run_in_child(
        f"""
import subprocess, time, pathlib, loopctl
with loopctl.ending_descendants(grace_s=0.2):
    subprocess.Popen(["sh", "-c", "trap '' TERM; echo $$ > {pidfile}; while :; do sleep 1; done"])
    while not pathlib.Path({str(pidfile)!r}).exists():
        time.sleep(0.01)
"""
    )
    assert not _alive(int(pidfile.read_text()))


def test_leaving_the_block_restores_the_subreaper_setting() -> None:
    _run_in_child(
        """
from loopctl import procgroup
import loopctl
assert not procgroup.is_subreaper()
with loopctl.ending_descendants(grace_s=0):
    assert procgroup.is_subreaper()
assert not procgroup.is_subreaper()
"""
    )
