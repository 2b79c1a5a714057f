"""The state directory's layout: its fixed file names, the names of an iteration's logs, and
the error raised for a state file that cannot be used."""

from __future__ import annotations

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


class StateError(Exception):
    """A state file is unusable; the message names the file, what is wrong and how to fix it."""


def log_name(iteration: int, kind: str) -> str:
    """The name of one of an iteration's files in ``logs/``: ``log_name(7, "tests.log")`` is
    ``iteration-0007.tests.log``. Plugins name theirs the same way, so they sort with the
    iteration's own (``prompt.md``, ``agent.jsonl``, ``tests.log``)."""
    return f"iteration-{iteration:04d}.{kind}"
