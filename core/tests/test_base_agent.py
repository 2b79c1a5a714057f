"""What every adapter shares: a CLI that refuses its command line is a usage error (exit 2) that
names the setting; ``--model`` reaches every adapter; what the engine tells an adapter about the
session and the budget; and the cost of turns whose CLI reports only tokens.

The refusals quoted here are what the real CLIs print (Claude Code 2.1.332, Codex 0.169, Gemini
CLI 0.61, aider 0.86.2), captured from their stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.agents.base import (
    AgentAdapter,
    AgentSettings,
    Invocation,
    StreamParser,
    TurnRequest,
    command_line_error,
)
from loopctl.agents.command import CommandAgent, CommandSettings
from loopctl.agents.scripted import ScriptedParser
from loopctl.config import load_config
from loopctl.launch import build_host, select_agent
from loopctl.markers import hookimpl
from loopctl.model import Usage
from loopctl.pricing import configured_price, estimate_cost
from loopctl.testing import Project, make_project, python_test_cmd, run_loop

CALC_BUG = "def add(a, b):\n    return a - b\n"
CALC_TEST = textwrap.dedent(
    """\
    import unittest

    from calc import add


    class T(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(1, 2), 3)
    """
)
FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}


def loopctl_run(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    """``loopctl run "fix add" --test-cmd … ARGS`` in ``project``, as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    return subprocess.run(
        [sys.executable, "-m", "loopctl", "run", "fix add", "--test-cmd", python_test_cmd(), *args],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = make_project(tmp_path / "project")
    made.write("calc.py", CALC_BUG)
    made.write("test_calc.py", CALC_TEST)
    made.commit("a bug")
    return made


# --- the refusals of the real CLIs' option parsers -------------------------------------------------

REFUSALS = [
    (  # claude -p --permission-mode bogus (commander)
        "error: option '--permission-mode <mode>' argument 'bogus' is invalid. Allowed choices "
        "are acceptEdits, auto, bypassPermissions, manual, dontAsk, plan.\n",
        "--permission-mode",
        "bogus",
        "Allowed choices are acceptEdits, auto, bypassPermissions, manual, dontAsk, plan.",
    ),
    ("error: unknown option '--bogus-flag'\n", "--bogus-flag", None, "unknown option"),
    (
        "error: option '--max-turns <turns>' argument 'abc' is invalid. must be a number\n",
        "--max-turns",
        "abc",
        "must be a number",
    ),
    (  # codex exec --bogus x (clap), then its tip and usage
        "error: unexpected argument '--bogus' found\n\n  tip: to pass '--bogus' as a value, use "
        "'-- --bogus'\n\nUsage: codex exec [OPTIONS] [PROMPT]\n\nFor more information, try "
        "'--help'.\n",
        "--bogus",
        None,
        "unexpected argument",
    ),
    (
        "error: invalid value 'bogus' for '--sandbox <SANDBOX_MODE>'\n  [possible values: "
        "read-only, workspace-write, danger-full-access]\n\nFor more information, try '--help'.\n",
        "--sandbox",
        "bogus",
        "[possible values: read-only, workspace-write, danger-full-access]",
    ),
    (  # codex exec -c sandbox_mode="bogus", after a warning of its own
        "WARNING: proceeding, even though we could not create PATH aliases\nError loading "
        "config.toml: unknown variant `bogus`, expected one of `read-only`, `workspace-write`, "
        "`danger-full-access`\nin `sandbox_mode`\n",
        "sandbox_mode",
        None,
        "expected one of `read-only`",
    ),
    (  # gemini --approval-mode bogus (yargs), then its whole usage text
        'Invalid values:\n  Argument: approval-mode, Given: "bogus", Choices: "default", '
        '"auto_edit", "yolo", "plan"\nUsage: gemini [options] [command]\n\nGemini CLI - Defaults '
        "to interactive mode.\n",
        "--approval-mode",
        "bogus",
        'Choices: "default", "auto_edit", "yolo", "plan"',
    ),
    ("Unknown argument: bogus\nUsage: gemini [options] [command]\n", "--bogus", None, "Unknown"),
    (  # aider --bogus (configargparse), after its usage text
        "usage: aider [-h] [--model MODEL]\n             [FILE ...]\naider: error: unrecognized "
        "arguments: --bogus\n",
        "--bogus",
        None,
        "unrecognized arguments",
    ),
    (
        "usage: aider [-h]\naider: error: argument --edit-format/--chat-mode: invalid choice: "
        "'bogus' (choose from 'architect', 'ask', 'whole')\n",
        "--edit-format",
        "bogus",
        "(choose from 'architect', 'ask', 'whole')",
    ),
]


@pytest.mark.parametrize(("stderr", "option", "value", "words"), REFUSALS)
def test_each_clis_refusal_is_read_with_its_option_and_value(
    stderr: str, option: str, value: str | None, words: str
) -> None:
    found = command_line_error(stderr)
    assert found is not None
    assert found.option == option
    assert found.value == value
    assert words in found.message
    assert "Usage" not in found.message  # the refusal, not the help text after it
    assert "tip:" not in found.message


@pytest.mark.parametrize(
    "stderr",
    [
        "",
        "Error: connect ECONNREFUSED 127.0.0.1:443\n",
        'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: bad\n',
        "No conversation found with session ID: 00000000-0000-4000-8000-000000000000\n",
        "error: the agent could not finish\n",
        "Not logged in · Please run /login\n",
    ],
)
def test_other_failures_are_not_refusals(stderr: str) -> None:
    assert command_line_error(stderr) is None


@settings(deadline=None, max_examples=300)
@given(st.text())
def test_reading_a_refusal_never_raises(stderr: str) -> None:
    found = command_line_error(stderr)
    assert found is None or found.message


@settings(deadline=None, max_examples=100)
@given(st.sampled_from([r[0] for r in REFUSALS]), st.text(), st.text())
def test_a_refusal_is_found_among_other_lines(refusal: str, before: str, after: str) -> None:
    before = "\n".join(line for line in before.splitlines() if not line[:1].isspace())
    found = command_line_error(f"{before}\n{refusal}{after}")
    assert found is not None


# --- which setting a refusal is about ---------------------------------------------------------


class _Demo(CommandAgent):
    name: ClassVar[str] = "demo"
    option_settings: ClassVar[dict[str, str]] = {"--mode": "model"}


def test_the_usage_error_names_the_setting_behind_the_option() -> None:
    agent = _Demo(CommandSettings(command="demo", model="x-1", extra_args=["--color", "never"]))
    stderr = "error: option '--mode <m>' argument 'x-1' is invalid. Allowed choices are a, b.\n"
    assert agent.rejected_command_line(stderr, ["demo", "--mode", "x-1"]) == (
        "[agents.demo] model = 'x-1': the demo CLI rejects it: error: option '--mode <m>' "
        "argument 'x-1' is invalid. Allowed choices are a, b."
    )
    listed = agent.rejected_command_line("error: unknown option '--color'\n", [])
    assert listed is not None
    assert listed.startswith("[agents.demo] extra_args: the demo CLI rejects --color: ")
    ours = agent.rejected_command_line("error: unknown option '--quiet'\n", ["demo", "--quiet"])
    assert ours is not None
    assert "does not accept --quiet, which loopctl passes to it; update the CLI" in ours
    other = agent.rejected_command_line("error: too many arguments\n", ["demo"])
    assert other is not None
    assert other.startswith("the demo CLI refused to start: error: too many arguments")
    assert agent.rejected_command_line("Segmentation fault\n", ["demo"]) is None


# --- the whole loop --------------------------------------------------------------------------------

FAKE_PARSER = """\
import sys
sys.stdin.read()
sys.stderr.write("error: option '--level <level>' argument 'loud' is invalid. Allowed choices "
                 "are quiet, normal.\\n")
sys.exit(1)
"""


def test_a_cli_that_refuses_its_command_line_stops_the_run_with_exit_2(project: Project) -> None:
    """Not an agent error retried with fresh sessions: one turn, status usage_error, exit 2."""
    project.write("fake_cli.py", FAKE_PARSER)
    project.commit("the fake CLI")
    result = run_loop(
        project,
        "fix add",
        agent="command",
        config={
            "agent_cmd": f"{sys.executable} fake_cli.py --level loud",
            "limits": {"max_agent_crashes": 3, "max_restarts": 3},
        },
    )
    assert result.status == "usage_error"
    assert result.outcome.exit_code == 2
    assert len(result.records) == 1
    assert not result.events_of("loop.restart")
    assert result.records[0]["agent"]["error_kind"] == "usage"
    assert result.outcome.message == (
        "[agents.command] command: the command CLI rejects --level: error: option '--level "
        "<level>' argument 'loud' is invalid. Allowed choices are quiet, normal."
    )


@pytest.mark.slow
def test_loopctl_run_exits_2_and_says_why(project: Project) -> None:
    project.write("fake_cli.py", FAKE_PARSER)
    project.commit("the fake CLI")
    done = loopctl_run(project, "--agent-cmd", f"{sys.executable} fake_cli.py --level loud")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "usage_error: " in done.stdout
    assert "Allowed choices are quiet, normal." in done.stdout


def test_an_adapter_that_refuses_its_settings_is_a_usage_error(project: Project) -> None:
    """The scripted agent without a scenario file: its ValueError, exit 2, no retries."""
    result = run_loop(project, "fix add", agent="scripted")
    assert result.status == "usage_error"
    assert result.outcome.exit_code == 2
    assert "needs a scenario file" in result.outcome.message
    assert len(result.records) == 1


# --- --model -----------------------------------------------------------------------------------


def test_the_model_setting_reaches_whichever_adapter_runs(tmp_path: Path) -> None:
    (tmp_path / "loopctl.toml").write_text(
        'model = "top-model"\n[agents.claude]\nmodel = "own-model"\n'
    )
    loaded = load_config(tmp_path, env={})
    host = build_host(loaded, no_plugins=True)
    for name, flag in [("claude", "--model"), ("codex", "-m"), ("gemini", "--model")]:
        agent = select_agent(loaded, host, agent=name)
        argv = agent.invocation(TurnRequest("p", tmp_path, 1)).argv
        assert argv[argv.index(flag) + 1] == "top-model", name
    aider = select_agent(loaded, host, agent="aider")
    argv = aider.invocation(TurnRequest("p", tmp_path, 1)).argv
    aider.new_parser().finish(0, "")
    assert argv[argv.index("--model") + 1] == "top-model"
    command = select_agent(loaded, host, agent_cmd="my-agent")
    assert command.invocation(TurnRequest("p", tmp_path, 1)).env["LOOPCTL_MODEL"] == "top-model"
    # without it, the adapter's own setting stands
    (tmp_path / "loopctl.toml").write_text('[agents.claude]\nmodel = "own-model"\n')
    loaded = load_config(tmp_path, env={})
    argv = select_agent(loaded, host, agent="claude").invocation(TurnRequest("p", tmp_path, 1)).argv
    assert argv[argv.index("--model") + 1] == "own-model"
    assert (
        "LOOPCTL_MODEL"
        not in CommandAgent(CommandSettings(command="a"))
        .invocation(TurnRequest("p", tmp_path, 1))
        .env
    )


@pytest.mark.slow
def test_loopctl_run_model_reaches_a_command_agent(project: Project) -> None:
    project.write(
        "agent.py",
        "import os, sys\nsys.stdin.read()\n"
        "open('model.txt', 'w').write(os.environ.get('LOOPCTL_MODEL', '(none)'))\n",
    )
    project.commit("the agent")
    done = loopctl_run(
        project,
        *("--agent-cmd", f"{sys.executable} agent.py"),
        *("--model", "gpt-9-mini", "--max-iterations", "1"),
    )
    assert done.returncode == 10, (done.stdout, done.stderr)  # the agent fixes nothing
    assert project.read("model.txt") == "gpt-9-mini"


# --- what the engine tells the adapter -------------------------------------------------------------

SEEN: list[TurnRequest] = []


class _Recording(AgentAdapter):
    """The scripted agent's runner, recording each request the engine makes."""

    name: ClassVar[str] = "recording"
    settings_class: ClassVar[type[AgentSettings]] = AgentSettings

    def invocation(self, request: TurnRequest) -> Invocation:
        SEEN.append(request)
        scenario = Path(request.workdir) / ".loopctl-scenario.json"
        argv = [sys.executable, "-m", "loopctl.agents.scripted_runner", str(scenario)]
        argv += ["--turn", str(request.iteration), "--workdir", str(request.workdir)]
        if request.session_id:
            argv += ["--resume", request.session_id]
        return Invocation(argv=argv, stdin=b"")

    def new_parser(self) -> StreamParser:
        return ScriptedParser()


class _RecordingPlugin:
    @hookimpl
    def register_agents(self) -> list[type[AgentAdapter]]:
        return [_Recording]


def _record_turns(
    project: Project,
    session: str,
    turns: list[list[dict[str, Any]]],
    *,
    max_iterations: int = 3,
    resume: bool = False,
) -> str:
    from loopctl.agents.scripted import write_scenario

    SEEN.clear()
    write_scenario(project.path / ".loopctl-scenario.json", turns)
    result = run_loop(
        project,
        "fix add",
        agent="recording",
        plugins={"recording": _RecordingPlugin()},
        config={
            "session": session,
            "limits": {"max_iterations": max_iterations, "max_cost_usd": 50.0},
            "prices": {"scripted": {"input": 100_000.0, "output": 0.0}},
        },
        resume=resume,
    )
    return result.status


SPEND = {"usage": {"input_tokens": 100, "output_tokens": 0}}  # $10 a turn at that price


@pytest.mark.slow
def test_a_fresh_session_run_tells_the_adapter_not_to_keep_sessions(project: Project) -> None:
    _record_turns(project, "fresh", [[SPEND], [SPEND], [SPEND, FIX]])
    assert [r.keep_session for r in SEEN] == [False, False, False]
    assert [r.budget_usd for r in SEEN] == pytest.approx([50.0, 40.0, 30.0])
    assert [r.session_cost_usd for r in SEEN] == [0.0, 0.0, 0.0]


@pytest.mark.slow
def test_a_resumed_session_comes_with_what_it_cost_so_far(project: Project) -> None:
    _record_turns(project, "resume", [[SPEND], [SPEND], [SPEND, FIX]])
    assert [r.keep_session for r in SEEN] == [True, True, True]
    assert SEEN[0].session_id is None
    assert SEEN[1].session_id is not None
    assert [r.session_cost_usd for r in SEEN] == pytest.approx([0.0, 10.0, 20.0])
    assert [r.budget_usd for r in SEEN] == pytest.approx([50.0, 40.0, 30.0])


@pytest.mark.slow
def test_a_loop_switched_to_resumed_sessions_does_not_resume_an_unkept_one(
    project: Project,
) -> None:
    """A fresh-session run asked the CLI not to store its sessions: ``resume --session resume``
    starts a new session instead of resuming one that is gone."""
    turns = [[SPEND], [SPEND], [SPEND, FIX]]
    assert _record_turns(project, "fresh", turns, max_iterations=1) == "max_iterations"
    assert SEEN[0].keep_session is False
    assert _record_turns(project, "resume", turns, resume=True) == "complete"
    assert SEEN[0].session_id is None
    assert SEEN[0].keep_session is True
    assert SEEN[1].session_id is not None


def test_aiders_cache_is_not_counted_as_the_agents_change(project: Project) -> None:
    """An adapter's ``private_paths`` (aider's repo-map cache) are never the agent's changes."""

    class Cached(_Recording):
        name: ClassVar[str] = "cached"
        private_paths: ClassVar[tuple[str, ...]] = (".tool-cache",)

    class Plugin:
        @hookimpl
        def register_agents(self) -> list[type[AgentAdapter]]:
            return [Cached]

    from loopctl.agents.scripted import write_scenario

    turn = [{"write": ".tool-cache/index.db", "content": "x"}, FIX]
    write_scenario(project.path / ".loopctl-scenario.json", [turn])
    result = run_loop(project, "fix add", agent="cached", plugins={"cached": Plugin()})
    assert result.status == "complete", result.outcome
    assert (project.path / ".tool-cache" / "index.db").exists()
    assert result.records[0]["changed_files"] == ["calc.py"]


# --- the cost of turns that report only tokens ----------------------------------------------------


def test_a_price_table_in_the_config_prices_the_tokens() -> None:
    prices = {"gpt-5": {"input": 1.25, "output": 10.0, "cache_read": 0.125}}
    usage = [Usage(input_tokens=200, output_tokens=10, cache_read_input_tokens=800)]
    estimate = estimate_cost("gpt-5-codex", usage, prices)  # the longest name it starts with
    assert estimate.cost_usd == pytest.approx((200 * 1.25 + 10 * 10.0 + 800 * 0.125) / 1e6)
    assert estimate.source == "[prices] gpt-5"
    assert configured_price("OpenAI/GPT-5", prices) == ("gpt-5", prices["gpt-5"])
    # cache writes cost as input unless said otherwise
    written = estimate_cost("gpt-5", [Usage(cache_creation_input_tokens=1_000_000)], prices)
    assert written.cost_usd == pytest.approx(1.25)
    assert estimate_cost(None, usage, prices).cost_usd is None
    assert estimate_cost("gpt-5", [], prices).cost_usd == 0.0


def test_genai_prices_prices_the_models_it_knows() -> None:
    genai_prices = pytest.importorskip("genai_prices")
    usage = [Usage(input_tokens=200, output_tokens=10, cache_read_input_tokens=800)]
    estimate = estimate_cost("gpt-5", usage)
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=1000, cache_read_tokens=800, output_tokens=10),
        model_ref="gpt-5",
    ).total_price
    assert estimate.cost_usd == pytest.approx(float(expected))
    assert estimate.source.startswith("genai-prices ")
    assert estimate_cost("openai/gpt-4o", usage).cost_usd  # a provider path as aider names it
    unknown = estimate_cost("no-such-model-anywhere", usage)
    assert unknown.cost_usd is None
    assert '[prices."no-such-model-anywhere"]' in unknown.source


def test_without_genai_prices_the_note_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)  # as if it were not installed
    estimate = estimate_cost("gpt-5", [Usage(input_tokens=10)])
    assert estimate.cost_usd is None
    assert "install 'loopctl-core[prices]'" in estimate.source


@pytest.mark.slow
def test_max_cost_stops_a_run_whose_agent_reports_only_tokens(project: Project) -> None:
    """The scripted agent reports tokens and no cost, as Codex and Gemini CLI do: priced from the
    config's table, the budget stops the run, and the stop line says the cost is estimated."""
    spend = {"usage": {"input_tokens": 600_000, "output_tokens": 0}}  # $0.60 at $1/M
    result = run_loop(
        project,
        "fix add",
        turns=[[spend], [spend], [spend]],
        config={
            "model": "house-model-2",  # reaches the agent, which reports it back
            "limits": {"max_cost_usd": 1.0, "max_iterations": 5},
            "prices": {"house-model": {"input": 1.0, "output": 5.0}},
        },
    )
    assert result.status == "budget", result.outcome
    assert len(result.records) == 2
    assert result.outcome.message == (
        "spent $1.20 (estimated from token counts), over the budget of $1.00"
    )
    agents = [record["agent"] for record in result.records]
    assert [a["cost_usd"] for a in agents] == pytest.approx([0.6, 0.6])
    assert all(a["cost_estimated"] for a in agents)
    assert all(e["cost_estimated"] for e in result.events_of("agent.end"))


@pytest.mark.slow
def test_a_turn_that_cannot_be_priced_is_said_once_when_a_cost_budget_is_set(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "genai_prices", None)
    spend = {"usage": {"input_tokens": 1000, "output_tokens": 10}}
    result = run_loop(
        project,
        "fix add",
        turns=[[spend], [spend, FIX]],
        config={"limits": {"max_cost_usd": 1.0}},
    )
    assert result.status == "complete", result.outcome
    warnings = [
        e["message"] for e in result.events_of("loop.warning") if "max_cost_usd" in e["message"]
    ]
    assert len(warnings) == 1
    assert "scripted reports no cost" in warnings[0]
    assert "install 'loopctl-core[prices]'" in warnings[0]
    assert all(record["agent"]["cost_usd"] is None for record in result.records)


def test_records_of_an_older_loopctl_read_as_reported_costs(tmp_path: Path) -> None:
    from loopctl.records import structure_record

    record = {
        "iteration": 1,
        "restarts": 0,
        "started_at": 1.0,
        "agent": {"cost_usd": 0.5},
    }
    assert structure_record(json.loads(json.dumps(record))).agent.cost_estimated is False
