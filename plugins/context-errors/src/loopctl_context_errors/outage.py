"""What a run is told about its failure memory, on the loop's thread (the writes that learn
most of it run on the background worker, which must not emit events).

- One warning line a run, the first time the memory cannot be used: a query's answer said so,
  or a write could not reach the store. When the failures are kept in the local spool (the store
  could not be reached, or was busy: :func:`~loopctl_context_errors.memory.kept_locally`) the
  line says so, and that they are written when the store is back; otherwise the run goes on
  without memory (a wrong password, a newer schema …).
- A line each time records kept in the spool (by this run or an earlier one) were written.
- One line when records could not be kept (the spool is full, or cannot be written).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl import StashKey, redact
from loopctl_context_errors import events
from loopctl_context_errors.memory import FailureMemory, QueryOutcome, kept_locally, naming
from loopctl_context_errors.spool import SpoolTally

if TYPE_CHECKING:
    from loopctl import Loop

#: Set once the run was told the memory cannot be used (one warning line a run).
WARNED = StashKey[bool]()
#: The spool's counts the run was told of already.
TOLD = StashKey[SpoolTally]()
#: The query statuses that earn the warning: the memory cannot be used at all, not just this
#: time (a write that could not reach the store earns it too).
WARN_STATUSES = frozenset({"unavailable", "newer", "outdated"})


def tell(loop: Loop, memory: FailureMemory | None, outcome: QueryOutcome | None = None) -> None:
    """Say what is new about ``memory`` (``outcome``: a query's answer just given)."""
    if memory is None:
        return
    tally = memory.spool_tally()
    _warn_once(loop, memory, outcome, tally)
    told = loop.stash.get(TOLD) or SpoolTally()
    spool = memory.spool()
    where = {"location": redact(memory.display)[:500], "spool": str(spool.path if spool else "")}
    if tally.written > told.written:
        count = tally.written - told.written
        loop.emit(
            events.MEMORY_SPOOL,
            state="written",
            records=count,
            **where,
            summary=redact(
                f"failure memory {memory.display}: wrote the {count} record(s) kept in "
                f"{where['spool']} while it could not be reached"
            )[:1000],
        )
    if tally.lost and not told.lost:
        cap = _size(spool.max_bytes) if spool is not None else "?"
        why = f"is full ({cap})" if tally.full else "cannot be written"
        loop.emit(
            events.MEMORY_SPOOL,
            state="full" if tally.full else "lost",
            records=tally.lost,
            **where,
            summary=redact(
                f"warning: failure memory {memory.display}: the local spool {where['spool']} "
                f"{why}: failures that cannot reach the store are not kept"
            )[:1000],
        )
    loop.stash[TOLD] = tally


def _size(count: int) -> str:
    return f"{count / 2**20:g} MiB" if count >= 2**20 else f"{count} bytes"


def _warn_once(
    loop: Loop, memory: FailureMemory, outcome: QueryOutcome | None, tally: SpoolTally
) -> None:
    """The first time in a run the memory cannot be used: one line saying so."""
    if loop.stash.get(WARNED):
        return
    if outcome is not None and outcome.status in WARN_STATUSES:
        status, reason, message = outcome.status, outcome.reason, outcome.message
    elif tally.kept and tally.because is not None:
        because = tally.because
        status, reason = because.status, because.reason
        message = memory.explain(because)
    else:
        return
    loop.stash[WARNED] = True
    message = message or status
    if reason != "bad-url":  # a URL that does not parse is shown by its host alone
        message = naming(memory.location, message)
    spool = memory.spool()
    kept = spool is not None and kept_locally(status, reason)
    then = (
        f"failures are kept in {spool.path} and written to it when it is back"
        if kept and spool is not None
        else "going on without memory"
    )
    loop.emit(
        events.MEMORY_UNAVAILABLE,
        memory_status=status,
        memory_reason=reason[:40],
        location=redact(memory.display)[:500],
        **({"spool": str(spool.path)} if kept and spool is not None else {}),
        summary=redact(f"warning: failure memory {message} ({then})")[:1000],
    )


__all__ = ["TOLD", "WARNED", "WARN_STATUSES", "tell"]
