"""The ``aider`` adapter: its command line, and its parser on real aider transcripts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from recordings import Recordings

from loopctl.agents.aider import AiderAgent, AiderParser, AiderSettings
from loopctl.agents.base import TurnRequest
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import ErrorKind, MessageKind, TurnResult, Usage

RECORDED = Recordings("aider", "txt")
DATA = RECORDED.folder
TRANSCRIPTS = RECORDED.names
_meta = RECORDED.meta


def _parse(name: str, parser: AiderParser | None = None) -> tuple[TurnResult, list[Any]]:
    return RECORDED.parse(name, parser or AiderParser())


# --- the command line -------------------------------------------------------------------------


def test_command_line_writes_the_prompt_to_a_message_file(tmp_path: Path) -> None:
    agent = AiderAgent(AiderSettings(model="openai/gpt-4o", files=["calc.py"]))
    invocation = agent.invocation(TurnRequest("fix it\n" * 50_000, tmp_path, 1))
    argv = invocation.argv
    message_file = Path(argv[argv.index("--message-file") + 1])
    assert message_file.read_text() == "fix it\n" * 50_000  # longer than one argument may be
    assert {"--yes-always", "--no-pretty", "--no-stream", "--no-auto-commits"} <= set(argv)
    assert argv[argv.index("--model") + 1] == "openai/gpt-4o"
    assert argv[-1] == "calc.py"
    assert invocation.stdin is None
    assert invocation.env["COLUMNS"] == "4096"
    analytics = Path(argv[argv.index("--analytics-log") + 1])
    assert analytics.parent == message_file.parent
    parser = agent.new_parser()
    parser.finish(0, "")
    assert not message_file.parent.exists()  # the turn's scratch directory is cleaned up


def test_aider_leaves_the_users_files_alone(tmp_path: Path) -> None:
    """No ``.aider*`` line added to the project's .gitignore, no history files in the project:
    aider's own records go to the turn's scratch directory, removed when the turn ends."""
    agent = AiderAgent()
    argv = agent.invocation(TurnRequest("p", tmp_path, 1)).argv
    assert "--no-gitignore" in argv
    assert "--gitignore" not in argv
    scratch = Path(argv[argv.index("--message-file") + 1]).parent
    for option in ("--chat-history-file", "--input-history-file"):
        assert Path(argv[argv.index(option) + 1]).parent == scratch
    agent.new_parser().finish(0, "")
    assert not scratch.exists()


def test_session_ids_are_ignored_and_analytics_can_be_off(tmp_path: Path) -> None:
    agent = AiderAgent(AiderSettings(analytics_log=False, auto_commits=True))
    argv = agent.invocation(TurnRequest("p", tmp_path, 2, session_id="abc")).argv
    assert "abc" not in argv
    assert "--analytics-log" not in argv
    assert "--auto-commits" in argv
    agent.new_parser().finish(0, "")


# --- recorded transcripts ---------------------------------------------------------------------

EXPECTED: dict[str, tuple[ErrorKind | None, str]] = {
    "success_edit": (None, ""),
    "success_edit_no_analytics": (None, ""),
    "failed_match_then_fixed": (None, ""),
    "auth_401": (ErrorKind.AUTH, "Incorrect API key provided"),
    "context_overflow": (ErrorKind.CONTEXT_OVERFLOW, "has hit a token limit"),
    "quota_exceeded": (ErrorKind.BILLING, "exceeded your current quota"),
}


def test_every_recorded_transcript_has_an_expectation() -> None:
    assert sorted(EXPECTED) == TRANSCRIPTS


@pytest.mark.parametrize("name", TRANSCRIPTS)
def test_recorded_transcript_outcome(name: str) -> None:
    result, messages = _parse(name)
    kind, words = EXPECTED[name]
    assert result.exit_code == 0  # aider exits 0 whatever happened
    assert result.outcome.error_kind is kind, result.outcome.message
    assert words in result.outcome.message
    assert result.model == "openai/gpt-4o"
    assert any(m.kind is MessageKind.TEXT for m in messages)


def test_edits_and_rounded_usage_from_stdout() -> None:
    result, messages = _parse("failed_match_then_fixed")
    assert [(c.name, c.key_input, c.is_error) for c in result.tool_calls] == [
        ("edit", "", True),
        ("edit", "calc.py", False),
    ]
    assert result.requests == [Usage(1500, 40), Usage(2300, 60)]
    assert result.context_tokens == 2360
    assert result.cost_usd == 0.01  # aider's rounded session cost
    assert [m.kind for m in messages].count(MessageKind.USAGE) == 2


def test_the_analytics_log_gives_exact_usage_and_cost(tmp_path: Path) -> None:
    shutil.copyfile(DATA / "failed_match_then_fixed.analytics.jsonl", tmp_path / "analytics.jsonl")
    result, _ = _parse("failed_match_then_fixed", AiderParser(scratch=tmp_path))
    assert result.requests == [Usage(1500, 40), Usage(2300, 60)]
    assert result.cost_usd == pytest.approx(0.0105)
    assert not tmp_path.exists()


def test_a_retried_error_followed_by_an_answer_is_success() -> None:
    parser = AiderParser()
    for line in [
        "litellm.RateLimitError: RateLimitError: OpenAIException - Rate limit reached.",
        "The API provider has rate limited you. Try again later or check your quotas.",
        "Retrying in 0.2 seconds...",
        "Tokens: 2.5k sent, 12 received. Cost: $0.01 message, $0.01 session.",
        "Applied edit to src/x.py",
    ]:
        parser.feed(line.encode())
    result = parser.finish(0, "")
    assert result.outcome.ok
    assert result.tool_calls[0].key_input == "src/x.py"


def test_an_unwrapped_error_at_the_end_is_the_outcome() -> None:
    parser = AiderParser(wall_clock=lambda: 0.0)
    parser.feed(
        b"litellm.RateLimitError: RateLimitError: AnthropicException - rate_limit_error. "
        b"Please try again in 30s."
    )
    outcome = parser.finish(0, "").outcome
    assert outcome.error_kind is ErrorKind.RATE_LIMIT
    assert outcome.retry_at == 30.0


def test_a_nonzero_exit_without_error_lines_is_a_crash() -> None:
    outcome = (
        AiderParser().finish(1, "Traceback (most recent call last): ... KeyError: 'x'").outcome
    )
    assert outcome.error_kind is ErrorKind.CRASHED
    assert "KeyError" in outcome.message
    assert AiderParser().finish(None, "").outcome.error_kind is ErrorKind.CRASHED


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.binary(max_size=120)
        | st.sampled_from(
            [
                b"Tokens: 1.5k sent, 40 received. Cost: $0.0042 message, $0.0042 session.",
                b"Tokens: 9.9.9k sent, k received.",
                b"Applied edit to ",
                b"litellm.AuthenticationError: x",
                b"Main model: ",
                b"Retrying in 1 seconds...",
                b"",
            ]
        ),
        max_size=15,
    ),
    st.none() | st.integers(min_value=-1, max_value=255),
)
def test_parser_never_raises(lines: list[bytes], exit_code: int | None) -> None:
    parser = AiderParser()
    for line in lines:
        assert isinstance(parser.feed(line), list)
    assert isinstance(parser.finish(exit_code, ""), TurnResult)


# --- the real CLI, against a scripted Chat Completions API on 127.0.0.1 ---------------------------


def _real_aider() -> str:
    """aider from ``$LOOPCTL_E2E_AIDER`` or PATH; skips (fails under LOOPCTL_E2E_REQUIRE)."""
    found = os.environ.get("LOOPCTL_E2E_AIDER") or shutil.which("aider")
    if found and Path(found).is_file():
        return found
    reason = "`aider` not found: `pip install aider-chat` into a venv, set LOOPCTL_E2E_AIDER"
    if os.environ.get("LOOPCTL_E2E_REQUIRE", "") not in ("", "0"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.mark.e2e
def test_real_aider_turn_through_the_supervisor(tmp_path: Path) -> None:
    aider = _real_aider()
    from fake_chat_api import ChatReply, serve

    work = tmp_path / "work"
    work.mkdir()
    (work / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git = ["git", "-C", str(work), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    edit = (
        "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n"
        ">>>>>>> REPLACE\n```\n"
    )
    with serve([ChatReply(edit, 1234, 56)]) as server:
        agent = AiderAgent(
            AiderSettings(
                command=aider,
                model="openai/gpt-4o",
                files=["calc.py"],
                extra_args=["--openai-api-base", server.base_url, "--no-show-model-warnings"],
                env={"OPENAI_API_KEY": "sk-fake", "HOME": str(tmp_path / "home")},
            )
        )
        result = run_turn(
            agent,
            TurnRequest("fix add", work, 1),
            supervision=Supervision(timeout_s=120, idle_timeout_s=90, grace_s=2, kill_after_s=1),
        )
        sent = json.dumps(server.requests[0])
    assert result.outcome.ok, (result.outcome.message, result.stderr_tail[-2000:])
    assert "return a + b" in (work / "calc.py").read_text()
    assert not (work / ".gitignore").exists()  # aider did not add .aider* to it
    status = subprocess.run(
        [*git, "status", "--porcelain", "--untracked-files=all"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    # no .aider.chat.history.md, no .aider.input.history: only aider's repo-map cache, which
    # aider 0.86 cannot move and loopctl does not count as the agent's change
    untracked = [line for line in status if line != " M calc.py"]
    assert all(
        line.startswith("?? ") and line[3:].startswith(AiderAgent.private_paths)
        for line in untracked
    ), status
    assert "fix add" in sent
    assert server.requests[0]["model"] == "gpt-4o"  # the model setting reached the API
    assert [c.key_input for c in result.tool_calls] == ["calc.py"]
    assert result.requests == [Usage(1234, 56)]  # exact, from the analytics log
    assert result.cost_usd is not None
    assert result.cost_usd > 0


@pytest.mark.e2e
def test_real_aider_refusing_an_edit_format_is_a_usage_error(tmp_path: Path) -> None:
    aider = _real_aider()
    agent = AiderAgent(
        AiderSettings(command=aider, edit_format="bogus", env={"HOME": str(tmp_path)})
    )
    result = run_turn(
        agent,
        TurnRequest("p", tmp_path, 1),
        supervision=Supervision(timeout_s=90, idle_timeout_s=60, grace_s=2, kill_after_s=1),
    )
    assert result.outcome.error_kind is ErrorKind.USAGE, (result.outcome, result.stderr_tail)
    assert result.outcome.message.startswith("[agents.aider] edit_format = 'bogus': ")
    assert "invalid choice: 'bogus' (choose from " in result.outcome.message
