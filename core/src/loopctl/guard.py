"""The ``loopctl`` command's process: its guard, and its stop signals outside the loop.

**The guard** (Linux). ``loopctl run``, ``resume`` and ``demo`` split in two as they start,
before any thread or plugin exists (:func:`guard_the_loop`): the process the user started
becomes the *guard*, a child subreaper whose one child is the loop, which goes on to do
everything ``loopctl`` does. The guard waits. Whatever ends the loop, even SIGKILL, every
process the loop started and left behind then comes to the guard (its parent gone, an orphan
goes to the nearest subreaper), and the guard ends them all (SIGTERM, SIGKILL after
:data:`GRACE_S`: :func:`loopctl.procgroup.end_children`) before it exits the way the loop did.
The other way round, the loop dies with the guard: the kernel sends it SIGTERM when the guard
dies (``PR_SET_PDEATHSIG``), and it stops as it does on SIGTERM, ending what it runs. So
``kill -9`` of either process leaves nothing running. It costs nothing per iteration: one
``fork`` when the command starts.

The guard passes the stop signals it gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT) on to the loop,
each as a real-time signal of its own (:data:`PASSED_ON`), so the loop tells a signal passed on
from one it got itself. Sent to the whole process group (Ctrl-C in a terminal, ``kill -TERM
-PGID``, ``timeout``) a signal reaches both, and the guard's copy comes second: the loop takes it
for the same request (:func:`heard`), and a second Ctrl-C is still a second.

**After the loop** (everywhere): a stop signal that comes once the loop has ended, while the
command prints its summary and exits, changes nothing (:func:`quiet_after`): the exit code is
the outcome's, never the signal's.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar, NoReturn

#: The signals that stop a loop (:data:`loopctl.engine.STOP_SIGNALS`).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: How long the processes a dead loop left behind get between SIGTERM and SIGKILL.
GRACE_S = 2.0
#: The real-time signal the guard passes each stop signal on as (none where there are none).
PASSED_ON: dict[int, int] = {
    signum: rtmax - n
    for rtmax in [getattr(signal, "SIGRTMAX", None)]
    if rtmax is not None
    for n, signum in enumerate(STOP_SIGNALS)
}
_STOP_SIGNAL_OF = {passed: signum for signum, passed in PASSED_ON.items()}


class _Loop:
    """What the loop process knows of its guard (nothing, in a process without one)."""

    #: Set by the ``loopctl`` command itself: only its own process may be split.
    own_process = False
    guard: int | None = None
    #: Per stop signal: how many the loop got itself whose copy from the guard has not come.
    unmatched: ClassVar[dict[int, int]] = {}
    #: True while a signal passed on by the guard is handled as the stop signal it stands for.
    passing_on = False


def for_this_process() -> None:
    """Mark this process as the ``loopctl`` command's own (its console script, ``python -m
    loopctl``), which :func:`guard_the_loop` may split and whose stop signals stay handled until
    it exits. Never for a program that calls ``loopctl``'s ``main`` in its own process."""
    _Loop.own_process = True


def loop_pid() -> int:
    """The pid that names this loop to its user (the state's ``pid``, the lock): the process
    they started, the guard, while it lives; else this process."""
    guard = _Loop.guard
    return guard if guard is not None and os.getppid() == guard else os.getpid()


def guard_the_loop() -> None:
    """Split this process into the guard and the loop (see the module's text) and return in
    the loop; the guard never returns. Does nothing but in the ``loopctl`` command's own process
    (:func:`for_this_process`), on Linux, while it has one thread, and once."""
    if not _Loop.own_process or _Loop.guard is not None or not _can_split():
        return
    from loopctl.procgroup import set_subreaper  # here: ctypes costs `--help` milliseconds

    stops: list[int] = [signum for signum in STOP_SIGNALS if _handled(signum)]
    if set_subreaper(True) is None:  # before the fork: an orphan may come at once
        return
    for stream in (sys.stdout, sys.stderr):  # or both processes would print it
        with contextlib.suppress(Exception):
            stream.flush()
    guard = os.getpid()
    passed = [PASSED_ON[signum] for signum in stops]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, stops + passed)  # none lost, none too early
    try:
        loop = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        set_subreaper(False)
        return
    if loop == 0:
        _become_the_loop(guard, stops)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return
    try:
        _guard(loop, stops, mask)
    finally:
        os._exit(70)  # only if the guard itself failed (EX_SOFTWARE): never run the command


def _can_split() -> bool:
    return (
        sys.platform.startswith("linux")
        and hasattr(os, "fork")
        and bool(PASSED_ON)
        and threading.active_count() == 1  # a fork copies only the thread that calls it
    )


def _handled(signum: int) -> bool:
    """False for a signal the process ignores (``nohup``, a background job): it stays so."""
    return signal.getsignal(signum) not in (signal.SIG_IGN, None)


# --- the loop --------------------------------------------------------------------------------


def _become_the_loop(guard: int, stops: list[int]) -> None:
    from loopctl.procgroup import set_parent_death_signal

    _Loop.guard = guard
    for signum in stops:
        signal.signal(PASSED_ON[signum], _passed_on)
    if signal.SIGINT in stops:  # Ctrl-C before the loop runs: KeyboardInterrupt, as before
        signal.signal(signal.SIGINT, _interrupt)
    death = signal.SIGTERM if signal.SIGTERM in stops else next(iter(stops), None)
    if death is None:
        return
    set_parent_death_signal(death)
    if os.getppid() != guard:  # it died before the line above: stop now (nothing runs yet)
        os.kill(os.getpid(), death)


def heard(signum: int) -> None:
    """Note that the loop got stop signal ``signum``: every handler of a stop signal in the loop
    process calls it first. A signal the loop got itself is a request of its own; the guard's
    copy of it, if one comes (the signal went to the whole group), is then no new request.

    A signal the guard passes on always comes after the loop's own copy (both are sent by one
    ``kill`` to the group; the guard passes it on once it has run), so it is matched with the
    one the loop got before it. One the loop alone got (``kill LOOP_PID``) stays unmatched: a
    signal later sent to the guard alone is then taken for its copy. Does nothing without a
    guard."""
    if _Loop.guard is not None and not _Loop.passing_on:
        _Loop.unmatched[signum] = _Loop.unmatched.get(signum, 0) + 1


def _passed_on(passed: int, frame: Any) -> None:
    """A stop signal the guard passed on: the copy of one the loop got itself, or else handled
    as if the loop had got it (by the handler that stop signal has now)."""
    signum = _STOP_SIGNAL_OF[passed]
    if _Loop.unmatched.get(signum, 0) > 0:
        _Loop.unmatched[signum] -= 1
        return
    handler = signal.getsignal(signum)
    if not callable(handler):  # SIG_DFL (SIG_IGN: never passed on)
        os.kill(os.getpid(), signum)
        return
    _Loop.passing_on = True
    try:
        handler(signum, frame)
    finally:
        _Loop.passing_on = False


def _interrupt(signum: int, frame: Any) -> None:
    heard(signum)
    raise KeyboardInterrupt


@contextmanager
def quiet_after(ended: Callable[[], bool]) -> Iterator[None]:
    """In the block, and in the ``loopctl`` command's own process until it exits: a stop signal
    that comes once ``ended()`` is true does nothing (after SIGHUP output leaves the gone
    terminal), so that the exit code stays the outcome's; before that, what it did.

    For the run of a loop: the loop puts back the handlers it found when it ends, and a
    signal then would otherwise end the process by the signal (or raise KeyboardInterrupt)
    after the loop said how it ended."""
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS if _handled(signum)}
    for signum, handler in previous.items():
        signal.signal(signum, functools.partial(_after_the_end, ended, handler))
    try:
        yield
    finally:
        if _Loop.own_process:  # the interpreter's last steps put SIG_DFL back: ignore them then
            atexit.register(_ignore, [*previous, *(PASSED_ON[s] for s in previous if _Loop.guard)])
        else:
            for signum, handler in previous.items():
                signal.signal(signum, handler)


def _ignore(signals: list[int]) -> None:
    for signum in signals:
        signal.signal(signum, signal.SIG_IGN)


def _after_the_end(ended: Callable[[], bool], previous: Any, signum: int, frame: Any) -> None:
    if ended():
        if signum == signal.SIGHUP:
            from loopctl.engine import _leave_the_terminal

            _leave_the_terminal()
        return
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)  # what it would have done
    os.kill(os.getpid(), signum)


# --- the guard -------------------------------------------------------------------------------


def _guard(loop: int, stops: list[int], mask: Any) -> NoReturn:
    """Pass the stop signals on to ``loop`` until it exits, end what it left, exit as it did."""
    from loopctl.procgroup import end_children

    passing = [True]

    def pass_on(signum: int, frame: Any) -> None:
        if passing:  # the loop's pid is its own until it is reaped below
            with contextlib.suppress(OSError):
                os.kill(loop, PASSED_ON[signum])

    for signum in stops:
        signal.signal(signum, pass_on)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    _wait_for_exit(loop)
    passing.clear()
    _, status = os.waitpid(loop, 0)
    end_children(GRACE_S)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        _exit_by_signal(-code)
    os._exit(code)


def _wait_for_exit(loop: int) -> None:
    """Wait until ``loop`` has exited, leaving it unreaped; reap any other child meanwhile (an
    orphan that came while the loop was not a subreaper itself, and died)."""
    while True:
        info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        if info is None or info.si_pid == loop:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)


def _exit_by_signal(signum: int) -> NoReturn:
    """End this process by ``signum``, as the loop ended (its caller sees the same status); no
    core file: the loop's would be the one to look at."""
    with contextlib.suppress(Exception):
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    with contextlib.suppress(OSError, ValueError):
        signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
        os.kill(os.getpid(), signum)
    os._exit(128 + signum)
