"""Fixtures: a clean GitHub environment (these tests may themselves run in GitHub Actions, whose
variables must not leak in), a private failure memory, and the fake GitHub API."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from github_testkit import FakeGitHub

GITHUB_VARIABLES = (
    "GITHUB_TOKEN",
    "GITHUB_REPOSITORY",
    "GITHUB_REF",
    "GITHUB_EVENT_PATH",
    "GITHUB_API_URL",
)


@pytest.fixture(autouse=True)
def clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in GITHUB_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", "off")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.fixture
def token() -> str:
    return "ghp_" + secrets.token_hex(18)


@pytest.fixture
def github(token: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """The fake API, with the token exported as GITHUB_TOKEN."""
    server = FakeGitHub(token).start()
    monkeypatch.setenv("GITHUB_TOKEN", token)
    try:
        yield server
    finally:
        server.stop()
