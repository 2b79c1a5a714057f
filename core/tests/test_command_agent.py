"""The ``command`` adapter: any executable, prompt as argument or on stdin, text out."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.agents.base import TurnRequest
from loopctl.agents.command import (
    FINAL_TEXT_LIMIT,
    CommandAgent,
    CommandParser,
    CommandSettings,
)
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import AgentMessage, ErrorKind, MessageKind

PYTHON = shlex.quote(sys.executable)
LIMITS = Supervision(timeout_s=10, idle_timeout_s=5, grace_s=0.3, kill_after_s=0.5)


def _agent(command: str, **kwargs: object) -> CommandAgent:
    return CommandAgent(CommandSettings(command=command, **kwargs))  # type: ignore[arg-type]


def _request(tmp_path: Path, prompt: str = "fix the tests") -> TurnRequest:
    return TurnRequest(prompt=prompt, workdir=tmp_path, iteration=1)


def test_prompt_placeholder_is_replaced_and_stdin_is_closed(tmp_path: Path) -> None:
    script = "import sys; print('arg:' + sys.argv[1]); print('stdin:' + repr(sys.stdin.read()))"
    agent = _agent(f"{PYTHON} -c {shlex.quote(script)} --prompt={{prompt}}")
    invocation = agent.invocation(_request(tmp_path, "it's broken"))
    assert invocation.argv[-1] == "--prompt=it's broken"
    assert invocation.stdin is None
    messages: list[AgentMessage] = []
    result = run_turn(
        agent,
        _request(tmp_path, "it's broken"),
        supervision=LIMITS,
        on_message=messages.append,
    )
    assert result.outcome.ok
    assert result.final_text == "arg:--prompt=it's broken\nstdin:''"
    assert [m.kind for m in messages] == [MessageKind.TEXT, MessageKind.TEXT]
    assert messages[0].text == "arg:--prompt=it's broken"


def test_without_placeholder_the_prompt_goes_to_stdin(tmp_path: Path) -> None:
    agent = _agent("cat", extra_args=["-"])
    assert agent.invocation(_request(tmp_path)).argv == ["cat", "-"]
    result = run_turn(agent, _request(tmp_path, "line one\nline two\n"), supervision=LIMITS)
    assert result.outcome.ok
    assert result.exit_code == 0
    assert result.final_text == "line one\nline two"


def test_usage_is_unknown_not_zero(tmp_path: Path) -> None:
    result = run_turn(_agent("echo hi"), _request(tmp_path), supervision=LIMITS)
    assert result.requests == []
    assert result.context_tokens is None
    assert result.tool_calls == []


def test_nonzero_exit_is_crashed_with_the_stderr_tail(tmp_path: Path) -> None:
    script = "import sys; print('partial work'); sys.stderr.write('boom: quota exceeded\\n'); sys.exit(4)"
    result = run_turn(
        _agent(f"{PYTHON} -c {shlex.quote(script)}"), _request(tmp_path), supervision=LIMITS
    )
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert result.outcome.message == "boom: quota exceeded"
    assert result.exit_code == 4
    assert result.final_text == "partial work"


def test_nonzero_exit_without_stderr_names_the_code(tmp_path: Path) -> None:
    result = run_turn(_agent("false"), _request(tmp_path), supervision=LIMITS)
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert "code 1" in result.outcome.message


def test_undecodable_bytes_are_replaced(tmp_path: Path) -> None:
    script = "import sys; sys.stdout.buffer.write(b'caf\\xe9 \\xff ok\\r\\n')"
    result = run_turn(
        _agent(f"{PYTHON} -c {shlex.quote(script)}"), _request(tmp_path), supervision=LIMITS
    )
    assert result.outcome.ok
    assert result.final_text == "caf\ufffd \ufffd ok"


def test_final_text_keeps_only_the_tail(tmp_path: Path) -> None:
    script = "for i in range(20000): print(f'line {i:06d} ' + 'x' * 20)"
    result = run_turn(
        _agent(f"{PYTHON} -c {shlex.quote(script)}"), _request(tmp_path), supervision=LIMITS
    )
    assert result.outcome.ok
    assert len(result.final_text) <= FINAL_TEXT_LIMIT
    assert len(result.final_text) > FINAL_TEXT_LIMIT - 100
    assert result.final_text.endswith("line 019999 " + "x" * 20)


def test_a_missing_executable_is_a_crashed_turn(tmp_path: Path) -> None:
    result = run_turn(_agent("no-such-agent-cli --go"), _request(tmp_path), supervision=LIMITS)
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert "no-such-agent-cli" in result.outcome.message


def test_missing_command_setting_says_how_to_set_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"\[agents\.command\] command"):
        CommandAgent().invocation(_request(tmp_path))


def test_unbalanced_quotes_are_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="quotes"):
        _agent("my-agent 'unclosed").invocation(_request(tmp_path))


def test_resolved_executable_looks_up_the_first_word() -> None:
    assert _agent("sh -c true").resolved_executable() is not None
    assert _agent("no-such-agent-cli --x").resolved_executable() is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.binary(max_size=300), max_size=30),
    st.one_of(st.none(), st.integers(-9, 255)),
    st.text(max_size=200),
)
def test_parser_never_raises_and_bounds_its_text(
    lines: list[bytes], exit_code: int | None, stderr: str
) -> None:
    parser = CommandParser()
    for line in lines:
        messages = parser.feed(line)
        assert len(messages) == 1
        assert messages[0].kind is MessageKind.TEXT
    result = parser.finish(exit_code, stderr)
    assert result.outcome.ok is (exit_code == 0)
    assert len(result.final_text) <= FINAL_TEXT_LIMIT
    expected = "\n".join(line.decode("utf-8", errors="replace").rstrip("\r") for line in lines)[
        -FINAL_TEXT_LIMIT:
    ]
    assert result.final_text == expected


def test_parser_tail_is_exact_for_long_output() -> None:
    parser = CommandParser()
    lines = [f"{i:05d}".encode() * 100 for i in range(500)]  # 250 KB in all
    for line in lines:
        parser.feed(line)
    expected = "\n".join(line.decode() for line in lines)[-FINAL_TEXT_LIMIT:]
    assert parser.finish(0, "").final_text == expected
