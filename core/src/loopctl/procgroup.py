"""Process groups: the agent and the test command each run in their own, and end as a whole.

Shared by the agent supervisor and the test command runner, so that both tell a live group from
one of zombies the same way.
"""

from __future__ import annotations

import os


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
