"""``loopctl fleet up`` and ``down``: a local Temporal dev server and one worker, in the background.

Both are started detached (their own session, output to a log file, stdin from /dev/null), so
they outlive the command that started them; each is recorded in a JSON file under the fleet's
state directory (``$XDG_STATE_HOME/loopctl-fleet/<name>/``, by default
``~/.local/state/loopctl-fleet/default/``) with its pid *and the process's start time*: a pid
the system has since given to another process is never taken for ours, so ``up`` never reuses a
stranger and ``down`` never signals one.

Readiness is waited for, not slept for: the server is up once an RPC to it succeeds, the worker
once it has written its ready file (it does so after it has started polling its task queue).
The server's database (``temporal.db``) is a file in the state directory: tasks submitted before
``down`` are still there after the next ``up``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loopctl_fleet.server import ServerError, temporal_binary

SERVER_FILE = "server.json"
#: Where ``up`` records how to reach the fleet (address, ports, namespace); kept by ``down``, so a
#: stopped fleet is never looked for on another server and ``up`` brings it back on its port.
FLEET_FILE = "fleet.json"
DEFAULT_PORT = 7233
DEFAULT_UI_PORT = 8233
WORKER_FILE = "worker.json"
READY_FILE = "worker.ready"
#: How long a starting server or worker may take before ``up`` gives up on it.
STARTUP_TIMEOUT_S = 60.0
#: How long ``down`` waits for each process to end after SIGTERM before it sends SIGKILL.
STOP_TIMEOUT_S = 30.0


def state_home() -> Path:
    """``$XDG_STATE_HOME``, or ``~/.local/state``."""
    named = os.environ.get("XDG_STATE_HOME")
    return Path(named) if named else Path.home() / ".local" / "state"


def fleet_dir(name: str) -> Path:
    """Where fleet ``name`` keeps its server's database, pid files and logs on this machine."""
    return state_home() / "loopctl-fleet" / name


def task_queue(fleet: str) -> str:
    return f"loopctl-{fleet}"


def ui_url(ui_port: int) -> str:
    return f"http://127.0.0.1:{ui_port}/namespaces/default/workflows"


@dataclasses.dataclass
class Fleet:
    """What ``up`` started (or found running) and prints."""

    name: str
    address: str
    db: Path
    ui_port: int
    identity: str
    slots: int
    #: Which of the two were already running and reused.
    reused_server: bool = False
    reused_worker: bool = False
    state_dir: Path = Path()

    @property
    def ui(self) -> str:
        return ui_url(self.ui_port)


def recorded(name: str) -> dict[str, Any] | None:
    """How fleet ``name`` was last started on this machine by ``up`` (None: never)."""
    try:
        record = json.loads((fleet_dir(name) / FLEET_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("address") else None


def local_server(name: str) -> dict[str, Any] | None:
    """Fleet ``name``'s record if ``up`` started it on this machine and its server runs; None if
    it never did; :class:`ServerError` if its server is not running now."""
    record = recorded(name)
    if record is None:
        return None
    if running(fleet_dir(name) / SERVER_FILE) is None:
        raise ServerError(
            f"fleet {name!r} was started on this machine (`loopctl fleet up`, "
            f"{record['address']}) and its server is not running: "
            f"start it again with `loopctl fleet up --name {name}`"
        )
    return record


def up(
    name: str = "default",
    *,
    port: int | None = None,
    ui_port: int | None = None,
    slots: int = 4,
    say: Callable[[str], None] = lambda line: None,
) -> Fleet:
    """Start (or find running) fleet ``name``'s server and worker; :class:`ServerError` if
    either cannot be started, with what its log says. Ports not given are the ones the fleet
    had last time (its database is there), else the defaults."""
    home = fleet_dir(name)
    home.mkdir(parents=True, exist_ok=True)
    before = recorded(name) or {}
    server = running(home / SERVER_FILE)
    reused_server = server is not None
    if server is None:
        server = _start_server(
            home,
            port or int(before.get("port") or DEFAULT_PORT),
            ui_port or int(before.get("ui_port") or DEFAULT_UI_PORT),
        )
        say(f"Started the Temporal dev server (pid {server['pid']}).")
    address = f"127.0.0.1:{server['port']}"
    write_record(
        home / FLEET_FILE,
        {"address": address, "port": server["port"], "ui_port": server["ui_port"],
         "namespace": "default"},
    )  # fmt: skip
    worker = running(home / WORKER_FILE)
    reused_worker = worker is not None
    if worker is None:
        worker = _start_worker(home, name, address, slots)
        say(f"Started a worker (pid {worker['pid']}).")
    return Fleet(
        name=name,
        address=address,
        db=Path(server["db"]),
        ui_port=int(server["ui_port"]),
        identity=str(worker.get("identity", "")),
        slots=int(worker.get("slots", slots)),
        reused_server=reused_server,
        reused_worker=reused_worker,
        state_dir=home,
    )


def down(name: str = "default", *, say: Callable[[str], None] = lambda line: None) -> bool:
    """Stop fleet ``name``'s worker, then its server, each waited for until gone. False when
    neither was running."""
    home = fleet_dir(name)
    stopped = False
    for what, file in (("worker", WORKER_FILE), ("server", SERVER_FILE)):
        record = running(home / file)
        if record is not None:
            stop(record)
            say(f"Stopped the {what} (pid {record['pid']}).")
            stopped = True
        with contextlib.suppress(FileNotFoundError):
            (home / file).unlink()
    return stopped


# --- the two processes -----------------------------------------------------------------------


def _start_server(home: Path, port: int, ui_port: int) -> dict[str, Any]:
    for flag, number in (("--port", port), ("--ui-port", ui_port)):
        if not port_free(number):
            raise ServerError(
                f"port {number} is in use (another Temporal server?): choose another with {flag}"
            )
    binary = temporal_binary()
    db = home / "temporal.db"
    argv = [
        str(binary), "server", "start-dev", "--ip", "127.0.0.1",
        "--port", str(port), "--ui-port", str(ui_port), "--db-filename", str(db),
        "--log-format", "json", "--log-level", "warn", "--ui-disable-news-fetch",
    ]  # fmt: skip
    log = home / "server.log"
    record = spawn(argv, log, cwd=home, env=dict(os.environ))
    record.update(port=port, ui_port=ui_port, db=str(db), binary=str(binary))
    try:
        asyncio.run(_server_ready(f"127.0.0.1:{port}", record, log))
    except BaseException:
        stop(record)
        raise
    write_record(home / SERVER_FILE, record)
    return record


async def _server_ready(address: str, record: dict[str, Any], log: Path) -> None:
    from temporalio.client import Client

    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        try:
            await Client.connect(address)
            return
        except RuntimeError:
            pass
        _check_starting(record, log, "the Temporal dev server", deadline)
        await asyncio.sleep(0.05)  # a poll of something that has no event to wait on


def _start_worker(home: Path, name: str, address: str, slots: int) -> dict[str, Any]:
    ready = home / READY_FILE
    with contextlib.suppress(FileNotFoundError):
        ready.unlink()
    argv = [
        sys.executable, "-m", "loopctl", "fleet", "worker", "--fleet", name,
        "--address", address, "--namespace", "default", "--no-env-config",
        "--slots", str(slots), "--home", str(home / "worker"), "--ready-file", str(ready),
    ]  # fmt: skip
    # the worker of a local server needs none of the Temporal settings meant for another one
    env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
    log = home / "worker.log"
    record = spawn(argv, log, cwd=home, env=env)
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not ready.exists():
            _check_starting(record, log, "the worker", deadline)
            time.sleep(0.05)  # a poll: the ready file is the event
        record.update(json.loads(ready.read_text(encoding="utf-8")))
    except BaseException:
        stop(record)
        raise
    write_record(home / WORKER_FILE, record)
    return record


def _check_starting(record: dict[str, Any], log: Path, what: str, deadline: float) -> None:
    if not alive(record):
        raise ServerError(f"{what} exited while starting; its log {log} ends:\n{tail(log)}")
    if time.monotonic() > deadline:
        raise ServerError(
            f"{what} was not ready after {STARTUP_TIMEOUT_S:g} s; its log {log} ends:\n{tail(log)}"
        )


def tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty)"


# --- processes recorded by pid and start time ------------------------------------------------


def spawn(argv: list[str], log: Path, *, cwd: Path, env: dict[str, str]) -> dict[str, Any]:
    """Start ``argv`` detached (its own session, output appended to ``log``); its record."""
    with log.open("ab") as out:
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return {"pid": proc.pid, "started": start_time(proc.pid), "argv": argv, "log": str(log)}


def write_record(path: Path, record: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp.replace(path)


def running(path: Path) -> dict[str, Any] | None:
    """The record at ``path`` if its process is still the one that was recorded."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and alive(record) else None


def alive(record: dict[str, Any]) -> bool:
    """Whether the recorded process runs (not a zombie) and is the one recorded."""
    pid = int(record.get("pid", 0))
    _reap(pid)
    started = start_time(pid)
    return started is not None and started == record.get("started")


def stop(record: dict[str, Any], timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM the recorded process, wait until it is gone; SIGKILL it after ``timeout``."""
    pid = int(record["pid"])
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        if not alive(record):
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + wait
        while alive(record) and time.monotonic() < deadline:
            time.sleep(0.02)  # a poll: a process that is not our child has no exit event


def _reap(pid: int) -> None:
    """Collect ``pid``'s exit status if it is our child (``up`` run in-process, as in tests)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def start_time(pid: int) -> str | None:
    """When process ``pid`` started (None: no such process, or a zombie), as the system says:
    with the pid, it names one process for as long as the machine runs."""
    if pid <= 0:
        return None
    stat = Path(f"/proc/{pid}/stat")
    if stat.parent.parent.is_dir() and Path("/proc/self/stat").exists():
        try:
            fields = stat.read_bytes().rpartition(b")")[2].split()
        except OSError:
            return None
        return None if fields[0] in (b"Z", b"X") else fields[19].decode()
    done = subprocess.run(  # macOS: no /proc
        ["ps", "-o", "stat=,lstart=", "-p", str(pid)], capture_output=True, text=True
    )
    state, _, started = done.stdout.strip().partition(" ")
    return None if done.returncode or not started or state.startswith("Z") else started.strip()


def port_free(port: int) -> bool:
    """Whether a server can listen on 127.0.0.1:``port`` now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # as a server binds: a port left in TIME_WAIT by a server that ended is free
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
