"""Twenty loops share one Postgres memory: 20 processes each record 10 failures and read as a
query does, all at once. No failure is lost, none is an error, and the number of rows and each
word's document frequency still equal a recount."""

from __future__ import annotations

import multiprocessing

import pytest
from pg_testkit import (
    PgServer,
    concurrent_writer,
    database_of,
    pg_server,
    pg_url,
    recount,
    require_psycopg,
)

#: pytest finds fixtures by name in the module: these come from pg_testkit.
FIXTURES = (pg_server, pg_url)
require_psycopg()

PROCESSES = 20
EACH = 10


@pytest.mark.slow
def test_twenty_processes_write_and_read_at_once(pg_server: PgServer, pg_url: str) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        pending = pool.starmap_async(
            concurrent_writer, [(pg_url, index, EACH) for index in range(PROCESSES)]
        )
        errors = pending.get(timeout=300)
    assert [line for lines in errors for line in lines] == []

    kept_n, rows, kept_df, counted = recount(pg_server, pg_url)
    assert rows == kept_n == PROCESSES * EACH
    assert kept_df == counted
    with pg_server.admin(database_of(pg_url)) as conn:
        signatures = {str(row[0]) for row in conn.execute("SELECT signature FROM loopctl_failures")}
    assert signatures == {f"sig-{i}-{n}" for i in range(PROCESSES) for n in range(EACH)}
