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
from fleet_testkit import alive, dev_server, marked, run_git
from temporalio.client import Client

from loopctl.testing import lifeline
from loopctl_fleet.taskfile import TaskSpec
from loopctl_fleet.workflows import LoopctlTask, TaskInput

pytestmark = [
    pytest.mark.temporal,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc"),
]
QUEUE = "loopctl-two-workers"
GRACE_S = 2.0
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


def start_worker(address: str, tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    ready = tmp_path / f"{name}.ready"
    flags = {
        "--address": address, "--task-queue": QUEUE, "--home": str(tmp_path / name),
        "--identity": name, "--slots": "2", "--grace": str(GRACE_S), "--heartbeat": "0.2",
        "--ready-file": str(ready),
    }  # fmt: skip
    argv = [sys.executable, "-m", "loopctl_fleet.worker", *(x for kv in flags.items() for x in kv)]
    with (tmp_path / f"{name}.log").open("wb") as out:
        process = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    lifeline().register(end=[process.pid])  # a killed pytest takes it along (the test kills it)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, (tmp_path / f"{name}.log").read_text()
        assert time.monotonic() < deadline, f"worker {name} never became ready"
        time.sleep(0.02)
    return process


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
            workers = {name: start_worker(address, tmp_path, name) for name in ("w1", "w2")}
            try:
                await run_tasks(env.client, workers)
            finally:
                for process in workers.values():
                    if process.poll() is None:
                        process.kill()
                    process.wait()

    async def run_tasks(client: Client, workers: dict[str, subprocess.Popen[bytes]]) -> None:
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
        assert slow.attempts == 1  # one task attempt: the server retried its activity

    asyncio.run(main())
    assert not (log / "overlap").exists(), (log / "overlap").read_text()
    branches = run_git("branch", "--list", "loopctl/*", cwd=bare).split()
    assert sorted(branches) == sorted(f"loopctl/{s.id}" for s in specs)
    for spec in specs:
        assert run_git("rev-list", "--count", f"main..loopctl/{spec.id}", cwd=bare).strip() == "1"
    workers_used = {line.split()[1] for line in (log / "starts").read_text().splitlines()}
    assert workers_used == {"w1", "w2"}
