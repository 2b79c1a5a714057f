"""Fixtures for end-to-end tests with real agent CLIs.

The CLIs come from npm: ``nox -s e2e`` installs them under a cache prefix and passes it in
``LOOPCTL_E2E_NPM_PREFIX``; a CLI on PATH works too. Without one, the tests skip with the reason,
unless ``LOOPCTL_E2E_REQUIRE=1`` (set by the nox session), where a missing CLI is a failure.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopctl.testing import Project, make_project

#: Variables of the developer's own environment that would steer a CLI away from the test server.
FOREIGN_ENV = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDECODE",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "https_proxy",
    "http_proxy",
)


def find_cli(name: str) -> str | None:
    """``name`` under ``$LOOPCTL_E2E_NPM_PREFIX`` (local or global npm layout), else on PATH."""
    prefix = os.environ.get("LOOPCTL_E2E_NPM_PREFIX")
    if prefix:
        for candidate in (
            Path(prefix) / "node_modules" / ".bin" / name,
            Path(prefix) / "bin" / name,
        ):
            if candidate.exists() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which(name)


def _require_or_skip(name: str, package: str) -> str:
    path = find_cli(name)
    if path is not None:
        return path
    reason = (
        f"`{name}` not found: install it with `npm install --prefix DIR {package}` and set "
        "LOOPCTL_E2E_NPM_PREFIX=DIR (or run `nox -s e2e`, which does both)"
    )
    if os.environ.get("LOOPCTL_E2E_REQUIRE", "") not in ("", "0"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def claude_cli() -> str:
    """The real Claude Code CLI, or a skip saying how to get it."""
    path = _require_or_skip("claude", "@anthropic-ai/claude-code")
    done = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{path} --version failed: {done.stderr.strip() or done.stdout.strip()}")
    return path


@pytest.fixture(autouse=True)
def _clean_agent_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in FOREIGN_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def buggy_project(tmp_path: Path) -> Project:
    """A git repository whose unittest test fails until ``return a - b`` becomes ``a + b``."""
    project = make_project(tmp_path / "project")
    project.write(
        "calc.py", "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
    )
    project.write(
        "test_calc.py",
        textwrap.dedent(
            """\
            import unittest

            from calc import add, mul


            class CalcTest(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)

                def test_mul(self):
                    self.assertEqual(mul(2, 3), 6)
            """
        ),
    )
    project.commit("a project with a bug")
    return project


class ArgvLog:
    """A wrapper command that records each CLI invocation's arguments, then runs the CLI."""

    def __init__(self, directory: Path, cli: str) -> None:
        self.path = directory / "argv.jsonl"
        self.script = directory / "record_argv.py"
        self.script.write_text(
            "import json, os, sys\n"
            f"with open({str(self.path)!r}, 'a') as log:\n"
            "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
            f"os.execv({cli!r}, [{cli!r}, *sys.argv[1:]])\n"
        )
        self.command = shlex.join([sys.executable, str(self.script)])

    def calls(self) -> list[list[str]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]


@pytest.fixture
def claude_argv(tmp_path: Path, claude_cli: str) -> ArgvLog:
    return ArgvLog(tmp_path, claude_cli)
