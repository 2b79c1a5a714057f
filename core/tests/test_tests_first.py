"""Tests first: a fresh run runs the test command once before the agent's first turn
(``test_first``), as ``until pytest; do agent; done`` does."""

from __future__ import annotations

import pytest
from calc_loop import FIX, make_calc_project, run

from loopctl import CompletionVeto, IterationEnd, hookimpl
from loopctl.testing import run_loop

#: A turn that leaves a mark: the agent ran only if the file exists.
MARK = {"write": "agent-ran.txt", "content": "yes\n"}
GOOD = "def add(a, b):\n    return a + b\n"
#: A test that fails the first time it runs in a project, then passes (its counter file is
#: ignored by git, as a test's own scratch files are).
FLAKY_TEST = (
    "import unittest\nfrom pathlib import Path\n\nRUNS = Path(__file__).with_name('.runs')\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_upstream(self):\n"
    "        count = int(RUNS.read_text()) + 1 if RUNS.exists() else 1\n"
    "        RUNS.write_text(str(count))\n"
    "        if count == 1:\n"
    "            raise TimeoutError('upstream did not answer')\n"
)


@pytest.fixture
def project(loopctl_project):
    return make_calc_project(loopctl_project)


@pytest.fixture
def passing(loopctl_project):
    """The calc project with add() already right."""
    make_calc_project(loopctl_project)
    loopctl_project.write("calc.py", GOOD)
    loopctl_project.commit("right calc")
    return loopctl_project


class Seen:
    """A plugin that notes the records and test runs on_failure and on_success are given."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, str, bool]] = []

    @hookimpl
    def on_failure(self, record, test_run):
        self.calls.append(("failure", record.iteration, record.ending, test_run.passed))

    @hookimpl
    def on_success(self, record, test_run):
        self.calls.append(("success", record.iteration, record.ending, test_run.passed))


def _prompt(result, iteration: int = 1) -> str:
    return (result.state_dir / "logs" / f"iteration-{iteration:04d}.prompt.md").read_text()


def test_the_failure_before_the_first_turn_is_in_the_first_prompt(project):
    seen = Seen()
    result = run(project, [[FIX]], plugins={"seen": seen})
    assert result.status == "complete"
    prompt = _prompt(result)
    assert "## Last Test Run" in prompt
    assert "test_add" in prompt  # the failing test's id
    assert "AssertionError" in prompt  # and its error line
    types = [e["type"] for e in result.events]
    assert types.index("tests.end") < types.index("iteration.start")  # the tests ran first
    first = result.events_of("tests.end")[0]
    assert first.get("iteration") is None
    assert first["passed"] is False
    assert seen.calls[0] == ("failure", 0, IterationEnd.TESTS_FIRST.value, False)
    assert seen.calls[1][:2] == ("success", 1)
    assert [r["iteration"] for r in result.records] == [1]  # the test run is no iteration


def test_tests_that_already_pass_end_the_run_with_no_agent_turn(passing):
    seen = Seen()
    result = run(passing, [[MARK]], plugins={"seen": seen})
    assert result.status == "complete"
    assert result.outcome.exit_code == 0
    assert result.outcome.iterations == 0
    assert "already pass before any agent turn" in result.outcome.message
    assert "test_first = false" in result.outcome.message
    assert not result.events_of("agent.start")
    assert not result.records
    assert not (passing.path / "agent-ran.txt").exists()  # no agent process ran
    assert seen.calls == [("success", 0, IterationEnd.TESTS_FIRST.value, True)]
    assert result.report()["reason"] == "tests_already_pass"


def test_test_first_false_has_the_agent_work_anyway(passing):
    result = run(passing, [[MARK]], config={"test_first": False})
    assert result.status == "complete"
    assert [r["iteration"] for r in result.records] == [1]
    assert (passing.path / "agent-ran.txt").exists()
    assert not any(e.get("iteration") is None for e in result.events_of("tests.start"))


def test_with_a_completion_signal_the_agent_runs_though_the_tests_pass(passing):
    done = {"say": "all good\nLOOPCTL_DONE"}
    result = run(passing, [[MARK, done]], config={"completion_signal": "LOOPCTL_DONE"})
    assert result.status == "complete"
    assert [r["iteration"] for r in result.records] == [1]
    assert (passing.path / "agent-ran.txt").exists()


def test_a_failure_that_passes_on_a_rerun_is_flaky_and_taken_as_a_pass(loopctl_project):
    loopctl_project.write(".gitignore", ".loopctl/\n__pycache__/\n.runs\n")
    loopctl_project.write("test_upstream.py", FLAKY_TEST)
    loopctl_project.commit("a flaky test")
    result = run_loop(loopctl_project, "make the tests pass", turns=[[MARK]])
    assert result.status == "complete"
    assert result.outcome.iterations == 0
    assert not (loopctl_project.path / "agent-ran.txt").exists()
    flaky = result.events_of("tests.flaky")
    assert len(flaky) == 1
    assert any("test_upstream" in test for test in flaky[0]["failing_tests"])
    assert [e.get("label", "") for e in result.events_of("tests.end")] == ["", "flaky-check"]
    sections = result.report()["sections"]
    assert any(s["title"] == "Flaky Tests" and "test_upstream" in s["body"] for s in sections)
    assert "Flaky Tests" in (result.state_dir / "report.md").read_text()
    assert "flaky" in result.outcome.message


def test_a_failure_that_fails_again_on_the_rerun_goes_to_the_agent(project):
    result = run(project, [[FIX]])
    assert result.status == "complete"
    labels = [e.get("label", "") for e in result.events_of("tests.end")]
    assert labels == ["", "flaky-check", ""]  # one re-run, then the first iteration's run
    assert not result.events_of("tests.flaky")


@pytest.mark.slow
def test_no_tests_run_first_after_a_restart(project):
    turns = [[{"error": "context_overflow", "message": "prompt is too long"}], [FIX]]
    result = run(project, turns, config={"limits": {"max_iterations": 3}})
    assert result.status == "complete"
    before_turns = [e for e in result.events_of("tests.start") if e.get("iteration") is None]
    assert len(before_turns) == 2  # the first run and its flaky-check, nothing at the restart


def test_a_plugins_veto_of_the_pass_before_the_first_turn_has_the_agent_work(passing):
    class Veto:
        @hookimpl
        def on_success(self, record):
            if record.iteration == 0:
                return CompletionVeto("the pass is not to be trusted yet")
            return None

    result = run(passing, [[MARK]], plugins={"veto": Veto()})
    assert result.status == "complete"
    assert [r["iteration"] for r in result.records] == [1]
    assert (passing.path / "agent-ran.txt").exists()
    vetoed = result.events_of("loop.completion_vetoed")
    assert [e["reason"] for e in vetoed] == ["veto: the pass is not to be trusted yet"]


TWO_BUGS = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a ** b\n"
TWO_TESTS = (
    "import unittest\nfrom calc import add, mul\n\n"
    "class T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n"
)


@pytest.mark.slow
def test_a_first_turn_that_fixed_one_of_the_failing_tests_is_no_failed_approach(
    loopctl_project,
):
    """The tests before the first turn are what the first turn is measured against: one
    failing test fewer is progress, not a dead end to warn the next turn off (it was listed
    under "Approaches That Did Not Work" with its diff, which told a fresh agent its own right
    change had failed)."""
    loopctl_project.write("calc.py", TWO_BUGS)
    loopctl_project.write("test_calc.py", TWO_TESTS)
    loopctl_project.commit("two bugs")
    fix_mul = {"replace": "calc.py", "old": "a ** b", "new": "a * b"}
    result = run(loopctl_project, [[FIX], [fix_mul]])
    assert result.status == "complete"
    assert "Approaches That Did Not Work" not in _prompt(result, 2)
    assert not result.events_of("loop.failed_approach")
