"""The Postgres store when things go wrong: each failure is one StoreError with a reason code and
one line of our own that never holds the password; a connection the server ended is dropped and
the next call connects again."""

from __future__ import annotations

import secrets
import threading
import time
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_testkit import (
    PgServer,
    database_of,
    free_port,
    pg_server,
    pg_url,
    require_psycopg,
    wait_until,
)

#: pytest finds fixtures by name in the module: these come from pg_testkit.
FIXTURES = (pg_server, pg_url)
require_psycopg()

from loopctl_context_errors.store import (  # noqa: E402 - after require_psycopg()
    NewFailure,
    StoreBusy,
    StoreError,
    StoreNewer,
    StoreTimeout,
    StoreUnavailable,
    parse_location,
)
from loopctl_context_errors.store_postgres import WRITE_LOCK, PostgresStore, close_all  # noqa: E402 - after require_psycopg()

SECRET = "pw-Zq9s3cr3t"


def soon(seconds: float = 10) -> float:
    return time.monotonic() + seconds


def failure(run_id: str = "run-1") -> NewFailure:
    return NewFailure(
        signature="sig",
        category="TEST_FAILURE",
        rule="",
        stage="tests",
        project="shop",
        project_id="git:x/shop",
        project_path="/srv/shop",
        run_id=run_id,
        decisive_json="[]",
        terms=("boom",),
        now=1.0,
    )


def error_of(url: str, password: str = SECRET) -> StoreError:
    """The error using the store at ``url`` gives (parsing included), checked for leaks."""
    with pytest.raises(StoreError) as raised:
        PostgresStore(parse_location(url), timeout_s=5).schema(soon())
    message = str(raised.value)
    assert "\n" not in message
    for form in {password, quote(password, safe="")}:
        assert form not in message
    assert "FATAL" not in message  # none of libpq's own text
    return raised.value


@pytest.mark.slow
def test_a_wrong_password_is_auth(pg_server: PgServer, pg_url: str) -> None:
    error = error_of(pg_server.url(database_of(pg_url), password=SECRET))
    assert isinstance(error, StoreUnavailable)
    assert error.reason == "auth"
    assert "wrong password or user" in str(error)
    assert f"{pg_server.role}@{pg_server.host}:{pg_server.port}" in str(error)


def test_an_unknown_user_is_auth_too(pg_server: PgServer, pg_url: str) -> None:
    url = pg_server.url(database_of(pg_url), user="nobody_here", password=SECRET)
    assert error_of(url).reason == "auth"


def test_nothing_listening_is_refused() -> None:
    error = error_of(f"postgresql://loop:{SECRET}@127.0.0.1:{free_port()}/mem")
    assert (type(error), error.reason) == (StoreUnavailable, "refused")


def test_an_unknown_host_is_dns() -> None:
    error = error_of(f"postgresql://loop:{SECRET}@no-such-host.invalid:5432/mem")
    assert (type(error), error.reason) == (StoreUnavailable, "dns")


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://loop:{SECRET}@[::1/mem",
        f"postgresql://loop:{SECRET}@h@127.0.0.1/mem",
        f"postgresql://loop:{SECRET}@127.0.0.1:5432/mem?bogus=1",
        f"postgresql://loop@127.0.0.1:5432/mem?password={SECRET}&bogus=1",
        f"postgresql://loop:{SECRET}@127.0.0.1:5432/mem?sslmode=sometimes",
        f"postgresql://loop:{SECRET}@127.0.0.1:54x2/mem",
        f"postgres://loop:{SECRET}@127.0.0.1/mem#frag",
    ],
)
def test_a_malformed_url_is_bad_url(url: str) -> None:
    error = error_of(url)
    assert (type(error), error.reason) == (StoreUnavailable, "bad-url")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=4),
    broken=st.sampled_from(["?bogus=1", "?sslmode=nope", "?connect_timeout=x", ""]),
    key=st.sampled_from(["", "password", "%70assword", "sslpassword", "%73slpassword"]),
)
def test_no_error_shows_the_password(secret: str, broken: str, key: str) -> None:
    password = f"pw-{secret}"
    encoded = quote(password, safe="")
    port = free_port()
    if key:  # a query key; libpq percent-decodes its name; sslpassword is a secret too
        query = f"?{key}={encoded}" + broken.replace("?", "&")
        url = f"postgresql://loop@127.0.0.1:{port}/mem{query}"
    else:
        url = f"postgresql://loop:{encoded}@127.0.0.1:{port}/mem{broken}"
    error = error_of(url, password)
    assert error.reason in {"bad-url", "refused"}


def _backend_pids(pg_server: PgServer, database: str) -> list[int]:
    with pg_server.admin() as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s "
            "AND application_name = 'loopctl-memory'",
            (database,),
        ).fetchall()
    return [int(row[0]) for row in rows]


def test_a_kept_connection_the_server_ended_while_idle_is_replaced(
    pg_server: PgServer, pg_url: str
) -> None:
    """A server restart, an idle timeout or a failover ends a kept connection between two
    operations: the next one connects again instead of costing the run its memory."""
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure("run-1"), soon())
    (pid,) = _backend_pids(pg_server, database_of(pg_url))
    with pg_server.admin() as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    wait_until(lambda: pid not in _backend_pids(pg_server, database_of(pg_url)))

    store.add_failure(failure("run-2"), soon())  # on a new connection
    assert store.term_stats(["boom"], soon()) == (2, {"boom": 2})
    assert _backend_pids(pg_server, database_of(pg_url)) not in ([], [pid])


def test_a_connection_ended_during_a_statement_is_gone(pg_server: PgServer, pg_url: str) -> None:
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure("run-1"), soon())
    (pid,) = _backend_pids(pg_server, database_of(pg_url))
    with pg_server.admin(database_of(pg_url)) as holder:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE loopctl_failures IN ACCESS EXCLUSIVE MODE")
        ended = threading.Thread(target=_terminate_when_waiting, args=(pg_server, pid))
        ended.start()
        with pytest.raises(StoreUnavailable) as raised:  # waiting on the lock when ended
            store.postings(["boom"], 10, soon())
        ended.join()
        holder.execute("ROLLBACK")
    assert raised.value.reason == "gone"
    assert "\n" not in str(raised.value)
    assert store.postings(["boom"], 10, soon()) == [1]  # and a new connection next time


def _terminate_when_waiting(pg_server: PgServer, pid: int) -> None:
    with pg_server.admin() as conn:
        wait_until(lambda: conn.execute(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()[0])  # fmt: skip
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_writer_held_past_the_deadline_is_busy_and_writes_nothing(
    pg_server: PgServer, pg_url: str
) -> None:
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure("run-1"), soon())
    with pg_server.admin(database_of(pg_url)) as holder:
        holder.execute("BEGIN")
        holder.execute(f"SELECT pg_advisory_xact_lock(hashtext('{WRITE_LOCK}'))")
        with pytest.raises(StoreBusy) as raised:  # the lock wait ends before the deadline
            store.add_failure(failure("run-2"), soon(0.6))
        holder.execute("ROLLBACK")
    assert raised.value.reason == "locked"
    assert store.term_stats(["boom"], soon()) == (1, {"boom": 1})


def test_a_read_held_up_past_its_deadline_ends_and_the_next_works(
    pg_server: PgServer, pg_url: str
) -> None:
    """Held up by a lock, a read ends (busy: the lock wait ends just before the statement
    timeout); past its deadline before it starts, it is a timeout."""
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure("run-1"), soon())
    with pg_server.admin(database_of(pg_url)) as holder:
        holder.execute("BEGIN")
        holder.execute("LOCK TABLE loopctl_failures IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreBusy):
            store.postings(["boom"], 10, soon(0.5))
        holder.execute("ROLLBACK")
    with pytest.raises(StoreTimeout):
        store.postings(["boom"], 10, time.monotonic() - 1)
    assert store.postings(["boom"], 10, soon()) == [1]


def test_each_thread_has_its_own_connection(pg_server: PgServer, pg_url: str) -> None:
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure("run-1"), soon())
    errors: list[BaseException] = []

    def background() -> None:
        try:
            store.add_failure(failure("run-2"), soon())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=background)
    thread.start()
    thread.join()
    assert errors == []
    assert len(_backend_pids(pg_server, database_of(pg_url))) == 2


def test_libpq_repeating_a_bad_password_is_not_shown() -> None:
    # libpq's message is `invalid percent-encoded token: "<the password>"`
    password = "pw-%zzS3cret"
    error = error_of(f"postgresql://loop:{password}@127.0.0.1:5432/mem", password)
    assert (type(error), error.reason) == (StoreUnavailable, "bad-url")


def test_a_role_that_may_not_create_the_tables_is_told_so(pg_server: PgServer) -> None:
    name = f"loopctl_t_noperm_{secrets.token_hex(4)}"
    with pg_server.admin() as conn:  # a database the test role does not own
        conn.execute(f"CREATE DATABASE {name}")
    try:
        with pg_server.admin() as conn:
            conn.execute(f"GRANT CONNECT ON DATABASE {name} TO {pg_server.role}")
        store = PostgresStore(parse_location(pg_server.url(name)), timeout_s=5)
        with pytest.raises(StoreUnavailable) as raised:
            store.add_failure(failure(), soon())
        assert raised.value.reason == "permission"
        assert store.schema(soon()).version is None
    finally:
        close_all()
        with pg_server.admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_an_unreadable_schema_version_is_never_written(pg_server: PgServer, pg_url: str) -> None:
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure(), soon())
    with pg_server.admin(database_of(pg_url)) as conn:
        conn.execute("UPDATE loopctl_memory_meta SET value = 'v3' WHERE key = 'schema_version'")
    fresh = PostgresStore(parse_location(pg_url), timeout_s=5)
    with pytest.raises(StoreNewer, match="schema version unreadable"):
        fresh.add_failure(failure("run-2"), soon())


def test_a_database_made_newer_meanwhile_is_no_longer_written(
    pg_server: PgServer, pg_url: str
) -> None:
    """A kept connection rechecks the schema version in every write's own transaction."""
    store = PostgresStore(parse_location(pg_url), timeout_s=5)
    store.add_failure(failure("run-1"), soon())
    with pg_server.admin(database_of(pg_url)) as conn:
        conn.execute("UPDATE loopctl_memory_meta SET value = '3' WHERE key = 'schema_version'")
    with pytest.raises(StoreNewer):
        store.add_failure(failure("run-2"), soon())
    with pg_server.admin(database_of(pg_url)) as conn:
        (count,) = conn.execute("SELECT count(*) FROM loopctl_failures").fetchone()
    assert count == 1
