"""How a loop ended, read from its journals when ``loop-state.md`` does not say so yet.

A loop records its ending in this order: the last iteration's stop decision in
``iterations.jsonl`` (a stop's record carries its status and message), the report, ``loop.end``
in ``events.jsonl``, and last ``loop-state.md`` with the final status. A loopctl killed in
between leaves a state that still says ``running``; :func:`recorded_end` finds the ending in the
journals, so that ``resume`` closes that loop instead of running it again and ``status`` says
how it ended instead of that it died.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, TypeGuard

import attrs

from loopctl.model import IterationRecord, StopStatus, exit_code_for
from loopctl.records import structure_record
from loopctl.state.journal import tail_jsonl
from loopctl.state.layout import EVENTS_FILE, ITERATIONS_FILE
from loopctl.state.loopstate import LoopState

#: The events that begin or end one loopctl process's part of a loop.
BOUNDS = ("loop.start", "loop.resume", "loop.end")
#: How many of the last events are searched for the latest of :data:`BOUNDS`: a loop writes
#: only a few events after ``loop.end`` (write errors, its plugins' answers to it).
TAIL_EVENTS = 200
#: Statuses a loop is resumed from, not closed with: ``resume`` continues such a loop.
CONTINUED = (StopStatus.INTERRUPTED.value, StopStatus.DISK_FULL.value)


@attrs.frozen
class RecordedEnd:
    """How a loop ended, as its journals recorded it."""

    status: str
    reason: str
    message: str
    iterations: int
    restarts: int
    #: Where it was recorded: ``events.jsonl`` (its ``loop.end``: the loop went through its
    #: whole end, report included) or ``iterations.jsonl`` (only the stop decision).
    source: str
    #: The ``loop.end`` event as it was recorded (None when ``source`` is the journal).
    event: dict[str, Any] | None = None

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.status)

    @property
    def continued(self) -> bool:
        """Whether ``resume`` continues a loop that ended so (interrupted, a full disk)."""
        return self.status in CONTINUED

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "exit_code": self.exit_code,
            "iterations": self.iterations,
            "restarts": self.restarts,
            "recorded_in": self.source,
        }


def recorded_end(state_dir: Path, state: LoopState) -> RecordedEnd | None:
    """The ending the journals of ``state_dir`` recorded and ``state`` (its ``loop-state.md``,
    which says ``running`` or ``restarting``) does not know of; None when the loop did not end.

    ``loop.end`` counts when it is the last process's (no ``loop.start`` or ``loop.resume``
    after it) and came after the state was written: a state as new (the same millisecond)
    or newer was written after it, by that loop's end or by a ``resume`` that died before its
    first event (it was continuing the loop). Else the journal's last record counts when it
    decided to stop and the state's summary does not cover it."""
    if state.status not in ("running", "restarting"):
        return None
    bound = _last_bound(state_dir / EVENTS_FILE)
    if _is_end(bound) and _number(bound.get("ts")) > state.updated_at:
        return _from_event(bound)
    last = tail_jsonl(state_dir / ITERATIONS_FILE, 1, check=structure_record)
    if not last:
        return None
    record = structure_record(last[0])
    if record.decision != "stop" or not recorded_after(record, state):
        return None
    return RecordedEnd(
        status=record.status or _status_of_reason(record.reason),
        reason=record.reason,
        message=record.message,
        iterations=record.iteration,
        restarts=record.restarts,
        source=ITERATIONS_FILE,
    )


def _last_bound(events: Path) -> dict[str, Any] | None:
    """The latest ``loop.start``, ``loop.resume`` or ``loop.end`` among the last events."""
    found: dict[str, Any] | None = next(
        (e for e in reversed(tail_jsonl(events, TAIL_EVENTS)) if e.get("type") in BOUNDS), None
    )
    return found


def _is_end(event: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    return event is not None and event.get("type") == "loop.end"


def _from_event(event: dict[str, Any]) -> RecordedEnd:
    status = str(event.get("status") or StopStatus.PLUGIN.value)
    return RecordedEnd(
        status=status,
        reason=str(event.get("reason") or ""),
        message=str(event.get("message") or ""),
        iterations=int(_number(event.get("iterations"))),
        restarts=int(_number(event.get("restarts"))),
        source=EVENTS_FILE,
        event=event,
    )


def recorded_after(record: IterationRecord, state: LoopState) -> bool:
    """Whether ``record`` was appended after ``state`` was written: the state's summary of the
    journal ends before it (by the clock for a state without a usable summary)."""
    summary = state.summary
    covered = summary.get("last_iteration") if isinstance(summary, dict) else None
    if isinstance(covered, int) and not isinstance(covered, bool):
        return record.iteration > covered
    return record.started_at + record.duration_s >= state.updated_at


def _status_of_reason(reason: str) -> str:
    """The status of a stop recorded without one (an older loopctl): the engine's stops give
    their status as the reason; any other reason is a plugin's."""
    known = {status.value for status in StopStatus}
    return reason if reason in known else StopStatus.PLUGIN.value


def _number(value: Any) -> float:
    """A finite number from an event field, 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    return float(value) if math.isfinite(value) else 0.0
