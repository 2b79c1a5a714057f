"""A loop's iteration history at a cost that does not grow with it.

``iterations.jsonl`` is the journal: one record per iteration, appended and never rewritten.
What the engine needs of the whole of it (totals for the limits, ``progress.md`` and the report;
the stuck streak for ``resume``) is folded into a :class:`RunTotals` as each record is appended
and saved with every ``loop-state.md`` (its ``summary``), together with how many bytes of the
journal it covers. :func:`load_history` continues from there on ``resume``: it reads only the
records appended after the summary was saved and the last :data:`RECENT_RECORDS`, never the
whole journal (unless the summary is missing or does not match: then it is rebuilt, and says
so). :class:`History` is ``loop.history``: every record, of which only the recent ones are kept
in memory; older ones are read back from the journal when a plugin asks for them.
"""

from __future__ import annotations

import contextlib
import math
import os
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, overload

import attrs

from loopctl import records
from loopctl.model import IterationRecord
from loopctl.state.journal import _parse_jsonl_line, tail_jsonl
from loopctl.state.layout import ITERATIONS_FILE, LOOP_STATE_FILE
from loopctl.stuck import StuckDetector, is_infrastructure_failure

#: How many of the latest records :class:`History` keeps in memory (the report shows 50,
#: ``progress.md`` 20, the failure classifier looks at 50).
RECENT_RECORDS = 100
#: The version of the saved summary; another one is rebuilt from the journal.
SUMMARY_VERSION = 1

_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)
_COUNT_FIELDS = (
    "records",
    "journal_bytes",
    "last_iteration",
    "passed",
    "failed",
    *_TOKEN_FIELDS,
    "costs_reported",
    "costs_estimated",
    "restarts",
    "stuck_streak",
)


@attrs.define
class RunTotals:
    """The running summary of a loop's iteration records, folded in one record at a time."""

    #: Records folded in (the valid records of the journal, like ``len(loop.history)``).
    records: int = 0
    #: How many bytes of ``iterations.jsonl`` they cover.
    journal_bytes: int = 0
    #: The iteration of the last record (0: none yet).
    last_iteration: int = 0
    #: Records whose tests passed, and the others.
    passed: int = 0
    failed: int = 0
    #: Records by decision (``continue``, ``restart``, ``stop``) and by the agent's outcome
    #: (``ok`` or the error kind).
    decisions: dict[str, int] = attrs.Factory(dict)
    agent_outcomes: dict[str, int] = attrs.Factory(dict)
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0
    #: Records whose agent reported its token usage (a ``command`` agent reports none: its
    #: tokens are unknown, not 0).
    usage_reported: int = 0
    #: Records whose agent reported a cost, and those of them whose cost was estimated
    #: (priced from token counts).
    costs_reported: int = 0
    costs_estimated: int = 0
    #: The most restarts any record came after.
    restarts: int = 0
    duration_s: float = 0.0
    #: Stuck detection replayed over every record (what ``resume`` restores it from).
    stuck_streak: int = 0
    _stuck: StuckDetector = attrs.field(factory=StuckDetector, eq=False, repr=False)

    @property
    def tokens(self) -> int:
        return sum(getattr(self, name) for name in _TOKEN_FIELDS)

    @property
    def known_tokens(self) -> int | None:
        """:attr:`tokens`, or None when no record's agent reported its usage (unknown, not 0)."""
        return self.tokens if self.usage_reported or self.tokens else None

    @property
    def stuck_previous(self) -> IterationRecord | None:
        """The record the stuck replay compares the next one with."""
        return self._stuck.previous

    def resume_stuck(self, previous: IterationRecord | None) -> None:
        """Continue the stuck replay of a loaded summary, ``previous`` being the last record
        it covers that was not an infrastructure failure."""
        self._stuck.resume(self.stuck_streak, previous, 0)

    def add(self, record: IterationRecord, *, journal_bytes: int | None = None) -> None:
        """Fold in one record; ``journal_bytes``: the journal's size now that it is written."""
        self.records += 1
        self.last_iteration = record.iteration
        if record.tests_passed:
            self.passed += 1
        else:
            self.failed += 1
        _count(self.decisions, record.decision)
        _count(self.agent_outcomes, record.agent.error_kind or "ok")
        usage = record.agent.usage
        self.usage_reported += usage_known(record)
        self.input_tokens += usage.input_tokens
        self.output_tokens += usage.output_tokens
        self.cache_creation_input_tokens += usage.cache_creation_input_tokens
        self.cache_read_input_tokens += usage.cache_read_input_tokens
        cost = record.agent.cost_usd
        if cost is not None and math.isfinite(cost):
            self.cost_usd += cost
            self.costs_reported += 1
            self.costs_estimated += record.agent.cost_estimated
        self.restarts = max(self.restarts, min(record.restarts, 10**9))
        if math.isfinite(record.duration_s):
            self.duration_s += record.duration_s
        self._stuck.observe(
            record, error_lines=(), infrastructure=is_infrastructure_failure(record)
        )
        self.stuck_streak = self._stuck.streak
        if journal_bytes is not None:
            self.journal_bytes = journal_bytes

    @classmethod
    def of(cls, history: Iterable[IterationRecord]) -> RunTotals:
        totals = cls()
        for record in history:
            totals.add(record)
        return totals

    def minus(self, later: RunTotals) -> RunTotals:
        """The counts and sums of the records folded here but not into ``later`` (the totals
        of the end of the same history): those of the records before it."""
        return RunTotals(
            records=self.records - later.records,
            passed=self.passed - later.passed,
            failed=self.failed - later.failed,
            decisions=_minus(self.decisions, later.decisions),
            agent_outcomes=_minus(self.agent_outcomes, later.agent_outcomes),
            input_tokens=self.input_tokens - later.input_tokens,
            output_tokens=self.output_tokens - later.output_tokens,
            cache_creation_input_tokens=(
                self.cache_creation_input_tokens - later.cache_creation_input_tokens
            ),
            cache_read_input_tokens=self.cache_read_input_tokens - later.cache_read_input_tokens,
            cost_usd=self.cost_usd - later.cost_usd,
            usage_reported=self.usage_reported - later.usage_reported,
            costs_reported=self.costs_reported - later.costs_reported,
            costs_estimated=self.costs_estimated - later.costs_estimated,
            duration_s=self.duration_s - later.duration_s,
        )

    def to_json(self) -> dict[str, Any]:
        """The summary as ``loop-state.md`` saves it (its ``summary``)."""
        data: dict[str, Any] = {"version": SUMMARY_VERSION}
        data.update((name, getattr(self, name)) for name in _COUNT_FIELDS)
        data["decisions"] = dict(self.decisions)
        data["agent_outcomes"] = dict(self.agent_outcomes)
        data["cost_usd"] = self.cost_usd
        data["duration_s"] = self.duration_s
        data["usage_reported"] = self.usage_reported
        return data

    @classmethod
    def from_json(cls, data: Any) -> RunTotals:
        """A saved summary; ``ValueError`` saying what is wrong when it is not a valid one."""
        if not isinstance(data, Mapping):
            raise ValueError(f"it is not an object ({type(data).__name__})")
        if data.get("version") != SUMMARY_VERSION:
            raise ValueError(f"it is version {data.get('version')!r:.20}, not {SUMMARY_VERSION}")
        values: dict[str, Any] = {}
        for name in _COUNT_FIELDS:
            value = data.get(name)
            if not _is_count(value):
                raise ValueError(f"`{name}` is not a whole number >= 0: {value!r:.60}")
            values[name] = value
        for name in ("cost_usd", "duration_s"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValueError(f"`{name}` is not a number: {value!r:.60}")
            if not math.isfinite(value):
                raise ValueError(f"`{name}` is not a finite number: {value!r:.60}")
            values[name] = float(value)
        for name in ("decisions", "agent_outcomes"):
            value = data.get(name)
            if not isinstance(value, Mapping) or not all(
                isinstance(k, str) and _is_count(v) for k, v in value.items()
            ):
                raise ValueError(f"`{name}` is not an object of counts: {value!r:.60}")
            values[name] = dict(value)
        reported = data.get("usage_reported")  # absent in a summary of an earlier loopctl
        if reported is None:
            tokens = sum(values[name] for name in _TOKEN_FIELDS)
            reported = values["records"] if tokens else 0
        elif not _is_count(reported) or reported > values["records"]:
            raise ValueError(f"`usage_reported` is not a count of records: {reported!r:.60}")
        values["usage_reported"] = reported
        if values["passed"] + values["failed"] != values["records"]:
            raise ValueError("`passed` and `failed` do not add up to `records`")
        return cls(**values)


def usage_known(record: IterationRecord) -> bool:
    """Whether the record's agent reported its token usage (a request, or any token counted:
    a record of an older loopctl has no request count)."""
    return record.agent.requests > 0 or record.agent.usage.total_tokens > 0


def _count(counts: dict[str, int], key: str) -> None:
    counts[key] = counts.get(key, 0) + 1


def _minus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    left = {key: count - b.get(key, 0) for key, count in a.items()}
    return {key: count for key, count in left.items() if count}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class History(Sequence[IterationRecord]):
    """Every recorded iteration of a loop, oldest first (``loop.history``).

    The last :data:`RECENT_RECORDS` are kept in memory; an older one is read back from the
    journal when asked for (the first such read indexes the journal once), so a plugin that
    looks at ``history[-20:]`` costs the same at iteration 10 and 10,000, and memory stays
    flat. Slices are lists."""

    def __init__(
        self,
        journal: Path,
        recent: Iterable[IterationRecord] = (),
        *,
        count: int | None = None,
        keep: int = RECENT_RECORDS,
    ) -> None:
        self._journal = Path(journal)
        self._recent: deque[IterationRecord] = deque(recent, maxlen=max(1, keep))
        self._count = len(self._recent) if count is None else max(count, len(self._recent))
        #: Where each valid record of the journal starts, as far as it was indexed.
        self._offsets = array("q")
        self._indexed_bytes = 0

    def append(self, record: IterationRecord) -> None:
        self._recent.append(record)
        self._count += 1

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> IterationRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[IterationRecord]: ...
    def __getitem__(self, index: int | slice) -> IterationRecord | list[IterationRecord]:
        if isinstance(index, slice):
            return [self._at(i) for i in range(*index.indices(self._count))]
        position = index + self._count if index < 0 else index
        if not 0 <= position < self._count:
            raise IndexError("history index out of range")
        return self._at(position)

    def __iter__(self) -> Iterator[IterationRecord]:
        first_recent = self._count - len(self._recent)
        if first_recent > 0:  # the older ones, read back in one pass over the journal
            self._index()
            with open(self._journal, "rb") as stream:
                for position in range(first_recent):
                    yield self._read(position, stream)
        for position in range(first_recent, self._count):
            yield self._at(position)

    def __reversed__(self) -> Iterator[IterationRecord]:
        for position in range(self._count - 1, -1, -1):
            yield self._at(position)

    def _at(self, position: int) -> IterationRecord:
        first_recent = self._count - len(self._recent)
        if position >= first_recent:
            return self._recent[position - first_recent]
        return self._read(position)

    def _read(self, position: int, stream: BinaryIO | None = None) -> IterationRecord:
        """Record number ``position`` of the journal, read back (from ``stream`` if given)."""
        if position >= len(self._offsets):
            self._index()
        if position < len(self._offsets):
            with contextlib.ExitStack() as opened:
                if stream is None:
                    stream = opened.enter_context(open(self._journal, "rb"))
                stream.seek(self._offsets[position])
                record, _ = _parse_jsonl_line(stream.readline())
            if record is not None:
                return records.structure_record(record)
        raise IndexError(
            f"{self._journal} no longer holds iteration record {position + 1} of this loop "
            "(was it changed while the loop ran?)"
        )

    def _index(self) -> None:
        """Note where each valid record starts, from where the last indexing stopped."""
        with contextlib.suppress(FileNotFoundError), open(self._journal, "rb") as stream:
            stream.seek(self._indexed_bytes)
            for raw in stream:
                if _record_of(raw)[0] is not None:
                    self._offsets.append(self._indexed_bytes)
                elif not raw.endswith(b"\n"):
                    break  # a torn line: looked at again once it is ended
                self._indexed_bytes += len(raw)


def _record_of(raw: bytes) -> tuple[IterationRecord, dict[str, Any]] | tuple[None, str]:
    """The record on a journal line (structured and raw), or None and why not ("" for a
    blank line): the same records ``resume`` counts."""
    record, problem = _parse_jsonl_line(raw)
    if record is None:
        return None, problem
    try:
        return records.structure_record(record), record
    except ValueError as exc:
        return None, f"skipped a record ({exc})"


@attrs.define
class LoadedHistory:
    """What :func:`load_history` found: the history, its totals, the last raw rows (for
    ``progress.md``), the lines it skipped, and a note when the summary was rebuilt."""

    history: History
    totals: RunTotals
    rows: list[dict[str, Any]]
    problems: list[str]
    note: str | None = None


def load_history(journal: Path, saved: Any, *, keep: int = RECENT_RECORDS) -> LoadedHistory:
    """The history of a loop being resumed, from its journal and the summary ``loop-state.md``
    saved (``saved``: its ``summary`` value, None when there is none).

    Reads the records appended after the summary was saved and the last ``keep`` records. A
    summary that is missing (a loop of an earlier loopctl), damaged or does not match the
    journal is rebuilt from the whole journal, and :attr:`LoadedHistory.note` says so."""
    journal = Path(journal)
    totals, why = _saved_totals(journal, saved)
    if totals is None:
        loaded = _rebuild(journal, keep)
        loaded.note = f"{why}: rebuilt it from the {loaded.totals.records:,} records there"
        return loaded
    # continue from the summary: fold in the records appended after it was saved
    appended: list[IterationRecord] = []
    problems = _scan(journal, totals, lambda record, raw, end: appended.append(record))
    last, rows = _tail(journal, keep + len(appended))
    totals.resume_stuck(_stuck_previous(journal, last, len(appended), keep))
    for record in appended:
        totals.add(record)  # _scan moved journal_bytes past them
    last = last[-min(keep, totals.records) :] if totals.records else []
    history = History(journal, last, count=totals.records, keep=keep)
    return LoadedHistory(history, totals, rows, problems)


def _stuck_previous(
    journal: Path, last: list[IterationRecord], appended: int, keep: int
) -> IterationRecord | None:
    """The last record the summary covers that stuck detection does not skip: among ``last``
    (the journal's last records, of which ``appended`` came after the summary), or further
    back (up to ten times as far) if those all are skipped."""
    for window in (last, None):
        if window is None:
            if len(last) < keep + appended:
                return None  # that was the whole journal
            window, _ = _tail(journal, 11 * keep + appended)
        covered = window[: max(0, len(window) - appended)]
        found = next((r for r in reversed(covered) if not is_infrastructure_failure(r)), None)
        if found is not None:
            return found
    return None


def _rebuild(journal: Path, keep: int) -> LoadedHistory:
    """Fold every record of the journal into new totals, keeping the last ``keep``."""
    totals = RunTotals()
    recent: deque[IterationRecord] = deque(maxlen=keep)
    rows: deque[dict[str, Any]] = deque(maxlen=20)

    def fold(record: IterationRecord, raw: dict[str, Any], end: int) -> None:
        totals.add(record, journal_bytes=end)
        recent.append(record)
        rows.append(raw)

    problems = _scan(journal, totals, fold)
    history = History(journal, recent, count=totals.records, keep=keep)
    return LoadedHistory(history, totals, list(rows), problems)


def _saved_totals(journal: Path, saved: Any) -> tuple[RunTotals | None, str]:
    """The saved summary if it is valid and matches the journal, else None and why not."""
    if saved is None:
        return None, (
            f"{LOOP_STATE_FILE} has no summary of {ITERATIONS_FILE} (an earlier loopctl wrote it)"
        )
    where = f"the summary of {ITERATIONS_FILE} in {LOOP_STATE_FILE}"
    try:
        totals = RunTotals.from_json(saved)
    except ValueError as exc:
        return None, f"{where} is damaged ({exc})"
    try:
        size = os.stat(journal).st_size
    except FileNotFoundError:
        size = 0
    except OSError as exc:
        return None, f"{where} cannot be checked ({exc.strerror or exc})"
    if totals.journal_bytes > size:
        return None, (
            f"{where} does not match it (it covers {totals.journal_bytes} bytes, the journal "
            f"has {size})"
        )
    if totals.records:
        last = tail_jsonl(journal, 1, end=totals.journal_bytes, check=records.structure_record)
        found = last[0].get("iteration") if last else None
        if found != totals.last_iteration:
            return None, (
                f"{where} does not match it (its last record is iteration "
                f"{totals.last_iteration}, the journal's there is {found})"
            )
    return totals, ""


def _scan(
    journal: Path,
    totals: RunTotals,
    fold: Callable[[IterationRecord, dict[str, Any], int], object],
) -> list[str]:
    """Call ``fold(record, raw, end)`` for each record after ``totals.journal_bytes`` (``end``:
    the offset after it) and move ``totals.journal_bytes`` past the lines it skipped; returns
    what it skipped, as ``iterations.jsonl line 17: not valid JSON (torn write?)``."""
    start = totals.journal_bytes
    skipped: list[tuple[int, str]] = []  # (line number counted from start, problem)
    try:
        with open(journal, "rb") as stream:
            stream.seek(start)
            position = start
            for number, raw in enumerate(stream, 1):
                found, why = _record_of(raw)
                if found is not None:
                    assert isinstance(why, dict)
                    fold(found, why, position + len(raw))
                elif not raw.endswith(b"\n"):
                    if why:  # torn, perhaps still being written: looked at again next time
                        skipped.append((number, str(why)))
                    break
                elif why:
                    skipped.append((number, str(why)))
                position += len(raw)
                totals.journal_bytes = max(totals.journal_bytes, position)
    except FileNotFoundError:
        return []
    except OSError as exc:
        return [f"{ITERATIONS_FILE}: cannot read it ({exc.strerror or exc})"]
    return _numbered(journal, start, skipped)


def _numbered(journal: Path, start: int, skipped: list[tuple[int, str]]) -> list[str]:
    """``iterations.jsonl line 17: …`` for each line skipped (counting the lines before
    ``start`` only when there is one to name)."""
    if not skipped:
        return []
    before = 0
    with contextlib.suppress(OSError), open(journal, "rb") as stream:
        left = start
        while left > 0:
            chunk = stream.read(min(left, 1 << 20))
            if not chunk:
                break
            before += chunk.count(b"\n")
            left -= len(chunk)
    problems = [f"{ITERATIONS_FILE} line {before + n}: {problem}" for n, problem in skipped[:50]]
    if len(skipped) > 50:
        problems.append(f"{ITERATIONS_FILE}: {len(skipped) - 50} more bad lines not listed")
    return problems


def _tail(journal: Path, keep: int) -> tuple[list[IterationRecord], list[dict[str, Any]]]:
    """The last ``keep`` records, structured, and the last 20 raw."""
    structured: dict[int, IterationRecord] = {}

    def check(record: dict[str, Any]) -> None:
        structured[id(record)] = records.structure_record(record)

    raw = tail_jsonl(journal, max(keep, 20), check=check)
    return [structured[id(record)] for record in raw[-keep:]], raw[-20:]
