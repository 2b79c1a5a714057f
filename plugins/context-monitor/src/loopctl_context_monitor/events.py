"""The context monitor's events: their names (public constants) and their schemas.

Every event type starts with the plugin's name, ``context-monitor.``. Other plugins subscribe
through these constants, never through copies of the strings::

    from loopctl_context_monitor import events as context_events

    if event.type == context_events.EXHAUSTION_WARNING: ...

:data:`EXHAUSTION_SIGNALS` groups the events that say the agent's context ran (or is about to
run) out, the ones a failure classifier weighs as evidence of context exhaustion.
"""

from __future__ import annotations

from typing import Any

from loopctl import EventField, define_event

#: What every event type of this plugin starts with.
PREFIX = "context-monitor."

#: The fill of the current session: each streamed whole-percent change and once per iteration.
USAGE = "context-monitor.usage"
#: The fill could not be measured (no usage reported, or an unknown window).
USAGE_UNKNOWN = "context-monitor.usage_unknown"
#: The fill reached the warn threshold; ``action`` says what follows.
EXHAUSTION_WARNING = "context-monitor.exhaustion_warning"
#: The fill reached the hard threshold mid-turn: the turn is ended.
HARD_LIMIT = "context-monitor.hard_limit"
#: The agent ran out of context; the engine restarts with a fresh session.
OVERFLOW = "context-monitor.overflow"
#: A context restart happened; the briefing was written.
EXHAUSTION_RESTART = "context-monitor.exhaustion_restart"
#: A fresh session started at or over warn after a context restart.
BASELINE_HIGH = "context-monitor.baseline_high"
#: The briefing budget was lowered for the next restart.
BRIEFING_SHRUNK = "context-monitor.briefing_shrunk"
#: Shrinking the briefing cannot help: the loop stops after the iteration.
BASELINE_TOO_HIGH = "context-monitor.baseline_too_high"
#: A cut-off turn's files were flagged or rolled back.
INTERRUPTED_TURN = "context-monitor.interrupted_turn"
#: The files of a cut-off turn were restored.
ROLLBACK = "context-monitor.rollback"
#: Rollback is configured but cannot be done.
ROLLBACK_UNAVAILABLE = "context-monitor.rollback_unavailable"
#: Graceful handoff: the next turn is asked to wrap up and write a note.
HANDOFF_REQUESTED = "context-monitor.handoff_requested"
#: The handoff note was read and checked against git.
HANDOFF = "context-monitor.handoff"
#: Another plugin's ``context_monitor_briefing`` answer is used.
BRIEFING_ENRICHED = "context-monitor.briefing_enriched"
#: Another plugin's ``context_monitor_briefing`` failed, was slow or said nothing.
BRIEFING_FALLBACK = "context-monitor.briefing_fallback"

#: The events that are evidence of context exhaustion (warned, cut off, ran out, restarted).
EXHAUSTION_SIGNALS = (EXHAUSTION_WARNING, EXHAUSTION_RESTART, HARD_LIMIT, OVERFLOW)

_READING = {
    "tokens": EventField.OPT_INT,
    "window": EventField.OPT_INT,
    "percent": EventField.OPT_NUM,
}


def event_schemas() -> dict[str, dict[str, Any]]:
    """The schema of every event above, for ``register_event_schemas``."""
    f = EventField
    return {
        USAGE: define_event(
            "The context fill of the current agent session: on each streamed usage update "
            "(source 'stream', when the whole percent changes) and once per iteration (source "
            "'iteration'). Unknown fills have tokens or window null, never 0.",
            {
                **_READING,
                "session": f.OPT_STR,
                "restarts": f.INT,
                "source": {"enum": ["stream", "iteration"]},
                "known": f.BOOL,
            },
            {"reason": f.STR, "summary": f.STR},
        ),
        USAGE_UNKNOWN: define_event(
            "The fill could not be measured (no usage reported, or an unknown window); once per "
            "session restart and reason.",
            {"reason": f.STR, "model": f.OPT_STR, "agent": f.OPT_STR, "hint": f.STR},
            line="context fill unknown: {reason}",
        ),
        EXHAUSTION_WARNING: define_event(
            "The session's context reached the warn threshold.",
            {
                **_READING,
                "threshold": f.NUM,
                "session": f.OPT_STR,
                "restarts": f.INT,
                "action": f.STR,
            },
            {"summary": f.STR},
        ),
        HARD_LIMIT: define_event(
            "The context reached the hard threshold mid-turn: the turn is ended at this message.",
            {**_READING, "threshold": f.NUM, "session": f.OPT_STR, "restarts": f.INT},
            line="context {percent}% full mid-turn, over the hard threshold: ending the turn",
        ),
        OVERFLOW: define_event(
            "The agent ran out of context; the engine restarts with a fresh session.",
            {"message": f.STR, "tokens": f.OPT_INT, "window": f.OPT_INT},
            line="the agent ran out of context: {message}",
        ),
        EXHAUSTION_RESTART: define_event(
            "The session was restarted for context exhaustion; the briefing was written.",
            {
                "number": f.INT,
                "trigger": f.STR,
                **_READING,
                "briefing_chars": f.INT,
                "briefing_budget": f.INT,
                "briefing_source": {"enum": ["deterministic", "hook"]},
                "trimmed": f.STR_LIST,
                "path": f.OPT_STR,
                "archived": f.OPT_STR,
            },
            {"summary": f.STR},
        ),
        BASELINE_HIGH: define_event(
            "After a context restart, the fresh session started at or over the warn threshold.",
            {**_READING, "threshold": f.NUM, "briefing_chars": f.INT, "message": f.STR},
        ),
        BRIEFING_SHRUNK: define_event(
            "The briefing budget was lowered, so the next fresh session starts smaller.",
            {
                "budget_from": f.INT,
                "budget_to": f.INT,
                "baseline": f.INT,
                "briefing_chars": f.INT,
            },
        ),
        BASELINE_TOO_HIGH: define_event(
            "Shrinking the briefing cannot help: the loop stops after this iteration.",
            {"baseline": f.INT, "message": f.STR},
            line="{message}",
        ),
        INTERRUPTED_TURN: define_event(
            "A turn was cut off; the files it changed are flagged or rolled back.",
            {
                "reason": f.STR,
                "action": {"enum": ["flag", "rollback"]},
                "files": f.STR_LIST,
                "count": f.INT,
            },
            line="a cut-off turn changed {count} file(s): {action}",
        ),
        ROLLBACK: define_event(
            "The files of a cut-off turn were restored to their pre-turn state.",
            {"restored": f.STR_LIST, "deleted": f.STR_LIST, "failed": f.STR_LIST},
        ),
        ROLLBACK_UNAVAILABLE: define_event(
            "Rollback is configured but cannot be done; interrupted turns are flagged instead.",
            {"reason": f.STR},
        ),
        HANDOFF_REQUESTED: define_event(
            "Graceful handoff: the next turn is asked to wrap up and write a note.",
            {"path": f.STR, **_READING},
        ),
        HANDOFF: define_event(
            "The handoff turn ended; its note was read and checked against git.",
            {"written": f.BOOL, "chars": f.INT, "check": f.STR_LIST},
        ),
        BRIEFING_ENRICHED: define_event(
            "A plugin's context_monitor_briefing replaced the briefing.",
            {"chars": f.INT, "cut": f.BOOL},
        ),
        BRIEFING_FALLBACK: define_event(
            "A plugin's context_monitor_briefing failed, was slow or said nothing: the "
            "deterministic briefing is used.",
            {"reason": f.STR},
        ),
    }


#: Every event type this plugin emits.
ALL_EVENTS = (
    USAGE,
    USAGE_UNKNOWN,
    EXHAUSTION_WARNING,
    HARD_LIMIT,
    OVERFLOW,
    EXHAUSTION_RESTART,
    BASELINE_HIGH,
    BRIEFING_SHRUNK,
    BASELINE_TOO_HIGH,
    INTERRUPTED_TURN,
    ROLLBACK,
    ROLLBACK_UNAVAILABLE,
    HANDOFF_REQUESTED,
    HANDOFF,
    BRIEFING_ENRICHED,
    BRIEFING_FALLBACK,
)
