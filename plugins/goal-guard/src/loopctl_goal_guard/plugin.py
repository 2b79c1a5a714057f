"""goal-guard's hook implementations (the ``goal-guard`` entry point).

Cheap to import: everything but the hook markers is imported when a hook first runs. One loop
runs at a time in a process, so the guard of the current run is kept in this module.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from loopctl.hookspecs import hookimpl

if TYPE_CHECKING:
    from loopctl.engine import Loop, LoopOutcome, Restart
    from loopctl.model import Decision, Event, IterationRecord, PromptSection
    from loopctl_goal_guard.guard import EarlySightings, GoalGuard

NAME = "goal-guard"

_guard: GoalGuard | None = None
_early: EarlySightings | None = None


def current_guard() -> GoalGuard | None:
    """The guard of the run in progress (None between runs): for tests and benchmarks."""
    return _guard


def _sightings() -> EarlySightings:
    global _early
    if _early is None:
        from loopctl_goal_guard.guard import EarlySightings

        _early = EarlySightings()
    return _early


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
def on_loop_start(loop: Loop) -> None:
    global _guard, _early
    from loopctl_goal_guard.guard import GoalGuard

    early = _sightings()
    _early = None
    _guard = GoalGuard(loop, loop.plugin_config(NAME))
    _guard.start(early)


@hookimpl(tryfirst=True)
def before_iteration(loop: Loop) -> None:
    if _guard is not None:
        _guard.check("before_iteration")


@hookimpl
def compose_prompt(loop: Loop) -> PromptSection | None:
    return _guard.notes_section() if _guard is not None else None


@hookimpl(wrapper=True, tryfirst=True, specname="compose_prompt")
def police_prompt(loop: Loop) -> Generator[None, list[Any], list[Any]]:
    """Outermost wrapper of compose_prompt: one "Your Goal", the sealed goal, first."""
    results = yield
    guard = _guard
    if guard is None:
        return results
    try:
        return guard.police(results)
    except Exception as exc:  # noqa: BLE001 - a wrapper is not isolated by the host
        import traceback

        loop.emit(
            "plugin.error",
            plugin=NAME,
            hook="compose_prompt",
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[
                -4000:
            ],
        )
        return results


@hookimpl(trylast=True)
def after_iteration(loop: Loop, record: IterationRecord) -> Decision | None:
    return _guard.collect(record) if _guard is not None else None


@hookimpl(trylast=True)
def on_restart(loop: Loop, restart: Restart) -> None:
    if _guard is not None:
        _guard.collect(None)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    global _guard
    guard, _guard = _guard, None
    if guard is not None:
        guard.end(outcome)


@hookimpl
def on_event(event: Event) -> None:
    kind = event.type
    if kind == "loop.original_goal_repaired":
        if event.data.get("source") == NAME:
            return
        if _guard is not None and _guard.sealed is not None:
            _guard.refuse(event.data)
        else:
            _sightings().foreign_changes.append(dict(event.data))
    elif kind in ("loop.start", "loop.resume"):
        global _early
        from loopctl_goal_guard.guard import EarlySightings

        goal = event.data.get("goal")  # a new run: forget what an earlier one left behind
        _early = EarlySightings(start_goal=goal if isinstance(goal, str) else None)
    elif kind == "loop.working_goal_set":
        source = event.data.get("source")
        if source != NAME and _guard is not None:
            _guard.note_foreign_working_goal(str(source))


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_goal_guard.events import event_schemas

    return event_schemas()
