"""The watcher of :func:`loopctl.testing.lifeline`, run as a script of its own: it
imports nothing but the standard library, so it starts fast and knows nothing of loopctl.

It reads what to end from stdin, one JSON object a line, until end-of-file: the test process
that started it holds the only write end of that pipe, so end-of-file comes when that process
is gone, whatever ended it (a SIGKILL included). Then it ends what is still registered, the
latest registration first: its commands are run (each within its ``timeout_s``), its processes
that still run (the same process: pid and start time) get SIGTERM and, ``kill_after_s`` later,
SIGKILL, and its paths are removed.

A line is ``{"key": K, "run": [[argv…]…], "end": [pid…], "remove": [path…], "timeout_s": T,
"kill_after_s": S}`` (registered) or ``{"forget": K}`` (done by the test itself).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from typing import Any


def start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, Linux's /proc), None when it does not run
    or the system does not say (a zombie counts as not running)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            stat = file.read()
    except OSError:
        return None
    fields = stat.rpartition(b")")[2].split()
    return None if fields[0] in (b"Z", b"X") else fields[19].decode()


def _same(pid: int, started: str | None) -> bool:
    if started is None:  # not known when it was registered: by its pid alone
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True
    return start_time(pid) == started


def _end(pids: list[tuple[int, str | None]], kill_after_s: float) -> None:
    for pid, _ in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + kill_after_s
    while any(_same(pid, started) for pid, started in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid, started in pids:
        if _same(pid, started):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _run(argv: list[str], timeout_s: float) -> None:
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )


def end_all(entries: dict[int, dict[str, Any]]) -> None:
    for entry in reversed(list(entries.values())):
        for argv in entry.get("run", []):
            _run([str(arg) for arg in argv], float(entry.get("timeout_s", 60)))
        _end(entry.get("pids", []), float(entry.get("kill_after_s", 5)))
        for path in entry.get("remove", []):
            shutil.rmtree(path, ignore_errors=True)


def main() -> int:
    for name in ("SIGINT", "SIGHUP"):  # the test's terminal is not ours
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    entries: dict[int, dict[str, Any]] = {}
    for line in sys.stdin.buffer:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "forget" in message:
            entries.pop(int(message["forget"]), None)
            continue
        message["pids"] = [(int(pid), start_time(int(pid))) for pid in message.get("end", [])]
        entries[int(message["key"])] = message
    end_all(entries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
