"""JSONL files (``events.jsonl``, ``iterations.jsonl``): an appender that a crash can tear at
most one line of, and readers that skip and report torn lines."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import attrs

from loopctl.redaction import redact
from loopctl.state.encoding import json_one_line
from loopctl.state.faults import after_durable_write
from loopctl.state.files import write_all

# --- JSONL ---------------------------------------------------------------------------------------


def jsonl_text(obj: Mapping[str, Any]) -> str:
    """``obj`` as the text of one JSONL line, before redaction."""
    return json_one_line(obj, separators=(",", ":"), default=str)


def _jsonl_line(obj: Mapping[str, Any]) -> bytes:
    return (redact(jsonl_text(obj)) + "\n").encode("utf-8")


class JsonlAppender:
    """Append-only JSONL writer: each record is one ``os.write`` of a whole line to a file kept
    open with ``O_APPEND``, so a crash can tear at most the line being written, and the next
    append (also after a restart) first ends a torn line so its own line starts clean. Secrets
    in a record are redacted (:func:`loopctl.redact`) before it is written.

    A write that fails part-way (a full disk: ``ENOSPC``) is undone: the file is cut back to
    its size before the append, then the error is raised. Readers never see half of it."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._check_tail = True
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)

    def append(self, obj: Mapping[str, Any], *, clean_text: str | None = None) -> int:
        """Append ``obj`` as one line; returns the file's size after it. ``clean_text``:
        ``obj``'s :func:`jsonl_text`, which the caller found nothing to redact in."""
        # encoding errors raise here, before the file is touched
        data = _jsonl_line(obj) if clean_text is None else (clean_text + "\n").encode("utf-8")
        with self._lock:
            fd = self._fd
            if fd is None:
                raise ValueError(f"{self.path}: append to a closed JsonlAppender")
            if self._check_tail and _ends_torn(fd):
                data = b"\n" + data
            self._check_tail = True  # until this write is known to be whole
            size = os.fstat(fd).st_size
            try:
                write_all(fd, data)
            except OSError as exc:
                with contextlib.suppress(OSError):  # shrinking a file needs no space
                    os.ftruncate(fd, size)
                if exc.errno is not None and exc.filename is None:
                    exc.filename = str(self.path)  # say which file (a failed write names none)
                raise
            self._check_tail = False
            if self._fsync:
                os.fsync(fd)
            after_durable_write(self.path)
            return size + len(data)

    def sync(self) -> None:
        """Flush what was appended to disk (``os.fsync``); a no-op once closed."""
        with self._lock:
            if self._fd is not None:
                os.fsync(self._fd)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _ends_torn(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


@attrs.define
class JsonlRead:
    """What :func:`read_jsonl` could use, and one message per line it had to skip."""

    records: list[dict[str, Any]] = attrs.Factory(list)
    problems: list[str] = attrs.Factory(list)


_MAX_PROBLEMS = 50


def _parse_jsonl_line(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """The record on a line, or None and why not ("" for a blank line)."""
    raw = raw.strip()
    if not raw:
        return None, ""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "not valid UTF-8 (torn write?)"
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not valid JSON (torn write?)"
    if not isinstance(value, dict):
        return None, "not a JSON object"
    return value, ""


def read_jsonl(path: Path) -> JsonlRead:
    """Every valid record of a JSONL file; torn or malformed lines are skipped and reported as
    ``"events.jsonl line 17: not valid JSON (torn write?)"``. A missing file reads as empty."""
    path = Path(path)
    result = JsonlRead()
    unlisted = 0
    try:
        with open(path, "rb") as stream:
            for number, raw in enumerate(stream, 1):
                record, problem = _parse_jsonl_line(raw)
                if record is not None:
                    result.records.append(record)
                elif problem and len(result.problems) < _MAX_PROBLEMS:
                    result.problems.append(f"{path.name} line {number}: {problem}")
                elif problem:
                    unlisted += 1
    except FileNotFoundError:
        return result
    except OSError as exc:
        result.problems.append(f"{path.name}: cannot read it ({exc.strerror or exc})")
    if unlisted:
        result.problems.append(f"{path.name}: {unlisted} more bad lines not listed")
    return result


def tail_jsonl(
    path: Path,
    n: int,
    *,
    chunk_size: int = 65536,
    problems: list[str] | None = None,
    check: Callable[[dict[str, Any]], object] | None = None,
    end: int | None = None,
) -> list[dict[str, Any]]:
    """The last ``n`` valid records, oldest first, reading backwards from the end so a huge file
    costs only what is needed, and a long line only its own length (each chunk is read and
    searched once). Bad lines are skipped; a missing file gives ``[]``.

    ``check`` is called with each record and may raise ``ValueError`` to say it is not a real
    one (an iteration record that does not structure, say): it is then skipped like a bad line.
    Pass a list as ``problems`` to be told about the lines skipped among those read, as
    ``"iterations.jsonl, the last line: not valid JSON (torn write?)"`` (the tail does not know
    line numbers; it counts from the end). ``end``: read the file as if it ended at this
    offset (the records before it)."""
    if n <= 0:
        return []
    found: list[dict[str, Any]] = []
    skipped: list[str] = []
    from_end = 0

    def take(raw: bytes) -> bool:
        """Use one line; True once ``n`` records are found."""
        nonlocal from_end
        from_end += 1
        record, problem = _parse_jsonl_line(raw)
        if record is not None and check is not None:
            try:
                check(record)
            except ValueError as exc:
                record, problem = None, str(exc)
        if record is not None:
            found.append(record)
        elif problem:
            where = "the last line" if from_end == 1 else f"line {from_end} from the end"
            skipped.append(f"{Path(path).name}, {where}: {problem}")
        return len(found) >= n

    try:
        with open(path, "rb") as stream:
            position = stream.seek(0, os.SEEK_END)
            if end is not None:
                position = max(0, min(position, end))
            if position > 0:
                stream.seek(position - 1)
                if stream.read(1) == b"\n":
                    position -= 1  # the final newline ends the last line; it starts none
            pieces: list[bytes] = []  # the earliest line seen so far, its pieces last first
            done = False
            while position > 0 and not done:
                size = min(chunk_size, position)
                position -= size
                stream.seek(position)
                chunk = stream.read(size)
                end = len(chunk)
                while not done:
                    newline = chunk.rfind(b"\n", 0, end)
                    if newline < 0:
                        pieces.append(chunk[:end])
                        break
                    pieces.append(chunk[newline + 1 : end])
                    done = take(b"".join(reversed(pieces)))
                    pieces.clear()
                    end = newline
            if position == 0 and not done:
                take(b"".join(reversed(pieces)))
    except FileNotFoundError:
        pass
    except OSError as exc:
        skipped.append(f"{Path(path).name}: cannot read it ({exc.strerror or exc})")
    if problems is not None:
        problems.extend(reversed(skipped))  # in file order, like read_jsonl's
    found.reverse()
    return found
