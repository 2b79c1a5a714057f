"""The ``codex`` adapter: its command line, and its parser on real Codex CLI transcripts."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import Recordings

from loopctl.agents.base import TurnRequest
from loopctl.agents.codex import CodexAgent, CodexParser, CodexSettings, find_session_log
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import ErrorKind, MessageKind, TurnResult, Usage

RECORDED = Recordings("codex", "jsonl")
DATA = RECORDED.folder
TRANSCRIPTS = RECORDED.names
_meta = RECORDED.meta


def _parse(name: str, parser: CodexParser | None = None) -> tuple[TurnResult, list[Any]]:
    return RECORDED.parse(name, parser or CodexParser())


def _codex_home(tmp_path: Path, *names: str) -> Path:
    """A CODEX_HOME holding the recorded session logs where Codex keeps them."""
    home = tmp_path / "codex-home"
    for name in names:
        thread = json.loads((DATA / f"{name}.jsonl").read_text().splitlines()[0])["thread_id"]
        day = home / "sessions" / "2026" / "11" / "21"
        day.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(
            DATA / f"{name}.rollout.jsonl", day / f"rollout-2026-11-21T23-45-01-{thread}.jsonl"
        )
    return home


# --- the command line -------------------------------------------------------------------------


def test_fresh_turn_command_line_sends_the_prompt_on_stdin(tmp_path: Path) -> None:
    agent = CodexAgent(CodexSettings(model="gpt-5-codex", extra_args=["--color", "never"]))
    invocation = agent.invocation(TurnRequest("fix it", tmp_path, 1))
    assert invocation.argv == [
        "codex", "exec", "--json", "--skip-git-repo-check", "-m", "gpt-5-codex",
        "-c", 'approval_policy="never"', "-c", 'sandbox_mode="workspace-write"',
        "--color", "never", "-",
    ]  # fmt: skip
    assert invocation.stdin == b"fix it"


def test_resume_puts_the_session_id_after_the_options(tmp_path: Path) -> None:
    agent = CodexAgent(CodexSettings(network_access=True, command="npx codex"))
    argv = agent.invocation(TurnRequest("go on", tmp_path, 2, session_id="abc-123")).argv
    assert argv[:4] == ["npx", "codex", "exec", "resume"]
    assert argv[-2:] == ["abc-123", "-"]
    assert "sandbox_workspace_write.network_access=true" in argv


def test_bypass_sandbox_replaces_the_sandbox_options(tmp_path: Path) -> None:
    argv = (
        CodexAgent(CodexSettings(bypass_sandbox=True))
        .invocation(TurnRequest("p", tmp_path, 1))
        .argv
    )
    assert "--dangerously-bypass-approvals-and-sandbox" in argv
    assert not any("sandbox_mode" in arg for arg in argv)


#: What Codex 0.169 prints on stderr (exit 1, nothing on stdout) for ``-c sandbox_mode="yolo"``.
BAD_SANDBOX_STDERR = (
    "Error loading config.toml: unknown variant `yolo`, expected one of `read-only`, "
    "`workspace-write`, `danger-full-access`\nin `sandbox_mode`\n"
)


def test_a_sandbox_mode_codex_rejects_is_a_usage_error_naming_the_setting(tmp_path: Path) -> None:
    """loopctl passes the mode as given; Codex's own refusal names the setting and the modes."""
    agent = CodexAgent(CodexSettings(sandbox="yolo"))
    argv = agent.invocation(TurnRequest("p", tmp_path, 1)).argv
    assert 'sandbox_mode="yolo"' in argv
    message = agent.rejected_command_line(BAD_SANDBOX_STDERR, argv)
    assert message is not None
    assert message.startswith("[agents.codex] sandbox = 'yolo': ")
    assert "`read-only`, `workspace-write`, `danger-full-access`" in message


def test_a_config_override_codex_rejects_names_config_overrides(tmp_path: Path) -> None:
    agent = CodexAgent(CodexSettings(config_overrides=["model_reasoning_effort=99"]))
    argv = agent.invocation(TurnRequest("p", tmp_path, 1)).argv
    assert argv[argv.index("model_reasoning_effort=99") - 1] == "-c"
    stderr = (
        "Error loading config.toml: unknown variant `99`, expected one of `minimal`, `low`\n"
        "in `model_reasoning_effort`\n"
    )
    message = agent.rejected_command_line(stderr, argv)
    assert message is not None
    assert message.startswith("[agents.codex] config_overrides: ")


def test_a_fresh_session_run_asks_codex_not_to_store_sessions(tmp_path: Path) -> None:
    fresh = TurnRequest("p", tmp_path, 1, keep_session=False)
    agent = CodexAgent()
    assert "--ephemeral" in agent.invocation(fresh).argv
    assert agent.new_parser().codex_home is None  # type: ignore[attr-defined]  # no log to read
    kept = CodexAgent(CodexSettings(keep_sessions=True))
    assert "--ephemeral" not in kept.invocation(fresh).argv
    assert kept.new_parser().codex_home is not None  # type: ignore[attr-defined]
    assert "--ephemeral" not in agent.invocation(TurnRequest("p", tmp_path, 1)).argv
    resumed = TurnRequest("p", tmp_path, 2, session_id="abc", keep_session=False)
    assert "--ephemeral" not in agent.invocation(resumed).argv


def test_without_a_model_setting_the_model_of_codexs_config_is_reported(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text('model = "gpt-5-codex"\n[features]\nx = true\n')
    parser = CodexAgent(CodexSettings(env={"CODEX_HOME": str(home)})).new_parser()
    assert parser.model == "gpt-5-codex"  # type: ignore[attr-defined]
    named = CodexAgent(CodexSettings(model="o3", env={"CODEX_HOME": str(home)})).new_parser()
    assert named.model == "o3"  # type: ignore[attr-defined]
    (home / "config.toml").write_text("model = [")
    assert CodexAgent(CodexSettings(env={"CODEX_HOME": str(home)})).new_parser().model is None  # type: ignore[attr-defined]


def test_mcp_servers_and_other_overrides_go_to_codex_as_config_overrides(tmp_path: Path) -> None:
    overrides = ['mcp_servers.docs.command="docs-mcp"', "tools.web_search=true"]
    argv = (
        CodexAgent(CodexSettings(config_overrides=overrides))
        .invocation(TurnRequest("p", tmp_path, 1))
        .argv
    )
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg == "-c"][-2:] == overrides


# --- recorded transcripts ---------------------------------------------------------------------

EXPECTED: dict[str, tuple[ErrorKind | None, str]] = {
    "success_text": (None, ""),
    "success_tools": (None, ""),
    "resumed": (None, ""),
    "context_overflow": (ErrorKind.CONTEXT_OVERFLOW, "ran out of room in the model's context"),
    "auth_401": (ErrorKind.AUTH, "401 Unauthorized: Incorrect API key"),
    "missing_api_key": (ErrorKind.AUTH, "Missing environment variable"),
    "rate_limit_429": (ErrorKind.RATE_LIMIT, "429 Too Many Requests"),
    "rate_limit_stream": (ErrorKind.RATE_LIMIT, "Please try again in 20s"),
    "usage_limit": (ErrorKind.RATE_LIMIT, "hit your usage limit"),
    "quota_exceeded": (ErrorKind.BILLING, "Quota exceeded. Check your plan and billing"),
    "server_overloaded": (ErrorKind.NETWORK, "high demand"),
    "stream_dropped": (ErrorKind.NETWORK, "stream disconnected before completion"),
    "waiting_for_network": (ErrorKind.NETWORK, "waiting for network"),
}


def test_every_recorded_transcript_has_an_expectation() -> None:
    assert sorted(EXPECTED) == TRANSCRIPTS


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_recorded_transcript_outcome(name: str) -> None:
    result, messages = _parse(name)
    kind, words = EXPECTED[name]
    assert result.outcome.error_kind is kind
    assert words in result.outcome.message
    assert result.session_id
    assert result.session_id.count("-") == 4
    assert messages[0].kind is MessageKind.INIT
    if kind is None:
        assert result.requests
        assert result.context_tokens
    else:
        assert result.requests == []
        assert result.context_tokens is None


def test_rate_limit_retry_times_come_from_codex_words() -> None:
    parser = CodexParser(wall_clock=lambda: 1000.0)
    result, _ = _parse("rate_limit_stream", parser)
    assert result.outcome.retry_at == 1020.0
    result, _ = _parse("usage_limit")
    assert result.outcome.retry_at is not None  # "try again at Nov 22nd, 2026 12:44 AM"
    assert _parse("rate_limit_429")[0].outcome.retry_at is None  # Codex said no time


def test_tool_calls_carry_command_exit_code_and_output() -> None:
    result, messages = _parse("success_tools")
    assert [(c.name, c.key_input, c.exit_code, c.is_error) for c in result.tool_calls] == [
        ("command_execution", "cat hello.txt", 0, False),
        ("file_change", result.tool_calls[1].key_input, None, False),
        ("command_execution", "python3 -c 'raise SystemExit(3)'", 3, True),
    ]
    assert result.tool_calls[1].key_input.endswith("greet.py")
    assert "hello world" in (result.tool_calls[0].result_excerpt or "")
    kinds = [m.kind for m in messages]
    assert kinds.count(MessageKind.TOOL_CALL) == 3
    assert kinds.count(MessageKind.TOOL_RESULT) == 3
    assert result.final_text == "Added greet.py; the check exits 3."


def test_without_the_session_log_usage_is_the_turn_total_and_fill_an_estimate() -> None:
    result, messages = _parse("success_tools")
    # four requests of 1000, 1300, 1450 and 1600 input tokens: the stream only has the sum
    assert result.requests == [Usage(1600, 102, 0, 3750)]
    assert result.context_tokens == (5350 + 102) // 4  # lower bound of the last request's 1612
    assert not [m for m in messages if m.kind is MessageKind.USAGE]


def test_the_session_log_gives_exact_requests_fill_window_and_model(tmp_path: Path) -> None:
    parser = CodexParser(codex_home=_codex_home(tmp_path, "success_tools"))
    result, messages = _parse("success_tools", parser)
    assert result.requests == [
        Usage(1000, 20, 0, 0),
        Usage(300, 40, 0, 1000),
        Usage(150, 30, 0, 1300),
        Usage(150, 12, 0, 1450),
    ]
    assert result.context_tokens == 1612
    assert result.model == "gpt-5.5"
    assert result.context_window
    assert result.context_window > 100_000
    usage = [m for m in messages if m.kind is MessageKind.USAGE]
    assert [m.usage for m in usage] == result.requests
    assert usage[-1].context_window == result.context_window


def test_a_resumed_turn_reads_only_its_own_requests_from_the_log(tmp_path: Path) -> None:
    parser = CodexParser(codex_home=_codex_home(tmp_path, "resumed"))
    result, _ = _parse("resumed", parser)
    assert result.requests == [Usage(200, 5, 0, 1600)]
    assert result.context_tokens == 1805


def test_session_totals_are_differenced_across_turns_of_one_adapter() -> None:
    agent = CodexAgent(CodexSettings(session_log=False))
    first, _ = _parse("success_tools", agent.new_parser())  # type: ignore[arg-type]
    second, _ = _parse("resumed", agent.new_parser())  # type: ignore[arg-type]
    assert first.usage.context_tokens == 5350 + 102
    # the resumed turn's session total is 7150 in / 107 out: only the difference is this turn's
    assert second.requests == [Usage(200, 5, 0, 1600)]


def test_a_log_that_disagrees_with_the_stream_is_ignored(tmp_path: Path) -> None:
    home = _codex_home(tmp_path, "success_tools")
    log = next(home.glob("sessions/*/*/*/*.jsonl"))
    log.write_text(log.read_text().replace('"input_tokens":5350', '"input_tokens":9999'))
    result, _ = _parse("success_tools", CodexParser(codex_home=home))
    assert len(result.requests) == 1  # the stream's own total, not the stale log


def test_find_session_log_refuses_glob_characters(tmp_path: Path) -> None:
    home = _codex_home(tmp_path, "success_tools")
    assert find_session_log(home, "*") is None
    assert find_session_log(home, "../x") is None


# --- error lines and giving up --------------------------------------------------------------

RECONNECT = (
    b'{"type":"error","message":"Reconnecting... waiting for network (Connection failed: '
    b'error sending request)"}'
)


def test_repeated_error_lines_are_not_terminal() -> None:
    parser = CodexParser(clock=lambda: 5.0)
    parser.feed(b'{"type":"thread.started","thread_id":"t-1"}')
    for _ in range(500):
        assert [m.kind for m in parser.feed(RECONNECT)] == [MessageKind.ERROR]
        assert not parser.done
    parser.feed(b'{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"ok"}}')
    parser.feed(b'{"type":"turn.completed","usage":{"input_tokens":10,"output_tokens":2}}')
    assert parser.done
    result = parser.finish(0, "")
    assert result.outcome.ok
    assert result.final_text == "ok"


def test_reconnecting_forever_gives_up_after_the_configured_time() -> None:
    now = [0.0]
    parser = CodexParser(reconnect_give_up_s=30.0, clock=lambda: now[0])
    for second in range(0, 40, 5):
        now[0] = float(second)
        parser.feed(RECONNECT)
        if second < 30:
            assert not parser.done
    assert parser.done
    outcome = parser.finish(None, "").outcome
    assert outcome.error_kind is ErrorKind.NETWORK
    assert "30 s" in outcome.message


def test_progress_between_reconnects_restarts_the_give_up_clock() -> None:
    now = [0.0]
    parser = CodexParser(reconnect_give_up_s=30.0, clock=lambda: now[0])
    for second in range(0, 100, 10):
        now[0] = float(second)
        parser.feed(RECONNECT)
        parser.feed(b'{"type":"item.started","item":{"id":"x","type":"command_execution"}}')
    assert not parser.done


def test_exit_without_result_lines() -> None:
    assert CodexParser().finish(0, "").outcome.error_kind is ErrorKind.INVALID_OUTPUT
    crashed = CodexParser().finish(2, "Error: unexpected argument '--bogus' found").outcome
    assert crashed.error_kind is ErrorKind.CRASHED
    assert "--bogus" in crashed.message
    assert CodexParser().finish(None, "").outcome.error_kind is ErrorKind.CRASHED


# --- never raises -----------------------------------------------------------------------------

EVENT_TYPES = [
    "thread.started", "turn.started", "item.started", "item.updated", "item.completed",
    "turn.completed", "turn.failed", "error",
]  # fmt: skip
JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON_VALUES = (
    JSON_LEAVES
    | st.lists(JSON_LEAVES, max_size=3)
    | st.dictionaries(st.text(max_size=8), JSON_LEAVES, max_size=3)
)
ITEM_TYPES = st.sampled_from(
    ["agent_message", "reasoning", "command_execution", "file_change", "mcp_tool_call",
     "web_search", "todo_list", "error", "collab_tool_call", "other"]
)  # fmt: skip
KEYS = st.sampled_from(
    ["thread_id", "usage", "error", "message", "id", "text", "command", "exit_code",
     "aggregated_output", "status", "changes", "items", "server", "tool", "arguments", "result",
     "input_tokens", "cached_input_tokens", "output_tokens", "query"]
)  # fmt: skip
SHAPED = st.fixed_dictionaries(
    {"type": st.sampled_from(EVENT_TYPES)},
    optional={
        "item": st.dictionaries(KEYS, JSON_VALUES, max_size=6).flatmap(
            lambda d: st.builds(lambda t: {**d, "type": t}, ITEM_TYPES)
        ),
        "usage": st.dictionaries(KEYS, JSON_VALUES, max_size=4) | JSON_VALUES,
        "error": JSON_VALUES,
        "message": JSON_VALUES,
        "thread_id": JSON_VALUES,
    },
)
REAL_LINES = [
    line for name in TRANSCRIPTS for line in (DATA / f"{name}.jsonl").read_bytes().splitlines()
]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(max_size=200) | SHAPED.map(lambda d: json.dumps(d).encode()), max_size=12)
)
def test_parser_never_raises_on_garbage_or_wrong_shapes(lines: list[bytes]) -> None:
    parser = CodexParser()
    for line in lines:
        assert isinstance(parser.feed(line), list)
        parser.done  # noqa: B018 - must not raise either
    assert isinstance(parser.finish(None, "x"), TurnResult)


def test_parser_never_raises_on_real_lines_cut_at_every_position() -> None:
    for line in REAL_LINES:
        for cut in range(len(line)):
            parser = CodexParser()
            assert parser.feed(line[:cut]) == [] or cut > 0
            parser.finish(0, "")


# --- the real CLI, against a scripted Responses API on 127.0.0.1 ---------------------------------


def _real_codex() -> str:
    """``codex`` under ``$LOOPCTL_E2E_NPM_PREFIX`` or on PATH, as in ``tests/e2e/conftest.py``."""
    prefix = os.environ.get("LOOPCTL_E2E_NPM_PREFIX")
    candidates = [Path(prefix) / "node_modules" / ".bin" / "codex"] if prefix else []
    found = next((str(c) for c in candidates if c.is_file()), None) or shutil.which("codex")
    if found:
        return found
    reason = "`codex` not found: `npm install --prefix DIR @openai/codex`, set LOOPCTL_E2E_NPM_PREFIX=DIR"
    if os.environ.get("LOOPCTL_E2E_REQUIRE", "") not in ("", "0"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.e2e
def test_real_codex_turn_through_the_supervisor(tmp_path: Path) -> None:
    codex = _real_codex()
    from fake_responses_api import (
        API_KEY_ENV,
        codex_provider_args,
        function_call_reply,
        serve,
        text_reply,
        usage,
    )

    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "codex-home"
    home.mkdir()  # Codex refuses a CODEX_HOME that does not exist
    replies = [
        function_call_reply(
            "exec_command", {"cmd": "echo made > made.txt"}, "c1", "r1", usage(900, 20)
        ),
        text_reply("Made it. LOOPCTL_DONE", "r2", usage(1000, 8, cached=900)),
    ]
    with serve(replies) as server:
        agent = CodexAgent(
            CodexSettings(
                command=codex,
                model="gpt-5.5",
                extra_args=codex_provider_args(server.base_url),
                env={"CODEX_HOME": str(home), API_KEY_ENV: "sk-fake"},
            )
        )
        result = run_turn(
            agent,
            TurnRequest("make a file", work, 1),
            supervision=Supervision(timeout_s=60, idle_timeout_s=30, grace_s=2, kill_after_s=1),
        )
        prompt_seen = json.dumps(server.requests[0])
    assert result.outcome.ok, result.outcome.message
    assert (work / "made.txt").read_text().strip() == "made"
    assert "make a file" in prompt_seen
    assert result.final_text == "Made it. LOOPCTL_DONE"
    assert result.requests == [Usage(900, 20, 0, 0), Usage(100, 8, 0, 900)]
    assert result.context_tokens == 1008
