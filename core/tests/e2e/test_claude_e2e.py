"""Whole loops with the real Claude Code CLI, driven by loopctl's scripted model server.

Each test runs loopctl's engine with ``agent = "claude"`` in a temporary git repository whose
unittest test fails. The CLI is the real one from npm; only the model is scripted: the server
answers its API requests with the replies listed in each test (tool calls the CLI really
executes, usage figures, API errors).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from loopctl.testing import Project, RunResult, python_test_cmd, run_loop
from loopctl.testing import model_server as ms
from loopctl.testing.realcli import ArgvLog

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-5"  # a 200k-token window in the model table and in the CLI
WINDOW = 200_000


def run_claude_loop(
    project: Project,
    server: ms.ScriptedModelServer,
    argv_log: ArgvLog,
    home: Path,
    *,
    session: str = "fresh",
    max_iterations: int = 4,
    limits: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    top: dict[str, Any] | None = None,
) -> RunResult:
    env = server.cli_env(home, model=MODEL)
    env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    claude = {"command": argv_log.command, "model": MODEL, "env": env, **(settings or {})}
    return run_loop(
        project,
        "Make the failing test in test_calc.py pass by fixing calc.py.",
        agent="claude",
        test_cmd=python_test_cmd(),
        config={
            "session": session,
            "limits": {
                "max_iterations": max_iterations,
                "agent_timeout_s": 180.0,
                "idle_timeout_s": 120.0,
                **(limits or {}),
            },
            "agents": {"claude": claude},
            **(top or {}),
        },
    )


def stored_sessions(home: Path) -> list[Path]:
    """The session transcripts Claude Code stored under its config directory."""
    return sorted((home / ".claude" / "projects").rglob("*.jsonl"))


def result_of(transcript: Path) -> dict[str, Any]:
    lines = [json.loads(line) for line in transcript.read_text().splitlines() if line.strip()]
    found: dict[str, Any] = next(line for line in reversed(lines) if line["type"] == "result")
    return found


def session_of(request: ms.RecordedRequest) -> str | None:
    """The CLI's session id, which it sends in the request's metadata."""
    metadata = request.body.get("metadata") if isinstance(request.body, dict) else None
    user_id = metadata.get("user_id") if isinstance(metadata, dict) else None
    try:
        found = json.loads(user_id).get("session_id") if isinstance(user_id, str) else None
    except ValueError:
        return None
    return found if isinstance(found, str) else None


def flag(argv: list[str], name: str) -> str | None:
    return argv[argv.index(name) + 1] if name in argv else None


def agent_of(record: dict[str, Any]) -> dict[str, Any]:
    agent: dict[str, Any] = record["agent"]
    return agent


def test_agent_reads_and_edits_the_bug_and_the_loop_completes(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    calc = str(buggy_project.path / "calc.py")
    scenario = [
        ms.read(calc, say="Let me read the code.", usage=ms.context_usage(24_000, 300)),
        ms.edit(calc, "return a - b", "return a + b", usage=ms.context_usage(26_000, 400)),
        ms.text(
            "Fixed add(): it subtracted instead of adding.", usage=ms.context_usage(27_500, 120)
        ),
    ]
    with ms.ScriptedModelServer(scenario, model=MODEL) as server:
        result = run_claude_loop(buggy_project, server, claude_argv, tmp_path / "home")
        main = server.main_requests

    assert result.status == "complete", result.outcome
    assert "return a + b" in buggy_project.read("calc.py")
    assert server.remaining == 0
    assert [r.reply_index for r in main] == [0, 1, 2]
    (record,) = result.records
    agent = agent_of(record)
    assert agent["outcome"] == "ok"
    assert agent["requests"] == 3
    sent = [reply.usage for reply in scenario]
    assert agent["usage"] == {
        key: sum(u[key] for u in sent)
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        )
    }
    assert agent["context_tokens"] == 27_500  # the latest request, not the sum
    assert agent["context_window"] == WINDOW  # from the CLI's result.modelUsage
    assert agent["tool_calls"] == 2
    assert agent["cost_usd"] > 0
    assert record["tests_passed"] is True
    assert "calc.py" in record["changed_files"]
    (argv,) = claude_argv.calls()
    assert argv[:4] == ["-p", "--output-format", "stream-json", "--verbose"]
    assert flag(argv, "--permission-mode") == "bypassPermissions"
    assert "--resume" not in argv
    assert "--no-session-persistence" in argv  # a fresh-session run: nothing to resume later
    assert stored_sessions(tmp_path / "home") == []
    transcript = result.state_dir / "logs" / "iteration-0001.agent.jsonl"
    first = json.loads(transcript.read_text().splitlines()[0])
    assert first["type"] == "system"
    assert first["subtype"] == "init"
    assert first["session_id"] == agent["session_id"] == session_of(main[0])
    # the tool results the CLI sent back answer the scenario's own tool calls
    assert main[1].tool_result_ids()[-1] == scenario[0].tool_calls[0].id


def test_resume_mode_reuses_the_session_and_reports_climbing_context(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    calc = str(buggy_project.path / "calc.py")
    scenario = [
        # iteration 1: looks, does not fix
        ms.read(calc, usage=ms.context_usage(38_000)),
        ms.text("I see the problem; fixing it next.", usage=ms.context_usage(40_000)),
        # iteration 2: still nothing
        ms.text("Still thinking about it.", usage=ms.context_usage(90_000)),
        # iteration 3: fixes it
        ms.read(calc, usage=ms.context_usage(140_000)),
        ms.edit(calc, "return a - b", "return a + b", usage=ms.context_usage(145_000)),
        ms.text("Fixed.", usage=ms.context_usage(150_000)),
    ]
    with ms.ScriptedModelServer(scenario, model=MODEL) as server:
        result = run_claude_loop(
            buggy_project, server, claude_argv, tmp_path / "home", session="resume"
        )
        main = server.main_requests

    assert result.status == "complete", result.outcome
    agents = [agent_of(r) for r in result.records]
    assert [a["context_tokens"] for a in agents] == [40_000, 90_000, 150_000]
    assert [a["context_window"] for a in agents] == [WINDOW] * 3
    assert [a["requests"] for a in agents] == [2, 1, 3]
    session_ids = {a["session_id"] for a in agents}
    assert len(session_ids) == 1
    assert None not in session_ids
    (session_id,) = session_ids
    calls = claude_argv.calls()
    assert [flag(argv, "--resume") for argv in calls] == [None, session_id, session_id]
    assert {session_of(r) for r in main} == {session_id}
    # the resumed turns really carried the conversation: each starts with the earlier messages
    sizes = [len(main[i].messages) for i in (0, 2, 3)]  # the first request of each turn
    assert sizes == sorted(sizes)
    assert sizes[0] < sizes[1] < sizes[2]
    assert "--no-session-persistence" not in calls[0]  # it is resumed
    assert len(stored_sessions(tmp_path / "home")) == 1
    # each turn costs what it added: the CLI's last figure is the session's running total
    costs = [a["cost_usd"] for a in agents]
    assert all(cost > 0 for cost in costs)
    last = result_of(result.state_dir / "logs" / "iteration-0003.agent.jsonl")
    assert sum(costs) == pytest.approx(last["total_cost_usd"])
    assert costs[2] < last["total_cost_usd"]


def test_prompt_too_long_restarts_with_a_fresh_session_and_completes(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    calc = str(buggy_project.path / "calc.py")
    scenario = [
        # iteration 1: the conversation no longer fits (and the CLI cannot compact it)
        ms.read(calc, usage=ms.context_usage(185_000)),
        ms.prompt_too_long(210_000, 200_000),
        # iteration 2, after the restart: a fresh session fixes it
        ms.read(calc, usage=ms.context_usage(20_000)),
        ms.edit(calc, "return a - b", "return a + b", usage=ms.context_usage(22_000)),
        ms.text("Fixed.", usage=ms.context_usage(23_000)),
    ]
    compaction_fails = ms.prompt_too_long(210_000, 200_000)
    with ms.ScriptedModelServer(scenario, model=MODEL, compact_reply=compaction_fails) as server:
        result = run_claude_loop(
            buggy_project, server, claude_argv, tmp_path / "home", session="resume"
        )
        main = server.main_requests
        requests = server.requests

    assert result.status == "complete", result.outcome
    first, second = result.records
    assert agent_of(first)["error_kind"] == "context_overflow"
    assert agent_of(first)["message"] == "Prompt is too long"
    assert agent_of(first)["context_tokens"] == 185_000
    assert first["decision"] == "restart"
    assert first["reason"] == "context_exhaustion"
    assert second["restarts"] == 1
    assert agent_of(second)["outcome"] == "ok"
    restarts = result.events_of("loop.restart")
    assert [e["reason"] for e in restarts] == ["context_exhaustion"]
    exhausted = agent_of(first)["session_id"]
    assert exhausted
    assert agent_of(second)["session_id"] != exhausted
    calls = claude_argv.calls()
    assert len(calls) == 2
    assert all("--resume" not in argv for argv in calls)  # never resumes the exhausted one
    # (with so short a history the CLI does not even try to compact; if a version does, the
    # server's compact_reply fails it as well, so the turn still ends in "Prompt is too long")
    assert all(r.kind != "compact" or r.status == 400 for r in requests)
    assert [session_of(r) for r in main[:2]] == [exhausted, exhausted]
    assert {session_of(r) for r in main[2:]} == {agent_of(second)["session_id"]}
    assert len(main[2].messages) == 1  # the fresh session starts from the prompt alone


def test_the_model_setting_reaches_the_api(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    """``--model`` (the top-level ``model``) wins over ``[agents.claude] model`` and is the model
    the CLI asks the API for."""
    calc = str(buggy_project.path / "calc.py")
    scenario = [
        ms.read(calc, usage=ms.context_usage(19_000, 100)),
        ms.edit(calc, "return a - b", "return a + b", usage=ms.context_usage(20_000, 100)),
        ms.text("Fixed.", usage=ms.context_usage(20_500, 20)),
    ]
    with ms.ScriptedModelServer(scenario, model=MODEL) as server:
        result = run_claude_loop(
            buggy_project,
            server,
            claude_argv,
            tmp_path / "home",
            settings={"model": "claude-opus-4-1"},
            top={"model": MODEL},
        )
        main = server.main_requests
    assert result.status == "complete", result.outcome
    (argv,) = claude_argv.calls()
    assert flag(argv, "--model") == MODEL
    assert {request.body["model"] for request in main} == {MODEL}


def test_a_permission_mode_the_cli_rejects_stops_the_run_with_exit_2(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    """Claude Code judges the mode; its refusal names the choices, and loopctl stops at once
    with a usage error naming the setting, instead of retrying an agent error."""
    with ms.ScriptedModelServer([ms.text("never")], model=MODEL) as server:
        result = run_claude_loop(
            buggy_project,
            server,
            claude_argv,
            tmp_path / "home",
            settings={"permission_mode": "bogus"},
            limits={"max_agent_crashes": 3},
        )
        requests = server.requests
    assert result.status == "usage_error", result.outcome
    assert result.outcome.exit_code == 2
    message = result.outcome.message
    assert message.startswith("[agents.claude] permission_mode = 'bogus': ")
    assert "Allowed choices are " in message
    assert "manual" in message  # the CLI's own list, not loopctl's
    assert len(claude_argv.calls()) == 1
    assert requests == []


def test_a_cost_budget_stops_claude_inside_its_turn(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    """What is left of ``max_cost_usd`` goes to ``--max-budget-usd``: the CLI stops itself
    once a request takes it over, instead of running the whole turn."""
    calc = str(buggy_project.path / "calc.py")

    def uncached(tokens: int) -> dict[str, int]:  # $3 per million at Sonnet's prices
        return {"input_tokens": tokens, "output_tokens": 100}

    scenario = [
        ms.read(calc, usage=uncached(100_000)),  # $0.30
        ms.read(calc, usage=uncached(110_000)),  # $0.63 in all: over the budget
        ms.read(calc, usage=uncached(120_000)),
        ms.edit(calc, "return a - b", "return a + b", usage=uncached(130_000)),
        ms.text("Fixed.", usage=uncached(131_000)),
    ]
    with ms.ScriptedModelServer(scenario, model=MODEL) as server:
        result = run_claude_loop(
            buggy_project,
            server,
            claude_argv,
            tmp_path / "home",
            limits={"max_cost_usd": 0.5},
        )
        main = server.main_requests
    assert result.status == "budget", result.outcome
    (argv,) = claude_argv.calls()
    assert flag(argv, "--max-budget-usd") == "0.5"
    (record,) = result.records
    assert agent_of(record)["error_kind"] == "budget"
    assert len(main) < len(scenario)  # cut inside the turn
    assert "return a - b" in buggy_project.read("calc.py")
    assert result.outcome.message.startswith("spent $")
    assert "estimated" not in result.outcome.message  # Claude Code reports its cost


def _processes_running(marker: str) -> list[int]:
    """The pids of the processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry.name))
    return found


def test_a_command_left_in_the_background_does_not_hold_the_turn(
    buggy_project: Project, claude_argv: ArgvLog, tmp_path: Path
) -> None:
    """The agent fixes the bug, leaves a command running in the background (Bash's
    ``run_in_background``) and answers: Claude Code prints its result at once, then waits for
    that command before it exits. loopctl gives it its exit grace, ends it and what it left
    running, and runs the tests: the turn ends ``ok`` at once, not at the idle timeout."""
    from loopctl.testing.behaviours import Change, Fixer

    marker = f"sleep 600.{os.getpid()}{int(time.time() * 1000) % 100000}"
    fixer = Fixer(
        test_cmd=python_test_cmd(),
        ideas=[Change("calc.py", "return a - b", "return a + b")],
        background=marker,
    )
    with ms.ScriptedModelServer(behaviour=fixer, model=MODEL) as server:
        result = run_claude_loop(
            buggy_project,
            server,
            claude_argv,
            tmp_path / "home",
            limits={"idle_timeout_s": 600.0, "agent_timeout_s": 900.0},
        )
        errors = server.behaviour_errors
    assert errors == []
    assert result.status == "complete"
    started = [e for e in result.events_of("agent.start")]
    ended = result.events_of("agent.end")
    assert len(started) == len(ended) == 1
    assert ended[0]["outcome"] == "ok"  # not idle_timeout: the turn ended at its grace
    assert ended[0]["duration_s"] < 300  # far from the idle timeout it would otherwise wait
    assert _processes_running(marker) == []  # the command it left is ended with the turn
