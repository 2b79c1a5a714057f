"""The events goal-guard writes: their names (import these constants to subscribe to them) and
their schemas, declared for the published schema of ``events.jsonl``."""

from __future__ import annotations

from typing import Any

#: The original goal was sealed for this run.
SEALED = "goal-guard.sealed"
#: The original goal was changed (``source`` says where from, ``action`` what was done).
VIOLATION = "goal-guard.violation"
#: One copy of goal-guard's record was damaged and rewritten from the other.
RECORD_REPAIRED = "goal-guard.record_repaired"
#: goal-guard's record belonged to another run in the state directory.
RECORD_REPLACED = "goal-guard.record_replaced"
#: The original goal was recovered from a legacy (bash-era) state file.
LEGACY_RECOVERED = "goal-guard.legacy_recovered"
#: A legacy state file held no goal to recover.
LEGACY_UNRECOVERABLE = "goal-guard.legacy_unrecoverable"
#: Lines of ``goal-guard/notes.jsonl`` could not be read.
NOTES_JOURNAL_DAMAGED = "goal-guard.notes_journal_damaged"
#: The Notes prompt section of an iteration (its size and trims).
NOTES = "goal-guard.notes"
#: Notes were resolved or went stale.
NOTES_EXPIRED = "goal-guard.notes_expired"
#: ``goal-guard/notes.jsonl`` was compacted.
NOTES_COMPACTED = "goal-guard.notes_compacted"
#: Another plugin set the working goal; goal-guard put back the original goal and its notes.
WORKING_GOAL_RESTORED = "goal-guard.working_goal_restored"

#: Where a change to the original goal came from (``goal-guard.violation``'s ``source``).
VIOLATION_SOURCES = ("state_file", "plugin", "guard_record", "unknown")
#: What goal-guard did about it: ``repaired`` (the run carries the sealed goal again),
#: ``resealed`` (the record was lost and sealed anew), ``unrepaired`` (the run's goal could not
#: be put back; the prompt still shows the sealed goal, and ``loopctl resume`` repairs the state
#: file).
VIOLATION_ACTIONS = ("repaired", "resealed", "unrepaired")


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl import EventField, define_event

    STR, INT, STR_LIST = EventField.STR, EventField.INT, EventField.STR_LIST
    return {
        SEALED: define_event(
            "The original goal was sealed for this run (goal-guard/goal.md and guard.json).",
            {"sealed_from": STR, "chars": INT, "sha256": STR, "record": STR},
            line="goal sealed ({chars} chars)",
        ),
        VIOLATION: define_event(
            "The original goal was changed; `source` says where the change came from, "
            "`action` what goal-guard did about it.",
            {
                "source": {"enum": list(VIOLATION_SOURCES)},
                "detail": STR,
                "action": {"enum": list(VIOLATION_ACTIONS)},
                "where": STR,
            },
            {
                "plugin": STR,
                "found_chars": INT,
                "found_sha256": STR,
                "expected_chars": INT,
                "expected_sha256": STR,
            },
            line="the original goal was changed ({source}: {detail}): {action}",
        ),
        RECORD_REPAIRED: define_event(
            "One copy of goal-guard's record was damaged and rewritten from the other.",
            {"files": STR_LIST, "problems": STR_LIST},
        ),
        RECORD_REPLACED: define_event(
            "goal-guard's record belonged to another run in this state directory.",
            {"why": STR},
            line="goal-guard's goal record was another loop's; this loop's goal is sealed anew",
        ),
        LEGACY_RECOVERED: define_event(
            "The original goal was recovered from a legacy state file by removing the sections "
            "the bash predecessor synthesized into it.",
            {
                "field": STR,
                "removed": STR_LIST,
                "removed_chars": INT,
                "chars": INT,
                "sha256": STR,
            },
            line="original goal recovered from a legacy state file "
            "({removed_chars} chars of synthesized notes removed)",
        ),
        LEGACY_UNRECOVERABLE: define_event(
            "A legacy state file held no goal to recover.", {"detail": STR}
        ),
        NOTES_JOURNAL_DAMAGED: define_event(
            "Lines of goal-guard/notes.jsonl could not be read and were skipped.",
            {"skipped_lines": INT, "problems": STR_LIST},
        ),
        NOTES: define_event(
            "The Notes prompt section of this iteration: notes kept, shown, left out for the "
            "budget, its size, and notes dropped over max_notes since the last prompt.",
            {"notes": INT, "shown": INT, "left_out": INT, "chars": INT, "budget_chars": INT},
            {"evicted": INT},
            line="",
        ),
        NOTES_EXPIRED: define_event(
            "Notes were resolved or went stale (and how many were dropped over max_notes).",
            {"resolved": INT, "evicted": INT, "notes": INT, "examples": STR_LIST},
            line="",
        ),
        NOTES_COMPACTED: define_event(
            "goal-guard/notes.jsonl was rewritten to hold just the kept notes.",
            {"notes": INT},
            line="",
        ),
        WORKING_GOAL_RESTORED: define_event(
            "Another plugin set the working goal; goal-guard put back the original goal plus "
            "its notes.",
            {"plugins": STR_LIST},
        ),
    }


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
    "VIOLATION_ACTIONS",
    "VIOLATION_SOURCES",
    "WORKING_GOAL_RESTORED",
    "event_schemas",
]
