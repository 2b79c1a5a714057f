"""goal-guard: the user's goal stays exactly as written, and the prompt does not inflate.

Plugins that want to leave notes for the agent implement ``goal_guard_notes(loop)`` and return
:class:`Note` objects (or dicts with the same keys, or strings); see
:mod:`loopctl_goal_guard.hookspecs`. The names of goal-guard's events are the constants below
(``loopctl_goal_guard.VIOLATION`` is ``"goal-guard.violation"``): subscribe through them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl_goal_guard.events import (
    LEGACY_RECOVERED,
    LEGACY_UNRECOVERABLE,
    NOTES,
    NOTES_COMPACTED,
    NOTES_EXPIRED,
    NOTES_JOURNAL_DAMAGED,
    RECORD_REPAIRED,
    RECORD_REPLACED,
    SEALED,
    VIOLATION,
    WORKING_GOAL_RESTORED,
)

__version__ = "0.2.0"

if TYPE_CHECKING:
    from loopctl_goal_guard.legacy import strip_synthesized_sections
    from loopctl_goal_guard.notes import Note


def __getattr__(name: str) -> Any:
    """Import on first use, so loading the plugin stays cheap."""
    if name == "Note":
        from loopctl_goal_guard.notes import Note

        return Note
    if name == "strip_synthesized_sections":
        from loopctl_goal_guard.legacy import strip_synthesized_sections

        return strip_synthesized_sections
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LEGACY_RECOVERED",
    "LEGACY_UNRECOVERABLE",
    "NOTES",
    "NOTES_COMPACTED",
    "NOTES_EXPIRED",
    "NOTES_JOURNAL_DAMAGED",
    "RECORD_REPAIRED",
    "RECORD_REPLACED",
    "SEALED",
    "VIOLATION",
    "WORKING_GOAL_RESTORED",
    "Note",
    "__version__",
    "strip_synthesized_sections",
]
