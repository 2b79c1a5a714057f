"""The events the context monitor writes to ``events.jsonl``, for ``loopctl events schema``."""

from __future__ import annotations

from typing import Any

from loopctl.events import BOOL, INT, NUM, OPT_INT, OPT_NUM, OPT_STR, STR, STR_LIST, event

_READING = {"tokens": OPT_INT, "window": OPT_INT, "percent": OPT_NUM}


def event_schemas() -> dict[str, dict[str, Any]]:
    return {
        "loop.context_usage": event(
            "The context fill of the current agent session: on each streamed usage update "
            "(source 'stream', when the whole percent changes) and once per iteration (source "
            "'iteration'). Unknown fills have tokens or window null, never 0.",
            {
                **_READING,
                "session": OPT_STR,
                "generation": INT,
                "source": {"enum": ["stream", "iteration"]},
                "known": BOOL,
            },
            {"reason": STR},
        ),
        "loop.context_usage_unknown": event(
            "The fill could not be measured (no usage reported, or an unknown window); once per "
            "restart generation and reason.",
            {"reason": STR, "model": OPT_STR, "agent": OPT_STR, "hint": STR},
            line="context fill unknown: {reason}",
        ),
        "loop.context_exhaustion_warning": event(
            "The session's context reached the warn threshold.",
            {
                **_READING,
                "threshold": NUM,
                "session": OPT_STR,
                "generation": INT,
                "action": STR,
            },
            line="context {percent}% full, over the warn threshold ({threshold}): {action}",
        ),
        "loop.context_hard_limit": event(
            "The context reached the hard threshold mid-turn: the turn is ended at this message.",
            {**_READING, "threshold": NUM, "session": OPT_STR, "generation": INT},
            line="context {percent}% full mid-turn, over the hard threshold: ending the turn",
        ),
        "loop.context_overflow": event(
            "The agent ran out of context; the engine restarts with a fresh session.",
            {"message": STR, "tokens": OPT_INT, "window": OPT_INT},
            line="the agent ran out of context: {message}",
        ),
        "loop.context_exhaustion_restart": event(
            "The session was restarted for context exhaustion; the briefing was written.",
            {
                "number": INT,
                "trigger": STR,
                **_READING,
                "briefing_chars": INT,
                "briefing_budget": INT,
                "briefing_source": {"enum": ["deterministic", "hook"]},
                "trimmed": STR_LIST,
                "path": OPT_STR,
                "archived": OPT_STR,
            },
            line="fresh session #{number} ({trigger}) with a {briefing_chars}-char briefing ({briefing_source})",
        ),
        "loop.context_baseline_high": event(
            "After a context restart, the fresh session started at or over the warn threshold.",
            {
                **_READING,
                "threshold": NUM,
                "briefing_chars": INT,
                "message": STR,
            },
        ),
        "loop.context_briefing_shrunk": event(
            "The briefing budget was lowered, so the next fresh session starts smaller.",
            {"budget_from": INT, "budget_to": INT, "baseline": INT, "briefing_chars": INT},
        ),
        "loop.context_baseline_too_high": event(
            "Shrinking the briefing cannot help: the loop stops after this iteration.",
            {"baseline": INT, "message": STR},
            line="{message}",
        ),
        "loop.context_interrupted_turn": event(
            "A turn was cut off; the files it changed are flagged or rolled back.",
            {
                "reason": STR,
                "action": {"enum": ["flag", "rollback"]},
                "files": STR_LIST,
                "count": INT,
            },
            line="a cut-off turn changed {count} file(s): {action}",
        ),
        "loop.context_rollback": event(
            "The files of a cut-off turn were restored to their pre-turn state.",
            {"restored": STR_LIST, "deleted": STR_LIST, "failed": STR_LIST},
        ),
        "loop.context_rollback_unavailable": event(
            "Rollback is configured but cannot be done; interrupted turns are flagged instead.",
            {"reason": STR},
        ),
        "loop.context_handoff_requested": event(
            "Graceful handoff: the next turn is asked to wrap up and write a note.",
            {"path": STR, **_READING},
        ),
        "loop.context_handoff": event(
            "The handoff turn ended; its note was read and checked against git.",
            {"written": BOOL, "chars": INT, "check": STR_LIST},
        ),
        "loop.context_briefing_enriched": event(
            "A plugin's context_monitor_briefing replaced the briefing.",
            {"chars": INT, "cut": BOOL},
        ),
        "loop.context_briefing_fallback": event(
            "A plugin's context_monitor_briefing failed, was slow or said nothing: the "
            "deterministic briefing is used.",
            {"reason": STR},
        ),
    }
