"""The events the failure classifier writes to ``events.jsonl``, for ``loopctl events schema``."""

from __future__ import annotations

from typing import Any

from loopctl import EventField, define_event

_CANDIDATE = {
    "type": "object",
    "properties": {"mode": EventField.STR, "detector": EventField.STR, "confidence": EventField.NUM},
    "required": ["mode", "detector", "confidence"],
}


def event_schemas() -> dict[str, dict[str, Any]]:
    return {
        "loop.failure_classified": define_event(
            "A failed iteration (or a pass on code that just failed) was classified; the same "
            "verdict is in failure-mode.json.",
            {
                "mode": EventField.STR,
                "confidence": EventField.NUM,
                "detector": EventField.STR,
                "evidence": EventField.STR_LIST,
                "forced": EventField.BOOL,
                "flaky_pass": EventField.BOOL,
                "candidates": {"type": "array", "items": _CANDIDATE},
            },
        ),
        "loop.recovery_applied": define_event(
            "The mode's recovery was applied (the details depend on the mode).",
            {
                "mode": EventField.STR,
                "action": EventField.STR,
                "attempt": EventField.INT,
                "limit": EventField.OPT_INT,
                "decision": {"enum": ["continue", "restart", "stop"]},
            },
            {
                "flaky_tests": EventField.STR_LIST,
                "ecosystems": EventField.STR_LIST,
                "reinstall": EventField.STR,
                "command": EventField.STR,
                "because": EventField.STR,
                "exit_code": EventField.OPT_INT,
                "timed_out": EventField.BOOL,
                "duration_s": EventField.NUM,
                "output_tail": EventField.STR,
                "approach": EventField.STR,
                "iterations_cut": EventField.INT,
                "briefing": EventField.STR,
                "declared_by": EventField.STR,
                "note": EventField.STR,
            },
        ),
        "loop.failure_mode_forced": define_event(
            "--failure-mode is set: every failure is treated as this mode, unclassified.",
            {"mode": EventField.STR, "message": EventField.STR},
        ),
        "failure_classifier.rerun": define_event(
            "The failing tests were re-run with no code change to confirm flakiness.",
            {
                "command": EventField.STR,
                "how": EventField.STR,
                "passed": EventField.BOOL,
                "ran_tests": EventField.BOOL,
                "exit_code": EventField.OPT_INT,
                "failing_tests": EventField.STR_LIST,
                "duration_s": EventField.NUM,
            },
        ),
        "failure_classifier.recovery_limit": define_event(
            "A mode's recovery reached its per-run limit: the loop stops with the mode as reason.",
            {"mode": EventField.STR, "applied": EventField.INT, "limit": EventField.INT},
        ),
        "failure_classifier.warning": define_event(
            "A problem that did not stop classification (a refused custom mode or answer).",
            {"message": EventField.STR},
        ),
    }
