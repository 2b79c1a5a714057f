"""The events the failure classifier writes to ``events.jsonl``, for ``loopctl events schema``.

Each name is published here as a constant (re-exported from :mod:`loopctl_failure_classifier`);
other plugins subscribe through these constants, never through copies of the strings.
"""

from __future__ import annotations

from typing import Any

from loopctl import EventField, define_event

#: Every event of this plugin starts with its name and a dot.
PREFIX = "failure-classifier."
#: A failed iteration (or a pass on code that just failed) was classified.
CLASSIFIED = "failure-classifier.classified"
#: The mode's recovery was applied.
RECOVERY_APPLIED = "failure-classifier.recovery_applied"
#: ``--failure-mode`` is in force: failures are not classified.
MODE_FORCED = "failure-classifier.mode_forced"
#: The failing tests were re-run with no code change, to confirm flakiness.
RERUN = "failure-classifier.rerun"
#: A mode's recovery reached its per-run limit: the loop stops.
RECOVERY_LIMIT = "failure-classifier.recovery_limit"
#: A problem that did not stop classification.
WARNING = "failure-classifier.warning"

#: The line loopctl's views show for an event (see :mod:`loopctl_failure_classifier.lines`).
_SUMMARY = {"summary": EventField.STR}

_CANDIDATE = {
    "type": "object",
    "properties": {
        "mode": EventField.STR,
        "detector": EventField.STR,
        "confidence": EventField.NUM,
    },
    "required": ["mode", "detector", "confidence"],
}


def event_schemas() -> dict[str, dict[str, Any]]:
    return {
        CLASSIFIED: define_event(
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
            _SUMMARY,
        ),
        RECOVERY_APPLIED: define_event(
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
                **_SUMMARY,
            },
        ),
        MODE_FORCED: define_event(
            "--failure-mode is set: every failure is treated as this mode, unclassified.",
            {"mode": EventField.STR, "message": EventField.STR},
            line="{message}",
        ),
        RERUN: define_event(
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
            _SUMMARY,
        ),
        RECOVERY_LIMIT: define_event(
            "A mode's recovery reached its per-run limit: the loop stops with the mode as reason.",
            {"mode": EventField.STR, "applied": EventField.INT, "limit": EventField.INT},
            _SUMMARY,
        ),
        WARNING: define_event(
            "A problem that did not stop classification (a refused custom mode or answer).",
            {"message": EventField.STR},
            line="failure classifier: {message}",
        ),
    }


__all__ = [
    "CLASSIFIED",
    "MODE_FORCED",
    "PREFIX",
    "RECOVERY_APPLIED",
    "RECOVERY_LIMIT",
    "RERUN",
    "WARNING",
    "event_schemas",
]
