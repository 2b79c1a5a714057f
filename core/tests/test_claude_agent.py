"""The Claude Code adapter: invocation, the stream-json parser on recorded transcripts of the real
CLI, outcome mapping, robustness on hostile input, and the scripted model server it is tested with.

The transcripts in ``data/transcripts/claude`` are real ``claude -p --output-format stream-json``
output (see the README there for how they were recorded).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.agents import claude as claude_module
from loopctl.agents.base import TurnRequest
from loopctl.agents.claude import (
    KEY_INPUT_FIELDS,
    ClaudeAgent,
    ClaudeParser,
    ClaudeSettings,
    classify_outcome,
    parse_reset_time,
)
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import AgentMessage, ErrorKind, MessageKind, ToolCall, TurnResult, Usage
from loopctl.testing import model_server as ms

TRANSCRIPTS = Path(__file__).parent / "data" / "transcripts" / "claude"


def lines_of(name: str) -> list[bytes]:
    return (TRANSCRIPTS / f"{name}.jsonl").read_bytes().splitlines()


def records_of(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines_of(name)]


def parse(
    lines: list[bytes], exit_code: int | None = 0, stderr: str = ""
) -> tuple[ClaudeParser, list[Any], TurnResult]:
    parser = ClaudeParser()
    messages = [message for line in lines for message in parser.feed(line)]
    return parser, messages, parser.finish(exit_code, stderr)


def main_request_ids(records: list[dict[str, Any]]) -> list[str]:
    """Distinct ``message.id`` of real (not synthetic) main-thread assistant lines, in order."""
    seen: list[str] = []
    for record in records:
        if record.get("type") != "assistant" or record.get("parent_tool_use_id"):
            continue
        message = record["message"]
        if message["model"] != "<synthetic>" and message["id"] not in seen:
            seen.append(message["id"])
    return seen


def last_main_usage(records: list[dict[str, Any]]) -> int:
    for record in reversed(records):
        if record.get("type") == "assistant" and not record.get("parent_tool_use_id"):
            usage = record["message"]["usage"]
            if record["message"]["model"] != "<synthetic>":
                return int(
                    usage["input_tokens"]
                    + usage["output_tokens"]
                    + usage["cache_creation_input_tokens"]
                    + usage["cache_read_input_tokens"]
                )
    raise AssertionError("no main-thread usage in the transcript")


def result_line(records: list[dict[str, Any]]) -> dict[str, Any]:
    return next(r for r in records if r["type"] == "result")


# --- recorded transcripts -----------------------------------------------------------------------


def test_success_transcript_counts_each_request_once_and_reads_everything() -> None:
    records = records_of("success_edit")
    ids = main_request_ids(records)
    assistant_lines = [r for r in records if r["type"] == "assistant"]
    assert len(assistant_lines) > len(ids)  # several lines share one message.id

    parser, messages, result = parse(lines_of("success_edit"))

    usage_messages = [m for m in messages if m.kind is MessageKind.USAGE]
    assert len(usage_messages) == len(ids) == len(result.requests) == 6
    expected_total = 0
    for message_id in ids:
        usage = next(
            r["message"]["usage"] for r in assistant_lines if r["message"]["id"] == message_id
        )
        expected_total += sum(
            usage[k]
            for k in (
                "input_tokens",
                "output_tokens",
                "cache_creation_input_tokens",
                "cache_read_input_tokens",
            )
        )
    assert result.usage.total_tokens == expected_total
    assert result.context_tokens == last_main_usage(records)
    assert result.context_window == 200_000  # result.modelUsage[...].contextWindow
    assert result.cost_usd == pytest.approx(result_line(records)["total_cost_usd"])
    assert result.outcome.ok
    assert result.session_id == records[0]["session_id"]
    assert result.model == "claude-sonnet-4-5"
    assert parser.done
    assert "LOOPCTL_DONE" in result.final_text.splitlines()
    assert [(c.name, c.key_input) for c in result.tool_calls] == [
        ("Read", "calc.py"),
        ("Read", "test_calc.py"),
        ("Grep", "def add"),
        ("Bash", "python3 -m unittest -q"),
        ("Edit", "calc.py"),
        ("Bash", "python3 -m unittest -q"),
    ]
    grep, failing_bash, passing_bash = (result.tool_calls[i] for i in (2, 3, 5))
    assert grep.is_error is True
    assert "No such tool available" in (grep.result_excerpt or "")
    assert (failing_bash.is_error, failing_bash.exit_code) == (True, 1)
    assert (passing_bash.is_error, passing_bash.exit_code) == (False, 0)
    assert "OK" in (passing_bash.result_excerpt or "")
    kinds = [m.kind for m in messages]
    assert kinds[0] is MessageKind.INIT
    assert kinds[-1] is MessageKind.RESULT
    assert kinds.count(MessageKind.TOOL_RESULT) == 6


def test_usage_is_reported_after_the_last_line_of_its_message() -> None:
    """The first message spans a text line and a tool_use line: one USAGE, after both."""
    _, messages, _ = parse(lines_of("success_edit"))
    kinds = [m.kind for m in messages[:5]]
    assert kinds == [
        MessageKind.INIT,
        MessageKind.TEXT,
        MessageKind.TOOL_CALL,
        MessageKind.USAGE,
        MessageKind.TOOL_RESULT,
    ]


def test_thinking_is_neither_text_nor_a_message_of_its_own() -> None:
    records = records_of("success_edit")
    thinking = [
        block["thinking"]
        for r in records
        if r["type"] == "assistant"
        for block in r["message"]["content"]
        if block["type"] == "thinking"
    ]
    progress = [r for r in records if r.get("subtype") == "thinking_tokens"]
    assert thinking
    assert len(progress) > len(thinking)

    parser = ClaudeParser()
    for line in lines_of("success_edit"):
        if b'"subtype":"thinking_tokens"' in line:
            assert parser.feed(line) == []  # progress lines are skipped unread
        else:
            parser.feed(line)
    _, messages, result = parse(lines_of("success_edit"))
    texts = " ".join(m.text or "" for m in messages)
    assert not any(t[:40] in texts for t in thinking)
    assert not any(t[:40] in result.final_text for t in thinking)
    # the same progress line with its keys in another order is recognised after decoding
    reordered = json.dumps({"subtype": "thinking_tokens", "type": "system", "estimated_tokens": 3})
    assert ClaudeParser().feed(reordered.encode()) == []


def test_lines_that_do_not_fit_the_fast_shapes_are_read_leniently() -> None:
    record = next(
        r
        for r in records_of("success_edit")
        if r["type"] == "assistant" and r["message"]["content"][0]["type"] == "tool_use"
    )
    content = record["message"]["content"][0]
    content["input"]["path"] = ["not", "a", "string"]  # a future tool's input
    record["message"]["usage"]["output_tokens"] = 12.0  # a float where an int is expected
    record["message"]["content"].append({"type": "server_tool_use", "id": 7})
    parser = ClaudeParser()
    messages = parser.feed(json.dumps(record).encode())
    assert [m.kind for m in messages] == [MessageKind.TOOL_CALL]
    assert messages[0].tool_call is not None
    assert messages[0].tool_call.key_input == content["input"]["file_path"]
    result = parser.finish(0, "")
    assert len(result.requests) == 1
    assert result.requests[0].output_tokens == 0


def test_usage_of_one_message_id_counts_once_with_the_largest_figures() -> None:
    def line(text: str, output: int) -> bytes:
        return json.dumps(
            {
                "type": "assistant",
                "message": {
                    "id": "msg_1",
                    "model": "claude-sonnet-4-5",
                    "content": [{"type": "text", "text": text}],
                    "usage": {"input_tokens": 1000, "output_tokens": output},
                },
                "parent_tool_use_id": None,
            }
        ).encode()

    parser = ClaudeParser()
    first = parser.feed(line("a", 1)) + parser.feed(line("b", 300)) + parser.feed(line("c", 7))
    assert [m.kind for m in first] == [MessageKind.TEXT] * 3
    result = parser.finish(0, "")
    assert [u.output_tokens for u in result.requests] == [300]
    assert result.context_tokens == 1300


def test_sub_agent_lines_are_sidechain_and_stay_out_of_the_context_figure() -> None:
    records = records_of("subagent")
    sidechain_ids = {
        r["message"]["id"]
        for r in records
        if r["type"] == "assistant" and r.get("parent_tool_use_id")
    }
    assert sidechain_ids  # the transcript really has sub-agent traffic

    _, messages, result = parse(lines_of("subagent"))

    side = [m for m in messages if m.sidechain]
    assert {m.kind for m in side} >= {MessageKind.TOOL_CALL, MessageKind.USAGE}
    side_usage = [m.usage for m in side if m.kind is MessageKind.USAGE]
    assert side_usage
    assert all(u is not None and u.input_tokens == 9000 for u in side_usage)
    assert len(result.requests) == len(main_request_ids(records)) == 2
    assert all(u.input_tokens != 9000 for u in result.requests)
    assert result.context_tokens == last_main_usage(records) == 20_611
    assert "add subtracts" not in result.final_text  # the sub-agent's words are not the turn's


def test_window_comes_from_model_usage_and_from_the_model_table_before_it() -> None:
    records = records_of("success_edit")
    records[0]["model"] = "claude-opus-4-1[1m]"
    for name, figures in result_line(records)["modelUsage"].items():
        figures["contextWindow"] = 500_000  # what the CLI says wins over the table
        assert name == "claude-sonnet-4-5"
    lines = [json.dumps(r).encode() for r in records]
    parser = ClaudeParser()
    init = parser.feed(lines[0])
    assert init[0].kind is MessageKind.INIT
    assert init[0].context_window == 1_000_000  # the [1m] suffix rule of the model table
    for line in lines[1:]:
        parser.feed(line)
    assert parser.finish(0, "").context_window == 500_000


def test_window_falls_back_to_the_model_table_without_model_usage() -> None:
    records = [r for r in records_of("success_edit") if r["type"] != "result"]
    _, _, result = parse([json.dumps(r).encode() for r in records], exit_code=0)
    assert result.context_window == 200_000  # claude-sonnet-4-5 in the table
    assert result.outcome.error_kind is ErrorKind.INVALID_OUTPUT


def test_synthetic_error_lines_are_errors_not_requests() -> None:
    records = records_of("prompt_too_long")
    assert any(r.get("message", {}).get("model") == "<synthetic>" for r in records)
    _, messages, result = parse(lines_of("prompt_too_long"), exit_code=1)
    assert result.outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW
    assert result.outcome.message == "Prompt is too long"
    assert result.context_tokens == 150_001  # the zero usage of the synthetic line is ignored
    assert len(result.requests) == 1
    errors = [m for m in messages if m.kind is MessageKind.ERROR]
    assert [m.text for m in errors] == ["Prompt is too long"]
    systems = [m.text for m in messages if m.kind is MessageKind.SYSTEM]
    assert "status: compacting" in systems
    assert any(text and text.startswith("compaction failed") for text in systems)
    assert "Prompt is too long" not in result.final_text


def test_compaction_is_reported_and_the_fill_follows_the_next_request() -> None:
    records = records_of("compaction")
    _, messages, result = parse(lines_of("compaction"))
    boundary = [m for m in messages if m.raw_type == "system/compact_boundary"]
    assert len(boundary) == 1
    assert "->" in (boundary[0].text or "")
    assert result.outcome.ok
    assert result.context_tokens == last_main_usage(records) == 12_001


OUTCOMES = {
    "auth_invalid_key": (ErrorKind.AUTH, "Invalid API key · Fix external API key"),
    "not_logged_in": (ErrorKind.AUTH, "Not logged in · Please run /login"),
    "credit_balance": (ErrorKind.BILLING, "Credit balance is too low"),
    "rate_limit": (ErrorKind.RATE_LIMIT, "API Error: Request rejected (429)"),
    "overloaded": (ErrorKind.NETWORK, "API Error: 529 Overloaded"),
    "prompt_too_long": (ErrorKind.CONTEXT_OVERFLOW, "Prompt is too long"),
    "max_turns": (ErrorKind.MAX_TURNS, "Reached maximum number of turns (1)"),
    "max_budget": (ErrorKind.BUDGET, "Reached maximum budget ($0.1)"),
    "resume_missing_session": (ErrorKind.CRASHED, "No conversation found with session ID"),
    "usage_limit_resets": (ErrorKind.RATE_LIMIT, "You've hit your session limit"),
    "usage_limit_epoch": (ErrorKind.RATE_LIMIT, "Claude AI usage limit reached|1760000000"),
    "success_edit": (None, ""),
    "subagent": (None, ""),
    "subagent_background": (None, ""),
    "background_bash": (None, ""),
    "compaction": (None, ""),
    "api_retry": (None, ""),
    "resumed": (None, ""),
    "resumed_running_total_first": (None, ""),
    "resumed_running_total": (None, ""),
}


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_each_transcript_maps_to_its_outcome(name: str) -> None:
    kind, words = OUTCOMES[name]
    _, _, result = parse(lines_of(name), exit_code=1 if kind else 0)
    assert result.outcome.error_kind is kind
    assert result.outcome.message.startswith(words)


def test_every_transcript_is_covered() -> None:
    assert {p.stem for p in TRANSCRIPTS.glob("*.jsonl")} == set(OUTCOMES)


def test_a_background_sub_agent_can_bring_a_second_result_line() -> None:
    """Claude Code 2.1.332 runs a Task sub-agent in the background; when it reports back after
    the turn's result, the CLI starts another turn in the same process (a second ``init`` and
    ``result``). The parser is not done at the first result (the supervisor would end the
    process in the middle of the second turn), and the turn is both together."""
    records = records_of("subagent_background")
    results = [r for r in records if r["type"] == "result"]
    assert len(results) == 2
    assert results[1]["origin"]["kind"] == "task-notification"
    parser = ClaudeParser()
    done_after: list[bool] = []
    for line in lines_of("subagent_background"):
        parser.feed(line)
        done_after.append(parser.done)
    assert not any(done_after)  # only the process's exit ends such a turn
    result = parser.finish(0, "")
    assert result.outcome.ok
    assert result.final_text.endswith("done")  # the second turn's words come last
    assert result.cost_usd == pytest.approx(results[-1]["total_cost_usd"])
    assert result.context_tokens == last_main_usage(records)
    sidechain = [r for r in records if r["type"] == "assistant" and r.get("parent_tool_use_id")]
    assert sidechain  # the sub-agent's line, with the new agent_id field
    assert all(
        u.input_tokens != sidechain[0]["message"]["usage"]["input_tokens"] for u in result.requests
    )


def test_a_command_left_running_in_the_background_does_not_hold_the_turn() -> None:
    """Claude Code 2.1.332 prints its result at once when the agent left a command running in
    the background (Bash's ``run_in_background``: ``task_type`` ``local_bash``), then waits for
    that command before it exits. Nothing comes back into the session from it: the parser is
    done at the result line, so the supervisor gives the CLI its grace and ends it."""
    records = records_of("background_bash")
    started = [r for r in records if r.get("subtype") == "task_started" and r["is_backgrounded"]]
    assert [r["task_type"] for r in started] == ["local_bash"]
    assert done_only_at_the_last_line("background_bash")


def test_a_background_task_of_an_unknown_type_holds_the_turn() -> None:
    """Only a shell command is known not to report back: any other background task type (a
    sub-agent, or one this adapter does not know) keeps the turn open until the CLI exits."""
    for task_type in (b'"local_agent"', b'"remote_agent"', b"null"):
        parser = ClaudeParser()
        for line in lines_of("background_bash"):
            parser.feed(line.replace(b'"task_type":"local_bash"', b'"task_type":' + task_type))
        assert not parser.done, task_type


def test_a_turn_without_background_tasks_is_done_at_its_result() -> None:
    """A foreground sub-agent (2.1.197's ``subagent``): done at the one result line, the last."""
    assert done_only_at_the_last_line("subagent")


def done_only_at_the_last_line(name: str) -> bool:
    """Whether the parser of transcript ``name`` is done at its last line and not before."""
    parser = ClaudeParser()
    done_after: list[bool] = []
    for line in lines_of(name):
        parser.feed(line)
        done_after.append(parser.done)
    return done_after == [False] * (len(done_after) - 1) + [True]


def test_a_resumed_turn_costs_what_it_added_to_the_sessions_running_total() -> None:
    """Claude Code 2.1.332 reports a resumed session's running total in ``total_cost_usd``
    (2.1.197 reported the process's own spend): the turn's cost is what it added."""
    first = result_line(records_of("resumed_running_total_first"))
    second = result_line(records_of("resumed_running_total"))
    assert second["total_cost_usd"] > first["total_cost_usd"]  # the running total
    before = float(first["total_cost_usd"])
    own = second["total_cost_usd"] - before
    # from model_usage_since_last_result, exactly
    _, _, result = parse_resumed("resumed_running_total", before)
    assert result.cost_usd == pytest.approx(own)
    # without that field (a CLI between the two): the difference from what loopctl recorded
    stripped = [r for r in records_of("resumed_running_total")]
    for record in stripped:
        record.pop("model_usage_since_last_result", None)
    lines = [json.dumps(r).encode() for r in stripped]
    parser = ClaudeParser(resumed_cost=before)
    for line in lines:
        parser.feed(line)
    assert parser.finish(0, "").cost_usd == pytest.approx(own)
    # an older CLI's figure is the turn's own: it stays as it is
    older = result_line(records_of("resumed"))
    _, _, result = parse_resumed("resumed", before)
    assert result.cost_usd == pytest.approx(older["total_cost_usd"])
    # and a fresh session's total is its cost
    _, _, result = parse_resumed("resumed_running_total_first", 0.0)
    assert result.cost_usd == pytest.approx(before)


def parse_resumed(name: str, before: float) -> tuple[ClaudeParser, list[Any], TurnResult]:
    parser = ClaudeParser(resumed_cost=before)
    messages = [message for line in lines_of(name) for message in parser.feed(line)]
    return parser, messages, parser.finish(0, "")


def test_failures_without_usage_report_unknown_context_not_zero() -> None:
    for name in ("auth_invalid_key", "rate_limit", "not_logged_in", "resume_missing_session"):
        _, _, result = parse(lines_of(name), exit_code=1)
        assert result.context_tokens is None, name
        assert result.requests == []


def test_rate_limit_reset_comes_from_the_rate_limit_event() -> None:
    _, messages, result = parse(lines_of("usage_limit_resets"), exit_code=1)
    assert result.outcome.retry_at == 1_893_510_000
    assert any(m.raw_type == "rate_limit_event" for m in messages)
    _, _, epoch = parse(lines_of("usage_limit_epoch"), exit_code=1)
    assert epoch.outcome.retry_at == 1_760_000_000


def test_api_retries_are_system_messages() -> None:
    _, messages, result = parse(lines_of("api_retry"))
    retries = [m for m in messages if m.raw_type == "system/api_retry"]
    assert len(retries) == 2
    assert "529" in (retries[0].text or "")
    assert result.outcome.ok
    assert len(result.requests) == 1


def test_resumed_session_keeps_its_id() -> None:
    records = records_of("resumed")
    _, _, result = parse(lines_of("resumed"))
    assert result.session_id == records[0]["session_id"] == result_line(records)["session_id"]


def test_no_result_line_is_a_crash_or_invalid_output() -> None:
    lines = [line for line in lines_of("success_edit") if b'"type":"result"' not in line]
    parser, _, crashed = parse(lines, exit_code=1, stderr="Error: something broke")
    assert not parser.done
    assert crashed.outcome.error_kind is ErrorKind.CRASHED
    assert "something broke" in crashed.outcome.message
    assert crashed.context_tokens == last_main_usage(records_of("success_edit"))
    _, _, killed = parse(lines, exit_code=None)
    assert killed.outcome.error_kind is ErrorKind.CRASHED
    _, _, quiet = parse(lines, exit_code=0)
    assert quiet.outcome.error_kind is ErrorKind.INVALID_OUTPUT
    _, _, nothing = parse([], exit_code=0)
    assert nothing.outcome.error_kind is ErrorKind.INVALID_OUTPUT
    assert nothing.context_tokens is None


def test_done_turns_true_at_the_result_line() -> None:
    parser = ClaudeParser()
    lines = lines_of("success_edit")
    for line in lines[:-1]:
        parser.feed(line)
        assert not parser.done
    parser.feed(lines[-1])
    assert parser.done


# --- outcome mapping ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "kind"),
    [
        ({"subtype": "success", "is_error": False, "text": "all good"}, None),
        ({"subtype": "error_max_turns", "is_error": True, "text": None}, ErrorKind.MAX_TURNS),
        ({"subtype": "error_max_budget_usd", "is_error": True, "text": None}, ErrorKind.BUDGET),
        (
            {"subtype": "error_during_execution", "is_error": True, "text": "boom"},
            ErrorKind.CRASHED,
        ),
        (
            {
                "subtype": "success",
                "is_error": True,
                "text": "x",
                "terminal_reason": "blocking_limit",
            },
            ErrorKind.CONTEXT_OVERFLOW,
        ),
        (
            {"subtype": "success", "is_error": True, "text": "x", "api_error_status": 401},
            ErrorKind.AUTH,
        ),
        (
            {"subtype": "success", "is_error": True, "text": "x", "api_error_status": 403},
            ErrorKind.AUTH,
        ),
        (
            {"subtype": "success", "is_error": True, "text": "x", "api_error_status": 429},
            ErrorKind.RATE_LIMIT,
        ),
        (
            {"subtype": "success", "is_error": True, "text": "x", "api_error_status": 503},
            ErrorKind.NETWORK,
        ),
        (
            {"subtype": "success", "is_error": True, "text": "API Error: 529 Overloaded"},
            ErrorKind.NETWORK,
        ),
        (
            {
                "subtype": "success",
                "is_error": True,
                "text": "API Error: Unable to connect to API (ConnectionRefused)",
            },
            ErrorKind.NETWORK,
        ),
        (
            {
                "subtype": "success",
                "is_error": True,
                "text": "Invalid API key · Fix external API key",
            },
            ErrorKind.AUTH,
        ),
        (
            {"subtype": "success", "is_error": True, "text": "x", "error_code": "billing_error"},
            ErrorKind.BILLING,
        ),
        (
            {
                "subtype": "success",
                "is_error": True,
                "text": "Your credit balance is too low",
                "api_error_status": 400,
            },
            ErrorKind.BILLING,
        ),
        (
            {
                "subtype": "success",
                "is_error": True,
                "text": "prompt is too long: 210000 tokens > 200000 maximum",
            },
            ErrorKind.CONTEXT_OVERFLOW,
        ),
        ({"subtype": "success", "is_error": True, "text": "something odd"}, ErrorKind.UNKNOWN),
        ({"subtype": "error_something_new", "is_error": None, "text": None}, ErrorKind.UNKNOWN),
    ],
)
def test_classify_outcome(fields: dict[str, Any], kind: ErrorKind | None) -> None:
    outcome = classify_outcome(**fields)
    assert outcome.error_kind is kind
    if kind is None:
        assert outcome.ok
        assert outcome.message == ""
    elif fields.get("text"):
        assert outcome.message == fields["text"]  # the CLI's words, verbatim


NOW = dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.timezone.utc).timestamp()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Claude AI usage limit reached|1760000000", 1_760_000_000),
        ("usage limit reached|1760000000123", 1_760_000_000.123),
        ("You've hit your session limit · resets 3pm (UTC)", NOW + 5 * 3600),
        ("You've hit your limit · resets 9am (UTC)", NOW + 23 * 3600),
        ("limit · resets 3:30pm (Europe/London)", NOW + 5.5 * 3600),  # GMT in March
        ("You've hit your weekly limit · resets Mar 4, 3pm (UTC)", NOW + 3 * 86400 + 5 * 3600),
        ("rate limited · resets in 2h 30m", NOW + 2.5 * 3600),
        ("resets 42", None),
        ("nothing about time", None),
        ("", None),
    ],
)
def test_parse_reset_time(text: str, expected: float | None) -> None:
    found = parse_reset_time(text, now=NOW)
    if expected is None:
        assert found is None
    else:
        assert found == pytest.approx(expected)


def test_rate_limit_outcome_carries_retry_at_from_the_words() -> None:
    outcome = classify_outcome(
        subtype="success",
        is_error=True,
        text="You've hit your session limit · resets 3pm (UTC)",
        now=NOW,
    )
    assert outcome.error_kind is ErrorKind.RATE_LIMIT
    assert outcome.retry_at == pytest.approx(NOW + 5 * 3600)


@given(st.text(max_size=200), st.floats(min_value=0, max_value=4e9, allow_nan=False))
@settings(max_examples=200, deadline=None)
def test_parse_reset_time_never_raises(text: str, now: float) -> None:
    found = parse_reset_time(text, now=now)
    assert found is None or isinstance(found, float)


# --- memory bounds --------------------------------------------------------------------------------


def tool_call_line(i: int) -> bytes:
    return json.dumps(
        {
            "type": "assistant",
            "message": {
                "id": f"msg_{i}",
                "model": "claude-sonnet-4-5",
                "content": [
                    {
                        "type": "tool_use",
                        "id": f"toolu_{i}",
                        "name": "Read",
                        "input": {"file_path": f"f{i}.py"},
                    }
                ],
                "usage": {"input_tokens": 10, "output_tokens": 1},
            },
            "parent_tool_use_id": None,
        }
    ).encode()


def test_tool_calls_and_requests_are_bounded_but_totals_stay_right(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(claude_module, "MAX_KEPT_REQUESTS", 50)
    parser = ClaudeParser()
    for i in range(3000):
        parser.feed(tool_call_line(i))
    result = parser.finish(0, "")
    assert parser.tool_call_count == 3000
    assert len(result.tool_calls) == claude_module.MAX_KEPT_TOOL_CALLS
    assert result.tool_calls[-1].key_input == "f2999.py"
    assert len(result.requests) == 51  # the folded oldest, then the last 50
    assert result.usage.input_tokens == 30_000
    assert result.context_tokens == 11


# --- hostile input --------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=8,
)
KNOWN_TYPES = ["system", "assistant", "user", "result", "rate_limit_event", "stream_event"]
KNOWN_KEYS = [
    "message",
    "content",
    "usage",
    "subtype",
    "id",
    "model",
    "parent_tool_use_id",
    "is_error",
    "result",
    "modelUsage",
    "api_error_status",
    "terminal_reason",
    "error",
    "rate_limit_info",
    "session_id",
    "total_cost_usd",
    "errors",
    "input_tokens",
    "tool_use_id",
    "type",
    "text",
]
shaped_dicts = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10) | st.sampled_from(KNOWN_TYPES),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(KNOWN_KEYS), children, max_size=5)
    ),
    max_leaves=10,
)


@given(st.lists(st.binary(max_size=300), max_size=10))
@settings(max_examples=200, deadline=None)
def test_feed_never_raises_on_arbitrary_bytes(chunks: list[bytes]) -> None:
    parser = ClaudeParser()
    for chunk in chunks:
        assert isinstance(parser.feed(chunk), list)
    assert isinstance(parser.finish(1, "x"), TurnResult)


@given(st.lists(st.tuples(st.sampled_from(KNOWN_TYPES), shaped_dicts, json_values), max_size=4))
@settings(max_examples=150, deadline=None)
def test_feed_never_raises_on_valid_json_of_the_wrong_shape(
    items: list[tuple[str, Any, Any]],
) -> None:
    parser = ClaudeParser()
    for kind, shaped, anything in items:
        for value in (
            {"type": kind, "message": shaped},
            {"type": kind, **(shaped if isinstance(shaped, dict) else {"x": shaped})},
            {"type": kind, "message": {"id": "m", "content": shaped, "usage": anything}},
            {"type": kind, "subtype": shaped, "modelUsage": anything, "rate_limit_info": shaped},
            anything,
        ):
            assert isinstance(parser.feed(json.dumps(value).encode()), list)
    for kind in KNOWN_TYPES:
        parser.feed(json.dumps({"type": kind, "message": 5}).encode())
    assert isinstance(parser.finish(0, ""), TurnResult)


ALL_REAL_LINES = [
    line for path in sorted(TRANSCRIPTS.glob("*.jsonl")) for line in path.read_bytes().splitlines()
]


@given(st.sampled_from(ALL_REAL_LINES), st.data())
@settings(max_examples=200, deadline=None)
def test_feed_never_raises_on_real_lines_cut_at_any_byte(line: bytes, data: st.DataObject) -> None:
    cut = data.draw(st.integers(min_value=0, max_value=len(line)))
    parser = ClaudeParser()
    assert isinstance(parser.feed(line[:cut]), list)
    assert isinstance(parser.feed(line[cut:]), list)
    assert isinstance(parser.feed(line), list)
    assert isinstance(parser.finish(None, ""), TurnResult)


@given(
    st.lists(st.sampled_from(ALL_REAL_LINES), max_size=12),
    st.one_of(st.none(), st.integers(min_value=-20, max_value=300)),
    st.text(max_size=100),
)
@settings(max_examples=100, deadline=None)
def test_finish_never_raises_after_any_mix_of_real_lines(
    lines: list[bytes], exit_code: int | None, stderr: str
) -> None:
    parser = ClaudeParser()
    for line in lines:
        parser.feed(line)
    result = parser.finish(exit_code, stderr)
    assert isinstance(result, TurnResult)
    assert result.context_tokens is None or result.context_tokens > 0


# --- invocation -----------------------------------------------------------------------------------


def request(session_id: str | None = None) -> TurnRequest:
    return TurnRequest(prompt="fix it ✓", workdir=Path("."), iteration=1, session_id=session_id)


def test_invocation_fresh_session() -> None:
    invocation = ClaudeAgent().invocation(request())
    assert invocation.argv[:5] == ["claude", "-p", "--output-format", "stream-json", "--verbose"]
    assert invocation.argv[5:7] == ["--permission-mode", "bypassPermissions"]
    assert "--resume" not in invocation.argv
    assert "--no-session-persistence" not in invocation.argv  # it may be resumed later
    assert "--max-budget-usd" not in invocation.argv
    assert invocation.stdin == "fix it ✓".encode()
    assert invocation.env == {"IS_SANDBOX": "1"}


def test_a_fresh_session_run_leaves_no_stored_session() -> None:
    fresh = TurnRequest(prompt="p", workdir=Path("."), iteration=1, keep_session=False)
    assert "--no-session-persistence" in ClaudeAgent().invocation(fresh).argv
    kept = ClaudeAgent(ClaudeSettings(keep_sessions=True)).invocation(fresh).argv
    assert "--no-session-persistence" not in kept
    resumed = TurnRequest(
        prompt="p", workdir=Path("."), iteration=2, session_id="abc", keep_session=False
    )
    assert "--no-session-persistence" not in ClaudeAgent().invocation(resumed).argv


@pytest.mark.parametrize(
    ("budget", "flag"),
    [(2.5, "2.5"), (0.1234567, "0.123457"), (1e-9, "0.000001"), (300.0, "300")],
)
def test_what_is_left_of_the_budget_is_the_clis_own_spend_limit(budget: float, flag: str) -> None:
    argv = (
        ClaudeAgent()
        .invocation(TurnRequest(prompt="p", workdir=Path("."), iteration=1, budget_usd=budget))
        .argv
    )
    assert argv[argv.index("--max-budget-usd") + 1] == flag


@pytest.mark.parametrize("mode", ["manual", "auto", "aNewModeOfAFutureRelease"])
def test_permission_modes_go_to_the_cli_as_given(mode: str) -> None:
    """The CLI knows its modes (2.1.332 added ``manual``); loopctl passes any through."""
    argv = ClaudeAgent(ClaudeSettings(permission_mode=mode)).invocation(request()).argv
    assert argv[argv.index("--permission-mode") + 1] == mode


#: What Claude Code 2.1.332 prints on stderr (exit code 1, nothing on stdout) for a mode it does
#: not know: ``claude -p --permission-mode bogus``.
BAD_MODE_STDERR = (
    "error: option '--permission-mode <mode>' argument 'bogus' is invalid. Allowed choices are "
    "acceptEdits, auto, bypassPermissions, manual, dontAsk, plan.\n"
)


def test_a_mode_the_cli_rejects_is_a_usage_error_naming_the_setting(tmp_path: Path) -> None:
    """A stand-in ``claude`` refuses the mode as the real one does: the turn's outcome is a usage
    error that names ``[agents.claude] permission_mode`` and the choices the CLI listed."""
    script = tmp_path / "fake_claude.py"
    script.write_text(f"import sys\nsys.stderr.write({BAD_MODE_STDERR!r})\nsys.exit(1)\n")
    agent = ClaudeAgent(
        ClaudeSettings(command=f"{sys.executable} {script}", permission_mode="bogus")
    )
    result = run_turn(
        agent,
        TurnRequest(prompt="go", workdir=tmp_path, iteration=1),
        supervision=Supervision(timeout_s=30, idle_timeout_s=30, grace_s=1),
    )
    assert result.outcome.error_kind is ErrorKind.USAGE
    message = result.outcome.message
    assert message.startswith("[agents.claude] permission_mode = 'bogus': ")
    assert "Allowed choices are acceptEdits, auto, bypassPermissions, manual, dontAsk, plan." in (
        message
    )
    # the same words after a transcript line on stdout are the agent's business, not a refusal
    script.write_text(
        'import sys\nprint(\'{"type": "system", "subtype": "init"}\')\n'
        f"sys.stderr.write({BAD_MODE_STDERR!r})\nsys.exit(1)\n"
    )
    result = run_turn(
        agent,
        TurnRequest(prompt="go", workdir=tmp_path, iteration=1),
        supervision=Supervision(timeout_s=30, idle_timeout_s=30, grace_s=1),
    )
    assert result.outcome.error_kind is ErrorKind.CRASHED


def test_invocation_with_every_setting() -> None:
    settings_ = ClaudeSettings(
        command="/opt/claude/bin/claude --debug-to-stderr",
        model="claude-opus-4-1",
        permission_mode="acceptEdits",
        max_turns=30,
        allowed_tools=["Read", "Edit", "Bash(git:*)"],
        disallowed_tools=["WebFetch", "Bash(rm *)"],
        mcp_config=["mcp.json", '{"mcpServers": {}}'],
        strict_mcp_config=True,
        append_system_prompt="Be brief.",
        extra_args=["--fallback-model", "claude-sonnet-4-5"],
    )
    argv = ClaudeAgent(settings_).invocation(request("abc-123")).argv
    assert argv[argv.index("--disallowedTools") + 1] == "WebFetch,Bash(rm *)"
    configs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--mcp-config"]
    assert configs == ["mcp.json", '{"mcpServers": {}}']
    assert "--strict-mcp-config" in argv
    assert argv[:2] == ["/opt/claude/bin/claude", "--debug-to-stderr"]
    pairs = {argv[i]: argv[i + 1] for i in range(len(argv) - 1)}
    assert pairs["--model"] == "claude-opus-4-1"
    assert pairs["--permission-mode"] == "acceptEdits"
    assert pairs["--max-turns"] == "30"
    assert pairs["--allowedTools"] == "Read,Edit,Bash(git:*)"
    assert pairs["--append-system-prompt"] == "Be brief."
    assert pairs["--resume"] == "abc-123"
    assert argv[-2:] == ["--fallback-model", "claude-sonnet-4-5"]
    assert ClaudeAgent(settings_).invocation(request()).env == {}  # no bypass, no IS_SANDBOX


@pytest.mark.parametrize(
    ("settings_", "words"),
    [
        (ClaudeSettings(max_turns=0), "max_turns"),
        (ClaudeSettings(command="claude 'unclosed"), "quotes"),
    ],
)
def test_bad_settings_raise_a_clear_value_error(settings_: ClaudeSettings, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ClaudeAgent(settings_).invocation(request())


def test_hot_path_messages_equal_those_built_the_ordinary_way() -> None:
    """The hot paths build AgentMessage without ``type.__call__`` (see ``claude._new``): what
    they make must equal a plain keyword construction, whatever fields AgentMessage gains."""
    model = "claude-sonnet-4-5"
    lines: list[dict[str, Any]] = [
        {"type": "system", "subtype": "init", "session_id": "s-1", "model": model},
        {
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "model": model,
                "content": [
                    {"type": "thinking", "thinking": "hm"},
                    {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest"}},
                ],
                "usage": {"input_tokens": 10, "output_tokens": 2},
            },
            "parent_tool_use_id": "toolu_0",
        },
        {
            "type": "user",
            "message": {
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Exit code 1\nno", "is_error": True}
                ]
            },
            "parent_tool_use_id": "toolu_0",
        },
        {
            "type": "assistant",
            "message": {
                "id": "msg_2",
                "model": model,
                "content": "All done.",  # plain-string content: one text block
                "usage": {"input_tokens": 20, "output_tokens": 3},
            },
            "parent_tool_use_id": None,
        },
        {
            "type": "assistant",
            "message": {
                "id": "msg_3",
                "model": "<synthetic>",
                "content": [{"type": "text", "text": "API Error: 500"}],
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
            "error": "server_error",
            "parent_tool_use_id": None,
        },
    ]  # fmt: skip
    parser = ClaudeParser()
    got = [message for line in lines for message in parser.feed(json.dumps(line).encode())]

    call = ToolCall(
        name="Bash", key_input="pytest", id="toolu_1",
        result_excerpt="Exit code 1\nno", is_error=True, exit_code=1,
    )  # fmt: skip
    window = got[0].context_window
    assert got == [
        AgentMessage(
            kind=MessageKind.INIT, session_id="s-1", model=model, context_window=window,
            raw_type="system",
        ),
        AgentMessage(
            kind=MessageKind.TOOL_CALL, tool_call=call, session_id="s-1", sidechain=True,
            raw_type="assistant",
        ),
        AgentMessage(
            kind=MessageKind.USAGE, usage=Usage(input_tokens=10, output_tokens=2),
            session_id="s-1", model=model, context_window=window, sidechain=True,
            raw_type="assistant",
        ),
        AgentMessage(
            kind=MessageKind.TOOL_RESULT, tool_call=call, session_id="s-1", sidechain=True,
            raw_type="user",
        ),
        AgentMessage(
            kind=MessageKind.TEXT, text="All done.", session_id="s-1", raw_type="assistant"
        ),
        AgentMessage(
            kind=MessageKind.USAGE, usage=Usage(input_tokens=20, output_tokens=3),
            session_id="s-1", model=model, context_window=window, raw_type="assistant",
        ),
        AgentMessage(
            kind=MessageKind.ERROR, text="API Error: 500", session_id="s-1", raw_type="assistant"
        ),
    ]  # fmt: skip
    assert all(type(message) is AgentMessage for message in got)
    assert parser.errors == ["API Error: 500"]
    assert parser.last_error_code == "server_error"


def test_adapter_identity() -> None:
    agent = ClaudeAgent()
    assert (agent.name, agent.executable, agent.settings_class) == (
        "claude",
        "claude",
        ClaudeSettings,
    )
    assert isinstance(agent.new_parser(), ClaudeParser)


def test_a_replayed_transcript_through_the_real_supervisor(tmp_path: Path) -> None:
    """A stand-in ``claude`` (a real subprocess) prints a recorded transcript and exits 1."""
    script = tmp_path / "fake_claude.py"
    script.write_text(
        "import sys\n"
        "sys.stdin.read()\n"
        f"sys.stdout.buffer.write(open({str(TRANSCRIPTS / 'prompt_too_long.jsonl')!r}, 'rb').read())\n"
        "sys.stdout.flush()\n"
        "sys.exit(1)\n"
    )
    agent = ClaudeAgent(ClaudeSettings(command=f"{sys.executable} {script}"))
    seen: list[Any] = []

    def on_message(message: Any) -> None:
        seen.append(message)

    result = run_turn(
        agent,
        TurnRequest(prompt="go", workdir=tmp_path, iteration=1),
        on_message=on_message,
        supervision=Supervision(timeout_s=30, idle_timeout_s=30, grace_s=1),
        transcript=tmp_path / "t.jsonl",
    )
    assert result.outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW
    assert result.exit_code == 1
    assert result.context_tokens == 150_001
    assert (tmp_path / "t.jsonl").read_bytes() == (
        TRANSCRIPTS / "prompt_too_long.jsonl"
    ).read_bytes()
    assert seen[0].kind is MessageKind.INIT
    assert seen[-1].kind is MessageKind.RESULT


# --- the scripted model server --------------------------------------------------------------------


def post(
    server: ms.ScriptedModelServer, body: dict[str, Any], path: str = "/v1/messages"
) -> tuple[int, bytes]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(
        server.url + path, data=data, headers={"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    events = []
    for block in raw.decode().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in lines:
            data = json.loads(lines["data"])
            assert lines["event"] == data["type"]
            events.append(data)
    return events


TOOLS = [{"name": "Read", "input_schema": {"type": "object"}}]


def conversation(text: str = "hi") -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 100,
        "stream": True,
        "tools": TOOLS,
        "messages": [{"role": "user", "content": text}],
    }


def test_server_streams_text_and_tool_calls_in_the_api_order() -> None:
    reply = ms.read("calc.py", say="Looking.", usage={"input_tokens": 40_000, "output_tokens": 77})
    with ms.ScriptedModelServer([reply]) as server:
        status, raw = post(server, conversation())
    assert status == 200
    events = sse_events(raw)
    assert [e["type"] for e in events] == [
        "message_start", "ping",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip
    assert events[0]["message"]["usage"]["input_tokens"] == 40_000
    tool_start = events[5]["content_block"]
    assert (tool_start["type"], tool_start["name"], tool_start["id"]) == (
        "tool_use",
        "Read",
        reply.tool_calls[0].id,
    )
    partial = "".join(e["delta"]["partial_json"] for e in events[6:8])
    assert json.loads(partial) == {"file_path": "calc.py"}
    assert events[9]["delta"]["stop_reason"] == "tool_use"
    assert events[9]["usage"]["output_tokens"] == 77


def test_server_consumes_replies_only_for_conversation_requests() -> None:
    scenario = [ms.text("first"), ms.prompt_too_long(), ms.auth_error()]
    with ms.ScriptedModelServer(scenario, early_output_tokens=False) as server:
        _, first = post(server, conversation())
        side_status, side = post(
            server,
            {
                "model": "haiku",
                "max_tokens": 50,
                "messages": [{"role": "user", "content": "title?"}],
            },
        )
        compact = conversation()
        compact["messages"][-1]["content"] = [
            {
                "type": "text",
                "text": "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n...",
            }
        ]
        _, summary = post(server, compact)
        count_status, count = post(server, {"messages": []}, "/v1/messages/count_tokens")
        too_long_status, too_long = post(server, conversation())
        plain_status, plain = post(server, {**conversation(), "stream": False})
        _, after = post(server, conversation())
        assert server.remaining == 0
        kinds = [r.kind for r in server.requests]
        indexes = [r.reply_index for r in server.requests]
    start = sse_events(first)[0]["message"]["usage"]
    assert start["output_tokens"] == 1  # like the real API: the final count comes later
    assert sse_events(first)[3]["delta"]["text"] == "first"
    assert side_status == 200
    assert "done" in side.decode()
    assert "<summary>" in summary.decode()
    assert count_status == 200
    assert json.loads(count)["input_tokens"] >= 1
    assert too_long_status == 400
    assert json.loads(too_long) == {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "prompt is too long: 210000 tokens > 200000 maximum",
        },
        "request_id": json.loads(too_long)["request_id"],
    }
    assert plain_status == 401
    assert json.loads(plain)["error"]["type"] == "authentication_error"
    assert sse_events(after)[3]["delta"]["text"] == "done"  # the scenario is used up
    assert kinds == ["main", "side", "compact", "count_tokens", "main", "main", "main"]
    assert indexes == [0, None, None, None, 1, 2, None]


def test_server_repeats_a_reply_times_and_records_bodies() -> None:
    with ms.ScriptedModelServer([ms.rate_limited(times=2), {"text": "ok"}]) as server:
        statuses = [post(server, conversation(f"m{i}"))[0] for i in range(3)]
        bodies = [r.messages[-1]["content"] for r in server.main_requests]
    assert statuses == [429, 429, 200]
    assert bodies == ["m0", "m1", "m2"]


def test_server_plain_dict_replies_and_bad_keys() -> None:
    reply = ms.as_reply(
        {"tools": [{"name": "Bash", "input": {"command": "ls"}}], "usage": {"input_tokens": 5}}
    )
    assert reply.tool_calls[0].name == "Bash"
    assert reply.resolved_stop_reason() == "tool_use"
    error = ms.as_reply(
        {"error": {"status": 429, "type": "rate_limit_error", "message": "slow down"}}
    )
    assert error.error is not None
    assert error.error.status == 429
    with pytest.raises(ValueError, match="unknown reply keys"):
        ms.as_reply({"txt": "typo"})


def test_server_env_points_the_cli_at_the_server_and_a_private_home(tmp_path: Path) -> None:
    with ms.ScriptedModelServer() as server:
        env = server.cli_env(tmp_path / "home")
        assert env["ANTHROPIC_BASE_URL"] == server.url
    assert env["HOME"] == str(tmp_path / "home")
    assert env["CLAUDE_CONFIG_DIR"].startswith(env["HOME"])
    assert (tmp_path / "home" / ".claude").is_dir()
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    with pytest.raises(RuntimeError, match="start"):
        _ = server.url


@pytest.mark.parametrize("position", range(len(KEY_INPUT_FIELDS)))
def test_a_tool_calls_key_input_is_its_most_telling_field(position: int) -> None:
    """The first set field of KEY_INPUT_FIELDS names the call, whatever comes after it."""
    field = KEY_INPUT_FIELDS[position]
    later = {name: f"later {name}" for name in KEY_INPUT_FIELDS[position + 1 :]}
    line = {
        "type": "assistant",
        "message": {
            "id": "m1",
            "content": [
                {
                    "type": "tool_use",
                    "id": "t1",
                    "name": "Tool",
                    "input": {**later, field: "x" * 900, "unrelated": 1},
                }
            ],
        },
    }
    parser = ClaudeParser()
    parser.feed(json.dumps(line).encode())
    assert parser.tool_calls[-1].key_input == "x" * 500
