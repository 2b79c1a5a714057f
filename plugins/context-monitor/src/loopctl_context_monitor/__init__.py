"""loopctl-context-monitor: a true context fuel gauge, a restart before the agent runs out of
context, and a deterministic briefing that carries the work into the fresh session.

The hooks are in :mod:`loopctl_context_monitor.plugin` (the ``context-monitor`` entry point).
"""

from __future__ import annotations

__version__ = "0.1.0"
