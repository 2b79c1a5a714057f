"""A fleet worker: polls the fleet's task queue and runs its tasks' loops, ``slots`` at once."""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.worker import Worker

from loopctl_fleet.activities import FleetActivities
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
    acts = FleetActivities(home, identity, grace_s=grace_s, heartbeat_s=heartbeat_s)
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[LoopctlTask],
        activities=[acts.resolve_base, acts.run_loop],
        identity=identity,
        max_concurrent_activities=slots,
        # a dead worker's workflow tasks move to the shared queue after this, not 10 s
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=2),
        # a cancel reaches a running loop within this, whatever the heartbeat timeout
        max_heartbeat_throttle_interval=timedelta(seconds=2),
        graceful_shutdown_timeout=timedelta(seconds=grace_s + 5),
    )
