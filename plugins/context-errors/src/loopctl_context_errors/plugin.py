"""The loopctl hooks of the context-errors plugin (entry point ``context-errors``).

Kept cheap to import: ``loopctl plugins list`` imports every enabled plugin, so everything
heavier than attrs (SQLite, rich, the rules) is imported inside the hooks, from
:mod:`loopctl_context_errors.runtime`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl import hookimpl

if TYPE_CHECKING:
    import pluggy

    from loopctl import CliCommand, IterationRecord, Loop, LoopOutcome, PromptSection, TestRun

NAME = "context-errors"


@hookimpl
def add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    from loopctl_context_errors import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_context_errors.config import ContextErrorsConfig

    return {NAME: ContextErrorsConfig}


@hookimpl
def register_commands(cli: Any) -> None:
    from loopctl_context_errors.cli import register

    register(cli)


@hookimpl
def register_cli_commands() -> list[CliCommand]:
    from loopctl_context_errors.reportcmd import REPORT

    return [REPORT]


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_context_errors.events import core_event_schemas

    return core_event_schemas()


@hookimpl
def on_loop_start(loop: Loop) -> None:
    from loopctl_context_errors import runtime

    runtime.start(loop)


@hookimpl
def compose_prompt(loop: Loop) -> PromptSection | None:
    from loopctl_context_errors import runtime

    return runtime.historical_context(loop)


@hookimpl
def on_failure(loop: Loop, record: IterationRecord, test_run: TestRun | None) -> None:
    """Report the failure (no verdict: a failure this plugin explains is still the agent's)."""
    from loopctl_context_errors import runtime

    runtime.handle_failure(loop, record, test_run)


@hookimpl
def on_success(loop: Loop, record: IterationRecord) -> None:
    """Judge the outstanding suggestions (no veto: a pass is a pass)."""
    from loopctl_context_errors import runtime

    runtime.handle_success(loop, record)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    from loopctl_context_errors import runtime

    runtime.handle_loop_end(loop, outcome)
