"""The Postgres store through the Store protocol: schema, versions, writes, reads, delete, copy.

Each test has a database of its own on the session's server (pg_testkit)."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_testkit import (
    PgServer,
    database_of,
    dump,
    pg_server,
    pg_url,
    recount,
    require_psycopg,
)

#: pytest finds fixtures by name in the module: these come from pg_testkit.
FIXTURES = (pg_server, pg_url)
require_psycopg()

from loopctl_context_errors.store import (  # noqa: E402 - after require_psycopg()
    SCHEMA_VERSION,
    Fix,
    FixTarget,
    NewFailure,
    PruneCriteria,
    Store,
    StoredFailure,
    StoreMissing,
    StoreNewer,
    StoreOutdated,
    parse_location,
)
from loopctl_context_errors.store_postgres import PostgresStore  # noqa: E402 - after require_psycopg()


def soon() -> float:
    return time.monotonic() + 10


def make_store(url: str) -> PostgresStore:
    return PostgresStore(parse_location(url), timeout_s=5)


@pytest.fixture
def store(pg_url: str) -> PostgresStore:
    return make_store(pg_url)


def failure(**given: Any) -> NewFailure:
    values: dict[str, Any] = {
        "signature": "sig-a",
        "category": "TEST_FAILURE",
        "rule": "pytest",
        "stage": "tests",
        "project": "shop",
        "project_id": "git:example.com/acme/shop",
        "project_path": "/srv/shop",
        "run_id": "run-1",
        "decisive_json": '["AssertionError: boom"]',
        "terms": ("assertionerror", "boom"),
        "now": 1000.25,
    }
    values.update(given)
    return NewFailure(**values)


def stored(uid: str, **given: Any) -> StoredFailure:
    values: dict[str, Any] = {
        "uid": uid,
        "signature": f"sig-{uid}",
        "category": "TEST_FAILURE",
        "rule": "",
        "stage": "tests",
        "project": "shop",
        "project_id": "git:x/shop",
        "project_path": "/srv/shop",
        "run_id": "",
        "decisive_json": "[]",
        "terms": ("alpha", f"t{uid}"),
        "created_at": 10.5,
        "last_seen": 11.5,
    }
    values.update(given)
    return StoredFailure(**values)


def assert_counts_right(server: PgServer, url: str) -> None:
    kept_n, rows, kept_df, counted = recount(server, url)
    assert kept_n == rows
    assert kept_df == counted


@pytest.mark.slow
def test_it_is_a_store(store: PostgresStore) -> None:
    typed: Store = store
    assert typed.location.kind == "postgres"


def test_a_new_database_has_no_store_until_the_first_write(
    store: PostgresStore, pg_server: PgServer, pg_url: str
) -> None:
    assert store.schema(soon()).version is None
    assert store.stats(soon())["exists"] is False
    assert store.recent(5, soon()) == []
    assert store.count(soon()) == 0
    with pytest.raises(StoreMissing):
        store.term_stats(["boom"], soon())
    assert dump(pg_server, pg_url) == {}  # reading created nothing

    store.add_failure(failure(), soon())

    assert store.schema(soon()).version == SCHEMA_VERSION
    tables = set(dump(pg_server, pg_url))
    assert tables == {
        "loopctl_failures",
        "loopctl_memory_meta",
        "loopctl_suggestion_stats",
        "loopctl_token_df",
    }
    stats = store.stats(soon())
    assert stats["backend"] == "postgres"
    assert stats["schema_version"] == SCHEMA_VERSION
    assert stats["failures"] == 1
    assert stats["size_bytes"] > 0
    assert "pw-" not in stats["location"]


def test_migrate_creates_an_absent_schema_and_leaves_a_current_one(store: PostgresStore) -> None:
    dry = store.migrate(soon(), dry_run=True)
    assert (dry.from_version, dry.dry_run) == (None, True)
    assert store.schema(soon()).version is None
    report = store.migrate(soon())
    assert (report.from_version, report.to_version) == (None, SCHEMA_VERSION)
    again = store.migrate(soon())
    assert again.from_version == SCHEMA_VERSION


def _set_version(server: PgServer, url: str, version: int) -> None:
    with server.admin(database_of(url)) as conn:
        conn.execute(
            "UPDATE loopctl_memory_meta SET value = %s WHERE key = 'schema_version'",
            (str(version),),
        )


def _every_operation(store: PostgresStore) -> list[tuple[str, Any]]:
    return [
        ("add_failure", lambda: store.add_failure(failure(run_id="run-9"), soon())),
        ("add_many", lambda: store.add_many([stored("u9")], soon())),
        ("set_fix", lambda: store.set_fix(FixTarget(id=1), Fix(5.0, "[]", "s", "t"), soon())),
        ("bump_suggestions", lambda: store.bump_suggestions([("k", 1, 5.0)], soon())),
        ("suggestion_stats", lambda: store.suggestion_stats(["k"], soon())),
        ("exact", lambda: store.exact("sig-a", "", soon())),
        ("term_stats", lambda: store.term_stats(["boom"], soon())),
        ("postings", lambda: store.postings(["boom"], 10, soon())),
        ("candidates", lambda: store.candidates([1], "", soon())),
        ("rows", lambda: store.rows([1], soon())),
        ("recent", lambda: store.recent(5, soon())),
        ("stats", lambda: store.stats(soon())),
        ("delete", lambda: store.delete(PruneCriteria(keep=0), dry_run=False, deadline=soon())),
        ("count", lambda: store.count(soon())),
    ]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("version", "error", "reason"),
    [(SCHEMA_VERSION + 1, StoreNewer, "newer"), (SCHEMA_VERSION - 1, StoreOutdated, "outdated")],
)
def test_another_schema_version_is_neither_read_nor_written(
    pg_server: PgServer, pg_url: str, version: int, error: type[Exception], reason: str
) -> None:
    make_store(pg_url).add_failure(failure(), soon())
    _set_version(pg_server, pg_url, version)
    before = dump(pg_server, pg_url)

    store = make_store(pg_url)  # a loop started after the change
    for name, operation in _every_operation(store):
        with pytest.raises(error) as raised:
            operation()
        assert raised.value.reason == reason, name
        assert "\n" not in str(raised.value)
    with pytest.raises(error):
        store.migrate(soon())

    assert dump(pg_server, pg_url) == before
    assert store.schema(soon()).version == version


def test_a_run_counts_its_failure_once_and_df_and_n_follow(
    store: PostgresStore, pg_server: PgServer, pg_url: str
) -> None:
    first = store.add_failure(failure(now=1.0), soon())
    again = store.add_failure(failure(now=2.0), soon())
    other_run = store.add_failure(failure(run_id="run-2", terms=("boom", "zeta")), soon())
    no_run_1 = store.add_failure(failure(run_id="", now=3.0), soon())
    no_run_2 = store.add_failure(failure(run_id="", now=4.0), soon())

    assert first == again
    assert len({first, other_run, no_run_1, no_run_2}) == 4
    (row,) = store.rows([first], soon())
    assert (row.occurrences, row.created_at, row.last_seen) == (2, 1.0, 2.0)
    total, df = store.term_stats(["boom", "zeta", "assertionerror", "unknown"], soon())
    assert total == 4
    assert df == {"boom": 4, "zeta": 1, "assertionerror": 3}
    assert_counts_right(pg_server, pg_url)


def test_text_keeps_floats_exactly_and_loses_only_nul(store: PostgresStore) -> None:
    now = 1732612345.123456789
    row_id = store.add_failure(
        failure(decisive_json='["bad\x00byte"]', rule="r\x00", terms=("a\x00b",), now=now),
        soon(),
    )
    (row,) = store.rows([row_id], soon())
    assert row.decisive_json == '["badbyte"]'
    assert row.rule == "r"
    assert row.created_at == now
    assert row.last_seen == now
    assert store.term_stats(["ab"], soon())[1] == {"ab": 1}


@pytest.mark.slow
def test_postings_are_the_newest_rows_holding_any_term(store: PostgresStore) -> None:
    rng = random.Random(16)
    vocabulary = [f"w{i}" for i in range(12)]
    holding: dict[int, set[str]] = {}
    for n in range(120):
        terms = tuple(rng.sample(vocabulary, rng.randint(1, 4)))
        row_id = store.add_failure(failure(run_id=f"r{n}", terms=terms), soon())
        holding[row_id] = set(terms)
    for _ in range(25):
        query = rng.sample(vocabulary, rng.randint(1, 3))
        newest = rng.choice([1, 5, 17, 500])
        expected = sorted((i for i, t in holding.items() if t & set(query)), reverse=True)
        assert store.postings(query, newest, soon()) == expected[:newest]
    assert store.postings(["nowhere"], 10, soon()) == []
    assert store.postings([], 10, soon()) == []


def test_exact_candidates_rows_and_recent(store: PostgresStore) -> None:
    old = store.add_failure(failure(run_id="a", now=1.0), soon())
    fixed = store.add_failure(failure(run_id="b", now=2.0), soon())
    newest = store.add_failure(failure(run_id="c", now=3.0), soon())
    tie = store.add_failure(failure(run_id="d", now=3.0), soon())
    other = store.add_failure(failure(run_id="e", signature="sig-b", now=4.0), soon())
    assert store.set_fix(
        FixTarget(signature="sig-a", run_id="b"), Fix(9.0, '["f.py"]', "s", "t"), soon()
    )
    assert not store.set_fix(FixTarget(id=99999), Fix(9.0, "[]", "", ""), soon())

    assert [r.id for r in store.exact("sig-a", "", soon())] == [fixed, tie, newest, old]
    assert [r.id for r in store.exact("sig-a", "c", soon())] == [fixed, tie, old]
    found = store.candidates([old, newest, other], "c", soon())
    assert [c.id for c in found] == [other, old]
    assert found[0].tokens == "assertionerror boom"
    assert found[0].project_id == "git:example.com/acme/shop"
    assert [r.id for r in store.recent(3, soon())] == [other, tie, newest]
    assert store.count(soon()) == 5
    (row,) = store.rows([fixed], soon())
    assert (row.resolved_at, row.fix_files_json, row.fix_summary) == (9.0, '["f.py"]', "t")


def test_the_cap_counts_rows_not_ids(store: PostgresStore, pg_url: str) -> None:
    from loopctl_context_errors.memory import FailureMemory

    for i in range(105):
        store.add_failure(failure(signature=f"sig-{i}", now=float(i)), soon())
    for i in range(20):  # the run sees its failure again: an upsert, which uses an id each time
        store.add_failure(failure(signature="sig-0", now=200.0 + i), soon())
    assert store.add_failure(failure(signature="sig-105"), soon()) == 106 + 20  # ids went by
    assert store.count(soon()) == 106
    memory = FailureMemory(pg_url)
    assert memory.enforce_cap(100) == 0  # 106 rows: within the cap and its 10 % slack
    for i in range(5):
        store.add_failure(failure(signature=f"sig-more-{i}", now=300.0 + i), soon())
    assert memory.enforce_cap(100) == 11  # 111 rows: trimmed to 100
    assert store.count(soon()) == 100


def test_suggestion_stats_add_up(store: PostgresStore) -> None:
    assert store.suggestion_stats(["k1"], soon()) == {}
    store.bump_suggestions([("k2", 1, 1.0), ("k1", 0, 1.0), ("k2", 0, 2.0)], soon())
    store.bump_suggestions([("k1", 1, 3.0)], soon())
    assert store.suggestion_stats(["k1", "k2", "k3"], soon()) == {"k1": (2, 1), "k2": (2, 1)}
    stats = store.stats(soon())
    assert (stats["suggestion_keys"], stats["suggestions_judged"]) == (2, 4)


@pytest.mark.parametrize(
    "where",
    [
        PruneCriteria(keep=3),
        PruneCriteria(last_seen_before=5.0),
        PruneCriteria(project="api"),
        PruneCriteria(project="git:x/api", keep=1),
        PruneCriteria(),
    ],
)
def test_delete_keeps_df_and_n_equal_to_a_recount(
    store: PostgresStore, pg_server: PgServer, pg_url: str, where: PruneCriteria
) -> None:
    rng = random.Random(7)
    for n in range(10):
        project = ("api", "git:x/api") if n % 3 == 0 else ("shop", "git:x/shop")
        terms = tuple(rng.sample(["a", "b", "c", "d", "e"], rng.randint(1, 3)))
        store.add_failure(
            failure(run_id=f"r{n}", now=float(n), terms=terms, project=project[0],
                    project_id=project[1]),
            soon(),
        )  # fmt: skip
    before = dump(pg_server, pg_url)
    would = store.delete(where, dry_run=True, deadline=soon())
    assert dump(pg_server, pg_url) == before
    gone = store.delete(where, dry_run=False, deadline=soon())
    assert gone == would > 0
    kept_n, rows, kept_df, counted = recount(pg_server, pg_url)
    assert (kept_n, rows) == (10 - gone, 10 - gone)
    assert kept_df == counted  # and no word is left with df 0
    assert store.term_stats(["a", "b", "c", "d", "e"], soon()) == (rows, counted)


def test_copy_keeps_ids_into_an_empty_store_and_is_idempotent(
    store: PostgresStore, pg_server: PgServer, pg_url: str
) -> None:
    rows = [stored(f"u{i}", id=100 + 3 * i, resolved_at=2.5 if i % 2 else None) for i in range(7)]
    assert store.add_many(rows, soon()) == 7
    before = dump(pg_server, pg_url)
    assert store.add_many(rows, soon()) == 0
    assert store.add_many(iter(rows), soon()) == 0
    assert dump(pg_server, pg_url) == before
    assert list(store.iter_failures(batch=3)) == rows
    assert_counts_right(pg_server, pg_url)
    new = store.add_failure(failure(), soon())
    assert new > 100 + 3 * 6  # the identity was moved past the copied ids


def test_copy_into_a_store_with_rows_gives_new_ids_and_merges(
    store: PostgresStore, pg_server: PgServer, pg_url: str
) -> None:
    first = store.add_failure(failure(), soon())
    rows = [stored("x1", id=first), stored("x2", id=first + 1)]
    assert store.add_many(rows, soon()) == 2
    copied = [r for r in store.iter_failures() if r.uid in {"x1", "x2"}]
    assert sorted(r.id or 0 for r in copied) == [first + 1, first + 2]
    assert store.add_many([*rows, stored("x3")], soon()) == 1
    assert_counts_right(pg_server, pg_url)
    assert store.term_stats(["alpha"], soon()) == (4, {"alpha": 3})


OPERATIONS = st.lists(
    st.one_of(
        st.tuples(
            st.just("add"),
            st.sampled_from(["", "r1", "r2"]),
            st.sampled_from(["s1", "s2", "s3"]),
            st.sets(st.sampled_from(["a", "b", "c", "d_e", "Ω"]), max_size=4),
        ),
        st.tuples(st.just("delete"), st.sampled_from([0, 1, 3]), st.booleans(), st.none()),
    ),
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=OPERATIONS)
def test_any_writes_keep_df_and_n_equal_to_a_recount(
    store: PostgresStore, pg_server: PgServer, pg_url: str, operations: list[tuple[Any, ...]]
) -> None:
    store.migrate(soon())
    with pg_server.admin(database_of(pg_url)) as conn:  # each example starts empty
        conn.execute(
            "TRUNCATE loopctl_failures, loopctl_token_df; "
            "UPDATE loopctl_memory_meta SET value = '0' WHERE key = 'n_failures'"
        )
    for n, (kind, first, second, terms) in enumerate(operations):
        if kind == "add":
            store.add_failure(
                failure(run_id=first, signature=second, terms=tuple(terms), now=float(n)), soon()
            )
        else:
            where = PruneCriteria(keep=first, project="shop" if second else None)
            store.delete(where, dry_run=False, deadline=soon())
    assert_counts_right(pg_server, pg_url)
    kept_n, _rows, kept_df, _counted = recount(pg_server, pg_url)
    assert store.term_stats(sorted(kept_df), soon()) == (kept_n, kept_df)
