"""``running.json``: the process group of the command a loop runs now (its agent, or its test
command), so that a loop taking over from a killed loopctl can end it.

The agent and the test command run in sessions of their own and outlive a loopctl killed with
SIGKILL. The record is written as soon as the command has started, in place: one ``pwrite`` of
a fixed-size record at offset 0, no temp file, no rename, no fsync (a power cut ends every
process anyway). That costs microseconds, where an atomic rewrite of ``loop-state.md`` cost
about a millisecond of the state writer's time per command. A kill cannot tear a single write
this small; a reader that catches another process's write half done sees text that is not JSON
and reads again.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from loopctl.redaction import redact

RUNNING_FILE = "running.json"
#: Every record is padded to this many bytes (the last a newline): a shorter one never leaves
#: the tail of a longer one behind.
RECORD_BYTES = 128
#: What a record may name as running.
KINDS = ("agent", "tests")


class RunningRecord:
    """The writer of ``running.json`` in a state directory (kept open while a loop runs)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = Path(state_dir) / RUNNING_FILE
        self._fd: int | None = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)

    def set(self, kind: str, group: list[int]) -> None:
        """``kind`` (``agent`` or ``tests``) runs in process group ``group`` (``[pgid, start
        time]``, :func:`loopctl.procgroup.process_start_time`)."""
        self._write({"running": kind, "group": group})

    def clear(self) -> None:
        """Nothing runs now."""
        self._write({"running": None, "group": None})

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _write(self, record: dict[str, object]) -> None:
        if self._fd is None:
            return
        data = redact(json.dumps(record, separators=(",", ":"))).encode()
        if len(data) >= RECORD_BYTES:
            raise ValueError(f"a running.json record is too long: {data[:200]!r}")
        os.pwrite(self._fd, data.ljust(RECORD_BYTES - 1) + b"\n", 0)


def read_running(state_dir: Path, *, attempts: int = 3) -> tuple[str, list[int]] | None:
    """``(kind, [pgid, start time])`` of the command ``running.json`` names, or None (nothing
    runs, no such file, or a record this version cannot read). Never raises."""
    path = Path(state_dir) / RUNNING_FILE
    for _ in range(max(1, attempts)):
        try:
            raw = path.read_bytes()[: RECORD_BYTES * 2]
        except OSError:
            return None
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a write half done, or damage: look again
        return _parsed(record)
    return None


def _parsed(record: object) -> tuple[str, list[int]] | None:
    if not isinstance(record, dict):
        return None
    kind, group = record.get("running"), record.get("group")
    if kind not in KINDS or not isinstance(group, list) or len(group) != 2:
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in group):
        return None
    return str(kind), [int(n) for n in group]
