"""The events the failure classifier writes to ``events.jsonl``, for ``loopctl events schema``."""

from __future__ import annotations

from typing import Any

from loopctl.events import BOOL, INT, NUM, OPT_INT, STR, STR_LIST, event

_CANDIDATE = {
    "type": "object",
    "properties": {"mode": STR, "detector": STR, "confidence": NUM},
    "required": ["mode", "detector", "confidence"],
}


def event_schemas() -> dict[str, dict[str, Any]]:
    return {
        "loop.failure_classified": event(
            "A failed iteration (or a pass on code that just failed) was classified; the same "
            "verdict is in failure-mode.json.",
            {
                "mode": STR,
                "confidence": NUM,
                "detector": STR,
                "evidence": STR_LIST,
                "forced": BOOL,
                "flaky_pass": BOOL,
                "candidates": {"type": "array", "items": _CANDIDATE},
            },
        ),
        "loop.recovery_applied": event(
            "The mode's recovery was applied (the details depend on the mode).",
            {
                "mode": STR,
                "action": STR,
                "attempt": INT,
                "limit": OPT_INT,
                "decision": {"enum": ["continue", "restart", "stop"]},
            },
            {
                "flaky_tests": STR_LIST,
                "ecosystems": STR_LIST,
                "reinstall": STR,
                "command": STR,
                "because": STR,
                "exit_code": OPT_INT,
                "timed_out": BOOL,
                "duration_s": NUM,
                "output_tail": STR,
                "approach": STR,
                "iterations_cut": INT,
                "briefing": STR,
                "declared_by": STR,
                "note": STR,
            },
        ),
        "loop.failure_mode_forced": event(
            "--failure-mode is set: every failure is treated as this mode, unclassified.",
            {"mode": STR, "message": STR},
        ),
        "failure_classifier.rerun": event(
            "The failing tests were re-run with no code change to confirm flakiness.",
            {
                "command": STR,
                "how": STR,
                "passed": BOOL,
                "ran_tests": BOOL,
                "exit_code": OPT_INT,
                "failing_tests": STR_LIST,
                "duration_s": NUM,
            },
        ),
        "failure_classifier.recovery_limit": event(
            "A mode's recovery reached its per-run limit: the loop stops with the mode as reason.",
            {"mode": STR, "applied": INT, "limit": INT},
        ),
        "failure_classifier.warning": event(
            "A problem that did not stop classification (a refused custom mode or answer).",
            {"message": STR},
        ),
    }
