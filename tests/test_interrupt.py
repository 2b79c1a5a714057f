"""Ctrl-C, SIGTERM, SIGHUP and SIGQUIT stop a loop gracefully: exit code 130, status
``interrupted`` everywhere, a ``loop.end`` event, no agent or test process left behind (gone
before loopctl exits), the lock released, and ``loopctl resume`` carries on from there. A second
loop in the same state directory is refused; what a SIGKILLed loop left running is ended by the
next one; descendants that leave their process group are ended too.

Ctrl-C sends SIGINT to the terminal's foreground process group. The agent and the test command
run in sessions of their own, so only loopctl itself gets it; these tests send the signal to the
loopctl process alone, exactly like that.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from typing import Any

import pytest

from loopctl import state as st
from loopctl.model import EXIT_CODES, EXIT_USAGE
from loopctl.procgroup import group_members
from loopctl.testing import python_test_cmd, sigint_as_in_a_terminal

pytestmark = pytest.mark.timing  # real signals to a real loopctl and its process groups

GOAL = "Make add() return the sum of its arguments.\nDo not change the test."
INTERRUPTED_EXIT = EXIT_CODES["interrupted"]
SIGNALS = [
    pytest.param(signum, id=signum.name)
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
]
RUN = ("run", GOAL, "--json", "--no-plugins")
RESUME = ("resume", "--json", "--no-plugins")


def assert_interrupted(
    box: Any, proc: Any, signum: signal.Signals, *, timeout: float = 20.0
) -> None:
    """loopctl ended with 130 and recorded the interruption, naming the signal, in every place a
    reader looks."""
    code = proc.wait(timeout=timeout)
    assert code == INTERRUPTED_EXIT, f"exit {code}:\n{box.output_of(proc)}"
    state = box.loop_state()
    assert state.status == "interrupted"
    assert state.original_goal == GOAL
    report = box.report()
    assert (report["status"], report["exit_code"]) == ("interrupted", INTERRUPTED_EXIT)
    end = box.events()[-1]
    assert end["type"] == "loop.end"
    assert (end["status"], end["exit_code"]) == ("interrupted", INTERRUPTED_EXIT)
    assert signum.name in end["message"], end["message"]
    # The lock went with the process: a second `loopctl status` sees no loop running.
    status = box.status()
    assert status["running"] is False
    assert status["pid"] is None
    assert status["status"] == "interrupted"


def assert_resume_completes(box: Any) -> None:
    done = box.run(*RESUME)
    assert done.returncode == 0, f"resume exited {done.returncode}:\n{done.stderr[-3000:]}"
    state = box.loop_state()
    assert state.status == "complete"
    assert state.original_goal == GOAL
    assert box.project.read("calc.py") == box.FIXED_CALC
    # The interrupted iteration 1 was never recorded; resume redid it under the same number.
    assert [record["iteration"] for record in box.iterations()] == [1]
    assert box.report()["status"] == "complete"
    assert not box.processes()


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_the_agent_turn(sandbox: Any, signum: signal.Signals) -> None:
    box = sandbox
    box.configure()
    # A hung agent for Ctrl-C, a long-sleeping one for SIGTERM: neither ends by itself.
    stall = {"hang": True} if signum == signal.SIGINT else {"sleep": 120}
    box.script([[{"say": "Looking at calc.py."}, {"write": "notes.md", "content": "hi\n"}, stall]])
    proc = box.spawn(*RUN)
    box.wait_for_event("agent.start", proc)
    # In the middle of its turn: it has done its write and is now stalled.
    box.poll((box.path / "notes.md").is_file, "the agent's write")
    agents = box.agent_processes()
    assert len(agents) == 1, agents
    agent_pid = agents[0][0]

    proc.send_signal(signum)
    assert_interrupted(box, proc, signum)
    # The whole agent process group was ended before loopctl exited (zombies do not count).
    assert group_members(agent_pid) == []
    assert box.agent_processes() == []
    assert not box.processes()

    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    assert_resume_completes(box)


@pytest.mark.parametrize("signum", SIGNALS)
def test_signal_during_the_tests(sandbox: Any, signum: signal.Signals) -> None:
    box = sandbox
    started, slow = box.root / "tests-started", box.root / "slow-tests"
    slow.touch()
    test_cmd = (
        f"touch {shlex.quote(str(started))}; "
        f"if [ -f {shlex.quote(str(slow))} ]; then sleep 120; fi; "
        f"{python_test_cmd()}"
    )
    box.configure(test_cmd=test_cmd)
    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    proc = box.spawn(*RUN)
    box.wait_for_event("tests.start", proc)
    box.poll(started.exists, "the test command to start")
    (sleeper,) = box.poll(lambda: _sleeping(box), "the slow test command's sleep")

    proc.send_signal(signum)
    assert_interrupted(box, proc, signum)
    # The test command's process group (the shell and its sleep) was ended, and gone, before
    # loopctl exited: nothing to wait for here.
    assert not box.processes(), f"left running: {box.processes()} (the sleep was {sleeper})"

    slow.unlink()
    assert_resume_completes(box)


def test_second_loop_in_the_same_state_dir_is_refused(sandbox: Any) -> None:
    box = sandbox
    box.configure()
    box.script([[{"say": "Thinking for a long time."}, {"sleep": 120}]])
    first = box.spawn(*RUN)
    box.wait_for_event("agent.start", first)
    status = box.status()
    assert (status["running"], status["pid"]) == (True, first.pid)
    names_the_pid = re.compile(rf"\bpid {first.pid}\b")

    for args in (
        ("run", "A different goal", "--json", "--no-plugins"),
        RESUME,
        ("run", "A different goal", "--json", "--no-plugins", "--fresh-state"),
    ):
        second = box.run(*args, timeout=30)
        assert second.returncode == EXIT_USAGE, f"{args}: {second.returncode} {second.stderr}"
        assert names_the_pid.search(second.stderr), f"{args}: {second.stderr}"
        assert second.stdout.strip() == "", f"{args} started a loop: {second.stdout[:500]}"

    # The running loop did not notice: same goal, same pid, one loop.start, still running.
    assert first.poll() is None
    state = box.loop_state()
    assert (state.original_goal, state.pid, state.status) == (GOAL, first.pid, "running")
    assert [e["type"] for e in box.events()].count("loop.start") == 1

    first.send_signal(signal.SIGTERM)
    assert_interrupted(box, first, signal.SIGTERM)
    assert not box.processes()


def test_an_agent_left_running_by_a_killed_loop_is_ended_on_resume(sandbox: Any) -> None:
    """SIGKILL of the loop and its guard at once gives neither a chance to end the agent,
    which lives in its own session: the next loop to take the state directory ends it before
    starting another agent."""
    box = sandbox
    box.configure()
    box.script([[{"say": "Looking."}, {"write": "notes.md", "content": "hi\n"}, {"hang": True}]])
    proc = box.spawn(*RUN)
    box.wait_for_event("agent.start", proc)
    box.poll((box.path / "notes.md").is_file, "the agent's write")
    ((agent_pid, *_rest),) = box.agent_processes()
    box.kill_guard_and_loop(proc)
    assert group_members(agent_pid) != []  # the hung agent survived its loopctl

    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    assert_resume_completes(box)
    assert group_members(agent_pid) == []
    assert any(
        "a killed loop left running" in e.get("message", "")
        for e in box.events()
        if e["type"] == "loop.warning"
    )


def test_progress_of_a_killed_loop_says_it_died_and_resume_makes_it_final(sandbox: Any) -> None:
    """A SIGKILLed loop leaves ``progress.md`` saying ``running``: ``loopctl status`` finds no
    process behind it and says so there too; ``resume`` names what it found, and progress.md
    ends final (``complete``), never the dead run's word."""
    box = sandbox
    box.configure()
    box.script([[{"say": "Looking."}], [{"say": "Thinking."}, {"hang": True}]])
    proc = box.spawn(*RUN)
    second = box.poll(
        lambda: [e for e in box.events() if e["type"] == "agent.start" and e["iteration"] == 2],
        "iteration 2's agent",
    )
    assert second
    progress = box.state_dir / "progress.md"
    box.poll(
        lambda: progress.is_file() and "| 1 | fail |" in progress.read_text("utf-8"),
        "iteration 1's row in progress.md",
    )
    box.kill_loop(proc)
    assert "**Status:** running\n" in progress.read_text("utf-8")

    status = box.status()
    assert status["status"].startswith("running (no process holds the lock: it died")
    text = progress.read_text("utf-8")
    assert (
        "**Status:** died: its loopctl process ended without finishing (killed, or a crash) "
        "after iteration 1; `loopctl resume` continues it\n"
    ) in text
    assert "| 1 | fail |" in text  # the rest is as the loop left it
    assert box.loop_state().status == "running"  # resume still knows what to continue

    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    done = box.run(*RESUME)
    assert done.returncode == 0, f"resume exited {done.returncode}:\n{done.stderr[-3000:]}"
    assert [record["iteration"] for record in box.iterations()] == [1, 2]
    assert "**Status:** complete: the tests pass\n" in progress.read_text("utf-8")
    warnings = [e["message"] for e in box.events() if e["type"] == "loop.warning"]
    assert (
        "the previous run of this loop ended without finishing (killed, or a crash) after "
        "iteration 1; resuming with iteration 2"
    ) in warnings
    assert not box.processes()


# --- what a killed loop left running, descendants that leave their group ---------------------------


@pytest.mark.parametrize("then", ["resume", "run --fresh-state"])
def test_a_test_command_left_running_by_a_killed_loop_is_ended_by_the_next_one(
    sandbox: Any, then: str
) -> None:
    """SIGKILL of the loop and its guard at once gives neither a chance to end the test
    command, which lives in its own session: its process group is recorded like the agent's,
    and the next loop in the state directory ends it first, also one that starts over and
    discards the record."""
    box = sandbox
    started, slow = box.root / "tests-started", box.root / "slow-tests"
    slow.touch()
    box.configure(
        test_cmd=f"touch {shlex.quote(str(started))}; "
        f"if [ -f {shlex.quote(str(slow))} ]; then sleep 120; fi; {python_test_cmd()}"
    )
    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    proc = box.spawn(*RUN)
    box.wait_for_event("tests.start", proc)
    box.poll(started.exists, "the test command to start")
    (sleeper,) = box.poll(lambda: _sleeping(box), "the slow test command's sleep")
    # recorded once the command has started: loopctl writes it right after the spawn returns,
    # which on a loaded machine can be after the command's own first steps
    kind, recorded = box.poll(
        lambda: (found := st.read_running(box.state_dir)) and found[0] == "tests" and found,
        "the test command's process group in running.json",
    )
    assert kind == "tests"
    assert recorded[0] == os.getpgid(sleeper)
    box.kill_guard_and_loop(proc)
    assert group_members(recorded[0]) != []  # the test command survived its loopctl

    slow.unlink()
    if then == "resume":
        assert_resume_completes(box)
        warnings = [e["message"] for e in box.events() if e["type"] == "loop.warning"]
    else:
        done = box.run(*RUN, "--fresh-state")
        assert done.returncode == 0, done.stderr[-3000:]
        warnings = done.stderr.splitlines()
    assert group_members(recorded[0]) == []
    assert any("ended the test command" in w and "killed loop" in w for w in warnings), warnings
    assert not box.processes()


DAEMONIZE = '''\
import os, sys, time
from pathlib import Path


def alive(pid):
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def check(root, who):
    """Record whether every daemon started so far (by earlier agent turns and test runs) is
    gone by the time this process runs."""
    with open(root / "seen.txt", "a") as out:
        for pidfile in sorted(root.glob("daemon-*.pid")):
            state = "alive" if alive(int(pidfile.read_text())) else "gone"
            out.write(f"{who} saw {pidfile.stem} {state}\\n")


def daemonize(pidfile):
    """The classic double fork: a grandchild in a session of its own, its parent gone."""
    if os.fork() == 0:
        os.setsid()
        if os.fork() != 0:
            os._exit(0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        pidfile.with_suffix(".tmp").write_text(str(os.getpid()))
        pidfile.with_suffix(".tmp").rename(pidfile)
        time.sleep(300)
        os._exit(0)
    while not pidfile.exists():
        time.sleep(0.01)
'''

AGENT = (
    DAEMONIZE
    + """
root = Path(sys.argv[1])
sys.stdin.read()
turn = int(os.environ["LOOPCTL_ITERATION"])
check(root, f"turn-{turn}")
if turn >= 2:
    calc = Path("calc.py")
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
daemonize(root / f"daemon-agent-{turn}.pid")
print("done")
"""
)

TESTS = (
    DAEMONIZE
    + """
root = Path(sys.argv[1])
run = len(list(root.glob("daemon-tests-*.pid"))) + 1
check(root, f"tests-{run}")
daemonize(root / f"daemon-tests-{run}.pid")
"""
)


def test_descendants_that_leave_their_group_are_ended_after_each_turn_and_test_run(
    sandbox: Any,
) -> None:
    """An agent and a test command that each leave a double-forked daemon (setsid) behind, the
    way real tools start servers and agents: each is ended when its turn or test run ends, and
    nothing is left after the loop."""
    box = sandbox
    for name, source in (("agent.py", AGENT), ("tests.py", TESTS)):
        (box.root / name).write_text(source)
    root = shlex.quote(str(box.root))
    runner = shlex.quote(sys.executable)
    box.configure(
        test_cmd=f"{runner} {root}/tests.py {root} && {python_test_cmd()}",
        limits={"max_iterations": 3},
        test_first=False,  # it counts the test command's runs from the first turn
    )
    done = box.run(*RUN, "--agent-cmd", f"{runner} {root}/agent.py {root}", timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert not box.processes(), f"left running after the loop: {box.processes()}"
    seen = (box.root / "seen.txt").read_text().splitlines()
    # turn 1, tests 1, turn 2, tests 2: each saw every daemon started before it already gone
    assert len(seen) == 0 + 1 + 2 + 3, seen
    assert all(line.endswith(" gone") for line in seen), seen
    daemons = sorted(p.stem for p in box.root.glob("daemon-*.pid"))
    assert daemons == ["daemon-agent-1", "daemon-agent-2", "daemon-tests-1", "daemon-tests-2"]


def _sleeping(box: Any) -> list[int]:
    """The slow test command's ``sleep 120`` itself (its shell's command line names it too)."""
    return [pid for pid, cmdline in box.processes() if cmdline == "sleep 120"]


# --- a plugin hook that never returns ---------------------------------------------------------------

SLEEPY_PLUGIN = """\
import threading

from loopctl import hookimpl

NEVER = threading.Event()  # never set: the hook waits forever


@hookimpl
def {hook}(loop, **_rest):
    NEVER.wait()
"""


@pytest.mark.parametrize("hook", ["on_loop_start", "on_agent_message"])
def test_a_plugin_hook_that_never_returns_is_stopped_at_the_wall_clock(
    sandbox: Any, hook: str
) -> None:
    """The hook is named (stderr, a ``plugin.hung`` event, the outcome) and the loop ends with
    ``wall_clock`` (exit 16), a report, and no agent left running: it does not hang."""
    box = sandbox
    box.install_plugin("sleepy", SLEEPY_PLUGIN.format(hook=hook))
    box.configure()
    box.script([[{"say": "Looking at calc.py."}, {"sleep": 120}]])
    proc = box.spawn("run", GOAL, "--wall-clock", "3")
    code = proc.wait(timeout=60)
    output = box.output_of(proc)
    assert code == EXIT_CODES["wall_clock"] == 16, f"exit {code}:\n{output}"
    assert f"plugin 'sleepy' is still running its {hook} hook" in output
    (hung,) = [e for e in box.events() if e["type"] == "plugin.hung"]
    assert (hung["plugin"], hung["hook"], hung["wall_clock_s"]) == ("sleepy", hook, 3.0)
    end = box.events()[-1]
    assert (end["type"], end["status"], end["exit_code"]) == ("loop.end", "wall_clock", 16)
    assert "'sleepy'" in end["message"]
    assert hook in end["message"]
    assert box.report()["status"] == "wall_clock"
    assert box.loop_state().status == "wall_clock"
    assert not box.processes()


def _read_until_closed(fd: int) -> None:
    try:
        while os.read(fd, 65536):
            pass
    except OSError:  # closed (EBADF), or the other side went away (EIO)
        pass


@pytest.mark.parametrize("view", ["live", "plain"])
def test_sighup_after_the_terminal_closed_still_stops_gracefully(sandbox: Any, view: str) -> None:
    """The terminal loopctl prints to goes away, then SIGHUP comes (as when a terminal window
    is closed): every write to it would now fail with EIO, yet the stop writes loop.end and
    the report and ends the agent, as for any stop signal."""
    import pty

    box = sandbox
    box.configure()
    box.script([[{"say": "Looking."}, {"write": "notes.md", "content": "hi\n"}, {"hang": True}]])
    if view == "plain":
        box.extra_env["NO_COLOR"] = "1"
    box.extra_env["TERM"] = "xterm-256color"
    controller, terminal = pty.openpty()
    proc = subprocess.Popen(
        box.argv(*RUN[:2], "--no-plugins"),
        cwd=box.path,
        env=box.env(),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=terminal,
        preexec_fn=sigint_as_in_a_terminal(),
    )
    box.spawned.append(proc)
    box.outputs[proc.pid] = box.out_dir / "on-the-terminal"  # (nothing is kept)
    os.close(terminal)
    # the terminal is read while it is there, as a terminal window does: unread, its small
    # buffer fills and loopctl's next write to it blocks (the live view writes often)
    drain = threading.Thread(target=_read_until_closed, args=(controller,), daemon=True)
    drain.start()
    try:
        box.wait_for_event("agent.start", proc)
        box.poll((box.path / "notes.md").is_file, "the agent's write")
    finally:
        os.close(controller)  # the terminal is gone: writes to it fail from now on
        drain.join(timeout=5)
    proc.send_signal(signal.SIGHUP)
    assert_interrupted(box, proc, signal.SIGHUP)
    assert not box.processes()
