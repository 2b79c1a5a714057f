"""The ``gemini`` adapter: its command line, exit codes, and its parser on real CLI transcripts."""

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
from loopctl.agents.gemini import (
    GeminiAgent,
    GeminiParser,
    GeminiSettings,
    http_status_from_exit_code,
)
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import ErrorKind, MessageKind, TurnResult, Usage

RECORDED = Recordings("gemini", "jsonl")
DATA = RECORDED.folder
TRANSCRIPTS = RECORDED.names
_meta = RECORDED.meta


def _parse(name: str, parser: GeminiParser | None = None) -> tuple[TurnResult, list[Any]]:
    return RECORDED.parse(name, parser or GeminiParser())


# --- the command line -------------------------------------------------------------------------


def test_command_line_is_headless_unattended_and_takes_the_prompt_on_stdin(tmp_path: Path) -> None:
    agent = GeminiAgent(GeminiSettings(model="gemini-2.5-pro", extra_args=["--debug"]))
    invocation = agent.invocation(TurnRequest("fix it", tmp_path, 1))
    assert invocation.argv == [
        "gemini", "--prompt", "", "--output-format", "stream-json", "--approval-mode", "yolo",
        "--skip-trust", "--model", "gemini-2.5-pro", "--debug",
    ]  # fmt: skip
    assert invocation.stdin == b"fix it"


def test_resume_and_sandbox(tmp_path: Path) -> None:
    agent = GeminiAgent(GeminiSettings(sandbox=True, skip_trust=False, approval_mode="auto_edit"))
    argv = agent.invocation(TurnRequest("p", tmp_path, 2, session_id="5705eb3a")).argv
    assert argv[-2:] == ["--resume", "5705eb3a"]
    assert "--sandbox" in argv
    assert "--skip-trust" not in argv
    assert "auto_edit" in argv


#: What Gemini CLI 0.61 prints on stderr (exit 1, nothing on stdout) for
#: ``--approval-mode always``: yargs's refusal, then its usage text.
BAD_MODE_STDERR = (
    "Invalid values:\n"
    '  Argument: approval-mode, Given: "always", Choices: "default", "auto_edit", "yolo", "plan"\n'
    "Usage: gemini [options] [command]\n\nGemini CLI - Defaults to interactive mode.\n"
)


def test_an_approval_mode_the_cli_rejects_is_a_usage_error_naming_the_setting(
    tmp_path: Path,
) -> None:
    agent = GeminiAgent(GeminiSettings(approval_mode="always"))
    argv = agent.invocation(TurnRequest("p", tmp_path, 1)).argv
    assert argv[argv.index("--approval-mode") + 1] == "always"  # the CLI judges
    message = agent.rejected_command_line(BAD_MODE_STDERR, argv)
    assert message is not None
    assert message.startswith("[agents.gemini] approval_mode = 'always': ")
    assert 'Choices: "default", "auto_edit", "yolo", "plan"' in message
    unknown = agent.rejected_command_line("Unknown argument: bogus\nUsage: gemini\n", argv)
    assert unknown is not None
    assert "refused to start" in unknown


def test_mcp_servers_and_policies_pass_through(tmp_path: Path) -> None:
    settings_ = GeminiSettings(
        allowed_mcp_server_names=["docs", "search"], policy=["policies/", "deny-web.toml"]
    )
    argv = GeminiAgent(settings_).invocation(TurnRequest("p", tmp_path, 1)).argv
    servers = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--allowed-mcp-server-names"]
    assert servers == ["docs", "search"]
    assert [argv[i + 1] for i, arg in enumerate(argv) if arg == "--policy"] == [
        "policies/",
        "deny-web.toml",
    ]


# --- recorded transcripts ---------------------------------------------------------------------

EXPECTED: dict[str, tuple[ErrorKind | None, str]] = {
    "success_text": (None, ""),
    "success_tools": (None, ""),
    "resumed": (None, ""),
    "auth_missing": (ErrorKind.AUTH, "Please set an Auth method"),
    "api_key_invalid": (ErrorKind.AUTH, "API key not valid"),
    "permission_denied": (ErrorKind.AUTH, "PERMISSION_DENIED"),
    "quota_exhausted": (ErrorKind.RATE_LIMIT, "exhausted your daily quota"),
    "context_overflow": (ErrorKind.CONTEXT_OVERFLOW, "exceeds the maximum number of tokens"),
    "max_turns": (ErrorKind.MAX_TURNS, "Reached max session turns"),
    "server_error": (ErrorKind.NETWORK, "failed with status 500"),
}


def test_every_recorded_transcript_has_an_expectation() -> None:
    assert sorted(EXPECTED) == TRANSCRIPTS


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_recorded_transcript_outcome(name: str) -> None:
    result, _ = _parse(name)
    kind, words = EXPECTED[name]
    assert result.outcome.error_kind is kind, result.outcome.message
    assert words in result.outcome.message
    if name != "auth_missing":  # that one printed nothing on stdout
        assert result.session_id
        assert result.model == "gemini-2.5-flash"
        assert result.context_window == 1_048_576  # from the model table


def test_success_with_tools_text_and_usage() -> None:
    result, messages = _parse("success_tools")
    assert [(c.name, c.is_error) for c in result.tool_calls] == [
        ("run_shell_command", False),
        ("write_file", False),
        ("read_file", True),
    ]
    assert result.tool_calls[0].key_input == "cat hello.txt"
    assert result.tool_calls[0].result_excerpt == "hello world"
    assert "File not found" in (result.tool_calls[2].result_excerpt or "")
    assert result.final_text == "Wrote greet.py. LOOPCTL_DONE"
    # totals over four requests (3000, 3200, 3300 and 3450 prompt tokens; 9500 of them cached)
    assert result.requests == [Usage(3450, 81, 0, 9500)]
    assert result.context_tokens == (12950 + 81) // 4
    assert [m.kind for m in messages].count(MessageKind.USAGE) == 0


def test_helper_models_are_sidechain_rows() -> None:
    parser = GeminiParser()
    parser.feed(b'{"type":"init","session_id":"s","model":"gemini-2.5-pro"}')
    stats = {
        "models": {
            "gemini-2.5-pro": {"total_tokens": 1100, "input_tokens": 1000, "output_tokens": 100},
            "gemini-2.5-flash-lite": {"total_tokens": 60, "input_tokens": 50, "output_tokens": 10},
        }
    }
    messages = parser.feed(
        json.dumps({"type": "result", "status": "success", "stats": stats}).encode()
    )
    usage = [(m.model, m.sidechain) for m in messages if m.kind is MessageKind.USAGE]
    assert usage == [("gemini-2.5-flash-lite", True)]  # the main model's total is no one request
    result = parser.finish(0, "")
    assert result.requests == [Usage(1000, 100)]
    assert result.context_tokens == 1100


def test_error_events_are_not_terminal() -> None:
    parser = GeminiParser()
    for _ in range(50):
        parser.feed(b'{"type":"error","severity":"warning","message":"Retrying after 429"}')
        assert not parser.done
    parser.feed(b'{"type":"message","role":"assistant","content":"done","delta":true}')
    parser.feed(b'{"type":"result","status":"success","stats":{}}')
    assert parser.done
    assert parser.finish(0, "").outcome.ok


# --- exit codes -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_code", "kind"),
    [
        (41, ErrorKind.AUTH),
        (42, ErrorKind.UNKNOWN),
        (44, ErrorKind.CRASHED),
        (52, ErrorKind.CRASHED),
        (53, ErrorKind.MAX_TURNS),
        (54, ErrorKind.CRASHED),
        (55, ErrorKind.AUTH),
        (130, ErrorKind.INTERRUPTED),
        (144, ErrorKind.UNKNOWN),  # HTTP 400
        (145, ErrorKind.AUTH),  # 401
        (147, ErrorKind.AUTH),  # 403
        (173, ErrorKind.RATE_LIMIT),  # 429
        (244, ErrorKind.NETWORK),  # 500
        (247, ErrorKind.NETWORK),  # 503
        (1, ErrorKind.CRASHED),
        (None, ErrorKind.CRASHED),
        (0, ErrorKind.INVALID_OUTPUT),
    ],
)
def test_exit_code_without_a_result_line(exit_code: int | None, kind: ErrorKind) -> None:
    outcome = GeminiParser().finish(exit_code, "").outcome
    assert outcome.error_kind is kind
    assert outcome.message


def test_exit_codes_are_http_statuses_cut_to_eight_bits() -> None:
    assert http_status_from_exit_code(144) == 400
    assert http_status_from_exit_code(173) == 429
    assert http_status_from_exit_code(53) is None
    assert http_status_from_exit_code(None) is None


def test_the_cli_words_win_over_the_exit_code() -> None:
    outcome = (
        GeminiParser()
        .finish(
            1,
            "Error: The input token count (2000000) exceeds the "
            "maximum number of tokens allowed (1048576).",
        )
        .outcome
    )
    assert outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW
    assert GeminiParser().finish(41, "Invalid auth method selected.").outcome.error_kind is (
        ErrorKind.AUTH
    )


def test_rate_limit_retry_delay_from_the_message() -> None:
    parser = GeminiParser(wall_clock=lambda: 100.0)
    parser.feed(
        b'{"type":"result","status":"error","error":{"type":"unknown","message":"[API Error: '
        b'Quota exceeded for metric. Please retry in 56.5s.]"}}'
    )
    outcome = parser.finish(173, "").outcome
    assert outcome.error_kind is ErrorKind.RATE_LIMIT
    assert outcome.retry_at == 156.5


# --- never raises -----------------------------------------------------------------------------

JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
JSON_VALUES = (
    JSON_LEAVES
    | st.lists(JSON_LEAVES, max_size=3)
    | st.dictionaries(st.text(max_size=8), JSON_LEAVES, max_size=3)
)
SHAPED = st.fixed_dictionaries(
    {"type": st.sampled_from(["init", "message", "tool_use", "tool_result", "error", "result"])},
    optional={
        key: JSON_VALUES
        for key in (
            "session_id",
            "model",
            "role",
            "content",
            "delta",
            "tool_name",
            "tool_id",
            "parameters",
            "status",
            "output",
            "error",
            "stats",
            "message",
        )
    },
)
STATS = st.fixed_dictionaries(
    {"type": st.just("result"), "status": st.sampled_from(["success", "error", 3])},
    optional={"stats": st.dictionaries(st.sampled_from(["models", "input_tokens", "cached",
              "output_tokens", "total_tokens"]), JSON_VALUES | st.dictionaries(
              st.text(max_size=5), st.dictionaries(st.text(max_size=14), JSON_VALUES)))},
)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.binary(max_size=200) | (SHAPED | STATS).map(lambda d: json.dumps(d).encode()),
             max_size=12),
    st.none() | st.integers(min_value=-1, max_value=300),
)  # fmt: skip
def test_parser_never_raises(lines: list[bytes], exit_code: int | None) -> None:
    parser = GeminiParser()
    for line in lines:
        assert isinstance(parser.feed(line), list)
        parser.done  # noqa: B018
    assert isinstance(parser.finish(exit_code, "x"), TurnResult)


def test_parser_never_raises_on_real_lines_cut_at_every_position() -> None:
    for name in TRANSCRIPTS:
        for line in (DATA / f"{name}.jsonl").read_bytes().splitlines():
            for cut in range(0, len(line), 3):
                parser = GeminiParser()
                parser.feed(line[:cut])
                parser.finish(0, "")


# --- the real CLI, against a scripted Gemini API on 127.0.0.1 ------------------------------------


def _real_gemini() -> str:
    """``gemini`` under ``$LOOPCTL_E2E_NPM_PREFIX`` or on PATH, as in ``tests/e2e/conftest.py``."""
    prefix = os.environ.get("LOOPCTL_E2E_NPM_PREFIX")
    candidates = [Path(prefix) / "node_modules" / ".bin" / "gemini"] if prefix else []
    found = next((str(c) for c in candidates if c.is_file()), None) or shutil.which("gemini")
    if found:
        return found
    reason = "`gemini` not found: `npm install --prefix DIR @google/gemini-cli`, set LOOPCTL_E2E_NPM_PREFIX=DIR"
    if os.environ.get("LOOPCTL_E2E_REQUIRE", "") not in ("", "0"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.e2e
def test_real_gemini_turn_through_the_supervisor(tmp_path: Path) -> None:
    gemini = _real_gemini()
    from fake_gemini_api import call_reply, serve, text_reply, usage_metadata

    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(
        json.dumps({"security": {"auth": {"selectedType": "gemini-api-key"}}})
    )
    replies = [
        call_reply(
            "write_file",
            {"file_path": str(work / "made.txt"), "content": "made\n"},
            usage_metadata(900, 20),
        ),
        text_reply("Made it. LOOPCTL_DONE", usage_metadata(1000, 8, cached=900)),
    ]
    with serve(replies) as server:
        agent = GeminiAgent(
            GeminiSettings(
                command=gemini,
                model="gemini-2.5-flash",
                env={
                    "HOME": str(home),
                    "GEMINI_API_KEY": "fake",
                    "GOOGLE_GEMINI_BASE_URL": server.base_url,
                },
            )
        )
        result = run_turn(
            agent,
            TurnRequest("make a file", work, 1),
            supervision=Supervision(timeout_s=90, idle_timeout_s=60, grace_s=2, kill_after_s=1),
        )
        first = json.dumps(server.requests[0][1])
        paths = [path for path, _ in server.requests if ":streamGenerateContent" in path]
    assert result.outcome.ok, (result.outcome.message, result.stderr_tail[-2000:])
    assert (work / "made.txt").read_text() == "made\n"
    assert "make a file" in first
    assert result.final_text == "Made it. LOOPCTL_DONE"
    assert result.requests == [Usage(1000, 28, 0, 900)]
    assert result.session_id
    # the model setting is the model the CLI asks the API for
    assert paths
    assert all("/models/gemini-2.5-flash:streamGenerateContent" in path for path in paths)
    # Gemini CLI reports no cost: the engine prices the tokens (genai-prices)
    assert result.cost_usd is None
    pytest.importorskip("genai_prices")
    from loopctl.pricing import estimate_cost

    estimate = estimate_cost(result.model, result.requests)
    assert estimate.cost_usd is not None
    assert estimate.cost_usd > 0


@pytest.mark.e2e
def test_real_gemini_refusing_an_approval_mode_is_a_usage_error(tmp_path: Path) -> None:
    gemini = _real_gemini()
    agent = GeminiAgent(
        GeminiSettings(command=gemini, approval_mode="always", env={"HOME": str(tmp_path)})
    )
    result = run_turn(
        agent,
        TurnRequest("p", tmp_path, 1),
        supervision=Supervision(timeout_s=90, idle_timeout_s=60, grace_s=2, kill_after_s=1),
    )
    assert result.outcome.error_kind is ErrorKind.USAGE, (result.outcome, result.stderr_tail)
    assert result.outcome.message.startswith("[agents.gemini] approval_mode = 'always': ")
    assert '"auto_edit", "yolo"' in result.outcome.message  # the CLI's own list
