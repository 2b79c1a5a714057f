"""The fuel gauge: the fill of the latest main-thread request, against the right window."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import AgentMessage, MessageKind, ToolCall, Usage
from loopctl_context_monitor import gauge as g
from loopctl_context_monitor.gauge import Gauge, Reading, threshold_tokens, window_lookup


def used(tokens: int, window: int | None = 200_000, **fields: Any) -> AgentMessage:
    return AgentMessage(
        kind=MessageKind.USAGE, usage=Usage(input_tokens=tokens), context_window=window, **fields
    )


def fresh(**kwargs: Any) -> Gauge:
    return Gauge(warn=0.7, hard=0.9, **kwargs)


@pytest.mark.parametrize(
    ("tokens", "warned"),
    [(139_999, False), (140_000, True), (140_001, True), (1, False), (200_000, True)],
)
def test_warn_threshold_boundary_is_inclusive(tokens: int, warned: bool) -> None:
    gauge = fresh()
    flags = gauge.observe(used(tokens))
    assert bool(flags & g.WARN) is warned
    assert gauge.warned is warned


@pytest.mark.parametrize(("tokens", "hard"), [(179_999, False), (180_000, True)])
def test_hard_threshold_boundary_is_inclusive(tokens: int, hard: bool) -> None:
    flags = fresh().observe(used(tokens))
    assert bool(flags & g.HARD) is hard


@pytest.mark.parametrize("window", [3, 7, 10, 99, 1_000, 128_000, 200_000, 1_000_000, 1_048_576])
@pytest.mark.parametrize("fraction", [0.5, 0.7, 0.75, 0.8, 0.9, 0.95, 1.0])
def test_threshold_tokens_is_the_smallest_count_at_or_over_the_fraction(
    window: int, fraction: float
) -> None:
    limit = threshold_tokens(fraction, window)
    # exact rational arithmetic: limit/window >= fraction > (limit-1)/window
    from fractions import Fraction

    exact = Fraction(str(fraction))
    assert Fraction(limit, window) >= exact or limit == 1
    assert Fraction(limit - 1, window) < exact


def test_zero_tokens_and_missing_usage_are_no_measurement() -> None:
    gauge = fresh()
    assert gauge.observe(used(0)) == g.NOTHING
    assert gauge.observe(AgentMessage(kind=MessageKind.TEXT, text="hi")) == g.NOTHING
    assert gauge.reading == Reading(None, None)
    assert gauge.reading.percent is None
    assert gauge.reading.describe().startswith("unknown")


def test_window_zero_or_unknown_never_divides_and_never_warns() -> None:
    gauge = fresh()  # no override, no model table
    flags = gauge.observe(used(190_000, window=0))
    assert flags == g.FIRST | g.CHANGED
    assert gauge.reading == Reading(190_000, None)
    assert gauge.reading.known is False
    assert gauge.reading.percent is None
    assert not gauge.warned
    assert "window unknown" in gauge.reading.describe()


def test_the_fill_is_the_latest_request_never_a_sum() -> None:
    gauge = fresh()
    for tokens in (50_000, 60_000, 55_000):  # a compaction can make it drop
        gauge.observe(used(tokens))
    assert gauge.tokens == 55_000
    assert gauge.baseline == 50_000


def test_sidechain_requests_do_not_count() -> None:
    gauge = fresh()
    gauge.observe(used(30_000))
    assert gauge.observe(used(190_000, sidechain=True)) == g.NOTHING
    assert gauge.tokens == 30_000
    assert not gauge.warned


def test_cache_and_output_tokens_count_toward_the_fill() -> None:
    gauge = fresh()
    usage = Usage(
        input_tokens=100,
        output_tokens=900,
        cache_creation_input_tokens=39_000,
        cache_read_input_tokens=100_000,
    )
    flags = gauge.observe(AgentMessage(kind=MessageKind.USAGE, usage=usage, context_window=200_000))
    assert gauge.tokens == 140_000
    assert flags & g.WARN


def loopctl_windows(model: str) -> int | None:
    """Stands in for ``loop.context_window``: loopctl's ``[models]`` over its built-in table."""
    return {"my-model": 50_000, "claude-sonnet-4-5": 200_000}.get(model)


def test_window_precedence_override_then_reported_then_model_table() -> None:
    table = window_lookup({"plugin-model": 20_000}, loopctl_windows)
    gauge = Gauge(warn=0.7, hard=0.9, window_for_model=table, model="my-model")
    gauge.observe(used(10_000, window=None))
    assert gauge.window == 50_000  # loopctl's [models]
    gauge.observe(AgentMessage(kind=MessageKind.INIT, model="plugin-model"))
    gauge.observe(used(10_000, window=None))
    assert gauge.window == 20_000  # the plugin's own models table
    gauge.observe(AgentMessage(kind=MessageKind.INIT, model="claude-sonnet-4-5"))
    gauge.observe(used(10_000, window=None))
    assert gauge.window == 200_000  # the built-in table, through loopctl
    gauge.observe(used(10_000, window=1_000_000))
    assert gauge.window == 1_000_000  # what the agent reports wins over tables
    overridden = Gauge(warn=0.7, hard=0.9, override=100_000, window_for_model=table)
    overridden.observe(used(70_000, window=1_000_000))
    assert overridden.window == 100_000
    assert overridden.warned


def test_the_plugins_models_table_wins_and_matches_names_like_loopctls() -> None:
    asked: list[str] = []

    def loopctl(model: str) -> int | None:
        asked.append(model)
        return 999

    lookup = window_lookup(
        {"Acme-Large": 300_000, "acme": 100_000, "acme-large-v2": 400_000}, loopctl
    )
    assert lookup("acme-large") == 300_000  # exact, case ignored
    assert lookup("openrouter/acme/acme-large") == 300_000  # the provider path ignored
    assert lookup("acme-large-v2") == 400_000
    assert lookup("acme-large-2025") == 300_000  # the longest prefix
    assert lookup("acme-small") == 100_000
    assert asked == []  # the plugin's own table answered: loopctl was not asked
    assert lookup("other-model") == 999
    assert asked == ["other-model"]
    assert lookup(None) is None
    assert lookup("  ") is None
    assert asked == ["other-model"]  # no model, no lookup


def test_a_new_session_starts_empty_and_warns_again() -> None:
    gauge = fresh()
    assert gauge.observe(used(150_000)) & g.WARN
    assert not gauge.observe(used(160_000)) & g.WARN  # once per session
    gauge.new_session()
    assert gauge.tokens is None
    assert gauge.observe(used(10_000)) & g.FIRST
    assert gauge.observe(used(150_000)) & g.WARN


def test_changed_only_when_the_whole_percent_moves() -> None:
    gauge = fresh()
    assert gauge.observe(used(100_000)) & g.CHANGED
    assert not gauge.observe(used(100_500)) & g.CHANGED  # still 50%
    assert gauge.observe(used(102_000)) & g.CHANGED  # 51%


def test_restore_carries_a_resumed_sessions_fill() -> None:
    gauge = fresh()
    gauge.restore("s1", 150_000, 200_000)
    assert gauge.reading == Reading(150_000, 200_000)
    assert gauge.warned  # not warned again for the same session
    assert gauge.observe(used(155_000)) & g.WARN == 0


def test_a_broken_model_table_means_unknown() -> None:
    def broken(model: str | None) -> int | None:
        raise RuntimeError("bad table")

    gauge = Gauge(warn=0.7, hard=0.9, window_for_model=broken)
    gauge.observe(used(100, window=None))
    assert gauge.window is None


messages = st.builds(
    AgentMessage,
    kind=st.sampled_from(list(MessageKind)),
    text=st.none() | st.text(max_size=20),
    tool_call=st.none() | st.builds(ToolCall, name=st.text(max_size=10)),
    usage=st.none()
    | st.builds(
        Usage,
        input_tokens=st.integers(0, 2_000_000),
        output_tokens=st.integers(0, 100_000),
        cache_creation_input_tokens=st.integers(0, 500_000),
        cache_read_input_tokens=st.integers(0, 2_000_000),
    ),
    session_id=st.none() | st.text(max_size=8),
    model=st.none() | st.sampled_from(["claude-sonnet-4-5", "gpt-5", "unknown-model", ""]),
    context_window=st.none() | st.integers(-5, 2_000_000),
    sidechain=st.booleans(),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, max_size=20), st.integers(1, 2_000_000) | st.none())
def test_any_message_stream_gives_a_consistent_gauge(
    stream: list[AgentMessage], override: int | None
) -> None:
    gauge = Gauge(
        warn=0.7,
        hard=0.9,
        override=override,
        window_for_model=window_lookup({}, loopctl_windows),
    )
    warns = hards = 0
    for message in stream:
        flags = gauge.observe(message)
        warns += bool(flags & g.WARN)
        hards += bool(flags & g.HARD)
    assert warns <= 1
    assert hards <= 1
    counted = [
        m.usage.context_tokens
        for m in stream
        if m.usage is not None
        and not m.sidechain
        and m.kind is not MessageKind.INIT
        and m.usage.context_tokens > 0
    ]
    assert gauge.tokens == (counted[-1] if counted else None)
    reading = gauge.reading
    if reading.known:
        exact = 100 * (reading.tokens or 0) / (reading.window or 1)
        assert reading.percent == pytest.approx(exact, abs=0.05 + 1e-9)  # one decimal place
        if reading.fraction is not None and reading.fraction >= 0.7:
            assert gauge.warned
    else:
        assert reading.percent is None  # unknown is never reported as 0
