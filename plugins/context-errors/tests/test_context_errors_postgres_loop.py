"""Real loops on a Postgres failure memory: a database that goes away mid-run, a wrong password,
a database of a newer schema. Each costs the run its memory (one warning line, the report's
"unavailable"), never the run; nothing already stored changes; the password is nowhere."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_testkit import PgServer, Proxy, database_of, dump, pg_server, pg_url, require_psycopg

#: every test here is a whole loop against a real server: a second or more each
pytestmark = pytest.mark.slow

#: pytest finds fixtures by name in the module: these come from pg_testkit.
FIXTURES = (pg_server, pg_url)
require_psycopg()

from test_context_errors_loop import FIX_ADD, PLUGINS, _calc_project  # noqa: E402

from loopctl import hookimpl  # noqa: E402
from loopctl.testing import run_loop as run_a_loop  # noqa: E402
from loopctl_context_errors.events import (  # noqa: E402
    CONTEXT_GENERATED,
    MEMORY_SPOOL,
    MEMORY_UNAVAILABLE,
)
from loopctl_context_errors.memory import FailureMemory  # noqa: E402
from loopctl_context_errors.memory import close_all as memory_close_all  # noqa: E402

FAILING_TWICE = [[{"say": "x"}], [{"say": "y"}], [FIX_ADD]]
#: Two different failures (an assertion, then a NameError), then the fix: the second is not
#: answered from the run's earlier query of the first.
TWO_FAILURES = [
    [{"say": "x"}],
    [{"replace": "calc.py", "old": "a - b", "new": "a - missing_name"}],
    [{"replace": "calc.py", "old": "a - missing_name", "new": "a + b"}],
]


@pytest.fixture
def proxy(pg_server: PgServer) -> Iterator[Proxy]:
    relay = Proxy(pg_server.host, pg_server.port)
    yield relay
    relay.cut()


def run_loop(project: Any, goal: str, **kwargs: Any) -> Any:
    """:func:`loopctl.testing.run_loop` without the tests before the first turn: these tests
    are about the failures of iterations (the one before the first turn has a test of its own,
    ``test_a_failure_fixed_in_the_first_turn_is_remembered_with_its_change``)."""
    config = {"test_first": False, **kwargs.pop("config", {})}
    return run_a_loop(project, goal, config=config, **kwargs)


def _through(url: str, proxy: Proxy, server: PgServer) -> str:
    return url.replace(f"@{server.host}:{server.port}/", f"@127.0.0.1:{proxy.port}/")


def _seed(url: str) -> None:
    """One stored failure (the calc project's), so that the memory has rows to lose."""
    memory = FailureMemory(url)
    assert memory.record_failure(decisive=["AssertionError: 3 != -1"], category="X", run_id="old")


def _assert_nowhere(secret: str, result: Any) -> None:
    for path in result.state_dir.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(encoding="utf-8", errors="replace"), path


#: How the warning ends when the failures are kept in the local spool.
KEPT = " and written to it when it is back)"


def _one_warning(result: Any, ending: str = "(going on without memory)") -> dict[str, Any]:
    warnings = result.events_of(MEMORY_UNAVAILABLE)
    assert len(warnings) == 1, warnings
    summary = warnings[0]["summary"]
    assert summary.endswith(ending), summary
    assert len(summary.splitlines()) == 1
    return dict(warnings[0])


def test_a_database_that_goes_away_mid_run_costs_the_memory_not_the_run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
    pg_url: str,
    proxy: Proxy,
) -> None:
    url = _through(pg_url, proxy, pg_server)
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", url)

    class CutAfterFirst:
        @hookimpl
        def before_iteration(self, loop: Any) -> None:
            if loop.iteration == 2:  # the first failure was reported with the memory up
                proxy.cut()

    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=TWO_FAILURES,
                      plugins={**PLUGINS, "cut": CutAfterFirst()})  # fmt: skip
    assert result.status == "complete"
    first, second = result.events_of(CONTEXT_GENERATED)
    assert first["memory_status"] in ("ok", "missing")
    assert second["memory_status"] == "unavailable"
    assert second["memory_reason"] in ("gone", "refused", "connect")
    warning = _one_warning(result, KEPT)
    assert warning["summary"].startswith("warning: failure memory ")
    assert f"postgresql://{pg_server.role}@127.0.0.1:{proxy.port}/" in warning["summary"]
    report = (result.state_dir / "context-error-tests.md").read_text(encoding="utf-8")
    assert "None: the failure memory is unavailable." in report
    _assert_nowhere(pg_server.role_password, result)


def test_a_server_that_stops_answering_is_given_up_on_at_the_deadline(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
    pg_url: str,
    proxy: Proxy,
) -> None:
    """A stopped or partitioned server answers neither statement timeouts nor cancel requests:
    the client gives up on it at the memory's deadline, so the loop goes on."""
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", _through(pg_url, proxy, pg_server))

    class FreezeAfterFirst:
        @hookimpl
        def before_iteration(self, loop: Any) -> None:
            if loop.iteration == 2:
                proxy.freeze()

    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=TWO_FAILURES,
                      plugins={**PLUGINS, "freeze": FreezeAfterFirst()},
                      config={"plugins": {"context-errors": {"memory_timeout_s": 1}}})  # fmt: skip
    assert result.status == "complete"
    first, second = result.events_of(CONTEXT_GENERATED)
    assert first["memory_status"] in ("ok", "missing")
    assert (second["memory_status"], second["memory_reason"]) == ("unavailable", "timeout")
    assert "did not answer in time" in _one_warning(result, KEPT)["summary"]


def test_a_wrong_password_is_one_line_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_server: PgServer, pg_url: str
) -> None:
    _seed(pg_url)
    before = dump(pg_server, pg_url)
    wrong = "pw-" + uuid.uuid4().hex
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", pg_url.replace(pg_server.role_password, wrong))
    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=FAILING_TWICE, plugins=PLUGINS)
    assert result.status == "complete"
    assert {e["memory_reason"] for e in result.events_of(CONTEXT_GENERATED)} == {"auth"}
    assert "wrong password" in _one_warning(result)["summary"]
    assert dump(pg_server, pg_url) == before
    _assert_nowhere(wrong, result)


def test_a_newer_schema_is_neither_read_nor_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_server: PgServer, pg_url: str
) -> None:
    _seed(pg_url)
    with pg_server.admin(pg_url.rsplit("/", 1)[1]) as conn:
        conn.execute("UPDATE loopctl_memory_meta SET value = '99' WHERE key = 'schema_version'")
    before = dump(pg_server, pg_url)
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", pg_url)
    project = _calc_project(tmp_path / "p")
    result = run_loop(project, "fix", turns=FAILING_TWICE, plugins=PLUGINS)
    assert result.status == "complete"
    assert {e["memory_status"] for e in result.events_of(CONTEXT_GENERATED)} == {"newer"}
    summary = _one_warning(result)["summary"]
    assert "99" in summary
    assert "upgrade loopctl" in summary
    assert dump(pg_server, pg_url) == before
    _assert_nowhere(pg_server.role_password, result)


def test_a_shared_memory_is_shared_and_scoped_to_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_url: str
) -> None:
    """Two clones of one repository (two machines' loops) share what they learn; a different
    repository's folder of the same name sees it only as another project's failure."""
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", pg_url)
    first = _calc_project(tmp_path / "a" / "calc")
    first.git("remote", "set-url", "origin", "https://github.com/acme/calc.git")
    run_loop(first, "fix", turns=[[{"say": "x"}], [FIX_ADD]], plugins=PLUGINS)
    clone = _calc_project(tmp_path / "b" / "calc")
    clone.git("remote", "set-url", "origin", "git@github.com:acme/calc.git")
    again = run_loop(clone, "fix", turns=[[{"say": "x"}], [FIX_ADD]], plugins=PLUGINS)
    report = (again.state_dir / "context-error-tests.md").read_text(encoding="utf-8")
    assert again.events_of(CONTEXT_GENERATED)[0]["similar_count"] >= 1
    assert "another project" not in report
    other = _calc_project(tmp_path / "c" / "calc")
    other.git("remote", "set-url", "origin", "https://github.com/someone-else/calc.git")
    third = run_loop(other, "fix", turns=[[{"say": "x"}], [FIX_ADD]], plugins=PLUGINS)
    report = (third.state_dir / "context-error-tests.md").read_text(encoding="utf-8")
    assert "(another project: calc)" in report


#: The calc project's failure, as another run met it elsewhere.
CALC_FAILURE = [
    "FAIL: test_add (test_calc.CalcTest.test_add)",
    'File "/elsewhere/test_calc.py", line 6, in test_add',
    "AssertionError: -1 != 5",
]
#: The same failure four times (an assertion), then the fix.
SAME_FAILURE_FOUR_TIMES = [[{"say": "x"}], [{"say": "y"}], [{"say": "z"}], [{"say": "w"}],
                           [FIX_ADD]]  # fmt: skip


def _rows(server: PgServer, url: str) -> list[tuple[str, int, bool]]:
    """Each failure a run stored: (run id, occurrences, whether its fix is known)."""
    with server.admin(database_of(url)) as conn:
        rows = conn.execute(
            "SELECT run_id, occurrences, resolved_at IS NOT NULL FROM loopctl_failures "
            "WHERE run_id <> 'old' ORDER BY id"
        ).fetchall()
    return [(str(run), int(n), bool(fixed)) for run, n, fixed in rows]


def _spool_files(tmp_path: Path) -> list[Path]:
    """The spool files under the test's data directory (the conftest's XDG_DATA_HOME)."""
    return sorted((tmp_path / "xdg" / "loopctl" / "spool").glob("*.jsonl"))


def _with_outage(tmp_path: Path, proxy: Proxy, *, cut: int, restore: int = 0) -> Any:
    """The calc project's loop meeting its failure four times, the relay cut before iteration
    ``cut`` (and restored before ``restore``); each iteration starts once the last one's write
    was tried."""

    class Outage:
        @hookimpl
        def before_iteration(self, loop: Any) -> None:
            loop.wait_for_background(30)
            if loop.iteration == cut:
                proxy.cut()
            if loop.iteration == restore:
                proxy.restore()

    result = run_loop(_calc_project(tmp_path / "p"), "fix", turns=SAME_FAILURE_FOUR_TIMES,
                      plugins={**PLUGINS, "outage": Outage()},
                      config={"stuck": {"enabled": False}})  # fmt: skip  # idle turns
    assert result.status == "complete"
    return result


def test_failures_of_an_outage_are_kept_and_written_when_the_database_is_back(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
    pg_url: str,
    proxy: Proxy,
) -> None:
    """The relay is cut before the second of four meetings of one failure and restored before
    the fourth: none is lost (the two of the outage are written in the same run, once the
    database is back), the fix is recorded, the events never call an answer from the run's
    cache "ok", one warning says the failures are kept and one line that they were written."""
    from loopctl_context_errors import memory

    assert FailureMemory(pg_url).record_failure(decisive=CALC_FAILURE, category="X", run_id="old")
    monkeypatch.setattr(memory, "COOL_DOWN_S", 0.0)  # the run tries the store again at once
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", _through(pg_url, proxy, pg_server))
    result = _with_outage(tmp_path, proxy, cut=2, restore=4)
    ((_run, occurrences, fixed),) = _rows(pg_server, pg_url)
    assert (occurrences, fixed) == (4, True)
    generated = result.events_of(CONTEXT_GENERATED)
    # asked (the seeded failure is found); cached, the store not asked and not known to be
    # down; then known to be down (the write of the second failed), until it is asked again
    assert [e["memory_status"] for e in generated] == ["ok", "cached", "unavailable", "unavailable"]
    assert generated[2]["memory_reason"] == "refused"
    assert [e["similar_count"] for e in generated] == [1] * 4  # the answer is kept all the same
    warning = _one_warning(result, KEPT)
    assert warning["spool"] == str(_spool_file(tmp_path, warning))
    (written,) = result.events_of(MEMORY_SPOOL)
    assert (written["state"], written["records"]) == ("written", 2)
    assert _spool_files(tmp_path) == []
    _assert_nowhere(pg_server.role_password, result)


def _spool_file(tmp_path: Path, warning: dict[str, Any]) -> Path:
    path = Path(warning["spool"])
    assert path.parent == tmp_path / "xdg" / "loopctl" / "spool"
    return path


def test_failures_kept_by_a_run_are_written_by_the_next_one(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    pg_server: PgServer,
    pg_url: str,
    proxy: Proxy,
) -> None:
    """The database goes away for the rest of a run (the default cool-down: the run does not
    try it again): the run keeps three meetings of its failure and its fix; the next run, with
    the database back, writes them at its start."""
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", _through(pg_url, proxy, pg_server))
    first = _with_outage(tmp_path, proxy, cut=2)
    assert [(n, fixed) for _run, n, fixed in _rows(pg_server, pg_url)] == [(1, False)]
    warning = _one_warning(first, KEPT)
    assert _spool_files(tmp_path) == [_spool_file(tmp_path, warning)]
    assert first.events_of(MEMORY_SPOOL) == []
    proxy.restore()
    memory_close_all()  # a new process: nothing remembered of the outage
    second = run_loop(_calc_project(tmp_path / "q"), "fix", turns=[[FIX_ADD]], plugins=PLUGINS)
    assert second.status == "complete"
    assert [(n, fixed) for _run, n, fixed in _rows(pg_server, pg_url)] == [(4, True)]
    (written,) = second.events_of(MEMORY_SPOOL)
    assert (written["state"], written["records"]) == ("written", 4)  # three failures, a fix
    assert second.events_of(MEMORY_UNAVAILABLE) == []
    assert _spool_files(tmp_path) == []
