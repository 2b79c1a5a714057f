"""The ``loopctl`` command as users run it: real subprocesses in real temporary projects, with the
scripted agent; in-process ``main([...])`` calls where no loop runs."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from cli_run import clean_env, loopctl
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import state as state_files
from loopctl._version import __version__
from loopctl.agents.scripted import write_scenario
from loopctl.cli.app import main
from loopctl.status import render_status
from loopctl.testing import Project, make_project, python_test_cmd, sigint_as_in_a_terminal

STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] \S")
CALC_BUG = "def add(a, b):\n    return a - b\n"
CALC_TEST = textwrap.dedent(
    """\
    import unittest

    from calc import add


    class AddTest(unittest.TestCase):
        def test_add(self):
            self.assertEqual(add(1, 2), 3)
    """
)
FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
TEST_CMD = python_test_cmd()
RUN = ["--test-cmd", TEST_CMD, "--agent", "scripted"]


# --- helpers ---------------------------------------------------------------------------------------


def assert_usage_error(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2, nothing but ``loopctl:`` lines on stderr (one an error), no traceback."""
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines
    assert all(line.startswith("loopctl: ") for line in lines), result.stderr
    assert any(line.startswith("loopctl: error: ") for line in lines)
    for fragment in fragments:
        assert fragment in result.stderr, (fragment, result.stderr)


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``main([...])`` in this process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def assert_error(outcome: tuple[int, str, str], *fragments: str) -> None:
    """The in-process twin of :func:`assert_usage_error` (an exception would fail the test)."""
    code, out, err = outcome
    assert_usage_error(subprocess.CompletedProcess([], code, out, err), *fragments)


def event_lines(stdout: str) -> list[str]:
    """The per-event part of plain output (the summary follows an empty line)."""
    return stdout.partition("\n\n")[0].splitlines()


def use_scenario(project: Project, turns: list[list[dict[str, Any]]], **top: Any) -> None:
    write_scenario(project.path / "scenario.json", turns, **top)
    project.write("loopctl.toml", '[agents.scripted]\nscenario = "scenario.json"\n')


def loop_state(project: Project) -> state_files.LoopState:
    return state_files.read_loop_state(project.path / ".loopctl" / "loop-state.md")


def wait_for(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    """Poll until ``condition`` holds. The timeout only bounds a wait for something that never
    comes (a loaded machine took over 15 s to reach the first agent turn), so it is generous."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


@pytest.fixture
def project(tmp_path: Path) -> Project:
    """A git project whose one test fails until `add` is fixed."""
    made = make_project(tmp_path / "project")
    made.write("calc.py", CALC_BUG)
    made.write("test_calc.py", CALC_TEST)
    made.commit("calc")
    return made


@pytest.fixture
def in_project(project: Project, monkeypatch: pytest.MonkeyPatch) -> Project:
    """For in-process ``main([...])`` calls: cwd is the project, no LOOPCTL_* variables."""
    monkeypatch.chdir(project.path)
    for name in list(os.environ):
        if name.startswith("LOOPCTL_"):
            monkeypatch.delenv(name)
    return project


# --- version, demo ---------------------------------------------------------------------------------


def test_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = loopctl("--version", cwd=tmp_path)
    assert result.returncode == 0
    assert re.fullmatch(r"loopctl \d+\.\d+\.\d+\S*\n", result.stdout)
    assert result.stdout == f"loopctl {__version__}\n"
    assert main(["-V"]) == 0  # the typer app answers it too
    assert capsys.readouterr().out == f"loopctl {__version__}\n"


@pytest.mark.slow
def test_demo_json_keep_prints_only_json_events_and_keeps_the_project(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = loopctl("demo", "--json", "--keep", str(target), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]  # every line parses
    assert all("type" in e and isinstance(e["ts"], float) for e in events)
    assert events[0]["type"] == "loop.start"
    assert events[-1]["type"] == "loop.end"
    assert events[-1]["status"] == "complete"
    assert events[-1]["exit_code"] == 0
    assert sum(e["type"] == "iteration.start" for e in events) >= 2  # it really iterated
    # --keep: the project, its fixed code and the run's report stay behind
    assert (target / "loopctl.toml").is_file()
    assert (target / "inventory" / "stock.py").is_file()
    report = (target / ".loopctl" / "report.md").read_text(encoding="utf-8")
    assert "complete" in report


def test_demo_keep_refuses_a_directory_with_other_files(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--dir", str(in_project.path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loopctl: error: --dir ")
    assert "not empty" in err
    assert in_project.read("calc.py") == CALC_BUG  # nothing was overwritten


# --- run, status, resume ---------------------------------------------------------------------------


@pytest.mark.slow
def test_run_completes_and_status_reports_it(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use_scenario(project, [[{"say": "fixing add"}, FIX]])
    result = loopctl("run", "make add work", *RUN, cwd=project.path, env=clean_env(NO_COLOR="1"))
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    lines = event_lines(result.stdout)
    assert all(STAMP.match(line) for line in lines), lines
    assert "starting loop: agent scripted" in lines[0]
    assert any("tests passed" in line for line in lines)
    assert "loop ended: complete" in lines[-1]
    assert "complete: the tests pass" in result.stdout
    assert "report: " in result.stdout
    assert "a + b" in project.read("calc.py")

    monkeypatch.chdir(project.path)
    code, text, err = call(capsys, "status")
    assert code == 0, err
    assert ": complete" in text.splitlines()[0]
    assert "goal: make add work" in text
    assert "iteration 1 of 20" in text
    assert re.search(r"prompt size: [\d,]+ chars", text)

    code, out, err = call(capsys, "status", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["status"] == "complete"
    assert data["running"] is False
    assert data["state"]["iteration"] == 1
    assert data["state"]["original_goal"] == "make add work"
    assert data["prompt_chars"] > 0
    assert data["last_iteration"]["tests_passed"] is True

    # what loopctl understood of the agent's output, for debugging an adapter
    transcript = ".loopctl/logs/iteration-0001.agent.jsonl"
    code, out, err = call(capsys, "agents", "parse", "scripted", transcript, "--json")
    assert code == 0, err
    parsed = json.loads(out)
    assert parsed["messages"] > 0
    assert [call["name"] for call in parsed["tool_calls"]][:1] == ["Edit"]
    assert parsed["error_kind"] is None
    assert_error(call(capsys, "agents", "parse", "nope", transcript), "unknown agent 'nope'")


@pytest.mark.slow
def test_run_stops_at_max_iterations_with_exit_code_10(project: Project) -> None:
    use_scenario(project, [[{"say": "still looking"}]], repeat_last=True)
    result = loopctl("run", "make add work", *RUN, "--max-iterations", "2", cwd=project.path)
    assert result.returncode == 10, result.stderr
    assert "\x1b" not in result.stdout  # stdout is a pipe: plain mode
    lines = event_lines(result.stdout)
    assert all(STAMP.match(line) for line in lines), lines
    assert sum(line.endswith(("] iteration 1", "] iteration 2")) for line in lines) == 2
    assert any("tests failed (exit 1, 1 failing" in line for line in lines)
    assert "loop ended: max_iterations" in lines[-1]
    assert "(exit code 10)" in lines[-1]
    assert loop_state(project).status == "max_iterations"


@pytest.mark.timing  # Ctrl-C to a real loopctl
def test_interrupted_run_resumes_and_completes(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project.path)
    use_scenario(project, [[{"say": "thinking"}, {"sleep": 60}]])
    argv = [sys.executable, "-m", "loopctl", "run", "make add work", *RUN, "--max-iterations", "3"]
    proc = subprocess.Popen(
        argv, cwd=project.path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True, preexec_fn=sigint_as_in_a_terminal(),
    )  # fmt: skip
    events = project.path / ".loopctl" / "events.jsonl"
    try:
        wait_for(lambda: events.exists() and '"agent.start"' in events.read_text("utf-8"))
        code, out, err = call(capsys, "status", "--json")  # from "another terminal"
        assert code == 0, err
        live = json.loads(out)
        assert live["running"] is True
        assert live["pid"] == proc.pid
        assert live["state"]["status"] == "running"
        assert live["prompt_chars"] > 0  # the running iteration's prompt, before its record
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            last = events.read_text("utf-8").splitlines()[-5:]
            pytest.fail(f"loopctl did not stop 30 s after SIGINT; its last events: {last}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()  # reaps it and closes the pipes
    assert proc.returncode == 130, err
    assert "loop ended: interrupted" in out
    assert loop_state(project).status == "interrupted"

    use_scenario(project, [[FIX]])
    resumed = loopctl("resume", cwd=project.path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming loop: agent scripted" in resumed.stdout
    assert "up to 3 iterations" in resumed.stdout  # the loop keeps its own limit
    assert loop_state(project).status == "complete"
    assert "a + b" in project.read("calc.py")

    again = call(capsys, "resume")
    assert_error(again, "is complete", "start a new one with `loopctl run`")


@pytest.mark.slow
def test_resume_uses_the_agent_command_the_run_was_given(project: Project) -> None:
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('looked, changed nothing')\n")
    command = f"{sys.executable} agent.py"
    first = loopctl(
        "run", "make add work", "--agent-cmd", command, "--test-cmd", TEST_CMD,
        "--max-iterations", "1", cwd=project.path,
    )  # fmt: skip
    assert first.returncode == 10, first.stderr
    state = loop_state(project)
    assert state.agent == "command"
    assert state.settings is not None
    assert (state.settings.agent, state.settings.agent_cmd) == ("command", command)
    state.status = "running"  # as if the process had died mid-run
    state_files.write_loop_state(project.path / ".loopctl" / "loop-state.md", state)

    resumed = loopctl("resume", "--max-iterations", "2", "--json", cwd=project.path)
    assert resumed.returncode == 10, resumed.stderr
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert events[0]["type"] == "loop.resume"
    assert events[0]["max_iterations"] == 2
    ends = [e for e in events if e["type"] == "agent.end"]
    assert [e["outcome"] for e in ends] == ["ok"]  # the command ran (no "needs a command" crash)
    assert [(e["tokens"], e["usage"]) for e in ends] == [(None, None)]  # a command reports none


@pytest.mark.slow
def test_a_loop_of_loopctl_0_1_resumes_with_what_it_recorded(project: Project) -> None:
    """0.1 recorded no settings: only its test command, session, limit, agent, and (in
    ``extra``) ``--agent-cmd``; resume uses those and says the rest is read as it is now."""
    project.write("agent.py", "import sys\nsys.stdin.read()\nprint('looked, changed nothing')\n")
    command = f"{sys.executable} agent.py"
    state_dir = project.path / ".loopctl"
    state_dir.mkdir()
    (state_dir / "loop-state.md").write_text(
        "---\n"
        'goal: "make add work"\n'
        'original_goal: "make add work"\n'
        "iteration: 1\n"
        'status: "interrupted"\n'
        'agent: "command"\n'
        f"test_cmd: {json.dumps(TEST_CMD)}\n"
        f"workdir: {json.dumps(str(project.path))}\n"
        'loopctl_version: "0.1.0"\n'
        "max_iterations: 2\n"
        f"extra: {json.dumps({'cli_agent_cmd': command, 'goal_guard_run': 'r1'})}\n"
        "---\n"
    )
    resumed = loopctl("resume", "--json", "--no-plugins", cwd=project.path)
    assert resumed.returncode == 10, resumed.stderr
    assert "started by loopctl 0.1.0, which recorded only" in resumed.stderr
    events = [json.loads(line) for line in resumed.stdout.splitlines()]
    assert (events[0]["type"], events[0]["agent"], events[0]["max_iterations"]) == (
        "loop.resume",
        "command",
        2,
    )
    assert [e["outcome"] for e in events if e["type"] == "agent.end"] == ["ok", "ok"]
    state = loop_state(project)
    assert state.extra == {"goal_guard_run": "r1"}
    assert state.settings is not None
    assert state.settings.config is not None  # recorded now, for the next resume
    assert (state.settings.agent_cmd, state.settings.config["test_cmd"]) == (command, TEST_CMD)


@pytest.mark.slow
def test_resume_reads_secrets_again_and_restores_the_variables_of_the_run(
    project: Project,
) -> None:
    """A secret in the config is not written to loop-state.md: resume reads it again from the
    config file. A LOOPCTL_* variable that is read as it is (not a setting) comes back as the
    run had it, and resume says so."""
    write_scenario(
        project.path / "scenario.json",
        [[{"run": 'echo "$API_KEY $LOOPCTL_FAILURE_MEMORY" >> seen.txt'}]],
    )
    project.write(
        "loopctl.toml",
        '[agents.scripted]\nscenario = "scenario.json"\nenv = {API_KEY = "sekrit-123"}\n',
    )
    memory = str(project.path / "memory.sqlite3")
    first = loopctl(
        "run", "make add work", *RUN, "--max-iterations", "1", "--no-plugins",
        cwd=project.path, env=clean_env(LOOPCTL_FAILURE_MEMORY=memory),
    )  # fmt: skip
    assert first.returncode == 10, first.stderr
    state_file = project.path / ".loopctl" / "loop-state.md"
    assert "sekrit-123" not in state_file.read_text()
    recorded = loop_state(project).settings
    assert recorded is not None
    assert recorded.config is not None
    assert recorded.config["agents"]["scripted"]["env"] == {"API_KEY": "<hidden>"}
    assert recorded.env == {"LOOPCTL_FAILURE_MEMORY": memory}

    resumed = loopctl("resume", "--max-iterations", "2", "--json", cwd=project.path)
    assert resumed.returncode == 10, resumed.stderr
    assert project.read("seen.txt").splitlines() == [f"sekrit-123 {memory}"] * 2
    assert "sekrit-123" not in state_file.read_text()
    warnings = [
        json.loads(line)["message"]
        for line in resumed.stdout.splitlines()
        if json.loads(line)["type"] == "loop.warning"
    ]
    assert warnings == [
        f"resume restores the loop's environment: LOOPCTL_FAILURE_MEMORY={json.dumps(memory)} "
        "(now null)"
    ]


def test_status_and_resume_without_a_loop(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("loopctl: error: no loop in ")
    assert "loopctl run" in err
    assert "--state-dir" in err
    assert main(["status", "--json"]) == 2
    assert main(["resume"]) == 2
    err = capsys.readouterr().err
    assert "loopctl: error: nothing to resume" in err
    assert "loopctl run" in err
    assert not (in_project.path / ".loopctl" / "loop-state.md").exists()


def test_corrupt_state_file_gives_a_clear_message(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    state_dir = in_project.path / ".loopctl"
    state_dir.mkdir()
    garbage = "---\ngoal: [unclosed\n\x00\x01 not yaml at all\n"
    (state_dir / "loop-state.md").write_text(garbage, encoding="utf-8")
    state_file = str(state_dir / "loop-state.md")
    assert_usage_error(loopctl("status", cwd=in_project.path), state_file)
    assert_error(call(capsys, "status", "--json"), state_file)
    assert_error(call(capsys, "resume"), state_file)
    assert_error(call(capsys, "run", "make add work", *RUN), state_file, "--fresh-state")
    assert (state_dir / "loop-state.md").read_text(encoding="utf-8") == garbage  # untouched


# --- config ----------------------------------------------------------------------------------------


def test_config_show_names_where_each_value_came_from(
    in_project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_project.write("loopctl.toml", 'test_cmd = "pytest -q"\n[limits]\nmax_iterations = 4\n')
    monkeypatch.setenv("LOOPCTL_LIMITS__MAX_RESTARTS", "2")
    assert main(["config", "show", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["file"] == str(in_project.path / "loopctl.toml")
    assert data["values"]["limits"]["max_iterations"] == 4
    assert data["values"]["limits"]["max_restarts"] == 2
    assert data["values"]["session"] == "fresh"
    origins = data["origins"]
    assert origins["limits.max_iterations"] == "loopctl.toml"
    assert origins["limits.max_restarts"] == "env LOOPCTL_LIMITS__MAX_RESTARTS"
    assert origins["session"] == "default"

    assert main(["config", "show"]) == 0
    text = capsys.readouterr().out
    assert "limits.max_iterations = 4    # loopctl.toml" in text
    assert "limits.max_restarts = 2    # env LOOPCTL_LIMITS__MAX_RESTARTS" in text


def test_config_show_hides_secrets_typed_into_the_config(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    in_project.write(
        "loopctl.toml",
        'test_cmd = "pytest -q"\n'
        "[agents.claude.env]\n"
        'ANTHROPIC_API_KEY = "sk-ant-very-secret"\nOPENAI_KEY = "sk-also-secret"\n'
        'DB_PASSWORD = "hunter2"\nAPP_MODE = "test"\n',
    )
    assert main(["config", "show", "--json"]) == 0
    out = capsys.readouterr().out
    env = json.loads(out)["values"]["agents"]["claude"]["env"]
    assert env == {
        "ANTHROPIC_API_KEY": "<hidden>",
        "OPENAI_KEY": "<hidden>",
        "DB_PASSWORD": "<hidden>",
        "APP_MODE": "test",
    }
    assert main(["config", "show"]) == 0
    text = capsys.readouterr().out
    assert 'agents.claude.env.ANTHROPIC_API_KEY = "<hidden>"    # loopctl.toml' in text
    for secret in ("sk-ant-very-secret", "sk-also-secret", "hunter2"):
        assert secret not in out + text


def test_bad_config_file_is_one_clear_message(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    in_project.write("loopctl.toml", '[limits]\nmax_iterations = "many"\n')
    shown = loopctl("config", "show", cwd=in_project.path)
    assert_usage_error(shown, "loopctl.toml", "limits.max_iterations")
    assert shown.stdout == ""
    for args in (["run", "make add work", *RUN], ["status"], ["agents", "list"]):
        outcome = call(capsys, *args)
        assert_error(outcome, "loopctl.toml", "limits.max_iterations")
        assert outcome[1] == ""


# --- usage errors ----------------------------------------------------------------------------------


def test_unknown_agent_lists_the_available_ones(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    outcome = call(capsys, "run", "make add work", "--agent", "nope", "--test-cmd", TEST_CMD)
    assert_error(outcome, "unknown agent 'nope'", "command,", "scripted", "loopctl agents list")


def test_no_agent_and_no_claude_says_how_to_choose(
    in_project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    outcome = call(capsys, "run", "make add work", "--test-cmd", TEST_CMD)
    assert_error(outcome, "claude", "--agent NAME", "--agent-cmd", "loopctl agents list")


def test_missing_test_command(in_project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    outcome = call(capsys, "run", "make add work", "--agent", "scripted")
    assert_error(outcome, "no test command", "--test-cmd", "test_cmd")


def test_goal_problems(in_project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    assert_error(call(capsys, "run", "--goal-file", "missing.md", *RUN), "missing.md")
    in_project.write("empty.md", "  \n")
    assert_error(call(capsys, "run", "--goal-file", "empty.md", *RUN), "empty.md", "is empty")
    assert_error(call(capsys, "run", *RUN), "no goal")
    assert_error(call(capsys, "run", "goal", "--goal-file", "empty.md", *RUN), "not both")


def test_command_line_mistakes_are_loopctl_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unknown = loopctl("nosuch", cwd=tmp_path)
    assert_usage_error(unknown, "No such command 'nosuch'", "loopctl --help")
    bad = call(capsys, "run", "x", "--max-iterations", "lots")
    assert_error(bad, "--max-iterations", "loopctl run --help")
    assert_error(call(capsys, "status", "--bogus"), "--bogus", "loopctl status --help")
    code, out, _ = call(capsys, "plugins")  # a group without its command: its help
    assert code == 0
    assert "list" in out


def no_state_files_under(root: Path) -> bool:
    names = {state_files.LOOP_STATE_FILE, state_files.EVENTS_FILE, state_files.ITERATIONS_FILE}
    return not any(
        p.name in names or (p.name.startswith(".") and "tmp" in p.name) for p in root.rglob("*")
    )


@pytest.mark.parametrize("where", ["a-file", "a-file/state"])
def test_state_dir_that_cannot_be_a_directory(
    in_project: Project, where: str, capsys: pytest.CaptureFixture[str]
) -> None:
    use_scenario(in_project, [[FIX]])
    in_project.write("a-file", "not a directory\n")
    outcome = call(capsys, "run", "make add work", *RUN, "--state-dir", where)
    assert_error(outcome, str(in_project.path / where), "--state-dir", "is a file")
    assert outcome[1] == ""  # nothing started
    assert no_state_files_under(in_project.path)
    assert in_project.read("a-file") == "not a directory\n"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root can write anywhere")
def test_state_dir_under_a_read_only_directory(
    in_project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    use_scenario(in_project, [[FIX]])
    locked = in_project.path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        outcome = call(capsys, "run", "make add work", *RUN, "--state-dir", "locked/state")
    finally:
        locked.chmod(0o755)
    assert_error(outcome, "locked", "not writable", "--state-dir")
    assert no_state_files_under(in_project.path)


# --- plugins and agents ----------------------------------------------------------------------------


def add_plugin(site: Path, name: str, source: str) -> None:
    """A real (tiny) installed distribution with a ``loopctl.plugins`` entry point."""
    module = "loopctl_test_" + name.replace("-", "_")
    info = site / f"loopctl_{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: loopctl-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


HELLO_PLUGIN = """\
    from loopctl import hookimpl


    @hookimpl
    def register_commands(cli):
        @cli.command("hello")
        def hello(name: str = "world") -> None:
            '''Say hello from a plugin.'''
            print(f"hello {name} from a plugin")
"""


def test_plugin_commands_and_help_survive_a_broken_plugin(project: Project, tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_plugin(site, "hello", HELLO_PLUGIN)
    add_plugin(site, "broken", "raise RuntimeError('boom at import')\n")
    env = clean_env(PYTHONPATH=str(site))

    hello = loopctl("hello", "--name", "bob", cwd=project.path, env=env)
    assert hello.returncode == 0, hello.stderr
    assert hello.stdout == "hello bob from a plugin\n"

    shown = loopctl("--help", cwd=project.path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert re.search(r"\bhello\b", shown.stdout)
    assert re.search(r"\brun\b", shown.stdout)
    assert "boom at import" in shown.stderr
    assert "Traceback" not in shown.stderr

    listed = loopctl("plugins", "list", "--json", cwd=project.path, env=env)
    assert listed.returncode == 0, listed.stderr
    status = {row["name"]: row for row in json.loads(listed.stdout)}
    assert status["core"]["status"] == "enabled"
    assert status["core"]["origin"] == "builtin"
    assert status["hello"]["status"] == "enabled"
    assert status["hello"]["hooks"] == ["register_commands"]
    assert status["broken"]["status"] == "broken"
    assert "boom at import" in status["broken"]["detail"]


def test_plugins_list_json_shows_the_builtin_plugins(tmp_path: Path) -> None:
    result = loopctl("plugins", "list", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    core = rows["core"]
    assert (core["status"], core["origin"], core["version"]) == ("enabled", "builtin", __version__)
    assert core["hooks"] == ["compose_prompt"]
    for adapter in ("claude", "codex", "gemini", "aider", "command", "scripted"):
        assert rows[adapter]["origin"] == "builtin"
        assert rows[adapter]["hooks"] == ["register_agents"]


@pytest.mark.slow
def test_a_builtin_adapter_can_be_disabled_on_its_own(tmp_path: Path) -> None:
    (tmp_path / "loopctl.toml").write_text('[plugins]\ndisable = ["aider"]\n')
    listed = loopctl("plugins", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert re.search(r"^aider +disabled +loopctl-core .*\(builtin\)$", listed.stdout, re.M)
    agents = loopctl("agents", "list", "--json", cwd=tmp_path)
    assert agents.returncode == 0, agents.stderr
    names = {row["name"] for row in json.loads(agents.stdout)}
    assert "aider" not in names
    assert {"claude", "codex", "gemini", "command", "scripted"} <= names


@pytest.mark.slow
def test_the_core_plugin_cannot_be_disabled(tmp_path: Path) -> None:
    (tmp_path / "loopctl.toml").write_text('[plugins]\ndisable = ["core"]\n')
    result = loopctl("agents", "list", cwd=tmp_path)
    assert result.returncode == 2
    assert "plugin 'core' is part of loopctl and cannot be disabled" in result.stderr


@pytest.mark.parametrize(("value", "footer"), [("1", True), ("0", False), ("", False)])
def test_plugins_list_says_when_autoload_is_off(tmp_path: Path, value: str, footer: bool) -> None:
    env = clean_env(LOOPCTL_DISABLE_PLUGIN_AUTOLOAD=value)
    result = loopctl("plugins", "list", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert ("LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set" in result.stdout) is footer


def test_agents_list_json(in_project: Project, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "agents", "list", "--json")
    assert code == 0, err
    rows = {row["name"]: row for row in json.loads(out)}
    assert {"command", "scripted"} <= set(rows)
    for row in rows.values():
        assert {"found", "version", "path", "description", "plugin"} <= set(row)
    assert rows["scripted"]["found"] is True
    assert rows["scripted"]["version"] == f"scripted (loopctl {__version__})"
    assert rows["command"]["found"] is False
    assert rows["command"]["version"] is None


# --- in-process pieces -----------------------------------------------------------------------------


def test_fresh_state_removes_only_loopctl_files(tmp_path: Path) -> None:
    from loopctl.cli.app import _discard_state

    target = tmp_path / "state"
    (target / "logs").mkdir(parents=True)
    (target / "restart-1").mkdir()
    for name in ("loop-state.md", "events.jsonl", "iterations.jsonl", "report.md"):
        (target / name).write_text("x")
    (target / "my-notes.txt").write_text("mine")
    _discard_state(target)
    assert sorted(p.name for p in target.iterdir()) == ["loopctl.lock", "my-notes.txt"]


RECORD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(
    records=st.lists(
        st.dictionaries(
            st.sampled_from(
                ["iteration", "agent", "failing_tests", "decision", "reason", "tests_passed", "x"]
            ),
            RECORD_VALUES,
        ),
        max_size=5,
    ),
    prompt_chars=st.one_of(st.none(), st.integers(min_value=0)),
)
def test_render_status_tolerates_hand_edited_records(
    records: list[dict[str, Any]], prompt_chars: int | None
) -> None:
    state = state_files.LoopState(goal="g", original_goal="fix it\nplease", iteration=2)
    data = {
        "state_dir": "/x/.loopctl",
        "status": "running",
        "running": True,
        "pid": 42,
        "state": attrs.asdict(state),
        "prompt_chars": prompt_chars,
        "recent": records,
        "problems": ["error-summary.json: not valid JSON"],
    }
    text = render_status(data)
    assert text.startswith("loop in /x/.loopctl: running (pid 42)")
    assert "goal: fix it…" in text
    assert "warning: error-summary.json" in text


OPTION_PLUGIN = """\
    import attrs
    from loopctl import RunOption, hookimpl


    @attrs.define
    class Config:
        speed: str = "normal"


    @hookimpl
    def register_config():
        return {"opt": Config}


    @hookimpl
    def register_run_options():
        return [RunOption("--speed", "plugins.opt.speed", help="How fast to go.", choices=("normal", "fast"))]


    @hookimpl
    def on_loop_start(loop):
        loop.emit("opt.speed", speed=loop.plugin_config("opt").speed)
"""


@pytest.mark.slow
def test_plugins_add_run_options_that_set_their_config(project: Project, tmp_path: Path) -> None:
    site = tmp_path / "site"
    add_plugin(site, "opt", OPTION_PLUGIN)
    env = clean_env(PYTHONPATH=str(site))
    use_scenario(project, [[FIX]])
    base = ("run", "make add work", "--agent", "scripted", "--test-cmd", TEST_CMD, "--json")

    ran = loopctl(*base, "--speed", "fast", cwd=project.path, env=env)
    assert ran.returncode == 0, ran.stderr
    events = [json.loads(line) for line in ran.stdout.splitlines()]
    assert [e["speed"] for e in events if e["type"] == "opt.speed"] == ["fast"]

    bad = loopctl(*base, "--fresh-state", "--speed=warp", cwd=project.path, env=env)
    assert_usage_error(bad, "--speed", "'warp' is not one of normal, fast")
    unknown = loopctl(*base, "--fresh-state", "--sped", "fast", cwd=project.path, env=env)
    assert_usage_error(unknown, "no such option: --sped", "--speed")

    shown = loopctl("run", "--help", cwd=project.path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "Options added by plugins" in shown.stdout
    assert "--speed" in shown.stdout
