"""The hook goal-guard adds (through ``add_hookspecs``): the one way notes reach the prompt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl import hookspec

if TYPE_CHECKING:
    from loopctl import Loop


@hookspec
def goal_guard_notes(loop: Loop) -> list[Any] | Any | None:
    """Report notes for the agent: things this iteration learned that the next ones should know.

    Called once after every iteration (after ``on_failure``/``on_success`` and the other
    plugins' ``after_iteration``) and once after every session restart. Return a note, a list of
    notes, or ``None``. A note is a :class:`loopctl_goal_guard.Note`, a dict with the same keys
    (``text``, ``key``, ``priority``, ``tests``, ``until_pass``, ``resolved``,
    ``ttl_iterations``) so the reporting plugin need not import goal-guard, or a plain string.

    Report a note again on later iterations to keep it fresh (it is shown once, with a count);
    return ``{"key": ..., "resolved": True}`` when it no longer applies. Notes appear only in
    goal-guard's "Notes" prompt section, never in "Your Goal". The reporting plugin's name is
    the note's source unless it names one.

    Results: collected from every plugin; each plugin is called on its own so a failing one
    loses only its own notes.

    .. versionadded:: 0.1
    """
