"""The ``pytest11`` entry point: loopctl's fixtures for plugin authors' tests.

pytest imports this module at the start of every run in an environment where loopctl is
installed, and that includes the user's own test runs, which the loop starts every iteration.
So it imports nothing of loopctl but this file: the fixtures import :mod:`loopctl.testing` (and
with it the engine) when a test asks for one. ``tests/test_pytest_entry_point.py`` holds it to
that, and ``benchmarks/bench_pytest_entry_point.py`` measures what it costs a ``pytest`` run.

* ``loopctl_project``: a fresh project directory (a git repository with one commit).
* ``run_loop``: run a whole loop in that project with the scripted agent (see
  :func:`loopctl.testing.run_loop`); returns a :class:`loopctl.testing.RunResult`.

``pytest -p no:loopctl`` keeps the fixtures out of a run altogether.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # annotations only: importing the kit here would load the engine
    from loopctl.testing import Project, RunResult


@pytest.fixture
def loopctl_project(tmp_path: Path) -> Project:
    """A throwaway project: a git repository with an initial commit."""
    from loopctl.testing import make_project  # here, not at the top: see the module docstring

    return make_project(tmp_path / "project")


@pytest.fixture
def run_loop(loopctl_project: Project) -> Callable[..., RunResult]:
    """Run a loop in ``loopctl_project``: ``run_loop(goal, turns=[...], plugins={...})``."""
    from loopctl.testing import run_loop as run  # here, not at the top: see the module docstring

    def runner(goal: str, **kwargs: Any) -> RunResult:
        return run(loopctl_project, goal, **kwargs)

    return runner
