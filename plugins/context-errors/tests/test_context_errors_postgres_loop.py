"""Real loops on a Postgres failure memory: a database that goes away mid-run, a wrong password,
a database of a newer schema. Each costs the run its memory (one warning line, the report's
"unavailable"), never the run; nothing already stored changes; the password is nowhere."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_testkit import PgServer, Proxy, dump, pg_server, pg_url, require_psycopg

#: pytest finds fixtures by name in the module: these come from pg_testkit.
FIXTURES = (pg_server, pg_url)
require_psycopg()

from test_context_errors_loop import FIX_ADD, PLUGINS, _calc_project  # noqa: E402

from loopctl import hookimpl  # noqa: E402
from loopctl.testing import run_loop  # noqa: E402
from loopctl_context_errors.events import CONTEXT_GENERATED, MEMORY_UNAVAILABLE  # noqa: E402
from loopctl_context_errors.memory import FailureMemory  # noqa: E402

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


def _one_warning(result: Any) -> dict[str, Any]:
    warnings = result.events_of(MEMORY_UNAVAILABLE)
    assert len(warnings) == 1, warnings
    summary = warnings[0]["summary"]
    assert summary.endswith("(going on without memory)")
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
    warning = _one_warning(result)
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
    assert "did not answer in time" in _one_warning(result)["summary"]


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
