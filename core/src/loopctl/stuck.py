"""Stuck detection: the same failure, iteration after iteration, with no progress.

An iteration *repeats* the previous one when its error fingerprint or its set of failing tests is
the same and it made no progress: no new commit, no change to the working tree, no fewer failing
tests. A run of ``window`` (K) such iterations escalates one step: first a nudge in the prompt,
then (if it goes on) a session restart, then a stop with status ``stuck``. Progress of any kind
resets both the run and the escalation. When every iteration starts a fresh session
(``session = "fresh"``) a restart changes nothing, so the nudge is followed by the stop; and a
run of K iterations in which the agent changed nothing at all stops at once.

Iterations that failed for infrastructure reasons (rate limits, network, timeouts) are skipped:
they neither extend nor break a run, so a loop is never called stuck because a service was down.
Error lines matching a ``stuck.exempt`` pattern are expected repetition and never count.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence

import attrs

from loopctl.model import INFRASTRUCTURE_ERRORS, IterationRecord


class Escalation(int, enum.Enum):
    NONE = 0
    NUDGE = 1
    RESTART = 2
    STOP = 3


@attrs.define
class StuckDetector:
    window: int = 3
    exempt: Sequence[str] = ()
    #: Consecutive iterations ending now with the same failure and no progress (1 = just this one).
    streak: int = 0
    level: Escalation = Escalation.NONE
    #: Whether the streak's first iteration changed files (the others never do: that would be
    #: progress).
    first_changed: bool = False
    _previous: IterationRecord | None = None
    _patterns: list[re.Pattern[str]] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self._patterns = [re.compile(p) for p in self.exempt]

    def _is_exempt(self, error_lines: Sequence[str]) -> bool:
        return bool(self._patterns) and any(
            p.search(line) for p in self._patterns for line in error_lines
        )

    def observe(
        self,
        record: IterationRecord,
        *,
        error_lines: Sequence[str],
        infrastructure: bool,
        fresh: bool = False,
    ) -> Escalation:
        """Take in a finished iteration; return the escalation it triggers (NONE most often).

        ``fresh``: every iteration starts a new session (``session = "fresh"``), so a restart
        would give the agent what it gets anyway: the nudge is followed by the stop, and a
        streak of ``window`` iterations that all changed nothing stops at once."""
        if infrastructure:
            return Escalation.NONE
        previous, self._previous = self._previous, record
        if record.tests_passed or self._is_exempt(error_lines):
            self.streak, self.level, self.first_changed = 0, Escalation.NONE, False
            return Escalation.NONE
        if (
            previous is None
            or previous.tests_passed
            or made_progress(previous, record)
            or not same_failure(previous, record)
        ):
            self.streak, self.level = 1, Escalation.NONE
            self.first_changed = bool(record.changed_files)
        else:
            self.streak += 1
        due = Escalation(min(Escalation.STOP, max(0, self.streak - self.window + 1)))
        if fresh and (due is Escalation.RESTART or self.idle >= self.window):
            due = Escalation.STOP  # a fresh session each time: a restart would change nothing
        if due > self.level:
            self.level = due
            return due
        return Escalation.NONE

    @property
    def idle(self) -> int:
        """How many iterations of the streak changed nothing at all."""
        return max(0, self.streak - self.first_changed)

    @property
    def previous(self) -> IterationRecord | None:
        """The last iteration observed that was not skipped: the next one is compared with it."""
        return self._previous

    def resume(
        self,
        streak: int,
        previous: IterationRecord | None,
        level: int,
        recent: Sequence[IterationRecord] = (),
    ) -> None:
        """Continue from a saved ``streak`` (``loopctl resume``), comparing the next iteration
        with ``previous``: what :meth:`restore` computes from the whole history. Whether the
        streak's first iteration changed files is read from ``recent`` (the last records); when
        they do not reach back so far, it is taken to have (no early stop for changing nothing)."""
        self.streak, self._previous = max(0, streak), previous
        self.level = Escalation(min(max(level, 0), Escalation.STOP))
        counted = [r for r in recent if not is_infrastructure_failure(r)]
        first = counted[-self.streak] if 0 < self.streak <= len(counted) else None
        self.first_changed = first is None or bool(first.changed_files)

    def restore(self, history: Sequence[IterationRecord], level: int) -> None:
        """Rebuild the streak from recorded history after ``loopctl resume``."""
        self.streak, self._previous = 0, None
        for record in history:
            self.observe(record, error_lines=(), infrastructure=is_infrastructure_failure(record))
        self.level = Escalation(min(max(level, 0), Escalation.STOP))


def same_failure(a: IterationRecord, b: IterationRecord) -> bool:
    """Whether two failed iterations failed the same way, by the stuck rule: the same error
    fingerprint, or the same set of failing tests."""
    if a.error_fingerprint and a.error_fingerprint == b.error_fingerprint:
        return True
    return bool(a.failing_tests) and sorted(a.failing_tests) == sorted(b.failing_tests)


def made_progress(previous: IterationRecord, current: IterationRecord) -> bool:
    """Whether ``current`` moved on from ``previous``: a new commit, a changed working tree, or
    fewer failing tests. Progress of any kind resets stuck detection."""
    if current.commit and current.commit != previous.commit:
        return True
    if current.tree_hash and current.tree_hash != previous.tree_hash:
        return True
    return len(current.failing_tests) < len(previous.failing_tests)


_INFRASTRUCTURE_KINDS = frozenset(kind.value for kind in INFRASTRUCTURE_ERRORS)


def is_infrastructure_failure(record: IterationRecord) -> bool:
    """Whether the iteration failed for a reason that is not the agent's: an infrastructure
    error of the agent's turn (rate limit, network, timeout) or a plugin's
    :class:`~loopctl.model.NotAgentsFault`. Stuck detection skips such iterations."""
    return (
        "not_agents_fault" in record.annotations or record.agent.error_kind in _INFRASTRUCTURE_KINDS
    )
