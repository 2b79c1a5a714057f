"""The span tree of real loops (``loopctl.testing.run_loop``), read from the SDK's
InMemorySpanExporter: names, parent/child relations, timings, attributes, and the ends of
loops that stop early."""

from __future__ import annotations

from typing import Any

import pytest
from otel_testkit import (
    DONE,
    FIX,
    PLUGINS,
    Memory,
    PricedAgentPlugin,
    priced_config,
    turn_cost,
    usage,
)

from loopctl import Decision, MessageKind, hookimpl
from loopctl.testing import Project, RunResult
from loopctl_otel.events import EXPORTING
from loopctl_otel.peers import CONTEXT_USAGE
from loopctl_otel.pipeline import inject

TWO_TURNS = [
    [{"say": "looking around"}, usage(1000, 200, read=300, create=50)],
    [FIX, usage(2000, 400, read=100), DONE],
]


def run_two(run_loop: Any, **kwargs: Any) -> RunResult:
    result: RunResult = run_loop("make add add", turns=TWO_TURNS, plugins=PLUGINS, **kwargs)
    return result


def ns(seconds: float) -> int:
    return int(seconds * 1_000_000_000)


@pytest.mark.timing  # span times from two sources
def test_a_run_is_a_tree_of_iterations_and_their_phases(run_loop: Any, memory: Memory) -> None:
    result = run_two(run_loop)
    assert result.status == "complete"
    (run,) = memory.named("loopctl.run")
    assert run.parent is None
    iterations = memory.children(run)
    assert [s.name for s in iterations] == ["loopctl.iteration", "loopctl.iteration"]
    assert [s.attributes["loopctl.iteration"] for s in iterations] == [1, 2]
    for iteration in iterations:
        phases = memory.children(iteration)
        assert [s.name for s in phases] == ["loopctl.agent", "loopctl.tests"]
        agent, tests = phases
        assert run.start_time <= iteration.start_time <= agent.start_time
        assert agent.end_time <= tests.start_time <= tests.end_time <= iteration.end_time
        assert iteration.end_time <= run.end_time
    assert len(memory.finished()) == 1 + 2 * 3  # every span started was ended and exported
    assert {s.context.trace_id for s in memory.finished()} == {run.context.trace_id}
    exporting = result.events_of(EXPORTING)
    assert exporting[0]["trace_id"] == f"{run.context.trace_id:032x}"
    assert exporting[0]["traces"] == "memory"


@pytest.mark.timing  # span times
def test_phase_spans_take_their_times_from_the_core_events(run_loop: Any, memory: Memory) -> None:
    result = run_two(run_loop)
    agent_ends = result.events_of("agent.end")
    tests_ends = result.events_of("tests.end")
    for k, iteration in enumerate(memory.named("loopctl.iteration")):
        agent, tests = memory.children(iteration)
        assert agent.end_time == ns(agent_ends[k]["ts"])
        assert tests.end_time == ns(tests_ends[k]["ts"])
        assert agent.attributes["loopctl.agent.duration_s"] == agent_ends[k]["duration_s"]
        assert tests.attributes["loopctl.tests.duration_s"] == tests_ends[k]["duration_s"]
        # The span covers the turn the supervisor timed (event stamps are rounded to 1 ms).
        assert (agent.end_time - agent.start_time) >= ns(agent_ends[k]["duration_s"] - 0.002)
    starts = result.events_of("iteration.start")
    ends = result.events_of("iteration.end")
    for k, iteration in enumerate(memory.named("loopctl.iteration")):
        assert iteration.start_time == ns(starts[k]["ts"])
        assert iteration.end_time == ns(ends[k]["ts"])


def test_attributes_carry_tokens_context_tests_and_changes(run_loop: Any, memory: Memory) -> None:
    run_two(run_loop)
    first, second = memory.named("loopctl.iteration")
    assert first.attributes["loopctl.tokens.input"] == 1000
    assert first.attributes["loopctl.tokens.output"] == 200
    assert first.attributes["loopctl.tokens.cache_read"] == 300
    assert first.attributes["loopctl.tokens.cache_creation"] == 50
    assert first.attributes["loopctl.tokens.total"] == 1550
    assert first.attributes["loopctl.context.percent"] == round(100 * 1550 / 200_000, 1)
    assert first.attributes["loopctl.tests.passed"] is False
    assert first.attributes["loopctl.tests.failing"] == 1  # test_add fails, test_zero passes
    assert first.attributes["loopctl.changed_files"] == 0
    assert first.attributes["loopctl.iteration.decision"] == "continue"
    assert first.attributes["loopctl.restarts"] == 0
    assert "loopctl.generation" not in first.attributes
    assert second.attributes["loopctl.tests.passed"] is True
    assert second.attributes["loopctl.changed_files"] == 1  # calc.py
    assert second.attributes["loopctl.iteration.decision"] == "stop"
    assert second.attributes["loopctl.iteration.reason"] == "complete"
    sessions = [s.attributes["loopctl.session_id"] for s in (first, second)]
    assert all(sessions)
    assert sessions[0] != sessions[1]  # session mode "fresh": a new session per iteration
    agent, tests = memory.children(first)
    assert agent.attributes["loopctl.agent.outcome"] == "ok"
    assert agent.attributes["gen_ai.usage.input_tokens"] == 1000
    assert agent.attributes["gen_ai.request.model"] == "scripted"
    assert tests.attributes["loopctl.tests.exit_code"] == 1
    assert tests.attributes["loopctl.tests.failing_tests"] == ("test_calc.TestAdd.test_add",)
    assert memory.children(second)[1].attributes["loopctl.tests.exit_code"] == 0
    (run,) = memory.named("loopctl.run")
    assert run.attributes["loopctl.goal"] == "make add add"
    assert run.attributes["loopctl.agent"] == "scripted"
    assert run.attributes["loopctl.session_mode"] == "fresh"
    assert "unittest" in str(run.attributes["loopctl.test_cmd"])
    assert run.attributes["loopctl.status"] == "complete"
    assert run.attributes["loopctl.iterations"] == 2
    assert run.attributes["loopctl.restarts"] == 0
    assert run.attributes["loopctl.tokens.total"] == 1550 + 2500
    assert run.attributes["loopctl.exit_code"] == 0
    assert run.status.is_unset


def test_a_turn_without_usage_has_no_token_attributes(run_loop: Any, memory: Memory) -> None:
    """An agent that reports no usage spent an unknown number of tokens, not 0."""
    result = run_loop("make add add", turns=[[FIX, DONE]], plugins=PLUGINS)
    assert result.status == "complete"
    (agent,) = memory.named("loopctl.agent")
    assert not [key for key in agent.attributes if "tokens" in key], agent.attributes
    (iteration,) = memory.named("loopctl.iteration")
    assert "loopctl.tokens.total" not in iteration.attributes


@pytest.mark.slow
def test_cost_is_on_the_agent_iteration_and_run_spans(
    run_loop: Any, project: Project, memory: Memory
) -> None:
    result = run_loop(
        "make add add",
        agent="priced",
        plugins={**PLUGINS, "priced": PricedAgentPlugin()},
        config=priced_config(project, TWO_TURNS),
    )
    assert result.status == "complete"
    first, second = memory.named("loopctl.iteration")
    assert first.attributes["loopctl.cost_usd"] == pytest.approx(turn_cost(1000, 200))
    assert second.attributes["loopctl.cost_usd"] == pytest.approx(turn_cost(2000, 400))
    assert memory.children(first)[0].attributes["loopctl.cost_usd"] == pytest.approx(
        turn_cost(1000, 200)
    )
    (run,) = memory.named("loopctl.run")
    assert run.attributes["loopctl.cost_usd"] == pytest.approx(
        turn_cost(1000, 200) + turn_cost(2000, 400)
    )


def test_the_goal_is_cut_to_goal_max_chars(run_loop: Any, memory: Memory) -> None:
    goal = "make add add " + "x" * 500
    run_loop(
        goal,
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"goal_max_chars": 20}}},
    )
    (run,) = memory.named("loopctl.run")
    assert run.attributes["loopctl.goal"] == goal[:19] + "…"


@pytest.mark.slow
def test_goal_max_chars_zero_leaves_the_goal_out(run_loop: Any, memory: Memory) -> None:
    run_loop(
        "secret plans",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"goal_max_chars": 0}}},
    )
    (run,) = memory.named("loopctl.run")
    assert "loopctl.goal" not in run.attributes


class Rechecker:
    """Runs the tests again after a failed iteration, as a flakiness check would."""

    @hookimpl
    def after_iteration(self, loop: Any, record: Any) -> None:
        if not record.tests_passed:
            loop.run_tests(label="flaky-check")


@pytest.mark.slow
def test_a_plugins_rerun_of_the_tests_is_a_labelled_tests_span(
    run_loop: Any, memory: Memory
) -> None:
    result = run_loop(
        "make add add", turns=TWO_TURNS, plugins={**PLUGINS, "rechecker": Rechecker()}
    )
    assert result.status == "complete"
    starts = result.events_of("tests.start")
    assert [s.get("label") for s in starts] == [None, "flaky-check", None]
    first, _second = memory.named("loopctl.iteration")
    own, rerun = memory.children(first)[1:]
    assert "loopctl.tests.rerun" not in own.attributes
    assert rerun.attributes["loopctl.tests.rerun"] is True
    assert rerun.attributes["loopctl.tests.label"] == "flaky-check"


def context_usage() -> str:
    """The context monitor's reading, through its published constant (skip without it)."""
    if CONTEXT_USAGE is None:
        pytest.skip("loopctl-context-monitor is not installed")
    return CONTEXT_USAGE


class Noticer:
    """Emits one plugin event per iteration, and the context monitor's noisy reading (as that
    plugin would), which is excluded by default."""

    @hookimpl
    def after_iteration(self, loop: Any, record: Any) -> None:
        loop.emit("demo.noticed", what="something", iteration_seen=record.iteration)
        loop.emit(
            context_usage(),
            tokens=150_000,
            window=200_000,
            percent=75.0,
            known=True,
            source="iteration",
        )


@pytest.mark.timing  # span times
def test_a_restart_and_plugin_events_are_events_of_the_iteration(
    run_loop: Any, memory: Memory
) -> None:
    result = run_loop(
        "make add add",
        turns=[[{"error": "crashed", "message": "the CLI fell over"}], [FIX, DONE]],
        plugins={**PLUGINS, "noticer": Noticer()},
    )
    assert result.status == "complete"
    assert result.events_of("loop.restart")
    first, second = memory.named("loopctl.iteration")
    restart = [e for e in first.events if e.name == "loopctl.restart"]
    assert len(restart) == 1
    assert restart[0].attributes["loopctl.restart.number"] == 1
    assert restart[0].attributes["loopctl.restart.reason"] == "agent_crash"
    assert restart[0].timestamp == ns(result.events_of("loop.restart")[0]["ts"])
    assert first.end_time >= restart[0].timestamp  # the iteration covers its restart
    assert first.attributes["loopctl.iteration.decision"] == "restart"
    assert second.attributes["loopctl.restarts"] == 1
    noticed = [e for e in first.events if e.name == "demo.noticed"]
    assert noticed
    assert noticed[0].attributes["what"] == "something"
    assert not [e for e in first.events if e.name == context_usage()]  # excluded
    assert first.attributes["loopctl.context.percent"] == 75.0  # but still read
    agent = memory.children(first)[0]
    assert agent.status.is_ok is False
    assert agent.status.description.startswith("crashed: the CLI fell over")
    assert agent.attributes["loopctl.agent.error_kind"] == "crashed"
    assert first.status.description == "the agent failed: crashed"
    (run,) = memory.named("loopctl.run")
    assert run.attributes["loopctl.restarts"] == 1


def test_span_events_follow_the_include_and_exclude_patterns(run_loop: Any, memory: Memory) -> None:
    run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins={**PLUGINS, "noticer": Noticer()},
        config={"plugins": {"otel": {"span_events": ["context-*"], "exclude_events": []}}},
    )
    (iteration,) = memory.named("loopctl.iteration")
    names = [e.name for e in iteration.events]
    assert context_usage() in names
    assert "demo.noticed" not in names


class StopOnText:
    """Ends the turn at the agent's first text message and stops the loop."""

    @hookimpl
    def on_agent_message(self, loop: Any, message: Any) -> Decision | None:
        if message.kind is MessageKind.TEXT:
            return Decision.stop("budget_guard", "a plugin stopped the loop mid-turn")
        return None


@pytest.mark.timing  # stops a turn mid-stream
def test_a_plugin_stop_ends_every_span(run_loop: Any, memory: Memory) -> None:
    result = run_loop(
        "make add add",
        turns=[[{"say": "thinking"}, {"sleep": 0.2}, FIX, DONE]],
        plugins={**PLUGINS, "stopper": StopOnText()},
    )
    assert result.status == "plugin"
    (run,) = memory.named("loopctl.run")
    (iteration,) = memory.children(run)
    assert [s.name for s in memory.children(iteration)] == ["loopctl.agent", "loopctl.tests"]
    assert iteration.attributes["loopctl.iteration.decision"] == "stop"
    assert run.attributes["loopctl.status"] == "plugin"
    assert run.attributes["loopctl.reason"] == "budget_guard"
    assert run.status.description == "plugin: a plugin stopped the loop mid-turn"
    assert [e.name for e in iteration.events if e.name == "agent.turn_stopped"]


class InterruptAtText:
    """Ctrl-C in the middle of the agent's turn (as the supervisor sees it)."""

    @hookimpl
    def on_agent_message(self, loop: Any, message: Any) -> None:
        if message.kind is MessageKind.TEXT:
            raise KeyboardInterrupt


@pytest.mark.timing  # Ctrl-C mid-turn, span times
def test_an_interrupt_ends_the_open_spans_with_an_error(run_loop: Any, memory: Memory) -> None:
    result = run_loop(
        "make add add",
        turns=[[{"say": "thinking"}, {"sleep": 5}, FIX, DONE]],
        plugins={**PLUGINS, "interrupter": InterruptAtText()},
    )
    assert result.status == "interrupted"
    (run,) = memory.named("loopctl.run")
    (iteration,) = memory.children(run)
    (agent,) = memory.children(iteration)  # the tests never ran
    for span in (agent, iteration, run):
        assert not span.status.is_ok
        assert not span.status.is_unset
    assert "the loop ended (interrupted) before this finished" in agent.status.description
    assert iteration.attributes["loopctl.iteration.decision"] == "unfinished"
    assert run.attributes["loopctl.status"] == "interrupted"
    assert agent.end_time <= iteration.end_time <= run.end_time


def test_an_auth_error_stops_after_the_agent_phase(run_loop: Any, memory: Memory) -> None:
    result = run_loop(
        "make add add", turns=[[{"error": "auth", "message": "please log in"}]], plugins=PLUGINS
    )
    assert result.status == "auth"
    (iteration,) = memory.named("loopctl.iteration")
    (agent,) = memory.children(iteration)
    assert agent.name == "loopctl.agent"
    assert agent.status.description == "auth: please log in"
    (run,) = memory.named("loopctl.run")
    assert run.status.description.startswith("auth: ")
    assert run.attributes["loopctl.exit_code"] == 14


@pytest.mark.slow
def test_a_rate_limited_attempt_is_its_own_span_and_is_retried(
    run_loop: Any, memory: Memory
) -> None:
    result = run_loop(
        "make add add",
        turns=[
            [
                {"error": "rate_limit", "message": "slow down", "retry_after": 0.1, "once": True},
                FIX,
                DONE,
            ]
        ],
        plugins=PLUGINS,
    )
    assert result.status == "complete"
    attempts = memory.named("loopctl.iteration")
    assert [s.attributes["loopctl.iteration"] for s in attempts] == [1, 1]
    assert attempts[0].attributes["loopctl.iteration.retried"] is True
    assert "tried again" in attempts[0].status.description
    assert [e.name for e in attempts[0].events] == ["agent.rate_limit_wait"]
    assert attempts[1].attributes["loopctl.tests.passed"] is True


@pytest.mark.slow
def test_a_resumed_run_links_to_the_run_it_continues(run_loop: Any) -> None:
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = InMemorySpanExporter()  # an injected exporter serves every run (a reader: one)
    memory = Memory(spans, None)
    with inject(span_exporter=spans):
        first = run_loop(
            "make add add",
            turns=[[{"say": "not yet"}]],
            plugins=PLUGINS,
            config={"limits": {"max_iterations": 1}},
        )
        assert first.status == "max_iterations"
        second = run_loop(
            "make add add",
            turns=[[FIX, DONE]],
            plugins=PLUGINS,
            resume=True,
            config={"limits": {"max_iterations": 3}},
        )
    assert second.status == "complete"
    earlier, later = memory.named("loopctl.run")
    assert later.attributes["loopctl.resumed"] is True
    assert [link.context.span_id for link in later.links] == [earlier.context.span_id]
    assert later.context.trace_id != earlier.context.trace_id
    assert [s.attributes["loopctl.iteration"] for s in memory.children(later)] == [2]


def test_traceparent_from_the_environment_is_the_parent(
    run_loop: Any, memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_id, span_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    monkeypatch.setenv("TRACEPARENT", f"00-{trace_id}-{span_id}-01")
    run_loop("make add add", turns=[[FIX, DONE]], plugins=PLUGINS)
    (run,) = memory.named("loopctl.run")
    assert f"{run.context.trace_id:032x}" == trace_id
    assert run.parent is not None
    assert f"{run.parent.span_id:016x}" == span_id


def test_traces_off_records_no_spans(run_loop: Any, memory: Memory) -> None:
    result = run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"traces": False}}},
    )
    assert memory.finished() == []
    assert result.events_of(EXPORTING)[0]["traces"] is None
    assert memory.points()["loopctl.runs"]


def test_the_run_state_lives_in_the_loop_stash(run_loop: Any, memory: Memory) -> None:
    """The recorder is the run's (``loop.stash``), not a module global: present while the loop
    runs, gone from the run once it ended, and a second run in the same process records a
    trace of its own. The events before ``on_loop_start`` wait in the run's stash too."""
    from loopctl_otel import plugin as otel_plugin
    from loopctl_otel.recorder import Recorder

    seen: list[object] = []
    loops: list[Any] = []
    early: list[list[str]] = []

    class Spy:
        @hookimpl(tryfirst=True)
        def on_loop_start(self, loop: Any) -> None:  # before otel's: what on_event kept
            run = loop.stash.get(otel_plugin.RUN)
            early.append([e.type for e in run.early] if run is not None and run.early else [])

        @hookimpl
        def after_iteration(self, loop: Any) -> None:
            seen.append(otel_plugin.current_recorder(loop))
            loops.append(loop)

    for _ in range(2):
        result = run_loop("make add add", turns=[[FIX, DONE]], plugins={**PLUGINS, "spy": Spy()})
        assert result.status == "complete"
    assert len(seen) == 2
    assert None not in seen
    assert seen[0] is not seen[1]
    assert all(kept[:1] == ["loop.start"] for kept in early), early
    # nothing of a run outlives its loop: not in its stash, not in the module
    assert [otel_plugin.current_recorder(loop) for loop in loops] == [None, None]
    held = [v for v in vars(otel_plugin).values() if isinstance(v, (otel_plugin.OtelRun, Recorder))]
    assert held == []
    runs = memory.named("loopctl.run")
    assert len(runs) == 2
    assert runs[0].context.trace_id != runs[1].context.trace_id


def test_the_tests_before_the_first_turn_are_a_span_of_the_run(
    run_loop: Any, memory: Memory
) -> None:
    """The test run before the first agent turn (and its flaky check) belongs to no iteration:
    its spans are children of the run's."""
    result = run_two(run_loop, config={"test_first": True})
    assert result.status == "complete"
    (run,) = memory.named("loopctl.run")
    children = memory.children(run)
    assert [s.name for s in children] == [
        "loopctl.tests",
        "loopctl.tests",
        "loopctl.iteration",
        "loopctl.iteration",
    ]
    assert len(memory.finished()) == 1 + 2 + 2 * 3  # every span started was ended and exported
