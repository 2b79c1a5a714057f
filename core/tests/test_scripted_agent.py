"""The ``scripted`` fake agent: scenario files, the runner process, and its stream parser."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.agents.base import TurnRequest
from loopctl.agents.scripted import (
    ScenarioError,
    ScriptedAgent,
    ScriptedParser,
    ScriptedSettings,
    load_scenario,
    write_scenario,
)
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import AgentMessage, ErrorKind, MessageKind, TurnResult, Usage

LIMITS = Supervision(timeout_s=20, idle_timeout_s=10, grace_s=0.3, kill_after_s=0.5)

CALC_BROKEN = "def add(a, b):\n    return a - b\n"


def _turn(
    workdir: Path,
    scenario: str = "scenario.toml",
    iteration: int = 1,
    session_id: str | None = None,
    prompt: str = "make the tests pass",
    limits: Supervision = LIMITS,
    then: Callable[[AgentMessage], None] | None = None,
) -> tuple[TurnResult, list[AgentMessage]]:
    agent = ScriptedAgent(ScriptedSettings(scenario=scenario))
    messages: list[AgentMessage] = []

    def on_message(message: AgentMessage) -> None:
        messages.append(message)
        if then is not None:
            then(message)

    request = TurnRequest(
        prompt=prompt, workdir=workdir, iteration=iteration, session_id=session_id
    )
    return run_turn(agent, request, on_message=on_message, supervision=limits), messages


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "calc.py").write_text(CALC_BROKEN)
    return tmp_path


def test_a_turn_edits_files_runs_commands_and_reports_usage(project: Path) -> None:
    write_scenario(
        project / "scenario.toml",
        [
            [
                {"say": "I will fix the add function"},
                {"read": "src/calc.py"},
                {"replace": "src/calc.py", "old": "a - b", "new": "a + b"},
                {"write": "notes/plan.md", "content": "fixed add\n"},
                {
                    "run": f"{sys.executable} -c \"import sys; sys.path.insert(0, 'src'); "
                    'import calc; print(calc.add(2, 3))"'
                },
                {
                    "usage": {
                        "input_tokens": 1200,
                        "output_tokens": 300,
                        "cache_read_input_tokens": 500,
                        "cache_creation_input_tokens": 0,
                    }
                },
                {"usage": {"input_tokens": 1400, "output_tokens": 100}, "context_window": 100000},
                {"done": True},
            ]
        ],
    )
    result, messages = _turn(project)
    assert result.outcome.ok, result.outcome
    assert result.exit_code == 0
    assert (project / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (project / "notes" / "plan.md").read_text() == "fixed add\n"
    assert result.requests == [Usage(1200, 300, 0, 500), Usage(1400, 100, 0, 0)]
    assert result.context_tokens == 1500  # the latest request, not the sum
    assert result.context_window == 100000
    assert result.usage.input_tokens == 2600
    assert [(c.name, c.key_input) for c in result.tool_calls] == [
        ("Read", "src/calc.py"),
        ("Edit", "src/calc.py"),
        ("Write", "notes/plan.md"),
        ("Bash", result.tool_calls[3].key_input),
    ]
    assert result.tool_calls[0].result_excerpt == CALC_BROKEN
    bash = result.tool_calls[3]
    assert (bash.exit_code, bash.is_error, bash.result_excerpt) == (0, False, "5\n")
    assert result.final_text == "I will fix the add function\nLOOPCTL_DONE"
    assert result.session_id
    assert len(result.session_id) == 36
    assert result.model == "scripted"
    kinds = [m.kind for m in messages]
    assert kinds[0] is MessageKind.INIT
    assert kinds[-1] is MessageKind.RESULT
    usage_messages = [m for m in messages if m.kind is MessageKind.USAGE]
    assert [m.context_window for m in usage_messages] == [200000, 100000]
    assert usage_messages[0].usage == Usage(1200, 300, 0, 500)


@pytest.mark.slow
def test_resume_reuses_the_session_id_and_turns_follow_the_iteration(project: Path) -> None:
    write_scenario(
        project / "scenario.json", [[{"say": "one"}], [{"say": "two"}]], repeat_last=True
    )
    first, _ = _turn(project, "scenario.json", iteration=1)
    second, _ = _turn(project, "scenario.json", iteration=2, session_id=first.session_id)
    third, _ = _turn(project, "scenario.json", iteration=7)
    assert first.final_text == "one"
    assert second.final_text == "two"
    assert third.final_text == "two"  # repeat_last
    assert second.session_id == first.session_id
    assert third.session_id not in (None, first.session_id)


def test_no_usage_means_unknown_context(project: Path) -> None:
    write_scenario(project / "scenario.toml", [[{"say": "hi"}]])
    result, _ = _turn(project)
    assert result.outcome.ok
    assert result.requests == []
    assert result.context_tokens is None


def test_running_out_of_turns_without_repeat_is_an_error(project: Path) -> None:
    write_scenario(project / "scenario.toml", [[{"say": "only"}]], repeat_last=False)
    result, _ = _turn(project, iteration=2)
    assert result.outcome.error_kind is ErrorKind.UNKNOWN
    assert "no turn 2" in result.outcome.message
    assert result.exit_code == 2


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (
            {"turns": [{"actions": [{"say": "x"}]}, {"actions": [{"shout": "x"}]}]},
            "turn 2, action 1: needs exactly one action key out of say, read, write, replace, "
            "run, usage, sleep, error, hang, exit, done (found 'shout')",
        ),
        ({"turns": [{"actions": [{"replace": "a.py", "old": "x"}]}]}, "missing key 'new'"),
        ({"turns": [{"actions": [{"error": "oops"}]}]}, "unknown error kind 'oops'"),
        ({"turns": [{"actions": [{"usage": {"input": 3}}]}]}, "unknown usage key 'input'"),
        ({"turns": []}, "non-empty"),
        ({"turns": [{"actions": []}], "colour": "red"}, "unknown key 'colour'"),
        ({"turns": [{"actions": [{"say": "a", "read": "b"}]}]}, "exactly one action key"),
        ({"turns": [{"actions": [{"exit": 300}]}]}, "exit code 0-255"),
    ],
)
def test_an_invalid_scenario_is_reported_with_file_and_place(
    project: Path, scenario: dict[str, Any], expected: str
) -> None:
    (project / "bad.json").write_text(json.dumps(scenario))
    result, _ = _turn(project, "bad.json")
    assert result.outcome.error_kind is ErrorKind.UNKNOWN
    assert expected in result.outcome.message
    assert "bad.json" in result.outcome.message
    assert result.exit_code == 2


def test_a_missing_or_unparsable_scenario_file_is_reported(project: Path) -> None:
    result, _ = _turn(project, "nope.toml")
    assert result.outcome.error_kind is ErrorKind.UNKNOWN
    assert "nope.toml" in result.outcome.message
    (project / "broken.toml").write_text("turns = [[[")
    with pytest.raises(ScenarioError, match=r"broken\.toml"):
        load_scenario(project / "broken.toml")


def test_missing_scenario_setting_says_how_to_set_it(project: Path) -> None:
    request = TurnRequest(prompt="x", workdir=project, iteration=1)
    with pytest.raises(ValueError, match=r"\[agents\.scripted\] scenario = "):
        ScriptedAgent().invocation(request)


def test_invocation_resolves_the_scenario_against_the_workdir(project: Path) -> None:
    agent = ScriptedAgent(ScriptedSettings(scenario="sc/s.toml", model="fake-model"))
    argv = agent.invocation(TurnRequest("p", project, 3, session_id="abc")).argv
    assert argv[:3] == [sys.executable, "-m", "loopctl.agents.scripted_runner"]
    assert argv[3] == str(project / "sc" / "s.toml")
    assert argv[argv.index("--turn") + 1] == "3"
    assert argv[argv.index("--resume") + 1] == "abc"
    assert argv[argv.index("--model") + 1] == "fake-model"


def test_error_action_ends_the_turn_with_that_kind(project: Path) -> None:
    write_scenario(
        project / "scenario.toml",
        [
            [
                {"say": "reading everything"},
                {"error": "context_overflow", "message": "Prompt is too long"},
                {"write": "never.txt", "content": "x"},
            ]
        ],
    )
    result, _ = _turn(project)
    assert result.outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW
    assert result.outcome.message == "Prompt is too long"
    assert result.exit_code == 1
    assert not (project / "never.txt").exists()


def test_exit_action_is_a_crash_without_result(project: Path) -> None:
    write_scenario(project / "scenario.toml", [[{"say": "bye"}, {"exit": 3}]])
    result, _ = _turn(project)
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert result.exit_code == 3
    assert result.final_text == "bye"


@pytest.mark.timing  # an idle timeout
def test_hang_action_runs_into_the_idle_timeout(project: Path) -> None:
    write_scenario(project / "scenario.toml", [[{"say": "thinking"}, {"hang": True}]])
    # the idle limit counts from the spawn, and the runner's interpreter can take longer than
    # 0.5 s to start on a loaded machine: it is set once the agent said "thinking" (the
    # supervisor reads its limits at each wait), so the turn is idle after it, as asserted
    limits = Supervision(timeout_s=60, idle_timeout_s=60, grace_s=0.3, kill_after_s=0.5)

    def once_it_speaks(message: AgentMessage) -> None:
        if message.kind is MessageKind.TEXT:
            limits.idle_timeout_s = 0.5

    result, _ = _turn(project, limits=limits, then=once_it_speaks)
    assert result.outcome.error_kind is ErrorKind.IDLE_TIMEOUT
    assert result.final_text == "thinking"


def test_failed_tools_are_results_not_crashes(project: Path) -> None:
    outside = project.parent / f"{project.name}-outside.txt"
    write_scenario(
        project / "scenario.toml",
        [
            [
                {"replace": "src/calc.py", "old": "not there", "new": "x"},
                {"write": f"../{outside.name}", "content": "escape"},
                {"read": "/etc/hostname"},
                {"read": "missing.py"},
                {"run": "exit 7"},
                {"sleep": 0.01},
                {"say": "still here"},
            ]
        ],
    )
    result, _ = _turn(project)
    assert result.outcome.ok
    assert [c.is_error for c in result.tool_calls] == [True, True, True, True, True]
    assert "not found" in (result.tool_calls[0].result_excerpt or "")
    assert "outside" in (result.tool_calls[1].result_excerpt or "")
    assert not outside.exists()
    assert result.tool_calls[4].exit_code == 7
    assert (project / "src" / "calc.py").read_text() == CALC_BROKEN
    assert result.final_text == "still here"


def test_completion_signal_and_prompt_recording(project: Path) -> None:
    write_scenario(
        project / "scenario.toml",
        [[{"done": True}]],
        completion_signal="ALL DONE",
        record_prompts="prompts.jsonl",
    )
    result, _ = _turn(project, prompt="goal: green tests\nline 2")
    assert result.final_text == "ALL DONE"
    recorded = [json.loads(line) for line in (project / "prompts.jsonl").read_text().splitlines()]
    assert recorded == [
        {"turn": 1, "session_id": result.session_id, "prompt": "goal: green tests\nline 2"}
    ]


# --- the parser on its own ---------------------------------------------------------------------


def test_parser_without_result_line() -> None:
    parser = ScriptedParser()
    parser.feed(b'{"type": "init", "session_id": "s", "model": "m"}')
    assert not parser.done
    assert parser.finish(0, "").outcome.error_kind is ErrorKind.INVALID_OUTPUT
    crashed = parser.finish(139, "Segmentation fault").outcome
    assert crashed.error_kind is ErrorKind.CRASHED
    assert "Segmentation fault" in crashed.message
    assert parser.finish(None, "").outcome.error_kind is ErrorKind.CRASHED


def test_parser_result_with_unknown_error_kind_is_unknown() -> None:
    parser = ScriptedParser()
    parser.feed(b'{"type": "result", "is_error": true, "error_kind": "cosmic_ray", "message": "m"}')
    assert parser.done
    outcome = parser.finish(1, "").outcome
    assert (outcome.error_kind, outcome.message) == (ErrorKind.UNKNOWN, "m")


def test_parser_tool_result_fills_in_its_call() -> None:
    parser = ScriptedParser()
    parser.feed(b'{"type":"tool_call","id":"t1","name":"Bash","input":{"command":"pytest -q"}}')
    messages = parser.feed(
        b'{"type":"tool_result","id":"t1","output":"1 failed","is_error":true,"exit_code":1}'
    )
    assert messages[0].kind is MessageKind.TOOL_RESULT
    call = parser.finish(0, "").tool_calls[0]
    assert (call.name, call.key_input, call.result_excerpt, call.is_error, call.exit_code) == (
        "Bash",
        "pytest -q",
        "1 failed",
        True,
        1,
    )


_EVENT_KEYS = st.sampled_from(
    [
        "type",
        "session_id",
        "model",
        "text",
        "id",
        "name",
        "input",
        "output",
        "is_error",
        "exit_code",
        "usage",
        "context_window",
        "error_kind",
        "message",
        "input_tokens",
        "output_tokens",
    ]
)
_SCALAR = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_JSON = _SCALAR | st.lists(_SCALAR, max_size=3) | st.dictionaries(_EVENT_KEYS, _SCALAR, max_size=3)
_EVENTS = st.builds(
    lambda kind, extra: {**extra, "type": kind},
    st.sampled_from(["init", "text", "tool_call", "tool_result", "usage", "result"]),
    st.dictionaries(_EVENT_KEYS, _JSON, max_size=5),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=200) | _EVENTS.map(lambda e: json.dumps(e).encode()), max_size=20),
    st.one_of(st.none(), st.integers(-9, 255)),
)
def test_parser_never_raises(lines: list[bytes], exit_code: int | None) -> None:
    parser = ScriptedParser()
    for line in lines:
        for message in parser.feed(line):
            assert isinstance(message, AgentMessage)
    result = parser.finish(exit_code, "stderr")
    assert isinstance(result, TurnResult)
    assert result.context_tokens is None or result.context_tokens >= 0
    if not result.requests:
        assert result.context_tokens is None


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)
_ACTION = st.one_of(
    st.builds(lambda s: {"say": s}, _TEXT),
    st.builds(lambda p, c: {"write": p, "content": c}, _TEXT, _TEXT),
    st.builds(lambda p, o, n: {"replace": p, "old": o + "x", "new": n}, _TEXT, _TEXT, _TEXT),
    st.builds(
        lambda n: {"usage": {"input_tokens": n}, "context_window": n + 1}, st.integers(0, 10**9)
    ),
    st.builds(lambda s: {"sleep": s}, st.floats(0, 5) | st.integers(0, 5)),
    st.just({"done": True}),
)


@settings(max_examples=100, deadline=None)
@given(
    turns=st.lists(st.lists(_ACTION, max_size=5), min_size=1, max_size=4),
    signal=_TEXT,
    suffix=st.sampled_from([".toml", ".json"]),
)
def test_write_scenario_round_trips(
    tmp_path_factory: pytest.TempPathFactory,
    turns: list[list[dict[str, Any]]],
    signal: str,
    suffix: str,
) -> None:
    path = tmp_path_factory.mktemp("sc") / f"scenario{suffix}"
    write_scenario(path, turns, completion_signal=signal, repeat_last=False)
    scenario = load_scenario(path)
    assert scenario.turns == turns
    assert scenario.completion_signal == signal
    assert scenario.repeat_last is False


def test_a_once_action_runs_only_the_first_time_its_turn_is_played(tmp_path):
    from loopctl.agents.base import TurnRequest
    from loopctl.agents.scripted import ScriptedAgent, ScriptedSettings, write_scenario
    from loopctl.agents.supervisor import run_turn

    scenario = write_scenario(
        tmp_path / "s.json",
        [[{"error": "network", "message": "blip", "once": True}, {"say": "hi"}]],
    )
    agent = ScriptedAgent(ScriptedSettings(scenario=str(scenario)))
    request = TurnRequest(prompt="p", workdir=tmp_path, iteration=1)
    first, second = run_turn(agent, request), run_turn(agent, request)
    assert first.outcome.error_kind is not None
    assert first.outcome.message == "blip"
    assert second.outcome.ok
    assert second.final_text == "hi"
