"""What a test starts that must end with the test process, whatever ends it.

A fixture that starts a server that detaches from it (``pg_ctl start``, a daemon, a dev server
another library spawns) stops it at teardown. A test process that is killed — SIGKILL, an OOM
kill, a CI job cancelled — runs no teardown, and the server lives on under init.
:func:`lifeline` gives the process a watcher that does that teardown then::

    from loopctl.testing import lifeline

    key = lifeline().register(run=[["pg_ctl", "-D", data, "-m", "immediate", "stop"]],
                              end=[postmaster_pid], remove=[cluster_dir])
    ...  # the server is used; at the end of the fixture, it is stopped as usual, then
    lifeline().forget(key)

The watcher is a small process in a session of its own (a Ctrl-C to the tests does not reach
it) holding the read end of a pipe whose write end only this process holds (it is not passed to
any child: a forked child would share it). When this process is gone, the kernel closes that
end, and the watcher, reading end-of-file, ends whatever is still registered: the latest
registration first, its commands run, its processes that still run (the same ones: pid and
start time, on Linux) sent SIGTERM, then SIGKILL after ``kill_after_s``, its paths removed.
A normal exit of the test process does the same for what its fixtures did not forget.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO

#: The watcher's script (standard library only).
WATCHER = Path(__file__).with_name("_watcher.py")


class Lifeline:
    """This process's watcher (use :func:`lifeline`: one per process)."""

    def __init__(self) -> None:
        self._owner = os.getpid()
        self._lock = threading.Lock()
        self._next = 0
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(WATCHER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            start_new_session=True,
        )
        assert self._process.stdin is not None
        self._pipe: IO[bytes] = self._process.stdin

    @property
    def pid(self) -> int:
        """The watcher's pid."""
        return self._process.pid

    def register(
        self,
        *,
        run: Iterable[Sequence[str | os.PathLike[str]]] = (),
        end: Iterable[int] = (),
        remove: Iterable[str | os.PathLike[str]] = (),
        timeout_s: float = 60.0,
        kill_after_s: float = 5.0,
    ) -> int:
        """Should this process end before :meth:`forget` is called with the key returned: run
        the commands ``run`` (each for at most ``timeout_s``), end the processes ``end`` (SIGTERM,
        then SIGKILL after ``kill_after_s``), remove the directories or files ``remove``."""
        with self._lock:
            self._next += 1
            key = self._next
            self._send(
                {
                    "key": key,
                    "run": [[os.fspath(arg) for arg in argv] for argv in run],
                    "end": [int(pid) for pid in end],
                    "remove": [os.fspath(path) for path in remove],
                    "timeout_s": timeout_s,
                    "kill_after_s": kill_after_s,
                }
            )
        return key

    def forget(self, key: int) -> None:
        """What was registered as ``key`` is done (the fixture ended it)."""
        with self._lock:
            self._send({"forget": key})

    def _send(self, message: dict[str, object]) -> None:
        self._pipe.write(json.dumps(message).encode() + b"\n")
        self._pipe.flush()

    def close(self, timeout_s: float = 120.0) -> None:
        """End the watcher, which ends what is still registered first (at this process's exit:
        what a fixture did not forget is ended before the test run is over)."""
        if os.getpid() != self._owner:  # a forked child: the watcher is its parent's
            return
        with contextlib.suppress(OSError):
            self._pipe.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._process.wait(timeout=timeout_s)


_LIFELINE: Lifeline | None = None
_LIFELINE_LOCK = threading.Lock()


def lifeline() -> Lifeline:
    """This process's lifeline, started on first use."""
    global _LIFELINE
    with _LIFELINE_LOCK:
        if _LIFELINE is None or _LIFELINE._owner != os.getpid():
            _LIFELINE = Lifeline()
            atexit.register(_LIFELINE.close)
        return _LIFELINE


def running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not reaped yet, does not): what a test
    polls to see that the lifeline ended it (Linux)."""
    from loopctl.testing._watcher import start_time

    return start_time(pid) is not None


__all__ = ["WATCHER", "Lifeline", "lifeline", "running"]
