"""The context monitor's hook implementations (the ``context-monitor`` entry point).

Cheap to import on purpose: ``loopctl plugins list`` imports every enabled plugin, so everything
heavier than the hook marker is imported inside the hooks. Each loop gets its own
:class:`~loopctl_context_monitor.monitor.Monitor`; the hooks only forward to it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from loopctl.hookspecs import hookimpl

if TYPE_CHECKING:
    import pluggy

    from loopctl.engine import Loop, LoopOutcome, Restart
    from loopctl.model import AgentMessage, Decision, IterationRecord, PromptSection
    from loopctl_context_monitor.monitor import Monitor

NAME = "context-monitor"

_monitors: weakref.WeakKeyDictionary[Any, Monitor] = weakref.WeakKeyDictionary()


def monitor_for(loop: Loop) -> Monitor:
    """The monitor of ``loop``, made on first use (normally in ``on_loop_start``)."""
    monitor = _monitors.get(loop)
    if monitor is None:
        from loopctl_context_monitor.monitor import Monitor

        monitor = Monitor(loop, loop.plugin_config(NAME))
        _monitors[loop] = monitor
        if loop.resumed:  # on_restart can come first: a resume that finishes a restart
            monitor.restore()
    return monitor


@hookimpl
def add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    from loopctl_context_monitor import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_context_monitor.config import ContextMonitorConfig

    return {NAME: ContextMonitorConfig}


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_context_monitor.events import event_schemas

    return event_schemas()


@hookimpl
def on_loop_start(loop: Loop) -> None:
    monitor_for(loop)


@hookimpl
def before_iteration(loop: Loop) -> None:
    monitor_for(loop).before_iteration()


@hookimpl
def compose_prompt(loop: Loop) -> list[PromptSection]:
    return monitor_for(loop).compose_prompt()


@hookimpl
def on_agent_message(loop: Loop, message: AgentMessage) -> Decision | None:
    monitor = _monitors.get(loop)
    if monitor is None:
        monitor = monitor_for(loop)
    return monitor.on_message(message)


@hookimpl
def after_iteration(loop: Loop, record: IterationRecord) -> Decision | None:
    return monitor_for(loop).after_iteration(record)


@hookimpl
def on_restart(loop: Loop, restart: Restart) -> None:
    monitor_for(loop).on_restart(restart)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    monitor = _monitors.pop(loop, None)
    if monitor is not None:
        monitor.on_loop_end(outcome)
