"""goal-guard's hook implementations (the ``goal-guard`` entry point).

Cheap to import: everything but the hook markers and the stash keys is imported when a hook
first runs. The guard of a run lives in that run's ``loop.stash`` under :data:`GUARD`; what
``on_event`` learns before the guard is started (which plugin answered
``resolve_original_goal`` first) waits in the stash too.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from loopctl import StashKey, hookimpl

if TYPE_CHECKING:
    from loopctl import (
        Decision,
        Event,
        IterationRecord,
        Loop,
        LoopOutcome,
        PromptSection,
        Restart,
        TestRun,
    )
    from loopctl_goal_guard.guard import GoalGuard

NAME = "goal-guard"
#: The run's guard, in ``loop.stash``.
GUARD = StashKey["GoalGuard"]()
#: The plugin whose answer to ``resolve_original_goal`` came before goal-guard's and changed
#: the goal (seen by ``on_event``, used by ``on_loop_start``).
PREEMPTED_BY = StashKey[str]()
#: The core's events goal-guard follows (core events keep their ``loop.`` names).
_WORKING_GOAL_SET = "loop.working_goal_set"
_GOAL_RESTORED = "loop.original_goal_restored"


def current_guard(loop: Loop) -> GoalGuard | None:
    """The guard of ``loop`` (None before goal-guard's first hook ran): for tests and
    benchmarks."""
    return loop.stash.get(GUARD)


def _new_guard(loop: Loop) -> GoalGuard:
    from loopctl_goal_guard.guard import GoalGuard

    guard = GoalGuard(loop, loop.plugin_config(NAME))
    loop.stash[GUARD] = guard
    return guard


def _report(loop: Loop, hook: str, exc: BaseException) -> None:
    import traceback

    loop.emit(
        "plugin.error",
        plugin=NAME,
        hook=hook,
        error=f"{type(exc).__name__}: {exc}",
        traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-4000:],
    )


@hookimpl
def add_hookspecs(pluginmanager: Any) -> None:
    from loopctl_goal_guard import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_goal_guard.config import GoalGuardConfig

    return {NAME: GoalGuardConfig}


@hookimpl
def register_commands(cli: Any) -> None:
    from loopctl_goal_guard.cli import register

    register(cli)


@hookimpl(tryfirst=True)
def resolve_original_goal(loop: Loop, stored: str) -> str | None:
    """Seal the goal of a fresh run; on resume, put back the sealed goal (state file edited on
    disk) or recover a legacy one. Answers for every goal it guards, so no later plugin can
    change it."""
    try:
        return _new_guard(loop).resolve(stored)
    except Exception as exc:  # noqa: BLE001 - the engine does not isolate this hook's callers
        _report(loop, "resolve_original_goal", exc)
        return None


@hookimpl(tryfirst=True)
def on_loop_start(loop: Loop) -> None:
    guard = loop.stash.get(GUARD)
    if guard is None:  # another plugin answered resolve_original_goal before goal-guard
        guard = _new_guard(loop)
    guard.start(loop.stash.get(PREEMPTED_BY))


@hookimpl(tryfirst=True)
def before_iteration(loop: Loop) -> None:
    guard = loop.stash.get(GUARD)
    if guard is not None:
        guard.check("before_iteration")


@hookimpl
def compose_prompt(loop: Loop) -> PromptSection | None:
    guard = loop.stash.get(GUARD)
    return guard.notes_section() if guard is not None else None


@hookimpl(wrapper=True, tryfirst=True, specname="compose_prompt")
def police_prompt(loop: Loop) -> Generator[None, list[Any], list[Any]]:
    """Outermost wrapper of compose_prompt: one "Your Goal", the sealed goal, first."""
    results = yield
    guard = loop.stash.get(GUARD)
    if guard is None:
        return results
    try:
        return guard.police(results)
    except Exception as exc:  # noqa: BLE001 - a wrapper is not isolated by the host
        _report(loop, "compose_prompt", exc)
        return results


@hookimpl(trylast=True)
def after_iteration(
    loop: Loop, record: IterationRecord, test_run: TestRun | None
) -> Decision | None:
    from loopctl import IterationEnd

    guard = loop.stash.get(GUARD)
    # A rate-limit wait (the iteration runs again) or an interruption (the run is ending) is not
    # recorded and its result is ignored: nothing is learned from it.
    if guard is None or record.ending in (IterationEnd.RATE_LIMITED, IterationEnd.INTERRUPTED):
        return None
    return guard.collect(record, test_run)


@hookimpl(trylast=True)
def on_restart(loop: Loop, restart: Restart) -> None:
    guard = loop.stash.get(GUARD)
    if guard is not None:
        guard.collect(None)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    guard = loop.stash.get(GUARD)
    if guard is not None:
        del loop.stash[GUARD]
        guard.end(outcome)


@hookimpl
def on_event(event: Event, loop: Loop) -> None:
    """Follow who sets the working goal (named when goal-guard puts it back) and who answered
    ``resolve_original_goal`` first. One comparison for any other event."""
    kind = event.type
    if kind == _WORKING_GOAL_SET:
        guard = loop.stash.get(GUARD)
        if guard is not None:
            guard.working_goal_set(event.data.get("source"))
    elif kind == _GOAL_RESTORED:
        source = event.data.get("source")
        if source != NAME:  # another plugin answered before goal-guard
            loop.stash[PREEMPTED_BY] = str(source or "?")


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_goal_guard.events import event_schemas

    return event_schemas()
