"""The SQLite backend: schema 2, the migration of a schema-1 file, a newer file left alone, and
the word counts (``token_df``, ``n_failures``) kept equal to a recount from the rows."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_context_errors.memory import FailureMemory, close_all, signature_of, tokens_of
from loopctl_context_errors.store import (
    SCHEMA_VERSION,
    MemoryLocation,
    NewFailure,
    PruneCriteria,
    StoreNewer,
)
from loopctl_context_errors.store_sqlite import SQLiteStore, legacy_uid

#: Schema 1 as loopctl 0.2 created it (memory.py before the Store interface), copied here so
#: the migration is tested against the real thing.
V1_SCHEMA = """
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
PRAGMA user_version = 1;
"""

V1_ROWS = [
    # signature, project, project_path, run_id, decisive line
    ("sig-cart", "shop", "/srv/shop", "run1", "KeyError: 'cart_job_17' in cart_worker"),
    ("sig-cart", "shop", "/srv/shop", "run2", "KeyError: 'cart_job_17' in cart_worker"),
    ("sig-user", "toy", "", "", "ValueError: user_token expired for module_not_found"),
]


def _v1_file(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.executescript(V1_SCHEMA)
        now = time.time()
        for _, project, project_path, run_id, line in V1_ROWS:
            signature, normalized = signature_of([line])
            terms = tokens_of(normalized)
            conn.execute(
                "INSERT INTO failures (signature, category, project, project_path, run_id, "
                "decisive, tokens, created_at, last_seen) VALUES (?, 'KEY_ERROR', ?, ?, ?, ?, ?, "
                "?, ?)",
                (signature, project, project_path, run_id, json.dumps([line]), " ".join(terms),
                 now, now),
            )  # fmt: skip
            conn.executemany(
                "INSERT INTO token_df (term, df) VALUES (?, 1) "
                "ON CONFLICT(term) DO UPDATE SET df = df + 1",
                [(t,) for t in terms],
            )


def _recount(path: Path) -> tuple[dict[str, int], dict[str, int], int, int]:
    """(token_df as stored, token_df recounted from the rows, n_failures, rows)."""
    with contextlib.closing(sqlite3.connect(path)) as conn:
        stored = dict(conn.execute("SELECT term, df FROM token_df").fetchall())
        counted: Counter[str] = Counter()
        for (tokens,) in conn.execute("SELECT tokens FROM failures"):
            counted.update(set(tokens.split()))
        meta = conn.execute("SELECT n FROM memory_meta WHERE k = 'n_failures'").fetchone()
        rows = conn.execute("SELECT count(*) FROM failures").fetchone()[0]
    return stored, dict(counted), (meta[0] if meta else 0), rows


def _dump(path: Path) -> tuple[int, list[str]]:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("PRAGMA user_version").fetchone()[0], list(conn.iterdump())


def test_a_schema_1_file_is_migrated_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    _v1_file(path)
    memory = FailureMemory(path)
    outcome = memory.query_similar(["KeyError: 'cart_job_17' in cart_worker"], project_id="x")
    assert outcome.status == "ok"
    # one exact match for the signature, both runs' occurrences summed
    assert [(r.match, r.record.occurrences) for r in outcome.results][:1] == [("exact", 2)]
    with contextlib.closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        rows = conn.execute("SELECT id, uid, project_id, created_at FROM failures ORDER BY id")
        rows = rows.fetchall()
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'failures_fts'").fetchone()
    assert [r[2] for r in rows] == ["path:/srv/shop", "path:/srv/shop", "name:toy"]
    assert [r[1] for r in rows] == [legacy_uid(str(path), r[0], r[3]) for r in rows]
    assert "tokenchars" in sql[0]
    stored, counted, n_failures, total = _recount(path)
    assert stored == counted
    assert n_failures == total == 3
    # the word index holds the memory's words whole: a word with '_' is found as it is
    store = SQLiteStore(MemoryLocation("sqlite", str(path), path), timeout_s=5)
    assert store.postings(["cart_job_17"], 10, time.monotonic() + 5) == [2, 1]
    assert store.postings(["cart"], 10, time.monotonic() + 5) == []
    # a second copy of the migrated rows adds nothing (same uids)
    assert store.add_many(list(store.iter_failures()), time.monotonic() + 5) == 0


def test_old_failures_of_a_folder_still_there_stay_its_own(tmp_path: Path) -> None:
    """Schema 1 knew a project by its folder: a row whose folder is still a repository gets
    that repository's identity, so after the upgrade its failures are not another project's."""
    from loopctl.testing import make_project

    project = make_project(tmp_path / "toy")
    project.git("remote", "add", "origin", "git@github.com:acme/toy.git")
    path = tmp_path / "old.sqlite3"
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.executescript(V1_SCHEMA)
        conn.execute(
            "INSERT INTO failures (signature, category, project, project_path, run_id, decisive, "
            "tokens, created_at, last_seen) VALUES ('s', 'KEY_ERROR', 'toy', ?, 'r', '[]', "
            "'keyerror', 1, 1)",
            (str(project.path),),
        )
    FailureMemory(path).migrate()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        (found,) = conn.execute("SELECT project_id FROM failures").fetchone()
    assert found == "git:github.com/acme/toy"


def test_migrate_dry_run_reports_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    _v1_file(path)
    before = _dump(path)
    report = FailureMemory(path).migrate(dry_run=True)
    assert (report.from_version, report.to_version, report.rows) == (1, SCHEMA_VERSION, 3)
    assert _dump(path) == before
    report = FailureMemory(path).migrate()
    assert (report.from_version, report.rows, report.dry_run) == (1, 3, False)
    assert _dump(path)[0] == SCHEMA_VERSION
    assert FailureMemory(path).migrate().from_version == SCHEMA_VERSION  # nothing to do


def test_a_newer_file_is_neither_read_nor_written(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite3"
    memory = FailureMemory(path)
    first = memory.record_failure(decisive=["KeyError: 'a_b'"], category="KEY_ERROR", run_id="r")
    assert first
    close_all()
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = _dump(path)
    memory = FailureMemory(path)
    outcome = memory.query_similar(["KeyError: 'a_b'"])
    assert (outcome.status, outcome.reason) == ("newer", "newer")
    assert "newer" in outcome.message
    assert "\n" not in outcome.message
    assert memory.record_failure(decisive=["KeyError: 'c'"], category="KEY_ERROR") is None
    assert memory.record_fix(first, files=["a.py"]) is False
    assert memory.record_suggestion_outcome(["k"], effective=True) is False
    assert memory.enforce_cap(100) == 0
    with pytest.raises(StoreNewer):
        memory.prune(keep=0)
    with pytest.raises(StoreNewer):
        memory.migrate()
    assert _dump(path) == before


def test_prune_keeps_the_word_counts_equal_to_a_recount(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite3"
    memory = FailureMemory(path)
    now = time.time()
    for i in range(30):
        memory.record_failure(
            decisive=[f"KeyError: 'cart_job_{i % 7}' in user_token_{i % 3}"],
            category="KEY_ERROR", run_id=f"r{i}", now=now - i * 86400,
        )  # fmt: skip
    assert memory.prune(older_than_days=10.5) == 19
    stored, counted, n_failures, total = _recount(path)
    assert stored == counted
    assert "cart_job_3" in stored
    assert "cart" not in stored
    assert n_failures == total == 11
    assert memory.prune(keep=4) == 7
    stored, counted, n_failures, total = _recount(path)
    assert (stored, n_failures) == (counted, total)


def test_exact_matches_are_distinct_and_this_projects_come_first(tmp_path: Path) -> None:
    memory = FailureMemory(tmp_path / "f.sqlite3")
    line = ["ModuleNotFoundError: No module named 'shop_payments'"]
    near = ["ModuleNotFoundError: No module named 'shop_payments_v2' in shop_checkout"]
    for run in ("a1", "a2", "a3"):
        memory.record_failure(decisive=line, category="DEPENDENCY", run_id=run,
                              project="api", project_id="git:example.com/acme/api")  # fmt: skip
    memory.record_failure(decisive=line, category="DEPENDENCY", run_id="b1",
                          project="shop", project_id="git:example.com/acme/shop")  # fmt: skip
    memory.record_failure(decisive=near, category="DEPENDENCY", run_id="b2",
                          project="shop", project_id="git:example.com/acme/shop")  # fmt: skip
    outcome = memory.query_similar(line, limit=5, project_id="git:example.com/acme/shop")
    found = [(r.match, r.same_project, r.record.project, r.record.occurrences)
             for r in outcome.results]  # fmt: skip
    assert found == [
        ("exact", True, "shop", 1),
        ("similar", True, "shop", 1),
        ("exact", False, "api", 3),
    ]
    assert outcome.results[2].to_json()["same_project"] is False
    assert outcome.results[2].to_json()["project_id"] == "git:example.com/acme/api"
    # without a project, one group: one exact match for all four runs
    anywhere = memory.query_similar(line, limit=5)
    assert [(r.match, r.record.occurrences) for r in anywhere.results][:1] == [("exact", 4)]


def _new(i: int, words: list[str]) -> NewFailure:
    return NewFailure(
        signature=f"s{i}", category="UNKNOWN", rule="", stage="tests", project="p",
        project_id="path:/p", project_path="/p", run_id=f"r{i % 3}", decisive_json="[]",
        terms=tuple(words), now=1000.0 + i,
    )  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(
                st.just("add"),
                st.integers(0, 8),
                st.lists(st.sampled_from(["a_b", "cde", "fgh", "ijk_l", "mno"]), max_size=4),
            ),
            st.tuples(st.just("delete"), st.integers(0, 6), st.just([])),
        ),
        max_size=25,
    )
)
def test_word_counts_always_equal_a_recount(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, list[str]]]
) -> None:
    path = tmp_path_factory.mktemp("store") / "f.sqlite3"
    store = SQLiteStore(MemoryLocation("sqlite", str(path), path), timeout_s=5)
    try:
        for op, n, words in steps:
            deadline = time.monotonic() + 5
            if op == "add":
                store.add_failure(_new(n, words), deadline)
            else:
                store.delete(PruneCriteria(keep=n), dry_run=False, deadline=deadline)
        if path.exists():
            stored, counted, n_failures, total = _recount(path)
            assert stored == counted
            assert n_failures == total
            total_n, df = store.term_stats(sorted(counted), time.monotonic() + 5)
            assert (total_n, df) == (total, counted)
    finally:
        store.close()


# --- where the memory is, and a memory that cannot be used --------------------------------------


def test_location_precedence_env_then_url_then_path_then_default(tmp_path: Path) -> None:
    from loopctl_context_errors.memory import ENV_MEMORY, resolve_memory_location

    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    url = "postgresql://loop:pw@db:5432/mem"
    default = resolve_memory_location("", "", env)
    assert default is not None
    assert default.path == tmp_path / "xdg" / "loopctl" / "failures.sqlite3"
    by_path = resolve_memory_location(str(tmp_path / "f.db"), "", env)
    assert by_path is not None
    assert by_path.path == tmp_path / "f.db"
    by_url = resolve_memory_location(str(tmp_path / "f.db"), url, env)
    assert by_url is not None
    assert (by_url.kind, by_url.display) == ("postgres", "postgresql://loop@db:5432/mem")
    env[ENV_MEMORY] = str(tmp_path / "env.db")
    by_env = resolve_memory_location(str(tmp_path / "f.db"), url, env)
    assert by_env is not None
    assert by_env.path == tmp_path / "env.db"
    env[ENV_MEMORY] = "off"
    assert resolve_memory_location("", url, env) is None


def test_no_driver_is_unavailable_with_one_line_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "loopctl_context_errors.store_postgres", None)
    memory = FailureMemory("postgresql://loop:pw-sEcret@db:5432/mem")
    outcome = memory.query_similar(["KeyError: 'x_y'"])
    assert (outcome.status, outcome.reason) == ("unavailable", "no-driver")
    assert outcome.message == (
        "the failure memory at postgresql://loop@db:5432/mem needs psycopg: "
        "pip install 'loopctl-context-errors[postgres]'"
    )
    assert memory.record_failure(decisive=["KeyError: 'x_y'"], category="KEY_ERROR") is None


def test_an_unavailable_store_is_not_tried_again_during_the_cool_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopctl_context_errors import memory as memory_module
    from loopctl_context_errors.store import StoreUnavailable

    tries: list[str] = []

    class Refused:
        def __getattr__(self, name: str) -> object:
            def refuse(*args: object, **kwargs: object) -> object:
                tries.append(name)
                raise StoreUnavailable("postgresql://loop@db/mem: connection refused",
                                       reason="refused")  # fmt: skip

            return refuse

    monkeypatch.setattr(memory_module, "open_store", lambda location, **_: Refused())
    memory = FailureMemory("postgresql://loop@db/mem")
    assert memory.query_similar(["KeyError: 'x_y'"]).reason == "refused"
    assert memory.record_failure(decisive=["KeyError: 'x_y'"], category="KEY_ERROR") is None
    assert memory.suggestion_stats(["k"]) == {}
    again = FailureMemory("postgresql://loop@db/mem")  # the same location: cooling down too
    assert again.query_similar(["KeyError: 'x_y'"]).status == "unavailable"
    assert len(tries) == 1
    monkeypatch.setattr(memory_module, "COOL_DOWN_S", 0.0)
    close_all()  # forgets the cool-down
    assert memory.query_similar(["KeyError: 'x_y'"]).status == "unavailable"
    assert len(tries) == 2


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40),
    st.sampled_from(["postgresql://", "postgres://", "POSTGRESQL://", "", "file://", "/tmp/"]),
    st.text(alphabet="@:/[]?#&=%.", max_size=6),
    st.sampled_from(
        ["loop:{}@", "?password={}", "?%70assword={}", "?sslpassword={}", "?a=1&%73slpassword={}"]
    ),
)
def test_memory_url_setting_is_accepted_or_refused_without_its_password(
    body: str, scheme: str, punctuation: str, secret_in: str
) -> None:
    from loopctl import InvalidFields
    from loopctl_context_errors.config import ContextErrorsConfig
    from loopctl_context_errors.memory import one_line
    from loopctl_context_errors.store import StoreError, is_url, parse_location

    password = "pw-S3cr3tQ"
    held = secret_in.format(password)
    if held.endswith("@"):  # in the user part
        value = f"{scheme}{held}{punctuation}{body}"
    else:  # a query key: libpq reads %70assword as password, sslpassword is a secret too
        value = f"{scheme}loop@{punctuation}{body}{held}"
    try:
        shown = repr(ContextErrorsConfig(memory_url=value))
    except InvalidFields as exc:  # not a postgresql:// URL, or settings spelled encoded
        shown = str(exc)
        assert not is_url(value) or "plainly" in shown
        assert shown.startswith("memory_url")
        assert len(shown.strip().splitlines()) == 1
    else:  # a URL, malformed or not: the run goes on, without memory if it cannot be used
        assert is_url(value) or not value.strip()
        try:
            shown += str(parse_location(value))
        except StoreError as exc:
            shown += one_line(str(exc))
    assert len(shown.splitlines()) <= 1
    assert password not in shown


def test_a_file_made_newer_meanwhile_is_no_longer_read_or_written(tmp_path: Path) -> None:
    """A long-lived process (a fleet worker) keeps its connection: another loopctl's upgrade of
    the file is seen by the next operation, read or write."""
    path = tmp_path / "f.sqlite3"
    memory = FailureMemory(path)
    assert memory.record_failure(decisive=["KeyError: 'a_b'"], category="KEY_ERROR", run_id="r1")
    assert memory.query_similar(["KeyError: 'a_b'"]).status == "ok"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    before = _dump(path)
    assert memory.query_similar(["KeyError: 'a_b'"]).status == "newer"
    assert memory.record_failure(decisive=["KeyError: 'c_d'"], category="KEY_ERROR") is None
    assert _dump(path) == before


def test_a_file_name_with_uri_characters_is_that_file(tmp_path: Path) -> None:
    path = tmp_path / "odd?name#50%.sqlite3"
    memory = FailureMemory(path)
    assert memory.record_failure(decisive=["KeyError: 'a_b'"], category="KEY_ERROR")
    assert path.is_file()
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".sqlite3"] == [path.name]
    assert memory.query_similar(["KeyError: 'a_b'"]).results
    assert memory.migrate(dry_run=True).from_version == SCHEMA_VERSION


def test_a_read_only_memory_reads_and_writes_nothing(tmp_path: Path) -> None:
    """What `loopctl memory stats|search` and `errors similar|report` open: a missing file is
    not created, a schema-1 file is reported outdated (not migrated), a current one is read
    with nothing written beside it (no -wal, no -shm: the directory is not touched)."""
    missing = tmp_path / "none" / "failures.sqlite3"
    assert FailureMemory(missing, read_only=True).query_similar(["KeyError: 'a'"]).status == (
        "missing"
    )
    assert FailureMemory(missing, read_only=True).stats()["exists"] is False
    assert not missing.parent.exists()

    old = tmp_path / "old" / "failures.sqlite3"
    old.parent.mkdir()
    _v1_file(old)
    before = _dump(old)
    outcome = FailureMemory(old, read_only=True).query_similar(["KeyError: 'cart_job_17'"])
    assert (outcome.status, outcome.reason) == ("outdated", "outdated")
    assert "loopctl memory migrate" in outcome.message
    assert _dump(old) == before

    path = tmp_path / "odd?name#50%" / "failures.sqlite3"
    assert FailureMemory(path).record_failure(decisive=["KeyError: 'a_b'"], category="KEY_ERROR")
    close_all()
    mtime = path.parent.stat().st_mtime_ns
    reader = FailureMemory(path, read_only=True)
    assert [r.record.category for r in reader.query_similar(["KeyError: 'a_b'"]).results] == [
        "KEY_ERROR"
    ]
    assert reader.stats()["failures"] == 1
    reader.check_writable()  # reads the schema the same way
    assert [p.name for p in path.parent.iterdir()] == [path.name]
    assert path.parent.stat().st_mtime_ns == mtime
