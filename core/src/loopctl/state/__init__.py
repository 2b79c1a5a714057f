"""The state directory (``.loopctl/`` by default): crash-safe writers and tolerant readers.

A loop can be killed at any instant, so every file here is written either atomically (temp file,
fsync, rename) or append-only one whole line at a time; readers skip and report what a crash may
have torn instead of failing. The file names are fixed: users of the bash predecessor script
their tools around them.

One module per concern; import the names from here:

- :mod:`~loopctl.state.layout`: the file names, :func:`log_name`, :class:`StateError`
- :mod:`~loopctl.state.encoding`: JSON on one line, indented JSON, :func:`to_jsonable`
- :mod:`~loopctl.state.files`: atomic writes and the temp files a crash leaves
- :mod:`~loopctl.state.journal`: JSONL appending and reading
- :mod:`~loopctl.state.frontmatter`: ``---`` front matter parsing
- :mod:`~loopctl.state.loopstate`: ``loop-state.md`` (:class:`LoopState`)
- :mod:`~loopctl.state.error_summary`: ``error-summary.json``
- :mod:`~loopctl.state.lock`: :class:`StateLock`
- :mod:`~loopctl.state.archive`: ``restart-N/`` archives, ``previous-run-N/``
- :mod:`~loopctl.state.progress`: ``progress.md``
- :mod:`~loopctl.state.gitignore`: the state directory's ``.gitignore``
- :mod:`~loopctl.state.faults`: a test-only seam that kills the process after a durable write
"""

from __future__ import annotations

from loopctl.state.archive import (
    ARCHIVED_FILES,
    archive_restart,
    restart_numbers,
    set_aside_previous_run,
)
from loopctl.state.encoding import json_one_line, json_text, to_jsonable
from loopctl.state.error_summary import read_error_summary, write_error_summary
from loopctl.state.files import (
    atomic_write_json,
    atomic_write_text,
    fsync_dir,
    remove_stale_temp_files,
)
from loopctl.state.frontmatter import parse_front_matter
from loopctl.state.gitignore import GITIGNORE_FILE, ignore_in_git
from loopctl.state.journal import JsonlAppender, JsonlRead, read_jsonl, tail_jsonl
from loopctl.state.layout import (
    CONTEXT_SUMMARY_FILE,
    DEFAULT_STATE_DIR,
    ERROR_SUMMARY_FILE,
    EVENTS_FILE,
    ITERATIONS_FILE,
    LOCK_FILE,
    LOGS_DIR,
    LOOP_STATE_FILE,
    PROGRESS_FILE,
    REPORT_JSON_FILE,
    REPORT_MD_FILE,
    StateError,
    log_name,
)
from loopctl.state.lock import StateLock
from loopctl.state.loopstate import (
    LoopState,
    RunSettings,
    read_loop_state,
    render_loop_state,
    write_loop_state,
)
from loopctl.state.progress import render_progress, set_progress_status
from loopctl.state.running import RUNNING_FILE, RunningRecord, read_running

__all__ = [
    "ARCHIVED_FILES",
    "CONTEXT_SUMMARY_FILE",
    "DEFAULT_STATE_DIR",
    "ERROR_SUMMARY_FILE",
    "EVENTS_FILE",
    "GITIGNORE_FILE",
    "ITERATIONS_FILE",
    "LOCK_FILE",
    "LOGS_DIR",
    "LOOP_STATE_FILE",
    "PROGRESS_FILE",
    "REPORT_JSON_FILE",
    "REPORT_MD_FILE",
    "RUNNING_FILE",
    "JsonlAppender",
    "JsonlRead",
    "LoopState",
    "RunSettings",
    "RunningRecord",
    "StateError",
    "StateLock",
    "archive_restart",
    "atomic_write_json",
    "atomic_write_text",
    "fsync_dir",
    "ignore_in_git",
    "json_one_line",
    "json_text",
    "log_name",
    "parse_front_matter",
    "read_error_summary",
    "read_jsonl",
    "read_loop_state",
    "read_running",
    "remove_stale_temp_files",
    "render_loop_state",
    "render_progress",
    "restart_numbers",
    "set_aside_previous_run",
    "set_progress_status",
    "tail_jsonl",
    "to_jsonable",
    "write_error_summary",
    "write_loop_state",
]
