"""What people and scripts see while a loop runs: describe(), the plain, JSON and live views."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import loopctl.engine
from loopctl.model import Event
from loopctl.view import JsonView, LiveView, PlainView, choose_mode, describe

ANSI = re.compile(r"\x1b")
STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] \S")


def engine_event_types() -> set[str]:
    """Every event type the engine emits, read from its source (``emit("x.y", …)``)."""
    source = Path(loopctl.engine.__file__).read_text(encoding="utf-8")
    types: set[str] = set()
    for match in re.finditer(r"\bemit\(", source):
        first_argument = re.split(r",|\)", source[match.end() : match.end() + 200], maxsplit=1)[0]
        types.update(re.findall(r'"([a-z_]+\.[a-z_]+)"', first_argument))
    return types


#: Realistic data for each engine event, as the engine fills it in.
SAMPLES: dict[str, dict[str, Any]] = {
    "loop.start": {
        "goal": "fix add",
        "agent": "scripted",
        "test_cmd": "pytest -q",
        "session_mode": "fresh",
        "max_iterations": 20,
        "plugins": ["builtin"],
    },
    "loop.resume": {"agent": "claude", "test_cmd": "pytest -q", "max_iterations": 8},
    "loop.warning": {"message": "environment variable LOOPCTL_BOGUS is not a setting"},
    "iteration.start": {"restarts": 1, "session_id": None},
    "agent.start": {"agent": "claude", "prompt_chars": 1834, "trimmed": True},
    "agent.end": {
        "outcome": "ok",
        "error_kind": None,
        "message": "",
        "tokens": 15200,
        "context_tokens": 50000,
        "context_window": 200000,
        "cost_usd": 0.12,
        "tool_calls": 7,
        "duration_s": 12.345,
        "interrupted": False,
    },
    "agent.turn_stopped": {"reason": "context_exhaustion", "message": "context 91% full"},
    "agent.rate_limit_wait": {"seconds": 30.0, "until": "12:00:30", "message": "429 slow down"},
    "agent.rate_limit_waiting": {"seconds_left": 12},
    "tests.start": {"command": "pytest -q"},
    "tests.flaky": {
        "command": "pytest -q",
        "failing_tests": ["test_up.py::test_fetch"],
        "error_lines": ["TimeoutError: upstream did not answer"],
    },
    "tests.end": {
        "command": "pytest -q",
        "passed": False,
        "exit_code": 1,
        "timed_out": False,
        "failing": 2,
        "failing_tests": ["t::a", "t::b"],
        "error_count": 5,
        "runner": "pytest",
        "duration_s": 0.52,
    },
    "iteration.end": {
        "tests_passed": False,
        "failing": 2,
        "error_fingerprint": "abc",
        "decision": "restart",
        "reason": "stuck",
        "duration_s": 3.2,
    },
    "loop.completion_vetoed": {"reason": "flaky-detector: passed once in three runs"},
    "loop.completion_signal_missing": {"signal": "LOOPCTL_DONE"},
    "loop.stuck": {"escalation": "nudge", "streak": 3, "fingerprint": "abc"},
    "loop.not_agents_fault": {"reason": "flaky test t::a", "source": "failure-classifier"},
    "loop.original_goal_restored": {"source": "goal-guard", "previous_chars": 10, "chars": 20},
    "loop.failed_approach": {
        "text": "iterations 1-3 kept failing with: KeyError",
        "source": "engine",
    },
    "loop.working_goal_set": {"source": "goal-notes", "chars": 120},
    "loop.iteration_budget_reduced": {
        "max_iterations": 6,
        "reason": "no progress",
        "source": "failure-classifier",
    },
    "loop.restart": {"number": 1, "reason": "stuck", "message": "same failure", "archive": "/x"},
    "loop.end": {
        "status": "max_iterations",
        "reason": "max_iterations",
        "message": "reached the iteration limit (20) without meeting the goal",
        "exit_code": 10,
        "iterations": 20,
        "restarts": 1,
    },
    "state.write_error": {"error": "progress.md: No space left on device"},
    "plugin.error": {
        "plugin": "broken",
        "hook": "after_iteration",
        "error": "ValueError: nope",
        "traceback": "Traceback (most recent call last): …",
    },
    "plugin.hung": {
        "plugin": "sleepy",
        "hook": "on_loop_start",
        "running_s": 2.5,
        "wall_clock_s": 2.0,
    },
}


def event(type: str, iteration: int | None = 3, **data: Any) -> Event:
    return Event(type=type, ts=1_700_000_000.0, data=dict(data), iteration=iteration)


def test_the_engine_event_list_is_read_correctly() -> None:
    types = engine_event_types()
    assert {"loop.start", "loop.resume", "iteration.end", "loop.end", "plugin.error"} <= types
    assert len(types) >= 18


@pytest.mark.parametrize("type", sorted(engine_event_types()))
def test_every_engine_event_has_a_readable_line(type: str) -> None:
    assert type in SAMPLES, f"add sample data for the new engine event {type!r}"
    line = describe(event(type, **SAMPLES[type]))
    # a dedicated description, not the generic `type: key=value` fallback
    assert not line.startswith(type)
    assert "None" not in line
    assert "\n" not in line
    # the same holds when the data is missing entirely
    bare = describe(event(type, iteration=None))
    assert not bare.startswith(type)
    assert "None" not in bare


def test_a_limit_of_one_iteration_is_singular() -> None:
    start = {**SAMPLES["loop.start"], "max_iterations": 1}
    assert describe(event("loop.start", **start)).endswith("up to 1 iteration")
    assert describe(event("loop.start", **SAMPLES["loop.start"])).endswith("up to 20 iterations")


def test_descriptions_carry_the_facts() -> None:
    assert describe(event("tests.end", **SAMPLES["tests.end"])) == (
        "tests failed (exit 1, 2 failing, 5 error lines)"
    )
    agent = describe(event("agent.end", **SAMPLES["agent.end"]))
    assert "12.3 s" in agent
    assert "7 tool calls" in agent
    assert "15,200 tokens" in agent
    assert "context 50,000/200,000 (25%)" in agent
    failed = describe(
        event("agent.end", outcome="error", error_kind="auth", message="please log in", tokens=None)
    )
    assert "failed (auth: please log in)" in failed
    assert "tokens unknown" in failed
    end = describe(event("loop.end", **SAMPLES["loop.end"]))
    assert end.startswith("loop ended: max_iterations — reached the iteration limit")
    assert end.endswith("(exit code 10)")
    assert describe(event("iteration.end", **SAMPLES["iteration.end"])) == (
        "iteration 3 done → restart (stuck)"
    )
    assert describe(event("loop.stuck", **SAMPLES["loop.stuck"])) == (
        "stuck: the same failure 3 times in a row → telling the agent to try something else"
    )
    plugin = describe(event("plugin.error", **SAMPLES["plugin.error"]))
    assert "broken" in plugin
    assert "after_iteration" in plugin
    assert "Traceback" not in plugin


def test_unknown_events_fall_back_to_their_data_in_words() -> None:
    line = describe(event("context_monitor.snapshot", percent=81, files=["a.py"]))
    assert line == "context_monitor.snapshot (percent 81; files a.py)"
    assert describe(event("x.bare")) == "x.bare"
    # the line the issue quoted: a list of objects cut mid-repr, and an empty field as `limit=`
    line = describe(
        event(
            "x.classified",
            mode="dependency_issue",
            limit=None,
            ok=True,
            candidates=[{"mode": "a", "confidence": 0.5}] * 4,
            tests=[f"t{n}" for n in range(5)],
            evidence="word " * 100,
        )
    )
    assert line.startswith("x.classified (mode dependency_issue; ok yes; candidates 4 items; ")
    assert "tests t0, t1, t2 and 2 more" in line
    assert "limit" not in line
    assert not set("{[=") & set(line)


def test_a_plugins_event_reads_as_the_summary_its_data_carries() -> None:
    from loopctl.view import SUMMARY_FIELD, use_event_lines

    assert SUMMARY_FIELD == "summary"
    line = describe(event("x.verdict", mode="m", summary="failure classified\x1b[2J as m"))
    assert line == "failure classified as m"  # sanitised like every line
    assert describe(event("x.verdict", mode="m", summary="")) == ""  # an empty one hides it
    assert describe(event("x.verdict", mode="m", summary=3)) == "x.verdict (mode m; summary 3)"
    # a declared template comes first; a core event's own line is never replaced
    use_event_lines({"x.templated": "templated {mode}"})
    assert describe(event("x.templated", mode="m", summary="s")) == "templated m"
    assert describe(event("tests.start", command="pytest", summary="s")) == "running tests: pytest"


@settings(max_examples=100, deadline=None)
@given(
    type=st.sampled_from([*SAMPLES, "plugin.custom", "\x1b[31mevil\nline"]),
    data=st.dictionaries(
        st.text(max_size=8),
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(),
            st.text(),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
        ),
        max_size=6,
    ),
    iteration=st.one_of(st.none(), st.integers()),
)
def test_describe_never_raises_and_stays_one_clean_line(
    type: str, data: dict[str, object], iteration: int | None
) -> None:
    line = describe(Event(type=type, ts=0.0, data=data, iteration=iteration))
    assert isinstance(line, str)
    assert line
    assert len(line.splitlines()) == 1
    assert not ANSI.search(line)
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line)


def run_events() -> list[Event]:
    names = [
        "loop.start",
        "iteration.start",
        "agent.start",
        "agent.end",
        "tests.start",
        "tests.end",
        "agent.rate_limit_waiting",
        "iteration.end",
        "loop.end",
    ]
    events = [event(name, **SAMPLES[name]) for name in names]
    # test output often carries colour codes; they must not reach a log file
    events.append(event("loop.warning", message="\x1b[31mFAILED\x1b[0m test_x\r\n[bold]x[/]"))
    return events


def test_plain_view_prints_one_stamped_line_per_event_and_no_escape_codes() -> None:
    out = io.StringIO()
    view = PlainView(out)
    for item in run_events():
        view(item)
    view.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == len(run_events()) - 1  # the rate-limit tick is too frequent to show
    assert all(STAMP.match(line) for line in lines), lines
    assert not ANSI.search(out.getvalue())
    assert lines[-1].endswith("warning: FAILED test_x [bold]x[/]")


def test_plain_view_goes_quiet_when_the_reader_is_gone() -> None:
    class ClosedPipe(io.StringIO):
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

    view = PlainView(ClosedPipe())
    view(event("loop.start", **SAMPLES["loop.start"]))  # must not raise into the engine
    view(event("loop.end", **SAMPLES["loop.end"]))
    assert view.broken


def test_json_view_lines_parse_and_keep_every_field() -> None:
    out = io.StringIO()
    view = JsonView(out)
    items = [*run_events(), event("loop.warning", message="naïve → ünïcode")]
    for item in items:
        view(item)
    lines = out.getvalue().splitlines()
    assert len(lines) == len(items)  # JSON shows even the quiet events
    parsed = [json.loads(line) for line in lines]
    for item, data in zip(items, parsed, strict=True):
        assert data["type"] == item.type
        assert data["ts"] == item.ts
        assert data["iteration"] == 3
        for key, value in item.data.items():
            assert data[key] == value
    assert out.getvalue().isascii()


def on_screen(written: str) -> str:
    """What a terminal shows of ``written``, line by line: escape codes dropped, and a
    carriage return starts its line again (the live panel, when its refresh thread drew it
    before a line came, moves back over itself before printing that line above it)."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", written)
    return "\n".join(row.rsplit("\r", 1)[-1] for row in plain.split("\n"))


def test_on_screen_keeps_what_follows_a_carriage_return() -> None:
    assert on_screen("╰──╯\r\x1b[2K\x1b[1A[22:13:20] line\nnext") == "[22:13:20] line\nnext"


@pytest.mark.parametrize("drawn_first", [False, True], ids=["line-first", "panel-first"])
def test_live_view_renders_a_panel(drawn_first: bool) -> None:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system="standard")
    view = LiveView(max_iterations=5, console=console)
    if drawn_first:  # what the refresh thread does when the first event is slow to come
        assert view.live is not None
        view.live.refresh()
    for item in run_events():
        view(item)
    view(event("agent.end", outcome="ok", tokens=10, context_tokens=5000, context_window=None))
    view(event("loop.warning", message="[/bold] is not markup here"))
    view.close()
    text = on_screen(out.getvalue())
    assert "loopctl" in text
    assert "iteration" in text
    assert "3 of 20" in text  # the limit comes from loop.start
    assert "ended: max_iterations" in text
    assert "tests failed (exit 1, 2 failing" in text
    assert "[/bold] is not markup here" in text
    assert "5,000 tokens (window unknown)" in text
    assert view.tokens == 15_210
    # every event's line was printed above the panel, stamped, each once (the scrollback's)
    printed = [line for line in text.splitlines() if STAMP.match(line)]
    expected = [describe(item) for item in run_events() if item.type != "agent.rate_limit_waiting"]
    for line in expected:
        assert sum(line in row for row in printed) == 1, (line, printed)
    assert not any("│" in row for row in printed)  # outside the panel, not in it


def test_live_view_lines_never_join_the_panel_while_it_is_redrawn(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The panel's redraws and the lines above it take turns: a redraw between a line's
    cursor reset and its write glued the line to the panel's border (once in a while in CI)."""
    from rich.console import Console

    monkeypatch.setattr(LiveView, "redraw_every", 0.0001)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system="standard")
    view = LiveView(max_iterations=5, console=console)
    for n in range(300):
        view(event("loop.warning", message=f"line {n}"))
    view.close()
    rows = on_screen(out.getvalue()).splitlines()
    for n in range(300):
        assert (
            sum(row.endswith(f"warning: line {n}") and bool(STAMP.match(row)) for row in rows) == 1
        )


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_choose_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert choose_mode(json_output=True, stream=FakeTerminal()) == "json"
    assert choose_mode(json_output=False, stream=FakeTerminal()) == "live"
    assert choose_mode(json_output=False, stream=io.StringIO()) == "plain"  # a pipe or a file
    assert choose_mode(json_output=False, plain=True, stream=FakeTerminal()) == "plain"
    assert choose_mode(json_output=True, plain=True, stream=FakeTerminal()) == "json"
    monkeypatch.setenv("NO_COLOR", "1")  # colour off, not the live view
    assert choose_mode(json_output=False, stream=FakeTerminal()) == "live"
    monkeypatch.delenv("NO_COLOR")
    monkeypatch.setenv("TERM", "dumb")
    assert choose_mode(json_output=False, stream=FakeTerminal()) == "plain"


def test_plugins_event_lines_come_from_their_declared_templates():
    from loopctl.view import use_event_lines

    use_event_lines(
        {"demo.usage": "context {percent:.0f}% full ({tokens} tokens)", "demo.quiet": ""}
    )
    assert (
        describe(event("demo.usage", percent=74.6, tokens=150000))
        == "context 75% full (150000 tokens)"
    )
    assert describe(event("demo.usage", tokens=1)).startswith(
        "demo.usage"
    )  # bad data: generic line
    assert describe(event("demo.quiet", anything=1)) == ""
    stream = io.StringIO()
    PlainView(stream)(event("demo.quiet", anything=1))
    assert stream.getvalue() == ""


@settings(max_examples=200, deadline=None)
@given(summary=st.text(), extra=st.dictionaries(st.text(max_size=5), st.text(), max_size=3))
def test_a_summary_from_a_plugin_is_one_clean_line(summary: str, extra: dict[str, str]) -> None:
    line = describe(Event(type="x.event", ts=0.0, data={**extra, "summary": summary}))
    assert len(line.splitlines()) <= 1
    assert not ANSI.search(line)
    assert not any(ord(c) < 32 or 0x7F <= ord(c) <= 0x9F for c in line)
    assert len(line) <= 500


def test_a_plugin_event_line_makes_text_of_the_values_its_template_names_only():
    """The other values of the event stay as they are: a list of a thousand items is never
    turned into text for a line that does not show it (nor can a value that breaks
    ``json.dumps`` spoil the line)."""
    from loopctl.view import use_event_lines

    class Unprintable:
        def __str__(self) -> str:
            raise AssertionError("made into text")

        __repr__ = __str__

    use_event_lines({"demo.count": "{count} items in {where[0]} ({ratio:.1f})"})
    line = describe(event("demo.count", count=3, where="here", ratio=0.25, items=Unprintable()))
    assert line == "3 items in h (0.2)"


def test_a_failed_approach_updated_in_place_is_not_noted_again() -> None:
    """Issue 25: one approach, one "noted a failed approach" line, however often it grows."""
    noted = Event("loop.failed_approach", 0.0, data={"text": "iteration 1 changed a.py"})
    grown = Event(
        "loop.failed_approach", 0.0, data={"text": "iterations 1-2 changed a.py", "updated": True}
    )
    assert describe(noted) == "noted a failed approach: iteration 1 changed a.py"
    assert describe(grown) == ""
    with_diff = Event(
        "loop.failed_approach",
        0.0,
        data={"text": "iteration 1 changed a.py\n    a.py\n    -x\n    +y"},
    )
    assert describe(with_diff) == "noted a failed approach: iteration 1 changed a.py"


def test_the_tests_before_the_first_turn_and_a_flaky_failure_read_as_such() -> None:
    first = event("tests.start", iteration=None, command="pytest -q")
    assert describe(first) == "running tests before the first turn: pytest -q"
    again = event("tests.start", iteration=None, command="pytest -q", label="flaky-check")
    assert describe(again) == "running tests again (flaky-check) before the first turn: pytest -q"
    flaky = event("tests.flaky", iteration=None, command="pytest -q", failing_tests=["t.py::a"])
    assert describe(flaky).startswith("flaky: t.py::a failed, then passed on an immediate re-run")
