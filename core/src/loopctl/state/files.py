"""Atomic writes (a temp file renamed over the target) and removing the temp files a killed
writer left behind."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from pathlib import Path
from typing import Any

from loopctl.redaction import redact
from loopctl.state.encoding import json_text
from loopctl.state.faults import after_durable_write

# --- atomic writes -------------------------------------------------------------------------------

_TEMP_NAME = re.compile(r"\A\.(?P<name>.+)\.(?P<pid>\d+)\.[0-9a-f]{8}\.tmp\Z", re.DOTALL)


def _create_temp(path: Path) -> tuple[Path, int]:
    """A new temp file beside ``path``; named with our pid so a crash's leftovers can be told
    apart (see :func:`remove_stale_temp_files`). Created with 0o666 so the umask applies."""
    for _ in range(100):
        temp = path.with_name(f".{path.name[:100]}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            return temp, os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "could not create a unique temp file", str(path))


#: The one call that puts bytes into the state files (atomic writes and journal appends go
#: through :func:`write_all`): a seam where tests put a disk that fills up.
_write = os.write


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = _write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
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


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace (or create) ``path`` with ``data`` so that a reader, a crash or a kill sees the
    old or the new content, never a mix: a new temp file beside it, renamed over it. (Rewriting
    a second file in place and exchanging the names would save creating and freeing a file per
    rewrite, but a reader that still holds the old file open would see it rewritten.)

    ``durable``: the new content is fsynced before it takes the name, and the directory after
    a file is created, so it survives a power cut once this returns. A rewrite's rename is not
    forced to the disk (the file system commits it within seconds): a power cut right after it
    leaves the previous complete version, as a kill just before it does.
    Without ``durable`` nothing is fsynced: for views rewritten every iteration and rebuilt from
    the journal (``progress.md``, ``error-summary.json``). The engine fsyncs the state
    directory once when a loop ends; the journal, which ``loopctl resume`` continues from, is
    fsynced on its own."""
    try:
        created = _rename_into_place(path, data, durable)
    except OSError as exc:
        if exc.errno is not None and exc.filename is None:
            exc.filename = str(path)  # say which file (a failed write names none)
        raise
    if durable and created:
        fsync_dir(path.parent)
    after_durable_write(path)


def _rename_into_place(path: Path, data: bytes, durable: bool) -> bool:
    """Write ``data`` to a new temp file and rename it over ``path``; True if ``path`` was
    new."""
    temp, fd = _create_temp(path)
    created = True
    try:
        try:
            with contextlib.suppress(OSError):  # keep the mode of the file we replace
                os.fchmod(fd, os.stat(path).st_mode & 0o7777)
                created = False
            write_all(fd, data)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return created


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Replace ``path`` with ``text`` (UTF-8) so that a crash leaves the old or the new content,
    never a mix (``durable``: see :func:`atomic_write_bytes`). Characters UTF-8 cannot hold
    (lone surrogates) are written as ``\\udcXX``. Secrets are redacted first
    (:func:`loopctl.redact`): nothing loopctl or a plugin writes here holds one in clear."""
    atomic_write_bytes(
        Path(path), redact(text).encode("utf-8", "backslashreplace"), durable=durable
    )


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
