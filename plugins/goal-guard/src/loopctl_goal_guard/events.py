"""The events goal-guard writes, declared for the published schema of ``events.jsonl``."""

from __future__ import annotations

from typing import Any

#: Where a change to the original goal came from (``goal_guard.violation``'s ``source``).
VIOLATION_SOURCES = ("state_file", "plugin", "guard_record", "unknown")


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl.events import INT, STR, STR_LIST, event

    return {
        "goal_guard.sealed": event(
            "The original goal was sealed for this run (goal-guard/goal.md and guard.json).",
            {"sealed_from": STR, "chars": INT, "sha256": STR, "record": STR},
            line="goal sealed ({chars} chars)",
        ),
        "goal_guard.violation": event(
            "The original goal was changed, and put back; `source` says where the change came "
            "from.",
            {
                "source": {"enum": list(VIOLATION_SOURCES)},
                "detail": STR,
                "action": {"enum": ["repaired", "resealed", "unrepaired"]},
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
        "goal_guard.record_repaired": event(
            "One copy of goal-guard's record was damaged and rewritten from the other.",
            {"files": STR_LIST, "problems": STR_LIST},
        ),
        "goal_guard.record_replaced": event(
            "goal-guard's record belonged to another run in this state directory.", {"why": STR}
        ),
        "goal_guard.legacy_recovered": event(
            "The original goal was recovered from a legacy state file by removing the sections "
            "the bash predecessor synthesized into it.",
            {
                "field": STR,
                "removed": STR_LIST,
                "removed_chars": INT,
                "chars": INT,
                "sha256": STR,
            },
            line="original goal recovered from a legacy state file ({removed_chars} chars of synthesized notes removed)",
        ),
        "goal_guard.legacy_unrecoverable": event(
            "A legacy state file held no goal to recover.", {"detail": STR}
        ),
        "goal_guard.notes_journal_damaged": event(
            "Lines of goal-guard/notes.jsonl could not be read and were skipped.",
            {"skipped_lines": INT, "problems": STR_LIST},
        ),
        "goal_guard.notes": event(
            "The Notes prompt section of this iteration: notes kept, shown, left out for the "
            "budget, its size, and notes dropped over max_notes since the last prompt.",
            {"notes": INT, "shown": INT, "left_out": INT, "chars": INT, "budget_chars": INT},
            {"evicted": INT},
            line="",
        ),
        "goal_guard.notes_expired": event(
            "Notes were resolved or went stale (and how many were dropped over max_notes).",
            {"resolved": INT, "evicted": INT, "notes": INT, "examples": STR_LIST},
            line="",
        ),
        "goal_guard.notes_compacted": event(
            "goal-guard/notes.jsonl was rewritten to hold just the kept notes.",
            {"notes": INT},
            line="",
        ),
        "goal_guard.working_goal_restored": event(
            "Another plugin set the working goal; goal-guard put back the original goal plus "
            "its notes.",
            {"plugins": STR_LIST},
        ),
    }
