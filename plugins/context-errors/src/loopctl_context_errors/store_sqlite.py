"""The failure memory in a SQLite file (FTS5 for the postings): the default backend.

One file per user, shared by every project and every loop running at the same time: WAL mode
(readers never wait for the writer), writes under ``BEGIN IMMEDIATE`` tried again while SQLite
refuses the lock at once, and a deadline enforced by SQLite's progress handler. Connections are
kept open per process, thread and path. Every error leaves as a :class:`~.store.StoreError`
with a one-line message of its own (SQLite's text is never shown as it is).

Schema 2 (``PRAGMA user_version``): ``failures`` with ``uid`` and ``project_id``; FTS5 over the
words with ``tokenchars '_'`` (so its terms are the memory's words exactly); ``token_df`` and
``memory_meta(n_failures)`` kept in Python in each write transaction, deletes included. A file
of schema 1 is migrated the first time it is opened, in one transaction.

A store opened ``read_only`` (the commands that only read it: ``loopctl memory stats``) writes
nothing, not even beside the file: it opens its own connection with ``mode=ro`` while a writer's
``-wal`` and ``-shm`` are there to share, else with ``immutable=1`` too (``mode=ro`` alone
creates them), and migrates nothing (a file of schema 1 is reported outdated).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import attrs

from loopctl_context_errors.project_id import project_identity
from loopctl_context_errors.store import (
    SCHEMA_VERSION,
    Candidate,
    Fix,
    FixTarget,
    MemoryLocation,
    MigrationReport,
    NewFailure,
    PruneCriteria,
    SchemaState,
    StatsRows,
    StoreBusy,
    StoredFailure,
    StoredRow,
    StoreError,
    StoreMissing,
    StoreNewer,
    StoreOutdated,
    StoreTimeout,
    newer_store,
    stats_of,
)

#: Progress-handler granularity (SQLite virtual-machine instructions between deadline checks).
_PROGRESS_STEPS = 2000
#: The longest pause between two tries of a lock SQLite refused without waiting.
_BUSY_PAUSE_S = 0.05
#: A migration's own budget at least (it rewrites the word index of every row).
MIGRATION_BUDGET_S = 60.0
#: Rows a statement's ``IN (…)`` list holds at most.
_CHUNK = 500

_TABLES = """
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY,
    uid TEXT NOT NULL DEFAULT '',
    signature TEXT NOT NULL,
    category TEXT NOT NULL,
    rule TEXT NOT NULL DEFAULT '',
    stage TEXT NOT NULL DEFAULT '',
    project TEXT NOT NULL DEFAULT '',
    project_id TEXT NOT NULL DEFAULT '',
    project_path TEXT NOT NULL DEFAULT '',
    run_id TEXT NOT NULL DEFAULT '',
    decisive TEXT NOT NULL DEFAULT '[]',
    tokens TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    last_seen REAL NOT NULL,
    occurrences INTEGER NOT NULL DEFAULT 1,
    resolved_at REAL,
    fix_files TEXT NOT NULL DEFAULT '[]',
    fix_suggestion TEXT NOT NULL DEFAULT '',
    fix_summary TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS token_df (
    term TEXT PRIMARY KEY,
    df INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS suggestion_stats (
    key TEXT PRIMARY KEY,
    shown INTEGER NOT NULL DEFAULT 0,
    effective INTEGER NOT NULL DEFAULT 0,
    updated_at REAL NOT NULL DEFAULT 0
) WITHOUT ROWID;
"""

#: What schema 2 adds to schema 1's tables (run after their columns exist).
_V2 = """
CREATE TABLE IF NOT EXISTS memory_meta (k TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS failures_signature ON failures(signature, resolved_at);
CREATE INDEX IF NOT EXISTS failures_created ON failures(created_at);
CREATE UNIQUE INDEX IF NOT EXISTS failures_uid ON failures(uid);
CREATE UNIQUE INDEX IF NOT EXISTS failures_run ON failures(signature, run_id) WHERE run_id <> '';
CREATE VIRTUAL TABLE IF NOT EXISTS failures_fts
    USING fts5(tokens, content='failures', content_rowid='id', tokenize="unicode61 tokenchars '_'");
CREATE TRIGGER IF NOT EXISTS failures_ai AFTER INSERT ON failures BEGIN
    INSERT INTO failures_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
CREATE TRIGGER IF NOT EXISTS failures_ad AFTER DELETE ON failures BEGIN
    INSERT INTO failures_fts(failures_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
END;
CREATE TRIGGER IF NOT EXISTS failures_au AFTER UPDATE OF tokens ON failures BEGIN
    INSERT INTO failures_fts(failures_fts, rowid, tokens) VALUES ('delete', old.id, old.tokens);
    INSERT INTO failures_fts(rowid, tokens) VALUES (new.id, new.tokens);
END;
"""

_ROW_COLUMNS = (
    "id, signature, category, rule, stage, project, project_id, decisive, created_at, "
    "occurrences, last_seen, resolved_at, fix_files, fix_suggestion, fix_summary"
)
_FULL_COLUMNS = (
    "id, uid, signature, category, rule, stage, project, project_id, project_path, run_id, "
    "decisive, tokens, created_at, last_seen, occurrences, resolved_at, fix_files, "
    "fix_suggestion, fix_summary"
)


class _Deadline(Exception):
    pass


@attrs.define
class _Open:
    conn: sqlite3.Connection
    schema_ok: bool = False


#: Open connections by (process, thread, path): a forked child opens its own, and each thread
#: has its own, so the loop's queries never wait for the background writer's transaction.
_OPEN: dict[tuple[int, int, str], _Open] = {}
_LOCK = threading.Lock()


def _uri(path: Path) -> str:
    """``path`` as a SQLite URI (``?``, ``#`` and ``%`` in a file name are escaped)."""
    return "file:" + quote(path.as_posix())


def _read_only_uri(path: Path) -> str:
    """A URI that opens ``path`` read-only and writes nothing beside it: ``mode=ro`` when the
    ``-wal`` and ``-shm`` of a writer are there (shared with it), else ``immutable=1`` too."""
    shared = all(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-shm"))
    return f"{_uri(path)}?mode=ro" + ("" if shared else "&immutable=1")


def _key(path: Path) -> tuple[int, int, str]:
    return (os.getpid(), threading.get_ident(), str(path))


def _open(path: Path, *, create: bool, timeout: float) -> _Open:
    key = _key(path)
    with _LOCK:
        entry = _OPEN.get(key)
    if entry is not None:
        return entry
    uri = f"{_uri(path)}?mode={'rwc' if create else 'rw'}"
    conn = sqlite3.connect(
        uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False
    )
    try:
        # WAL commits need no fsync with synchronous=NORMAL; a power cut may lose the last
        # failures recorded, never corrupt the store.
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.DatabaseError:
        conn.close()
        raise
    entry = _Open(conn)
    with _LOCK:
        _OPEN[key] = entry
    return entry


def _forget(path: Path) -> None:
    """Close this thread's connection to ``path`` (the next operation opens a new one)."""
    with _LOCK:
        entry = _OPEN.pop(_key(path), None)
    if entry is not None:
        with contextlib.suppress(sqlite3.Error):
            entry.conn.close()


def close_all() -> None:
    """Close every connection this process keeps open (tests, long-lived embedders)."""
    pid = os.getpid()
    with _LOCK:
        entries = [_OPEN.pop(key) for key in list(_OPEN) if key[0] == pid]
    for entry in entries:
        with contextlib.suppress(sqlite3.Error):
            entry.conn.close()


_T = TypeVar("_T")


def _is_busy(exc: sqlite3.Error) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _while_busy(step: Callable[[], _T], deadline: float) -> _T:
    """``step()``, tried again while SQLite says the database is busy, until ``deadline``.

    SQLite waits out a lock held by another process through its busy timeout, but not always:
    in WAL mode some refusals (another connection recovering the WAL index, a journal-mode
    change racing the store's creation) come back at once."""
    pause = 0.002
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, _BUSY_PAUSE_S)


def _begin_immediate(conn: sqlite3.Connection, deadline: float) -> None:
    """Take the write lock (``BEGIN IMMEDIATE``), trying again while it is refused at once."""
    _while_busy(lambda: conn.execute("BEGIN IMMEDIATE"), deadline)


def _split_sql(script: str) -> list[str]:
    """Statements of a schema script (triggers keep their inner semicolons)."""
    statements: list[str] = []
    current: list[str] = []
    depth = 0
    for line in script.strip().splitlines():
        current.append(line)
        upper = line.strip().upper()
        if upper.startswith("CREATE TRIGGER"):
            depth = 1
        if depth and upper == "END;":
            depth = 0
        if not depth and line.rstrip().endswith(";"):
            statements.append("\n".join(current).rstrip().rstrip(";"))
            current = []
    if current and "".join(current).strip():
        statements.append("\n".join(current))
    return statements


def _chunks(items: Sequence[_T], size: int = _CHUNK) -> Iterator[Sequence[_T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _marks(count: int) -> str:
    return ",".join("?" * count)


def _fts_phrase(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def legacy_project_id(project_path: str, project: str) -> str:
    """The identity of a row schema 1 stored by folder: the folder's identity today (its
    remote, else its root commit) when it is still there, so that its old failures count as
    its own; else ``path:<folder>``, or ``name:<project>`` for a row with no folder."""
    if project_path and os.path.isdir(project_path):
        return project_identity(Path(project_path)).id
    return f"path:{project_path}" if project_path else f"name:{project}"


def legacy_uid(path: str, row_id: int, created_at: float) -> str:
    """The ``uid`` of a row a schema-1 file held: stable, so a second copy adds nothing."""
    return hashlib.sha1(f"{path}\n{row_id}\n{created_at!r}".encode()).hexdigest()[:16]


def new_uid() -> str:
    return os.urandom(8).hex()


def _message(location: MemoryLocation, exc: BaseException) -> str:
    """One line for an error SQLite or the OS raised: ours, not theirs."""
    if isinstance(exc, sqlite3.DatabaseError):
        text = str(exc).lower()
        if "not a database" in text or "malformed" in text:
            why = "not a failure memory (or damaged)"
        elif "readonly" in text or "read-only" in text:
            why = "read-only"
        elif "disk" in text or "full" in text:
            why = "disk I/O error or disk full"
        elif "unable to open" in text:
            why = "cannot open the file"
        else:
            why = "SQLite error " + (getattr(exc, "sqlite_errorname", "") or type(exc).__name__)
    elif isinstance(exc, OSError):
        why = exc.strerror or type(exc).__name__
    else:
        why = type(exc).__name__
    return f"{location.display}: {why}"


class SQLiteStore:
    """The store in the file ``location.path``; nothing is opened until it is used."""

    def __init__(
        self, location: MemoryLocation, *, timeout_s: float = 5.0, read_only: bool = False
    ) -> None:
        if location.path is None:
            raise ValueError("a SQLite store needs a file")
        self.location = location
        self.path: Path = location.path
        self.timeout_s = max(0.01, float(timeout_s))
        #: Read the file and write nothing (see the module's doc).
        self.read_only = read_only

    # --- errors --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """SQLite's and the OS's errors as :class:`StoreError` subclasses."""
        try:
            yield
        except StoreError:
            raise
        except _Deadline:
            raise StoreTimeout(f"{self.location.display}: took too long") from None
        except FileNotFoundError:
            raise StoreMissing(f"{self.location.display}: nothing stored yet") from None
        except sqlite3.OperationalError as exc:
            text = str(exc).lower()
            if "interrupt" in text:
                raise StoreTimeout(f"{self.location.display}: took too long") from None
            if _is_busy(exc):
                raise StoreBusy(f"{self.location.display}: locked by another writer") from None
            raise StoreError(_message(self.location, exc)) from None
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(_message(self.location, exc)) from None

    # --- connections ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(self, *, create: bool, deadline: float) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            with self._reading(deadline) as conn:
                yield conn
            return
        with self._errors():
            if not self.path.exists():
                _forget(self.path)
                if not create:
                    raise FileNotFoundError(str(self.path))
                self.path.parent.mkdir(parents=True, exist_ok=True)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline()
            entry = _open(self.path, create=create, timeout=remaining)
            conn = entry.conn
            try:
                # PRAGMA user_version reads the file's header: a store another loopctl made
                # newer meanwhile is seen at once, for a few microseconds an operation
                if not entry.schema_ok or self._version(conn) != SCHEMA_VERSION:
                    self._ensure_schema(conn, create=create, deadline=deadline)
                    entry.schema_ok = True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _Deadline()
                conn.execute(f"PRAGMA busy_timeout = {max(1, int(remaining * 1000))}")
                conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
                yield conn
            except sqlite3.DatabaseError as exc:
                if not _is_busy(exc) and "interrupt" not in str(exc).lower():
                    _forget(self.path)
                raise
            finally:
                with contextlib.suppress(sqlite3.Error):
                    conn.set_progress_handler(None, 0)
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")

    @contextlib.contextmanager
    def _reading(self, deadline: float) -> Iterator[sqlite3.Connection]:
        """A connection of a read-only store, closed after use: it writes nothing (no schema
        made or migrated, no ``-wal`` or ``-shm`` created)."""
        with self._errors():
            if not self.path.exists():
                raise FileNotFoundError(str(self.path))
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Deadline()
            uri = _read_only_uri(self.path)
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=remaining)) as conn:
                version = self._version(conn)
                if version == 0:
                    raise StoreMissing(f"{self.location.display}: nothing stored yet")
                if version > SCHEMA_VERSION:
                    raise self._newer(version)
                if version < SCHEMA_VERSION:
                    raise StoreOutdated(
                        f"{self.location.display} is schema {version}; run `loopctl memory "
                        "migrate` (or a loop migrates it)",
                        reason="outdated",
                    )
                conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
                yield conn

    @contextlib.contextmanager
    def _write(self, deadline: float) -> Iterator[sqlite3.Connection]:
        with self._connect(create=True, deadline=deadline) as conn:
            _begin_immediate(conn, deadline)
            try:
                version = self._version(conn)  # under the write lock: no migration can race
                if version > SCHEMA_VERSION:
                    raise self._newer(version)
                yield conn
            except BaseException:
                if conn.in_transaction:  # an interrupt has already rolled it back
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    @staticmethod
    def _version(conn: sqlite3.Connection) -> int:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def _ensure_schema(self, conn: sqlite3.Connection, *, create: bool, deadline: float) -> None:
        """The file at this loopctl's schema: created (a write), migrated (schema 1), refused
        (newer: nothing written) or missing (an empty file read)."""
        version = self._version(conn)
        if version == SCHEMA_VERSION:
            return
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        if version == 0 and not create:
            raise StoreMissing(f"{self.location.display}: nothing stored yet")
        budget = max(deadline, time.monotonic() + max(self.timeout_s, MIGRATION_BUDGET_S))
        conn.execute(f"PRAGMA busy_timeout = {int((budget - time.monotonic()) * 1000)}")
        _while_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"), budget)
        _begin_immediate(conn, budget)
        try:
            self._upgrade(conn, self._version(conn))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)

    def _newer(self, version: int) -> StoreNewer:
        return newer_store(self.location.display, version)

    def _upgrade(self, conn: sqlite3.Connection, version: int) -> int:
        """Bring the schema from ``version`` to the current one inside the open transaction;
        the rows touched."""
        if version > SCHEMA_VERSION:
            raise self._newer(version)
        if version == SCHEMA_VERSION:
            return 0
        for statement in _split_sql(_TABLES):
            conn.execute(statement)
        rows = self._from_v1(conn) if version == 1 else 0
        for statement in _split_sql(_V2):
            conn.execute(statement)
        if version == 1:
            conn.execute("INSERT INTO failures_fts(failures_fts) VALUES ('rebuild')")
        self._recount(conn)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return rows

    def _from_v1(self, conn: sqlite3.Connection) -> int:
        """Schema 1's tables to schema 2's columns: ``uid`` and ``project_id`` filled in, the
        word index dropped (rebuilt with ``_`` inside words), the run sentinel cleared."""
        for statement in (
            "DROP TRIGGER IF EXISTS failures_ai",
            "DROP TRIGGER IF EXISTS failures_ad",
            "DROP TRIGGER IF EXISTS failures_au",
            "DROP TABLE IF EXISTS failures_fts",
            "ALTER TABLE failures ADD COLUMN uid TEXT NOT NULL DEFAULT ''",
            "ALTER TABLE failures ADD COLUMN project_id TEXT NOT NULL DEFAULT ''",
        ):
            conn.execute(statement)
        source = str(self.path)
        conn.create_function(
            "loopctl_legacy_uid", 2, lambda i, c: legacy_uid(source, int(i), float(c))
        )
        conn.execute("UPDATE failures SET uid = loopctl_legacy_uid(id, created_at)")
        conn.create_function(
            "loopctl_project_id", 2, functools.lru_cache(maxsize=None)(legacy_project_id)
        )
        conn.execute(
            "UPDATE failures SET project_id = loopctl_project_id(project_path, project), "
            "run_id = CASE WHEN run_id = char(0) THEN '' ELSE run_id END"
        )
        # one row per (signature, run): older duplicates (none in practice) lose their run
        conn.execute(
            "UPDATE failures SET run_id = '' WHERE run_id <> '' AND id NOT IN "
            "(SELECT max(id) FROM failures WHERE run_id <> '' GROUP BY signature, run_id)"
        )
        return int(conn.execute("SELECT count(*) FROM failures").fetchone()[0])

    @staticmethod
    def _recount(conn: sqlite3.Connection) -> None:
        """``token_df`` and ``n_failures`` from the rows (a migration)."""
        df: Counter[str] = Counter()
        for (tokens,) in conn.execute("SELECT tokens FROM failures"):
            df.update(set(str(tokens).split()))
        conn.execute("DELETE FROM token_df")
        conn.executemany("INSERT INTO token_df (term, df) VALUES (?, ?)", sorted(df.items()))
        total = conn.execute("SELECT count(*) FROM failures").fetchone()[0]
        conn.execute(
            "INSERT INTO memory_meta (k, n) VALUES ('n_failures', ?) "
            "ON CONFLICT(k) DO UPDATE SET n = excluded.n",
            (int(total),),
        )

    def _deadline(self, deadline: float | None) -> float:
        return time.monotonic() + self.timeout_s if deadline is None else deadline

    # --- schema --------------------------------------------------------------------------

    def schema(self, deadline: float) -> SchemaState:
        with self._errors():
            if not self.path.exists():
                return SchemaState(None)
            with contextlib.closing(sqlite3.connect(_read_only_uri(self.path), uri=True)) as c:
                version = self._version(c)
        return SchemaState(version or None)

    def migrate(self, deadline: float, *, dry_run: bool = False) -> MigrationReport:
        """Bring the file to this loopctl's schema (done anyway on first use)."""
        state = self.schema(deadline)
        if state.version is not None and state.version > SCHEMA_VERSION:
            raise self._newer(state.version)
        if dry_run or state.version in (None, SCHEMA_VERSION):
            rows = 0
            if dry_run and state.version is not None and state.version < SCHEMA_VERSION:
                with self._errors(), contextlib.closing(sqlite3.connect(self.path)) as conn:
                    rows = int(conn.execute("SELECT count(*) FROM failures").fetchone()[0])
            return MigrationReport(state.version, SCHEMA_VERSION, rows, dry_run)
        budget = max(deadline, time.monotonic() + MIGRATION_BUDGET_S)
        _forget(self.path)
        with self._connect(create=True, deadline=budget) as conn:
            rows = int(conn.execute("SELECT count(*) FROM failures").fetchone()[0])
        return MigrationReport(state.version, SCHEMA_VERSION, rows, False)

    # --- writing -------------------------------------------------------------------------

    @staticmethod
    def _add_terms(conn: sqlite3.Connection, counts: Mapping[str, int], sign: int = 1) -> None:
        """Each term's document frequency up (or down) by its count, in sorted order."""
        if sign > 0:
            conn.executemany(
                "INSERT INTO token_df (term, df) VALUES (?, ?) "
                "ON CONFLICT(term) DO UPDATE SET df = df + excluded.df",
                sorted(counts.items()),
            )
        else:
            conn.executemany(
                "UPDATE token_df SET df = df - ? WHERE term = ?",
                [(n, term) for term, n in sorted(counts.items())],
            )
            conn.execute("DELETE FROM token_df WHERE df <= 0")

    @staticmethod
    def _add_rows(conn: sqlite3.Connection, count: int) -> None:
        conn.execute(
            "INSERT INTO memory_meta (k, n) VALUES ('n_failures', ?) "
            "ON CONFLICT(k) DO UPDATE SET n = n + excluded.n",
            (count,),
        )

    def add_failure(self, row: NewFailure, deadline: float) -> int:
        with self._write(deadline) as conn:
            if row.run_id:
                found = conn.execute(
                    "SELECT id FROM failures WHERE signature = ? AND run_id = ?",
                    (row.signature, row.run_id),
                ).fetchone()
                if found is not None:
                    conn.execute(
                        "UPDATE failures SET occurrences = max(occurrences + ?, ?), "
                        "last_seen = max(last_seen, ?) WHERE id = ?",
                        (0 if row.replayed else 1, row.occurrence, row.now, found[0]),
                    )
                    return int(found[0])
            terms = sorted(set(row.terms))
            cursor = conn.execute(
                "INSERT INTO failures (uid, signature, category, rule, stage, project, "
                "project_id, project_path, run_id, decisive, tokens, created_at, last_seen, "
                "occurrences) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    row.uid or new_uid(),
                    row.signature,
                    row.category,
                    row.rule,
                    row.stage,
                    row.project,
                    row.project_id,
                    row.project_path,
                    row.run_id,
                    row.decisive_json,
                    " ".join(dict.fromkeys(row.terms)),
                    row.now,
                    row.now,
                    max(1, row.occurrence),
                ),
            )
            self._add_terms(conn, dict.fromkeys(terms, 1))
            self._add_rows(conn, 1)
            return int(cursor.lastrowid or 0)

    def add_many(self, rows: Iterable[StoredFailure], deadline: float) -> int:
        """Insert the rows whose uid is new; how many. A batch keeps its ids when they all come
        after every stored id (a copy into an empty store, batch after batch), so a copy
        answers ``memory search`` with the source's ids."""
        inserted = 0
        df: Counter[str] = Counter()
        with self._write(deadline) as conn:
            for batch in _batched(rows, 5000):
                (last,) = conn.execute("SELECT coalesce(max(id), 0) FROM failures").fetchone()
                keep_ids = all(item.id is not None and item.id > last for item in batch)
                values = [_full_values(item, keep_id=keep_ids) for item in batch]
                added = self._insert_batch(conn, values)
                inserted += sum(added)
                for item, was_added in zip(batch, added, strict=True):
                    if was_added:
                        df.update(set(item.terms))
            self._add_terms(conn, df)
            self._add_rows(conn, inserted)
        return inserted

    @staticmethod
    def _insert_batch(conn: sqlite3.Connection, values: list[tuple[Any, ...]]) -> list[bool]:
        """Insert rows (those whose uid or run is stored already are left out); which were
        inserted. All at once when none is left out (the usual case), else one by one."""
        sql = f"INSERT OR IGNORE INTO failures ({_FULL_COLUMNS}) VALUES ({_marks(19)})"
        count = "SELECT count(*) FROM failures"
        before = int(conn.execute(count).fetchone()[0])
        conn.execute("SAVEPOINT batch")
        conn.executemany(sql, values)
        if int(conn.execute(count).fetchone()[0]) - before == len(values):
            conn.execute("RELEASE batch")
            return [True] * len(values)
        conn.execute("ROLLBACK TO batch")
        conn.execute("RELEASE batch")
        return [conn.execute(sql, row).rowcount > 0 for row in values]

    def set_fix(self, target: FixTarget, fix: Fix, deadline: float) -> bool:
        keys: tuple[object, ...]
        if target.id is not None:
            where, keys = "id = ?", (int(target.id),)
        else:
            where, keys = "signature = ? AND run_id = ?", (target.signature, target.run_id)
        with self._write(deadline) as conn:
            cursor = conn.execute(
                "UPDATE failures SET resolved_at = ?, fix_files = ?, fix_suggestion = ?, "
                f"fix_summary = ? WHERE {where}",
                (fix.resolved_at, fix.files_json, fix.suggestion, fix.summary, *keys),
            )
            return cursor.rowcount > 0

    def bump_suggestions(self, rows: Sequence[tuple[str, int, float]], deadline: float) -> None:
        with self._write(deadline) as conn:
            conn.executemany(
                "INSERT INTO suggestion_stats (key, shown, effective, updated_at) "
                "VALUES (?, 1, ?, ?) ON CONFLICT(key) DO UPDATE SET shown = shown + 1, "
                "effective = effective + excluded.effective, updated_at = excluded.updated_at",
                sorted(rows),
            )

    def delete(self, where: PruneCriteria, *, dry_run: bool, deadline: float) -> int:
        conditions: list[str] = []
        params: list[Any] = []
        if where.last_seen_before is not None:
            conditions.append("last_seen < ?")
            params.append(where.last_seen_before)
        if where.project is not None:
            conditions.append("(project = ? OR project_id = ?)")
            params += [where.project, where.project]
        if where.keep is not None:
            conditions.append(
                "id NOT IN (SELECT id FROM failures ORDER BY last_seen DESC, id DESC LIMIT ?)"
            )
            params.append(max(0, where.keep))
        sql = " AND ".join(conditions) if conditions else "1"
        with self._write(deadline) as conn:
            doomed = conn.execute(f"SELECT id, tokens FROM failures WHERE {sql}", params).fetchall()
            if dry_run or not doomed:
                return len(doomed)
            for batch in _chunks([int(i) for i, _ in doomed]):
                conn.execute(f"DELETE FROM failures WHERE id IN ({_marks(len(batch))})", batch)
            terms: Counter[str] = Counter()
            for _, tokens in doomed:
                terms.update(set(str(tokens).split()))
            self._add_terms(conn, terms, sign=-1)
            self._add_rows(conn, -len(doomed))
        return len(doomed)

    # --- reading -------------------------------------------------------------------------

    def suggestion_stats(self, keys: Sequence[str], deadline: float) -> dict[str, tuple[int, int]]:
        found: dict[str, tuple[int, int]] = {}
        with self._connect(create=False, deadline=deadline) as conn:
            for batch in _chunks(list(keys)):
                for key, shown, effective in conn.execute(
                    "SELECT key, shown, effective FROM suggestion_stats WHERE key IN "
                    f"({_marks(len(batch))})",
                    list(batch),
                ):
                    found[str(key)] = (int(shown), int(effective))
        return found

    def suggestion_rows(self, deadline: float) -> list[tuple[str, int, int, float]]:
        with self._connect(create=False, deadline=deadline) as conn:
            rows = conn.execute(
                "SELECT key, shown, effective, updated_at FROM suggestion_stats ORDER BY key"
            ).fetchall()
        return [(str(k), int(s), int(e), float(u)) for k, s, e, u in rows]

    def add_suggestion_rows(
        self, rows: Sequence[tuple[str, int, int, float]], deadline: float
    ) -> int:
        with self._write(deadline) as conn:
            before = conn.total_changes
            conn.executemany(
                "INSERT INTO suggestion_stats (key, shown, effective, updated_at) "
                "VALUES (?, ?, ?, ?) ON CONFLICT(key) DO NOTHING",
                sorted(rows),
            )
            return conn.total_changes - before

    def exact(self, signature: str, exclude_run: str, deadline: float) -> list[StoredRow]:
        with self._connect(create=False, deadline=deadline) as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM failures WHERE signature = ? "
                "AND (run_id <> ? OR ? = '') "
                "ORDER BY resolved_at IS NULL, last_seen DESC, id DESC LIMIT 50",
                (signature, exclude_run, exclude_run),
            ).fetchall()
        return [_stored_row(row) for row in rows]

    def term_stats(self, terms: Sequence[str], deadline: float) -> tuple[int, dict[str, int]]:
        with self._connect(create=False, deadline=deadline) as conn:
            conn.execute("BEGIN")  # one snapshot for N and the df
            try:
                row = conn.execute("SELECT n FROM memory_meta WHERE k = 'n_failures'").fetchone()
                df: dict[str, int] = {}
                for batch in _chunks(list(terms)):
                    for term, count in conn.execute(
                        f"SELECT term, df FROM token_df WHERE term IN ({_marks(len(batch))})",
                        list(batch),
                    ):
                        df[str(term)] = int(count)
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")
        return (0 if row is None else int(row[0])), df

    def postings(self, terms: Sequence[str], newest: int, deadline: float) -> list[int]:
        if not terms or newest <= 0:
            return []
        ids: set[int] = set()
        with self._connect(create=False, deadline=deadline) as conn:
            for term in terms:
                ids.update(
                    int(rowid)
                    for (rowid,) in conn.execute(
                        "SELECT rowid FROM failures_fts WHERE failures_fts MATCH ? "
                        "ORDER BY rowid DESC LIMIT ?",
                        (_fts_phrase(term), newest),
                    )
                )
        return sorted(ids, reverse=True)[:newest]

    def candidates(self, ids: Sequence[int], exclude_run: str, deadline: float) -> list[Candidate]:
        found: list[Candidate] = []
        with self._connect(create=False, deadline=deadline) as conn:
            for batch in _chunks(list(ids)):
                found += [
                    Candidate(
                        int(r[0]), str(r[1]), str(r[2]), r[3], float(r[4]), str(r[5]), str(r[6])
                    )
                    for r in conn.execute(
                        "SELECT id, signature, category, resolved_at, last_seen, tokens, "
                        f"project_id FROM failures WHERE id IN ({_marks(len(batch))}) "
                        "AND (run_id <> ? OR ? = '')",
                        [*batch, exclude_run, exclude_run],
                    )
                ]
        return found

    def rows(self, ids: Sequence[int], deadline: float) -> list[StoredRow]:
        found: list[StoredRow] = []
        with self._connect(create=False, deadline=deadline) as conn:
            for batch in _chunks(list(ids)):
                found += [
                    _stored_row(row)
                    for row in conn.execute(
                        f"SELECT {_ROW_COLUMNS} FROM failures WHERE id IN ({_marks(len(batch))})",
                        list(batch),
                    )
                ]
        return found

    def recent(self, limit: int, deadline: float) -> list[StoredRow]:
        with self._connect(create=False, deadline=deadline) as conn:
            rows = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM failures ORDER BY last_seen DESC, id DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [_stored_row(row) for row in rows]

    def count(self, deadline: float) -> int:
        try:
            with self._connect(create=False, deadline=deadline) as conn:
                row = conn.execute("SELECT n FROM memory_meta WHERE k = 'n_failures'").fetchone()
        except StoreMissing:
            return 0
        return 0 if row is None else int(row[0])

    def stats(self, deadline: float) -> dict[str, Any]:
        if not self.path.exists():
            return stats_of(self.location, None, None)
        with self._connect(create=False, deadline=deadline) as conn:
            found = _stats_rows(conn)
            version = self._version(conn)
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return stats_of(self.location, version, found._replace(size_bytes=size))

    def iter_failures(self, batch: int = 5000) -> Iterator[StoredFailure]:
        last = 0
        while True:
            with self._connect(create=False, deadline=time.monotonic() + self.timeout_s) as conn:
                rows = conn.execute(
                    f"SELECT {_FULL_COLUMNS} FROM failures WHERE id > ? ORDER BY id LIMIT ?",
                    (last, batch),
                ).fetchall()
            if not rows:
                return
            for row in rows:
                yield _stored_failure(row)
            last = int(rows[-1][0])

    def close(self) -> None:
        _forget(self.path)


def _batched(rows: Iterable[_T], size: int) -> Iterator[list[_T]]:
    batch: list[_T] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _full_values(item: StoredFailure, *, keep_id: bool) -> tuple[Any, ...]:
    return (
        item.id if keep_id else None,
        item.uid,
        item.signature,
        item.category,
        item.rule,
        item.stage,
        item.project,
        item.project_id,
        item.project_path,
        item.run_id,
        item.decisive_json,
        " ".join(dict.fromkeys(item.terms)),
        item.created_at,
        item.last_seen,
        item.occurrences,
        item.resolved_at,
        item.fix_files_json,
        item.fix_suggestion,
        item.fix_summary,
    )


def _stored_failure(row: Sequence[Any]) -> StoredFailure:
    return StoredFailure(
        id=int(row[0]),
        uid=str(row[1]),
        signature=str(row[2]),
        category=str(row[3]),
        rule=str(row[4]),
        stage=str(row[5]),
        project=str(row[6]),
        project_id=str(row[7]),
        project_path=str(row[8]),
        run_id=str(row[9]),
        decisive_json=str(row[10]),
        terms=tuple(str(row[11]).split()),
        created_at=float(row[12]),
        last_seen=float(row[13]),
        occurrences=int(row[14]),
        resolved_at=None if row[15] is None else float(row[15]),
        fix_files_json=str(row[16]),
        fix_suggestion=str(row[17]),
        fix_summary=str(row[18]),
    )


def _stored_row(row: Sequence[Any]) -> StoredRow:
    return StoredRow(
        int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]),
        str(row[6]), str(row[7]), float(row[8]), int(row[9]), float(row[10]),
        None if row[11] is None else float(row[11]), str(row[12]), str(row[13]), str(row[14]),
    )  # fmt: skip


def _stats_rows(conn: sqlite3.Connection) -> StatsRows:
    return StatsRows(
        totals=conn.execute(
            "SELECT count(*), count(resolved_at), coalesce(sum(occurrences), 0), "
            "min(created_at), max(last_seen) FROM failures"
        ).fetchone(),
        by_category=conn.execute(
            "SELECT category, count(*) FROM failures GROUP BY category "
            "ORDER BY count(*) DESC, category"
        ).fetchall(),
        projects=conn.execute(
            "SELECT project, project_id, count(*) FROM failures GROUP BY project_id, project "
            "ORDER BY count(*) DESC, project_id, project LIMIT 10"
        ).fetchall(),
        suggestions=conn.execute(
            "SELECT count(*), coalesce(sum(shown), 0), coalesce(sum(effective), 0) "
            "FROM suggestion_stats"
        ).fetchone(),
    )


__all__ = ["SQLiteStore", "close_all", "legacy_uid", "new_uid"]
