"""The worker's activities without a server (temporalio's ActivityEnvironment): a loop run in a
fresh tree, its progress heartbeated, its result one pushed commit; cancelled, nothing left."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import alive, marked, run_git
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.testing import ActivityEnvironment

from loopctl_fleet.activities import FleetActivities
from loopctl_fleet.model import LoopInput, LoopResult, Progress
from loopctl_fleet.taskfile import TaskSpec

FIX = "cat >/dev/null; echo fixed > f.txt"


def spec(bare: Path, agent_cmd: str = FIX, *, task: str = "t1", **settings: Any) -> TaskSpec:
    return TaskSpec(
        task, str(bare), "main", "Fix f.txt",
        {"agent_cmd": f"sh -c {shlex.quote(agent_cmd)}", "test_cmd": "sh check.sh", **settings},
    )  # fmt: skip


def base_sha(bare: Path) -> str:
    return run_git("rev-parse", "main", cwd=bare).strip()


class Recorded:
    def __init__(self) -> None:
        self.env = ActivityEnvironment()
        self.beats: list[Any] = []
        self.env.on_heartbeat = lambda *details: self.beats.append(details[0])


@pytest.mark.slow
def test_a_loop_that_meets_its_goal_leaves_one_commit_on_its_branch(
    tmp_path: Path, bare: Path
) -> None:
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    rec = Recorded()
    result: LoopResult = asyncio.run(
        rec.env.run(acts.run_loop, LoopInput(spec(bare), base_sha(bare)))
    )
    assert result.status == "complete"
    assert result.failure_class is None
    assert result.branch == "loopctl/t1"
    assert run_git("rev-parse", "loopctl/t1", cwd=bare).strip() == result.commit
    assert run_git("show", "loopctl/t1:f.txt", cwd=bare) == "fixed\n"
    message = run_git("log", "-1", "--format=%B", "loopctl/t1", cwd=bare)
    assert message.startswith("Fix f.txt\n")
    assert "Loopctl-Task: t1" in message
    assert "Loopctl-Worker: w1" in message
    assert result.iterations == 1
    assert rec.beats
    assert all(isinstance(b, Progress) and b.worker == "w1" for b in rec.beats)
    tree = Path(result.logs) / "tree"
    assert not tree.exists()  # the worktree is removed; the state and logs stay
    assert (Path(result.logs) / "state").is_dir()


@pytest.mark.slow
def test_an_attempt_after_a_pushed_result_returns_that_result(tmp_path: Path, bare: Path) -> None:
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    first = asyncio.run(
        ActivityEnvironment().run(acts.run_loop, LoopInput(spec(bare), base_sha(bare)))
    )
    again = asyncio.run(
        ActivityEnvironment().run(
            acts.run_loop, LoopInput(spec(bare, "exit 1"), base_sha(bare), attempt=2)
        )
    )
    assert again.reused
    assert again.commit == first.commit


@pytest.mark.slow
def test_a_branch_another_run_pushed_is_a_repository_fault(tmp_path: Path, bare: Path) -> None:
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    asyncio.run(ActivityEnvironment().run(acts.run_loop, LoopInput(spec(bare), base_sha(bare))))
    other = ActivityEnvironment()  # the same task id, in another fleet or another run
    other.info = dataclasses.replace(other.info, workflow_id="loopctl-task-t2-t1")
    with pytest.raises(ApplicationError) as caught:
        asyncio.run(other.run(acts.run_loop, LoopInput(spec(bare), base_sha(bare), attempt=2)))
    assert caught.value.type == "repository"
    assert caught.value.non_retryable
    assert "loopctl/t1 already exists" in caught.value.message


@pytest.mark.slow
def test_an_attempt_the_server_retried_after_a_dead_worker_counts_as_one_more(
    tmp_path: Path, bare: Path
) -> None:
    acts = FleetActivities(tmp_path / "home", "w2", heartbeat_s=0.05)
    env = Recorded()
    env.env.info = dataclasses.replace(env.env.info, attempt=2)  # the first died with w1
    result = asyncio.run(env.env.run(acts.run_loop, LoopInput(spec(bare), base_sha(bare))))
    assert result.attempt == 2
    assert all(beat.attempt == 2 for beat in env.beats)
    assert "Loopctl-Attempt: 2" in run_git("log", "-1", "--format=%B", "loopctl/t1", cwd=bare)


#: The worker's own credentials, and one the task withholds itself.
CREDENTIALS = ("PGPASSWORD", "PGPASSFILE", "LOOPCTL_FAILURE_MEMORY", "GITHUB_TOKEN", "TEAM_TOKEN")


@pytest.mark.slow
def test_the_fleets_own_credentials_never_reach_the_agent_or_the_tests(
    tmp_path: Path, bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in CREDENTIALS:
        monkeypatch.setenv(name, f"value-of-{name}")
    monkeypatch.setenv("LOOPCTL_FAILURE_MEMORY", "off")  # the loop must still read it
    seen = tmp_path / "env"
    task = spec(bare, f"env > {seen}; {FIX}", withhold_env=["TEAM_TOKEN"])
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    result = asyncio.run(ActivityEnvironment().run(acts.run_loop, LoopInput(task, base_sha(bare))))
    assert result.status == "complete"
    agent_env = seen.read_text()
    for name in CREDENTIALS:
        assert f"{name}=" not in agent_env, name  # the task's own list is kept too


@pytest.mark.slow
def test_a_loop_that_gives_up_is_a_result_with_its_class(tmp_path: Path, bare: Path) -> None:
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    task = spec(bare, "cat >/dev/null; echo still broken > f.txt", limits={"max_iterations": 2})
    result = asyncio.run(ActivityEnvironment().run(acts.run_loop, LoopInput(task, base_sha(bare))))
    assert result.status == "max_iterations"
    assert result.exit_code == 10
    assert result.failure_class == "gave_up"
    assert result.branch is None
    assert "loopctl/t1" not in run_git("branch", "--list", cwd=bare)


@pytest.mark.slow
def test_an_agent_that_crashes_every_turn_is_an_agent_crash_whatever_ends_the_loop(
    tmp_path: Path, bare: Path
) -> None:
    # two iterations end the loop before three crashes would: still the agent's crash
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    task = spec(
        bare, "cat >/dev/null; exit 3", limits={"max_iterations": 2, "max_agent_crashes": 3}
    )
    result = asyncio.run(ActivityEnvironment().run(acts.run_loop, LoopInput(task, base_sha(bare))))
    assert result.status == "max_iterations"
    assert result.failure_class == "agent_crash"


def test_a_missing_base_is_a_repository_fault_not_retried(tmp_path: Path, bare: Path) -> None:
    acts = FleetActivities(tmp_path / "home", "w1")
    task = TaskSpec("t1", str(bare), "nope", "g")
    with pytest.raises(ApplicationError) as caught:
        asyncio.run(ActivityEnvironment().run(acts.resolve_base, task))
    assert caught.value.type == "repository"
    assert caught.value.non_retryable


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_cancelled_attempt_returns_once_the_loop_and_its_agent_are_gone(
    tmp_path: Path, bare: Path
) -> None:
    marker = tmp_path / "agent.pid"
    agent = f"cat >/dev/null; echo $$ > {marker}; setsid sleep 300 & exec sleep 300"
    acts = FleetActivities(tmp_path / "home", "w1", grace_s=5, heartbeat_s=0.05)
    env = ActivityEnvironment()

    async def cancel_once_the_agent_runs() -> None:
        while not marker.exists():
            await asyncio.sleep(0.01)
        env.cancel()

    async def main() -> None:
        canceller = asyncio.create_task(cancel_once_the_agent_runs())
        try:
            await env.run(acts.run_loop, LoopInput(spec(bare, agent, task=task), base_sha(bare)))
        finally:
            await canceller

    # a task id of its own: other tests, in other pytest workers, run tasks named t1 meanwhile
    task = f"cancelled-{os.getpid()}"
    with pytest.raises((asyncio.CancelledError, CancelledError)):
        asyncio.run(main())
    pid = int(marker.read_text())
    assert not alive(pid)
    assert marked(task) == []  # nothing with the task's mark


@pytest.mark.slow
def test_a_loop_that_never_starts_says_why(tmp_path: Path, bare: Path) -> None:
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    task = spec(bare, limits={"max_iterations": "many"})  # the worker's loopctl refuses it
    result = asyncio.run(ActivityEnvironment().run(acts.run_loop, LoopInput(task, base_sha(bare))))
    assert result.exit_code == 2
    assert result.failure_class == "config"
    assert "max_iterations" in result.reason
