"""Fixtures for end-to-end tests with real agent CLIs.

The CLIs come from npm: ``nox -s e2e`` installs them under a cache prefix and passes it in
``LOOPCTL_E2E_NPM_PREFIX``; a CLI on PATH works too. Without one, the tests skip with the reason,
unless ``LOOPCTL_E2E_REQUIRE=1`` (set by the nox session), where a missing CLI is a failure.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from loopctl.testing import Project, make_project
from loopctl.testing.behaviours import Change, Fixer
from loopctl.testing.realcli import FOREIGN_ENV, ArgvLog, require_cli


@pytest.fixture(scope="session")
def claude_cli() -> str:
    """The real Claude Code CLI, or a skip saying how to get it."""
    path = require_cli("claude", "@anthropic-ai/claude-code")
    done = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{path} --version failed: {done.stderr.strip() or done.stdout.strip()}")
    return path


@pytest.fixture(scope="session")
def codex_cli() -> str:
    """The real Codex CLI, or a skip saying how to get it."""
    return require_cli("codex", "@openai/codex")


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


@pytest.fixture
def claude_argv(tmp_path: Path, claude_cli: str) -> ArgvLog:
    return ArgvLog(tmp_path, claude_cli)


@pytest.fixture
def pricing_project(tmp_path: Path) -> tuple[Project, Fixer]:
    """A git repository whose total() rounds to whole units, and the ``fixer`` agent for it:
    its first idea (``float(round(…))``) is wrong, its second right."""
    project = make_project(tmp_path / "project")
    project.write("pricing.py", "def total(prices):\n    return round(sum(prices))\n")
    project.write(
        "test_pricing.py",
        "import unittest\nfrom pricing import total\n\n\nclass T(unittest.TestCase):\n"
        "    def test_total(self):\n        self.assertEqual(total([9.99, 7.00]), 16.99)\n",
    )
    project.commit("a pricing bug")
    old = "return round(sum(prices))"
    wrong = Change("pricing.py", old, "return float(round(sum(prices)))")
    right = Change("pricing.py", old, "return round(sum(prices), 2)")
    return project, Fixer(test_cmd=f"{sys.executable} -m unittest -q", ideas=[wrong, right])
