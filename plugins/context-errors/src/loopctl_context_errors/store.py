"""Where the failure memory keeps its rows: the storage interface and its location.

:class:`~loopctl_context_errors.memory.FailureMemory` decides everything a user sees (the
signature and words of a failure, which words are rare, how candidates are scored and ranked,
what is redacted); a :class:`Store` only keeps rows and fetches them. Two backends implement it:
SQLite with FTS5 (:mod:`loopctl_context_errors.store_sqlite`, a file per user, the default) and
Postgres (:mod:`loopctl_context_errors.store_postgres`, one database a team shares). Because the
ranking is computed here from integers both backends return alike (row ids, document
frequencies, the number of rows), the same query over the same rows ranks the same failures in
the same order on both.

A store raises only :class:`StoreError` subclasses, each with a one-line message that never
holds a password (:meth:`MemoryLocation.scrub`) and a status the memory reports
(``missing``, ``timeout``, ``locked``, ``unavailable``, ``newer``, ``outdated``, ``error``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import quote, unquote, urlsplit

import attrs

#: The schema this loopctl writes. A store of a newer version is neither read nor written.
SCHEMA_VERSION = 2
#: Value of ``run_id`` for a failure no run recorded (imports, benchmarks).
NO_RUN = ""
#: URL schemes that name a Postgres memory.
POSTGRES_SCHEMES = ("postgresql", "postgres")


# --- errors -----------------------------------------------------------------------------------


class StoreError(Exception):
    """The store could not do what was asked; ``str(error)`` is one line, free of secrets."""

    #: The memory's status for this error (``QueryOutcome.status``).
    status = "error"

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        #: A short code for events (``auth``, ``refused``, ``gone``, ``bad-url`` …), no free text.
        self.reason = reason or self.status


class StoreMissing(StoreError):
    """Nothing stored yet (no file, no schema): reads find nothing; a write creates it."""

    status = "missing"


class StoreTimeout(StoreError):
    """The operation's deadline passed."""

    status = "timeout"


class StoreBusy(StoreError):
    """Another writer held the store for longer than the deadline allowed."""

    status = "locked"


class StoreUnavailable(StoreError):
    """The store cannot be reached or used: refused, wrong password, gone, a malformed URL,
    no driver. ``reason`` says which."""

    status = "unavailable"


class StoreNewer(StoreError):
    """The store's schema is newer than this loopctl knows: nothing is read or written."""

    status = "newer"


class StoreOutdated(StoreError):
    """The store's schema is older and this backend does not migrate it by itself
    (a shared Postgres: ``loopctl memory migrate``)."""

    status = "outdated"


def newer_store(display: str, version: int | str) -> StoreNewer:
    """The one error for a store whose schema is newer than this loopctl knows."""
    return StoreNewer(
        f"{display}: schema version {version} is newer than this loopctl's {SCHEMA_VERSION}: "
        "upgrade loopctl",
        reason="newer",
    )


# --- where the store is -------------------------------------------------------------------------


#: A query setting that holds this word (percent-decoded, as libpq reads a key, any case) is a
#: secret: ``password``, ``sslpassword`` (the SSL key's passphrase), or a malformed one libpq
#: refuses. Its value is kept out of ``display`` and masked by ``scrub``.
SECRET_KEY_WORD = "password"
#: A secret shorter than this is not masked in free text: it would garble our own words (and
#: show where it was). Our lines are built from ``display``, which never holds a secret.
MIN_MASKED = 8
#: Words of our own messages that are common passwords too (``postgres``, ``password``): never
#: masked, like ``display``.
OWN_WORDS = ("postgresql://", "postgres://", "[postgres]", "wrong password")
_MASK = "[REDACTED]"


@attrs.frozen
class MemoryLocation:
    """A store's address: a SQLite file or a Postgres URL.

    ``display`` is what users see (a path, or ``postgresql://user@host:port/db`` without a
    password or any other secret); the connection string and the secrets are kept out of
    ``repr``.
    """

    kind: str  # "sqlite" | "postgres"
    display: str
    path: Path | None = None
    conninfo: str = attrs.field(default="", repr=False)
    #: The password (percent-decoded): the URL's, else its ``password`` query key's.
    password: str = attrs.field(default="", repr=False)
    #: Every secret value the URL holds, as written and percent-decoded (``scrub`` masks them).
    secrets: tuple[str, ...] = attrs.field(default=(), repr=False)

    def __str__(self) -> str:
        return self.display

    def scrub(self, text: str) -> str:
        """``text`` with this location's secrets of :data:`MIN_MASKED` characters or more masked,
        except inside the occurrences of ``display`` (which holds none) and of
        :data:`OWN_WORDS`: a short or common password must not garble our own lines, nor show
        itself by what it masked."""
        secrets = {
            form
            for given in (self.password, *self.secrets)
            for form in (given, unquote(given))
            if len(form) >= MIN_MASKED
        }
        if not secrets:
            return text
        kept = [span for part in (self.display, *OWN_WORDS) for span in _occurrences(text, part)]
        masked = [
            span
            for secret in secrets
            for span in _occurrences(text, secret)
            if not any(start <= span[0] and span[1] <= end for start, end in kept)
        ]
        return _masked(text, masked)


def _occurrences(text: str, part: str) -> list[tuple[int, int]]:
    """The spans of every occurrence of ``part`` in ``text``, overlapping ones included."""
    spans: list[tuple[int, int]] = []
    start = text.find(part) if part else -1
    while start >= 0:
        spans.append((start, start + len(part)))
        start = text.find(part, start + 1)
    return spans


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each run of overlapping or adjacent ``spans`` replaced by one mark."""
    runs: list[list[int]] = []
    for start, end in sorted(spans):
        if runs and start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], end)
        else:
            runs.append([start, end])
    out, done = [], 0
    for start, end in runs:
        out += [text[done:start], _MASK]
        done = end
    return "".join(out) + text[done:]


def is_url(value: str) -> bool:
    """Whether ``value`` names a Postgres memory rather than a file."""
    return value.strip().lower().split("://", 1)[0] in POSTGRES_SCHEMES and "://" in value


_PORT = re.compile(r"\d{1,5}")


def parse_location(value: str) -> MemoryLocation:
    """The location ``value`` names: a ``postgresql://`` URL, else a file path.

    Raises :class:`StoreUnavailable` (reason ``bad-url``) for a URL that is not one, with a
    message that shows no part of it but its scheme and host.
    """
    value = value.strip()
    if not is_url(value):
        path = Path(os.path.expanduser(value))
        return MemoryLocation(kind="sqlite", display=str(path), path=path)
    return _postgres_location(value)


def _bad_url(why: str, host: str = "") -> StoreUnavailable:
    shown = f"postgresql://{_printable(host)}/…" if host else "the postgresql:// URL"
    return StoreUnavailable(f"{shown} is not a valid URL ({why})", reason="bad-url")


def _postgres_location(value: str) -> MemoryLocation:
    scheme, _, rest = value.partition("://")
    authority = rest.split("/", 1)[0].split("?", 1)[0]
    if authority.count("@") > 1 or "@" in rest[len(authority) :]:
        # a second @, or one after a / or ? that ends the host part early: a user name or
        # password holding @ / ? # unencoded, which parsers split differently (and would show)
        return _raise(_bad_url("percent-encode @ / ? # in the user name or password"))
    if any(c in value for c in "\t\r\n"):  # urlsplit drops them, libpq does not: ours would differ
        return _raise(_bad_url("percent-encode tabs and line breaks"))
    try:
        parts = urlsplit(value)
        host = parts.hostname or ""
        port = parts.port
    except ValueError as exc:
        why = "a port must be a number" if "port" in str(exc).lower() else "malformed host"
        return _raise(_bad_url(why))
    if parts.fragment:
        return _raise(_bad_url("it has a #fragment", host))
    user = unquote(parts.username or "")
    password = parts.password or ""
    secrets = [password] if password else []
    shown: list[str] = []
    for pair in filter(None, parts.query.split("&")):
        key, _, given = pair.partition("=")
        if SECRET_KEY_WORD not in unquote(pair).lower():  # libpq reads %70assword as password
            shown.append(pair)
            continue
        secrets.append(given)
        if unquote(key).lower() == "password":
            password = given
    database = parts.path.lstrip("/")
    netloc = (f"{user}@" if user else "") + _host_part(parts)
    display = f"{scheme.lower()}://{netloc}/{database}" + ("?" + "&".join(shown) if shown else "")
    del port  # checked above: urlsplit raises on a port that is not a number
    return MemoryLocation(
        kind="postgres",
        display=_printable(display),
        conninfo=value,
        password=unquote(password),
        secrets=tuple(secret for secret in secrets if secret),
    )


def _printable(text: str) -> str:
    """``text`` with spaces and unprintable characters percent-encoded: a location is shown on
    one line, as typed characters."""
    return "".join(c if c.isprintable() and not c.isspace() else quote(c) for c in text)


def _host_part(parts: Any) -> str:
    host = parts.hostname or ""
    if ":" in host:  # IPv6
        host = f"[{host}]"
    return host + (f":{parts.port}" if parts.port is not None else "")


def _raise(error: StoreError) -> MemoryLocation:
    raise error


# --- what the memory hands a store and gets back -----------------------------------------------


@attrs.frozen
class NewFailure:
    """A failure to record. Text is already redacted and truncated by the memory."""

    signature: str
    category: str
    rule: str
    stage: str
    project: str
    project_id: str
    project_path: str
    run_id: str
    #: The decisive lines as JSON (a list of strings).
    decisive_json: str
    #: The failure's distinct words (:func:`~loopctl_context_errors.memory.tokens_of`).
    terms: tuple[str, ...]
    now: float
    #: The row's uid when it is inserted ("": a new one).
    uid: str = ""
    #: How many times the run has met this failure, this one included (0: not known). The
    #: run's row counts at least this many: a count lost with a write the store missed comes
    #: back with the next one.
    occurrence: int = 0
    #: Written again from the local spool: it counts nothing it counted before (the row is
    #: brought to ``occurrence``, not counted once more), so writing it twice changes nothing.
    replayed: bool = False


@attrs.frozen
class StoredFailure:
    """A whole stored row, as ``memory copy`` moves it and ``bulk_insert`` writes it."""

    uid: str
    signature: str
    category: str
    rule: str
    stage: str
    project: str
    project_id: str
    project_path: str
    run_id: str
    decisive_json: str
    terms: tuple[str, ...]
    created_at: float
    last_seen: float
    occurrences: int = 1
    resolved_at: float | None = None
    fix_files_json: str = "[]"
    fix_suggestion: str = ""
    fix_summary: str = ""
    #: The source's id; kept by a copy into an empty store.
    id: int | None = None


class Candidate(NamedTuple):
    """A row the postings found, with just the columns re-ranking needs."""

    id: int
    signature: str
    category: str
    resolved_at: float | None
    last_seen: float
    #: The row's words, space-separated.
    tokens: str
    project_id: str


class StoredRow(NamedTuple):
    """The columns of a row that :class:`~loopctl_context_errors.memory.FailureRecord` shows."""

    id: int
    signature: str
    category: str
    rule: str
    stage: str
    project: str
    project_id: str
    decisive_json: str
    created_at: float
    occurrences: int
    last_seen: float
    resolved_at: float | None
    fix_files_json: str
    fix_suggestion: str
    fix_summary: str


@attrs.frozen
class FixTarget:
    """Which row a fix belongs to: by id, or by signature and the run that recorded it."""

    id: int | None = None
    signature: str = ""
    run_id: str = ""


@attrs.frozen
class Fix:
    resolved_at: float
    files_json: str
    suggestion: str
    summary: str


@attrs.frozen
class PruneCriteria:
    """Rows to delete: all conditions given must hold."""

    #: Rows last seen before this time (seconds since the epoch).
    last_seen_before: float | None = None
    #: Only rows of this project (its display name or its identity).
    project: str | None = None
    #: Keep the newest this many rows (by last seen).
    keep: int | None = None


@attrs.frozen
class SchemaState:
    """A store's schema version against this loopctl's (None: no store yet)."""

    version: int | None
    current: int = SCHEMA_VERSION


@attrs.frozen
class MigrationReport:
    from_version: int | None
    to_version: int
    rows: int = 0
    dry_run: bool = False


class StatsRows(NamedTuple):
    """What a store's ``memory stats`` queries found; :func:`stats_of` shapes it."""

    #: ``(rows, fixed rows, occurrences, oldest created_at, newest last_seen)``.
    totals: Sequence[Any]
    #: ``(category, rows)``: most rows first, then by category (code point order).
    by_category: Sequence[Sequence[Any]]
    #: ``(project, project_id, rows)`` grouped by both: the 10 with the most rows, then by
    #: project_id and project (code point order).
    projects: Sequence[Sequence[Any]]
    #: ``(judged keys, showings judged, effective showings)``.
    suggestions: Sequence[Any]
    size_bytes: int = 0


def stats_of(
    location: MemoryLocation, version: int | None, found: StatsRows | None
) -> dict[str, Any]:
    """``loopctl memory stats``: the same keys, shaped the same, from either store (``found``
    None: no store there yet)."""
    shown: dict[str, Any] = {
        "backend": location.kind,
        "location": location.display,
        "path": None if location.path is None else str(location.path),
        "exists": found is not None,
        "schema_version": version,
        "fts5": location.kind == "sqlite",  # SQLite's word index; Postgres keeps text[] + GIN
    }
    if found is None:
        return {**shown, "failures": 0}
    total, fixed, occurrences, oldest, newest = found.totals
    keys, judged, effective = found.suggestions
    return {
        **shown,
        "failures": int(total),
        "occurrences": int(occurrences or 0),
        "fixed": int(fixed),
        "oldest": None if oldest is None else float(oldest),
        "newest": None if newest is None else float(newest),
        "by_category": {str(k): int(v) for k, v in found.by_category},
        "top_projects": [
            {"project": str(p), "project_id": str(i), "failures": int(n)}
            for p, i, n in found.projects
        ],
        "suggestion_keys": int(keys),
        "suggestions_judged": int(judged or 0),
        "suggestions_effective": int(effective or 0),
        "size_bytes": int(found.size_bytes or 0),
    }


class Store(Protocol):
    """What a backend does. ``deadline`` is a :func:`time.monotonic` time; an operation still
    running then raises :class:`StoreTimeout`. Writes that change rows also keep the number of
    rows and each word's document frequency right, in the same transaction, so that a query
    reads them consistent with the rows."""

    location: MemoryLocation

    def schema(self, deadline: float) -> SchemaState: ...

    def migrate(self, deadline: float, *, dry_run: bool = False) -> MigrationReport: ...

    def add_failure(self, row: NewFailure, deadline: float) -> int:
        """Insert ``row``, or when this run already stored its signature count it once more
        (``occurrences + 1``, ``last_seen``; a ``replayed`` row: not once more); either way the
        run's row counts at least ``row.occurrence``. The row's id. Creates the store if need
        be."""
        ...

    def add_many(self, rows: Iterable[StoredFailure], deadline: float) -> int:
        """Insert rows whose ``uid`` is not stored yet; how many were inserted."""
        ...

    def set_fix(self, target: FixTarget, fix: Fix, deadline: float) -> bool: ...

    def bump_suggestions(self, rows: Sequence[tuple[str, int, float]], deadline: float) -> None:
        """``(key, effective 0/1, now)`` each: one judged showing more of each key."""
        ...

    def suggestion_stats(
        self, keys: Sequence[str], deadline: float
    ) -> dict[str, tuple[int, int]]: ...

    def suggestion_rows(self, deadline: float) -> list[tuple[str, int, int, float]]:
        """Every judged suggestion key: ``(key, shown, effective, updated_at)``, by key."""
        ...

    def add_suggestion_rows(
        self, rows: Sequence[tuple[str, int, int, float]], deadline: float
    ) -> int:
        """Keep the counts of the keys this store has not judged yet (a key it has keeps its
        own: copying again counts nothing twice); how many keys were added."""
        ...

    def exact(self, signature: str, exclude_run: str, deadline: float) -> list[StoredRow]:
        """Rows with ``signature`` not recorded by ``exclude_run``: fixed first, then the latest
        seen, then the highest id (at most 50)."""
        ...

    def term_stats(self, terms: Sequence[str], deadline: float) -> tuple[int, dict[str, int]]:
        """The number of stored rows, and each known term's document frequency (one snapshot)."""
        ...

    def postings(self, terms: Sequence[str], newest: int, deadline: float) -> list[int]:
        """The ids of the newest ``newest`` rows holding any of ``terms``, highest first."""
        ...

    def candidates(
        self, ids: Sequence[int], exclude_run: str, deadline: float
    ) -> list[Candidate]: ...

    def rows(self, ids: Sequence[int], deadline: float) -> list[StoredRow]: ...

    def recent(self, limit: int, deadline: float) -> list[StoredRow]: ...

    def stats(self, deadline: float) -> dict[str, Any]: ...

    def delete(self, where: PruneCriteria, *, dry_run: bool, deadline: float) -> int: ...

    def count(self, deadline: float) -> int:
        """The number of stored rows (the count kept with them: no scan); 0 for no store."""
        ...

    def iter_failures(self, batch: int = 5000) -> Iterator[StoredFailure]: ...

    def close(self) -> None: ...


__all__ = [
    "NO_RUN",
    "SCHEMA_VERSION",
    "Candidate",
    "Fix",
    "FixTarget",
    "MemoryLocation",
    "MigrationReport",
    "NewFailure",
    "PruneCriteria",
    "SchemaState",
    "StatsRows",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreMissing",
    "StoreNewer",
    "StoreOutdated",
    "StoreTimeout",
    "StoreUnavailable",
    "StoredFailure",
    "StoredRow",
    "is_url",
    "newer_store",
    "parse_location",
    "stats_of",
]
