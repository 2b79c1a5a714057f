"""``parse_transcript``: any adapter's transcript, streamed, summarised and rendered."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loopctl.agents.aider import AiderAgent
from loopctl.agents.base import AgentAdapter, Invocation, StreamParser, TurnRequest
from loopctl.agents.codex import CodexAgent, CodexSettings
from loopctl.agents.gemini import GeminiAgent
from loopctl.agents.scripted import ScriptedAgent, ScriptedSettings, write_scenario
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.agents.transcript import (
    classify_error_text,
    parse_transcript,
    render_summary,
    retry_at_from_text,
    summary_to_json,
)
from loopctl.model import AgentMessage, ErrorKind, MessageKind, TurnResult

DATA = Path(__file__).parent / "data" / "transcripts"
ADAPTERS: dict[str, AgentAdapter] = {
    "codex": CodexAgent(CodexSettings(session_log=False)),
    "gemini": GeminiAgent(),
    "aider": AiderAgent(),
}
RECORDED = sorted(
    (folder.name, meta.name[: -len(".meta.json")])
    for folder in DATA.iterdir()
    if folder.is_dir()
    for meta in folder.glob("*.meta.json")
)


def _transcript(agent: str, name: str) -> Path:
    return DATA / agent / (f"{name}.txt" if agent == "aider" else f"{name}.jsonl")


@pytest.mark.parametrize(("agent", "name"), RECORDED)
def test_every_recorded_transcript_parses(agent: str, name: str) -> None:
    meta = json.loads((DATA / agent / f"{name}.meta.json").read_text())
    summary = parse_transcript(
        ADAPTERS[agent],
        _transcript(agent, name),
        exit_code=meta["exit_code"],
        stderr=meta["stderr"],
    )
    assert summary.agent == agent
    assert summary.ok is (summary.error_kind is None)
    assert summary.ok is name.startswith(("success", "resumed", "failed_match"))
    assert summary.invalid_lines == 0 or agent == "aider"
    text = render_summary(summary)
    assert summary.path in text
    assert "outcome: " in text
    json.dumps(summary_to_json(summary))  # plain data


def test_summary_of_a_codex_turn_shows_fill_and_outcome() -> None:
    summary = parse_transcript(
        ADAPTERS["codex"], DATA / "codex" / "context_overflow.jsonl", exit_code=1
    )
    assert summary.error_kind == "context_overflow"
    text = render_summary(summary)
    assert "ran out of room" in text
    assert "fresh session" in text


def test_gemini_rows_and_fill_against_the_window() -> None:
    summary = parse_transcript(ADAPTERS["gemini"], DATA / "gemini" / "success_tools.jsonl")
    assert [
        (row.input_tokens, row.cache_read_input_tokens, row.output_tokens) for row in summary.rows
    ] == [(3450, 9500, 81)]
    assert summary.context_window == 1_048_576
    assert summary.fill_ratio is not None
    assert 0 < summary.fill_ratio < 0.01
    assert "/ 1,048,576 (0%)" in render_summary(summary)
    assert len(summary.tool_calls) == 3


@pytest.mark.parametrize("size", [4000, 8000, 65536])
def test_a_truncated_line_in_the_middle_is_skipped_and_counted(tmp_path: Path, size: int) -> None:
    lines = (DATA / "gemini" / "success_tools.jsonl").read_bytes().splitlines()
    cut = json.dumps({"type": "message", "role": "assistant", "content": "x" * size}).encode()
    broken = cut[:size]
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join([*lines[:5], broken, *lines[5:]]) + b"\n")
    summary = parse_transcript(ADAPTERS["gemini"], path)
    whole = parse_transcript(ADAPTERS["gemini"], DATA / "gemini" / "success_tools.jsonl")
    assert summary.lines == whole.lines + 1
    assert summary.invalid_lines == 1
    assert summary.skipped_lines == whole.skipped_lines + 1
    assert summary.ok
    assert summary.rows == whole.rows
    assert summary.final_text == whole.final_text


def test_lines_over_the_limit_are_dropped_unread(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    big = b'{"type":"message","role":"assistant","content":"' + b"y" * 300_000 + b'"}'
    body = (DATA / "codex" / "success_text.jsonl").read_bytes()
    first, rest = body.split(b"\n", 1)
    path.write_bytes(first + b"\n" + big + b"\n" + rest)
    summary = parse_transcript(ADAPTERS["codex"], path, max_line_bytes=100_000)
    assert summary.oversized_lines == 1
    assert summary.ok
    assert summary.final_text == "Hello! LOOPCTL_DONE"


def test_a_file_without_a_final_newline_and_with_binary_noise(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(
        b"\xff\xfe\x00garbage\n\n" + (DATA / "codex" / "success_text.jsonl").read_bytes().rstrip()
    )
    summary = parse_transcript(ADAPTERS["codex"], path)
    assert summary.ok
    assert summary.invalid_lines == 1
    assert summary.skipped_lines == 2


def test_the_scripted_agents_own_transcript(tmp_path: Path) -> None:
    write_scenario(
        tmp_path / "scenario.toml",
        [[{"say": "working"}, {"run": "echo hi"}, {"usage": {"input_tokens": 1000, "output_tokens": 50}},
          {"usage": {"input_tokens": 3000, "output_tokens": 20}}, {"done": True}]],
        context_window=10_000,
    )  # fmt: skip
    transcript = tmp_path / "turn.jsonl"
    agent = ScriptedAgent(ScriptedSettings(scenario="scenario.toml"))
    turn = run_turn(
        agent,
        TurnRequest("go", tmp_path, 1),
        transcript=transcript,
        supervision=Supervision(timeout_s=20, idle_timeout_s=10, grace_s=0.3, kill_after_s=0.5),
    )
    summary = parse_transcript(agent, transcript)
    assert [row.context_tokens for row in summary.rows] == [1050, 3020]
    assert summary.context_window == 10_000
    assert summary.context_tokens == turn.context_tokens
    assert summary.ok
    assert summary.tool_calls[0].name
    assert "3,020 / 10,000 (30%)" in render_summary(summary)


class _Exploding(StreamParser):
    def feed(self, line: bytes) -> list[AgentMessage]:
        if b"boom" in line:
            raise RuntimeError("parser bug")
        return [AgentMessage(kind=MessageKind.TEXT, text="x")]

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        raise RuntimeError("finish bug")


class _ExplodingAgent(AgentAdapter):
    name = "exploding"

    def invocation(self, request: TurnRequest) -> Invocation:
        return Invocation(argv=["true"])

    def new_parser(self) -> StreamParser:
        return _Exploding()


def test_a_broken_parser_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"fine\nboom\nfine\n")
    summary = parse_transcript(_ExplodingAgent(), path)
    assert summary.lines == 3
    assert summary.skipped_lines == 1
    assert summary.messages == 2
    assert summary.error_kind == "invalid_output"
    assert "finish bug" in summary.message


def test_the_claude_adapter_if_present(tmp_path: Path) -> None:
    claude = pytest.importorskip("loopctl.agents.claude")
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"type":"system","subtype":"init","session_id":"s"}\nnot json\n{"type":\n')
    summary = parse_transcript(claude.ClaudeAgent(), path, exit_code=1)
    assert summary.agent == "claude"
    assert summary.lines == 3
    assert not summary.ok


# --- the shared helpers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("Codex ran out of room in the model's context window.", ErrorKind.CONTEXT_OVERFLOW),
        ("prompt is too long: 210000 tokens > 200000 maximum", ErrorKind.CONTEXT_OVERFLOW),
        ("Quota exceeded. Check your plan and billing details.", ErrorKind.BILLING),
        ("Quota exceeded for quota metric 'requests'. Please retry in 5s.", ErrorKind.RATE_LIMIT),
        ("You've hit your usage limit. Try again at 3:05 PM.", ErrorKind.RATE_LIMIT),
        ("exceeded retry limit, last status: 429 Too Many Requests", ErrorKind.RATE_LIMIT),
        ("unexpected status 401 Unauthorized: bad key", ErrorKind.AUTH),
        ("stream disconnected before completion: error sending request", ErrorKind.NETWORK),
        ("something odd", ErrorKind.UNKNOWN),
    ],
)
def test_classify_error_text(text: str, kind: ErrorKind) -> None:
    assert classify_error_text(text) is kind


def test_retry_at_from_text() -> None:
    assert retry_at_from_text("Please try again in 20s.", lambda: 100.0) == 120.0
    assert retry_at_from_text("Please try again in 6m23.5s.", lambda: 0.0) == 383.5
    assert retry_at_from_text("try again in 2 hours", lambda: 0.0) == 7200.0
    assert retry_at_from_text('{"retryDelay": "2s"}', lambda: 10.0) == 12.0
    assert retry_at_from_text("no time here", lambda: 0.0) is None
    dated = retry_at_from_text("or try again at Nov 22nd, 2026 12:44 AM.", lambda: 0.0)
    assert dated is not None
    import datetime

    moment = datetime.datetime.fromtimestamp(dated)
    assert (moment.year, moment.month, moment.day, moment.hour, moment.minute) == (
        2026,
        11,
        22,
        0,
        44,
    )
    now = datetime.datetime(2026, 1, 5, 15, 0).timestamp()
    later = retry_at_from_text("Try again at 3:05 PM.", lambda: now)
    assert later == now + 300
    earlier = retry_at_from_text("Try again at 2:00 PM.", lambda: now)
    assert earlier is not None
    assert earlier > now
