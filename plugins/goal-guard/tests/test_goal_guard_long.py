"""The long and the hard cases: fifty iterations of growing notes, a loop killed mid-iteration
and resumed, and arbitrary goal text through a real run and a real resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from goal_guard_helpers import (
    PLUGINS,
    TEST_CMD,
    NoteSource,
    config,
    goal_section_is,
    notes_section,
    prepare_project,
    prompts,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import loopctl_goal_guard as gg
from loopctl import SavedRun, StateError, read_jsonl
from loopctl.testing import make_project, run_loop
from loopctl_goal_guard import record as rec

GOAL = (
    "Make the three failing tests pass without changing their assertions.\n"
    "\n"
    "```yaml\n"
    'key: "quoted"\n'
    "---\n"
    "```\n"
    "Keep C:\\temp\\new paths intact; ünïcode ✓"
)
FAILING = ["tests/test_a.py::test_one", "tests/test_b.py::test_two", "tests/test_c.py::test_three"]


def fast_agent(max_iterations: int, **extra: Any) -> dict[str, Any]:
    """The `command` agent running `true`: an agent process per iteration, no interpreter."""
    settings = config(max_iterations, **extra)
    settings["agent_cmd"] = "true"
    settings["limits"]["max_agent_crashes"] = max_iterations
    return settings


@pytest.mark.slow
def test_fifty_iterations_keep_the_goal_exact_and_the_prompt_flat(loopctl_project):
    prepare_project(loopctl_project, failing=FAILING)
    prompt_budget = 24000
    notes_budget = 2000
    result = run_loop(
        loopctl_project,
        GOAL,
        agent="command",
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "reviewer": NoteSource(per_iteration=3, steady=["Mind the cache."])},
        config=fast_agent(50, prompt={"budget_chars": prompt_budget}),
    )
    assert result.status == "max_iterations"
    logged = prompts(result.state_dir)
    assert sorted(logged) == list(range(1, 51))
    # "Your Goal" is byte-identical to the original in every one of the fifty prompts.
    assert all(goal_section_is(prompt, GOAL) for prompt in logged.values())
    # Notes were appended every iteration (3 new remarks + 3 test failures + 1 steady)...
    events = result.events_of(gg.NOTES)
    assert [e["notes"] for e in events[:3]] == [0, 7, 10]
    assert events[-1]["notes"] == 4 + 3 * 49
    assert events[-1]["left_out"] > 100
    # ...yet the notes section stays within its budget, with a notice, and the whole prompt
    # stops growing once the notes fill their budget: flat, not rising with the iteration count.
    assert all(e["chars"] <= notes_budget for e in events)
    assert "left out to keep this section within 2000 characters" in notes_section(logged[50])
    sizes = [len(logged[i]) for i in range(1, 51)]
    assert max(sizes) <= prompt_budget
    plateau = sizes[19:]
    assert max(plateau) - min(plateau) <= 40, plateau
    assert sizes[-1] - sizes[19] <= 40
    assert [r["prompt_chars"] for r in result.records] == sizes
    # The newest notes are the ones shown; the oldest remarks were left out.
    assert "remark 0 of iteration 49" in logged[50]
    assert "iteration 1:" not in logged[50]
    # loop-state.md: the original goal, and a working goal bounded by the same budget.
    state = result.loop_state()
    assert state.original_goal == GOAL
    assert len(state.goal) <= len(GOAL) + notes_budget + 100
    assert result.events_of(gg.VIOLATION) == []


RUNNER = """
import json, sys
from pathlib import Path
from loopctl.testing import Project, run_loop
from loopctl_goal_guard import plugin
args = json.loads(sys.argv[1])
run_loop(Project(Path(args["project"])), args["goal"], turns=args["turns"],
         test_cmd=args["test_cmd"], plugins={"goal-guard": plugin}, config=args["config"])
"""


def _events(state_dir: Path) -> list[dict[str, Any]]:
    return read_jsonl(state_dir / "events.jsonl").records


def _kill_agent_group(state_dir: Path) -> None:
    try:
        recorded = SavedRun(state_dir).loop_state().agent_process
    except StateError:
        return
    if isinstance(recorded, list) and recorded and isinstance(recorded[0], int):
        try:
            os.killpg(recorded[0], signal.SIGKILL)
        except OSError:
            pass


@pytest.mark.timing  # SIGKILL mid-turn
def test_a_loop_killed_mid_iteration_resumes_with_the_same_goal_and_notes(loopctl_project):
    prepare_project(loopctl_project, failing=FAILING[:1])
    state_dir = loopctl_project.path / ".loopctl"
    say = [{"say": "working"}]
    args = {
        "project": str(loopctl_project.path),
        "goal": GOAL,
        "turns": [say, say, [{"sleep": 60}]],  # iteration 3 hangs until killed
        "test_cmd": TEST_CMD,
        "config": config(4),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    errors = loopctl_project.path.parent / "runner.err"
    with errors.open("wb") as stream:
        proc = subprocess.Popen(
            [sys.executable, "-c", RUNNER, json.dumps(args)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stream,
        )
    try:
        deadline = time.monotonic() + 30
        while not any(
            e.get("type") == "agent.start" and e.get("iteration") == 3 for e in _events(state_dir)
        ):
            assert proc.poll() is None, errors.read_text(errors="replace")
            assert time.monotonic() < deadline, "the loop never reached iteration 3"
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no chance to clean up
        proc.wait(timeout=10)
        assert SavedRun(state_dir).loop_state().status == "running"
        resumed = run_loop(
            loopctl_project,
            "not used on resume",
            turns=[say],
            test_cmd=TEST_CMD,
            plugins=PLUGINS,
            config=config(4),
            resume=True,
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        _kill_agent_group(state_dir)
    assert resumed.status == "max_iterations"
    types = [e["type"] for e in resumed.events]
    after_resume = types[types.index("loop.resume") :]
    assert gg.VIOLATION not in types
    assert types.count(gg.SEALED) == 1  # sealed once, by the killed run...
    assert gg.SEALED not in after_resume  # ...and its record kept on resume
    assert resumed.loop_state().original_goal == GOAL
    assert (state_dir / rec.GUARD_DIR / rec.GOAL_FILE).read_text(encoding="utf-8") == GOAL
    logged = prompts(state_dir)
    assert sorted(logged) == [1, 2, 3, 4]
    assert all(goal_section_is(p, GOAL) for p in logged.values())
    # The notes survived the kill: the test note counts iterations 1, 2 (before) and 3 (after).
    assert "test_one` fails: AssertionError" in notes_section(logged[4])
    assert "(tests, iteration 1, seen 3×, last in iteration 3)" in notes_section(logged[4])


# (a NUL is refused by loopctl before a run starts, so no goal holds one)
goal_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=300,
)


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(goal='multi\nline "quotes" and \\backslashes\\ and \\n escapes')
@example(goal="---\ngoal: not: a: key\n---\n- [yaml, looking]\n  nested: {x: 1}\n...")
@example(goal="ünïcödé ✓ 中文 😀 \u2028 separators \u0085 and \x01 control\r\nCRLF")
@example(goal="long goal " * 1200)  # as long as the default prompt budget allows (12,000)
@given(goal=goal_text.filter(lambda text: text.strip()))
def test_any_goal_round_trips_through_a_real_run_and_resume(
    tmp_path_factory: pytest.TempPathFactory, goal: str
) -> None:
    project = make_project(tmp_path_factory.mktemp("round-trip") / "project")
    prepare_project(project)
    common: dict[str, Any] = {"agent": "command", "test_cmd": TEST_CMD, "plugins": PLUGINS}
    first = run_loop(project, goal, config=fast_agent(1), **common)
    assert first.loop_state().original_goal == goal
    second = run_loop(project, "", resume=True, config=fast_agent(2), **common)
    state = second.loop_state()
    assert state.original_goal == goal
    assert state.goal.startswith(goal + "\n\n")  # the working goal: the original, then notes
    assert second.events_of(gg.VIOLATION) == []
    sealed = rec.load(second.state_dir).sealed
    assert sealed is not None
    assert sealed.text == goal
    logged = prompts(second.state_dir)
    assert sorted(logged) == [1, 2]
    assert all(goal_section_is(prompt, goal) for prompt in logged.values())


@pytest.mark.slow
def test_the_real_cli_round_trips_a_goal_file_through_run_and_resume(loopctl_project):
    """`loopctl run --goal-file` and `loopctl resume` as subprocesses, goal-guard loaded from its
    installed entry point (and only it)."""
    prepare_project(loopctl_project)
    text = GOAL + "\n\n---\n'single' \"double\" \\\\ \\t not a tab\n  indented: [yaml]\n"
    loopctl_project.write("goal.md", text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = "goal-guard"

    def loopctl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "loopctl", *args],
            cwd=loopctl_project.path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    common = ("--agent", "command", "--agent-cmd", "true", "--test-cmd", TEST_CMD)
    first = loopctl("run", "--goal-file", "goal.md", *common, "--max-iterations", "1")
    assert first.returncode == 10, first.stderr  # max_iterations
    second = loopctl("resume", "--max-iterations", "2")
    assert second.returncode == 10, second.stderr
    state_dir = loopctl_project.path / ".loopctl"
    assert SavedRun(state_dir).loop_state().original_goal == text
    shown = loopctl("goal", "show", "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["sealed"]["text"] == text
    assert data["agrees"] is True
    events = _events(state_dir)
    assert [e["type"] for e in events].count(gg.SEALED) == 1
    assert not [e for e in events if e["type"] == gg.VIOLATION]
    logged = prompts(state_dir)
    assert sorted(logged) == [1, 2]
    assert all(goal_section_is(prompt, text) for prompt in logged.values())
