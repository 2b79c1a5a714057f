"""The failure memory's local spool: what a loop could not write to its store, kept until it can.

When a write cannot reach the store (a Postgres host that went away, a SQLite file locked or
read-only for longer than the deadline), :class:`~loopctl_context_errors.memory.FailureMemory`
appends the record here instead of losing it, and writes the records in their order at its next
successful contact with that store, in the same run or a later one (any loop of the user that
uses the same store).

One file per store, in the user's data directory (not a run's state directory, so that a later
run of any project drains it): ``$XDG_DATA_HOME/loopctl/spool/<16 hex digits>.jsonl``, the digits
a hash of the store's location as shown (which holds no password), mode 0600 in a 0700 directory.
Each record is one line, appended with one ``write`` and fsync'd by :class:`loopctl.JsonlAppender`
(a kill can tear at most the line being written, which the next append ends and every read
skips), and redacted by it as every file loopctl writes is. Appends and drains of all processes
take an exclusive ``flock`` on ``<file>.lock``; a drain rewrites what it could not write
atomically, or removes the file once it is all written. Writing a record twice changes nothing
(a failure brings its run's row to the count the run had seen, a fix sets the same fields), so a
drain that dies between the store's commit and the spool's rewrite loses and doubles nothing.

The file is capped at :data:`MAX_BYTES`: past it, new records are not kept (the caller says so,
once a run); the counts of a failure that repeats come back with its next record all the same.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from loopctl import JsonlAppender, atomic_write_text, read_jsonl
from loopctl_context_errors.store import StoreError

#: Version of a spool record's layout (a record of another version is left alone).
VERSION = 1
#: The most a spool file grows to (bytes); records past it are dropped, and counted.
MAX_BYTES = 8 * 1024 * 1024
DIRECTORY = "spool"


def spool_path(data_dir: Path, display: str) -> Path:
    """The spool of the store shown as ``display``, under ``data_dir`` (``…/share/loopctl``)."""
    digest = hashlib.sha1(display.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return data_dir / DIRECTORY / f"{digest}.jsonl"


@attrs.define
class SpoolTally:
    """What a :class:`~loopctl_context_errors.memory.FailureMemory` did with its spool (one
    memory serves one run)."""

    #: Records kept in the spool because the store could not take them.
    kept: int = 0
    #: Records of the spool (this run's or earlier runs') written to the store.
    written: int = 0
    #: Records lost: the spool was full or could not be written, or a record was damaged.
    lost: int = 0
    #: Whether a record was lost because the spool was full.
    full: bool = False
    #: Why the last record was kept (None: none was).
    because: StoreError | None = None


@attrs.define
class Drained:
    """What one drain wrote, and whether the spool is empty after it."""

    written: int = 0
    #: Records that could never be written (a damaged line, an unknown kind): dropped.
    dropped: int = 0
    empty: bool = True


class Spool:
    """The spool file at ``path`` (nothing is made until a record is kept)."""

    def __init__(self, path: Path, *, max_bytes: int | None = None) -> None:
        self.path = Path(path)
        self.max_bytes = MAX_BYTES if max_bytes is None else max_bytes

    def pending(self) -> bool:
        """Whether records are waiting (a ``stat``: cheap enough before every write)."""
        try:
            return self.path.stat().st_size > 0
        except OSError:
            return False

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(f"{self.path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock

    def append(self, record: Mapping[str, Any]) -> bool:
        """Keep ``record`` (fsync'd before this returns); False when the spool is full. Raises
        OSError when it cannot be written."""
        with self._locked():
            try:
                size = self.path.stat().st_size
            except FileNotFoundError:
                size = 0
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            if size >= self.max_bytes:
                return False
            with JsonlAppender(self.path, fsync=True) as appender:
                appender.append({"v": VERSION, "kept_at": round(time.time(), 3), **record})
            return True

    def records(self) -> list[dict[str, Any]]:
        """The records kept, oldest first (a torn line is skipped)."""
        return [r for r in read_jsonl(self.path).records if r.get("v") == VERSION]

    def _others(self) -> list[dict[str, Any]]:
        """Records of another layout (a newer loopctl's): kept as they are."""
        return [r for r in read_jsonl(self.path).records if r.get("v") != VERSION]

    def drain(self, write: Callable[[dict[str, Any]], None], *, until: float) -> Drained:
        """``write`` each record, oldest first, until one raises or :func:`time.monotonic`
        passes ``until``; then keep only those not written (the file goes once it is empty).
        A record ``write`` raises ``KeyError``, ``TypeError`` or ``ValueError`` on is damaged:
        it is dropped. Another exception stops the drain and is raised after the rewrite."""
        done = Drained()
        with self._locked():
            records, others = self.records(), self._others()
            left = list(records)
            try:
                while left and (done.written == 0 or time.monotonic() < until):
                    try:
                        write(left[0])
                        done.written += 1
                    except (KeyError, TypeError, ValueError):
                        done.dropped += 1
                    left.pop(0)
            finally:
                self._keep_only(others + left, changed=len(left) != len(records))
                done.empty = not left
        return done

    def _keep_only(self, records: list[dict[str, Any]], *, changed: bool) -> None:
        if not records:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
        elif changed:
            lines = "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records)
            atomic_write_text(self.path, lines)  # redacted again, as read: no change
            os.chmod(self.path, 0o600)


__all__ = ["DIRECTORY", "MAX_BYTES", "VERSION", "Drained", "Spool", "SpoolTally", "spool_path"]
