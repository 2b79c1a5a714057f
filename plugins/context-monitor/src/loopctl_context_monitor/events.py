"""The events the context monitor writes to ``events.jsonl``, for ``loopctl events schema``."""

from __future__ import annotations

from typing import Any

from loopctl import EventField, define_event

_READING = {"tokens": EventField.OPT_INT, "window": EventField.OPT_INT, "percent": EventField.OPT_NUM}


def event_schemas() -> dict[str, dict[str, Any]]:
    return {
        "loop.context_usage": define_event(
            "The context fill of the current agent session: on each streamed usage update "
            "(source 'stream', when the whole percent changes) and once per iteration (source "
            "'iteration'). Unknown fills have tokens or window null, never 0.",
            {
                **_READING,
                "session": EventField.OPT_STR,
                "generation": EventField.INT,
                "source": {"enum": ["stream", "iteration"]},
                "known": EventField.BOOL,
            },
            {"reason": EventField.STR},
        ),
        "loop.context_usage_unknown": define_event(
            "The fill could not be measured (no usage reported, or an unknown window); once per "
            "restart generation and reason.",
            {"reason": EventField.STR, "model": EventField.OPT_STR, "agent": EventField.OPT_STR, "hint": EventField.STR},
            line="context fill unknown: {reason}",
        ),
        "loop.context_exhaustion_warning": define_event(
            "The session's context reached the warn threshold.",
            {
                **_READING,
                "threshold": EventField.NUM,
                "session": EventField.OPT_STR,
                "generation": EventField.INT,
                "action": EventField.STR,
            },
            line="context {percent}% full, over the warn threshold ({threshold}): {action}",
        ),
        "loop.context_hard_limit": define_event(
            "The context reached the hard threshold mid-turn: the turn is ended at this message.",
            {**_READING, "threshold": EventField.NUM, "session": EventField.OPT_STR, "generation": EventField.INT},
            line="context {percent}% full mid-turn, over the hard threshold: ending the turn",
        ),
        "loop.context_overflow": define_event(
            "The agent ran out of context; the engine restarts with a fresh session.",
            {"message": EventField.STR, "tokens": EventField.OPT_INT, "window": EventField.OPT_INT},
            line="the agent ran out of context: {message}",
        ),
        "loop.context_exhaustion_restart": define_event(
            "The session was restarted for context exhaustion; the briefing was written.",
            {
                "number": EventField.INT,
                "trigger": EventField.STR,
                **_READING,
                "briefing_chars": EventField.INT,
                "briefing_budget": EventField.INT,
                "briefing_source": {"enum": ["deterministic", "hook"]},
                "trimmed": EventField.STR_LIST,
                "path": EventField.OPT_STR,
                "archived": EventField.OPT_STR,
            },
            line="fresh session #{number} ({trigger}) with a {briefing_chars}-char briefing ({briefing_source})",
        ),
        "loop.context_baseline_high": define_event(
            "After a context restart, the fresh session started at or over the warn threshold.",
            {
                **_READING,
                "threshold": EventField.NUM,
                "briefing_chars": EventField.INT,
                "message": EventField.STR,
            },
        ),
        "loop.context_briefing_shrunk": define_event(
            "The briefing budget was lowered, so the next fresh session starts smaller.",
            {"budget_from": EventField.INT, "budget_to": EventField.INT, "baseline": EventField.INT, "briefing_chars": EventField.INT},
        ),
        "loop.context_baseline_too_high": define_event(
            "Shrinking the briefing cannot help: the loop stops after this iteration.",
            {"baseline": EventField.INT, "message": EventField.STR},
            line="{message}",
        ),
        "loop.context_interrupted_turn": define_event(
            "A turn was cut off; the files it changed are flagged or rolled back.",
            {
                "reason": EventField.STR,
                "action": {"enum": ["flag", "rollback"]},
                "files": EventField.STR_LIST,
                "count": EventField.INT,
            },
            line="a cut-off turn changed {count} file(s): {action}",
        ),
        "loop.context_rollback": define_event(
            "The files of a cut-off turn were restored to their pre-turn state.",
            {"restored": EventField.STR_LIST, "deleted": EventField.STR_LIST, "failed": EventField.STR_LIST},
        ),
        "loop.context_rollback_unavailable": define_event(
            "Rollback is configured but cannot be done; interrupted turns are flagged instead.",
            {"reason": EventField.STR},
        ),
        "loop.context_handoff_requested": define_event(
            "Graceful handoff: the next turn is asked to wrap up and write a note.",
            {"path": EventField.STR, **_READING},
        ),
        "loop.context_handoff": define_event(
            "The handoff turn ended; its note was read and checked against git.",
            {"written": EventField.BOOL, "chars": EventField.INT, "check": EventField.STR_LIST},
        ),
        "loop.context_briefing_enriched": define_event(
            "A plugin's context_monitor_briefing replaced the briefing.",
            {"chars": EventField.INT, "cut": EventField.BOOL},
        ),
        "loop.context_briefing_fallback": define_event(
            "A plugin's context_monitor_briefing failed, was slow or said nothing: the "
            "deterministic briefing is used.",
            {"reason": EventField.STR},
        ),
    }
