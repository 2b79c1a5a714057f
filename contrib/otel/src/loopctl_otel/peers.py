"""Other plugins' events that otel treats specially, named through those plugins' published
constants, never through copies of the strings.

Each import is optional: loopctl-otel works without those plugins installed, and then their
events simply never arrive.
"""

from __future__ import annotations


def _context_usage() -> str | None:
    try:
        from loopctl_context_monitor.events import USAGE
    except ImportError:  # loopctl-context-monitor is not installed: no such event
        return None
    return USAGE


#: The context monitor's fill reading (``None`` without that plugin): a span attribute of the
#: iteration, and too frequent to be worth a span event each.
CONTEXT_USAGE = _context_usage()

__all__ = ["CONTEXT_USAGE"]
