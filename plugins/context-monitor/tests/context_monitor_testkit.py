"""Shared helpers for the context monitor's tests (a uniquely named module, so it never clashes
with another distribution's test helpers when every test suite runs in one pytest session)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import loopctl_context_monitor.plugin as context_monitor_plugin
from loopctl.testing import Project, RunResult

PLUGIN = {"context-monitor": context_monitor_plugin}
WINDOW = 200_000
BUG = "return a - b"
FIX = "return a + b"


def usage(tokens: int, window: int | None = WINDOW) -> dict[str, Any]:
    """A scripted ``usage`` action whose request fills ``tokens`` of the context in all."""
    if tokens > 1_500:
        counts = {
            "input_tokens": 1_000,
            "cache_read_input_tokens": tokens - 1_500,
            "output_tokens": 500,
        }
    else:
        counts = {"input_tokens": tokens}
    action: dict[str, Any] = {"usage": counts}
    if window is not None:
        action["context_window"] = window
    return action


def make_buggy(project: Project) -> Project:
    """Give ``project`` a failing unittest until ``a - b`` becomes ``a + b``, committed."""
    make_buggy_files(project)
    project.commit("a project with a bug")
    return project


def make_buggy_files(project: Project) -> None:
    """The buggy module and its test, without committing (for projects without git)."""
    project.write("calc.py", f"def add(a, b):\n    {BUG}\n")
    project.write(
        "test_calc.py",
        textwrap.dedent(
            """\
            import unittest

            from calc import add


            class CalcTest(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)
            """
        ),
    )


def prompt(result: RunResult, iteration: int) -> str:
    """The prompt loopctl sent at ``iteration`` (from logs/ or a restart archive)."""
    name = f"iteration-{iteration:04d}.prompt.md"
    for path in sorted(result.state_dir.rglob(name)):
        return path.read_text(encoding="utf-8")
    raise AssertionError(f"no {name} under {result.state_dir}")


def events(result: RunResult, type_: str) -> list[dict[str, Any]]:
    return result.events_of(type_)


def dump(result: RunResult) -> str:
    """For assertion messages: the run's events, one per line."""
    return "\n".join(json.dumps(e)[:300] for e in result.events)


def state_file(result: RunResult, name: str) -> Path:
    return result.state_dir / name
