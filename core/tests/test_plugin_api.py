"""The plugin API as plugins use it: test runs passed to hooks, verdicts and decisions as hook
results, one after_iteration for every before_iteration, the stash, the original goal."""

from __future__ import annotations

import sys

import pytest
from calc_loop import BUGGY, FIX, IDLE, make_calc_project, run

import loopctl
from loopctl import (
    CompletionVeto,
    Decision,
    IterationEnd,
    NotAgentsFault,
    StashKey,
    hookimpl,
)


@pytest.fixture
def project(loopctl_project):
    return make_calc_project(loopctl_project)


PASSING = f"{sys.executable} -c pass"


@pytest.mark.slow
def test_a_plugins_rerun_never_changes_what_the_next_plugin_sees(project):
    """The failure classifier re-runs the tests inside on_failure; a plugin after it must still
    see the iteration's own failing run, and the next prompt must still show it."""
    seen = []

    class Rerunner:
        @hookimpl(tryfirst=True)
        def on_failure(self, loop, record, test_run):
            rerun = loop.run_tests(PASSING, label="flaky-check")
            seen.append(("rerun", rerun.passed, rerun.label, test_run.passed))

    class Observer:
        @hookimpl(trylast=True)
        def on_failure(self, loop, record, test_run):
            seen.append(("observer", test_run.passed, loop.last_test_run is test_run))

        @hookimpl
        def after_iteration(self, loop, record, test_run):
            if test_run is not None and not test_run.passed:
                seen.append(("after", test_run.passed, [r.label for r in loop.reruns]))

    result = run(
        project,
        [IDLE, [FIX]],
        plugins={"observer": Observer(), "rerunner": Rerunner()},
        config={"test_first": False},  # an iteration's own failure (test_tests_first: before)
    )
    assert result.status == "complete"
    assert seen == [
        ("rerun", True, "flaky-check", False),
        ("observer", False, True),
        ("after", False, ["flaky-check"]),
    ]
    prompt = (result.state_dir / "logs" / "iteration-0002.prompt.md").read_text()
    assert "## Last Test Run" in prompt
    assert "failed with exit code 1" in prompt
    assert "Re-run by a plugin (flaky-check)" in prompt
    assert "passed." in prompt


class Lifecycle:
    def __init__(self):
        self.calls = []

    @hookimpl
    def before_iteration(self, loop):
        self.calls.append(("before", loop.iteration))

    @hookimpl
    def on_failure(self, loop, record, test_run):
        self.calls.append(("failure", record.ending, test_run is None))

    @hookimpl
    def on_success(self, loop, record, test_run):
        self.calls.append(("success", record.ending))

    @hookimpl
    def after_iteration(self, loop, record, test_run):
        self.calls.append(("after", loop.iteration, record.ending))


@pytest.mark.slow
def test_a_rate_limit_wait_closes_the_iteration_before_it_runs_again(project):
    rate_limited = {"error": "rate_limit", "message": "slow down", "retry_after": 0.2, "once": True}
    lifecycle = Lifecycle()
    result = run(project, [[rate_limited, FIX]], plugins={"lifecycle": lifecycle})
    assert result.status == "complete"
    assert lifecycle.calls == [
        ("failure", IterationEnd.TESTS_FIRST.value, False),  # before the first turn: no iteration
        ("before", 1),
        ("after", 1, IterationEnd.RATE_LIMITED.value),
        ("before", 1),
        ("success", "tests_ran"),
        ("after", 1, "tests_ran"),
    ]
    assert [r["ending"] for r in result.records] == ["tests_ran"]


def test_an_agent_failure_closes_the_iteration_with_its_ending(project):
    lifecycle = Lifecycle()
    result = run(
        project, [[{"error": "auth", "message": "Not logged in"}]], plugins={"l": lifecycle}
    )
    assert result.status == "auth"
    assert lifecycle.calls == [
        ("failure", "tests_first", False),
        ("before", 1),
        ("failure", "agent_failed", True),
        ("after", 1, "agent_failed"),
    ]
    assert result.records[0]["ending"] == "agent_failed"


def test_an_interrupted_iteration_is_closed_too(project):
    lifecycle = Lifecycle()

    class CtrlC:
        @hookimpl
        def compose_prompt(self, loop):
            raise KeyboardInterrupt

    result = run(project, [IDLE], plugins={"l": lifecycle, "ctrl-c": CtrlC()})
    assert result.status == "interrupted"
    assert lifecycle.calls == [
        ("failure", "tests_first", False),
        ("before", 1),
        ("after", 1, "interrupted"),
    ]
    assert result.records == []  # resume runs it again


@pytest.mark.slow
def test_not_agents_fault_is_noted_and_kept_out_of_stuck_detection(project):
    class Flaky:
        @hookimpl
        def on_failure(self, loop, record, test_run):
            return NotAgentsFault("the database container is down")

    result = run(
        project,
        [IDLE],
        plugins={"flaky": Flaky()},
        config={"stuck": {"window": 2}, "limits": {"max_iterations": 4}},
    )
    assert result.status == "max_iterations"  # never "stuck"
    assert not result.events_of("loop.stuck")
    faults = result.events_of("loop.not_agents_fault")
    assert next((f["source"], f["reason"]) for f in faults) == (
        "flaky",
        "the database container is down",
    )
    assert result.records[0]["annotations"]["not_agents_fault"] == (
        "flaky: the database container is down"
    )


@pytest.mark.slow
def test_a_decision_can_cut_the_iteration_budget_and_says_who_cut_it(project):
    class Cutter:
        @hookimpl
        def after_iteration(self, loop, record, test_run):
            return Decision.proceed("unproductive", remaining_iterations=1)

    result = run(
        project,
        [IDLE],
        plugins={"cutter": Cutter()},
        config={"limits": {"max_iterations": 10}, "stuck": {"enabled": False}},
    )
    assert result.status == "max_iterations"
    assert len(result.records) == 2
    (cut,) = result.events_of("loop.iteration_budget_reduced")
    assert (cut["max_iterations"], cut["reason"], cut["source"]) == (2, "unproductive", "cutter")


@pytest.mark.slow
def test_the_stop_status_is_explicit_not_the_reason(project):
    class Stopper:
        @hookimpl
        def after_iteration(self, loop, record, test_run):
            return Decision.stop("complete", "a reason that only looks like a status")

    result = run(project, [IDLE], plugins={"stopper": Stopper()})
    assert (result.status, result.outcome.exit_code) == ("plugin", 17)
    assert result.outcome.reason == "complete"


@pytest.mark.slow
def test_a_plugin_can_declare_completion(project):
    class Judge:
        @hookimpl
        def after_iteration(self, loop, record, test_run):
            return Decision.complete("the judge is satisfied")

    result = run(project, [IDLE], plugins={"judge": Judge()})
    assert (result.status, result.outcome.exit_code) == ("complete", 0)


def test_resolve_original_goal_is_the_only_way_to_change_it(project):
    seen = []

    class Seal:
        @hookimpl
        def resolve_original_goal(self, loop, stored):
            seen.append(stored)
            return "the sealed goal"

        @hookimpl
        def on_loop_start(self, loop):
            seen.append(loop.original_goal)

    result = run(project, [[FIX]], plugins={"seal": Seal()})
    assert seen == ["make add() add", "the sealed goal"]
    (restored,) = result.events_of("loop.original_goal_restored")
    assert restored["source"] == "seal"
    prompt = (result.state_dir / "logs" / "iteration-0001.prompt.md").read_text()
    assert "the sealed goal" in prompt
    assert not hasattr(loopctl.Loop, "repair_original_goal")


COUNT = StashKey[list]()


class Counter:
    @hookimpl
    def on_loop_start(self, loop):
        assert COUNT not in loop.stash
        loop.stash[COUNT] = []

    @hookimpl
    def after_iteration(self, loop, record):
        loop.stash[COUNT].append(record.iteration)
        loop.emit("counter.seen", iterations=list(loop.stash[COUNT]))


@pytest.mark.slow
def test_the_stash_holds_one_runs_state_and_starts_empty_in_the_next(project):
    counter = Counter()
    first = run(project, [IDLE, [FIX]], plugins={"counter": counter})
    assert first.events_of("counter.seen")[-1]["iterations"] == [1, 2]
    project.write("calc.py", BUGGY)
    project.commit("buggy again")
    second = run(project, [[FIX]], plugins={"counter": counter})
    assert second.events_of("counter.seen")[-1]["iterations"] == [1]


def test_the_stash_is_typed_and_behaves_like_a_mapping():
    stash = loopctl.Stash()
    key = StashKey[int]()
    other = StashKey[int]()
    assert stash.get(key) is None
    assert stash.get(key, 5) == 5
    stash[key] = 1
    assert stash[key] == 1
    assert key in stash
    assert other not in stash
    assert stash.setdefault(key, 2) == 1
    assert stash.setdefault(other, 3) == 3
    del stash[key]
    assert len(stash) == 1
    with pytest.raises(KeyError):
        stash[key]


@pytest.mark.slow
def test_completion_veto_result_and_decision_sources_are_attributed(project):
    class Veto:
        @hookimpl
        def on_success(self, loop, record, test_run):
            return CompletionVeto("not yet") if loop.iteration == 1 else None

    result = run(project, [[FIX], IDLE], plugins={"veto": Veto()})
    assert result.events_of("loop.completion_vetoed")[0]["reason"] == "veto: not yet"
