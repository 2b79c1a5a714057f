"""``loopctl.testing.lifeline``: what a test process registers is ended when it is gone, whatever
ended it (a SIGKILL included), and only then."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from loopctl.testing import running

pytestmark = pytest.mark.timing  # real processes, SIGKILL, and a watcher that outlives them

#: A test process: starts a detached sleeper (a server that outlives its starter), registers
#: it, a command and a directory with the lifeline, says so in argv[1], then does argv[2].
HOLDER = """
import json, subprocess, sys, time
from pathlib import Path
from loopctl.testing import lifeline

out, then = Path(sys.argv[1]), sys.argv[2]
sleeper = subprocess.Popen(["sleep", "1000"], start_new_session=True)
key = lifeline().register(
    run=[["touch", str(out.parent / "ran")]], end=[sleeper.pid], remove=[out.parent / "gone"]
)
if then == "forget":
    lifeline().forget(key)
out.write_text(json.dumps({"sleeper": sleeper.pid, "watcher": lifeline().pid}))
if then == "hang":
    time.sleep(1000)
"""


def _wait_for(predicate: Callable[[], object], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"not true within {timeout_s} s"
        time.sleep(0.02)


@pytest.fixture
def holder(
    tmp_path: Path,
) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], dict[str, int]]]]:
    started: list[tuple[subprocess.Popen[bytes], dict[str, int]]] = []

    def start(then: str) -> tuple[subprocess.Popen[bytes], dict[str, int]]:
        (tmp_path / "gone").mkdir()
        out = tmp_path / "out.json"
        process = subprocess.Popen([sys.executable, "-c", HOLDER, str(out), then])
        _wait_for(lambda: out.exists() and out.read_text())
        pids = json.loads(out.read_text())
        started.append((process, pids))
        return process, pids

    yield start
    for process, pids in started:  # whatever the test left
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in pids.values():
            if running(pid):
                os.kill(pid, signal.SIGKILL)


def test_what_a_killed_process_registered_is_ended(
    tmp_path: Path, holder: Callable[[str], tuple[subprocess.Popen[bytes], dict[str, int]]]
) -> None:
    process, pids = holder("hang")
    assert running(pids["sleeper"])
    process.send_signal(signal.SIGKILL)  # no teardown, no atexit
    process.wait()
    _wait_for(lambda: not running(pids["watcher"]))
    assert not running(pids["sleeper"])
    assert (tmp_path / "ran").exists()
    assert not (tmp_path / "gone").exists()


def test_what_a_process_forgot_is_left_alone(
    tmp_path: Path, holder: Callable[[str], tuple[subprocess.Popen[bytes], dict[str, int]]]
) -> None:
    process, pids = holder("forget")
    assert process.wait(timeout=60) == 0  # its exit waits for the watcher
    assert not running(pids["watcher"])
    assert running(pids["sleeper"])
    assert not (tmp_path / "ran").exists()
    assert (tmp_path / "gone").exists()


def test_a_normal_exit_ends_what_was_not_forgotten_before_it_returns(
    tmp_path: Path, holder: Callable[[str], tuple[subprocess.Popen[bytes], dict[str, int]]]
) -> None:
    process, pids = holder("exit")
    assert process.wait(timeout=60) == 0
    assert not running(pids["sleeper"])
    assert (tmp_path / "ran").exists()
    assert not (tmp_path / "gone").exists()
