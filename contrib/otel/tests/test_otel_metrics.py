"""Metrics of real loops, read from the SDK's InMemoryMetricReader."""

from __future__ import annotations

import os
from typing import Any

import pytest
from otel_testkit import (
    DONE,
    FIX,
    PLUGINS,
    Memory,
    PricedAgentPlugin,
    in_memory,
    make_project_files,
    priced_config,
    turn_cost,
    usage,
)

from loopctl.testing import make_project
from loopctl.testing import run_loop as run_loop_in

RUN = {"loopctl.agent": "priced", "loopctl.session_mode": "fresh"}
TURNS = [
    [{"say": "looking around"}, usage(1000, 200, read=300, create=50)],
    [usage(10, 1), {"error": "crashed", "message": "the CLI fell over"}],
    [FIX, usage(2000, 400, read=100), DONE],
]


@pytest.fixture(scope="module")
def points(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One loop of three iterations (a failure, a crash and a restart, a pass) for them all."""
    project = make_project_files(make_project(tmp_path_factory.mktemp("metrics") / "project"))
    with pytest.MonkeyPatch.context() as env, in_memory() as memory:
        for name in [n for n in os.environ if n.startswith("OTEL_")]:  # as _no_ambient_otel
            env.delenv(name)
        result = run_loop_in(
            project,
            "make add add",
            agent="priced",
            plugins={**PLUGINS, "priced": PricedAgentPlugin()},
            config=priced_config(project, TURNS),
        )
    assert result.status == "complete"
    found = memory.points()
    found["_events"] = result.events
    return found


def by(points: list[tuple[dict[str, Any], Any]], **wanted: Any) -> list[Any]:
    return [v for a, v in points if all(a.get(k) == w for k, w in wanted.items())]


@pytest.mark.slow
def test_iterations_are_counted_with_their_outcome(points: dict[str, Any]) -> None:
    iterations = points["loopctl.iterations"]
    assert sum(v for _, v in iterations) == 3
    assert by(
        iterations, **{"loopctl.tests.passed": True, "loopctl.iteration.decision": "stop"}
    ) == [1]
    assert by(iterations, **{"loopctl.iteration.decision": "restart"}) == [1]
    assert all({**RUN}.items() <= a.items() for a, _ in iterations)


def test_tokens_are_counted_by_kind(points: dict[str, Any]) -> None:
    tokens = points["loopctl.tokens"]
    assert by(tokens, **{"loopctl.token.kind": "input"}) == [1000 + 10 + 2000]
    assert by(tokens, **{"loopctl.token.kind": "output"}) == [200 + 1 + 400]
    assert by(tokens, **{"loopctl.token.kind": "cache_read"}) == [300 + 100]
    assert by(tokens, **{"loopctl.token.kind": "cache_creation"}) == [50]
    assert all(RUN.items() <= a.items() for a, _ in tokens)


def test_cost_is_summed(points: dict[str, Any]) -> None:
    (cost,) = [v for _, v in points["loopctl.cost_usd"]]
    expected = turn_cost(1000, 200) + turn_cost(10, 1) + turn_cost(2000, 400)
    assert cost == pytest.approx(expected)


def test_durations_are_histograms_in_seconds(points: dict[str, Any]) -> None:
    events = points["_events"]
    durations = [e["duration_s"] for e in events if e["type"] == "iteration.end"]
    histograms = [v for _, v in points["loopctl.iteration.duration"]]
    assert sum(h.count for h in histograms) == 3
    assert sum(h.sum for h in histograms) == pytest.approx(sum(durations))
    assert 1 in histograms[0].explicit_bounds  # second-sized buckets, not milliseconds
    agent = [v for _, v in points["loopctl.agent.duration"]]
    assert sum(h.count for h in agent) == 3
    assert by(points["loopctl.agent.duration"], **{"loopctl.agent.outcome": "error"})[0].count == 1
    tests = [v for _, v in points["loopctl.test.duration"]]
    assert sum(h.count for h in tests) == 3


def test_failing_tests_and_test_runs(points: dict[str, Any]) -> None:
    # test_add fails in iterations 1 and 2 (test_zero passes throughout), then passes.
    assert [v for _, v in points["loopctl.test.failures"]] == [2]
    runs = points["loopctl.test.runs"]
    assert by(runs, **{"loopctl.tests.passed": False}) == [2]
    assert by(runs, **{"loopctl.tests.passed": True}) == [1]


def test_restarts_and_the_run_are_counted(points: dict[str, Any]) -> None:
    assert by(points["loopctl.restarts"], **{"loopctl.restart.reason": "agent_crash"}) == [1]
    assert by(points["loopctl.runs"], **{"loopctl.status": "complete"}) == [1]


def test_metrics_off_records_no_metrics(run_loop: Any, memory: Memory) -> None:
    run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"metrics": False}}},
    )
    assert memory.points() == {}
    assert memory.named("loopctl.run")
