"""Ctrl-C and SIGTERM stop a loop gracefully: exit code 130, status ``interrupted`` everywhere,
a ``loop.end`` event, no agent or test process left behind, the lock released, and
``loopctl resume`` carries on from there. A second loop in the same state directory is refused.

Ctrl-C sends SIGINT to the terminal's foreground process group. The agent and the test command
run in sessions of their own, so only loopctl itself gets it; these tests send the signal to the
loopctl process alone, exactly like that.
"""

from __future__ import annotations

import re
import shlex
import signal
from typing import Any

import pytest

from loopctl.model import EXIT_CODES, EXIT_USAGE
from loopctl.procgroup import group_members
from loopctl.testing import python_test_cmd

pytestmark = pytest.mark.timing  # real signals to a real loopctl and its process groups

GOAL = "Make add() return the sum of its arguments.\nDo not change the test."
INTERRUPTED_EXIT = EXIT_CODES["interrupted"]
SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]
RUN = ("run", GOAL, "--json", "--no-plugins")
RESUME = ("resume", "--json", "--no-plugins")


def assert_interrupted(box: Any, proc: Any, *, timeout: float = 20.0) -> None:
    """loopctl ended with 130 and recorded the interruption in every place a reader looks."""
    code = proc.wait(timeout=timeout)
    assert code == INTERRUPTED_EXIT, f"exit {code}:\n{box.output_of(proc)}"
    state = box.loop_state()
    assert state.status == "interrupted"
    assert state.original_goal == GOAL
    report = box.report()
    assert (report["status"], report["exit_code"]) == ("interrupted", INTERRUPTED_EXIT)
    end = box.events()[-1]
    assert end["type"] == "loop.end"
    assert (end["status"], end["exit_code"]) == ("interrupted", INTERRUPTED_EXIT)
    # The lock went with the process: a second `loopctl status` sees no loop running.
    status = box.status()
    assert status["running"] is False
    assert status["pid"] is None
    assert status["status"] == "interrupted"


def assert_resume_completes(box: Any) -> None:
    done = box.run(*RESUME)
    assert done.returncode == 0, f"resume exited {done.returncode}:\n{done.stderr[-3000:]}"
    state = box.loop_state()
    assert state.status == "complete"
    assert state.original_goal == GOAL
    assert box.project.read("calc.py") == box.FIXED_CALC
    # The interrupted iteration 1 was never recorded; resume redid it under the same number.
    assert [record["iteration"] for record in box.iterations()] == [1]
    assert box.report()["status"] == "complete"
    assert not box.processes()


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_the_agent_turn(sandbox: Any, signum: signal.Signals) -> None:
    box = sandbox
    box.configure()
    # A hung agent for Ctrl-C, a long-sleeping one for SIGTERM: neither ends by itself.
    stall = {"hang": True} if signum == signal.SIGINT else {"sleep": 120}
    box.script([[{"say": "Looking at calc.py."}, {"write": "notes.md", "content": "hi\n"}, stall]])
    proc = box.spawn(*RUN)
    box.wait_for_event("agent.start", proc)
    # In the middle of its turn: it has done its write and is now stalled.
    box.poll((box.path / "notes.md").is_file, "the agent's write")
    agents = box.agent_processes()
    assert len(agents) == 1, agents
    agent_pid = agents[0][0]

    proc.send_signal(signum)
    assert_interrupted(box, proc)
    # The whole agent process group was ended before loopctl exited (zombies do not count).
    assert group_members(agent_pid) == []
    assert box.agent_processes() == []
    assert not box.processes()

    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    assert_resume_completes(box)


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_the_tests(sandbox: Any, signum: signal.Signals) -> None:
    box = sandbox
    started, slow = box.root / "tests-started", box.root / "slow-tests"
    slow.touch()
    test_cmd = (
        f"touch {shlex.quote(str(started))}; "
        f"if [ -f {shlex.quote(str(slow))} ]; then sleep 120; fi; "
        f"{python_test_cmd()}"
    )
    box.configure(test_cmd=test_cmd)
    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    proc = box.spawn(*RUN)
    box.wait_for_event("tests.start", proc)
    box.poll(started.exists, "the test command to start")
    sleepers = box.poll(lambda: box.processes(needle="sleep 120"), "the slow test command")

    proc.send_signal(signum)
    assert_interrupted(box, proc)
    # The test command's process group (the shell and its sleep) was ended too.
    assert not box.processes(), f"left running: {box.processes()} (were: {sleepers})"

    slow.unlink()
    assert_resume_completes(box)


def test_second_loop_in_the_same_state_dir_is_refused(sandbox: Any) -> None:
    box = sandbox
    box.configure()
    box.script([[{"say": "Thinking for a long time."}, {"sleep": 120}]])
    first = box.spawn(*RUN)
    box.wait_for_event("agent.start", first)
    status = box.status()
    assert (status["running"], status["pid"]) == (True, first.pid)
    names_the_pid = re.compile(rf"\bpid {first.pid}\b")

    for args in (
        ("run", "A different goal", "--json", "--no-plugins"),
        RESUME,
        ("run", "A different goal", "--json", "--no-plugins", "--fresh-state"),
    ):
        second = box.run(*args, timeout=30)
        assert second.returncode == EXIT_USAGE, f"{args}: {second.returncode} {second.stderr}"
        assert names_the_pid.search(second.stderr), f"{args}: {second.stderr}"
        assert second.stdout.strip() == "", f"{args} started a loop: {second.stdout[:500]}"

    # The running loop did not notice: same goal, same pid, one loop.start, still running.
    assert first.poll() is None
    state = box.loop_state()
    assert (state.original_goal, state.pid, state.status) == (GOAL, first.pid, "running")
    assert [e["type"] for e in box.events()].count("loop.start") == 1

    first.send_signal(signal.SIGTERM)
    assert_interrupted(box, first)
    assert not box.processes()


def test_an_agent_left_running_by_a_killed_loop_is_ended_on_resume(sandbox: Any) -> None:
    """SIGKILL gives loopctl no chance to end its agent, which lives in its own session: the
    next loop to take the state directory ends it before starting another agent."""
    box = sandbox
    box.configure()
    box.script([[{"say": "Looking."}, {"write": "notes.md", "content": "hi\n"}, {"hang": True}]])
    proc = box.spawn(*RUN)
    box.wait_for_event("agent.start", proc)
    box.poll((box.path / "notes.md").is_file, "the agent's write")
    ((agent_pid, *_rest),) = box.agent_processes()
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert group_members(agent_pid) != []  # the hung agent survived its loopctl

    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    assert_resume_completes(box)
    assert group_members(agent_pid) == []
    assert any(
        "a killed loop left running" in e.get("message", "")
        for e in box.events()
        if e["type"] == "loop.warning"
    )
