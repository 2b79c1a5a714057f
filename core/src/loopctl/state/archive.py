"""Restart archives: ``restart-N/`` keeps a generation's state files and logs."""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Sequence
from pathlib import Path

from loopctl.state.files import atomic_write_bytes, fsync_dir, remove_stale_temp_files
from loopctl.state.layout import (
    CONTEXT_SUMMARY_FILE,
    ERROR_SUMMARY_FILE,
    EVENTS_FILE,
    ITERATIONS_FILE,
    LOGS_DIR,
    LOOP_STATE_FILE,
    PROGRESS_FILE,
    REPORT_JSON_FILE,
    REPORT_MD_FILE,
)

#: What :func:`archive_restart` copies into ``restart-N/`` (``logs/`` is moved, not copied).
ARCHIVED_FILES: tuple[str, ...] = (
    LOOP_STATE_FILE,
    PROGRESS_FILE,
    ERROR_SUMMARY_FILE,
    CONTEXT_SUMMARY_FILE,
)
# --- restart archives ----------------------------------------------------------------------------


def _rename(source: Path, target: Path) -> None:
    try:
        os.replace(source, target)
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
        import shutil  # here: reading the state (`loopctl status`) never moves a file

        shutil.move(str(source), str(target))


def _free_name(target: Path) -> Path:
    for number in range(1, 10_000):
        candidate = target.with_name(f"{target.name}.{number}")
        if not _exists(candidate):
            return candidate
    raise FileExistsError(errno.EEXIST, "no free name", str(target))


def _move_logs(source: Path, target: Path) -> None:
    """Move ``source`` to ``target``; if a re-run finds both, merge ``source`` into it."""
    if not source.is_dir():
        return
    if not _exists(target):
        _rename(source, target)
        return
    for entry in sorted(source.iterdir()):
        destination = target / entry.name
        if _exists(destination) and (entry.is_dir() or destination.is_dir()):
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
            atomic_write_bytes(target / name, source.read_bytes())
    remove_stale_temp_files(target)
    _move_logs(state_dir / LOGS_DIR, target / LOGS_DIR)
    (state_dir / LOGS_DIR).mkdir(exist_ok=True)
    fsync_dir(state_dir)
    return target


def restart_numbers(state_dir: Path) -> list[int]:
    """The N of every ``restart-N/`` archive in ``state_dir``, ascending."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return []
    return sorted(
        int(match.group(1)) for name in names if (match := re.fullmatch(r"restart-(\d{1,9})", name))
    )


# --- the files of an earlier loop, set aside for a new one ------------------------------------------

#: What :func:`set_aside_previous_run` moves, journals last: a kill part-way leaves them in place,
#: so the next run moves the rest.
PREVIOUS_RUN_FILES: tuple[str, ...] = (
    PROGRESS_FILE,
    ERROR_SUMMARY_FILE,
    CONTEXT_SUMMARY_FILE,
    REPORT_MD_FILE,
    REPORT_JSON_FILE,
    LOGS_DIR,
    ITERATIONS_FILE,
    EVENTS_FILE,
)


def set_aside_previous_run(
    state_dir: Path, *, ended: bool = False
) -> tuple[Path, list[str]] | None:
    """Move an earlier loop's files (its ``restart-N/`` archives, logs, report, journals) into
    ``previous-run-N/``, so a new loop never appends to its journals nor mixes its logs, restart
    archives and report with them; returns ``(that directory, the names moved)``, or None when
    there was nothing to keep apart.

    ``ended``: that loop ended and its ``loop-state.md`` goes too, last (a kill part-way leaves
    it, so the next run moves the rest). Otherwise its ``loop-state.md`` is gone, and only
    journals that hold something are set aside."""
    state_dir = Path(state_dir)
    journals = [state_dir / EVENTS_FILE, state_dir / ITERATIONS_FILE]
    if not ended and not any(path.is_file() and path.stat().st_size > 0 for path in journals):
        return None
    restarts = [f"restart-{n}" for n in restart_numbers(state_dir)]
    names = [*restarts, *PREVIOUS_RUN_FILES, *([LOOP_STATE_FILE] if ended else [])]
    present = [name for name in names if _exists(state_dir / name)]
    if not present:
        return None
    number = 1
    while (state_dir / f"previous-run-{number}").exists():
        number += 1
    target = state_dir / f"previous-run-{number}"
    target.mkdir()
    for name in present:
        _rename(state_dir / name, target / name)
    fsync_dir(target)
    fsync_dir(state_dir)
    return target, present


def _exists(path: Path) -> bool:
    return path.exists() or path.is_symlink()
