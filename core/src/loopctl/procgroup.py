"""Process groups: the agent and the test command each run in their own, and end as a whole.

Shared by the agent supervisor and the test command runner, so that both tell a live group from
one of zombies the same way, wait the same way for a group they ended to be gone, and end the
same way the descendants that left the group (``setsid``) and came back to loopctl, a child
subreaper on Linux (:func:`set_subreaper`, :func:`end_escaped`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


def group_members(pgid: int) -> list[int]:
    """Pids of the live (non-zombie) processes in process group ``pgid``, read from /proc.

    Empty where /proc is not available. Tests use it to prove no process outlives its turn.
    """
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat.rpartition(b")")[2].split()
        if len(fields) < 3:
            continue
        state, group = fields[0], fields[2]
        if state in (b"Z", b"X", b"x"):
            continue
        if group.isdigit() and int(group) == pgid:
            members.append(int(entry))
    return members


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process is in the group.

    ``killpg(pgid, 0)`` alone is not enough: killed grandchildren stay zombies until init reaps
    them, and some container inits never do.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return bool(group_members(pgid)) if os.path.isdir("/proc/self") else True


def signal_group(pgid: int, signum: int) -> None:
    """Send ``signum`` to the group; a group that is gone (or not ours) is no error."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


#: How long a group (or an escaped process) that got SIGKILL may take to be gone. SIGKILL cannot
#: be caught, but on a loaded machine the killed processes may wait a while for a CPU to die on;
#: only a process stuck in the kernel (state D) outlasts this.
GONE_AFTER_KILL_S = 10.0
_TICK_S = 0.01


def wait_group_gone(pgid: int, timeout_s: float) -> bool:
    """Wait until no live process is left in group ``pgid`` (at most ``timeout_s``); True if so."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(_TICK_S)
    return True


def process_start_time(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux), or None: with the
    pid it identifies a process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        return int(stat.rpartition(b")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def end_orphaned_group(pgid: int, start_time: int | None) -> bool:
    """SIGKILL the process group an earlier, killed loopctl left running, if its leader is still
    the same process (same start time), and wait until the group is gone. True if it was ended."""
    if start_time is None or process_start_time(pgid) != start_time:
        return False
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        return False
    wait_group_gone(pgid, GONE_AFTER_KILL_S)
    return True


# --- interrupts while a process starts -----------------------------------------------------------


class _Held:
    """The main thread's interrupt held back while a process starts (see deferred_interrupts)."""

    depth = 0
    pending: BaseException | None = None


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold back the interrupts loopctl's own signal handlers raise (:func:`interrupt`) until the
    block ends, and raise the first of them then.

    For the moment a process is started: an interrupt raised inside ``subprocess.Popen`` after
    the fork would lose the process, running, with nobody left to end it. Put the block inside
    the ``try`` that ends the process, and the interrupt arrives where it can be handled.
    """
    if not _on_main_thread():
        yield
        return
    _Held.depth += 1
    try:
        yield
    finally:
        _Held.depth -= 1
        if _Held.depth == 0 and _Held.pending is not None:
            pending, _Held.pending = _Held.pending, None
            raise pending


def interrupt(exc: BaseException) -> None:
    """Raise ``exc`` now, or when the :func:`deferred_interrupts` block the main thread is in
    ends (a signal handler's way to interrupt the loop)."""
    if _Held.depth > 0 and _on_main_thread():
        if _Held.pending is None:
            _Held.pending = exc
        return
    raise exc


# --- descendants that leave the group --------------------------------------------------------------

#: Every command loopctl supervises (the agent, the test command) gets this variable, naming the
#: loopctl process; its descendants inherit it, so one that left the group is still known as
#: one of them.
SUPERVISOR_ENV = "LOOPCTL_SUPERVISOR"
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
_PR_SET_PDEATHSIG = 1


def supervisor_token() -> str:
    """The value of :data:`SUPERVISOR_ENV` for this process: its pid and start time.

    Read from /proc once per process (a forked child has its own): it never changes, and
    reading a many-threaded process's stat costs a fraction of a millisecond every time a
    command starts."""
    pid = os.getpid()
    known = _token.get(pid)
    if known is None:
        known = _token[pid] = f"{pid}.{process_start_time(pid) or 0}"
    return known


_token: dict[int, str] = {}


@functools.lru_cache(maxsize=1)
def _prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def is_subreaper() -> bool:
    """True if this process is a child subreaper (Linux's ``PR_SET_CHILD_SUBREAPER``)."""
    prctl = _prctl()
    if prctl is None:
        return False
    value = ctypes.c_int(0)
    return prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0) == 0 and bool(value.value)


def set_subreaper(on: bool) -> bool | None:
    """Make this process a child subreaper (or stop being one) and return the previous setting;
    None where the platform has no such thing (then only process groups are ended).

    A subreaper is where orphaned descendants go instead of init: a grandchild of the agent
    that called ``setsid`` and whose parent exited becomes loopctl's child, so loopctl can find
    it, end it and reap it (:func:`end_escaped`)."""
    prctl = _prctl()
    if prctl is None:
        return None
    previous = is_subreaper()
    if prctl(_PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        return None
    return previous


def set_parent_death_signal(signum: int) -> bool:
    """Have the kernel send this process ``signum`` when its parent dies (Linux's
    ``PR_SET_PDEATHSIG``; not inherited by its children); False where that is not possible."""
    prctl = _prctl()
    return prctl is not None and prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0


def _stat(pid: int) -> tuple[bytes, int, int] | None:
    """``(state, parent pid, session)`` of ``pid`` from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rpartition(b")")[2].split()
        return fields[0], int(fields[1]), int(fields[3])
    except (OSError, ValueError, IndexError):
        return None


def _carries(pid: int, marker: bytes) -> bool:
    """True if ``pid`` was started with ``marker`` (``NAME=value``) in its environment."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
    except OSError:  # a zombie, or a process that changed its user
        return False
    return environ.startswith(marker + b"\0") or b"\0" + marker + b"\0" in environ


#: Leaders of the supervised commands running now: never mistaken for escaped ones.
_running: set[int] = set()


def set_running(pid: int, running: bool) -> None:
    """Mark ``pid``, an agent or a test command loopctl started, as running (from its start
    until it is reaped) or not; :func:`end_escaped` never takes it for an escaped one."""
    if running:
        _running.add(pid)
    else:
        _running.discard(pid)


def _has_children() -> bool:
    """True if this process has a child, running or exited (nothing is reaped): without one,
    no /proc scan is needed."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):  # no waitid: scan to find out
        return True
    return True


def _child_pids() -> list[int]:
    """The pids of this process's children, from each thread's ``/proc/self/task/*/children``
    (a kernel without that file: every pid in ``/proc``, for the caller to filter)."""
    try:
        threads = os.listdir("/proc/self/task")
        return [
            int(pid) for tid in threads for pid in _read(f"/proc/self/task/{tid}/children").split()
        ]
    except OSError:  # no such file (CONFIG_PROC_CHILDREN off), or /proc not mounted
        pass
    try:
        return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks).decode("ascii")
    finally:
        os.close(fd)


def _session(pid: int) -> int | None:
    """The session of ``pid`` (a system call: no /proc read, which can wait for a process
    that is starting), or None if it is gone."""
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _foreign_children() -> list[tuple[int, bool, int]]:
    """``(pid, is_zombie, session)`` of this process's children in a session other than its
    own (what loopctl and its plugins start with a plain ``Popen`` is never among them), but
    for the supervised commands running now."""
    me, own_session = os.getpid(), os.getsid(0)
    found: list[tuple[int, bool, int]] = []
    for pid in _child_pids():
        if pid in _running or _session(pid) == own_session:
            continue  # ours (a plain Popen, git): its /proc entry need not be read
        stat = _stat(pid)
        if stat is None or stat[1] != me or stat[2] == own_session or pid in _running:
            continue
        found.append((pid, stat[0] in (b"Z", b"X", b"x"), stat[2]))
    return found


def end_escaped(session: int | None, grace_s: float) -> list[int]:
    """End and reap the descendants of a supervised command that left its process group and
    were handed to this process (a subreaper) when their parent exited.

    Those are this process's children (outside its own session) that are in the command's
    ``session``, or were started with this process's :data:`SUPERVISOR_ENV` (one that left
    the session too, with ``setsid``), or share a session with one of those (its exited
    parent, a zombie). Each gets SIGTERM (its whole group, when it leads one), SIGKILL after
    ``grace_s``, and is reaped; their own children come to this process in turn and are ended
    the same way. Returns the pids reaped. Does nothing unless this process is a subreaper
    (:func:`set_subreaper`); a descendant that cleared its environment and left the session
    is not recognised.
    """
    if not is_subreaper() or not _has_children():
        return []
    marker = f"{SUPERVISOR_ENV}={supervisor_token()}".encode()
    sessions = set() if session is None else {session}

    def escaped(signalled: dict[int, float]) -> list[tuple[int, bool]]:
        children = _foreign_children()
        for pid, zombie, sid in children:
            if not zombie and sid not in sessions and _carries(pid, marker):
                sessions.add(sid)
        return [(p, z) for p, z, sid in children if sid in sessions or p in signalled]

    return _end_and_reap(escaped, grace_s)


def end_children(grace_s: float) -> list[int]:
    """End and reap every child of this process: SIGTERM (to the group a child leads, else to
    the child), SIGKILL after ``grace_s``. In a subreaper (:func:`set_subreaper`) the children's
    own descendants come to it as their parents die and are ended in turn, so nothing this
    process started, however deep or whichever session it moved to, is left. Returns the pids
    reaped."""
    me = os.getpid()

    def children(signalled: dict[int, float]) -> list[tuple[int, bool]]:
        found = []
        for pid in _child_pids():
            stat = _stat(pid)
            if stat is not None and stat[1] == me:
                found.append((pid, stat[0] in (b"Z", b"X", b"x")))
        return found

    return _end_and_reap(children, grace_s)


def _end_and_reap(
    select: Callable[[dict[int, float]], list[tuple[int, bool]]], grace_s: float
) -> list[int]:
    """Signal and reap the children ``select`` names (``(pid, is_zombie)``; it is given the
    pids signalled so far, with when) until it names none, or the grace and
    :data:`GONE_AFTER_KILL_S` have passed."""
    signalled: dict[int, float] = {}
    reaped: list[int] = []
    give_up = time.monotonic() + max(grace_s, 0.0) + GONE_AFTER_KILL_S
    while True:
        chosen = select(signalled)
        if not chosen:
            return reaped
        now = time.monotonic()
        for pid, zombie in chosen:
            if not zombie:
                first = signalled.setdefault(pid, now)
                if first == now:
                    _signal_escaped(pid, signal.SIGTERM)
                elif now - first >= grace_s:
                    _signal_escaped(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # a child's pid: not reused till reaped
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    reaped.append(pid)
        if now >= give_up:
            return reaped
        time.sleep(_TICK_S)


def _signal_escaped(pid: int, signum: int) -> None:
    """Signal ``pid``, a child of ours (so its pid cannot be reused before we reap it), and
    the group it leads, if it leads one."""
    with contextlib.suppress(OSError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
            return
    with contextlib.suppress(OSError):
        os.kill(pid, signum)


@contextmanager
def ending_descendants(grace_s: float) -> Iterator[bool]:
    """Own every process started inside the block, and all their descendants, whichever group
    or session they move to: on Linux this process becomes a child subreaper, so a descendant
    whose parent dies comes to it; leaving the block ends and reaps every child still there
    (:func:`end_children`: SIGTERM, SIGKILL after ``grace_s``). Yields True where descendants
    are caught so; False where the platform has no subreaper (only the direct children, and
    the groups they lead, are ended then).

    For a process that stands between a scheduler and a loop (``loopctl fleet``'s guard): once
    it leaves the block, nothing the loop started is left running, even if the loop itself was
    killed with SIGKILL.

    .. versionadded:: 0.3
    """
    previous = set_subreaper(True)
    try:
        yield previous is not None
    finally:
        end_children(grace_s)
        if previous is False:
            set_subreaper(False)
