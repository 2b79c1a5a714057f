"""A fleet worker: polls the fleet's task queue and runs its tasks' loops, ``slots`` at once."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from loopctl_fleet import checkout
from loopctl_fleet.activities import FleetActivities
from loopctl_fleet.lander import LoopctlLander
from loopctl_fleet.landing import FleetLanding
from loopctl_fleet.ledger import FleetLedger, closed_workflows
from loopctl_fleet.workflows import LoopctlTask


def default_identity(name: str = "") -> str:
    return f"{socket.gethostname()}:{os.getpid()}" + (f":{name}" if name else "")


def make_worker(
    client: Client,
    *,
    task_queue: str,
    home: Path,
    identity: str,
    slots: int = 4,
    grace_s: float = 10.0,
    heartbeat_s: float = 5.0,
) -> Worker:
    checkout.prune_dead_trees(home)  # what a worker that died here left
    acts = FleetActivities(home, identity, grace_s=grace_s, heartbeat_s=heartbeat_s)
    landing = FleetLanding(home, identity, grace_s=grace_s, heartbeat_s=heartbeat_s)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[LoopctlTask, FleetLedger, LoopctlLander],
        activities=[
            acts.resolve_base,
            acts.run_loop,
            closed_workflows,
            landing.enqueue_landing,
            landing.land_result,
        ],
        identity=identity,
        max_concurrent_activities=slots,
        # a dead worker's workflow tasks move to the shared queue after this, not 10 s
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
        # a cancel reaches a running loop within this, whatever the heartbeat timeout
        max_heartbeat_throttle_interval=timedelta(seconds=2),
        graceful_shutdown_timeout=timedelta(seconds=grace_s + 5),
    )


async def serve(worker: Worker) -> None:
    """Run ``worker`` until SIGTERM or SIGINT, then shut it down gracefully: running loops are
    told to end (their attempts are retried elsewhere) within the grace period."""
    import asyncio
    import signal

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with worker:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    """``python -m loopctl_fleet.worker``: a worker with its settings as plain flags (what
    ``loopctl fleet up`` starts, and the tests)."""
    import argparse
    import asyncio

    parser = argparse.ArgumentParser(prog="python -m loopctl_fleet.worker")
    parser.add_argument("--address", default="127.0.0.1:7233")
    parser.add_argument("--namespace", default="default")
    parser.add_argument("--task-queue", required=True)
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--identity", default="")
    parser.add_argument("--slots", type=int, default=4)
    parser.add_argument("--grace", type=float, default=10.0)
    parser.add_argument("--heartbeat", type=float, default=5.0)
    parser.add_argument("--ready-file", type=Path)
    args = parser.parse_args(argv)

    async def run() -> None:
        client = await Client.connect(args.address, namespace=args.namespace)
        identity = args.identity or default_identity()
        worker = make_worker(
            client, task_queue=args.task_queue, home=args.home, identity=identity,
            slots=args.slots, grace_s=args.grace, heartbeat_s=args.heartbeat,
        )  # fmt: skip
        if args.ready_file:
            args.ready_file.write_text(identity)
        await serve(worker)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
