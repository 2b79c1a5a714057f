"""Turns one run's events into spans and metrics.

The span tree of a run::

    loopctl.run                       loop.start → on_loop_end
    ├─ loopctl.iteration              iteration.start → iteration.end (+ a restart after it)
    │  ├─ loopctl.agent               agent.start → agent.end
    │  └─ loopctl.tests               tests.start → tests.end (one more per re-run)
    └─ loopctl.iteration …

Every span starts and ends at the timestamps of the core's events, so phases show their real
durations. Times come from one clock: an end that no event gives (the run's, or an unfinished
span's at the end of the loop) is the recorder's "now", never earlier than the latest event
taken in, so no child span ever ends after its parent. Other events (restarts, context exhaustion, a classified failure, plugin errors)
become span events of the iteration they happened in, or of the run outside iterations.
Whatever is still open when the loop ends (an interrupt, an error, a plugin's stop in the
middle of a phase) is ended then, with an error status saying so.

Event data comes from the engine and from plugins: every field is read defensively (a missing
or odd field leaves its attribute out) and nothing here raises on bad data.
"""

from __future__ import annotations

import fnmatch
import math
import os
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loopctl_otel.attributes import AttributeValue, attribute_value, attributes, cut
from loopctl_otel.config import OtelConfig
from loopctl_otel.events import PREFIX
from loopctl_otel.peers import CONTEXT_USAGE
from loopctl_otel.pipeline import Pipeline

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from loopctl import Event, Loop, LoopOutcome

RUN_SPAN = "loopctl.run"
ITERATION_SPAN = "loopctl.iteration"
AGENT_SPAN = "loopctl.agent"
TESTS_SPAN = "loopctl.tests"
#: Where a run keeps its trace and span id (loop-state.md), so a resume can link to it.
TRACE_KEY = "otel.trace"
#: Bucket boundaries for the duration histograms, in seconds (agent turns take minutes).
DURATION_BUCKETS_S = (0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600)
#: Events the recorder turns into spans and attributes; never duplicated as span events.
STRUCTURAL = frozenset(
    {
        "loop.start",
        "loop.resume",
        "loop.end",
        "iteration.start",
        "iteration.end",
        "agent.start",
        "agent.end",
        "tests.start",
        "tests.end",
    }
)
TOKEN_KINDS = ("input", "output", "cache_read", "cache_creation")
#: Each token kind with the field of loopctl's usage that holds it.
_TOKEN_FIELDS = tuple(
    zip(
        TOKEN_KINDS,
        (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ),
        strict=True,
    )
)
#: Attributes of the agent span the iteration span carries too (the turn's numbers).
_ITERATION_COPIES = ("loopctl.tokens", "loopctl.cost", "loopctl.context", "loopctl.session_id")


# --- reading event data defensively ------------------------------------------------------------


def _int(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(data: Mapping[str, Any], key: str) -> float | None:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _str(data: Mapping[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) else None


def _bool(data: Mapping[str, Any], key: str) -> bool | None:
    value = data.get(key)
    return value if isinstance(value, bool) else None


def _ns(ts: object) -> int:
    """An event's ``ts`` (epoch seconds) in nanoseconds; now when it is unusable."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts) and ts > 0:
        try:
            return int(ts * 1_000_000_000)
        except (OverflowError, ValueError):
            pass
    return time.time_ns()


def _put(target: dict[str, AttributeValue], key: str, value: object) -> None:
    converted = attribute_value(value)
    if converted is not None:
        target[key] = converted


# --- metrics ------------------------------------------------------------------------------------


class Instruments:
    """The run's counters and histograms (see the docs' metric table)."""

    def __init__(self, meter: Any) -> None:
        self.runs = meter.create_counter("loopctl.runs", unit="{run}", description="Runs ended")
        self.iterations = meter.create_counter(
            "loopctl.iterations", unit="{iteration}", description="Iterations recorded"
        )
        self.restarts = meter.create_counter(
            "loopctl.restarts", unit="{restart}", description="Agent session restarts"
        )
        self.tokens = meter.create_counter(
            "loopctl.tokens", unit="{token}", description="Tokens the agent used, by kind"
        )
        self.cost = meter.create_counter(
            "loopctl.cost_usd", unit="USD", description="What the agent turns cost, as reported"
        )
        self.test_runs = meter.create_counter(
            "loopctl.test.runs", unit="{run}", description="Test command runs"
        )
        self.test_failures = meter.create_counter(
            "loopctl.test.failures", unit="{test}", description="Failing tests reported, summed"
        )
        self.iteration_duration = _histogram(meter, "loopctl.iteration.duration", "Iterations")
        self.agent_duration = _histogram(meter, "loopctl.agent.duration", "Agent turns")
        self.test_duration = _histogram(meter, "loopctl.test.duration", "Test command runs")


_instruments: weakref.WeakKeyDictionary[Any, Instruments] = weakref.WeakKeyDictionary()


def instruments_for(meter: Any) -> Instruments:
    """The instruments of ``meter``, made once: a host's provider outlives a run, and the SDK
    warns about every instrument created twice."""
    try:
        found = _instruments.get(meter)
    except TypeError:  # a meter that cannot be weakly referenced: no reuse
        return Instruments(meter)
    if found is None:
        found = _instruments[meter] = Instruments(meter)
    return found


def _histogram(meter: Any, name: str, what: str) -> Any:
    description = f"{what}: how long they took"
    try:  # bucket advice exists in newer APIs only; the SDK's default buckets suit milliseconds
        return meter.create_histogram(
            name,
            unit="s",
            description=description,
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS_S),
        )
    except TypeError:
        return meter.create_histogram(name, unit="s", description=description)


def _add(counter: Any, amount: float | None, attrs_: Mapping[str, AttributeValue]) -> None:
    """Counters take non-negative finite amounts only (anything else is left out)."""
    if amount is not None and math.isfinite(amount) and amount > 0:
        counter.add(amount, attributes=dict(attrs_))


def _record(histogram: Any, value: float | None, attrs_: Mapping[str, AttributeValue]) -> None:
    if value is not None and math.isfinite(value) and value >= 0:
        histogram.record(value, attributes=dict(attrs_))


# --- spans --------------------------------------------------------------------------------------


@attrs.define
class _Open:
    """A span still open, with what is known for its end."""

    span: Span
    context: Context
    #: When it ended according to the events (None: still in flight).
    end_ns: int | None = None
    number: int | None = None
    done_tests: int = 0


@attrs.define
class _Totals:
    tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = False


class Recorder:
    """One run's spans and metrics. Feed it every event (:meth:`handle`), then :meth:`finish`."""

    def __init__(
        self,
        pipeline: Pipeline,
        config: OtelConfig,
        loop: Loop | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        from opentelemetry import trace

        self._trace = trace
        self.pipeline = pipeline
        self.config = config
        self.loop = loop
        self._env = os.environ if env is None else env
        self.tracer = pipeline.tracer
        self.instruments = instruments_for(pipeline.meter) if pipeline.meter is not None else None
        self.run: _Open | None = None
        self.iteration: _Open | None = None
        self.agent: _Open | None = None
        self.tests: _Open | None = None
        self.metric_attributes: dict[str, AttributeValue] = {}
        self.totals = _Totals()
        self.finished = False
        #: The latest event time taken in (ns): the floor of :meth:`now`.
        self.latest_ns = 0
        self._include = list(config.span_events)
        self._exclude = list(config.exclude_events)

    # --- the clock -------------------------------------------------------------------------

    def stamp(self, event: Event) -> int:
        """``event``'s time in nanoseconds; every span time taken from an event goes through
        here, so :meth:`now` never falls behind it."""
        found = _ns(event.ts)
        if found > self.latest_ns:
            self.latest_ns = found
        return found

    def now(self) -> int:
        """The time of an end no event gives: the wall clock, but never before the latest event
        (event times are rounded to the millisecond, and may be up to half of one ahead)."""
        return max(time.time_ns(), self.latest_ns)

    # --- the run ---------------------------------------------------------------------------

    @property
    def trace_id(self) -> str | None:
        """The run's trace id (32 hex digits), once its span exists and is recorded."""
        if self.run is None:
            return None
        context = self.run.span.get_span_context()
        return f"{context.trace_id:032x}" if context.is_valid else None

    def _parent(self) -> Context:
        """The context the run span starts in: the host's current span when there is one,
        else a ``TRACEPARENT`` handed down by a CI job or a wrapper script, else a new trace."""
        from opentelemetry import context as otel_context

        current = otel_context.get_current()
        if self._trace.get_current_span(current).get_span_context().is_valid:
            return current
        carrier = {
            key: self._env[name]
            for key, name in (("traceparent", "TRACEPARENT"), ("tracestate", "TRACESTATE"))
            if self._env.get(name)
        }
        if carrier:
            from opentelemetry.trace.propagation.tracecontext import (
                TraceContextTextMapPropagator,
            )

            try:
                return TraceContextTextMapPropagator().extract(carrier, context=current)
            except Exception:  # noqa: BLE001 - a malformed TRACEPARENT: start a new trace
                return current
        return current

    def _links(self) -> list[Any]:
        """A resumed run links to the run it continues (its ids are kept in loop-state.md)."""
        if self.loop is None:
            return []
        try:
            previous = self.loop.get_value(TRACE_KEY)
            if not isinstance(previous, dict):
                return []
            trace_id = int(str(previous.get("trace_id")), 16)
            span_id = int(str(previous.get("span_id")), 16)
        except (ValueError, TypeError):
            return []
        if not (0 < trace_id < 2**128 and 0 < span_id < 2**64):
            return []
        from opentelemetry.trace import Link, SpanContext, TraceFlags

        context = SpanContext(
            trace_id, span_id, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
        )
        return [Link(context, {"loopctl.link": "previous run"})]

    def _start_run(self, event: Event) -> None:
        data = event.data
        attributes_: dict[str, AttributeValue] = {}
        goal = _str(data, "goal")
        if goal and self.config.goal_max_chars > 0:
            attributes_["loopctl.goal"] = cut(goal, self.config.goal_max_chars)
        for key in ("agent", "test_cmd", "session_mode"):
            _put(attributes_, f"loopctl.{key}", _str(data, key))
        _put(attributes_, "loopctl.max_iterations", _int(data, "max_iterations"))
        _put(attributes_, "loopctl.plugins", data.get("plugins"))
        attributes_["loopctl.resumed"] = event.type == "loop.resume"
        for key in ("agent", "session_mode"):
            value = _str(data, key)
            if value:
                self.metric_attributes[f"loopctl.{key}"] = value
        if self.tracer is None:
            return
        span = self.tracer.start_span(
            RUN_SPAN,
            context=self._parent(),
            kind=self._trace.SpanKind.INTERNAL,
            attributes=attributes_,
            links=self._links(),
            start_time=self.stamp(event),
        )
        self.run = _Open(span, self._trace.set_span_in_context(span))
        context = span.get_span_context()
        if self.loop is not None and context.is_valid:
            self.loop.set_value(
                TRACE_KEY,
                {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"},
            )

    def _ensure_run(self, event: Event) -> _Open | None:
        if self.run is None and self.tracer is not None and not self.finished:
            from loopctl import Event as EventClass

            self._start_run(EventClass(type="loop.start", ts=event.ts, data={}))
        return self.run

    # --- dispatch ----------------------------------------------------------------------------

    def handle(self, event: Event) -> None:
        """Take one event into the trace and metrics."""
        kind = event.type
        if self.finished or not isinstance(kind, str) or kind.startswith(PREFIX):
            return
        data = event.data if isinstance(event.data, Mapping) else {}
        handler = _HANDLERS.get(kind)
        if handler is not None:
            handler(self, event, data)
            return
        if CONTEXT_USAGE is not None and kind == CONTEXT_USAGE:
            self._context_usage(data)
        if kind not in STRUCTURAL and self._wanted(kind):
            self._span_event(event, kind, data)

    def _wanted(self, kind: str) -> bool:
        return any(fnmatch.fnmatchcase(kind, p) for p in self._include) and not any(
            fnmatch.fnmatchcase(kind, p) for p in self._exclude
        )

    def _host(self) -> _Open | None:
        """The span other events attach to: the current iteration, else the run."""
        return self.iteration or self.run

    def _span_event(self, event: Event, kind: str, data: Mapping[str, Any]) -> None:
        host = self._host() or self._ensure_run(event)
        if host is None:
            return
        stamp = self.stamp(event)
        host.span.add_event(kind, attributes=attributes(data), timestamp=stamp)
        if host.end_ns is not None:  # a restart after the iteration: the span covers it
            host.end_ns = max(host.end_ns, stamp)

    # --- iterations --------------------------------------------------------------------------

    def _close_iteration(self, at_ns: int | None = None, *, why: str | None = None) -> None:
        """End the current iteration span: where its events said it ended, or at ``at_ns``
        with an error status (``why``) when it never got to its end."""
        current, self.iteration = self.iteration, None
        if current is None:
            return
        self._close_phases(at_ns, why=why)
        if current.end_ns is None:
            self._fail(current.span, why or "the iteration did not finish")
            current.span.set_attribute("loopctl.iteration.decision", "unfinished")
            current.span.end(end_time=at_ns or self.now())
        else:
            current.span.end(end_time=current.end_ns)

    def _close_phases(self, at_ns: int | None, *, why: str | None) -> None:
        for name in ("agent", "tests"):
            phase = getattr(self, name)
            if phase is not None:
                setattr(self, name, None)
                self._fail(phase.span, why or "the phase did not finish")
                phase.span.end(end_time=at_ns or self.now())

    def _fail(self, span: Span, description: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, cut(description, 300)))

    def _iteration_start(self, event: Event, data: Mapping[str, Any]) -> None:
        stamp = self.stamp(event)
        if self.iteration is not None and self.iteration.end_ns is None:
            # The same number again: the attempt was waited out (a rate limit) and is retried.
            self.iteration.span.set_attribute("loopctl.iteration.retried", True)
            self._close_iteration(stamp, why="the iteration was abandoned and tried again")
        else:
            self._close_iteration()
        run = self._ensure_run(event)
        if run is None or self.tracer is None:
            return
        attributes_: dict[str, AttributeValue] = {}
        number = event.iteration if isinstance(event.iteration, int) else None
        _put(attributes_, "loopctl.iteration", number)
        _put(attributes_, "loopctl.restarts", _int(data, "restarts"))
        _put(attributes_, "loopctl.session_id", _str(data, "session_id"))
        span = self.tracer.start_span(
            ITERATION_SPAN, context=run.context, attributes=attributes_, start_time=stamp
        )
        self.iteration = _Open(span, self._trace.set_span_in_context(span), number=number)

    def _iteration_end(self, event: Event, data: Mapping[str, Any]) -> None:
        self._close_phases(self.stamp(event), why="the iteration ended before the phase did")
        passed = _bool(data, "tests_passed")
        failing = _int(data, "failing")
        duration = _num(data, "duration_s")
        decision = _str(data, "decision")
        metric_attrs = dict(self.metric_attributes)
        _put(metric_attrs, "loopctl.tests.passed", passed)
        _put(metric_attrs, "loopctl.iteration.decision", decision)
        if self.instruments is not None:
            self.instruments.iterations.add(1, attributes=metric_attrs)
            _record(self.instruments.iteration_duration, duration, metric_attrs)
        current = self.iteration
        if current is None:
            return
        span = current.span
        values: dict[str, AttributeValue] = {}
        _put(values, "loopctl.tests.passed", passed)
        _put(values, "loopctl.tests.failing", failing)
        _put(values, "loopctl.iteration.decision", decision)
        _put(values, "loopctl.iteration.reason", _str(data, "reason") or None)
        _put(values, "loopctl.iteration.duration_s", duration)
        _put(values, "loopctl.error_fingerprint", _str(data, "error_fingerprint") or None)
        values.update(self._record_attributes(current.number))
        span.set_attributes(values)
        current.end_ns = self.stamp(event)

    def _record_attributes(self, number: int | None) -> dict[str, AttributeValue]:
        """What only the iteration record holds: changed files and plugins' annotations."""
        values: dict[str, AttributeValue] = {}
        record = None
        if self.loop is not None:
            try:
                record = self.loop.last_record
            except Exception:  # noqa: BLE001 - a loop without history: nothing to add
                record = None
        if record is None or (number is not None and record.iteration != number):
            return values
        values["loopctl.changed_files"] = len(record.changed_files)
        _put(values, "loopctl.commit", record.commit)
        _put(values, "loopctl.tests.error_count", record.error_count)
        annotations = record.annotations if isinstance(record.annotations, dict) else {}
        for key, value in list(annotations.items())[:20]:
            _put(values, f"loopctl.annotation.{key}", value)
        return values

    # --- phases ------------------------------------------------------------------------------

    def _start_phase(
        self, name: str, event: Event, attributes_: dict[str, AttributeValue]
    ) -> _Open | None:
        parent = self._host() or self._ensure_run(event)
        if parent is None or self.tracer is None:
            return None
        span = self.tracer.start_span(
            name, context=parent.context, attributes=attributes_, start_time=self.stamp(event)
        )
        return _Open(span, self._trace.set_span_in_context(span))

    def _agent_start(self, event: Event, data: Mapping[str, Any]) -> None:
        if self.agent is not None:
            self._fail(self.agent.span, "a new agent turn started before this one ended")
            self.agent.span.end(end_time=self.stamp(event))
        values: dict[str, AttributeValue] = {}
        _put(values, "loopctl.agent", _str(data, "agent"))
        _put(values, "loopctl.prompt.chars", _int(data, "prompt_chars"))
        trimmed = data.get("trimmed")
        if isinstance(trimmed, list) and trimmed:
            _put(values, "loopctl.prompt.trimmed", trimmed)
        self.agent = self._start_phase(AGENT_SPAN, event, values)

    def _agent_end(self, event: Event, data: Mapping[str, Any]) -> None:
        values: dict[str, AttributeValue] = {}
        outcome = _str(data, "outcome")
        error_kind = _str(data, "error_kind")
        duration = _num(data, "duration_s")
        tokens = _int(data, "tokens")
        cost = _num(data, "cost_usd")
        context_tokens = _int(data, "context_tokens")
        window = _int(data, "context_window")
        _put(values, "loopctl.agent.outcome", outcome)
        _put(values, "loopctl.agent.error_kind", error_kind)
        _put(values, "loopctl.agent.duration_s", duration)
        _put(values, "loopctl.agent.tool_calls", _int(data, "tool_calls"))
        _put(values, "loopctl.agent.interrupted", _bool(data, "interrupted"))
        _put(values, "loopctl.tokens.total", tokens)
        _put(values, "loopctl.cost_usd", cost)
        _put(values, "loopctl.context.tokens", context_tokens)
        _put(values, "loopctl.context.window", window)
        if context_tokens is not None and window:
            values["loopctl.context.percent"] = round(100.0 * context_tokens / window, 1)
        usage = self._turn_usage(data)
        values.update(usage)
        model = self._turn_fact("model")
        if model:
            values["gen_ai.request.model"] = model
        session = self._turn_fact("session_id")
        if session:
            values["loopctl.session_id"] = session
        if "loopctl.tokens.input" in usage:
            values["gen_ai.usage.input_tokens"] = usage["loopctl.tokens.input"]
            values["gen_ai.usage.output_tokens"] = usage["loopctl.tokens.output"]
        self.totals.tokens += tokens or 0
        if cost is not None:
            self.totals.cost_usd += cost
            self.totals.cost_known = True
        self._agent_metrics(outcome, duration, tokens, cost, usage)
        if self.iteration is not None:  # the iteration span carries the turn's numbers too
            self.iteration.span.set_attributes(
                {k: v for k, v in values.items() if k.startswith(_ITERATION_COPIES)}
            )
            if outcome == "error":
                self._fail(self.iteration.span, f"the agent failed: {error_kind or 'error'}")
        phase, self.agent = self.agent, None
        if phase is None:
            return
        phase.span.set_attributes(values)
        if outcome == "error":
            message = _str(data, "message") or ""
            self._fail(phase.span, f"{error_kind or 'error'}: {message}".rstrip(": "))
        phase.span.end(end_time=self.stamp(event))

    def _turn_usage(self, data: Mapping[str, Any]) -> dict[str, AttributeValue]:
        """The turn's tokens by kind: the event's ``usage`` (null: the agent reported none),
        or ``loop.last_turn`` under a loopctl whose ``agent.end`` carries only the total."""
        if "usage" in data:
            reported = data["usage"]
            counts = dict(reported) if isinstance(reported, Mapping) else {}
        else:
            turn = None
            if self.loop is not None:
                try:
                    turn = self.loop.last_turn
                except Exception:  # noqa: BLE001 - no turn: the total from the event is all
                    turn = None
            usage = getattr(turn, "usage", None)
            counts = {field: getattr(usage, field, None) for _, field in _TOKEN_FIELDS}
        found: dict[str, AttributeValue] = {}
        for kind, field in _TOKEN_FIELDS:
            value = counts.get(field)
            if isinstance(value, int) and not isinstance(value, bool):
                found[f"loopctl.tokens.{kind}"] = value
        return found

    def _turn_fact(self, name: str) -> str | None:
        """A text fact of ``loop.last_turn`` (``model``, ``session_id``), when known."""
        if self.loop is None:
            return None
        try:
            value = getattr(self.loop.last_turn, name, None)
        except Exception:  # noqa: BLE001 - no turn: the fact is unknown
            return None
        return cut(value) if isinstance(value, str) and value else None

    def _agent_metrics(
        self,
        outcome: str | None,
        duration: float | None,
        tokens: int | None,
        cost: float | None,
        usage: Mapping[str, AttributeValue],
    ) -> None:
        instruments = self.instruments
        if instruments is None:
            return
        base = dict(self.metric_attributes)
        phase = dict(base)
        _put(phase, "loopctl.agent.outcome", outcome)
        _record(instruments.agent_duration, duration, phase)
        if usage:
            for kind in TOKEN_KINDS:
                value = usage.get(f"loopctl.tokens.{kind}")
                if isinstance(value, int):
                    _add(instruments.tokens, value, {**base, "loopctl.token.kind": kind})
        elif tokens:
            _add(instruments.tokens, tokens, {**base, "loopctl.token.kind": "total"})
        _add(instruments.cost, cost, base)

    def _tests_start(self, event: Event, data: Mapping[str, Any]) -> None:
        if self.tests is not None:
            self._fail(self.tests.span, "a new test run started before this one ended")
            self.tests.span.end(end_time=self.stamp(event))
        values: dict[str, AttributeValue] = {}
        _put(values, "loopctl.tests.command", _str(data, "command"))
        label = _str(data, "label")
        if label is not None:  # a plugin's re-run, named by the plugin
            values["loopctl.tests.rerun"] = True
            values["loopctl.tests.label"] = label
        elif self.iteration is not None and self.iteration.done_tests:  # an older core
            values["loopctl.tests.rerun"] = True
        self.tests = self._start_phase(TESTS_SPAN, event, values)

    def _tests_end(self, event: Event, data: Mapping[str, Any]) -> None:
        passed = _bool(data, "passed")
        exit_code = data.get("exit_code")
        timed_out = _bool(data, "timed_out")
        failing = _int(data, "failing")
        duration = _num(data, "duration_s")
        if self.instruments is not None:
            attrs_ = dict(self.metric_attributes)
            _put(attrs_, "loopctl.tests.passed", passed)
            self.instruments.test_runs.add(1, attributes=attrs_)
            _record(self.instruments.test_duration, duration, attrs_)
            _add(self.instruments.test_failures, failing, self.metric_attributes)
        if self.iteration is not None:
            self.iteration.done_tests += 1
        phase, self.tests = self.tests, None
        if phase is None:
            return
        values: dict[str, AttributeValue] = {}
        _put(values, "loopctl.tests.passed", passed)
        _put(values, "loopctl.tests.exit_code", _int(data, "exit_code"))
        _put(values, "loopctl.tests.timed_out", timed_out)
        _put(values, "loopctl.tests.failing", failing)
        failing_tests = data.get("failing_tests")
        if isinstance(failing_tests, list) and failing_tests:
            _put(values, "loopctl.tests.failing_tests", failing_tests)
        _put(values, "loopctl.tests.error_count", _int(data, "error_count"))
        _put(values, "loopctl.tests.runner", _str(data, "runner"))
        _put(values, "loopctl.tests.duration_s", duration)
        phase.span.set_attributes(values)
        if timed_out:
            self._fail(phase.span, "the test command timed out")
        elif "exit_code" in data and exit_code is None:
            self._fail(phase.span, "the test command could not run")
        phase.span.end(end_time=self.stamp(event))

    # --- restarts and other events -----------------------------------------------------------

    def _restart(self, event: Event, data: Mapping[str, Any]) -> None:
        if self.instruments is not None:
            attrs_ = dict(self.metric_attributes)
            _put(attrs_, "loopctl.restart.reason", _str(data, "reason"))
            self.instruments.restarts.add(1, attributes=attrs_)
        host = self._host() or self._ensure_run(event)
        if host is None:
            return
        values: dict[str, AttributeValue] = {}
        _put(values, "loopctl.restart.number", _int(data, "number"))
        _put(values, "loopctl.restart.reason", _str(data, "reason"))
        _put(values, "loopctl.restart.message", _str(data, "message"))
        stamp = self.stamp(event)
        host.span.add_event("loopctl.restart", attributes=values, timestamp=stamp)
        if host.end_ns is not None:
            host.end_ns = max(host.end_ns, stamp)

    def _context_usage(self, data: Mapping[str, Any]) -> None:
        """The context monitor's per-iteration reading, when it is there (more precise)."""
        if self.iteration is None or _bool(data, "known") is False:
            return
        percent = _num(data, "percent")
        if percent is not None and _str(data, "source") in (None, "iteration"):
            self.iteration.span.set_attribute("loopctl.context.percent", round(percent, 1))

    def _warning(self, event: Event, data: Mapping[str, Any]) -> None:
        """Config and state warnings: events of the run (they concern it, not an iteration)."""
        host = self.run or self._ensure_run(event)
        if host is not None:
            host.span.add_event(
                event.type, attributes=attributes(data), timestamp=self.stamp(event)
            )

    # --- the end -----------------------------------------------------------------------------

    def finish(self, outcome: LoopOutcome | None) -> None:
        """End every span (unfinished ones with an error status), record the run's metrics."""
        if self.finished:
            return
        now = self.now()
        status = getattr(outcome, "status", None) or "unknown"
        message = getattr(outcome, "message", "") or ""
        why = f"the loop ended ({status}) before this finished"
        if message and status != "complete":
            why += f": {message}"
        self._close_iteration(now, why=why)
        self._close_phases(now, why=why)
        if self.instruments is not None:
            attrs_ = {**self.metric_attributes, "loopctl.status": str(status)}
            self.instruments.runs.add(1, attributes=attrs_)
        run = self.run
        if run is not None:
            values: dict[str, AttributeValue] = {"loopctl.status": str(status)}
            _put(values, "loopctl.reason", getattr(outcome, "reason", None) or None)
            _put(values, "loopctl.message", message or None)
            _put(values, "loopctl.exit_code", getattr(outcome, "exit_code", None))
            _put(values, "loopctl.iterations", getattr(outcome, "iterations", None))
            _put(values, "loopctl.restarts", getattr(outcome, "restarts", None))
            values["loopctl.tokens.total"] = self.totals.tokens
            if self.totals.cost_known:
                values["loopctl.cost_usd"] = round(self.totals.cost_usd, 6)
            run.span.set_attributes(values)
            if status != "complete":
                self._fail(run.span, f"{status}: {message}" if message else str(status))
            run.span.end(end_time=now)
        self.finished = True


def _start(recorder: Recorder, event: Event, data: Mapping[str, Any]) -> None:
    if recorder.run is None:
        recorder._start_run(event)


_HANDLERS: dict[str, Any] = {
    "loop.start": _start,
    "loop.resume": _start,
    "loop.warning": Recorder._warning,
    "iteration.start": Recorder._iteration_start,
    "iteration.end": Recorder._iteration_end,
    "agent.start": Recorder._agent_start,
    "agent.end": Recorder._agent_end,
    "tests.start": Recorder._tests_start,
    "tests.end": Recorder._tests_end,
    "loop.restart": Recorder._restart,
}
