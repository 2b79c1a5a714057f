"""The events goal-guard writes, declared for the published schema of ``events.jsonl``."""

from __future__ import annotations

from typing import Any

#: Where a change to the original goal came from (``goal_guard.violation``'s ``source``).
VIOLATION_SOURCES = ("state_file", "plugin", "guard_record", "unknown")


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl import EventField, define_event

    return {
        "goal_guard.sealed": define_event(
            "The original goal was sealed for this run (goal-guard/goal.md and guard.json).",
            {"sealed_from": EventField.STR, "chars": EventField.INT, "sha256": EventField.STR, "record": EventField.STR},
            line="goal sealed ({chars} chars)",
        ),
        "goal_guard.violation": define_event(
            "The original goal was changed, and put back; `source` says where the change came "
            "from.",
            {
                "source": {"enum": list(VIOLATION_SOURCES)},
                "detail": EventField.STR,
                "action": {"enum": ["repaired", "resealed", "unrepaired"]},
                "where": EventField.STR,
            },
            {
                "plugin": EventField.STR,
                "found_chars": EventField.INT,
                "found_sha256": EventField.STR,
                "expected_chars": EventField.INT,
                "expected_sha256": EventField.STR,
            },
            line="the original goal was changed ({source}: {detail}): {action}",
        ),
        "goal_guard.record_repaired": define_event(
            "One copy of goal-guard's record was damaged and rewritten from the other.",
            {"files": EventField.STR_LIST, "problems": EventField.STR_LIST},
        ),
        "goal_guard.record_replaced": define_event(
            "goal-guard's record belonged to another run in this state directory.", {"why": EventField.STR}
        ),
        "goal_guard.legacy_recovered": define_event(
            "The original goal was recovered from a legacy state file by removing the sections "
            "the bash predecessor synthesized into it.",
            {
                "field": EventField.STR,
                "removed": EventField.STR_LIST,
                "removed_chars": EventField.INT,
                "chars": EventField.INT,
                "sha256": EventField.STR,
            },
            line="original goal recovered from a legacy state file ({removed_chars} chars of synthesized notes removed)",
        ),
        "goal_guard.legacy_unrecoverable": define_event(
            "A legacy state file held no goal to recover.", {"detail": EventField.STR}
        ),
        "goal_guard.notes_journal_damaged": define_event(
            "Lines of goal-guard/notes.jsonl could not be read and were skipped.",
            {"skipped_lines": EventField.INT, "problems": EventField.STR_LIST},
        ),
        "goal_guard.notes": define_event(
            "The Notes prompt section of this iteration: notes kept, shown, left out for the "
            "budget, its size, and notes dropped over max_notes since the last prompt.",
            {"notes": EventField.INT, "shown": EventField.INT, "left_out": EventField.INT, "chars": EventField.INT, "budget_chars": EventField.INT},
            {"evicted": EventField.INT},
            line="",
        ),
        "goal_guard.notes_expired": define_event(
            "Notes were resolved or went stale (and how many were dropped over max_notes).",
            {"resolved": EventField.INT, "evicted": EventField.INT, "notes": EventField.INT, "examples": EventField.STR_LIST},
            line="",
        ),
        "goal_guard.notes_compacted": define_event(
            "goal-guard/notes.jsonl was rewritten to hold just the kept notes.",
            {"notes": EventField.INT},
            line="",
        ),
        "goal_guard.working_goal_restored": define_event(
            "Another plugin set the working goal; goal-guard put back the original goal plus "
            "its notes.",
            {"plugins": EventField.STR_LIST},
        ),
    }
