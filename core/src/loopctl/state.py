"""The state directory (``.loopctl/`` by default): crash-safe writers and tolerant readers.

A loop can be killed at any instant, so every file here is written either atomically (temp file,
fsync, rename) or append-only one whole line at a time; readers skip and report what a crash may
have torn instead of failing. The file names are fixed: users of the bash predecessor script
their tools around them.
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import errno
import fcntl
import json
import math
import os
import re
import secrets
import shutil
import socket
import threading
import time
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath
from types import TracebackType
from typing import Any

import attrs

DEFAULT_STATE_DIR = ".loopctl"
LOOP_STATE_FILE = "loop-state.md"
PROGRESS_FILE = "progress.md"
ERROR_SUMMARY_FILE = "error-summary.json"
EVENTS_FILE = "events.jsonl"
ITERATIONS_FILE = "iterations.jsonl"
CONTEXT_SUMMARY_FILE = "context-summary.md"
LOCK_FILE = "loopctl.lock"
REPORT_MD_FILE = "report.md"
REPORT_JSON_FILE = "report.json"
LOGS_DIR = "logs"

#: What :func:`archive_restart` copies into ``restart-N/`` (``logs/`` is moved, not copied).
ARCHIVED_FILES: tuple[str, ...] = (
    LOOP_STATE_FILE,
    PROGRESS_FILE,
    ERROR_SUMMARY_FILE,
    CONTEXT_SUMMARY_FILE,
)


class StateError(Exception):
    """A state file is unusable; the message names the file, what is wrong and how to fix it."""


def log_name(iteration: int, kind: str) -> str:
    """The name of one of an iteration's files in ``logs/``: ``log_name(7, "tests.log")`` is
    ``iteration-0007.tests.log``. Plugins name theirs the same way, so they sort with the
    iteration's own (``prompt.md``, ``agent.jsonl``, ``tests.log``)."""
    return f"iteration-{iteration:04d}.{kind}"


# --- JSON that stays on one line -----------------------------------------------------------------

_NON_ASCII_RUN = re.compile("[^\x00-\x7e]+")


def _escape_char(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # JSON spells astral characters as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _escape_run(match: re.Match[str]) -> str:
    return "".join(
        _escape_char(char)
        if not char.isprintable() and unicodedata.category(char) != "Zs"
        else char
        for char in match.group()
    )


def json_one_line(value: Any, **dumps_kwargs: Any) -> str:
    """``json.dumps(ensure_ascii=False)`` that also escapes what it leaves raw but would break
    a line-based reader or a UTF-8 encoder: U+2028/U+2029/U+0085, DEL, other non-printable
    characters and lone surrogates. Non-ASCII characters only occur inside JSON strings, so
    escaping them there keeps the JSON valid and equal in value.

    Limitation of JSON itself: a high surrogate directly followed by a low surrogate reads back
    as the one astral character the pair encodes.
    """
    return _NON_ASCII_RUN.sub(_escape_run, json.dumps(value, ensure_ascii=False, **dumps_kwargs))


def to_jsonable(value: Any) -> Any:
    """Plain JSON data for attrs instances (the :mod:`loopctl.model` classes), enums, paths,
    mappings and sequences, ready to write; read it back with cattrs."""
    if attrs.has(type(value)):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


# --- atomic writes -------------------------------------------------------------------------------

_TEMP_NAME = re.compile(r"\A\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp\Z", re.DOTALL)


def _create_temp(path: Path) -> tuple[Path, int]:
    """A new temp file beside ``path``; named with our pid so a crash's leftovers can be told
    apart (see :func:`remove_stale_temp_files`). Created with 0o666 so the umask applies."""
    for _ in range(100):
        temp = path.with_name(f".{path.name[:100]}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        try:
            return temp, os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "could not create a unique temp file", str(path))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    """Make a rename durable. Best effort: some file systems cannot fsync a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    temp, fd = _create_temp(path)
    try:
        try:
            with contextlib.suppress(OSError):  # keep the mode of the file we replace
                os.fchmod(fd, os.stat(path).st_mode & 0o7777)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    _fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so that a crash leaves the old or the new content,
    never a mix. Characters UTF-8 cannot hold (lone surrogates) are written as ``\\udcXX``."""
    _atomic_write_bytes(Path(path), text.encode("utf-8", "backslashreplace"))


def json_text(data: Any) -> str:
    """``data`` as the state files write JSON: indented, UTF-8 kept, a trailing newline."""
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def atomic_write_json(path: Path, data: Any) -> None:
    """:func:`atomic_write_text` of :func:`json_text`."""
    atomic_write_text(path, json_text(data))


def remove_stale_temp_files(directory: Path) -> list[Path]:
    """Delete temp files that a killed writer left in ``directory`` (its pid is gone).

    Call it once the state lock is held. Returns what was removed."""
    removed: list[Path] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for entry in entries:
        match = _TEMP_NAME.match(entry.name)
        if match is None:
            continue
        pid = int(match.group("pid"))
        if pid == os.getpid() or _pid_alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError, OSError):
        return False
    return True


# --- JSONL ---------------------------------------------------------------------------------------


def _jsonl_line(obj: Mapping[str, Any]) -> bytes:
    text = json_one_line(obj, separators=(",", ":"), default=str)
    return (text + "\n").encode("utf-8")


class JsonlAppender:
    """Append-only JSONL writer: each record is one ``os.write`` of a whole line to a file kept
    open with ``O_APPEND``, so a crash can tear at most the line being written, and the next
    append (also after a restart) first ends a torn line so its own line starts clean."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self._check_tail = True
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)

    def append(self, obj: Mapping[str, Any]) -> None:
        data = _jsonl_line(obj)  # encoding errors raise here, before the file is touched
        with self._lock:
            fd = self._fd
            if fd is None:
                raise ValueError(f"{self.path}: append to a closed JsonlAppender")
            if self._check_tail and _ends_torn(fd):
                data = b"\n" + data
            self._check_tail = True  # until this write is known to be whole
            _write_all(fd, data)
            self._check_tail = False
            if self._fsync:
                os.fsync(fd)

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


def tail_jsonl(path: Path, n: int, *, chunk_size: int = 65536) -> list[dict[str, Any]]:
    """The last ``n`` valid records, oldest first, reading backwards from the end so a huge file
    costs only what is needed. Bad lines are skipped; a missing file gives ``[]``."""
    if n <= 0:
        return []
    found: list[dict[str, Any]] = []
    try:
        with open(path, "rb") as stream:
            position = stream.seek(0, os.SEEK_END)
            pending = b""  # the start of the earliest line seen so far, maybe incomplete
            while position > 0 and len(found) < n:
                size = min(chunk_size, position)
                position -= size
                stream.seek(position)
                pending = stream.read(size) + pending
                first, *complete = pending.split(b"\n")
                pending = first
                for raw in reversed(complete):
                    record, _ = _parse_jsonl_line(raw)
                    if record is not None:
                        found.append(record)
                        if len(found) == n:
                            break
            if position == 0 and len(found) < n:
                record, _ = _parse_jsonl_line(pending)
                if record is not None:
                    found.append(record)
    except OSError:
        pass
    found.reverse()
    return found


# --- loop-state.md -------------------------------------------------------------------------------


@attrs.define
class LoopState:
    """The front matter of ``loop-state.md``: enough to resume or report on a loop."""

    #: The working goal (plugins may append notes).
    goal: str
    #: The user's goal exactly as written; "" in a legacy file until a plugin recovers it.
    original_goal: str
    #: The last iteration started.
    iteration: int = 0
    #: running | complete | max_iterations | stuck | interrupted | …
    status: str = "running"
    reason: str = ""
    #: How many restarts so far.
    generation: int = 0
    session_id: str | None = None
    session_mode: str = "fresh"
    agent: str = ""
    test_cmd: str = ""
    started_at: float = 0.0
    updated_at: float = 0.0
    start_commit: str | None = None
    workdir: str = ""
    pid: int | None = None
    loopctl_version: str = ""
    max_iterations: int = 0
    #: Plugins' small values (strings, numbers, bools, lists), written as one ``extra:`` object.
    extra: dict[str, Any] = attrs.Factory(dict)


#: How each front-matter key of :class:`LoopState` is read back.
_FIELD_KINDS: dict[str, str] = {
    "goal": "str",
    "original_goal": "str",
    "iteration": "int",
    "status": "str",
    "reason": "str",
    "generation": "int",
    "session_id": "str?",
    "session_mode": "str",
    "agent": "str",
    "test_cmd": "str",
    "started_at": "time",
    "updated_at": "time",
    "start_commit": "str?",
    "workdir": "str",
    "pid": "int?",
    "loopctl_version": "str",
    "max_iterations": "int",
    "extra": "dict",
}

_FIX = "edit that line, or move the file away to start a fresh loop"


def _default_body(state: LoopState) -> str:
    of_max = f" of {state.max_iterations}" if state.max_iterations else ""
    lines = [
        "# loopctl loop state",
        "",
        f"- status: {state.status}" + (f" ({state.reason})" if state.reason else ""),
        f"- iteration: {state.iteration}{of_max}, restarts: {state.generation}",
    ]
    if state.agent:
        lines.append(f"- agent: {state.agent}")
    if state.test_cmd:
        lines.append(f"- tests: {state.test_cmd}")
    lines += ["", "## Goal", "", state.goal, ""]
    if state.original_goal and state.original_goal != state.goal:
        lines += ["## Original goal", "", state.original_goal, ""]
    return "\n".join(lines)


def render_loop_state(state: LoopState, body: str = "") -> str:
    """The text of ``loop-state.md``: ``---``, one ``key: <JSON>`` line per field, ``---``, body.

    JSON scalars are valid YAML, so this is ordinary YAML front matter. With no ``body`` a short
    human-readable summary is written instead."""
    lines = ["---"]
    for field in attrs.fields(LoopState):
        value = getattr(state, field.name)
        text = json_one_line(value, default=str)
        lines.append(f"{field.name}: {text}")
    lines.append("---")
    return "\n".join(lines) + "\n" + (body or _default_body(state))


def write_loop_state(path: Path, state: LoopState, body: str = "") -> None:
    """Write ``loop-state.md`` atomically."""
    atomic_write_text(path, render_loop_state(state, body))


@attrs.frozen
class _Entry:
    key: str
    value: Any
    raw: str
    quoted: bool
    line: int


_KEY_LINE = re.compile(r"\A([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(.*)\Z", re.DOTALL)
_LENIENT_JSON = json.JSONDecoder(strict=False)  # the bash tool may have left raw tabs in quotes


def _short(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "…")


def _is_fence(line: str) -> bool:
    return line.rstrip(" \t\r") == "---"


def _unquote_single(raw: str) -> tuple[str, str] | None:
    """A YAML single-quoted scalar (``''`` is a quote) and the text after it, or None."""
    out: list[str] = []
    index = 1
    while index < len(raw):
        char = raw[index]
        if char == "'":
            if raw[index + 1 : index + 2] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), raw[index + 1 :]
        out.append(char)
        index += 1
    return None


def _decode_value(raw: str, key: str, line: int, source: str) -> tuple[Any, bool]:
    """A front-matter value and whether it was quoted. JSON first (what loopctl writes, and
    the bash tool's double-quoted strings); unquoted text that is not JSON is a plain string."""
    if raw in ("", "~"):
        return None, False
    if raw[0] in "\"'":
        if raw[0] == '"':
            try:
                value, end = _LENIENT_JSON.raw_decode(raw)
            except ValueError as exc:
                raise StateError(
                    f"{source}: line {line}: the value of `{key}` is a malformed quoted string "
                    f"({exc.msg if isinstance(exc, json.JSONDecodeError) else exc}); {_FIX}"
                ) from None
            rest = raw[end:]
        else:
            unquoted = _unquote_single(raw)
            if unquoted is None:
                raise StateError(
                    f"{source}: line {line}: the value of `{key}` has no closing quote; {_FIX}"
                )
            value, rest = unquoted
        rest = rest.strip(" \t")
        if rest and not rest.startswith("#"):
            raise StateError(
                f"{source}: line {line}: unexpected text {_short(rest)} after the quoted value "
                f"of `{key}`; {_FIX}"
            )
        return value, True
    try:
        return json.loads(raw), False
    except (ValueError, RecursionError):
        return raw, False


def _front_matter_entries(text: str, source: str) -> tuple[list[_Entry], str]:
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not _is_fence(lines[0]):
        raise StateError(
            f"{source}: line 1: expected '---' to open the front matter, found "
            f"{_short(lines[0])}; this is not a loop-state file: move it away or use --state-dir"
        )
    entries: list[_Entry] = []
    for index in range(1, len(lines)):
        line = lines[index].rstrip("\r")
        number = index + 1
        if _is_fence(line):
            return entries, "\n".join(lines[index + 1 :])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            raise StateError(
                f"{source}: line {number}: indented line {_short(line)}: multi-line YAML values "
                f"are not supported, write the value as one JSON string; {_FIX}"
            )
        match = _KEY_LINE.match(line)
        if match is None:
            raise StateError(
                f"{source}: line {number}: expected `key: value`, found {_short(line)}; {_FIX}"
            )
        key, raw = match.group(1), match.group(2).strip(" \t")
        value, quoted = _decode_value(raw, key, number, source)
        entries.append(_Entry(key, value, raw, quoted, number))
    raise StateError(
        f"{source}: the front matter opened on line 1 has no closing '---' line (the file may "
        f"be truncated); add the '---' line, or move the file away to start a fresh loop"
    )


def parse_front_matter(text: str, *, source: str = "front matter") -> tuple[dict[str, Any], str]:
    """The ``key: value`` pairs between the opening and closing ``---`` lines, and the body after.

    Values are JSON, or YAML-style quoted strings, or plain unquoted text. Raises
    :class:`StateError` (naming ``source`` and the line) and nothing else on malformed text."""
    entries, body = _front_matter_entries(text, source)
    return {entry.key: entry.value for entry in entries}, body


def _type_error(entry: _Entry, source: str, expected: str) -> StateError:
    return StateError(
        f"{source}: line {entry.line}: `{entry.key}` should be {expected}, found "
        f"{_short(entry.raw)}; fix the value or delete the line to use the default"
    )


def _as_int(entry: _Entry, source: str) -> int:
    value = entry.value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value.strip())
    raise _type_error(entry, source, "a whole number")


_ISO_TIME = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d+))?)?)?"
    r"[ \t]*(?:([Zz])|([+-])(\d\d):?(\d\d))?"
)


def _parse_iso_time(text: str) -> float | None:
    """Epoch seconds of an ISO 8601 date or time (any fraction digits, as Python 3.10's
    ``fromisoformat`` cannot); a time without an offset is local time."""
    match = _ISO_TIME.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, utc, sign, off_h, off_m = match.groups()
    try:
        zone: datetime.tzinfo | None = None
        if utc:
            zone = datetime.timezone.utc
        elif sign:
            offset = datetime.timedelta(hours=int(off_h), minutes=int(off_m))
            zone = datetime.timezone(-offset if sign == "-" else offset)
        moment = datetime.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0")[:6].ljust(6, "0")),
            tzinfo=zone,
        )
        return moment.timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _as_time(entry: _Entry, source: str) -> float:
    """Epoch seconds; the bash tool may have written ISO 8601 dates."""
    value = entry.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):
            return float(value)
    if isinstance(value, str):
        text = value.strip()
        with contextlib.suppress(ValueError, OverflowError):
            return float(text)
        parsed = _parse_iso_time(text)
        if parsed is not None:
            return parsed
    raise _type_error(entry, source, "a time (epoch seconds or an ISO 8601 date)")


def _as_str(entry: _Entry, source: str) -> str:
    value = entry.value
    if isinstance(value, str):
        return value
    if not entry.quoted and isinstance(value, (bool, int, float)):
        return entry.raw  # `test_cmd: 42` means the text "42", spelled as written
    raise _type_error(entry, source, "text")


def read_loop_state(path: Path) -> LoopState:
    """Read ``loop-state.md`` (also one written by the bash predecessor).

    Missing keys take their defaults, except ``goal``; a legacy file without ``original_goal``
    gives ``""``. Unknown keys with scalar values are kept in ``extra``. Raises
    :class:`StateError` naming the file and line when the file cannot be a loop-state file."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        raise StateError(
            f"{source} does not exist: no loop has run in this state directory; start one with "
            f"`loopctl run` or point --state-dir at the right directory"
        ) from None
    except OSError as exc:
        raise StateError(f"{source}: cannot read it ({exc.strerror or exc})") from None
    entries, _body = _front_matter_entries(text, source)
    values: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for entry in entries:
        kind = _FIELD_KINDS.get(entry.key)
        if kind is None:
            if isinstance(entry.value, (str, bool, int, float)):
                unknown[entry.key] = entry.value
            continue
        if entry.value is None:
            values.pop(entry.key, None)  # null means "the default"
            if entry.key == "extra":
                extra = {}
            continue
        if kind == "dict":
            if not isinstance(entry.value, dict):
                raise _type_error(entry, source, "a JSON object")
            extra = entry.value
        elif kind == "time":
            values[entry.key] = _as_time(entry, source)
        elif kind.startswith("int"):
            values[entry.key] = _as_int(entry, source)
        else:
            values[entry.key] = _as_str(entry, source)
    if "goal" not in values:
        raise StateError(
            f"{source}: the front matter has no `goal`, so this is not a loop-state file "
            f'(or it was damaged); add a line like `goal: "…"` after the first ---, or move the '
            f"file away to start a fresh loop"
        )
    values.setdefault("original_goal", "")
    return LoopState(**values, extra={**unknown, **extra})


# --- error-summary.json --------------------------------------------------------------------------


def write_error_summary(
    path: Path, *, iteration: int, error_lines: list[str], test_cmd: str
) -> None:
    """Write ``error-summary.json``: the decisive error lines of the latest test run."""
    atomic_write_json(
        path,
        {
            "iteration": iteration,
            "error_count": len(error_lines),
            "error_lines": list(error_lines),
            "test_cmd": test_cmd,
        },
    )


def read_error_summary(path: Path) -> dict[str, Any] | None:
    """``error-summary.json`` with all four keys present, or None if there is none.

    Raises :class:`StateError` naming the file when it is not a valid summary."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    fix = "delete it; the next test run writes a new one"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, json.JSONDecodeError) else ""
        raise StateError(f"{path}: {where}not valid JSON (torn write?); {fix}") from None
    if not isinstance(data, dict):
        raise StateError(f"{path}: expected a JSON object, found {type(data).__name__}; {fix}")
    lines = data.get("error_lines", [])
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise StateError(f"{path}: `error_lines` should be a list of strings; {fix}")
    data["error_lines"] = lines
    for key, default in (("iteration", 0), ("error_count", len(lines))):
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise StateError(f"{path}: `{key}` should be a whole number; {fix}")
        data[key] = value
    test_cmd = data.get("test_cmd", "")
    if not isinstance(test_cmd, str):
        raise StateError(f"{path}: `test_cmd` should be a string; {fix}")
    data["test_cmd"] = test_cmd
    return data


# --- the lock ------------------------------------------------------------------------------------


def _read_lock_info(fd: int) -> dict[str, Any]:
    """Who wrote the lock file: loopctl writes JSON, the bash tool a bare pid."""
    info: dict[str, Any] = {"pid": None, "started_at": None, "hostname": None}
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return info
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        pid, started, host = data.get("pid"), data.get("started_at"), data.get("hostname")
        if isinstance(pid, int) and not isinstance(pid, bool):
            info["pid"] = pid
        if isinstance(started, (int, float)) and not isinstance(started, bool):
            info["started_at"] = float(started)
        if isinstance(host, str):
            info["hostname"] = host
    else:
        match = re.search(r"\d{1,10}", text)
        if match:
            info["pid"] = int(match.group())
    return info


def _format_time(epoch: float) -> str | None:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
    except (OverflowError, ValueError, OSError):
        return None


class StateLock:
    """One loop per state directory: an exclusive ``flock`` on ``loopctl.lock``.

    The kernel drops a ``flock`` when its holder dies, so a SIGKILLed loop never leaves a stale
    lock; the pid, start time and host written into the file only serve the error message. The
    file is never deleted (deleting lock files lets two processes lock different inodes)."""

    #: How long ``acquire`` keeps trying, so a brief ``holder()`` probe never makes it fail.
    retry_s = 0.2

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StateError(
                f"cannot create the lock file {self.path} ({exc.strerror or exc}); make "
                f"{self.state_dir} writable or use --state-dir"
            ) from None
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                info = _read_lock_info(fd)
                os.close(fd)
                raise StateError(self._busy_message(info)) from None
            except OSError as exc:
                os.close(fd)
                raise StateError(
                    f"cannot lock {self.path} ({exc.strerror or exc}); loopctl needs a file "
                    f"system with flock support: use --state-dir to pick a local directory"
                ) from None
        record = {"pid": os.getpid(), "started_at": time.time(), "hostname": socket.gethostname()}
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd = fd

    def _busy_message(self, info: Mapping[str, Any]) -> str:
        parts = [f"pid {info['pid']}" if info.get("pid") is not None else "pid unknown"]
        started = info.get("started_at")
        when = _format_time(started) if started is not None else None
        if when:
            parts.append(f"started {when}")
        host = info.get("hostname")
        if host and host != socket.gethostname():
            parts.append(f"on host {host}")
        return (
            f"another loop ({', '.join(parts)}) is running in {self.state_dir}; "
            f"stop it or use --state-dir"
        )

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def holder(self) -> dict[str, Any] | None:
        """``{"pid", "started_at", "hostname"}`` of the loop holding the lock (values may be
        None), or None when no loop holds it. Works from any process, this one included."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_lock_info(fd)
            except OSError:
                return None
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


# --- restart archives ----------------------------------------------------------------------------


def _rename(source: Path, target: Path) -> None:
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        shutil.move(str(source), str(target))


def _free_name(target: Path) -> Path:
    for number in range(1, 10_000):
        candidate = target.with_name(f"{target.name}.{number}")
        if not candidate.exists() and not candidate.is_symlink():
            return candidate
    raise FileExistsError(errno.EEXIST, "no free name", str(target))


def _move_logs(source: Path, target: Path) -> None:
    """Move ``source`` to ``target``; if a re-run finds both, merge ``source`` into it."""
    if not source.is_dir():
        return
    if not target.exists() and not target.is_symlink():
        _rename(source, target)
        return
    for entry in sorted(source.iterdir()):
        destination = target / entry.name
        if (destination.exists() or destination.is_symlink()) and (
            entry.is_dir() or destination.is_dir()
        ):
            destination = _free_name(destination)
        _rename(entry, destination)
    with contextlib.suppress(OSError):
        source.rmdir()


def archive_restart(state_dir: Path, number: int, *, names: Sequence[str] = ARCHIVED_FILES) -> Path:
    """Archive the current generation into ``restart-N/`` before a restart and return that path.

    The files in ``names`` that exist are copied (each via a temp file and a rename); ``logs/``
    is moved to ``restart-N/logs/`` and an empty ``logs/`` made, so the next generation starts
    clean. Safe to re-run after a crash part-way: copies are redone, logs merged."""
    if number < 0:
        raise ValueError(f"restart number must be >= 0, not {number}")
    state_dir = Path(state_dir)
    target = state_dir / f"restart-{number}"
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        source = state_dir / name
        if source.is_file():
            _atomic_write_bytes(target / name, source.read_bytes())
    remove_stale_temp_files(target)
    _move_logs(state_dir / LOGS_DIR, target / LOGS_DIR)
    (state_dir / LOGS_DIR).mkdir(exist_ok=True)
    _fsync_dir(state_dir)
    return target


# --- progress.md ---------------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _cell(value: Any, limit: int) -> str:
    """One line of table-safe markdown, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text[: limit * 4].split())  # also folds newlines and other line breaks
    text = "".join(char if char.isprintable() else "?" for char in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


def _tokens_text(count: float) -> str:
    if abs(count) < 1000:
        return str(int(count))
    if abs(count) < 1_000_000:
        return f"{count / 1000:.1f}k"
    if abs(count) < 1e12:
        return f"{count / 1_000_000:.1f}M"
    return f"{count:.3g}"


def _duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    if seconds < 360_000:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
    return f"{seconds / 86400:.3g}d"


_TOKEN_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _usage_of(record: Mapping[str, Any]) -> dict[str, float]:
    agent = record.get("agent")
    usage = agent.get("usage") if isinstance(agent, Mapping) else None
    if not isinstance(usage, Mapping):
        return {}
    return {key: number for key in _TOKEN_KEYS if (number := _number(usage.get(key))) is not None}


def _cost_of(record: Mapping[str, Any]) -> float | None:
    agent = record.get("agent")
    return _number(agent.get("cost_usd")) if isinstance(agent, Mapping) else None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _row(record: Mapping[str, Any]) -> str:
    iteration = record.get("iteration")
    iteration_text = "?"
    if isinstance(iteration, int) and not isinstance(iteration, bool) and abs(iteration) < 10**12:
        iteration_text = str(iteration)
    passed = record.get("tests_passed")
    tests = "pass" if passed is True else "fail" if passed is False else "?"
    failing_tests = record.get("failing_tests")
    error_count = _number(record.get("error_count"))
    if isinstance(failing_tests, list) and failing_tests:
        failing = str(len(failing_tests))
    elif passed is True:
        failing = "0"
    elif error_count is not None:
        failing = f"{error_count:.0f} err" if abs(error_count) < 1e9 else "many"
    else:
        failing = "-"
    fingerprint = record.get("error_fingerprint")
    usage = _usage_of(record)
    duration = _number(record.get("duration_s"))
    decision = record.get("decision")
    decision_text = decision if isinstance(decision, str) else "?"
    reason = record.get("reason")
    if decision_text not in ("continue", "?") and isinstance(reason, str) and reason:
        decision_text = f"{decision_text}: {reason}"
    cells = [
        iteration_text[:12],
        tests,
        failing[:12],
        _cell(fingerprint, 60) if isinstance(fingerprint, str) and fingerprint else "",
        _tokens_text(sum(usage.values())) if usage else "-",
        _duration_text(max(duration, 0.0)) if duration is not None else "-",
        _cell(decision_text, 40),
    ]
    return "| " + " | ".join(cells) + " |"


def render_progress(
    records: Sequence[Mapping[str, Any]], *, goal: str, status: str, max_rows: int = 20
) -> str:
    """``progress.md``: the goal, the status, a table of the last ``max_rows`` iterations and
    totals. Its size does not grow with the number of iterations, so a person (or an agent)
    can always read it whole. ``records`` are ``iterations.jsonl`` dicts; bad values show as ?."""
    records = [record for record in records if isinstance(record, Mapping)]
    first_line, more, _ = goal.strip().partition("\n")
    goal_text = _cell(first_line, 200) if first_line.strip() else "(none)"
    if more and not goal_text.endswith("…"):
        goal_text += " …"
    lines = [
        "# loopctl progress",
        "",
        f"**Goal:** {goal_text}",
        "",
        f"**Status:** {_cell(status, 100)}",
        "",
    ]
    shown = records[-max_rows:] if max_rows > 0 else []
    if shown:
        lines += [
            "| iteration | tests | failing | error fingerprint | tokens | duration | decision |",
            "|---:|---|---:|---|---:|---:|---|",
            *(_row(record) for record in shown),
            "",
        ]
        if len(shown) < len(records):
            lines += [
                f"Last {len(shown)} of {len(records)} iterations; all are in {ITERATIONS_FILE}.",
                "",
            ]
    else:
        lines += ["No iterations yet.", ""]
    totals: dict[str, float] = dict.fromkeys(_TOKEN_KEYS, 0.0)
    cost = 0.0
    has_cost = False
    restarts = 0
    for record in records:
        for key, count in _usage_of(record).items():
            totals[key] += count
        record_cost = _cost_of(record)
        if record_cost is not None:
            cost += record_cost
            has_cost = True
        generation = record.get("generation")
        if isinstance(generation, int) and not isinstance(generation, bool):
            restarts = max(restarts, min(generation, 10**9))
    all_tokens = sum(totals.values())
    summary = (
        f"**Totals:** {_plural(len(records), 'iteration')}, {_plural(restarts, 'restart')}, "
        f"{_tokens_text(all_tokens)} tokens ({_tokens_text(totals['input_tokens'])} in, "
        f"{_tokens_text(totals['output_tokens'])} out, "
        f"{_tokens_text(totals['cache_read_input_tokens'])} cache reads)"
    )
    if has_cost:
        summary += f", ${cost:.2f}" if abs(cost) < 1e9 else f", ${cost:.3g}"
    lines += [summary, ""]
    return "\n".join(lines)


def restart_numbers(state_dir: Path) -> list[int]:
    """The N of every ``restart-N/`` archive in ``state_dir``, ascending."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    return sorted(
        int(match.group(1)) for name in names if (match := re.fullmatch(r"restart-(\d{1,9})", name))
    )
