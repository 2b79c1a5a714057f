"""A test-only seam: SIGKILL this process right after its N-th durable write.

Not a feature, and not for users: the crash tests use it to kill a loop at *every* point where
it has just made something durable, instead of hoping a random kill lands there.

- ``_LOOPCTL_KILL_AFTER_WRITE=N`` (N >= 1): right after the N-th durable write of this process,
  the process sends itself SIGKILL. ``N@NAME``: right after its N-th durable write of a file
  named NAME (``1@events.jsonl``): the writes to one file come in one order, while the writes
  of the background writer interleave with the loop's differently from run to run.
- ``_LOOPCTL_WRITE_LOG=FILE``: every durable write appends ``N PATH`` (its number and the file
  written) to FILE, so a test can count a run's writes and name the one a kill followed.

A durable write is an atomic rewrite (:func:`loopctl.state.files.atomic_write_bytes`, so also
``loop-state.md``, ``progress.md``, the reports) or a journal append
(:meth:`loopctl.state.journal.JsonlAppender.append`: ``events.jsonl``, ``iterations.jsonl``).

Both variables are read, and removed from ``os.environ``, at the process's first durable write,
so the processes it starts afterwards (agents, test commands) never inherit them. Their names
start with ``_``: they are not ``LOOPCTL_*`` settings, and a run never records them.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

KILL_AFTER_WRITE_ENV = "_LOOPCTL_KILL_AFTER_WRITE"
WRITE_LOG_ENV = "_LOOPCTL_WRITE_LOG"

_lock = threading.Lock()
_armed: tuple[int | None, str | None, str | None] | None = None  # (kill after, of name, log)
_count = 0
_counts: dict[str, int] = {}


def _arm() -> tuple[int | None, str | None, str | None]:
    kill, _, name = os.environ.pop(KILL_AFTER_WRITE_ENV, "").strip().partition("@")
    log = os.environ.pop(WRITE_LOG_ENV, "") or None
    return (int(kill) if kill.isdigit() else None), (name or None), log


def after_durable_write(path: Path) -> None:
    """Count a durable write of ``path``; log it, or kill the process, as the seam says."""
    global _armed, _count
    with _lock:
        if _armed is None:
            _armed = _arm()
        kill_after, of_name, log = _armed
        if kill_after is None and log is None:
            return
        _count += 1
        _counts[path.name] = _counts.get(path.name, 0) + 1
        if log is not None:
            with open(log, "a", encoding="utf-8") as stream:
                stream.write(f"{_count} {path}\n")
        if (_count if of_name is None else _counts.get(of_name)) == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
