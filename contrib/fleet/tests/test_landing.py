"""Results land on their base through the landing queue, with a real dev server and worker:
one at a time, each tested on the exact commit that lands; a conflict becomes a follow-up task
for a (scripted) agent; a result whose tests fail on the new tip never lands."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import GRACE_S, alive, dev_server, run_git, start_worker, with_fleet
from temporalio.client import Client

from loopctl_fleet.cli import submit_task
from loopctl_fleet.lander import LANDER_NAME, follow_up_id
from loopctl_fleet.landing import FOLLOW_UP_ID, task_input
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
        for task in filter(FOLLOW_UP_ID.search, rows):  # named by their task and its run
            root, _, n = task.partition(".land")
            assert task == follow_up_id(root, int(n.partition("-")[0]), rows[root].run_id)
        follow_ups = [row for task, row in rows.items() if ".land1-" in task]
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


async def two_workers_landing(
    tmp_path: Path, one: TaskSpec, between: Any, first: str = "testing"
) -> TaskRow:
    """``one`` submitted to w1 alone; once ``tmp_path/hold/<first>`` exists, ``between(w1)``
    (which kills it), then w2 starts; ``one``'s row once its landing has ended."""
    hold = tmp_path / "hold"
    async with dev_server() as env:
        address = env.client.service_client.config.target_host
        fleet = f"test-{uuid.uuid4().hex[:8]}"
        workers = [start_worker(address, tmp_path, "w1", f"loopctl-{fleet}")]
        try:
            assert (await submit_task(env.client, fleet, one, 3.0))[1]
            while not (hold / first).exists():  # w1 is as far as the test wants it
                await asyncio.sleep(0.02)
            await between(workers[0])
            workers.append(start_worker(address, tmp_path, "w2", f"loopctl-{fleet}"))
            return (await ended(env.client, fleet, [one.id]))[one.id]
        finally:
            for process in workers:
                if process.poll() is None:
                    process.kill()
                process.wait()


async def kill_with_its_group(w1: subprocess.Popen[bytes]) -> None:
    """SIGKILL the worker and its process group (its git, not its guards: their own sessions)."""
    os.killpg(w1.pid, signal.SIGKILL)
    w1.wait()


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

    row = asyncio.run(two_workers_landing(tmp_path, one, kill_with_its_group))
    assert row.state == "landed", row
    tip = run_git("rev-parse", "main", cwd=repo).strip()
    assert (row.land or {}).get("commit") == tip
    assert run_git("rev-list", f"{start}..main", cwd=repo).split() == [tip]  # once, linear
    assert run_git("show", "main:f0.txt", cwd=repo) == "fixed\n"


#: A landing's test command that, on w1, starts a child and never ends on its own (the loop's
#: own tests, and w2's landing, pass through).
ENDLESS_TESTS = """\
case "$PWD" in */w1/land/*)
  sleep 3600 &
  echo $$ $! > {hold}/pids; mv {hold}/pids {hold}/testing
  wait; exit 1;;
esac
sh check.sh
"""


def test_a_landing_s_tests_end_with_their_worker_and_it_lands_once_elsewhere(
    tmp_path: Path, repo: Path
) -> None:
    """w1 is SIGKILLed (the worker alone, not its process group) while the landing's test
    command runs: that command and all it started end with it (no orphan), and w2 lands the
    result, once."""
    (tmp_path / "hold").mkdir()
    script = tmp_path / "test.sh"
    script.write_text(ENDLESS_TESTS.format(hold=shlex.quote(str(tmp_path / "hold"))))
    one = spec(repo, "orphan", agent("echo fixed > f0.txt"))
    one.settings["test_cmd"] = f"sh {shlex.quote(str(script))}"
    start = run_git("rev-parse", "main", cwd=repo).strip()
    left: list[int] = []

    async def kill(w1: subprocess.Popen[bytes]) -> None:
        tests = [int(pid) for pid in (tmp_path / "hold" / "testing").read_text().split()]
        assert all(alive(pid) for pid in tests)  # the test command and its child
        w1.kill()
        w1.wait()
        killed_at = time.monotonic()
        while any(alive(pid) for pid in tests):
            if time.monotonic() - killed_at > GRACE_S + 20:
                left.extend(pid for pid in tests if alive(pid))
                break
            await asyncio.sleep(0.02)  # a poll: they are not our children

    try:
        row = asyncio.run(two_workers_landing(tmp_path, one, kill))
    finally:
        for pid in left:  # the old behaviour's orphans: not left on the machine
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert not left, "the landing's test command outlived its worker"
    assert row.state == "landed", row
    tip = run_git("rev-parse", "main", cwd=repo).strip()
    assert (row.land or {}).get("commit") == tip
    assert run_git("rev-list", f"{start}..main", cwd=repo).split() == [tip]  # once, linear


#: The remote's post-receive hook: the first update of main says so, then waits for a file
#: that never comes (the test kills the pushing worker, and the hook with it).
POST_RECEIVE = """\
while read old new ref; do
  if [ "$ref" = refs/heads/main ] && [ ! -e {hold}/pushed ]; then
    echo "$new" > {hold}/pushed
    while [ ! -e {hold}/never ]; do sleep 0.05; done
  fi
done
"""
#: The landing's tests pass on w1, and fail anywhere else (a second run of them is red).
W1_ONLY_TESTS = """\
case "$PWD" in */land/*) case "$PWD" in */w1/land/*) ;; *) echo "FAILED tested again"; exit 1;; esac;; esac
sh check.sh
"""


def test_a_worker_killed_right_after_its_push_leaves_the_result_landed_once(
    tmp_path: Path, repo: Path
) -> None:
    """w1 pushes the landed commit to main and is SIGKILLed before it can say so: w2 finds the
    exact commit on main and records the result landed, without testing or pushing it again
    (its tests would be red here), and without a follow-up task."""
    hold = tmp_path / "hold"
    hold.mkdir()
    hook = repo / "hooks" / "post-receive"
    hook.write_text(POST_RECEIVE.format(hold=shlex.quote(str(hold))))
    hook.chmod(0o755)
    script = tmp_path / "test.sh"
    script.write_text(W1_ONLY_TESTS)
    one = spec(repo, "pushed", agent("echo fixed > f0.txt"), attempts=1)
    one.settings["test_cmd"] = f"sh {shlex.quote(str(script))}"
    start = run_git("rev-parse", "main", cwd=repo).strip()

    # the worker and its git push (and the hook)
    row = asyncio.run(two_workers_landing(tmp_path, one, kill_with_its_group, first="pushed"))
    pushed = (hold / "pushed").read_text().strip()
    assert row.state == "landed", row
    assert (row.land or {}).get("commit") == pushed
    assert not (row.land or {}).get("follow_up"), row.land
    assert run_git("rev-list", f"{start}..main", cwd=repo).split() == [pushed]  # once


def test_a_follow_up_never_takes_the_id_an_earlier_fleet_left(tmp_path: Path, repo: Path) -> None:
    """The task id was used before (another fleet, a fleet whose state was wiped) and its
    follow-up's branch ``loopctl/<task>.land1`` is still there: this run's follow-up has an id
    of its own (its task's run in it), resolves the conflict and the result lands."""
    run_git("branch", "loopctl/reused.land1", "main", cwd=repo)  # the earlier fleet's
    earlier = run_git("rev-parse", "loopctl/reused.land1", cwd=repo)
    # the task's change conflicts with one that reaches main while it runs
    theirs = (
        f"git clone -q {shlex.quote(str(repo))} ../theirs && cd ../theirs && "
        "echo theirs > shared.txt && git -c user.name=t -c user.email=t@t commit -qam theirs && "
        "git push -q origin HEAD:main"
    )
    one = spec(
        repo,
        "reused",
        agent(f"echo mine > shared.txt; ({theirs})", "echo both > shared.txt"),
        attempts=1,
    )

    async def body(client: Client, queue: str) -> dict[str, TaskRow]:
        assert (await submit_task(client, fleet_of(queue), one, 5.0))[1]
        return await ended(client, fleet_of(queue), [one.id])

    rows = with_fleet(tmp_path, body)
    row = rows["reused"]
    follow_up = follow_up_id("reused", 1, row.run_id)
    assert row.state == "landed", row
    assert (row.land or {}).get("follow_up") == follow_up
    assert rows[follow_up].state == "complete"
    assert run_git("show", "main:shared.txt", cwd=repo) == "both\n"
    assert run_git("rev-parse", "loopctl/reused.land1", cwd=repo) == earlier  # left alone
