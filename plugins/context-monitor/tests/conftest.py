"""Fixtures for the context monitor's tests."""

from __future__ import annotations

import pytest
from context_monitor_testkit import make_buggy

from loopctl.testing import Project


@pytest.fixture
def buggy(loopctl_project: Project) -> Project:
    """The kit's project with a failing unittest until ``a - b`` becomes ``a + b``."""
    return make_buggy(loopctl_project)
