"""Shared pieces of the cross-package tests: a sandboxed project driven through the real
``loopctl`` command in subprocesses, and the process bookkeeping that crash and signal tests need.

Everything is real: a git project with a failing unittest test, ``python -m loopctl`` as a
subprocess, the scripted agent as its child, real signals. Waits poll with a deadline, never a
fixed sleep, so the tests are as fast as the machine allows and fail with a clear message when a
condition never comes.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from loopctl import state as st
from loopctl.agents.scripted import write_scenario
from loopctl.testing import Project, make_project, python_test_cmd, sigint_as_in_a_terminal

BUGGY_CALC = "def add(a, b):\n    return a - b\n"
FIXED_CALC = "def add(a, b):\n    return a + b\n"
TEST_CALC = (
    "import unittest\n"
    "\n"
    "from calc import add\n"
    "\n"
    "\n"
    "class AddTest(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(1, 2), 3)\n"
)
#: The scenario action that fixes the bug in ``calc.py``.
FIX_ACTION = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
#: Every name a loop may leave at the top of its state directory (no restarts happen here).
STATE_NAMES = frozenset(
    {
        st.LOOP_STATE_FILE,
        st.PROGRESS_FILE,
        st.ERROR_SUMMARY_FILE,
        st.EVENTS_FILE,
        st.ITERATIONS_FILE,
        st.CONTEXT_SUMMARY_FILE,
        st.LOCK_FILE,
        st.REPORT_MD_FILE,
        st.REPORT_JSON_FILE,
        st.LOGS_DIR,
        st.GITIGNORE_FILE,
        st.RUNNING_FILE,
    }
)


def poll(
    condition: Callable[[], Any], what: str, *, timeout: float = 15.0, interval: float = 0.01
) -> Any:
    """Call ``condition`` until it returns something truthy and return that; fail after
    ``timeout`` seconds with a message saying ``what`` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def _proc_state(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat.rpartition(b")")[2].split()
    return fields[0] if fields else None


def _carries(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read()
    except OSError:
        return False


def _children(pid: int) -> tuple[int, ...]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return tuple(int(child) for child in handle.read().split())
    except OSError:
        return ()


class Sandbox:
    """A project with a failing test, a scenario file, and the ``loopctl`` command run in it.

    Test modules reach the shared constants through the fixture's instance (``box.FIX_ACTION``),
    not by importing this conftest, which pytest may have shadowed with another one."""

    BUGGY_CALC = BUGGY_CALC
    FIXED_CALC = FIXED_CALC
    FIX_ACTION = FIX_ACTION
    STATE_NAMES = STATE_NAMES
    poll = staticmethod(poll)

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project: Project = make_project(root / "project")
        self.path = self.project.path
        self.state_dir = self.path / st.DEFAULT_STATE_DIR
        self.scenario = root / "scenario.json"
        self.out_dir = root / "out"
        self.out_dir.mkdir()
        self.spawned: list[subprocess.Popen[bytes]] = []
        self.outputs: dict[int, Path] = {}  # pid of a spawned loopctl -> its output file
        self.test_cmd = ""
        #: Added to the environment of every loopctl this sandbox runs.
        self.extra_env: dict[str, str] = {}
        #: In the environment of every loopctl this sandbox runs, so of all they start.
        self.marker = f"TEST_SANDBOX_ID={uuid.uuid4().hex}"
        self.project.write("calc.py", BUGGY_CALC)
        self.project.write("test_calc.py", TEST_CALC)
        self.project.commit("a failing test")

    # --- setup ----------------------------------------------------------------------------------

    def configure(
        self,
        *,
        test_cmd: str | None = None,
        max_iterations: int = 20,
        limits: Mapping[str, float] | None = None,
        test_first: bool = True,
    ) -> None:
        """Write ``loopctl.toml``: the scripted agent on :attr:`scenario`, stuck detection off,
        short timeouts so a broken test fails fast instead of hanging; ``test_first`` false
        for a test that counts the test command's runs from the first turn."""
        self.test_cmd = test_cmd or python_test_cmd()
        bounds = {
            "max_iterations": max_iterations,
            "agent_timeout_s": 60.0,
            "idle_timeout_s": 60.0,
            "test_timeout_s": 60.0,
            **(limits or {}),
        }
        lines = [
            'agent = "scripted"',
            f"test_cmd = {json.dumps(self.test_cmd)}",
            f"test_first = {'true' if test_first else 'false'}",
            "",
            "[limits]",
            *(f"{key} = {value!r}" for key, value in bounds.items()),
            "",
            "[stuck]",
            "enabled = false",
            "",
            "[agents.scripted]",
            f"scenario = {json.dumps(str(self.scenario))}",
            "",
        ]
        self.project.write("loopctl.toml", "\n".join(lines))

    def script(self, turns: Sequence[Sequence[Mapping[str, Any]]], **top_level: Any) -> None:
        write_scenario(self.scenario, [list(turn) for turn in turns], **top_level)

    # --- running loopctl ------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
        env["PYTHONUNBUFFERED"] = "1"  # the JSON event lines survive a SIGKILL, for debugging
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(self.extra_env)
        name, _, value = self.marker.partition("=")
        env[name] = value
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "loopctl", *args]

    def install_plugin(self, name: str, source: str) -> None:
        """A real (tiny) installed distribution with a ``loopctl.plugins`` entry point, the only
        installed plugin the sandbox's loopctl loads."""
        site = self.root / "site"
        module = "loopctl_test_" + name.replace("-", "_")
        info = site / f"loopctl_{module}-1.0.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: loopctl-{name}\nVersion: 1.0\n"
        )
        (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{name} = {module}\n")
        (site / f"{module}.py").write_text(source)
        self.extra_env.update(PYTHONPATH=str(site), LOOPCTL_PLUGINS=name)

    def spawn(self, *args: str, group: bool = False) -> subprocess.Popen[bytes]:
        """Start ``loopctl ARGS`` in the project; its output goes to a file in :attr:`out_dir`.
        ``group``: in a process group of its own, which the test can signal as a terminal
        signals its foreground job."""
        out = self.out_dir / f"{len(self.spawned) + 1:03d}-{args[0] if args else 'loopctl'}.out"
        with open(out, "wb") as stream:
            proc = subprocess.Popen(
                self.argv(*args),
                cwd=self.path,
                env=self.env(),
                stdin=subprocess.DEVNULL,
                stdout=stream,
                stderr=subprocess.STDOUT,
                preexec_fn=sigint_as_in_a_terminal(),
                process_group=0 if group else None,
            )
        self.outputs[proc.pid] = out
        self.spawned.append(proc)
        return proc

    def run(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run ``loopctl ARGS`` in the project to its end and capture its output."""
        return subprocess.run(
            self.argv(*args),
            cwd=self.path,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def status(self) -> dict[str, Any]:
        """``loopctl status --json`` as a real subprocess; asserts it exits 0."""
        done = self.run("status", "--state-dir", str(self.state_dir), "--json", timeout=30)
        assert done.returncode == 0, f"loopctl status failed ({done.returncode}): {done.stderr}"
        data: dict[str, Any] = json.loads(done.stdout)
        return data

    def status_in_process(self) -> tuple[int, dict[str, Any] | None, str]:
        """``loopctl status --json`` through the same entry point, in this process (no
        interpreter start-up: cheap enough to run after every kill)."""
        from loopctl.__main__ import main

        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["status", "--state-dir", str(self.state_dir), "--json"])
        data = json.loads(out.getvalue()) if code == 0 else None
        return code, data, err.getvalue()

    def output_of(self, proc: subprocess.Popen[bytes]) -> str:
        """The end of what a spawned loopctl printed (for failure messages)."""
        try:
            return self.outputs[proc.pid].read_text("utf-8", errors="replace")[-4000:]
        except OSError:
            return ""

    # --- reading the state --------------------------------------------------------------------

    def events(self) -> list[dict[str, Any]]:
        return st.read_jsonl(self.state_dir / st.EVENTS_FILE).records

    def iterations(self) -> list[dict[str, Any]]:
        return st.read_jsonl(self.state_dir / st.ITERATIONS_FILE).records

    def loop_state(self) -> st.LoopState:
        return st.read_loop_state(self.state_dir / st.LOOP_STATE_FILE)

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.state_dir / st.REPORT_JSON_FILE).read_text("utf-8"))
        return data

    def wait_for_event(
        self,
        type: str,
        proc: subprocess.Popen[bytes] | None = None,
        *,
        after: int = 0,
        timeout: float = 15.0,
    ) -> dict[str, Any]:
        """The first ``type`` event past the first ``after`` events; fails early (with the
        process's output) if ``proc`` exits before it shows up."""

        def found() -> dict[str, Any] | None:
            for event in self.events()[after:]:
                if event.get("type") == type:
                    return event
            if proc is not None and proc.poll() is not None:
                pytest.fail(
                    f"loopctl exited ({proc.returncode}) before a {type} event:\n"
                    + self.output_of(proc)
                )
            return None

        event: dict[str, Any] = poll(found, timeout=timeout, what=f"a {type} event")
        return event

    # --- processes ------------------------------------------------------------------------------

    def processes(self, *, needle: str = "") -> list[tuple[int, str]]:
        """Live (non-zombie) processes that belong to this sandbox: its path is in their command
        line, they run inside it, or they carry its :attr:`marker` in their environment. The
        test process itself is never listed. Zombies are ignored: killed orphans stay zombies
        here because PID 1 does not reap them. ``needle`` further restricts the list to command
        lines containing it."""
        roots = {str(self.root), str(self.root.resolve())}
        marker = self.marker.encode() + b"\0"
        found: list[tuple[int, str]] = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            pid = int(entry)
            state = _proc_state(pid)
            if state is None or state in (b"Z", b"X", b"x"):
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    cmdline = handle.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            except OSError:
                continue
            try:
                cwd = os.readlink(f"/proc/{pid}/cwd")
            except OSError:
                cwd = ""
            inside = any(
                root in cmdline or cwd == root or cwd.startswith(root + os.sep) for root in roots
            ) or _carries(pid, marker)
            if inside and needle in cmdline:
                found.append((pid, cmdline))
        return found

    def agent_processes(self) -> list[tuple[int, str]]:
        return self.processes(needle="scripted_runner")

    def wait_for_no_processes(self, timeout: float) -> list[tuple[int, str]]:
        """Wait up to ``timeout`` s for every sandbox process to be gone; returns what is left."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.processes()
            if not left or time.monotonic() >= deadline:
                return left
            time.sleep(0.02)

    def kill_loop(self, proc: subprocess.Popen[bytes]) -> None:
        """``kill -9`` of the loop: on Linux the process behind the ``loopctl`` the test started
        (its guard's one child; the guard then ends what the loop left running and exits as it
        did), else that process itself. The guard is held stopped meanwhile, so that it cannot
        start the loop between a look for it and the kill. Waits for ``proc`` to exit."""
        self._stopped(proc.pid)
        (loop,) = _children(proc.pid) or (proc.pid,)
        os.kill(loop, signal.SIGKILL)
        if loop != proc.pid:
            os.kill(proc.pid, signal.SIGCONT)
        proc.wait(timeout=30)

    def kill_guard_and_loop(self, proc: subprocess.Popen[bytes]) -> None:
        """``kill -9`` of the loop and its guard at once (as ``kill -9 -PGID`` does): neither
        can end anything, and what the loop ran is left running. Waits for ``proc`` to exit."""
        self._stopped(proc.pid)
        for loop in _children(proc.pid):
            os.kill(loop, signal.SIGKILL)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def _stopped(self, pid: int) -> None:
        """Stop ``pid`` (one that has exited already stays as it is)."""
        os.kill(pid, signal.SIGSTOP)
        poll(lambda: _proc_state(pid) in (b"T", b"Z", None), f"process {pid} to stop")

    def cleanup(self) -> None:
        """SIGKILL, by pid, whatever this sandbox started that is still alive."""
        for proc in self.spawned:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
        for pid, _cmdline in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    box = Sandbox(tmp_path)
    try:
        yield box
    finally:
        box.cleanup()


@pytest.fixture(autouse=True, scope="session")
def _private_failure_memory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Loops in these tests may load installed plugins; keep the context-errors plugin's
    per-user failure memory out of the real home (XDG_DATA_HOME survives LOOPCTL_* stripping)."""
    import os

    home = tmp_path_factory.mktemp("xdg-data")
    os.environ["XDG_DATA_HOME"] = str(home)
    os.environ["LOOPCTL_FAILURE_MEMORY"] = str(home / "failures.sqlite3")
