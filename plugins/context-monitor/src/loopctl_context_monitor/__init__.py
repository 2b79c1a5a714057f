"""loopctl-context-monitor: a true context fuel gauge, a restart before the agent runs out of
context, and a deterministic briefing that carries the work into the fresh session.

The hooks are in :mod:`loopctl_context_monitor.plugin` (the ``context-monitor`` entry point).
The names of the events it emits are public constants (:mod:`loopctl_context_monitor.events`),
re-exported here, so other plugins subscribe without copying strings::

    import loopctl_context_monitor as context_monitor

    if event.type in context_monitor.EXHAUSTION_SIGNALS: ...
"""

from __future__ import annotations

from loopctl_context_monitor import events
from loopctl_context_monitor.events import (
    ALL_EVENTS,
    BASELINE_HIGH,
    BASELINE_TOO_HIGH,
    BRIEFING_ENRICHED,
    BRIEFING_FALLBACK,
    BRIEFING_SHRUNK,
    EXHAUSTION_RESTART,
    EXHAUSTION_SIGNALS,
    EXHAUSTION_WARNING,
    HANDOFF,
    HANDOFF_REQUESTED,
    HARD_LIMIT,
    INTERRUPTED_TURN,
    OVERFLOW,
    PREFIX,
    ROLLBACK,
    ROLLBACK_UNAVAILABLE,
    USAGE,
    USAGE_UNKNOWN,
)

__version__ = "0.2.0"

__all__ = [
    "ALL_EVENTS",
    "BASELINE_HIGH",
    "BASELINE_TOO_HIGH",
    "BRIEFING_ENRICHED",
    "BRIEFING_FALLBACK",
    "BRIEFING_SHRUNK",
    "EXHAUSTION_RESTART",
    "EXHAUSTION_SIGNALS",
    "EXHAUSTION_WARNING",
    "HANDOFF",
    "HANDOFF_REQUESTED",
    "HARD_LIMIT",
    "INTERRUPTED_TURN",
    "OVERFLOW",
    "PREFIX",
    "ROLLBACK",
    "ROLLBACK_UNAVAILABLE",
    "USAGE",
    "USAGE_UNKNOWN",
    "__version__",
    "events",
]
