"""pg_testkit decides between a server, a skip and a failure as documented (no server is
started here)."""

from __future__ import annotations

from pathlib import Path

import pg_testkit
import pytest


def test_without_binaries_the_postgres_tests_skip_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(pg_testkit, "BINARIES_GLOB", f"{tmp_path}/nothing/*/bin/initdb")
    monkeypatch.delenv(pg_testkit.ENV_REQUIRE, raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt install postgresql"):
        pg_testkit.start_cluster()


def test_without_binaries_they_fail_when_postgres_is_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(pg_testkit, "BINARIES_GLOB", f"{tmp_path}/nothing/*/bin/initdb")
    monkeypatch.setenv(pg_testkit.ENV_REQUIRE, "1")
    with pytest.raises(pytest.fail.Exception, match="apt install postgresql"):
        pg_testkit.start_cluster()


def test_the_newest_installed_version_is_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for version in ("9.6", "15", "13"):
        bindir = tmp_path / version / "bin"
        bindir.mkdir(parents=True)
        (bindir / "initdb").touch()
    monkeypatch.setattr(pg_testkit, "BINARIES_GLOB", f"{tmp_path}/*/bin/initdb")
    assert pg_testkit._binaries() == tmp_path / "15" / "bin"


def test_outside_pytest_no_binaries_is_an_exception_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The benchmark's way in: no skip, no failure, but PgUnavailable saying why."""
    monkeypatch.setattr(pg_testkit, "BINARIES_GLOB", f"{tmp_path}/nothing/*/bin/initdb")
    monkeypatch.delenv(pg_testkit.ENV_URL, raising=False)
    monkeypatch.setenv(pg_testkit.ENV_REQUIRE, "1")  # not consulted outside pytest's fixtures
    unavailable = pytest.raises(
        pg_testkit.PgUnavailable, match=r"apt install postgresql|psycopg is not installed"
    )
    with unavailable, pg_testkit.running_server():
        raise AssertionError("no server without binaries")
