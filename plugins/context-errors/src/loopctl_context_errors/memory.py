"""The failure memory: every failure loopctl saw, in every project, and what fixed it.

One SQLite database per user (``$XDG_DATA_HOME/loopctl/failures.sqlite3``, by default
``~/.local/share/loopctl/failures.sqlite3``; ``LOOPCTL_FAILURE_MEMORY`` or the plugin's
``memory_path`` setting moves it, ``off`` turns it off). It is shared by every project and every
loop running at the same time, so it runs in WAL mode (readers never wait for writers), writes
take ``BEGIN IMMEDIATE`` with a busy timeout, and nothing here ever raises to the loop: a missing,
locked, slow or corrupt store means "no memory this time".

Each failure is stored with a signature (a hash of its decisive lines after
:func:`loopctl.normalize_line` masked numbers, paths, hex ids, timestamps and host
names), its category, the rule that fired, the stage, the project, the (redacted) decisive lines
and the time; later, the fix that resolved it: the files changed and the suggestion applied.

Finding similar failures (:meth:`FailureMemory.query_similar`): exact signature matches first;
then an FTS5 query for the few *rarest* words of the failure (a word every failure has, such as
``error``, says nothing and makes the query slow), ranked by BM25 and re-ranked by word overlap,
category and whether a fix is known. Everything runs under a hard deadline (default 5 s) enforced
by SQLite's progress handler.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import attrs

from loopctl import normalize_line, redact

ENV_MEMORY = "LOOPCTL_FAILURE_MEMORY"
#: Values of ``LOOPCTL_FAILURE_MEMORY`` / ``memory_path`` that turn the memory off.
OFF_WORDS = frozenset({"off", "none", "false", "0", "disabled"})
DEFAULT_TIMEOUT_S = 5.0
SCHEMA_VERSION = 1
#: How many of a failure's rarest words the similarity query uses.
RARE_TOKENS = 4
#: At most about this many stored rows may match the rare words (the first word always counts).
RARE_BUDGET = 1500
#: BM25 ranks at most this many rows: the newest the rare words match. Ranking costs about
#: 2 µs a row (a document-size lookup each), and the rarest word always goes, so without this
#: bound a word every stored failure shares would make each query (one per new failure) slower
#: as the store grows. At 1,500 a loop whose failures share only common words (an assertion
#: in differently named tests) spent up to 3 ms a failed iteration here; at 300, on the
#: benchmark's 100,000-failure store, 198 of 200 queries return the same three failures as at
#: 1,500 (the other two a different third or second), and one more query finds any.
RANKED_ROWS = 300
#: How many FTS5 candidates are re-ranked.
CANDIDATES = 40
#: Candidates whose word overlap (Jaccard) is below this are not "similar".
MIN_SIMILARITY = 0.3
#: Progress-handler granularity (SQLite virtual-machine instructions between deadline checks).
_PROGRESS_STEPS = 2000

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
    """Where the memory lives: ``LOOPCTL_FAILURE_MEMORY``, else ``configured`` (the plugin's
    ``memory_path``), else the XDG default. None when either says ``off``."""
    env = os.environ if env is None else env
    for value in (env.get(ENV_MEMORY, ""), configured):
        value = (value or "").strip()
        if not value:
            continue
        if value.lower() in OFF_WORDS:
            return None
        return Path(os.path.expanduser(value))
    return default_memory_path(env)


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

    @property
    def fixed(self) -> bool:
        return self.resolved_at is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "signature": self.signature,
            "category": self.category,
            "rule": self.rule,
            "stage": self.stage,
            "project": self.project,
            "decisive_lines": list(self.decisive),
            "created_at": self.created_at,
            "last_seen": self.last_seen,
            "occurrences": self.occurrences,
            "resolved_at": self.resolved_at,
            "fix_files": list(self.fix_files),
            "fix_suggestion": self.fix_suggestion,
            "fix_summary": self.fix_summary,
        }


@attrs.define
class SimilarFailure:
    """A stored failure like the one being reported, and how alike they are."""

    record: FailureRecord
    #: 0–1: 1 for the same signature, else the word overlap after re-ranking.
    score: float
    #: "exact" (same signature) or "similar".
    match: str

    def to_json(self) -> dict[str, Any]:
        return {"match": self.match, "score": round(self.score, 3), **self.record.to_json()}


@attrs.define
class QueryOutcome:
    """What a similarity query found, and whether the store could answer at all."""

    results: list[SimilarFailure] = attrs.Factory(list)
    #: ok, missing, disabled, timeout, locked, error.
    status: str = "ok"
    duration_ms: float = 0.0


class _Deadline(Exception):
    pass


_SCHEMA = """
CREATE TABLE IF NOT EXISTS failures (
    id INTEGER PRIMARY KEY,
    signature TEXT NOT NULL,
    category TEXT NOT NULL,
    rule TEXT NOT NULL DEFAULT '',
    stage TEXT NOT NULL DEFAULT '',
    project TEXT NOT NULL DEFAULT '',
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
CREATE INDEX IF NOT EXISTS failures_signature ON failures(signature, resolved_at);
CREATE INDEX IF NOT EXISTS failures_created ON failures(created_at);
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

_FTS_SCHEMA = """
CREATE VIRTUAL TABLE IF NOT EXISTS failures_fts
    USING fts5(tokens, content='failures', content_rowid='id');
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

_COLUMNS = (
    "id, signature, category, rule, stage, project, decisive, created_at, occurrences, "
    "last_seen, resolved_at, fix_files, fix_suggestion, fix_summary"
)


def _loads_list(text: Any) -> list[str]:
    try:
        value = json.loads(text) if isinstance(text, str) else []
    except ValueError:
        return []
    return [str(x) for x in value] if isinstance(value, list) else []


def _record(row: Sequence[Any]) -> FailureRecord:
    return FailureRecord(
        id=int(row[0]),
        signature=str(row[1]),
        category=str(row[2]),
        rule=str(row[3]),
        stage=str(row[4]),
        project=str(row[5]),
        decisive=_loads_list(row[6]),
        created_at=float(row[7]),
        occurrences=int(row[8]),
        last_seen=float(row[9]),
        resolved_at=None if row[10] is None else float(row[10]),
        fix_files=_loads_list(row[11]),
        fix_suggestion=str(row[12]),
        fix_summary=str(row[13]),
    )


def _fts_phrase(token: str) -> str:
    return '"' + token.replace('"', '""') + '"'


@attrs.define
class _Open:
    conn: sqlite3.Connection
    schema_ok: bool = False


#: Open connections by (process, thread, path): a forked child opens its own, and each thread
#: has its own, so the loop's queries never wait for the background writer's transaction (WAL
#: lets one writer and any number of readers work at once).
_OPEN: dict[tuple[int, int, str], _Open] = {}
_LOCK = threading.Lock()


def _key(path: Path) -> tuple[int, int, str]:
    return (os.getpid(), threading.get_ident(), str(path))


def _open(path: Path, *, create: bool, timeout: float) -> _Open:
    key = _key(path)
    with _LOCK:
        entry = _OPEN.get(key)
    if entry is not None:
        return entry
    uri = f"file:{path.as_posix()}?mode={'rwc' if create else 'rw'}"
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
#: The longest pause between two tries of a lock SQLite refused without waiting.
_BUSY_PAUSE_S = 0.05


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    message = str(exc).lower()
    return "locked" in message or "busy" in message


def _while_busy(step: Callable[[], _T], deadline: float) -> _T:
    """``step()``, tried again while SQLite says the database is busy, until ``deadline``.

    SQLite waits out a lock held by another process through its busy timeout, but not always:
    in WAL mode some refusals (another connection recovering the WAL index, a journal-mode
    change racing the store's creation) come back at once, and under load several processes
    writing one store met one now and then (a failure record lost)."""
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


class FailureMemory:
    """The store at ``path``. Cheap to create: nothing is opened until it is used."""

    def __init__(self, path: Path, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.path = Path(path)
        self.timeout_s = max(0.01, float(timeout_s))
        self.fts = True

    # --- connections ---------------------------------------------------------------------

    @contextlib.contextmanager
    def _connect(
        self, *, create: bool, deadline: float | None = None
    ) -> Iterator[sqlite3.Connection]:
        """A connection for one operation, within ``deadline`` (busy waits included).

        Connections are kept open per process, thread and path (opening and closing one per operation
        would checkpoint the WAL every time); a connection that saw the database broken is
        dropped, so the next operation starts afresh.
        """
        if not self.path.exists():
            _forget(self.path)
            if not create:
                raise FileNotFoundError(str(self.path))
            self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.timeout_s if deadline is None else deadline
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Deadline()
        entry = _open(self.path, create=create, timeout=remaining)
        conn = entry.conn
        try:
            conn.execute(f"PRAGMA busy_timeout = {max(1, int(remaining * 1000))}")
            conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
            if create and not entry.schema_ok:
                self._ensure_schema(conn, deadline)
                entry.schema_ok = True
            yield conn
        except sqlite3.DatabaseError as exc:
            if "locked" not in str(exc).lower() and "interrupt" not in str(exc).lower():
                _forget(self.path)
            raise
        finally:
            with contextlib.suppress(sqlite3.Error):
                conn.set_progress_handler(None, 0)
                if conn.in_transaction:
                    conn.execute("ROLLBACK")

    def _ensure_schema(self, conn: sqlite3.Connection, deadline: float) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            self.fts = self._has_fts(conn)
            return
        _while_busy(lambda: conn.execute("PRAGMA journal_mode=WAL"), deadline)
        _begin_immediate(conn, deadline)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                for statement in _split_sql(_SCHEMA):
                    conn.execute(statement)
                try:
                    for statement in _split_sql(_FTS_SCHEMA):
                        conn.execute(statement)
                except sqlite3.OperationalError:  # no FTS5 in this SQLite: exact matches only
                    pass
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        with contextlib.suppress(OSError):
            os.chmod(self.path, 0o600)
        self.fts = self._has_fts(conn)

    @staticmethod
    def _has_fts(conn: sqlite3.Connection) -> bool:
        row = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'failures_fts' LIMIT 1"
        ).fetchone()
        return row is not None

    @contextlib.contextmanager
    def _write(self, timeout_s: float | None = None) -> Iterator[sqlite3.Connection]:
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        with self._connect(create=True, deadline=deadline) as conn:
            _begin_immediate(conn, deadline)
            try:
                yield conn
            except BaseException:
                if conn.in_transaction:  # an interrupt has already rolled it back
                    conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # --- writing -------------------------------------------------------------------------

    def record_failure(
        self,
        *,
        decisive: Sequence[str],
        category: str,
        rule: str = "",
        stage: str = "",
        project: str = "",
        project_path: str = "",
        run_id: str = "",
        now: float | None = None,
    ) -> int | None:
        """Store a failure (or count it again when this run already stored it); its row id.

        None when the store cannot be written (locked for longer than the timeout, read-only,
        corrupt) or there is nothing to store. Never raises.
        """
        signature, normalized = signature_of(decisive)
        if not signature:
            return None
        now = time.time() if now is None else now
        lines = [redact(line)[:500] for line in decisive][:20]
        tokens = tokens_of(normalized)
        try:
            with self._write() as conn:
                if run_id:
                    row = conn.execute(
                        "SELECT id FROM failures WHERE signature = ? AND run_id = ? "
                        "ORDER BY id DESC LIMIT 1",
                        (signature, run_id),
                    ).fetchone()
                    if row is not None:
                        conn.execute(
                            "UPDATE failures SET occurrences = occurrences + 1, last_seen = ? "
                            "WHERE id = ?",
                            (now, row[0]),
                        )
                        return int(row[0])
                cursor = conn.execute(
                    "INSERT INTO failures (signature, category, rule, stage, project, "
                    "project_path, run_id, decisive, tokens, created_at, last_seen) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        signature,
                        str(category),
                        redact(rule),
                        redact(stage),
                        redact(project),
                        redact(project_path),
                        run_id,
                        json.dumps(lines),
                        " ".join(tokens),
                        now,
                        now,
                    ),
                )
                conn.executemany(
                    "INSERT INTO token_df (term, df) VALUES (?, 1) "
                    "ON CONFLICT(term) DO UPDATE SET df = df + 1",
                    [(token,) for token in tokens],
                )
                return int(cursor.lastrowid or 0) or None
        except (sqlite3.Error, OSError, _Deadline):
            return None

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
            where = ("id = ?", (int(failure_id),))
        except (TypeError, ValueError):
            return False
        return self._record_fix(where, files, suggestion, summary, now)

    def record_fix_for(
        self,
        signature: str,
        run_id: str,
        *,
        files: Sequence[str] = (),
        suggestion: str = "",
        summary: str = "",
        now: float | None = None,
    ) -> bool:
        """Remember what resolved the failure with ``signature`` recorded by run ``run_id``."""
        where = ("signature = ? AND run_id = ?", (signature, run_id))
        return self._record_fix(where, files, suggestion, summary, now)

    def _record_fix(
        self,
        where: tuple[str, tuple[object, ...]],
        files: Sequence[str],
        suggestion: str,
        summary: str,
        now: float | None,
    ) -> bool:
        condition, keys = where
        try:
            with self._write() as conn:
                cursor = conn.execute(
                    "UPDATE failures SET resolved_at = ?, fix_files = ?, fix_suggestion = ?, "
                    f"fix_summary = ? WHERE {condition}",
                    (
                        time.time() if now is None else now,
                        json.dumps([redact(f)[:300] for f in files][:50]),
                        redact(suggestion)[:1000],
                        redact(summary)[:1000],
                        *keys,
                    ),
                )
                return cursor.rowcount > 0
        except (sqlite3.Error, OSError, _Deadline, ValueError):
            return False

    def record_suggestion_outcome(self, keys: Iterable[str], *, effective: bool) -> bool:
        """Count one judged showing of each suggestion key (and whether it worked)."""
        rows = [(key, 1 if effective else 0, time.time()) for key in dict.fromkeys(keys) if key]
        if not rows:
            return True
        try:
            with self._write() as conn:
                conn.executemany(
                    "INSERT INTO suggestion_stats (key, shown, effective, updated_at) "
                    "VALUES (?, 1, ?, ?) ON CONFLICT(key) DO UPDATE SET shown = shown + 1, "
                    "effective = effective + excluded.effective, updated_at = excluded.updated_at",
                    rows,
                )
            return True
        except (sqlite3.Error, OSError, _Deadline):
            return False

    def bulk_insert(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Insert many failures in one transaction (benchmarks, imports). Returns the count."""
        prepared = []
        df: dict[str, int] = {}
        for row in rows:
            if "signature" in row and "tokens" in row:  # precomputed (imports, benchmarks)
                signature, tokens = str(row["signature"]), list(row["tokens"])
            else:
                signature, normalized = signature_of(row["decisive"])
                tokens = tokens_of(normalized)
            for token in tokens:
                df[token] = df.get(token, 0) + 1
            now = float(row.get("created_at", time.time()))
            prepared.append(
                (
                    signature,
                    str(row.get("category", "UNKNOWN")),
                    str(row.get("rule", "")),
                    str(row.get("stage", "tests")),
                    str(row.get("project", "")),
                    json.dumps([redact(x) for x in row["decisive"]]),
                    " ".join(tokens),
                    now,
                    now,
                    row.get("resolved_at"),
                    json.dumps(list(row.get("fix_files", []))),
                    str(row.get("fix_suggestion", "")),
                )
            )
        with self._write(timeout_s=3600) as conn:  # an import: no 5-second budget
            conn.executemany(
                "INSERT INTO failures (signature, category, rule, stage, project, decisive, "
                "tokens, created_at, last_seen, resolved_at, fix_files, fix_suggestion) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                prepared,
            )
            conn.executemany(
                "INSERT INTO token_df (term, df) VALUES (?, ?) "
                "ON CONFLICT(term) DO UPDATE SET df = df + excluded.df",
                list(df.items()),
            )
        return len(prepared)

    # --- reading -------------------------------------------------------------------------

    def query_similar(
        self,
        decisive: Sequence[str],
        *,
        limit: int = 3,
        category: str | None = None,
        exclude_run: str = "",
        timeout_s: float | None = None,
    ) -> QueryOutcome:
        """Stored failures like ``decisive``: exact signature first, then rare-word FTS5.

        Never raises; the outcome's ``status`` says why it is empty when it is.
        """
        started = time.monotonic()
        deadline = started + (self.timeout_s if timeout_s is None else max(0.0, timeout_s))
        outcome = QueryOutcome()
        try:
            outcome.results = self._query(decisive, limit, category, exclude_run, deadline)
        except FileNotFoundError:
            outcome.status = "missing"
        except _Deadline:
            outcome.status = "timeout"
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if "interrupt" in message:
                outcome.status = "timeout"
            elif "locked" in message or "busy" in message:
                outcome.status = "locked"
            else:
                outcome.status = "error"
        except Exception:  # noqa: BLE001 - a broken store must never break a report
            outcome.status = "error"
        if outcome.status != "ok":
            outcome.results = []
        outcome.duration_ms = round((time.monotonic() - started) * 1000, 3)
        return outcome

    def _query(
        self,
        decisive: Sequence[str],
        limit: int,
        category: str | None,
        exclude_run: str,
        deadline: float,
    ) -> list[SimilarFailure]:
        """Up to ``limit`` failures: those with the same signature, then the most similar."""
        signature, query_tokens = _signature_and_tokens(decisive)
        if not signature or limit <= 0:
            return []
        exclude_run = exclude_run or "\x00"  # a run id no failure has
        with self._connect(create=False, deadline=deadline) as conn:
            found = _exact_matches(conn, signature, exclude_run, limit)
            wanted = limit - len(found)
            if wanted <= 0 or not query_tokens or not self._has_fts(conn):
                return found
            candidates = self._candidates(conn, query_tokens, exclude_run)
            winners = _best_distinct(
                _ranked(candidates, query_tokens, category), {signature}, wanted
            )
            found += _similar_failures(conn, winners)
        return found

    @classmethod
    def _candidates(
        cls, conn: sqlite3.Connection, query_tokens: set[str], exclude_run: str
    ) -> list[_Candidate]:
        """The stored failures FTS5 finds for the rarest query words, best BM25 first."""
        rare, _matching = cls._rarest(conn, query_tokens)
        if not rare:
            return []
        match = " OR ".join(_fts_phrase(token) for token in rare)
        # BM25 ranks the newest RANKED_ROWS matching rows (all of them, unless even the rarest
        # word is in more): the cost stays bounded however large the store grows. Rank on the
        # few columns the score needs; whole records are read for the winners only.
        rows = conn.execute(
            "SELECT f.id, f.signature, f.category, f.resolved_at, f.last_seen, f.tokens "
            "FROM failures AS f JOIN ("
            "SELECT rid, score FROM ("
            "SELECT rowid AS rid, bm25(failures_fts) AS score FROM failures_fts "
            "WHERE failures_fts MATCH ? ORDER BY rowid DESC LIMIT ?"
            ") ORDER BY score LIMIT ?) AS m ON f.id = m.rid "
            "WHERE f.run_id != ?",
            (match, RANKED_ROWS, CANDIDATES, exclude_run),
        ).fetchall()
        return [_Candidate._make(row) for row in rows]

    @staticmethod
    def _rarest(conn: sqlite3.Connection, tokens: set[str]) -> tuple[list[str], int]:
        """Up to RARE_TOKENS of the rarest known words, while the rows they can match stay
        within RARE_BUDGET (BM25 costs time per matching row; the rarest word always goes),
        and how many rows they match at most."""
        ordered = sorted(tokens)[:200]
        placeholders = ",".join("?" * len(ordered))
        rows = conn.execute(
            f"SELECT term, df FROM token_df WHERE term IN ({placeholders})", ordered
        ).fetchall()
        known = sorted((int(df), str(term)) for term, df in rows if int(df) > 0)
        picked: list[str] = []
        matched = 0
        for df, term in known[:RARE_TOKENS]:
            if picked and matched + df > RARE_BUDGET:
                break
            picked.append(term)
            matched += df
        return picked, matched

    def suggestion_stats(self, keys: Iterable[str]) -> dict[str, tuple[int, int]]:
        """``key → (shown, effective)`` for the keys that have been judged. Never raises."""
        wanted = [key for key in dict.fromkeys(keys) if key][:500]
        if not wanted:
            return {}
        try:
            deadline = time.monotonic() + self.timeout_s
            with self._connect(create=False, deadline=deadline) as conn:
                rows = conn.execute(
                    "SELECT key, shown, effective FROM suggestion_stats WHERE key IN "
                    f"({','.join('?' * len(wanted))})",
                    wanted,
                ).fetchall()
        except Exception:  # noqa: BLE001
            return {}
        return {str(k): (int(s), int(e)) for k, s, e in rows}

    def stats(self) -> dict[str, Any]:
        """Counts for ``loopctl memory stats``. Raises OSError/sqlite3.Error for the CLI."""
        base: dict[str, Any] = {"path": str(self.path), "exists": self.path.exists()}
        if not self.path.exists():
            return {**base, "failures": 0}
        deadline = time.monotonic() + self.timeout_s
        with self._connect(create=False, deadline=deadline) as conn:
            total, fixed, occurrences, oldest, newest = conn.execute(
                "SELECT count(*), count(resolved_at), coalesce(sum(occurrences), 0), "
                "min(created_at), max(last_seen) FROM failures"
            ).fetchone()
            by_category = dict(
                conn.execute(
                    "SELECT category, count(*) FROM failures GROUP BY category "
                    "ORDER BY count(*) DESC"
                ).fetchall()
            )
            projects = conn.execute(
                "SELECT project, count(*) FROM failures GROUP BY project ORDER BY count(*) DESC "
                "LIMIT 10"
            ).fetchall()
            suggestions = conn.execute(
                "SELECT count(*), coalesce(sum(shown), 0), coalesce(sum(effective), 0) "
                "FROM suggestion_stats"
            ).fetchone()
            fts = self._has_fts(conn)
        size = sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())
        return {
            **base,
            "failures": int(total),
            "occurrences": int(occurrences),
            "fixed": int(fixed),
            "oldest": oldest,
            "newest": newest,
            "by_category": {str(k): int(v) for k, v in by_category.items()},
            "top_projects": [{"project": str(p), "failures": int(n)} for p, n in projects],
            "suggestion_keys": int(suggestions[0]),
            "suggestions_judged": int(suggestions[1]),
            "suggestions_effective": int(suggestions[2]),
            "fts5": fts,
            "size_bytes": size,
        }

    def prune(
        self,
        *,
        older_than_days: float | None = None,
        keep: int | None = None,
        project: str | None = None,
        dry_run: bool = False,
    ) -> int:
        """Delete old failures; how many (would) go. Raises sqlite3.Error/OSError for the CLI."""
        if not self.path.exists():
            return 0
        conditions: list[str] = []
        params: list[Any] = []
        if older_than_days is not None:
            conditions.append("last_seen < ?")
            params.append(time.time() - older_than_days * 86400)
        if project is not None:
            conditions.append("project = ?")
            params.append(project)
        if keep is not None:
            conditions.append("id NOT IN (SELECT id FROM failures ORDER BY last_seen DESC LIMIT ?)")
            params.append(max(0, keep))
        where = " AND ".join(conditions) if conditions else "1"
        with self._write() as conn:
            count = int(
                conn.execute(f"SELECT count(*) FROM failures WHERE {where}", params).fetchone()[0]
            )
            if dry_run or count == 0:
                return count
            conn.execute(f"DELETE FROM failures WHERE {where}", params)
            if self._has_fts(conn):
                conn.execute("DELETE FROM token_df")
                conn.execute(
                    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.failures_vocab "
                    "USING fts5vocab(main, failures_fts, 'row')"
                )
                conn.execute(
                    "INSERT INTO token_df (term, df) SELECT term, doc FROM temp.failures_vocab"
                )
        return count

    def enforce_cap(self, max_records: int) -> int:
        """Drop the oldest failures once there are 10% more than ``max_records``. Never raises."""
        try:
            if not self.path.exists():
                return 0
            deadline = time.monotonic() + self.timeout_s
            with self._connect(create=False, deadline=deadline) as conn:
                row = conn.execute("SELECT max(id) - min(id) + 1 FROM failures").fetchone()
            if row is None or row[0] is None or int(row[0]) <= max_records * 1.1:
                return 0
            return self.prune(keep=max_records)
        except Exception:  # noqa: BLE001 - housekeeping must never end a run badly
            return 0

    def recent(self, limit: int = 20) -> list[FailureRecord]:
        if not self.path.exists():
            return []
        deadline = time.monotonic() + self.timeout_s
        with self._connect(create=False, deadline=deadline) as conn:
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM failures ORDER BY last_seen DESC LIMIT ?", (limit,)
            ).fetchall()
        return [_record(row) for row in rows]


# --- the steps of a similarity query --------------------------------------------------------------


class _Candidate(NamedTuple):
    """A row FTS5 found, with just the columns the re-ranking needs."""

    id: int
    signature: str
    category: str
    resolved_at: float | None
    last_seen: float
    tokens: str


def _signature_and_tokens(decisive: Sequence[str]) -> tuple[str, set[str]]:
    """The failure's signature and the words of its normalised lines."""
    signature, normalized = signature_of(decisive)
    return signature, set(tokens_of(normalized))


def _exact_matches(
    conn: sqlite3.Connection, signature: str, exclude_run: str, limit: int
) -> list[SimilarFailure]:
    """Stored failures with the same signature: fixed ones first, then the latest seen."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM failures WHERE signature = ? AND run_id != ? "
        "ORDER BY resolved_at IS NULL, last_seen DESC LIMIT ?",
        (signature, exclude_run, limit),
    ).fetchall()
    return [SimilarFailure(_record(row), 1.0, "exact") for row in rows]


def _similarity(
    query_tokens: set[str], candidate: _Candidate, category: str | None
) -> float | None:
    """Word overlap (Jaccard), plus 0.1 for the same category and 0.1 for a known fix, capped
    below an exact match's 1.0; None below :data:`MIN_SIMILARITY`."""
    words = set(str(candidate.tokens).split())
    union = len(query_tokens | words)
    overlap = len(query_tokens & words) / union if union else 0.0
    if overlap < MIN_SIMILARITY:
        return None
    score = overlap
    if category and candidate.category == category:
        score += 0.1
    if candidate.resolved_at is not None:
        score += 0.1
    return min(score, 0.99)


def _ranked(
    candidates: Iterable[_Candidate], query_tokens: set[str], category: str | None
) -> list[tuple[float, _Candidate]]:
    """The candidates similar enough, best score first, the latest seen first among equals."""
    scored: list[tuple[float, _Candidate]] = []
    for candidate in candidates:
        score = _similarity(query_tokens, candidate, category)
        if score is not None:
            scored.append((score, candidate))
    scored.sort(key=lambda item: (-item[0], -float(item[1].last_seen)))
    return scored


def _best_distinct(
    ranked: Iterable[tuple[float, _Candidate]], taken: set[str], wanted: int
) -> list[tuple[float, int]]:
    """``(score, id)`` of the first ``wanted`` ranked candidates, one per signature, none with
    a signature in ``taken``."""
    taken = set(taken)
    winners: list[tuple[float, int]] = []
    for score, candidate in ranked:
        if len(winners) >= wanted:
            break
        if candidate.signature not in taken:
            taken.add(candidate.signature)
            winners.append((score, int(candidate.id)))
    return winners


def _similar_failures(
    conn: sqlite3.Connection, winners: Sequence[tuple[float, int]]
) -> list[SimilarFailure]:
    """The winners' whole records, in the winners' order (a row deleted meanwhile is left out)."""
    if not winners:
        return []
    placeholders = ",".join("?" * len(winners))
    records = {
        int(row[0]): _record(row)
        for row in conn.execute(
            f"SELECT {_COLUMNS} FROM failures WHERE id IN ({placeholders})",
            [row_id for _, row_id in winners],
        )
    }
    return [
        SimilarFailure(records[row_id], score, "similar")
        for score, row_id in winners
        if row_id in records
    ]


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


__all__ = [
    "DEFAULT_TIMEOUT_S",
    "ENV_MEMORY",
    "FailureMemory",
    "FailureRecord",
    "QueryOutcome",
    "SimilarFailure",
    "close_all",
    "default_memory_path",
    "resolve_memory_path",
    "signature_of",
    "tokens_of",
]
