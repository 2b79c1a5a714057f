"""pytest fixtures for testing loopctl plugins; loaded automatically where loopctl is installed.

* ``loopctl_project``: a fresh project directory (a git repository with one commit).
* ``run_loop``: run a whole loop in that project with the scripted agent (see
  :func:`loopctl.testing.run_loop`); returns a :class:`loopctl.testing.RunResult`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopctl.testing import Project, RunResult, make_project
from loopctl.testing import run_loop as _run_loop


@pytest.fixture
def loopctl_project(tmp_path: Path) -> Project:
    """A throwaway project: a git repository with an initial commit."""
    return make_project(tmp_path / "project")


@pytest.fixture
def run_loop(loopctl_project: Project) -> Callable[..., RunResult]:
    """Run a loop in ``loopctl_project``: ``run_loop(goal, turns=[...], plugins={...})``."""

    def runner(goal: str, **kwargs: Any) -> RunResult:
        return _run_loop(loopctl_project, goal, **kwargs)

    return runner
