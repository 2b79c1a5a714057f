"""The fleet's ledger through a real dev server: a fleet-wide running limit below the workers'
slots holds, and a spent token budget stops new loops from starting, says so, and lets them
start again once it is raised."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path

import pytest
from fleet_testkit import with_fleet
from temporalio.client import Client, WorkflowHandle

from loopctl_fleet.ledger import FleetLedger, LedgerState, Limits, describe_memo
from loopctl_fleet.taskfile import TaskSpec
from loopctl_fleet.workflows import LoopctlTask, TaskInput, TaskOutcome

pytestmark = pytest.mark.temporal
LEDGER = "loopctl-fleet-test-ledger"

#: Records its start and end (monotonic nanoseconds from /proc/uptime is coarse: use date +%s%N).
TIMED = r"""
cat >/dev/null
echo "start $(date +%s%N)" >> {log}
sleep 0.3
echo fixed > f.txt
echo "end $(date +%s%N)" >> {log}
"""


async def start_ledger(
    client: Client, queue: str, limits: Limits
) -> WorkflowHandle[FleetLedger, None]:
    return await client.start_workflow(
        FleetLedger.run, LedgerState(limits=limits), id=LEDGER, task_queue=queue
    )


async def start_task(
    client: Client, queue: str, spec: TaskSpec
) -> WorkflowHandle[LoopctlTask, TaskOutcome]:
    return await client.start_workflow(
        LoopctlTask.run,
        TaskInput(spec, heartbeat_timeout_s=5, ledger_id=LEDGER),
        id=f"loopctl-task-{spec.id}",
        task_queue=queue,
    )


async def held_or_closed(handle: WorkflowHandle[LoopctlTask, TaskOutcome]) -> dict[str, object]:
    """The task's memo once it says "held", or once the task has closed (which fails the test)."""
    while True:
        description = await handle.describe()
        memo = await description.memo()
        if str(memo.get("state", "")).startswith("held") or description.close_time is not None:
            return memo
        await asyncio.sleep(0.05)


def test_the_fleet_never_runs_more_loops_than_its_limit(tmp_path: Path, bare: Path) -> None:
    log = tmp_path / "agents.log"
    agent = f"sh -c {shlex.quote(TIMED.format(log=shlex.quote(str(log))))}"
    specs = [
        TaskSpec(
            f"t{i}", str(bare), "main", f"task {i}", {"agent_cmd": agent, "test_cmd": "sh check.sh"}
        )
        for i in range(4)
    ]

    async def body(client: Client, queue: str) -> list[TaskOutcome]:
        ledger = await start_ledger(client, queue, Limits(max_running=1))
        handles = [await start_task(client, queue, spec) for spec in specs]
        outcomes = [await h.result() for h in handles]
        state = await ledger.query(FleetLedger.current)
        assert state.holders == {}
        assert state.waiting == []
        return outcomes

    outcomes = with_fleet(tmp_path, body, slots=4)
    assert [o.state for o in outcomes] == ["complete"] * 4
    running = 0
    for line in sorted(log.read_text().splitlines(), key=lambda line: int(line.split()[1])):
        running += 1 if line.startswith("start") else -1
        assert running <= 1, "two loops ran at once under max_running = 1"


def test_a_spent_token_budget_holds_new_tasks_until_it_is_raised(
    tmp_path: Path, bare: Path
) -> None:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(
        '[[turns]]\nactions = [ { write = "f.txt", content = "fixed\\n" },'
        " { usage = { input_tokens = 1200, output_tokens = 300 } } ]\n"
    )
    settings = {
        "agent": "scripted",
        "agents": {"scripted": {"scenario": str(scenario)}},
        "test_cmd": "sh check.sh",
    }
    specs = [TaskSpec(f"b{i}", str(bare), "main", f"task {i}", settings) for i in range(2)]

    async def body(client: Client, queue: str) -> None:
        ledger = await start_ledger(client, queue, Limits(budget_tokens=1000))
        first = await start_task(client, queue, specs[0])
        first_outcome = await first.result()
        assert first_outcome.result is not None
        config = (Path(first_outcome.result.logs) / "loopctl.toml").read_text()
        assert "max_tokens = 1000" in config  # the grant capped the loop at the fleet's budget
        second = await start_task(client, queue, specs[1])
        memo = await held_or_closed(second)
        assert str(memo.get("state")).startswith("held: fleet token budget spent"), memo
        await ledger.signal(FleetLedger.set_limits, Limits(budget_tokens=100_000))
        assert (await second.result()).state == "complete"
        state = await ledger.query(FleetLedger.current)
        assert state.spent_tokens >= 3000

    with_fleet(tmp_path, body)


def test_the_ledgers_line_says_what_holds_the_fleet() -> None:
    memo = {
        "running": 2, "waiting": 3, "max_running": 2, "budget_usd": 10.0, "spent_usd": 4.5,
        "budget_tokens": None, "spent_tokens": 12345, "unknown_usage": 1,
        "held": "the fleet runs 2 of at most 2 loops",
    }  # fmt: skip
    assert describe_memo(memo) == (
        "2 running of at most 2; 3 waiting; $4.50 of $10.00 spent; 12,345 tokens; "
        "usage unknown for 1 task(s) — no new loop starts: the fleet runs 2 of at most 2 loops"
    )
    assert describe_memo({"running": 0}) == "0 running"


def test_status_counts_only_loops_on_a_worker_as_running_and_every_held_task_as_held(
    tmp_path: Path, bare: Path
) -> None:
    from loopctl_fleet.status import fleet_summary, list_rows

    go = tmp_path / "go"
    agent = f"sh -c {shlex.quote(f'cat >/dev/null; touch {tmp_path}/started; while [ ! -e {go} ]; do sleep 0.05; done; echo fixed > f.txt')}"
    specs = [
        TaskSpec(f"s{i}", str(bare), "main", f"task {i}", {"agent_cmd": agent, "test_cmd": "sh check.sh"})
        for i in range(4)
    ]  # fmt: skip

    async def body(client: Client, queue: str) -> None:
        await start_ledger(client, queue, Limits(max_running=2))  # two granted, one worker slot
        handles = [await start_task(client, queue, spec) for spec in specs]
        # the two the ledger let start are whichever asked first; the other two must say held
        deadline = asyncio.get_running_loop().time() + 60
        memos = await states_of(handles)
        while sum(m.startswith("held: the fleet runs 2") for m in memos) < 2:
            assert asyncio.get_running_loop().time() < deadline, memos
            await asyncio.sleep(0.05)
            memos = await states_of(handles)
        while not (tmp_path / "started").exists():
            await asyncio.sleep(0.05)
        rows = await list_rows(client, queue.removeprefix("loopctl-"))
        held = sorted(row.state for row in rows if row.state.startswith("held"))
        assert held == ["held: the fleet runs 2 of at most 2 loops"] * 2, rows
        granted = sorted(row.state for row in rows if not row.state.startswith("held"))
        assert granted[1] == "running (attempt 1 on w1)", granted  # the worker's only slot
        assert granted[0].startswith("queued"), granted  # let start, but no slot is free
        memo = dict(await (await client.get_workflow_handle(LEDGER).describe()).memo())
        assert fleet_summary(rows, memo).startswith("1 running of at most 2; 2 waiting")
        go.touch()
        assert [(await h.result()).state for h in handles] == ["complete"] * 4

    with_fleet(tmp_path, body, slots=1)


async def states_of(handles: list[WorkflowHandle[LoopctlTask, TaskOutcome]]) -> list[str]:
    return [str((await (await h.describe()).memo()).get("state", "")) for h in handles]
