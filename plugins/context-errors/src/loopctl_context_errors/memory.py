"""The failure memory: every failure loopctl saw, in every project, and what fixed it.

This module (with :mod:`loopctl_context_errors.ranking`) decides everything a user sees: a
failure's signature and words, what is redacted, how similar failures are ranked, and the status
a store that cannot answer is reported as. Rows are kept by a :class:`~loopctl_context_errors.store.Store`: a SQLite
file per user (the default, ``$XDG_DATA_HOME/loopctl/failures.sqlite3``) or a Postgres database a
team shares (``memory_url`` or ``LOOPCTL_FAILURE_MEMORY=postgresql://…``). Nothing here ever
raises to the loop: a missing, locked, slow, unreachable or newer store means "no memory this
time", and an unreachable one is not tried again for :data:`COOL_DOWN_S`.

Finding similar failures (:meth:`FailureMemory.query_similar`) is
:mod:`loopctl_context_errors.ranking`'s: exact signature matches first, then the stored rows
holding the failure's rarest words, scored and re-ranked in Python from counts both backends keep
alike; the same project's failures first, other projects' after.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

import attrs

from loopctl import normalize_line, redact, sanitize
from loopctl_context_errors import ranking
from loopctl_context_errors.store import (
    NO_RUN,
    SCHEMA_VERSION,
    Fix,
    FixTarget,
    MemoryLocation,
    MigrationReport,
    NewFailure,
    PruneCriteria,
    Store,
    StoredFailure,
    StoredRow,
    StoreError,
    StoreMissing,
    StoreOutdated,
    StoreTimeout,
    StoreUnavailable,
    newer_store,
    parse_location,
    stats_of,
)

if TYPE_CHECKING:  # imported when a write fails: `errors report` never needs them
    from loopctl_context_errors.spool import Spool, SpoolTally

ENV_MEMORY = "LOOPCTL_FAILURE_MEMORY"
#: Values of ``LOOPCTL_FAILURE_MEMORY`` / ``memory_path`` that turn the memory off.
OFF_WORDS = frozenset({"off", "none", "false", "0", "disabled"})
DEFAULT_TIMEOUT_S = 5.0
#: After a store was found unavailable, it is not tried again for this long (seconds).
COOL_DOWN_S = 30.0
#: Errors that leave a write kept in the local spool (:mod:`loopctl_context_errors.spool`):
#: the store could not be reached, or was busy, slow or failing, for now.
KEPT_STATUSES = frozenset({"unavailable", "locked", "timeout", "error"})
#: ... except these, which wait for the user to change something, not for the store: a URL that
#: does not parse (it names no store), no driver, a wrong password, no permission, no database.
NOT_KEPT_REASONS = frozenset({"bad-url", "no-driver", "auth", "permission", "no-database"})

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_PLACEHOLDERS = frozenset({"path", "hex", "time", "host", "redacted"})
_STOPWORDS = frozenset(
    {
        "the",
        "and",
        "for",
        "with",
        "not",
        "from",
        "that",
        "this",
        "was",
        "are",
        "but",
        "you",
        "has",
        "have",
        "had",
        "its",
        "into",
        "all",
        "any",
        "can",
        "line",
        "lines",
        "file",
        "see",
    }
)


def default_memory_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/loopctl/failures.sqlite3``, or ``~/.local/share/loopctl/…``."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME", "").strip()
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / "loopctl" / "failures.sqlite3"


def resolve_memory_path(configured: str = "", env: Mapping[str, str] | None = None) -> Path | None:
    """The file the memory lives in (:func:`resolve_memory_location` with ``configured`` as the
    ``memory_path`` setting). None when the memory is off, or is not a file (a
    ``postgresql://`` URL, well-formed or not)."""
    try:
        location = resolve_memory_location(configured, "", env)
    except StoreError:
        return None
    return None if location is None else location.path


def resolve_memory_location(
    configured_path: str = "", configured_url: str = "", env: Mapping[str, str] | None = None
) -> MemoryLocation | None:
    """Where the memory lives: ``LOOPCTL_FAILURE_MEMORY`` (a file, a ``postgresql://`` URL or
    ``off``), else ``memory_url``, else ``memory_path``, else the XDG default file. None when
    the memory is off. Raises :class:`~.store.StoreUnavailable` (reason ``bad-url``) for a URL
    that is not one."""
    env = os.environ if env is None else env
    for value in (env.get(ENV_MEMORY, ""), configured_url, configured_path):
        value = (value or "").strip()
        if not value:
            continue
        if value.lower() in OFF_WORDS:
            return None
        return parse_location(value)
    return parse_location(str(default_memory_path(env)))


def tokens_of(lines: Iterable[str]) -> list[str]:
    """The distinct words of normalised lines, lowercased, in first-seen order."""
    seen: dict[str, None] = {}
    for line in lines:
        for word in _TOKEN.findall(line):
            word = word.lower()
            if word not in _PLACEHOLDERS and word not in _STOPWORDS:
                seen.setdefault(word, None)
    return list(seen)


def signature_of(lines: Sequence[str]) -> tuple[str, list[str]]:
    """``(signature, normalised lines)`` of decisive lines (redacted first)."""
    signature, normalized = _signature(tuple(lines))
    return signature, list(normalized)


@functools.lru_cache(maxsize=64)
def _signature(lines: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """Cached: one failure's lines are signed by the report, the query and the store."""
    normalized: list[str] = []
    for line in lines:
        text = normalize_line(redact(line))
        if text and text not in normalized:
            normalized.append(text)
    if not normalized:
        return "", ()
    digest = hashlib.sha1("\n".join(normalized).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:16], tuple(normalized)


@attrs.define
class FailureRecord:
    """One stored failure."""

    id: int
    signature: str
    category: str
    rule: str
    stage: str
    project: str
    decisive: list[str]
    created_at: float
    occurrences: int = 1
    last_seen: float = 0.0
    resolved_at: float | None = None
    fix_files: list[str] = attrs.Factory(list)
    fix_suggestion: str = ""
    fix_summary: str = ""
    #: The project's identity (``git:host/owner/repo``, ``root:<sha>``, ``path:/abs`` …).
    project_id: str = ""

    @property
    def fixed(self) -> bool:
        return self.resolved_at is not None

    @property
    def fix_change(self) -> list[str]:
        """The change that fixed it as recorded (:func:`fix_summary_of`): each file's name and
        its ``-``/``+`` lines; empty when none was (a fix recorded without its diff, or by an
        older version)."""
        _, marker, change = self.fix_summary.partition(CHANGE_MARKER)
        return change.splitlines() if marker else []

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "signature": self.signature,
            "category": self.category,
            "rule": self.rule,
            "stage": self.stage,
            "project": self.project,
            "project_id": self.project_id,
            "decisive_lines": list(self.decisive),
            "created_at": self.created_at,
            "last_seen": self.last_seen,
            "occurrences": self.occurrences,
            "resolved_at": self.resolved_at,
            "fix_files": list(self.fix_files),
            "fix_suggestion": self.fix_suggestion,
            "fix_summary": self.fix_summary,
        }


#: The line of a fix's summary after which the change that fixed it follows.
CHANGE_MARKER = "\nchange:\n"
#: Lines of a fix's change kept, at most, and characters of each.
MAX_CHANGE_LINES = 8
MAX_CHANGE_LINE_CHARS = 100


def fix_summary_of(summary: str, change: str) -> str:
    """``summary``, then ``change`` (what :meth:`loopctl.Workspace.change_diff` gives: each
    file's name and its ``-``/``+`` lines), at most :data:`MAX_CHANGE_LINES` lines, each cut at
    :data:`MAX_CHANGE_LINE_CHARS` characters, after a ``change:`` line. The stored summary keeps
    1,000 characters, which these caps fit within beside a summary line."""
    lines = [
        line.rstrip()[:MAX_CHANGE_LINE_CHARS]
        for line in change.splitlines()
        if line.strip() and not line.startswith(("---", "+++", "@@"))
    ]
    if not lines:
        return summary
    return summary[:150] + CHANGE_MARKER + "\n".join(lines[:MAX_CHANGE_LINES])


@attrs.define
class SimilarFailure:
    """A stored failure like the one being reported, and how alike they are."""

    record: FailureRecord
    #: 0–1: 1 for the same signature, else the word overlap after re-ranking.
    score: float
    #: "exact" (same signature) or "similar".
    match: str
    #: Whether it was recorded by the project asking (or the query named no project).
    same_project: bool = True

    def place(self) -> str:
        """``in NAME`` for a failure of the project asking, ``(another project: NAME)`` for
        another project's."""
        name = self.record.project or "?"
        return f"in {name}" if self.same_project else f"(another project: {name})"

    def to_json(self) -> dict[str, Any]:
        return {
            "match": self.match,
            "score": round(self.score, 3),
            "same_project": self.same_project,
            **self.record.to_json(),
        }


@attrs.define
class QueryOutcome:
    """What a similarity query found, and whether the store could answer at all."""

    results: list[SimilarFailure] = attrs.Factory(list)
    #: ok, missing, disabled, timeout, locked, unavailable, newer, outdated, error; cached for
    #: an answer the run had already, given again without asking the store
    #: (:meth:`FailureMemory.answered_again`).
    status: str = "ok"
    duration_ms: float = 0.0
    #: A short code saying why (``auth``, ``refused``, ``no-driver`` …); "" when ok.
    reason: str = ""
    #: One line for people, free of secrets; "" when ok.
    message: str = ""


_T = TypeVar("_T")

#: Stores found unavailable, by location: until when, and why (a loop's report, record,
#: suggestion and judge calls then return at once instead of each waiting for a connection).
_UNAVAILABLE: dict[str, tuple[float, StoreError]] = {}
_UNAVAILABLE_LOCK = threading.Lock()


def kept_locally(status: str, reason: str) -> bool:
    """Whether a write that failed with this status and reason is kept in the local spool."""
    return status in KEPT_STATUSES and reason not in NOT_KEPT_REASONS


def _cooling(display: str) -> StoreError | None:
    with _UNAVAILABLE_LOCK:
        kept = _UNAVAILABLE.get(display)
        if kept is not None and kept[0] <= time.monotonic():
            del _UNAVAILABLE[display]
            kept = None
    return None if kept is None else kept[1]


def _cool_down(display: str, error: StoreError) -> None:
    with _UNAVAILABLE_LOCK:
        _UNAVAILABLE[display] = (time.monotonic() + COOL_DOWN_S, error)


def close_all() -> None:
    """Close every connection this process keeps open, and forget stores found unavailable
    (tests, long-lived embedders)."""
    from loopctl_context_errors import store_sqlite

    store_sqlite.close_all()
    postgres = sys.modules.get("loopctl_context_errors.store_postgres")
    closer = getattr(postgres, "close_all", None)
    if callable(closer):
        closer()
    with _UNAVAILABLE_LOCK:
        _UNAVAILABLE.clear()


def _loads_list(text: Any) -> list[str]:
    try:
        value = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [str(x) for x in value] if isinstance(value, list) else []


def _record(row: StoredRow, *, occurrences: int | None = None) -> FailureRecord:
    return FailureRecord(
        id=int(row.id),
        signature=row.signature,
        category=row.category,
        rule=row.rule,
        stage=row.stage,
        project=row.project,
        decisive=_loads_list(row.decisive_json),
        created_at=float(row.created_at),
        occurrences=int(row.occurrences if occurrences is None else occurrences),
        last_seen=float(row.last_seen),
        resolved_at=row.resolved_at,
        fix_files=_loads_list(row.fix_files_json),
        fix_suggestion=row.fix_suggestion,
        fix_summary=row.fix_summary,
        project_id=row.project_id,
    )


def _location_of(where: Path | str | MemoryLocation) -> MemoryLocation:
    if isinstance(where, MemoryLocation):
        return where
    if isinstance(where, Path):
        return MemoryLocation(kind="sqlite", display=str(where), path=where)
    return parse_location(str(where))


def _no_driver(location: MemoryLocation) -> StoreUnavailable:
    return StoreUnavailable(
        f"the failure memory at {location.display} needs psycopg: "
        "pip install 'loopctl-context-errors[postgres]'",
        reason="no-driver",
    )


def open_store(location: MemoryLocation, *, timeout_s: float, read_only: bool = False) -> Store:
    """The backend for ``location``. Raises :class:`StoreUnavailable` (``no-driver``) when a
    Postgres location's driver is not installed. ``read_only``: a SQLite file is opened so that
    nothing is written (Postgres reads in read-only transactions anyway)."""
    if location.kind == "sqlite":
        from loopctl_context_errors.store_sqlite import SQLiteStore

        return SQLiteStore(location, timeout_s=timeout_s, read_only=read_only)
    try:
        from loopctl_context_errors.store_postgres import PostgresStore
    except ImportError:
        raise _no_driver(location) from None
    store: Store = PostgresStore(location, timeout_s=timeout_s)
    return store


class FailureMemory:
    """The memory at ``where``: a file (a :class:`~pathlib.Path`), a
    :class:`~loopctl_context_errors.store.MemoryLocation`, or the text of either. Cheap to
    create: nothing is opened until it is used. A location that cannot be used (a malformed
    URL) makes every call answer ``unavailable``. A ``read_only`` memory is only read, and
    writes nothing at all (the commands that show it)."""

    def __init__(
        self,
        where: Path | str | MemoryLocation,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        read_only: bool = False,
    ) -> None:
        self.timeout_s = max(0.01, float(timeout_s))
        self.read_only = read_only
        self._broken: StoreError | None = None
        try:
            self.location = _location_of(where)
        except StoreError as exc:  # a malformed URL: shown by its message, which hides it
            self._broken = exc
            self.location = MemoryLocation(kind="postgres", display="the postgresql:// URL")
        #: The file of a SQLite memory (None for Postgres).
        self.path: Path | None = self.location.path
        self._store: Store | None = None
        self._spool: Spool | None = None
        self._tally: SpoolTally | None = None
        self._tally_lock = threading.Lock()
        #: Set while the store is known to be unreachable (its last answer said so).
        self.unreachable: StoreUnavailable | None = None

    @classmethod
    def unusable(cls, error: StoreError, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> FailureMemory:
        """A memory whose every call answers as ``error`` says (a malformed URL)."""
        memory = cls(MemoryLocation(kind="postgres", display="the postgresql:// URL"),
                     timeout_s=timeout_s)  # fmt: skip
        memory._broken = error
        return memory

    @property
    def display(self) -> str:
        """Where the memory is, as users may see it (never a password)."""
        return self.location.display

    def _backend(self) -> Store:
        if self._broken is not None:
            raise self._broken
        if self._store is None:
            self._store = open_store(
                self.location, timeout_s=self.timeout_s, read_only=self.read_only
            )
        return self._store

    def _run(self, operation: Callable[[Store], _T]) -> _T:
        """``operation`` on the store, unless it was found unavailable lately (then the same
        error at once); an unavailable store starts the cool-down."""
        cooling = _cooling(self.location.display)
        if isinstance(cooling, StoreUnavailable):
            self.unreachable = cooling
        if cooling is not None:
            raise cooling
        try:
            done = operation(self._backend())
        except StoreUnavailable as exc:
            _cool_down(self.location.display, exc)
            self.unreachable = exc
            raise
        self.unreachable = None
        return done

    def _deadline(self, timeout_s: float | None = None) -> float:
        return time.monotonic() + (self.timeout_s if timeout_s is None else max(0.0, timeout_s))

    # --- writing -------------------------------------------------------------------------

    def record_failure(
        self,
        *,
        decisive: Sequence[str],
        category: str,
        rule: str = "",
        stage: str = "",
        project: str = "",
        project_id: str = "",
        project_path: str = "",
        run_id: str = "",
        now: float | None = None,
        occurrence: int = 0,
    ) -> int | None:
        """Store a failure (or count it again when this run already stored it); its row id.
        ``occurrence``: how many times the run has met it, this one included (0: not known).

        None when the store cannot be written (locked for longer than the timeout, read-only,
        corrupt, unavailable, newer) or there is nothing to store. A run's failure that could
        not reach the store is kept in the local spool then, and written with the next write
        that reaches it (:meth:`spool_tally` counts them). Never raises.
        """
        signature, normalized = signature_of(decisive)
        if not signature:
            return None
        row = NewFailure(
            signature=signature,
            category=str(category),
            rule=redact(rule),
            stage=redact(stage),
            project=redact(project),
            project_id=redact(project_id),
            project_path=redact(project_path),
            run_id=run_id or NO_RUN,
            decisive_json=json.dumps([redact(line)[:500] for line in decisive][:20]),
            terms=tuple(tokens_of(normalized)),
            now=time.time() if now is None else now,
            uid=os.urandom(8).hex(),
            occurrence=max(0, int(occurrence)),
        )
        # a failure no run recorded has no run's row to bring to its count: it is not kept
        record = {"kind": "failure", "row": attrs.asdict(row, filter=_kept_field)}
        row_id = self._write(record, keep=bool(row.run_id))
        return int(row_id) if row_id else None

    def record_fix(
        self,
        failure_id: int,
        *,
        files: Sequence[str] = (),
        suggestion: str = "",
        summary: str = "",
        now: float | None = None,
    ) -> bool:
        """Remember what resolved failure ``failure_id``. False when it could not be written."""
        try:
            target = FixTarget(id=int(failure_id))
        except (TypeError, ValueError):
            return False
        return self._record_fix(target, files, suggestion, summary, now)

    def record_fix_for(
        self,
        signature: str,
        run_id: str,
        *,
        files: Sequence[str] = (),
        suggestion: str = "",
        summary: str = "",
        change: str = "",
        now: float | None = None,
    ) -> bool:
        """Remember what resolved the failure with ``signature`` recorded by run ``run_id``;
        ``change``: the diff of the fix (its ``-``/``+`` lines are kept with the summary,
        capped: :func:`fix_summary_of`)."""
        if not run_id:
            return False
        target = FixTarget(signature=signature, run_id=run_id)
        return self._record_fix(target, files, suggestion, fix_summary_of(summary, change), now)

    def _record_fix(
        self,
        target: FixTarget,
        files: Sequence[str],
        suggestion: str,
        summary: str,
        now: float | None,
    ) -> bool:
        fix = Fix(
            resolved_at=time.time() if now is None else now,
            files_json=json.dumps([redact(f)[:300] for f in files][:50]),
            suggestion=redact(suggestion)[:1000],
            summary=redact(summary)[:1000],
        )
        record = {"kind": "fix", "target": attrs.asdict(target), "fix": attrs.asdict(fix)}
        return bool(self._write(record, keep=True))

    # --- the local spool -------------------------------------------------------------------

    def spool(self) -> Spool | None:
        """The local spool of this memory's store (None for a location that names none: a
        malformed URL)."""
        if self._broken is not None:
            return None
        if self._spool is None:
            from loopctl_context_errors.spool import Spool, spool_path

            self._spool = Spool(spool_path(default_memory_path().parent, self.display))
        return self._spool

    def spool_tally(self) -> SpoolTally:
        """What this memory kept in, wrote from and lost to its spool so far (a copy)."""
        from loopctl_context_errors.spool import SpoolTally

        with self._tally_lock:
            return SpoolTally() if self._tally is None else attrs.evolve(self._tally)

    def _count(self, *, kept: int = 0, written: int = 0, lost: int = 0, full: bool = False,
               because: StoreError | None = None) -> None:  # fmt: skip
        from loopctl_context_errors.spool import SpoolTally

        with self._tally_lock:
            if self._tally is None:
                self._tally = SpoolTally()
            self._tally.kept += kept
            self._tally.written += written
            self._tally.lost += lost
            self._tally.full = self._tally.full or full
            self._tally.because = because or self._tally.because

    def _write(self, record: dict[str, Any], *, keep: bool) -> Any:
        """Write ``record`` to the store after the records the spool keeps for it; with
        ``keep``, keep it in the spool instead when the store cannot take it now (or the spool
        could not all be written first: the order is kept). What the store answered; None when
        it did not take the record. Never raises."""
        spool = self.spool() if keep else None
        behind = object()

        def operation(store: Store) -> Any:
            if spool is not None and spool.pending() and not self._drain_into(store, spool):
                return behind
            return _apply(store, record, self._deadline(), replayed=False)

        try:
            done = self._run(operation)
        except StoreError as exc:
            if spool is not None and kept_locally(exc.status, exc.reason):
                self._keep(spool, record, exc)
            return None
        except Exception:  # noqa: BLE001 - the memory never raises to the loop
            return None
        if done is behind:
            assert spool is not None
            line = f"{self.display}: what was kept earlier is not all written yet"
            self._keep(spool, record, StoreTimeout(line, reason="behind"))
            return None
        return done

    def _keep(self, spool: Spool, record: dict[str, Any], because: StoreError) -> None:
        try:
            kept = spool.append({"location": self.display, **record})
        except OSError:
            self._count(lost=1, because=because)
            return
        self._count(kept=int(kept), lost=int(not kept), full=not kept, because=because)

    def _drain_into(self, store: Store, spool: Spool) -> bool:
        """Write what ``spool`` keeps into ``store``, oldest first, for at most the memory's
        timeout; whether it is all written. Raises the store's error."""
        try:
            done = spool.drain(
                lambda kept: _apply(store, kept, self._deadline(), replayed=True),
                until=self._deadline(),
            )
        except OSError:
            return False
        self._count(written=done.written)  # a damaged record is no failure of this run
        return done.empty

    def drain(self) -> None:
        """Write what the spool keeps for this store, if it keeps anything and the store takes
        it (the start of a run). Never raises."""
        spool = self.spool()
        if spool is None or not spool.pending():
            return
        with contextlib.suppress(Exception):
            self._run(lambda store: self._drain_into(store, spool))

    def explain(self, error: StoreError) -> str:
        """``error``'s message as one line, with no password and nothing redact() hides."""
        return _one_line(self.location, error)

    def answered_again(self, outcome: QueryOutcome) -> QueryOutcome:
        """``outcome``, an answer this run had already, given again without asking the store:
        ``cached``; or, when the store is known to be unreachable now, that (its results kept:
        they were true when they were fetched)."""
        down = self.unreachable or _cooling(self.location.display)
        if down is None:
            return attrs.evolve(outcome, status="cached", reason="", message="", duration_ms=0.0)
        return attrs.evolve(
            outcome,
            status=down.status,
            reason=down.reason,
            message=self.explain(down),
            duration_ms=0.0,
        )

    def record_suggestion_outcome(self, keys: Iterable[str], *, effective: bool) -> bool:
        """Count one judged showing of each suggestion key (and whether it worked)."""
        rows = [(key, 1 if effective else 0, time.time()) for key in dict.fromkeys(keys) if key]
        if not rows:
            return True
        deadline = self._deadline()
        try:
            self._run(lambda store: store.bump_suggestions(rows, deadline))
            return True
        except Exception:  # noqa: BLE001 - the memory never raises to the loop
            return False

    def bulk_insert(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Insert many failures in one transaction (benchmarks, imports); how many. Raises
        :class:`~.store.StoreError`."""
        from loopctl_context_errors.store_sqlite import new_uid

        def prepared() -> Iterable[StoredFailure]:
            for row in rows:
                if "signature" in row and "tokens" in row:  # precomputed
                    signature, terms = str(row["signature"]), list(row["tokens"])
                else:
                    signature, normalized = signature_of(row["decisive"])
                    terms = tokens_of(normalized)
                now = float(row.get("created_at", time.time()))
                yield StoredFailure(
                    uid=new_uid(),
                    signature=signature,
                    category=str(row.get("category", "UNKNOWN")),
                    rule=str(row.get("rule", "")),
                    stage=str(row.get("stage", "tests")),
                    project=str(row.get("project", "")),
                    project_id=str(row.get("project_id", "")),
                    project_path="",
                    run_id=NO_RUN,
                    decisive_json=json.dumps([redact(x) for x in row["decisive"]]),
                    terms=tuple(terms),
                    created_at=now,
                    last_seen=now,
                    resolved_at=row.get("resolved_at"),
                    fix_files_json=json.dumps(list(row.get("fix_files", []))),
                    fix_suggestion=str(row.get("fix_suggestion", "")),
                )

        deadline = self._deadline(3600)  # an import: no 5-second budget
        return self._run(lambda store: store.add_many(prepared(), deadline))

    # --- reading -------------------------------------------------------------------------

    def query_similar(
        self,
        decisive: Sequence[str],
        *,
        limit: int = 3,
        category: str | None = None,
        exclude_run: str = "",
        project_id: str = "",
        timeout_s: float | None = None,
    ) -> QueryOutcome:
        """Stored failures like ``decisive``: exact signature first, then rare words; the
        project ``project_id``'s before other projects' (compared redacted, as it is stored).

        Never raises; the outcome's ``status`` (and ``reason``, ``message``) say why it is
        empty when it is.
        """
        started = time.monotonic()
        deadline = self._deadline(timeout_s)
        outcome = QueryOutcome()
        project_id = redact(project_id)
        try:
            signature, normalized = signature_of(decisive)
            words = set(tokens_of(normalized))
            hits = self._run(
                lambda store: ranking.rank(
                    store, signature, words, limit, category, exclude_run, project_id, deadline
                )
            )
            outcome.results = [_similar_failure(hit) for hit in hits]
        except StoreError as exc:
            outcome.status, outcome.reason = exc.status, exc.reason
            outcome.message = _one_line(self.location, exc)
        except Exception as exc:  # noqa: BLE001 - a broken store must never break a report
            outcome.status, outcome.reason = "error", "error"
            outcome.message = f"{self.location.display}: {type(exc).__name__}"
        if outcome.status != "ok":
            outcome.results = []
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return outcome

    def suggestion_stats(self, keys: Iterable[str]) -> dict[str, tuple[int, int]]:
        """``key → (shown, effective)`` for the keys that have been judged. Never raises."""
        wanted = [key for key in dict.fromkeys(keys) if key][:500]
        if not wanted:
            return {}
        deadline = self._deadline()
        try:
            return self._run(lambda store: store.suggestion_stats(wanted, deadline))
        except Exception:  # noqa: BLE001 - the memory never raises to the loop
            return {}

    def status(self) -> QueryOutcome:
        """Whether the store can answer (``ok`` or ``missing`` when it can). Never raises."""
        outcome = QueryOutcome()
        try:
            self._run(lambda store: store.schema(self._deadline()))
        except StoreError as exc:
            outcome.status, outcome.reason = exc.status, exc.reason
            outcome.message = _one_line(self.location, exc)
        except Exception as exc:  # noqa: BLE001 - the memory never raises to the loop
            outcome.status, outcome.reason = "error", "error"
            outcome.message = f"{self.location.display}: {type(exc).__name__}"
        return outcome

    def check_writable(self) -> None:
        """Raise :class:`~.store.StoreNewer` for a store of a newer schema, and
        :class:`~.store.StoreOutdated` for an older Postgres (which only ``loopctl memory
        migrate`` brings up to date); other errors as the store raises them."""
        deadline = self._deadline()
        state = self._run(lambda store: store.schema(deadline))
        if state.version is None or state.version == state.current:
            return
        if state.version > state.current:
            raise newer_store(self.display, state.version)
        if self.location.kind != "sqlite":  # a SQLite file is migrated on first use
            raise StoreOutdated(
                f"{self.display}: schema version {state.version} is older than this loopctl's "
                f"{state.current}: run `loopctl memory migrate --memory {self.display}`",
                reason="outdated",
            )

    def stats(self) -> dict[str, Any]:
        """Counts for ``loopctl memory stats``. Raises :class:`~.store.StoreError`."""
        deadline = self._deadline()
        try:
            return self._run(lambda store: store.stats(deadline))
        except StoreMissing:
            return stats_of(self.location, None, None)

    def migrate(self, *, dry_run: bool = False) -> MigrationReport:
        """Bring the store to this loopctl's schema. Raises :class:`~.store.StoreError`."""
        deadline = self._deadline(max(self.timeout_s, 60.0))
        return self._run(lambda store: store.migrate(deadline, dry_run=dry_run))

    def prune(
        self,
        *,
        older_than_days: float | None = None,
        keep: int | None = None,
        project: str | None = None,
        dry_run: bool = False,
    ) -> int:
        """Delete old failures; how many (would) go. Raises :class:`~.store.StoreError`."""
        where = PruneCriteria(
            last_seen_before=None
            if older_than_days is None
            else time.time() - older_than_days * 86400,
            project=None if project is None else redact(project),  # as stored
            keep=keep,
        )
        deadline = self._deadline()

        def delete(store: Store) -> int:
            if store.schema(deadline).version is None:
                return 0
            return store.delete(where, dry_run=dry_run, deadline=deadline)

        try:
            return self._run(delete)
        except StoreMissing:
            return 0

    def enforce_cap(self, max_records: int) -> int:
        """Drop the oldest failures once there are 10% more than ``max_records`` (counted, not
        guessed from the ids: a Postgres upsert uses an id each time). Never raises."""
        try:
            deadline = self._deadline()
            stored = self._run(lambda store: store.count(deadline))
            if stored <= max_records * 1.1:
                return 0
            return self.prune(keep=max_records)
        except Exception:  # noqa: BLE001 - housekeeping must never end a run badly
            return 0

    def recent(self, limit: int = 20) -> list[FailureRecord]:
        deadline = self._deadline()
        try:
            rows = self._run(lambda store: store.recent(limit, deadline))
        except StoreMissing:
            return []
        return [_record(row) for row in rows]

    def copy_to(self, target: FailureMemory, *, batch: int = 5000) -> CopyCount:
        """Copy every row into ``target`` (rows it holds already, by uid, are skipped), then
        the judged suggestions it has not judged yet. Raises :class:`~.store.StoreError`."""
        source = self._run(lambda store: store)
        read = inserted = 0
        pending: list[StoredFailure] = []

        def flush() -> int:
            rows = list(pending)
            pending.clear()
            deadline = target._deadline(3600)
            return target._run(lambda store: store.add_many(rows, deadline))

        for row in source.iter_failures(batch):
            pending.append(row)
            read += 1
            if len(pending) >= batch:
                inserted += flush()
        if pending:
            inserted += flush()
        judged = source.suggestion_rows(self._deadline(3600))
        deadline = target._deadline(3600)
        added = target._run(lambda store: store.add_suggestion_rows(judged, deadline))
        return CopyCount(read, inserted, len(judged), added)


class CopyCount(NamedTuple):
    """What :meth:`FailureMemory.copy_to` read and wrote."""

    read: int
    inserted: int
    suggestions_read: int = 0
    suggestions_added: int = 0


def _kept_field(field: attrs.Attribute[Any], value: Any) -> bool:
    return field.name != "replayed"


def _apply(store: Store, record: Mapping[str, Any], deadline: float, *, replayed: bool) -> Any:
    """Write one record (a spool's, or one about to be kept if this fails) into ``store``.
    Raises KeyError, TypeError or ValueError for a record that is not one."""
    kind = record["kind"]
    if kind == "failure":
        row = dict(record["row"])
        row["terms"] = tuple(str(term) for term in row["terms"])
        return store.add_failure(NewFailure(**row, replayed=replayed), deadline)
    if kind == "fix":
        target = FixTarget(**record["target"])
        return store.set_fix(target, Fix(**record["fix"]), deadline)
    raise ValueError(f"not a kind of record: {kind!r}")


def _similar_failure(hit: ranking.Hit) -> SimilarFailure:
    return SimilarFailure(
        _record(hit.row, occurrences=hit.occurrences), hit.score, hit.match, hit.same_project
    )


def one_line(text: str) -> str:
    """``text`` as one line a terminal shows as it is: every run of whitespace (line breaks of
    any kind included) one space, control characters removed."""
    return sanitize(" ".join(str(text).split()))


def naming(location: MemoryLocation, message: str) -> str:
    """``message``, after ``location: `` unless it names the location already (as shown, or as
    :func:`loopctl.redact` showed it: a long user name can look like a token)."""
    shown = location.display
    if shown in message or redact(shown) in message:
        return message
    return f"{shown}: {message}"


def _one_line(location: MemoryLocation, error: BaseException) -> str:
    """A store error's message as one line, with no password and nothing redact() hides."""
    return redact(location.scrub(one_line(str(error)) or type(error).__name__))[:300]


__all__ = [
    "COOL_DOWN_S",
    "DEFAULT_TIMEOUT_S",
    "ENV_MEMORY",
    "KEPT_STATUSES",
    "NOT_KEPT_REASONS",
    "SCHEMA_VERSION",
    "FailureMemory",
    "FailureRecord",
    "QueryOutcome",
    "SimilarFailure",
    "close_all",
    "default_memory_path",
    "kept_locally",
    "naming",
    "open_store",
    "resolve_memory_location",
    "resolve_memory_path",
    "signature_of",
    "tokens_of",
]
