"""The failure memory: a real SQLite/FTS5 store in tmp_path (never the user's)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg_testkit import pg_server, pg_url

import loopctl_context_errors
from loopctl_context_errors import ranking, store_sqlite
from loopctl_context_errors.memory import (
    ENV_MEMORY,
    FailureMemory,
    close_all,
    default_memory_path,
    resolve_memory_path,
    signature_of,
)
from loopctl_context_errors.store import Candidate

FILE_ERROR = [
    "FileNotFoundError: [Errno 2] No such file or directory: '/srv/app/config/settings.json'"
]


def _store(path: Path, **kwargs: object) -> FailureMemory:
    return FailureMemory(path, **kwargs)  # type: ignore[arg-type]


def test_the_tests_never_see_the_users_memory(private_memory: Path, tmp_path: Path) -> None:
    assert resolve_memory_path() == private_memory
    assert str(default_memory_path()).startswith(str(tmp_path))


def test_location_precedence(tmp_path: Path) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "xdg")}
    assert default_memory_path(env) == tmp_path / "xdg" / "loopctl" / "failures.sqlite3"
    assert default_memory_path({}) == Path.home() / ".local/share/loopctl/failures.sqlite3"
    assert resolve_memory_path("", env) == default_memory_path(env)
    assert resolve_memory_path(str(tmp_path / "cfg.db"), env) == tmp_path / "cfg.db"
    env[ENV_MEMORY] = str(tmp_path / "env.db")
    assert resolve_memory_path(str(tmp_path / "cfg.db"), env) == tmp_path / "env.db"
    assert resolve_memory_path("", {ENV_MEMORY: "off"}) is None
    assert resolve_memory_path("OFF", {}) is None


@pytest.mark.parametrize(
    "url", ["postgresql://loop:pw-Qx81@db:5432/mem", "postgresql://loop:pw@[::1/mem"]
)
def test_a_url_in_the_environment_is_no_memory_path(url: str) -> None:
    # it used to be Path("postgresql://…"): a file nobody meant, next to the working directory
    assert resolve_memory_path("", {ENV_MEMORY: url}) is None
    assert resolve_memory_path(url, {}) is None


def test_missing_store_answers_empty_and_creates_nothing(tmp_path: Path) -> None:
    memory = _store(tmp_path / "absent" / "f.sqlite3")
    outcome = memory.query_similar(FILE_ERROR)
    assert (outcome.results, outcome.status) == ([], "missing")
    assert not (tmp_path / "absent").exists()
    assert memory.stats()["failures"] == 0
    assert memory.suggestion_stats(["x"]) == {}


def test_signature_ignores_noise_but_not_the_error() -> None:
    a, _ = signature_of(["Error at 2024-05-01T10:00:00Z in /tmp/run-1/app.py line 12: 0xdeadbeef"])
    b, _ = signature_of(["Error at 2025-01-09T11:11:11Z in /home/x/app.py line 99: 0x1234abcd"])
    c, _ = signature_of(
        ["Error at 2024-05-01T10:00:00Z in /tmp/run-1/other.py line 12: 0xdeadbeef"]
    )
    assert a == b != c
    assert signature_of([]) == ("", [])


def test_exact_then_similar_then_fix(tmp_path: Path) -> None:
    memory = _store(tmp_path / "f.sqlite3")
    first = memory.record_failure(
        decisive=FILE_ERROR, category="FILE_ACCESS", rule="file.not-found", stage="tests",
        project="shop", run_id="run-a",
    )  # fmt: skip
    assert first is not None
    other = memory.record_failure(
        decisive=["FileNotFoundError: [Errno 2] No such file or directory: 'data/users.csv'"],
        category="FILE_ACCESS", rule="file.not-found", stage="tests", project="crm", run_id="run-b",
    )  # fmt: skip
    memory.record_failure(
        decisive=["KeyError: 'price'"], category="UNKNOWN", project="shop", run_id="run-c"
    )
    assert memory.record_fix(first, files=["config/settings.json"], suggestion="create it")
    outcome = memory.query_similar(
        ["FileNotFoundError: [Errno 2] No such file or directory: '/other/config/settings.json'"],
        category="FILE_ACCESS",
    )
    assert outcome.status == "ok"
    assert [item.match for item in outcome.results][:1] == ["exact"]
    assert outcome.results[0].record.id == first
    assert outcome.results[0].record.fix_files == ["config/settings.json"]
    assert outcome.results[0].record.fix_suggestion == "create it"
    assert [item.record.id for item in outcome.results[1:]] == [other]
    assert outcome.results[1].match == "similar"
    assert 0 < outcome.results[1].score < 1
    # the failure's own run is not "the past"
    mine = memory.query_similar(FILE_ERROR, exclude_run="run-a")
    assert first not in [item.record.id for item in mine.results]


def test_a_repeat_within_one_run_is_counted_not_duplicated(tmp_path: Path) -> None:
    memory = _store(tmp_path / "f.sqlite3")
    ids = {
        memory.record_failure(decisive=FILE_ERROR, category="FILE_ACCESS", run_id="r")
        for _ in range(3)
    }
    assert len(ids) == 1
    assert memory.stats()["failures"] == 1
    assert memory.stats()["occurrences"] == 3
    memory.record_failure(decisive=FILE_ERROR, category="FILE_ACCESS", run_id="r2")
    assert memory.stats()["failures"] == 2


def test_deadline_gives_empty_answer_not_an_error(tmp_path: Path) -> None:
    memory = _store(tmp_path / "f.sqlite3")
    memory.record_failure(decisive=FILE_ERROR, category="FILE_ACCESS")
    outcome = memory.query_similar(FILE_ERROR, timeout_s=0)
    assert (outcome.results, outcome.status) == ([], "timeout")


@pytest.mark.timing  # times a lock timeout
def test_a_locked_store_is_skipped_within_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite3"
    memory = _store(path, timeout_s=0.5)
    memory.record_failure(decisive=FILE_ERROR, category="FILE_ACCESS")
    # another loop is writing: readers go on (WAL), a second writer gives up in time
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        assert memory.query_similar(FILE_ERROR).status == "ok"
        started = time.monotonic()
        assert memory.record_failure(decisive=["ValueError: x"], category="UNKNOWN") is None
        assert 0.5 <= time.monotonic() - started < 4  # its 0.5 s, not sqlite's default 5 s
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    # a process holding the file exclusively: the query answers "nothing" within the timeout
    close_all()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("INSERT INTO suggestion_stats (key) VALUES ('lock')")
    try:
        started = time.monotonic()
        outcome = memory.query_similar(FILE_ERROR)
        assert time.monotonic() - started < 4  # its 0.5 s, not sqlite's default 5 s
        assert outcome.results == []
        assert outcome.status in ("locked", "timeout")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert memory.query_similar(FILE_ERROR).status == "ok"


def test_a_corrupt_store_never_raises(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    memory = _store(path)
    assert memory.query_similar(FILE_ERROR).status == "error"
    assert memory.record_failure(decisive=FILE_ERROR, category="FILE_ACCESS") is None
    assert memory.record_fix(1, files=["a"]) is False
    assert memory.enforce_cap(100) == 0
    assert loopctl_context_errors.query_similar_failures("boom", memory=memory) == []


def test_wal_mode_and_private_file(tmp_path: Path) -> None:
    path = tmp_path / "f.sqlite3"
    _store(path).record_failure(decisive=FILE_ERROR, category="FILE_ACCESS")
    with contextlib.closing(sqlite3.connect(path)) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert path.stat().st_mode & 0o077 == 0


def test_prune_and_cap(tmp_path: Path) -> None:
    memory = _store(tmp_path / "f.sqlite3")
    now = time.time()
    for i in range(150):
        memory.record_failure(
            decisive=[f"ValueError: case_{i} failed"], category="UNKNOWN",
            project="old" if i < 50 else "new", now=now - (200 if i < 50 else 10) * 86400 - i,
        )  # fmt: skip
    assert memory.prune(older_than_days=100, dry_run=True) == 50
    assert memory.stats()["failures"] == 150
    assert memory.prune(project="old") == 50
    assert memory.stats()["failures"] == 100
    assert memory.prune(keep=80) == 20
    assert memory.enforce_cap(100) == 0  # within the cap (plus its 10 % slack)
    for i in range(40):
        memory.record_failure(decisive=[f"ValueError: extra_{i}"], category="UNKNOWN")
    assert memory.enforce_cap(100) == 20
    assert memory.stats()["failures"] == 100
    # the word index followed the deletions: rare words of deleted rows are gone
    with contextlib.closing(sqlite3.connect(tmp_path / "f.sqlite3")) as conn:
        deleted = "SELECT count(*) FROM token_df WHERE term = 'case_0'"
        assert conn.execute(deleted).fetchone()[0] == 0
        assert conn.execute("INSERT INTO failures_fts(failures_fts) VALUES('integrity-check')")


def test_suggestion_effectiveness_counts(tmp_path: Path) -> None:
    memory = _store(tmp_path / "f.sqlite3")
    assert memory.record_suggestion_outcome(["a", "b"], effective=True)
    assert memory.record_suggestion_outcome(["a"], effective=False)
    assert memory.suggestion_stats(["a", "b", "c"]) == {"a": (2, 1), "b": (1, 1)}


WRITER = textwrap.dedent(
    """
    import json, sys
    from loopctl_context_errors.memory import FailureMemory

    where, worker, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    memory = FailureMemory(where, timeout_s=30)
    stored, statuses = 0, set()
    for i in range(count):
        line = f"AssertionError: worker_{worker} case_{i} expected 3 got 4"
        if memory.record_failure(decisive=[line], category="ASSERTION_FAILURE",
                                 run_id=f"w{worker}", project_id=f"path:/w{worker % 3}"):
            stored += 1
        other = f"AssertionError: worker_{(worker + 1) % 20} case_{i} expected 3 got 4"
        statuses.add(memory.query_similar([other], project_id="path:/w0").status)
    print(json.dumps([stored, sorted(statuses)]))
    """
)

#: pytest finds fixtures by name in the module: the Postgres test server's (it skips, saying why,
#: where there is none).
FIXTURES = (pg_server, pg_url)


@pytest.fixture(params=["sqlite", "postgres"])
def memory_location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's shared memory is: a SQLite file, or a Postgres database (its URL)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_url"))
    return str(tmp_path / "shared" / "failures.sqlite3")


@pytest.mark.slow
def test_several_processes_write_and_query_at_once(memory_location: str) -> None:
    """20 loops (processes) each record 10 failures, querying between: no record is lost, and
    no query sees anything but ok or missing (no lock, no serialization error)."""
    workers, count = 20, 10
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, memory_location, str(w), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(workers)
    ]
    results = [p.communicate(timeout=300) for p in processes]
    assert all(p.returncode == 0 for p in processes), [err for _, err in results]
    answers = [json.loads(out) for out, _ in results]
    assert sum(stored for stored, _ in answers) == workers * count
    assert set().union(*(set(statuses) for _, statuses in answers)) <= {"ok", "missing"}
    memory = FailureMemory(memory_location)
    assert memory.stats()["failures"] == workers * count
    if not memory_location.startswith("postgres"):
        with contextlib.closing(sqlite3.connect(memory_location)) as conn:
            conn.execute("INSERT INTO failures_fts(failures_fts) VALUES('integrity-check')")
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    found = memory.query_similar(["AssertionError: worker_2 case_7 expected 3 got 4"])
    assert found.results
    assert found.results[0].match == "exact"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=6), st.text(max_size=50))
def test_store_and_query_accept_any_text(tmp_path_factory: pytest.TempPathFactory,
                                         lines: list[str], stage: str) -> None:  # fmt: skip
    memory = FailureMemory(tmp_path_factory.mktemp("mem") / "f.sqlite3")
    memory.record_failure(decisive=lines, category="UNKNOWN", stage=stage, project=stage)
    outcome = memory.query_similar(lines)
    assert outcome.status in ("ok", "missing")
    if signature_of(lines)[0]:
        assert outcome.results
        assert outcome.results[0].match == "exact"


# --- the ranking steps of a similarity query ------------------------------------------------------


def _candidate(
    id_: int, signature: str, tokens: str, *, category: str = "FILE_ACCESS",
    resolved_at: float | None = None, last_seen: float = 0.0, project_id: str = "",
) -> Candidate:  # fmt: skip
    return Candidate(id_, signature, category, resolved_at, last_seen, tokens, project_id)


def test_similarity_is_word_overlap_with_bonuses_capped_below_exact() -> None:
    query = {"filenotfounderror", "errno", "settings", "json"}
    half = _candidate(1, "s1", "filenotfounderror errno other words")
    assert ranking._similarity(query, half, None) == pytest.approx(2 / 6)
    assert ranking._similarity(query, half, "FILE_ACCESS") == pytest.approx(2 / 6 + 0.1)
    fixed = _candidate(2, "s2", "filenotfounderror errno settings json", resolved_at=1.0)
    assert ranking._similarity(query, fixed, "FILE_ACCESS") == 0.99
    unrelated = _candidate(3, "s3", "keyerror price")
    assert ranking._similarity(query, unrelated, None) is None


def test_ranking_keeps_the_best_of_each_signature_up_to_the_number_wanted() -> None:
    query = {"alpha", "beta", "gamma"}
    candidates = [
        _candidate(1, "same-as-query", "alpha beta gamma"),
        _candidate(2, "a", "alpha beta", last_seen=1.0),
        _candidate(3, "a", "alpha beta gamma"),
        _candidate(4, "b", "alpha beta", last_seen=2.0),
        _candidate(5, "c", "alpha delta epsilon zeta"),
    ]
    ranked = ranking._ranked(candidates, query, None)
    # best score first, the latest seen first among equals, then the highest id (the same
    # order on every backend); too little overlap is left out
    assert [c.id for _, c in ranked] == [3, 1, 4, 2]
    winners = ranking._best_distinct(ranked, {"same-as-query"}, 2)
    assert [row_id for _, row_id in winners] == [3, 4]
    assert ranking._best_distinct(ranked, set(), 0) == []


def test_a_query_costs_the_same_however_many_stored_rows_share_its_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25 ranks a bounded window of the matching rows (the newest), so a word every stored
    failure shares does not make each query slower as the store grows. Cost is counted in
    SQLite virtual-machine steps (the progress handler's calls), not time."""
    steps = [0]

    def monotonic() -> float:
        steps[0] += 1
        return time.monotonic()

    monkeypatch.setattr(ranking, "RANKED_ROWS", 50)
    monkeypatch.setattr(store_sqlite, "_PROGRESS_STEPS", 10)
    monkeypatch.setattr(
        store_sqlite,
        "time",
        type("T", (), {"monotonic": monotonic, "time": time.time, "sleep": time.sleep}),
    )

    def cost(rows: int) -> int:
        memory = _store(tmp_path / f"{rows}.sqlite3")
        memory.bulk_insert(
            {
                "decisive": [f"KeyError: 'sharedword' in handler {name}"],
                "signature": name,
                "tokens": ["keyerror", "sharedword", "handler", name],
            }
            for name in (f"alpha{n:05d}x" for n in range(rows))
        )
        steps[0] = 0
        outcome = memory.query_similar(["KeyError: 'sharedword' in handler omega"], limit=3)
        assert outcome.status == "ok"
        assert outcome.results  # found similar ones
        return steps[0]

    small, large = cost(100), cost(400)
    assert large < small * 1.3, (small, large)


class _RefusesAtOnce:
    """A connection whose first ``times`` ``BEGIN IMMEDIATE`` are refused at once, as SQLite
    refuses some WAL locks without waiting out its busy timeout."""

    def __init__(self, conn: sqlite3.Connection, times: int) -> None:
        self._conn, self.times, self.refused = conn, times, 0

    def execute(self, sql: str, *args: Any) -> Any:
        if sql == "BEGIN IMMEDIATE" and self.refused < self.times:
            self.refused += 1
            raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


def test_a_write_refused_at_once_is_tried_again_within_the_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = _store(tmp_path / "f.sqlite3")
    assert memory.record_failure(decisive=["KeyError: 'a'"], category="KEY_ERROR")
    real_open = store_sqlite._open
    wrapped: list[_RefusesAtOnce] = []

    def refusing_open(path: Path, *, create: bool, timeout: float) -> Any:
        entry = real_open(path, create=create, timeout=timeout)
        if not wrapped:
            wrapped.append(_RefusesAtOnce(entry.conn, times=3))
        return store_sqlite._Open(wrapped[0], schema_ok=entry.schema_ok)  # type: ignore[arg-type]

    monkeypatch.setattr(store_sqlite, "_open", refusing_open)
    assert memory.record_failure(decisive=["KeyError: 'b'"], category="KEY_ERROR")
    assert wrapped[0].refused == 3
    # refused for longer than the timeout: given up, as before (never raises)
    wrapped[0].times = 10**9
    quick = FailureMemory(memory.path, timeout_s=0.05)
    assert quick.record_failure(decisive=["KeyError: 'c'"], category="KEY_ERROR") is None


def test_a_project_id_is_compared_redacted_as_it_is_stored(tmp_path: Path) -> None:
    from loopctl import redact

    memory = _store(tmp_path / "f.sqlite3")
    project_id = "path:/srv/password=hunter2222/app"  # a path the redactor masks a part of
    assert redact(project_id) != project_id
    memory.record_failure(
        decisive=FILE_ERROR, category="FILE_ACCESS", project="app", project_id=project_id
    )
    outcome = memory.query_similar(FILE_ERROR, project_id=project_id)
    assert [(r.match, r.same_project) for r in outcome.results] == [("exact", True)]
    assert outcome.results[0].record.project_id == redact(project_id)  # stored redacted
    assert memory.prune(project=project_id, dry_run=True) == 1


def test_a_fixs_change_is_kept_capped_with_its_summary() -> None:
    from loopctl_context_errors.memory import (
        MAX_CHANGE_LINE_CHARS,
        MAX_CHANGE_LINES,
        FailureRecord,
        fix_summary_of,
    )

    change = "calc.py\n-    return a - b\n+    return a + b\n" + "+x" * 300 + "\n"
    change += "".join(f"+line {n}\n" for n in range(20))
    summary = fix_summary_of("resolved at iteration 1 (tests_pass)", change)
    assert len(summary) <= 1000  # what the store keeps of a summary
    record = FailureRecord(
        id=1, signature="s", category="c", rule="", stage="tests", project="p",
        decisive=[], created_at=0.0, resolved_at=1.0, fix_summary=summary,
    )  # fmt: skip
    lines = record.fix_change
    assert lines[:3] == ["calc.py", "-    return a - b", "+    return a + b"]
    assert len(lines) == MAX_CHANGE_LINES
    assert max(len(line) for line in lines) == MAX_CHANGE_LINE_CHARS
    assert fix_summary_of("resolved", "") == "resolved"  # no change: the summary alone
    assert FailureRecord(
        id=2, signature="s", category="c", rule="", stage="", project="", decisive=[],
        created_at=0.0, fix_summary="resolved at iteration 2",
    ).fix_change == []  # fmt: skip
