"""The calc project most engine tests loop over: ``add()`` subtracts, one unittest test says so,
and the scripted agent's ``FIX`` turn repairs it."""

from __future__ import annotations

from typing import Any

from loopctl.testing import Project, RunResult, run_loop

BUGGY = "def add(a, b):\n    return a - b\n"
TEST = (
    "import unittest\nfrom calc import add\n\n"
    "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
)
FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
IDLE = [{"say": "thinking"}]


def make_calc_project(project: Project) -> Project:
    """Write the buggy calc and its test into ``project`` and commit them."""
    project.write("calc.py", BUGGY)
    project.write("test_calc.py", TEST)
    project.commit("buggy calc")
    return project


def run(project: Project, turns: Any, **kwargs: Any) -> RunResult:
    return run_loop(project, "make add() add", turns=turns, **kwargs)
