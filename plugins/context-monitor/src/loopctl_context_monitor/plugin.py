"""The context monitor's hook implementations (the ``context-monitor`` entry point).

Cheap to import on purpose: ``loopctl plugins list`` imports every enabled plugin, so everything
heavier than the hook marker is imported inside the hooks. Each run gets its own
:class:`~loopctl_context_monitor.monitor.Monitor`, kept in ``loop.stash`` under :data:`MONITOR`;
the hooks only forward to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl import StashKey, hookimpl

if TYPE_CHECKING:
    import pluggy

    from loopctl import (
        AgentMessage,
        Decision,
        IterationRecord,
        Loop,
        LoopOutcome,
        PromptSection,
        Restart,
        TestRun,
    )
    from loopctl_context_monitor.monitor import Monitor

NAME = "context-monitor"

#: The run's monitor, in ``loop.stash``.
MONITOR: StashKey[Monitor] = StashKey()


def monitor_for(loop: Loop) -> Monitor:
    """The monitor of ``loop``'s run, made on first use (normally in ``on_loop_start``)."""
    monitor = loop.stash.get(MONITOR)
    if monitor is None:
        from loopctl_context_monitor.monitor import Monitor

        monitor = Monitor(loop, loop.plugin_config(NAME))
        loop.stash[MONITOR] = monitor
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
    monitor = loop.stash.get(MONITOR)
    if monitor is None:
        monitor = monitor_for(loop)
    return monitor.on_message(message)


@hookimpl
def after_iteration(
    loop: Loop, record: IterationRecord, test_run: TestRun | None
) -> Decision | None:
    return monitor_for(loop).after_iteration(record, test_run)


@hookimpl
def on_restart(loop: Loop, restart: Restart) -> None:
    monitor_for(loop).on_restart(restart)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    monitor = loop.stash.get(MONITOR)
    if monitor is not None:
        del loop.stash[MONITOR]
        monitor.on_loop_end(outcome)
