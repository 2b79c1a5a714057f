"""The ``loopctl`` command's guard (loopctl.guard): nothing a loop started outlives the command,
whatever kills it, even ``kill -9`` of the process the user started or of the loop behind it;
a stop signal sent to the whole process group (a terminal's Ctrl-C) is one stop, not two; a
stop signal after the loop ended does not change the exit code.

A survivor is a live process that carries the sandbox's marker in its environment (or runs in
it): the agent, its daemon, its Bash-tool-style session, the guard and the loop themselves.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loopctl.model import EXIT_CODES

pytestmark = pytest.mark.timing  # real signals to a real loopctl, processes awaited

needs_the_guard = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the guard is Linux's (subreaper, pdeathsig)"
)

INTERRUPTED = EXIT_CODES["interrupted"]
GOAL = "Make add() return the sum of its arguments."
#: How long after ``kill -9`` something the loop started may still run (the issue's bound).
SURVIVAL_S = 5.0

#: The agent. ``stay``: a ``setsid`` daemon, and a Bash tool call as Claude Code makes one (a
#: shell in a session of its own, running a command that lasts), then it works "forever".
#: ``hide``: a process that hides from every turn's search (a session of its own, an empty
#: environment), then it fixes the bug.
AGENT = """\
import subprocess, sys, time
from pathlib import Path

root, mode = Path(sys.argv[1]), sys.argv[2]
sys.stdin.read()
quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def setsid(name, *prefix):
    script = f"echo $$ > {root}/{name}.tmp && mv {root}/{name}.tmp {root}/{name}.pid; exec sleep 300"
    subprocess.run(["setsid", "-f", *prefix, "sh", "-c", script], check=True, **quiet)
    while not (root / f"{name}.pid").exists():  # setsid -f returns before the shell has run
        time.sleep(0.01)


if mode == "hide":
    setsid("hidden", "env", "-i")
    Path("calc.py").write_text(Path("calc.py").read_text().replace("a - b", "a + b"))
    print("fixed")
    sys.exit(0)
setsid("daemon")
tool = subprocess.Popen(["sh", "-c", "sleep 300; exit 0"], start_new_session=True, **quiet)
(root / "tool.pid").write_text(str(tool.pid))
print("working", flush=True)
time.sleep(300)
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


def _agent(box: Any, mode: str) -> list[str]:
    """The flags that run :data:`AGENT` in ``mode`` as the agent."""
    (box.root / "agent.py").write_text(AGENT)
    command = [sys.executable, str(box.root / "agent.py"), str(box.root), mode]
    return ["--agent-cmd", shlex.join(command)]


def _state(pid: int) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return None


def _pending(pid: int) -> int:
    """The signals pending for ``pid`` (its main thread's and its process's), as a bit mask."""
    mask = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("SigPnd:", "ShdPnd:")):
                mask |= int(line.split()[1], 16)
    except OSError:
        pass
    return mask


STOPS = sum(1 << (s - 1) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT))


def _loop_pid(box: Any, proc: subprocess.Popen[bytes]) -> int:
    """The loop: the only child of the process the test started (its guard)."""
    path = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
    (pid,) = box.poll(lambda: path.read_text().split(), "the loop, the guard's child")
    return int(pid)


def _passed_on_and_taken_in(box: Any, guard: int, loop: int) -> None:
    """Wait until the guard has passed on every stop signal it got (it is back to waiting, none
    pending) and the loop has taken in the copies (no real-time signal pending for it: one the
    kernel handed over is handled before the plugin's hook looks for its release again)."""
    box.poll(lambda: _state(guard) == b"S" and not _pending(guard) & STOPS, "the guard to pass on")
    box.poll(lambda: not _pending(loop) >> 32, "the loop to take in what was passed on")


def _wait(box: Any, proc: subprocess.Popen[bytes]) -> int:
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"loopctl did not exit:\n{box.output_of(proc)}")


def test_the_guard_passes_on_the_signals_that_stop_a_loop() -> None:
    from loopctl.engine import STOP_SIGNALS
    from loopctl.guard import PASSED_ON
    from loopctl.guard import STOP_SIGNALS as GUARDED

    assert set(GUARDED) == set(STOP_SIGNALS)
    if sys.platform.startswith("linux"):
        assert set(PASSED_ON) == set(STOP_SIGNALS)
        assert len(set(PASSED_ON.values())) == len(STOP_SIGNALS)
        assert min(PASSED_ON.values()) >= signal.SIGRTMIN


# --- kill -9 -------------------------------------------------------------------------------------


@needs_the_guard
@pytest.mark.parametrize("victim", ["the process started", "the loop"])
def test_nothing_the_loop_started_outlives_a_kill_9(sandbox: Any, victim: str) -> None:
    """The agent leaves a setsid daemon and a Bash-tool-style session behind its back; 5 s
    after ``kill -9`` of the process the user started, or of the loop behind it, nothing of the
    run is left, with no ``resume``."""
    box = sandbox
    box.configure()
    proc = box.spawn("run", GOAL, *_agent(box, "stay"), "--json", "--no-plugins")
    box.wait_for_event("agent.start", proc)
    pidfiles = [box.root / "daemon.pid", box.root / "tool.pid"]
    box.poll(lambda: all(path.exists() for path in pidfiles), "the agent's daemon and tool call")
    daemon, tool = (int(path.read_text()) for path in pidfiles)
    box.poll(lambda: box.processes(needle="sleep 300; exit 0"), "the tool call's shell")
    running = {pid for pid, _ in box.processes()}
    assert {proc.pid, daemon, tool} <= running, box.processes()
    assert len({os.getsid(pid) for pid in (proc.pid, daemon, tool)}) == 3  # all apart
    assert box.loop_state().pid == proc.pid  # the state names the process the user started

    os.kill(proc.pid if victim == "the process started" else _loop_pid(box, proc), signal.SIGKILL)
    killed = time.monotonic()
    left = box.wait_for_no_processes(SURVIVAL_S)
    assert not left, f"{time.monotonic() - killed:.1f} s after kill -9 of {victim}: {left}"

    assert _wait(box, proc) == -signal.SIGKILL  # the guard ends as the loop did
    state = box.loop_state()
    if victim == "the loop":
        assert state.status == "running"  # killed: `loopctl resume` continues it
    else:  # the loop got SIGTERM when its guard died, and stopped as on any SIGTERM
        assert (state.status, state.reason) == ("interrupted", "stopped by SIGTERM")


@needs_the_guard
def test_a_process_that_hid_from_every_turn_is_ended_before_loopctl_exits(sandbox: Any) -> None:
    """A process that left the agent's session and cleared its environment is not found when
    the turn ends (nothing tells it from one of the user's); it is the loop's child then, and
    the guard's once the loop has exited: gone when the command returns."""
    box = sandbox
    box.configure()
    done = box.run("run", GOAL, *_agent(box, "hide"), "--no-plugins")
    assert done.returncode == 0, done.stderr[-3000:]
    hidden = int((box.root / "hidden.pid").read_text())
    if _state(hidden) not in (None, b"Z", b"X"):
        os.kill(hidden, signal.SIGKILL)  # it carries no marker and runs outside the sandbox
        pytest.fail(f"the hidden process {hidden} was still running")


# --- stop signals to the whole group -------------------------------------------------------------


def _spawn_held(box: Any) -> subprocess.Popen[bytes]:
    """loopctl in a process group of its own, with :data:`HOLDING_PLUGIN`, its agent at work."""
    box.configure()
    box.install_plugin("holding", HOLDING_PLUGIN)
    box.extra_env["GUARD_TEST_ROOT"] = str(box.root)
    box.script([[{"say": "Looking."}, {"hang": True}]])
    proc = box.spawn("run", GOAL, "--json", group=True)
    box.wait_for_event("agent.start", proc)
    return proc


@needs_the_guard
def test_a_signal_to_the_whole_group_is_one_stop(sandbox: Any) -> None:
    """SIGTERM to the process group reaches the loop and its guard, which passes it on: the
    loop takes the copy for the same request, so its ``on_loop_end`` is not cut short as by a
    second signal. The guard is held stopped until the loop is in that hook, so that its copy
    comes there, at the worst moment (as on a loaded machine)."""
    box = sandbox
    proc = _spawn_held(box)
    loop = _loop_pid(box, proc)
    os.kill(proc.pid, signal.SIGSTOP)
    box.poll(lambda: _state(proc.pid) == b"T", "the guard to stop")
    os.killpg(proc.pid, signal.SIGTERM)
    box.poll((box.root / "end-started").exists, "the loop's end (on_loop_end)")
    os.kill(proc.pid, signal.SIGCONT)
    _passed_on_and_taken_in(box, proc.pid, loop)
    (box.root / "release").touch()

    assert _wait(box, proc) == INTERRUPTED, box.output_of(proc)
    assert (box.root / "end-finished").exists(), "on_loop_end was cut short by the copy"
    end = box.events()[-1]
    assert (end["type"], end["status"], end["message"]) == (
        "loop.end",
        "interrupted",
        "stopped by SIGTERM",
    )


@needs_the_guard
def test_a_second_ctrl_c_is_still_a_second(sandbox: Any) -> None:
    """Ctrl-C twice, each to the whole group as a terminal sends it: the first stops the loop,
    the second cuts short the hook that holds up its end (the test never releases it)."""
    box = sandbox
    proc = _spawn_held(box)
    loop = _loop_pid(box, proc)
    os.killpg(proc.pid, signal.SIGINT)
    box.poll((box.root / "end-started").exists, "the loop's end (on_loop_end)")
    _passed_on_and_taken_in(box, proc.pid, loop)
    os.killpg(proc.pid, signal.SIGINT)

    assert _wait(box, proc) == INTERRUPTED, box.output_of(proc)
    assert not (box.root / "end-finished").exists()
    end = box.events()[-1]
    assert (end["type"], end["status"]) == ("loop.end", "interrupted")
    assert "Ctrl-C" in end["message"]
    assert not box.processes()


# --- a stop signal after the loop ended ----------------------------------------------------------


@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP], ids=lambda s: s.name
)
def test_stop_signals_while_loopctl_exits_do_not_change_its_exit_code(
    sandbox: Any, signum: signal.Signals
) -> None:
    """SIGTERM stops the loop; from its ``loop.end`` on, a stop signal comes again and again (to
    the whole group) until loopctl has exited: it exits 130 all the same, as documented, never
    by the signal, and without a traceback."""
    box = sandbox
    box.configure()
    box.script([[{"say": "Looking."}, {"hang": True}]])
    proc = box.spawn("run", GOAL, "--json", "--no-plugins", group=True)
    box.wait_for_event("agent.start", proc)
    os.killpg(proc.pid, signal.SIGTERM)
    box.wait_for_event("loop.end", proc)
    sent = 0
    while proc.poll() is None:
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:  # all gone between the poll and the signal
            break
        sent += 1
        try:
            proc.wait(timeout=0.002)
        except subprocess.TimeoutExpired:
            pass
    code = _wait(box, proc)
    assert code == INTERRUPTED, f"exit {code} after {sent} more signals:\n{box.output_of(proc)}"
    assert "Traceback" not in box.output_of(proc)
    assert box.loop_state().status == "interrupted"
    assert not box.processes()
