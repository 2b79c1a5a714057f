"""The guard: when the worker's lifeline closes or a stop signal comes, the loop and everything
it started end, wherever they moved; the guard's exit status is the loop's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
    pytest.mark.process,  # lifelines, stop signals and moved descendants: the OS's, run once
]

#: A loop stand-in: starts a child and a grandchild that leaves the session (as an agent's
#: server might), records both, says so, and waits. ``$1``: "ignore" to ignore SIGTERM;
#: "exit" to exit 12 (leaving both behind) once a file ``go`` appears.
LOOP = r"""
[ "$1" = ignore ] && trap '' TERM
setsid sh -c 'echo $$ > escaped.pid; exec sleep 300' &
sh -c 'echo $$ > child.pid; exec sleep 300' &
while [ ! -s escaped.pid ] || [ ! -s child.pid ]; do :; done
echo ready > ready
if [ "$1" = exit ]; then until [ -e go ]; do sleep 0.01; done; exit 12; fi
wait
"""


def start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat.rpartition(b")")[2].split()
    return None if fields[0] in (b"Z", b"X") else int(fields[19])


def wait_for_file(path: Path, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


class Started:
    def __init__(self, tmp_path: Path, mode: str = "", grace_s: float = 30.0) -> None:
        self.dir = tmp_path
        (tmp_path / "loop.sh").write_text(LOOP)
        with (tmp_path / "guard.err").open("wb") as err:
            self.guard = self._start(tmp_path, mode, grace_s, err)
        wait_for_file(tmp_path / "ready")
        self.pids = {
            name: int((tmp_path / f"{name}.pid").read_text()) for name in ("escaped", "child")
        }
        self.starts = {name: start_time(pid) for name, pid in self.pids.items()}
        assert all(self.starts.values())

    @staticmethod
    def _start(tmp_path: Path, mode: str, grace_s: float, err: object) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "loopctl_fleet.guard",
                "--grace",
                str(grace_s),
                "--",
                "sh",
                "loop.sh",
                mode,
            ],
            cwd=tmp_path,
            stdin=subprocess.PIPE,
            stderr=err,  # type: ignore[arg-type]
            start_new_session=True,
        )

    def finish(self) -> tuple[int, str]:
        code = self.guard.wait(timeout=120)
        if self.guard.stdin and not self.guard.stdin.closed:
            self.guard.stdin.close()
        return code, (self.dir / "guard.err").read_text()

    def left_running(self) -> list[str]:
        return [name for name, pid in self.pids.items() if start_time(pid) == self.starts[name]]


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Started]:
    s = Started(tmp_path)
    yield s
    for pid in s.pids.values():
        if start_time(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_closed_lifeline_ends_the_loop_and_all_it_started(started: Started) -> None:
    assert started.guard.stdin is not None
    started.guard.stdin.close()  # the worker died: the kernel closes its end
    code, err = started.finish()
    assert code == 128 + signal.SIGTERM
    assert "the worker is gone (its lifeline closed): ending the loop" in err
    assert started.left_running() == []


def test_sigterm_ends_the_loop_and_all_it_started(started: Started) -> None:
    started.guard.send_signal(signal.SIGTERM)  # the worker cancels the task
    code, err = started.finish()
    assert code == 128 + signal.SIGTERM
    assert "SIGTERM: ending the loop" in err
    assert started.left_running() == []


def test_a_loop_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    started = Started(tmp_path, "ignore", grace_s=0.5)
    started.guard.send_signal(signal.SIGTERM)
    code, err = started.finish()
    assert code == 128 + signal.SIGKILL
    assert "did not end within 0.5 s: killing it" in err
    assert started.left_running() == []


def test_a_loop_that_ends_by_itself_gives_its_exit_status_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    started = Started(tmp_path, "exit")
    (tmp_path / "go").touch()
    code, err = started.finish()
    assert code == 12
    assert err == ""
    assert started.left_running() == []  # what the loop left behind went with the guard


def test_the_guard_needs_a_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loopctl_fleet.guard", "--grace", "1"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "give the loop's command after --" in done.stderr
