"""The local spool: what a run could not write to its failure memory, kept on disk until the
store takes it. Crash-safe (a kill mid-append leaves a spool every later append and drain
reads), capped, redacted, and written to the store once whatever happens to a drain."""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from pg_testkit import PgServer, Proxy, pg_server, pg_url

from loopctl_context_errors import spool as spool_module
from loopctl_context_errors.memory import FailureMemory, signature_of
from loopctl_context_errors.spool import Spool
from loopctl_context_errors.store import StoreUnavailable

#: pytest finds fixtures by name in the module: these come from pg_testkit.
FIXTURES = (pg_server, pg_url)

FAILURE = ["FAIL: test_add (test_calc.CalcTest.test_add)", "AssertionError: -1 != 5"]
#: Where a memory is, an outage of it, and its rows as (occurrences, fixed).
Backend = tuple[
    str, Callable[[], AbstractContextManager[None]], Callable[[], list[tuple[Any, ...]]]
]

#: Appends records to the spool at argv[1] until it is killed.
WRITER = """
import sys
from pathlib import Path
from loopctl_context_errors.spool import Spool
spool = Spool(Path(sys.argv[1]))
n = 0
while True:
    spool.append({"kind": "failure", "n": n, "pad": "x" * 20000})
    n += 1
"""


def _wait_until(predicate: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"not true within {timeout} s"
        time.sleep(0.01)
    return value


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_a_writer_killed_while_it_appends_leaves_a_spool_the_next_one_reads(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spool" / "s.jsonl"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    try:
        _wait_until(lambda: _lines(path) >= 30)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=60)
    spool = Spool(path)
    numbers = [record["n"] for record in spool.records()]
    assert numbers == list(range(len(numbers)))  # every whole line, in order
    assert len(numbers) >= 30
    assert spool.append({"kind": "failure", "n": "after"})  # the lock died with the writer
    assert [record["n"] for record in spool.records()] == [*numbers, "after"]


def test_a_torn_last_line_is_skipped_and_the_next_append_starts_clean(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    for n in range(3):
        assert spool.append({"kind": "failure", "n": n})
    data = spool.path.read_bytes()
    spool.path.write_bytes(data[: len(data) - 7])  # killed in the middle of the third line
    assert [record["n"] for record in spool.records()] == [0, 1]
    assert spool.append({"kind": "failure", "n": 3})
    assert [record["n"] for record in spool.records()] == [0, 1, 3]
    written: list[int] = []
    done = spool.drain(lambda record: written.append(record["n"]), until=time.monotonic() + 60)
    assert (written, done.written, done.empty) == ([0, 1, 3], 3, True)
    assert not spool.path.exists()


def test_the_spool_is_capped(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl", max_bytes=50_000)
    kept = 0
    while spool.append({"kind": "failure", "pad": "x" * 9_000}):
        kept += 1
        assert kept < 100
    assert kept == 6  # past 50,000 bytes nothing more is kept
    assert spool.path.stat().st_size < 50_000 + 10_000
    assert not spool.append({"kind": "failure"})
    spool.drain(lambda record: None, until=time.monotonic() + 60)
    assert spool.append({"kind": "failure"})  # written: room again


def test_a_drain_that_fails_keeps_what_it_did_not_write_and_drops_damaged_records(
    tmp_path: Path,
) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    for n in range(5):
        assert spool.append({"kind": "failure", "n": n})

    def write(record: dict[str, Any]) -> None:
        if record["n"] == 1:
            raise KeyError("damaged")  # a record that can never be written
        if record["n"] == 3:
            raise StoreUnavailable("gone", reason="gone")

    with pytest.raises(StoreUnavailable):
        spool.drain(write, until=time.monotonic() + 60)
    assert [record["n"] for record in spool.records()] == [3, 4]


def test_a_record_of_a_newer_layout_is_left_for_the_loopctl_that_wrote_it(tmp_path: Path) -> None:
    spool = Spool(tmp_path / "s.jsonl")
    assert spool.append({"kind": "failure", "n": 0})
    with spool.path.open("a", encoding="utf-8") as file:
        file.write('{"v": 99, "kind": "failure", "n": "newer"}\n')
    assert spool.append({"kind": "failure", "n": 1})
    written: list[int] = []
    done = spool.drain(lambda record: written.append(record["n"]), until=time.monotonic() + 60)
    assert (written, done.empty) == ([0, 1], True)
    assert spool.path.read_text(encoding="utf-8") == '{"v":99,"kind":"failure","n":"newer"}\n'


def test_a_kept_record_is_redacted_and_private(tmp_path: Path) -> None:
    secret = "ghp_" + "Zq9" * 12
    spool = Spool(tmp_path / "data" / "spool" / "s.jsonl")
    assert spool.append({"kind": "failure", "row": {"decisive_json": f"token {secret}"}})
    assert secret not in spool.path.read_text(encoding="utf-8")
    assert stat.S_IMODE(spool.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(spool.path.parent.stat().st_mode) == 0o700


# --- written twice, counted once: on both stores ------------------------------------------------


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Another writer holds the SQLite file (longer than the memory's timeout)."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        yield
        holder.execute("ROLLBACK")
    finally:
        holder.close()


@contextlib.contextmanager
def _cut(proxy: Proxy) -> Iterator[None]:
    proxy.cut()
    yield
    proxy.restore()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Backend]:
    """A SQLite memory (the outage: another writer holds it) or a Postgres one (the outage:
    the relay in front of it is cut)."""
    from loopctl_context_errors import memory

    monkeypatch.setattr(memory, "COOL_DOWN_S", 0.0)
    if request.param == "sqlite":
        path = tmp_path / "memory.sqlite3"

        def sqlite_rows() -> list[tuple[Any, ...]]:
            with contextlib.closing(sqlite3.connect(path)) as conn:
                query = "SELECT occurrences, resolved_at IS NOT NULL FROM failures"
                return [tuple(row) for row in conn.execute(query)]

        yield str(path), lambda: _locked(path), sqlite_rows
        return
    pytest.importorskip("psycopg")
    server: PgServer = request.getfixturevalue("pg_server")
    url: str = request.getfixturevalue("pg_url")
    proxy = Proxy(server.host, server.port)
    through = url.replace(f"@{server.host}:{server.port}/", f"@127.0.0.1:{proxy.port}/")

    def postgres_rows() -> list[tuple[Any, ...]]:
        with server.admin(url.rsplit("/", 1)[1]) as conn:
            query = "SELECT occurrences, resolved_at IS NOT NULL FROM loopctl_failures"
            return [tuple(row) for row in conn.execute(query)]

    yield through, lambda: _cut(proxy), postgres_rows
    proxy.cut()


@pytest.mark.slow
def test_records_written_twice_are_counted_once(backend: Backend) -> None:
    """A drain killed after the store committed but before the spool was rewritten writes the
    same records again at the next drain: nothing is counted twice."""
    where, outage, rows = backend
    # The store's budget bounds every statement: where the store is up it is generous (on a
    # busy machine the first write, which connects and creates the tables, took longer than
    # the 0.3 s this test once gave it); the short one only meets the outage, which fails the
    # write whatever the budget, so that the held SQLite lock is not waited out for long.
    memory = FailureMemory(where, timeout_s=60)
    assert memory.record_failure(decisive=FAILURE, category="X", run_id="r1", occurrence=1)
    cut_off = FailureMemory(where, timeout_s=0.3)
    with outage():
        for n in (2, 3):
            assert cut_off.record_failure(decisive=FAILURE, category="X", run_id="r1",
                                          occurrence=n) is None  # fmt: skip
        assert not cut_off.record_fix_for(signature_of(FAILURE)[0], "r1", files=["calc.py"])
    spool = memory.spool()
    assert spool is not None
    same = cut_off.spool()
    assert same is not None
    assert same.path == spool.path
    kept = spool.path.read_bytes()
    assert [r["kind"] for r in spool.records()] == ["failure", "failure", "fix"]
    assert cut_off.spool_tally().kept == 3
    assert rows() == [(1, False)]
    memory.drain()
    assert rows() == [(3, True)]
    assert not spool.path.exists()
    spool.path.write_bytes(kept)  # as if that drain had died before it removed the file
    again = FailureMemory(where, timeout_s=60)
    again.drain()
    assert again.spool_tally().written == 3
    assert rows() == [(3, True)]
    assert again.record_failure(decisive=FAILURE, category="X", run_id="r1", occurrence=4)
    assert rows() == [(4, True)]


def test_the_spool_of_a_store_is_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One file per store, under the user's data directory, named by a hash of the store's
    location as shown (no password in it)."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    first = FailureMemory("postgresql://loop:pw-one-secret@db:5432/mem").spool()
    second = FailureMemory("postgresql://loop:pw-two-secret@db:5432/mem").spool()
    other = FailureMemory("postgresql://loop@db:5432/other").spool()
    assert first is not None
    assert second is not None
    assert other is not None
    assert first.path == second.path != other.path  # the password is not part of the store
    assert first.path.parent == tmp_path / "xdg" / "loopctl" / spool_module.DIRECTORY
    assert FailureMemory.unusable(StoreUnavailable("x", reason="bad-url")).spool() is None
    assert os.path.basename(first.path).endswith(".jsonl")
