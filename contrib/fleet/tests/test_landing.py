"""Results land on their base through the landing queue, with a real dev server and worker:
one at a time, each tested on the exact commit that lands; a conflict becomes a follow-up task
for a (scripted) agent; a result whose tests fail on the new tip never lands."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shlex
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import dev_server, run_git, start_worker, with_fleet
from temporalio.client import Client

from loopctl_fleet.cli import submit_task
from loopctl_fleet.lander import LANDER_NAME
from loopctl_fleet.landing import task_input
from loopctl_fleet.status import TaskRow, list_rows
from loopctl_fleet.taskfile import LandOptions, TaskSpec

pytestmark = pytest.mark.temporal

#: The tests of the repository below: no conflict markers, nothing says BAD, and a.txt and
#: b.txt are never both "on" (each alone passes: only the two together are red).
CHECK = """\
! grep -q '^<<<<<<<' *.txt || { echo "FAILED conflict markers"; exit 1; }
! grep -q BAD *.txt || { echo "FAILED test_bad"; exit 1; }
if grep -q on a.txt && grep -q on b.txt; then echo "FAILED test_ab - both on"; exit 1; fi
"""
ENDED = ("landed", "conflict", "red", "not landed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    work = tmp_path / "seed"
    work.mkdir()
    run_git("init", "-q", "-b", "main", cwd=work)
    for name in ("a", "b", "shared", *(f"f{i}" for i in range(6))):
        (work / f"{name}.txt").write_text(f"{name} base\n")
    (work / "check.sh").write_text(CHECK)
    run_git("add", "-A", cwd=work)
    run_git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=work)
    bare = tmp_path / "remote.git"
    run_git("clone", "-q", "--bare", str(work), str(bare), cwd=tmp_path)
    return bare


def agent(normal: str, follow_up: str = "exit 3") -> str:
    """A scripted agent: ``normal`` for the task, ``follow_up`` when its goal is a landing
    follow-up (the conflict or the failure is in its prompt, on stdin)."""
    script = (
        f'prompt=$(cat); case "$prompt" in *"Landing this task"*) {follow_up};; *) {normal};; esac'
    )
    return f"sh -c {shlex.quote(script)}"


def spec(repo: Path, task_id: str, agent_cmd: str, **land: Any) -> TaskSpec:
    return TaskSpec(
        task_id,
        str(repo),
        "main",
        f"Task {task_id}",
        # the tests pass on the base: the agent must work anyway (test_first would end the loop)
        {
            "agent_cmd": agent_cmd,
            "test_cmd": "sh check.sh",
            "test_first": False,
            "limits": {"max_iterations": 1},
        },
        land=LandOptions(**land),
    )


async def ended(client: Client, fleet: str, tasks: list[str]) -> dict[str, TaskRow]:
    """The rows of ``tasks`` once each has ended its landing (or its loop, unlanded)."""
    while True:
        rows = {row.task: row for row in await list_rows(client, fleet)}
        if all(t in rows and (rows[t].state in ENDED or _unlanded(rows[t])) for t in tasks):
            return rows
        await asyncio.sleep(0.1)  # a poll of the server's state: what the test waits for


def _unlanded(row: TaskRow) -> bool:
    return row.closed is not None and row.land is None and row.state != "complete"


def fleet_of(queue: str) -> str:
    return queue.removeprefix("loopctl-")


def green_at_every_commit(repo: Path, since: str) -> list[str]:
    """Each commit on main after ``since``, oldest first; asserts the tests pass at each one."""
    commits = run_git("rev-list", "--reverse", "--first-parent", f"{since}..main", cwd=repo).split()
    for sha in commits:
        tree = repo.parent / f"check-{sha[:12]}"
        run_git("worktree", "add", "-q", "--detach", str(tree), sha, cwd=repo)
        done = subprocess.run(["sh", "check.sh"], cwd=tree, capture_output=True, text=True)
        assert done.returncode == 0, (sha, done.stdout)
    return commits


def test_ten_results_land_one_at_a_time_each_green_a_conflict_resolved_by_a_follow_up(
    tmp_path: Path, repo: Path
) -> None:
    start = run_git("rev-parse", "main", cwd=repo).strip()
    specs = [spec(repo, f"own-{i}", agent(f"echo fixed-{i} > f{i}.txt")) for i in range(6)]
    # four tasks edit the same line; a follow-up keeps the branch's lines and adds its own
    specs += [
        spec(
            repo, f"same-{i}", agent(f"echo same-{i} > shared.txt", f"echo same-{i} >> shared.txt")
        )
        for i in range(4)
    ]

    async def body(client: Client, queue: str) -> tuple[dict[str, TaskRow], list[str]]:
        for one in specs:
            line, ok = await submit_task(client, fleet_of(queue), one, 5.0)
            assert ok, line
        rows = await ended(client, fleet_of(queue), [s.id for s in specs])
        follow_ups = [row for task, row in rows.items() if task.endswith(".land1")]
        goals = [(await task_input(client, r.workflow_id, r.run_id)).spec.goal for r in follow_ups]
        return rows, goals

    rows, goals = with_fleet(tmp_path, body, slots=4)
    assert goals  # each follow-up's goal: the task's, the conflicting file and its hunks
    for goal in goals:
        assert goal.startswith("Task same-")
        assert "conflicts with `main`" in goal
        assert "in: shared.txt" in goal
        assert "<<<<<<<" in goal
    states = {task: rows[task].state for task in (s.id for s in specs)}
    assert all(state in ENDED for state in states.values()), states
    for task, state in states.items():
        assert state == "landed" or rows[task].reason, (task, state)
    assert all(states[f"own-{i}"] == "landed" for i in range(6)), states
    landed = [t for t, state in states.items() if state == "landed"]
    followed = [t for t in landed if (rows[t].land or {}).get("follow_up")]
    assert followed, "a conflict was resolved by a follow-up task and landed"
    commits = green_at_every_commit(repo, start)
    assert len(commits) == len(landed)  # linear: one commit per landed result, no merges
    assert run_git("rev-list", "--merges", f"{start}..main", cwd=repo).strip() == ""
    landed_commits = {(rows[t].land or {}).get("commit") for t in landed}
    assert landed_commits == set(commits)  # what landed is what was tested
    shared = run_git("show", "main:shared.txt", cwd=repo)
    assert "same-" in shared
    assert run_git("branch", "--list", "loopctl/own-0", cwd=repo).strip()  # kept: not asked


def test_a_result_red_on_the_new_tip_never_lands_and_says_why(tmp_path: Path, repo: Path) -> None:
    first = spec(repo, "a-on", agent("echo on > a.txt"), delete_branch=True)
    # started on the same base as the first, it finishes once the first has landed
    landed_a = f"git --git-dir={repo} show main:a.txt | grep -q on"
    wait = f"until {landed_a}; do sleep 0.05; done; echo on > b.txt"
    second = spec(repo, "b-on", agent(wait), attempts=0)

    async def body(client: Client, queue: str) -> tuple[dict[str, TaskRow], str]:
        fleet = fleet_of(queue)
        for one in (first, second):
            assert (await submit_task(client, fleet, one, 5.0))[1]
        await ended(client, fleet, [first.id])
        tip = run_git("rev-parse", "main", cwd=repo).strip()
        return await ended(client, fleet, [first.id, second.id]), tip

    rows, tip_after_first = with_fleet(tmp_path, body)
    assert rows["a-on"].state == "landed"
    assert rows["b-on"].state == "red", rows["b-on"]
    assert "tests failed" in rows["b-on"].reason
    assert "FAILED test_ab" in rows["b-on"].reason
    assert run_git("rev-parse", "main", cwd=repo).strip() == tip_after_first  # never landed
    assert run_git("show", "main:b.txt", cwd=repo) == "b base\n"
    assert run_git("branch", "--list", "loopctl/a-on", cwd=repo).strip() == ""  # asked to
    assert run_git("branch", "--list", "loopctl/b-on", cwd=repo).strip()


def test_a_base_named_head_or_by_its_branch_has_one_queue(tmp_path: Path, repo: Path) -> None:
    """``HEAD`` is resolved to the default branch before the queue is chosen: tasks based on
    ``HEAD`` and on ``main`` land through the same queue, one at a time."""
    on_head = dataclasses.replace(spec(repo, "via-head", agent("echo x > f0.txt")), base="HEAD")
    on_main = spec(repo, "via-main", agent("echo y > f1.txt"))

    async def body(client: Client, queue: str) -> tuple[dict[str, TaskRow], list[str]]:
        for one in (on_head, on_main):
            assert (await submit_task(client, fleet_of(queue), one, 5.0))[1]
        rows = await ended(client, fleet_of(queue), [on_head.id, on_main.id])
        query = f"WorkflowType = '{LANDER_NAME}'"
        return rows, [w.id async for w in client.list_workflows(query)]

    rows, queues = with_fleet(tmp_path, body)
    assert rows["via-head"].state == rows["via-main"].state == "landed"
    assert len(queues) == 1, queues
    assert run_git("show", "main:f0.txt", cwd=repo) == "x\n", rows


#: A test command that holds on w1 while landing (the loop's own tests pass through) until its
#: worker is gone, then fails.
HOLD_TESTS = """\
case "$PWD" in */w1/land/*)
  touch {hold}/testing
  while kill -0 $PPID 2>/dev/null; do sleep 0.05; done; exit 1;;
esac
sh check.sh
"""


def test_a_worker_killed_while_landing_hands_it_on_and_it_lands_once(
    tmp_path: Path, repo: Path
) -> None:
    """w1 is SIGKILLed (with its git) while it tests the result on the tip: w2 takes the landing
    over, and the result is on main once (one commit, linear), counted landed."""
    hold = tmp_path / "hold"
    hold.mkdir()
    script = tmp_path / "test.sh"
    script.write_text(HOLD_TESTS.format(hold=shlex.quote(str(hold))))
    one = spec(repo, "killed", agent("echo fixed > f0.txt"))
    one.settings["test_cmd"] = f"sh {shlex.quote(str(script))}"
    start = run_git("rev-parse", "main", cwd=repo).strip()

    async def main() -> TaskRow:
        async with dev_server() as env:
            address = env.client.service_client.config.target_host
            fleet = f"test-{uuid.uuid4().hex[:8]}"
            workers = [start_worker(address, tmp_path, "w1", f"loopctl-{fleet}")]
            try:
                assert (await submit_task(env.client, fleet, one, 3.0))[1]
                while not (hold / "testing").exists():  # w1 is landing it, as far as the phase
                    await asyncio.sleep(0.02)
                os.killpg(workers[0].pid, signal.SIGKILL)
                workers[0].wait()
                workers.append(start_worker(address, tmp_path, "w2", f"loopctl-{fleet}"))
                return (await ended(env.client, fleet, [one.id]))[one.id]
            finally:
                for process in workers:
                    if process.poll() is None:
                        process.kill()
                    process.wait()

    row = asyncio.run(main())
    assert row.state == "landed", row
    tip = run_git("rev-parse", "main", cwd=repo).strip()
    assert (row.land or {}).get("commit") == tip
    assert run_git("rev-list", f"{start}..main", cwd=repo).split() == [tip]  # once, linear
    assert run_git("show", "main:f0.txt", cwd=repo) == "fixed\n"
