"""The failure-classifier plugin's hook implementations.

Kept cheap to import (``loopctl plugins list`` imports every enabled plugin): everything heavy
is imported inside the hooks, and the work lives in :mod:`loopctl_failure_classifier.runtime`.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from loopctl import hookimpl

if TYPE_CHECKING:
    import pluggy

    from loopctl import (
        CliCommand,
        CompletionVeto,
        Decision,
        IterationRecord,
        Loop,
        LoopOutcome,
        NotAgentsFault,
        PromptSection,
        RunOption,
        TestRun,
    )

PLUGIN_NAME = "failure-classifier"

#: The plugin managers this module was registered with (the latest one answers
#: ``register_run_options``, which has no other way to see the custom modes).
_MANAGERS: list[weakref.ref[Any]] = []


@hookimpl
def add_hookspecs(pluginmanager: pluggy.PluginManager) -> None:
    from loopctl_failure_classifier import hookspecs

    pluginmanager.add_hookspecs(hookspecs)
    _MANAGERS[:] = [ref for ref in _MANAGERS if ref() is not None]
    _MANAGERS.append(weakref.ref(pluginmanager))


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_failure_classifier.config import FailureClassifierConfig

    return {PLUGIN_NAME: FailureClassifierConfig}


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_failure_classifier.events import event_schemas

    return event_schemas()


@hookimpl
def register_run_options() -> list[RunOption]:
    from loopctl import RunOption
    from loopctl_failure_classifier.arbitration import hook_modes
    from loopctl_failure_classifier.model import BUILTIN_MODES

    modes = list(BUILTIN_MODES)
    manager = _MANAGERS[-1]() if _MANAGERS else None
    if manager is not None:
        modes += sorted(hook_modes(manager.hook)[0])
    return [
        RunOption(
            "--failure-mode",
            f"plugins.{PLUGIN_NAME}.force_mode",
            help="Treat every failure as this mode (for testing a recovery; skips classification)",
            metavar="MODE",
            choices=tuple(modes),
        )
    ]


@hookimpl
def register_cli_commands() -> list[CliCommand]:
    from loopctl_failure_classifier.cli import CLASSIFY

    return [CLASSIFY]


@hookimpl
def on_loop_start(loop: Loop) -> None:
    from loopctl_failure_classifier import runtime

    runtime.start(loop)


@hookimpl
def on_failure(
    loop: Loop, record: IterationRecord, test_run: TestRun | None
) -> NotAgentsFault | None:
    from loopctl_failure_classifier import runtime

    return runtime.on_failure(loop, record, test_run)


@hookimpl
def on_success(loop: Loop, record: IterationRecord, test_run: TestRun) -> CompletionVeto | None:
    from loopctl_failure_classifier import runtime

    return runtime.on_success(loop, record, test_run)


@hookimpl
def after_iteration(loop: Loop, record: IterationRecord) -> Decision | None:
    from loopctl_failure_classifier import runtime

    return runtime.recover(loop, record)


@hookimpl
def compose_prompt(loop: Loop) -> list[PromptSection]:
    from loopctl_failure_classifier import runtime

    return runtime.prompt_sections(loop)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    from loopctl_failure_classifier import runtime

    runtime.report(loop, outcome)
