"""``.gitignore`` in the state directory: git ignores everything loopctl keeps there.

A loop writes a few files into the state directory on every iteration (``logs/`` gains three).
Without this file ``git status`` in the user's repository lists every one of them, and the
workspace snapshot taken on each iteration (``git status --untracked-files=all``) gets slower
as they pile up: 1.5 ms on a fresh tree, 45 ms at 30,000 state files.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from loopctl.state.layout import (
    EVENTS_FILE,
    ITERATIONS_FILE,
    LOCK_FILE,
    LOGS_DIR,
    LOOP_STATE_FILE,
    PROGRESS_FILE,
)

GITIGNORE_FILE = ".gitignore"
#: ``*`` first, so that even a write cut short by a crash leaves a file that does its job.
GITIGNORE_TEXT = (
    "*\n"
    "# Written by loopctl: git ignores its state directory (this file included). Delete this\n"
    "# file to track these files; loopctl writes it again when a loop starts or resumes here.\n"
)
#: What marks a directory as a loopctl state directory (it holds one of these).
_STATE_NAMES = (LOOP_STATE_FILE, ITERATIONS_FILE, EVENTS_FILE, PROGRESS_FILE, LOCK_FILE, LOGS_DIR)


def ignore_in_git(state_dir: Path, workdir: Path) -> bool:
    """Write ``state_dir/.gitignore`` (``*``) so git ignores the state directory; True if
    written. Best effort, never raises.

    Left alone: a ``.gitignore`` already there (the user's own, or ours), a state directory
    that is the working directory or one of its parents (``*`` would ignore the user's whole
    project), and a directory holding other files but none of loopctl's (``--state-dir`` at an
    existing directory of the user's). Not a durable state write: the file is created whole
    (``O_EXCL``, never over another) and a torn one still starts with ``*``."""
    state_dir, workdir = Path(state_dir), Path(workdir)
    try:
        resolved, work = state_dir.resolve(), workdir.resolve()
        if resolved == work or resolved in work.parents:
            return False
        names = os.listdir(state_dir)
    except (OSError, RuntimeError):
        return False
    if GITIGNORE_FILE in names:
        return False
    if names and not any(name in names for name in _STATE_NAMES):
        return False
    try:
        fd = os.open(state_dir / GITIGNORE_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError:
        return False
    try:
        os.write(fd, GITIGNORE_TEXT.encode("ascii"))
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    return True
