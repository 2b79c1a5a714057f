"""Event data comes from the engine and from any plugin: the recorder takes any sequence of
events with any data without raising and ends every span it started; the attribute and error
text helpers take anything. And the recorder stays cheap on the loop's path."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from otel_testkit import DONE, FIX, PLUGINS

from loopctl import Event
from loopctl_otel.attributes import MAX_ITEMS, MAX_TEXT, attribute_value
from loopctl_otel.config import OtelConfig
from loopctl_otel.events import EXPORT_FAILED, WARNING
from loopctl_otel.failures import FailureLog, describe_error, describe_status, is_decisive
from loopctl_otel.peers import CONTEXT_USAGE
from loopctl_otel.pipeline import Pipeline
from loopctl_otel.recorder import Recorder

CORE_TYPES = [
    "loop.start",
    "loop.resume",
    "loop.warning",
    "iteration.start",
    "agent.start",
    "agent.end",
    "tests.start",
    "tests.end",
    "iteration.end",
    "loop.restart",
    *([CONTEXT_USAGE] if CONTEXT_USAGE else []),
    "loop.end",
    "demo.event",
    EXPORT_FAILED,
]
FIELDS = [
    "goal",
    "agent",
    "outcome",
    "error_kind",
    "duration_s",
    "tokens",
    "cost_usd",
    "context_tokens",
    "context_window",
    "passed",
    "exit_code",
    "failing",
    "failing_tests",
    "decision",
    "percent",
    "known",
    "number",
    "reason",
    "trimmed",
    "plugins",
]
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=4,
)
events = st.builds(
    Event,
    type=st.sampled_from(CORE_TYPES),
    ts=st.floats(allow_nan=True, allow_infinity=True) | st.floats(1.7e9, 1.8e9),
    data=st.dictionaries(st.sampled_from(FIELDS), json_scalars | json_values, max_size=4),
    iteration=st.none() | st.integers(-3, 5),
)


class Counting:
    """A span processor that counts starts and ends (unended spans are never exported)."""

    def __init__(self) -> None:
        self.started = 0
        self.ended = 0

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started += 1

    def on_end(self, span: Any) -> None:
        self.ended += 1

    def _on_ending(self, span: Any) -> None:
        pass

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_SHARED: dict[str, Any] = {}


def recorder() -> tuple[Recorder, Counting, Any]:
    """A recorder on SDK providers with a counting span processor (the providers are made
    once: making them per example would dominate the test's time)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider

    if not _SHARED:
        counting = Counting()
        tracer_provider = TracerProvider(shutdown_on_exit=False)
        tracer_provider.add_span_processor(counting)  # type: ignore[arg-type]
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
        _SHARED.update(
            counting=counting,
            reader=reader,
            tracer=tracer_provider.get_tracer("test"),
            meter=meter_provider.get_meter("test"),
        )
    counting = _SHARED["counting"]
    counting.started = counting.ended = 0
    pipeline = Pipeline(
        tracer=_SHARED["tracer"],
        meter=_SHARED["meter"],
        kinds={"traces": "test", "metrics": "test"},
        destinations={},
        timeout_s=1.0,
    )
    return Recorder(pipeline, OtelConfig(), loop=None, env={}), counting, _SHARED["reader"]


@settings(max_examples=100, deadline=None)
@given(st.lists(events, max_size=15), st.none() | st.sampled_from(["complete", "interrupted"]))
def test_any_event_sequence_is_recorded_and_every_span_ends(
    sequence: list[Event], status: str | None
) -> None:
    rec, counting, reader = recorder()
    for event in sequence:
        rec.handle(event)
    outcome = None if status is None else type("Outcome", (), {"status": status, "message": "m"})()
    rec.finish(outcome)
    assert counting.started == counting.ended
    assert rec.finished
    reader.get_metrics_data()  # whatever was recorded can be collected
    rec.handle(Event("iteration.start", 1.0))  # after the end: ignored
    assert counting.started == counting.ended


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_value_becomes_a_valid_attribute(value: Any) -> None:
    converted = attribute_value(value)
    if value is None:
        assert converted is None
        return
    assert isinstance(converted, (str, bool, int, float, tuple))
    if isinstance(converted, str):
        assert len(converted) <= MAX_TEXT
    if isinstance(converted, int) and not isinstance(converted, bool):
        assert -(2**63) <= converted < 2**63
    if isinstance(converted, tuple):
        assert len(converted) <= MAX_ITEMS
        assert len({type(item) for item in converted}) <= 1


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_any_error_text_gives_a_short_reason(text: str) -> None:
    reason = describe_error(text)
    assert reason
    assert len(reason) <= 400


def test_reasons_from_real_exporter_messages() -> None:
    refused = (
        "HTTPConnectionPool(host='127.0.0.1', port=9): Max retries exceeded with url: /v1/traces "
        "(Caused by NewConnectionError(\"HTTPConnection(host='127.0.0.1', port=9): Failed to "
        'establish a new connection: [Errno 111] Connection refused"))'
    )
    assert describe_error(refused) == "connection refused (is an OTLP collector listening there?)"
    dns = "Failed to resolve 'nope.invalid' ([Errno -2] Name or service not known)"
    assert describe_error(dns) == "name or service not known (check the host name in the endpoint)"
    assert is_decisive(describe_error(refused))
    assert is_decisive(describe_status(401, "Unauthorized"))
    assert not is_decisive(describe_status(503, "Service Unavailable"))  # a retry may do
    assert not is_decisive(describe_status(429, "Too Many Requests"))
    assert not is_decisive("timed out (is the endpoint reachable from here?)")
    log = FailureLog()
    log.note("traces", "Failed to export spans batch code: 500, reason: boom")
    log.note("metrics")
    log.cause("metrics", "HTTP 401 Unauthorized")
    assert log.snapshot() == {
        "traces": "Failed to export spans batch code: 500, reason: boom",
        "metrics": "HTTP 401 Unauthorized",
    }
    assert log.count == 2


def synthetic_iteration(n: int, ts: float) -> list[Event]:
    return [
        Event("iteration.start", ts, {"restarts": 0, "session_id": None}, n),
        Event("agent.start", ts + 0.01, {"agent": "x", "prompt_chars": 900, "trimmed": []}, n),
        Event(
            "agent.end",
            ts + 1.0,
            {
                "outcome": "ok",
                "tokens": 5000,
                "duration_s": 0.99,
                "cost_usd": 0.01,
                "context_tokens": 5000,
                "context_window": 200000,
                "tool_calls": 3,
            },
            n,
        ),
        Event("tests.start", ts + 1.01, {"command": "pytest -q"}, n),
        Event(
            "tests.end",
            ts + 2.0,
            {
                "passed": False,
                "exit_code": 1,
                "failing": 2,
                "failing_tests": ["a", "b"],
                "duration_s": 0.99,
                "timed_out": False,
                "runner": "pytest",
                "error_count": 4,
            },
            n,
        ),
        Event("demo.noticed", ts + 2.01, {"what": "something"}, n),
        Event(
            "iteration.end",
            ts + 2.02,
            {"tests_passed": False, "failing": 2, "decision": "continue", "duration_s": 2.02},
            n,
        ),
    ]


def test_a_long_run_opens_and_closes_spans_in_step() -> None:
    """200 iterations: every span the recorder starts, it ends (run, iterations, phases), so a
    long loop neither leaks spans nor keeps state that grows with it."""
    rec, counting, _ = recorder()
    rec.handle(Event("loop.start", 1.7e9, {"goal": "g", "agent": "x", "session_mode": "fresh"}))
    for n in range(1, 201):
        for event in synthetic_iteration(n, 1.7e9 + 3 * n):
            rec.handle(event)
        # open: the run and this iteration (which stays open for a restart that may follow)
        assert counting.started - counting.ended == 2
    rec.finish(None)
    assert counting.started == counting.ended == 1 + 200 * 3  # run; iteration, agent, tests


def test_a_recorder_bug_turns_telemetry_off_once_and_the_loop_goes_on(
    run_loop: Any, memory: Any, monkeypatch: Any
) -> None:
    original = Recorder.handle

    def broken(self: Recorder, event: Event) -> None:
        if event.type == "tests.end":
            raise RuntimeError("a bug in the recorder")
        original(self, event)

    monkeypatch.setattr(Recorder, "handle", broken)
    result = run_loop("make add add", turns=[[{"say": "not yet"}], [FIX, DONE]], plugins=PLUGINS)
    assert result.status == "complete"
    (warning,) = result.events_of(WARNING)
    assert "a bug in the recorder" in warning["message"]
    assert not result.events_of("plugin.error")
    names = sorted(s.name for s in memory.finished())  # what was open got ended, once
    assert names == ["loopctl.agent", "loopctl.iteration", "loopctl.run", "loopctl.tests"]


def test_span_times_come_from_one_clock_so_no_child_outlives_its_parent() -> None:
    """Event stamps are the wall clock rounded to the millisecond, so the latest one may be
    up to half a millisecond ahead of the wall clock when the loop ends. The run span's end
    (no event gives it) is never taken earlier than that: here every stamp is ahead by far."""
    import time

    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    pipeline = Pipeline(
        tracer=provider.get_tracer("test"),
        meter=None,
        kinds={"traces": "test"},
        destinations={},
        timeout_s=1.0,
    )
    rec = Recorder(pipeline, OtelConfig(), loop=None, env={})
    ahead = time.time() + 5.0  # stamps in the wall clock's future
    rec.handle(Event("loop.start", ahead, {"goal": "g", "agent": "x"}))
    for event in synthetic_iteration(1, ahead + 0.001):
        rec.handle(event)
    rec.handle(Event("iteration.start", ahead + 3.0, {"restarts": 0}, 2))
    rec.handle(Event("agent.start", ahead + 3.001, {"agent": "x"}, 2))  # never ends
    rec.finish(None)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    by_id = {span.context.span_id: span for span in exporter.get_finished_spans()}
    for span in exporter.get_finished_spans():
        assert span.start_time <= span.end_time, span.name
        if span.parent is not None:
            parent = by_id[span.parent.span_id]
            assert span.end_time <= parent.end_time, (span.name, parent.name)
    assert spans["loopctl.run"].end_time >= int((ahead + 3.001) * 1_000_000_000)
    assert rec.now() >= rec.latest_ns
