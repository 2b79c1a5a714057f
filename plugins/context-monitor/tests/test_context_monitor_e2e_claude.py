"""Whole loops with the real Claude Code CLI and the context monitor; only the model is scripted
(loopctl's ScriptedModelServer answers the CLI's API requests on 127.0.0.1 with the usage figures
and tool calls listed in each test). Run by ``nox -s e2e``; skipped when ``claude`` is missing."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from context_monitor_testkit import PLUGIN, dump

from loopctl.testing import Project, RunResult, make_project, python_test_cmd, run_loop
from loopctl.testing import model_server as ms
from loopctl.testing.realcli import FOREIGN_ENV, ArgvLog, require_cli
from loopctl_context_monitor import events as ev

pytestmark = pytest.mark.e2e

MODEL = "claude-sonnet-4-5"
WINDOW = 200_000


@pytest.fixture
def claude(monkeypatch: pytest.MonkeyPatch) -> str:
    path = require_cli("claude", "@anthropic-ai/claude-code")
    for name in FOREIGN_ENV:
        monkeypatch.delenv(name, raising=False)
    return path


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = make_project(tmp_path / "project")
    project.write("calc.py", "def add(a, b):\n    return a - b\n")
    project.write(
        "test_calc.py",
        textwrap.dedent(
            """\
            import unittest

            from calc import add


            class CalcTest(unittest.TestCase):
                def test_add(self):
                    self.assertEqual(add(2, 3), 5)
            """
        ),
    )
    project.commit("a project with a bug")
    return project


def run(
    project: Project,
    server: ms.ScriptedModelServer,
    argv: ArgvLog,
    home: Path,
    *,
    session: str,
    max_iterations: int = 6,
) -> RunResult:
    env = server.cli_env(home, model=MODEL)
    env["CLAUDE_CODE_MAX_RETRIES"] = "0"
    return run_loop(
        project,
        "Make the failing test in test_calc.py pass by fixing calc.py.",
        agent="claude",
        test_cmd=python_test_cmd(),
        plugins=PLUGIN,
        config={
            "session": session,
            "stuck": {"enabled": False},
            "limits": {
                "max_iterations": max_iterations,
                "agent_timeout_s": 180.0,
                "idle_timeout_s": 120.0,
            },
            "agents": {"claude": {"command": argv.command, "model": MODEL, "env": env}},
        },
    )


def first_message(request: ms.RecordedRequest) -> str:
    """The text of the first user message: the prompt loopctl sent."""
    return json.dumps(request.messages[0], ensure_ascii=False) if request.messages else ""


def iteration_tokens(result: RunResult) -> list[Any]:
    return [e["tokens"] for e in result.events_of(ev.USAGE) if e["source"] == "iteration"]


def test_resume_mode_climbing_usage_restarts_at_the_right_iteration_with_a_briefing(
    project: Project, claude: str, tmp_path: Path
) -> None:
    calc = str(project.path / "calc.py")
    scenario = [
        # iteration 1: a wrong fix
        ms.read(calc, usage=ms.context_usage(40_000)),
        ms.edit(calc, "return a - b", "return a * b", usage=ms.context_usage(60_000)),
        ms.text("It multiplies now.", usage=ms.context_usage(62_000)),
        # iteration 2: the same failure
        ms.text("The test still fails; let me think.", usage=ms.context_usage(120_000)),
        # iteration 3: still wrong; the context climbs over 70%
        ms.read(calc, usage=ms.context_usage(130_000)),
        ms.text("Still failing. Thinking about it.", usage=ms.context_usage(145_000)),
        # iteration 4: a fresh session, started from the briefing, fixes it
        ms.read(calc, usage=ms.context_usage(20_000)),
        ms.edit(calc, "return a * b", "return a + b", usage=ms.context_usage(22_000)),
        ms.text("Fixed: add() adds.", usage=ms.context_usage(23_000)),
    ]
    argv = ArgvLog(tmp_path, claude)
    with ms.ScriptedModelServer(scenario, model=MODEL) as server:
        result = run(project, server, argv, tmp_path / "home", session="resume")
        main = server.main_requests

    assert result.status == "complete", dump(result)
    assert [r["decision"] for r in result.records] == ["continue", "continue", "restart", "stop"]
    assert result.records[2]["reason"] == "context_exhaustion"
    (warning,) = result.events_of(ev.EXHAUSTION_WARNING)
    assert (warning["iteration"], warning["tokens"], warning["window"]) == (3, 145_000, WINDOW)
    assert iteration_tokens(result) == [62_000, 120_000, 145_000, 23_000]
    session = result.records[0]["agent"]["session_id"]
    assert argv.resumed() == [None, session, session, None]  # the fresh session is not resumed
    (approach,) = result.loop_state().failed_approaches  # one entry, updated in place
    assert approach.startswith("iteration 1 changed calc.py; iterations 2-3 changed nothing")
    assert "+    return a * b" in approach  # the change that failed, not only the file

    briefing = (result.state_dir / "context-summary.md").read_text(encoding="utf-8")
    assert "calc.py | 2 +-" in briefing  # the modified file, from git diff --stat
    assert approach.splitlines()[0] in briefing
    assert "72.5% full (145,000 of 200,000 tokens)" in briefing
    fresh = [r for r in main if r.reply_index == 6]  # iteration 4's first request
    assert len(fresh) == 1
    sent = first_message(fresh[0])
    assert "Previous Session Context (Summarized)" in sent
    assert "calc.py | 2 +-" in sent
    assert "iterations 2-3 changed nothing" in sent
    assert len(fresh[0].messages) == 1  # a fresh conversation: the prompt alone


def test_prompt_too_long_mid_run_restarts_with_a_fresh_session_and_the_briefing(
    project: Project, claude: str, tmp_path: Path
) -> None:
    calc = str(project.path / "calc.py")
    scenario = [
        # iteration 1
        ms.read(calc, usage=ms.context_usage(40_000)),
        ms.text("I see the problem.", usage=ms.context_usage(42_000)),
        # iteration 2 (resumed): the conversation no longer fits
        ms.read(calc, usage=ms.context_usage(170_000)),
        ms.prompt_too_long(210_000, 200_000),
        # iteration 3, after the restart: a fresh session fixes it
        ms.read(calc, usage=ms.context_usage(20_000)),
        ms.edit(calc, "return a - b", "return a + b", usage=ms.context_usage(22_000)),
        ms.text("Fixed.", usage=ms.context_usage(23_000)),
    ]
    compaction_fails = ms.prompt_too_long(210_000, 200_000)
    argv = ArgvLog(tmp_path, claude)
    with ms.ScriptedModelServer(scenario, model=MODEL, compact_reply=compaction_fails) as server:
        result = run(project, server, argv, tmp_path / "home", session="resume")
        main = server.main_requests

    assert result.status == "complete", dump(result)
    assert [r["decision"] for r in result.records] == ["continue", "restart", "stop"]
    assert result.records[1]["agent"]["error_kind"] == "context_overflow"
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["context_exhaustion"]
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    assert restart["trigger"] == "overflow"
    session = result.records[0]["agent"]["session_id"]
    assert argv.resumed() == [None, session, None]  # never resumes the exhausted session
    assert result.records[2]["agent"]["session_id"] != session
    fresh = [r for r in main if r.reply_index == 4]
    assert len(fresh) == 1
    assert len(fresh[0].messages) == 1
    sent = first_message(fresh[0])
    assert "Previous Session Context (Summarized)" in sent
    assert "the agent ran out of context" in sent


def test_fresh_mode_high_usage_every_iteration_is_no_false_alarm(
    project: Project, claude: str, tmp_path: Path
) -> None:
    calc = str(project.path / "calc.py")
    scenario = [
        ms.read(calc, usage=ms.context_usage(130_000)),
        ms.text("Looking.", usage=ms.context_usage(135_000)),
        ms.read(calc, usage=ms.context_usage(130_000)),
        ms.text("Still looking.", usage=ms.context_usage(135_000)),
        ms.read(calc, usage=ms.context_usage(130_000)),
        ms.edit(calc, "return a - b", "return a + b", usage=ms.context_usage(133_000)),
        ms.text("Fixed.", usage=ms.context_usage(135_000)),
    ]
    argv = ArgvLog(tmp_path, claude)
    with ms.ScriptedModelServer(scenario, model=MODEL) as server:
        result = run(project, server, argv, tmp_path / "home", session="fresh")

    assert result.status == "complete", dump(result)
    assert len(result.records) == 3
    # summed over the three sessions this would be 405,000 tokens: twice the window
    assert iteration_tokens(result) == [135_000] * 3
    assert not result.events_of(ev.EXHAUSTION_WARNING)
    assert not result.events_of("loop.restart")
    assert argv.resumed() == [None, None, None]
