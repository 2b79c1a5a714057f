"""Two worker processes on one machine, as two machines would run them: twenty tasks, two slots
each, all complete with one commit per result branch; a worker SIGKILLed mid-task leaves
nothing of its loop running, and the task completes on the other worker."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleet_testkit import GRACE_S, alive, dev_server, marked, run_git, start_worker
from temporalio.client import Client

from loopctl_fleet.taskfile import TaskSpec
from loopctl_fleet.workflows import LoopctlTask, TaskInput

pytestmark = [
    pytest.mark.temporal,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]
QUEUE = "loopctl-two-workers"
TASKS = 20
SLOW = "t07"

#: Every agent turn: refuse to start while an earlier agent of the same task is alive (so two
#: agents on one task would show), record itself, and fix the check. The SLOW task's first
#: agent waits for a file the test makes only after it has killed that agent's worker.
AGENT = r"""
cat >/dev/null
log={log}
for p in $(cat "$log/$LOOPCTL_FLEET_TASK.pids" 2>/dev/null); do
  kill -0 "$p" 2>/dev/null && echo "$LOOPCTL_FLEET_TASK $p" >> "$log/overlap"
done
echo $$ >> "$log/$LOOPCTL_FLEET_TASK.pids"
echo "$LOOPCTL_FLEET_TASK $LOOPCTL_FLEET_WORKER $$" >> "$log/starts"
if [ "$LOOPCTL_FLEET_TASK" = {slow} ] && [ ! -e "$log/go" ]; then
  echo "$LOOPCTL_FLEET_WORKER $$" > "$log/slow-started"
  while [ ! -e "$log/go" ]; do sleep 0.05; done
fi
echo fixed > f.txt
"""


def test_twenty_tasks_on_two_workers_and_one_killed_mid_task(tmp_path: Path, bare: Path) -> None:
    log = tmp_path / "log"
    log.mkdir()
    agent = f"sh -c {shlex.quote(AGENT.format(log=shlex.quote(str(log)), slow=SLOW))}"
    specs = [
        TaskSpec(
            f"t{i:02d}",
            str(bare),
            "main",
            f"task {i}",
            {"agent_cmd": agent, "test_cmd": "sh check.sh"},
        )
        for i in range(TASKS)
    ]

    async def main() -> None:
        async with dev_server() as env:
            address = env.client.service_client.config.target_host
            workers = {name: start_worker(address, tmp_path, name, QUEUE) for name in ("w1", "w2")}
            try:
                victim = await run_tasks(env.client, workers)
                # the killed worker's tree is left (nothing ended it) until it starts again
                trees = list((tmp_path / victim / "runs").glob("*/*/tree"))
                assert trees
                (tmp_path / f"{victim}.ready").unlink()
                workers[victim] = start_worker(address, tmp_path, victim, QUEUE)
                assert not [tree for tree in trees if tree.exists()]
            finally:
                for process in workers.values():
                    if process.poll() is None:
                        process.kill()
                    process.wait()

    async def run_tasks(client: Client, workers: dict[str, subprocess.Popen[bytes]]) -> str:
        handles = [
            await client.start_workflow(
                LoopctlTask.run,
                TaskInput(spec, heartbeat_timeout_s=3),
                id=f"loopctl-task-{spec.id}",
                task_queue=QUEUE,
            )
            for spec in specs
        ]
        started = log / "slow-started"
        while not started.exists():
            await asyncio.sleep(0.02)
        victim, agent_pid = started.read_text().split()
        killed_at = time.monotonic()
        os.kill(workers[victim].pid, signal.SIGKILL)
        workers[victim].wait()
        while alive(int(agent_pid)) or marked(SLOW):
            assert time.monotonic() - killed_at < GRACE_S + 30, (
                "the killed worker's loop kept running"
            )
            await asyncio.sleep(0.02)
        gone_after = time.monotonic() - killed_at
        (log / "go").touch()
        outcomes = await asyncio.gather(*(h.result() for h in handles))
        print(f"the killed worker's loop was gone {gone_after:.2f} s after the SIGKILL")
        assert [o.state for o in outcomes] == ["complete"] * TASKS
        slow = outcomes[int(SLOW[1:])]
        assert slow.result is not None
        assert slow.result.worker != victim  # finished on the other worker
        assert slow.attempts == 2  # the one on the killed worker, then the server's retry
        assert slow.result.attempt == 2
        return victim

    asyncio.run(main())
    assert not (log / "overlap").exists(), (log / "overlap").read_text()
    branches = run_git("branch", "--list", "loopctl/*", cwd=bare).split()
    assert sorted(branches) == sorted(f"loopctl/{s.id}" for s in specs)
    for spec in specs:
        assert run_git("rev-list", "--count", f"main..loopctl/{spec.id}", cwd=bare).strip() == "1"
    workers_used = {line.split()[1] for line in (log / "starts").read_text().splitlines()}
    assert workers_used == {"w1", "w2"}


#: A stand-in for ssh (``GIT_SSH_COMMAND``): runs git's remote command here. With ``$HOLD`` set
#: (w1 only), it first says it started and waits for a file that never comes: the worker's
#: clone in ``resolve_base`` hangs until the test kills the worker.
FAKE_SSH = r"""
shift
if [ -n "$HOLD" ]; then
  echo $$ > "$HOLD/resolving"
  while [ ! -e "$HOLD/never" ]; do sleep 0.05; done
fi
exec sh -c "$1"
"""


def test_a_worker_killed_while_resolving_the_base_hands_the_task_on(
    tmp_path: Path, bare: Path
) -> None:
    from loopctl_fleet.classes import RetryPolicy
    from loopctl_fleet.status import row_of

    ssh = tmp_path / "fake-ssh"
    ssh.write_text(FAKE_SSH)
    hold = tmp_path / "hold"
    hold.mkdir()
    git_env = {"GIT_SSH_COMMAND": f"sh {ssh}", "GIT_SSH_VARIANT": "simple"}
    spec = TaskSpec(
        "resolving", f"ssh://fleet-test{bare}", "main", "Fix f.txt",
        {"agent_cmd": "sh -c 'cat >/dev/null; echo fixed > f.txt'", "test_cmd": "sh check.sh"},
        retry={"infrastructure": RetryPolicy(max_attempts=5, initial_interval_s=0.2)},
    )  # fmt: skip

    async def main() -> None:
        async with dev_server() as env:
            address = env.client.service_client.config.target_host
            w1 = start_worker(address, tmp_path, "w1", QUEUE, {**git_env, "HOLD": str(hold)})
            w2 = None
            try:
                handle = await env.client.start_workflow(
                    LoopctlTask.run,
                    TaskInput(spec, heartbeat_timeout_s=3),
                    id="loopctl-task-resolving",
                    task_queue=QUEUE,
                )
                while not (hold / "resolving").exists():
                    await asyncio.sleep(0.02)
                os.killpg(w1.pid, signal.SIGKILL)  # the worker, its git and the stand-in ssh
                w1.wait()
                killed_at = time.monotonic()
                # the server takes w1 for dead once its heartbeats stop: status says so
                while "w1 stopped answering" not in (state := await task_state(env.client)):
                    assert time.monotonic() - killed_at < 30, state
                    await asyncio.sleep(0.1)
                assert "waiting for another worker" in state
                w2 = start_worker(address, tmp_path, "w2", QUEUE, git_env)
                outcome = await asyncio.wait_for(handle.result(), timeout=120)
            finally:
                for process in (w1, w2):
                    if process is not None and process.poll() is None:
                        process.kill()
                    if process is not None:
                        process.wait()
        assert outcome.state == "complete", outcome
        assert outcome.result is not None
        assert outcome.result.worker == "w2"
        assert run_git("show", "loopctl/resolving:f.txt", cwd=bare) == "fixed\n"

    async def task_state(client: Client) -> str:
        handle = client.get_workflow_handle("loopctl-task-resolving")
        return (await row_of(client, "", await handle.describe())).state

    asyncio.run(main())
