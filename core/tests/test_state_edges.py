"""State edge cases: ``status`` reads damaged journals the way ``resume`` does, journal tails cost
what the line costs, ``progress.md`` is final when the loop ends, agent logs are capped, and a
goal or a test command that cannot work is refused before the agent's first turn."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl import state as state_files
from loopctl.agents.scripted import write_scenario
from loopctl.cli.app import main
from loopctl.state import read_jsonl, tail_jsonl
from loopctl.testcmd import first_program
from loopctl.testing import Project, make_project, python_test_cmd

FIXED = "def add(a, b):\n    return a + b\n"
TEST_CALC = (
    "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(1, 2), 3)\n"
)
RUN = ["--test-cmd", python_test_cmd(), "--agent", "scripted"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A git project whose one test fails until `add` is fixed; cwd is the project and no
    LOOPCTL_* variables are set, for in-process ``main([...])`` calls."""
    made = make_project(tmp_path / "project")
    made.write("calc.py", "def add(a, b):\n    return a - b\n")
    made.write("test_calc.py", TEST_CALC)
    made.commit("calc")
    monkeypatch.chdir(made.path)
    for name in list(os.environ):
        if name.startswith("LOOPCTL_"):
            monkeypatch.delenv(name)
    return made


def scenario(project: Project, turns: list[list[dict[str, Any]]], config: str = "") -> None:
    write_scenario(project.path / "scenario.json", turns)
    project.write("loopctl.toml", f'[agents.scripted]\nscenario = "scenario.json"\n{config}')


def call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def state_dir(project: Project) -> Path:
    return project.path / ".loopctl"


# --- status reads the journals like resume ------------------------------------------------------


@pytest.mark.slow
def test_status_reports_damaged_lines_and_skips_records_that_are_not_iterations(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario(project, [[{"say": "looking"}], [{"write": "calc.py", "content": FIXED}]])
    assert call(capsys, "run", "make add work", *RUN)[0] == 0
    journal = state_dir(project) / state_files.ITERATIONS_FILE
    real = read_jsonl(journal).records[-1]
    with open(journal, "ab") as stream:  # JSON-valid junk, then a torn line
        stream.write(b'{"iteration": "seven", "tests_passed": "yes"}\n{"iteration": 3, "te')
    with open(state_dir(project) / state_files.EVENTS_FILE, "ab") as stream:
        stream.write(b'{"type": "agent.st')

    code, out, err = call(capsys, "status", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["last_iteration"] == real  # the junk is not taken for an iteration
    assert [r["iteration"] for r in data["recent"]] == [1, 2]
    problems = data["problems"]
    assert "iterations.jsonl, the last line: not valid JSON (torn write?)" in problems
    assert any(
        p.startswith("iterations.jsonl, line 2 from the end: not an iteration record: ")
        for p in problems
    ), problems
    assert "events.jsonl, the last line: not valid JSON (torn write?)" in problems

    code, text, err = call(capsys, "status")
    assert code == 0, err
    assert "warning: iterations.jsonl, the last line: not valid JSON (torn write?)" in text
    assert "  #2: tests pass" in text

    # resume, reading the whole journal, says the same of the same lines
    resume_view: list[str] = []
    from loopctl.project import SavedRun

    SavedRun(state_dir(project)).iterations(resume_view)
    assert len(resume_view) == 2
    assert "not an iteration record" in resume_view[0] + resume_view[1]


lines = st.lists(
    st.one_of(
        st.dictionaries(st.text(max_size=3), st.integers() | st.text(max_size=3), max_size=3).map(
            lambda d: json.dumps(d)
        ),
        st.sampled_from(["", "[]", "{", '{"a":', "  ", '"text"', "\udcff"]),
        st.text(max_size=20),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=lines, trailing_newline=st.booleans(), chunk_size=st.integers(1, 40))
def test_tail_reports_the_same_bad_lines_as_a_whole_read(
    tmp_path_factory: pytest.TempPathFactory,
    lines: list[str],
    trailing_newline: bool,
    chunk_size: int,
) -> None:
    """Reading back to the start, the tail skips exactly the lines ``read_jsonl`` skips, for
    the same reasons, in file order; ``check`` rejects like a bad line."""
    path = tmp_path_factory.mktemp("tail") / "events.jsonl"
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    path.write_bytes(data + (b"\n" if trailing_newline and lines else b""))
    whole = read_jsonl(path)
    problems: list[str] = []
    records = tail_jsonl(path, 10**6, chunk_size=chunk_size, problems=problems)
    assert records == whole.records
    assert [p.split(": ", 1)[1] for p in problems] == [p.split(": ", 1)[1] for p in whole.problems]
    written = path.read_bytes()  # a final newline ends the last line; it starts none
    line_count = len(written.removesuffix(b"\n").split(b"\n")) if written else 0
    for problem, expected in zip(problems, whole.problems, strict=True):
        number = int(expected.split(" line ")[1].split(":")[0])
        from_end = line_count - number + 1
        where = "the last line" if from_end == 1 else f"line {from_end} from the end"
        assert problem.startswith(f"events.jsonl, {where}: ")

    def no_a(record: dict[str, Any]) -> None:
        if "a" in record:
            raise ValueError("has an a")

    checked: list[str] = []
    kept = tail_jsonl(path, 10**6, chunk_size=chunk_size, problems=checked, check=no_a)
    assert kept == [r for r in whole.records if "a" not in r]
    assert sum(p.endswith(": has an a") for p in checked) == len(whole.records) - len(kept)


def best_of(rounds: int, work: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times)


def test_the_tail_of_one_long_line_costs_about_one_read_of_it(tmp_path: Path) -> None:
    """The campaign's case: status took 17.7 s on one 50 MB line, prepending every 64 KB chunk
    to a growing buffer and splitting it again. Small chunks make that quadratic cost show at
    4 MB (about 8 GB copied); a linear tail costs a few reads of the file. The benchmark
    (benchmarks/bench_long_lines.py) has the 50 MB figures."""
    path = tmp_path / "iterations.jsonl"
    line = json.dumps({"iteration": 1, "text": "x" * 4_000_000}).encode()
    path.write_bytes(b'{"iteration": 0}\n' + line + b"\n")

    def read_once() -> object:
        return [json.loads(raw) for raw in path.read_bytes().splitlines()]

    baseline = best_of(3, read_once)
    tail = best_of(3, lambda: tail_jsonl(path, 1, chunk_size=1024))
    assert tail_jsonl(path, 2, chunk_size=1024)[0] == {"iteration": 0}
    assert tail < 20 * baseline + 0.05, f"tail {tail:.3f} s, one read {baseline:.3f} s"


# --- progress.md is final ------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("turns", "args", "status"),
    [
        ([[{"write": "calc.py", "content": FIXED}]], [], "complete: the tests pass"),
        ([[{"say": "still looking"}]], ["--max-iterations", "1"], "max_iterations: reached"),
    ],
)
def test_progress_says_how_the_loop_ended(
    project: Project,
    capsys: pytest.CaptureFixture[str],
    turns: list[list[dict[str, Any]]],
    args: list[str],
    status: str,
) -> None:
    scenario(project, turns)
    call(capsys, "run", "make add work", *RUN, *args)
    progress = (state_dir(project) / state_files.PROGRESS_FILE).read_text(encoding="utf-8")
    assert f"**Status:** {status}" in progress
    assert "running" not in progress


# --- agent logs are capped ------------------------------------------------------------------------


def test_agent_logs_are_capped_by_the_config(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    chatty = [{"say": f"line {n} " + "z" * 200} for n in range(100)]
    scenario(
        project,
        [[*chatty, {"write": "calc.py", "content": FIXED}]],
        "[limits]\nagent_log_bytes = 4000\n",
    )
    assert call(capsys, "run", "make add work", *RUN)[0] == 0
    log = state_dir(project) / state_files.LOGS_DIR / state_files.log_name(1, "agent.jsonl")
    data = log.read_bytes()
    head, note_line = data.rstrip(b"\n").rsplit(b"\n", 1)
    assert len(head) <= 4000
    note = json.loads(note_line)
    assert note["type"] == "loopctl.transcript_cut"
    assert note["kept_bytes"] == 4000
    assert note["cut_bytes"] > 20_000


# --- goals --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_goal_larger_than_half_the_prompt_budget_is_refused(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario(project, [[{"write": "calc.py", "content": FIXED}]])
    project.write("goal.md", "Make add work.\n" + "context " * 1600)  # 12,815 characters
    code, _out, err = call(capsys, "run", "--goal-file", "goal.md", *RUN)
    assert code == 2
    assert "Traceback" not in err
    assert err.startswith(
        "loopctl: error: the goal is 12,815 characters long; it may take at "
        "most half of the prompt (12,000 characters of prompt.budget_chars"
    )
    assert not (state_dir(project) / state_files.LOOP_STATE_FILE).exists()

    scenario(
        project, [[{"write": "calc.py", "content": FIXED}]], "[prompt]\nbudget_chars = 30000\n"
    )
    code, _out, err = call(capsys, "run", "--goal-file", "goal.md", *RUN)
    assert code == 0, err
    prompt = state_dir(project) / state_files.LOGS_DIR / state_files.log_name(1, "prompt.md")
    assert "context context" in prompt.read_text(encoding="utf-8")


def test_a_goal_with_a_nul_byte_is_refused(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario(project, [[{"write": "calc.py", "content": FIXED}]])
    project.write("goal.md", "Make add\x00 work.\n")
    code, _out, err = call(capsys, "run", "--goal-file", "goal.md", *RUN)
    assert code == 2
    assert err == (
        "loopctl: error: the goal contains a NUL character (character 9); a goal is text: "
        "remove it\n"
    )


# --- a test command that cannot run ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["pytst -q", "./run-tests.sh", "CI=1 no-such-runner && true"])
def test_a_test_command_that_is_not_found_is_a_usage_error_before_the_agent_runs(
    project: Project, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """It ran three agent turns, then exited 17 (the failure classifier's stop)."""
    scenario(project, [[{"write": "marker.txt", "content": "the agent ran\n"}]])
    code, out, err = call(
        capsys, "run", "make add work", "--agent", "scripted", "--test-cmd", command
    )
    assert code == 2, out + err
    program = first_program(command)
    assert err.startswith(f"loopctl: error: the test command cannot run: {program!r} is not found")
    assert "--test-cmd" in err
    assert not (project.path / "marker.txt").exists()  # no agent turn
    assert not (state_dir(project) / state_files.LOOP_STATE_FILE).exists()


@pytest.mark.slow
def test_resume_refuses_a_test_command_that_went_missing(
    project: Project, capsys: pytest.CaptureFixture[str]
) -> None:
    project.write("run-tests.sh", f"#!/bin/sh\nexec {python_test_cmd()}\n")
    os.chmod(project.path / "run-tests.sh", 0o755)
    scenario(project, [[{"say": "looking"}]])
    code, _out, err = call(capsys, "run", "goal", "--agent", "scripted", "--test-cmd",
                           "./run-tests.sh", "--max-iterations", "1")  # fmt: skip
    assert code == 10, err
    state = state_files.read_loop_state(state_dir(project) / state_files.LOOP_STATE_FILE)
    state.status = "interrupted"
    state_files.write_loop_state(state_dir(project) / state_files.LOOP_STATE_FILE, state)
    (project.path / "run-tests.sh").unlink()
    code, _out, err = call(capsys, "resume", "--max-iterations", "2")
    assert code == 2
    assert "the test command cannot run: './run-tests.sh' is not found" in err


@pytest.mark.parametrize(
    "command",
    [
        f"{sys.executable} -c pass",
        "true",
        "exit 0",
        "cd . && true",
        "FOO=1 true",
        "(true)",
        "$NOT_SET_ANYWHERE",  # only the shell can tell: left to the run
        "if true; then true; fi",
    ],
)
def test_commands_the_shell_can_run_or_only_it_can_judge_are_accepted(
    project: Project, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    from loopctl.testcmd import missing_program

    assert missing_program(command, cwd=project.path) is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_first_program_never_raises(command: str) -> None:
    program = first_program(command)
    assert program is None or (isinstance(program, str) and program != "")
