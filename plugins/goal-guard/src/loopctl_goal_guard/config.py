"""The plugin's config section, ``[plugins.goal-guard]`` (``[tool.loopctl.plugins.goal-guard]``)."""

from __future__ import annotations

import attrs

#: What to do when the original goal was changed: put it back (always), and optionally stop.
ON_VIOLATION = ("repair", "stop")


@attrs.define(kw_only=True)
class GoalGuardConfig:
    """Every key has a default; the section may be left out entirely."""

    #: Size budget of the "Notes" prompt section, in characters (its body).
    notes_budget_chars: int = 2000
    #: Priority of the "Notes" section (the goal is 100 and is never trimmed).
    notes_priority: int = 60
    #: How many notes are kept at most (beyond it the oldest, lowest-priority ones are dropped).
    max_notes: int = 1000
    #: Each note's text is cut to this many characters.
    max_note_chars: int = 400
    #: Derive a note from each failing test (it expires when that test passes).
    test_notes: bool = True
    #: At most this many test-failure notes per iteration.
    max_test_notes: int = 10
    #: Notes not reported again for this many iterations expire (0: only when resolved).
    note_ttl_iterations: int = 0
    #: "repair" puts the original goal back; "stop" also stops the loop after the iteration.
    on_violation: str = "repair"

    def __attrs_post_init__(self) -> None:
        from loopctl import InvalidFields

        problems: list[tuple[tuple[str, ...], str]] = []

        def at_least(name: str, minimum: int) -> None:
            value = getattr(self, name)
            if value < minimum:
                problems.append(((name,), f"must be at least {minimum}, got {value}"))

        at_least("notes_budget_chars", 200)
        at_least("max_notes", 1)
        at_least("max_note_chars", 40)
        at_least("max_test_notes", 0)
        at_least("note_ttl_iterations", 0)
        if not 0 <= self.notes_priority <= 99:
            problems.append(
                (("notes_priority",), f"must be from 0 to 99, got {self.notes_priority}")
            )
        if self.on_violation not in ON_VIOLATION:
            problems.append(
                (
                    ("on_violation",),
                    f"must be one of {', '.join(ON_VIOLATION)}, got {self.on_violation!r}",
                )
            )
        if problems:
            raise InvalidFields(problems)
