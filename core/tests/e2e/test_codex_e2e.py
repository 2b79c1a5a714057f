"""Whole loops with the real Codex CLI, its provider pointed at a scripted Responses API server on
127.0.0.1 (``model_providers.<id>.base_url``): Codex really runs the commands the server asks for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fake_responses_api import (
    API_KEY_ENV,
    codex_provider_args,
    failed_reply,
    function_call_reply,
    serve,
    text_reply,
    usage,
)

from loopctl.testing import Project, RunResult, python_test_cmd, run_loop
from loopctl.testing.realcli import ArgvLog

pytestmark = pytest.mark.e2e

FIX = "sed -i 's/a - b/a + b/' calc.py"


def run_codex_loop(
    project: Project,
    base_url: str,
    argv: ArgvLog,
    home: Path,
    *,
    session: str = "fresh",
    settings: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
) -> RunResult:
    home.mkdir(exist_ok=True)  # Codex refuses a CODEX_HOME that does not exist
    return run_loop(
        project,
        "Make the failing test in test_calc.py pass by fixing calc.py.",
        agent="codex",
        test_cmd=python_test_cmd(),
        config={
            "session": session,
            "limits": {"max_iterations": 4, "agent_timeout_s": 120.0, "idle_timeout_s": 60.0},
            "agents": {
                "codex": {
                    "command": argv.command,
                    "model": "gpt-5-codex",
                    "extra_args": codex_provider_args(base_url),
                    "env": {"CODEX_HOME": str(home), API_KEY_ENV: "sk-fake"},
                    **(settings or {}),
                }
            },
            **(top or {}),
        },
    )


def stored_sessions(home: Path) -> list[Path]:
    """Codex's session logs (rollout files) under CODEX_HOME."""
    return sorted((home / "sessions").rglob("rollout-*.jsonl"))


def agent_of(record: dict[str, Any]) -> dict[str, Any]:
    agent: dict[str, Any] = record["agent"]
    return agent


def test_codex_fixes_the_bug_and_the_loop_completes(
    buggy_project: Project, codex_cli: str, tmp_path: Path
) -> None:
    argv = ArgvLog(tmp_path, codex_cli)
    replies = [
        function_call_reply("exec_command", {"cmd": FIX}, "c1", "r1", usage(9_000, 40)),
        text_reply("Fixed add().", "r2", usage(9_500, 12, cached=9_000)),
    ]
    with serve(replies) as server:
        result = run_codex_loop(
            buggy_project,
            server.base_url,
            argv,
            tmp_path / "home",
            settings={"keep_sessions": True},  # its session log has the exact figures
        )
    assert result.status == "complete", result.outcome
    assert "return a + b" in buggy_project.read("calc.py")
    (record,) = result.records
    agent = agent_of(record)
    assert agent["outcome"] == "ok"
    assert agent["tool_calls"] >= 1
    assert agent["context_tokens"] == 9_512  # the latest request's fill, not the sum
    assert agent["context_window"] == 258_400  # what Codex itself reports in its session log
    assert len(stored_sessions(tmp_path / "home")) == 1


def test_a_fresh_session_run_stores_no_codex_session_and_prices_its_tokens(
    buggy_project: Project, codex_cli: str, tmp_path: Path
) -> None:
    """By default a fresh-session run asks Codex not to store its session (--ephemeral);
    ``--model`` reaches the API; Codex reports no cost, so the tokens are priced (genai-prices)
    and marked as estimated."""
    argv = ArgvLog(tmp_path, codex_cli)
    replies = [
        function_call_reply("exec_command", {"cmd": FIX}, "c1", "r1", usage(9_000, 40)),
        text_reply("Fixed add().", "r2", usage(9_500, 12, cached=9_000)),
    ]
    with serve(replies) as server:
        result = run_codex_loop(
            buggy_project,
            server.base_url,
            argv,
            tmp_path / "home",
            top={"model": "gpt-5.1-codex", "limits": {"max_cost_usd": 5.0}},
        )
        bodies = list(server.requests)
    assert result.status == "complete", result.outcome
    (call,) = argv.calls()
    assert "--ephemeral" in call
    assert call[call.index("-m") + 1] == "gpt-5.1-codex"
    assert {body["model"] for body in bodies} == {"gpt-5.1-codex"}
    assert stored_sessions(tmp_path / "home") == []
    agent = agent_of(result.records[0])
    assert agent["usage"]["input_tokens"] + agent["usage"]["cache_read_input_tokens"] == 18_500
    pytest.importorskip("genai_prices")
    assert agent["cost_estimated"] is True
    assert 0 < agent["cost_usd"] < 0.1


def test_a_sandbox_mode_codex_rejects_stops_the_run_with_exit_2(
    buggy_project: Project, codex_cli: str, tmp_path: Path
) -> None:
    argv = ArgvLog(tmp_path, codex_cli)
    with serve([]) as server:
        result = run_codex_loop(
            buggy_project, server.base_url, argv, tmp_path / "home", settings={"sandbox": "yolo"}
        )
        bodies = list(server.requests)
    assert result.status == "usage_error", result.outcome
    assert result.outcome.exit_code == 2
    assert result.outcome.message.startswith("[agents.codex] sandbox = 'yolo': ")
    assert "workspace-write" in result.outcome.message  # Codex's own list
    assert len(argv.calls()) == 1
    assert bodies == []


def test_a_context_overflow_restarts_codex_in_a_fresh_session(
    buggy_project: Project, codex_cli: str, tmp_path: Path
) -> None:
    argv = ArgvLog(tmp_path, codex_cli)
    replies = [
        text_reply("Looking around first.", "r1", usage(200_000, 30)),
        failed_reply(
            "context_length_exceeded",
            "Your input exceeds the context window of this model. Please adjust your input "
            "and try again.",
            "r2",
        ),
        function_call_reply("exec_command", {"cmd": FIX}, "c3", "r3", usage(8_000, 40)),
        text_reply("Fixed.", "r4", usage(8_400, 10, cached=8_000)),
    ]
    with serve(replies) as server:
        result = run_codex_loop(
            buggy_project, server.base_url, argv, tmp_path / "home", session="resume"
        )
    assert result.status == "complete", result.outcome
    kinds = [agent_of(r)["error_kind"] for r in result.records]
    assert kinds == [None, "context_overflow", None]
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["context_exhaustion"]
    calls = argv.calls()
    assert "resume" in calls[1]  # iteration 2 resumed the session (resume mode)...
    assert "resume" not in calls[2]  # ...but the exhausted session is never resumed
