"""Fixtures for loopctl-otel's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from otel_testkit import Collector, Memory, in_memory, make_project_files, running_collector

from loopctl.testing import Project


@pytest.fixture(autouse=True)
def _no_ambient_otel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shell's OTEL_* settings (a developer's collector, OTEL_SDK_DISABLED in a CI job)
    must not reach these tests; each test sets what it needs."""
    for name in list(os.environ):
        if name.startswith("OTEL_") or name in ("TRACEPARENT", "TRACESTATE"):
            monkeypatch.delenv(name)


@pytest.fixture
def project(loopctl_project: Project) -> Project:
    """The kit's project with ``add`` broken: test_add fails, test_zero passes."""
    return make_project_files(loopctl_project)


@pytest.fixture
def run_loop(project: Project, run_loop: Any) -> Any:
    """The kit's ``run_loop``, in :func:`project`, without the tests before the first turn
    (``test_first = false``): these tests check the spans and metrics of iterations, counted
    from the first turn; ``test_the_tests_before_the_first_turn_are_a_span_of_the_run`` has
    them on."""

    def runner(goal: str, **kwargs: Any) -> Any:
        config = {"test_first": False, **kwargs.pop("config", {})}
        return run_loop(goal, config=config, **kwargs)

    return runner


@pytest.fixture
def memory() -> Iterator[Memory]:
    """The SDK's InMemorySpanExporter and InMemoryMetricReader, injected into the plugin."""
    with in_memory() as found:
        yield found


@pytest.fixture
def collector() -> Iterator[Collector]:
    """A local OTLP/HTTP receiver on 127.0.0.1."""
    with running_collector() as found:
        yield found
