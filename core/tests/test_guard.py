"""The ``loopctl`` command's guard (loopctl.guard): nothing a loop started outlives the command,
whatever kills it, even ``kill -9`` of the process the user started or of the loop behind it;
a stop signal sent to the whole process group (a terminal's Ctrl-C) is one stop, not two; a
stop signal after the loop ended does not change the exit code.

Every process a test's loop starts carries a marker of the test in its environment (the agent,
its daemon, its Bash-tool-style session, the guard and the loop themselves): a survivor is a
live process in /proc that carries it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_run import clean_env

from loopctl import state as st
from loopctl.model import EXIT_CODES
from loopctl.testing import Project, make_project, python_test_cmd, sigint_as_in_a_terminal

LINUX = sys.platform.startswith("linux")
pytestmark = pytest.mark.timing  # real signals to a real loopctl, processes awaited

INTERRUPTED = EXIT_CODES["interrupted"]
MARKER_VAR = "GUARD_TEST_MARKER"
#: How long after ``kill -9`` something the loop started may still run (the issue's bound).
SURVIVAL_S = 5.0
#: Only bounds a wait for something that never comes.
PATIENCE_S = 60.0

#: The agent: a daemon (double fork, setsid), then a Bash tool call as Claude Code makes one (a
#: shell in a session of its own, running a command that lasts), then it works "forever".
AGENT = """\
import os, subprocess, sys, time
from pathlib import Path

root = Path(sys.argv[1])
sys.stdin.read()
if os.fork() == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    (root / "daemon.tmp").write_text(str(os.getpid()))
    (root / "daemon.tmp").rename(root / "daemon.pid")
    time.sleep(300)
    os._exit(0)
os.wait()
tool = subprocess.Popen(
    ["sh", "-c", "sleep 300; exit 0"], start_new_session=True,
    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
)
(root / "tool.pid").write_text(str(tool.pid))
print("working", flush=True)
time.sleep(300)
"""

#: The agent: a process that hides from every turn's search (it leaves the agent's session and
#: clears its environment), then it fixes the bug.
HIDING_AGENT = """\
import os, sys
from pathlib import Path

root = Path(sys.argv[1])
sys.stdin.read()
if os.fork() == 0:
    os.setsid()
    if os.fork() != 0:
        os._exit(0)
    (root / "hidden.pid").write_text(str(os.getpid()))
    code = "import time; time.sleep(300)"
    os.execve(sys.executable, [sys.executable, "-c", code, "hidden"], {})
os.wait()
Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
print("fixed")
"""

#: A plugin whose ``on_loop_end`` holds the loop's end until the test releases it: a second stop
#: signal would cut it short (then it never writes ``end-finished``).
HOLDING_PLUGIN = """\
import os, time
from pathlib import Path

from loopctl import hookimpl


@hookimpl
def on_loop_end(loop, outcome):
    root = Path(os.environ["GUARD_TEST_ROOT"])
    (root / "end-started").touch()
    while not (root / "release").exists():
        time.sleep(0.01)
    (root / "end-finished").touch()
"""


def poll(condition: Callable[[], Any], what: str, timeout: float = PATIENCE_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.01)


def _stat(pid: int) -> list[bytes] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rpartition(b")")[2].split()
    except OSError:
        return None


def _pending(pid: int) -> int:
    """The signals pending for ``pid`` (its own and its thread group's), as a bit mask."""
    mask = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("SigPnd:", "ShdPnd:")):
                mask |= int(line.split()[1], 16)
    except OSError:
        pass
    return mask


def _bit(signum: int) -> int:
    return 1 << (signum - 1)


class Loopctl:
    """One ``python -m loopctl run`` in a project, in a process group of its own (so that a
    test can signal the group, as a terminal does), every process of it marked."""

    def __init__(
        self, root: Path, *args: str, env: dict[str, str] | None = None, agent: str = AGENT
    ) -> None:
        self.root = root
        self.project: Project = make_project(root / "project")
        self.project.write("calc.py", "def add(a, b):\n    return a - b\n")
        self.project.write(
            "test_calc.py",
            "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
        )
        self.project.commit("a failing test")
        (root / "agent.py").write_text(agent)
        self.marker = f"{MARKER_VAR}={uuid.uuid4().hex}".encode()
        argv = [
            sys.executable, "-m", "loopctl", "run", "Make add() add.",
            "--agent-cmd", f"{sys.executable} {root / 'agent.py'} {root}",
            "--test-cmd", python_test_cmd(), "--json", *args,
        ]  # fmt: skip
        self.output = root / "loopctl.out"
        with open(self.output, "wb") as out:
            self.proc = subprocess.Popen(
                argv,
                cwd=self.project.path,
                env=clean_env(
                    **{MARKER_VAR: self.marker.decode().partition("=")[2]}, **(env or {})
                ),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                process_group=0,
                preexec_fn=sigint_as_in_a_terminal(),
            )
        self.state_dir = self.project.path / ".loopctl"

    def text(self) -> str:
        return self.output.read_text(errors="replace")[-4000:]

    def survivors(self) -> list[tuple[int, str]]:
        """Live processes that carry this run's marker, but for this test's own."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            pid = int(entry)
            stat = _stat(pid)
            if stat is None or stat[0] in (b"Z", b"X", b"x"):
                continue
            try:
                environ = Path(f"/proc/{pid}/environ").read_bytes()
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if self.marker + b"\0" in environ:
                found.append((pid, cmdline.decode(errors="replace").strip()))
        return found

    def loop_pid(self) -> int:
        """The loop: the only child of the process the test started (its guard)."""

        def child() -> int | None:
            try:
                children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
            except OSError:
                return None
            found = children.split()
            return int(found[0]) if len(found) == 1 else None

        pid: int = poll(child, "the loop process, the guard's child")
        return pid

    def events(self) -> list[dict[str, Any]]:
        return st.read_jsonl(self.state_dir / st.EVENTS_FILE).records

    def wait_for_event(self, kind: str) -> dict[str, Any]:
        def found() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                pytest.fail(f"loopctl exited ({self.proc.returncode}):\n{self.text()}")
            return next((e for e in self.events() if e.get("type") == kind), None)

        event: dict[str, Any] = poll(found, f"a {kind} event")
        return event

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=PATIENCE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"loopctl did not exit:\n{self.text()}")

    def signal_group(self, signum: int) -> None:
        os.killpg(self.proc.pid, signum)

    def cleanup(self) -> None:
        with_guard = self.proc.poll() is None
        for pid, _ in self.survivors():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if with_guard:
            self.proc.wait(timeout=30)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Callable[..., Loopctl]]:
    runs: list[Loopctl] = []

    def start(*args: str, env: dict[str, str] | None = None, agent: str = AGENT) -> Loopctl:
        run = Loopctl(tmp_path, *args, env=env, agent=agent)
        runs.append(run)
        return run

    try:
        yield start
    finally:
        for run in runs:
            run.cleanup()


def _guard_idle(pid: int) -> bool:
    """The guard waits for its loop again, with no stop signal left to pass on: it has passed
    on every one it got (it handles them between its waits)."""
    stat = _stat(pid)
    stops = _bit(signal.SIGINT) | _bit(signal.SIGTERM) | _bit(signal.SIGHUP) | _bit(signal.SIGQUIT)
    return stat is not None and stat[0] == b"S" and not _pending(pid) & stops


def _passed_on_and_handled(run: Loopctl, loop: int) -> None:
    """Wait until the guard has passed on what it got and the loop has taken it in (a signal
    the kernel handed over is handled before the plugin's hook looks for its release)."""
    poll(lambda: _guard_idle(run.proc.pid), "the guard to pass the signal on")
    poll(lambda: not _pending(loop) >> 32, "the loop to take in the signal passed on")


# --- kill -9 -----------------------------------------------------------------------------------


@pytest.mark.skipif(not LINUX, reason="the guard is Linux's (a subreaper, a parent-death signal)")
@pytest.mark.parametrize("victim", ["the process started", "the loop"])
def test_nothing_the_loop_started_outlives_a_kill_9(
    started: Callable[..., Loopctl], victim: str
) -> None:
    """The agent leaves a setsid daemon and a Bash-tool-style session behind its back; ``kill
    -9`` of the process the user started, or of the loop behind it, and 5 s later nothing of
    the run is left, without a ``resume``."""
    run = started("--no-plugins")
    run.wait_for_event("agent.start")
    poll(lambda: (run.root / "daemon.pid").exists() and (run.root / "tool.pid").exists(), "agent")
    daemon, tool = (int((run.root / f"{name}.pid").read_text()) for name in ("daemon", "tool"))
    poll(lambda: any(c == "sleep 300" for _, c in run.survivors()), "the tool's sleep")
    alive = {pid for pid, _ in run.survivors()}
    assert {run.proc.pid, daemon, tool} <= alive, run.survivors()
    assert len(alive) >= 5, run.survivors()  # with the agent and the tool's sleep
    assert len({os.getsid(pid) for pid in (run.proc.pid, daemon, tool)}) == 3  # all apart
    state = st.read_loop_state(run.state_dir / st.LOOP_STATE_FILE)
    assert state.pid == run.proc.pid  # the state names the process the user started

    target = run.proc.pid if victim == "the process started" else run.loop_pid()
    os.kill(target, signal.SIGKILL)
    killed = time.monotonic()
    left = run.survivors()
    while left and time.monotonic() - killed < SURVIVAL_S:
        time.sleep(0.02)
        left = run.survivors()
    assert not left, f"{time.monotonic() - killed:.1f} s after kill -9 of {victim}: {left}"

    code = run.wait()
    state = st.read_loop_state(run.state_dir / st.LOOP_STATE_FILE)
    if victim == "the loop":
        assert code == -signal.SIGKILL  # the guard ends as the loop did
        assert state.status == "running"  # killed: `loopctl resume` continues it
    else:
        # the loop got SIGTERM when its guard died, and stopped as on any SIGTERM
        assert code == -signal.SIGKILL
        assert state.status == "interrupted", state.status
        assert "SIGTERM" in (state.reason or ""), state.reason


@pytest.mark.skipif(not LINUX, reason="the guard is Linux's")
def test_a_process_that_hid_from_every_turn_is_ended_before_loopctl_exits(
    started: Callable[..., Loopctl],
) -> None:
    """A process that left the agent's session and cleared its environment is not found when
    the turn ends (nothing tells it from one of the user's); it is the loop's child then, and
    its guard's once the loop has exited: gone when the command returns."""
    run = started("--no-plugins", agent=HIDING_AGENT)
    assert run.wait() == 0, run.text()
    hidden = int((run.root / "hidden.pid").read_text())
    stat = _stat(hidden)
    if stat is not None and stat[0] not in (b"Z", b"X"):
        os.kill(hidden, signal.SIGKILL)  # it carries no marker for the clean-up to find
        pytest.fail(f"the hidden process {hidden} was still running: {stat[:4]}")


# --- stop signals to the whole group -----------------------------------------------------------


def _with_holding_plugin(fake_site: Any, root: Path) -> dict[str, str]:
    fake_site.add_plugin("holding", HOLDING_PLUGIN)
    return {
        "PYTHONPATH": str(fake_site.root),
        "LOOPCTL_PLUGINS": "holding",
        "GUARD_TEST_ROOT": str(root),
    }


@pytest.mark.skipif(not LINUX, reason="the guard is Linux's")
def test_a_signal_to_the_whole_group_is_one_stop(
    started: Callable[..., Loopctl], fake_site: Any, tmp_path: Path
) -> None:
    """SIGTERM to the process group reaches the loop and its guard, which passes it on: the
    loop takes the copy for the same request, so its ``on_loop_end`` is not cut short as by a
    second signal. The guard is held stopped until the loop is in that hook, so that its copy
    comes there, at the worst moment (as on a loaded machine)."""
    run = started(env=_with_holding_plugin(fake_site, tmp_path))
    run.wait_for_event("agent.start")
    loop = run.loop_pid()
    os.kill(run.proc.pid, signal.SIGSTOP)
    poll(lambda: (_stat(run.proc.pid) or [b""])[0] == b"T", "the guard to stop")
    run.signal_group(signal.SIGTERM)
    poll((tmp_path / "end-started").exists, "the loop's end (on_loop_end)")
    os.kill(run.proc.pid, signal.SIGCONT)
    _passed_on_and_handled(run, loop)
    (tmp_path / "release").touch()

    assert run.wait() == INTERRUPTED, run.text()
    assert (tmp_path / "end-finished").exists(), "on_loop_end was cut short by the copy"
    end = run.events()[-1]
    assert (end["type"], end["status"]) == ("loop.end", "interrupted")
    assert "SIGTERM" in end["message"]


@pytest.mark.skipif(not LINUX, reason="the guard is Linux's")
def test_a_second_ctrl_c_is_still_a_second(
    started: Callable[..., Loopctl], fake_site: Any, tmp_path: Path
) -> None:
    """Ctrl-C twice, each to the whole group as a terminal sends it: the first stops the loop,
    the second cuts short the hook that holds up its end (the test never releases it)."""
    run = started(env=_with_holding_plugin(fake_site, tmp_path))
    run.wait_for_event("agent.start")
    loop = run.loop_pid()
    run.signal_group(signal.SIGINT)
    poll((tmp_path / "end-started").exists, "the loop's end (on_loop_end)")
    _passed_on_and_handled(run, loop)
    run.signal_group(signal.SIGINT)

    assert run.wait() == INTERRUPTED, run.text()
    assert not (tmp_path / "end-finished").exists()
    end = run.events()[-1]
    assert (end["type"], end["status"]) == ("loop.end", "interrupted")
    assert "Ctrl-C" in end["message"]
    assert not run.survivors()


# --- a stop signal after the loop ended --------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_stop_signals_while_loopctl_exits_do_not_change_its_exit_code(
    started: Callable[..., Loopctl], signum: signal.Signals
) -> None:
    """SIGTERM stops the loop; from its ``loop.end`` on, the same signal comes again and again
    (to the whole group) until loopctl has exited: it exits 130 all the same, as documented,
    never by the signal, and without a traceback."""
    run = started("--no-plugins")
    run.wait_for_event("agent.start")
    run.signal_group(signal.SIGTERM)
    run.wait_for_event("loop.end")
    sent = 0
    while run.proc.poll() is None:
        try:
            run.signal_group(signum)
        except ProcessLookupError:  # all gone between the poll and the signal
            break
        sent += 1
        try:
            run.proc.wait(timeout=0.002)
        except subprocess.TimeoutExpired:
            pass
    code = run.wait()
    assert code == INTERRUPTED, f"exit {code} after {sent} more signals:\n{run.text()}"
    assert "Traceback" not in run.text()
    assert st.read_loop_state(run.state_dir / st.LOOP_STATE_FILE).status == "interrupted"
    assert not run.survivors()
