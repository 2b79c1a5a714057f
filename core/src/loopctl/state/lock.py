"""The state lock: one loop per state directory."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from loopctl.state.layout import LOCK_FILE, StateError

# --- the lock ------------------------------------------------------------------------------------


def _read_lock_info(fd: int) -> dict[str, Any]:
    """Who wrote the lock file: loopctl writes JSON, the bash tool a bare pid."""
    info: dict[str, Any] = {"pid": None, "started_at": None, "hostname": None}
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace")
    except OSError:
        return info
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        pid, started, host = data.get("pid"), data.get("started_at"), data.get("hostname")
        if isinstance(pid, int) and not isinstance(pid, bool):
            info["pid"] = pid
        if isinstance(started, (int, float)) and not isinstance(started, bool):
            info["started_at"] = float(started)
        if isinstance(host, str):
            info["hostname"] = host
    else:
        match = re.search(r"\d{1,10}", text)
        if match:
            info["pid"] = int(match.group())
    return info


def _format_time(epoch: float) -> str | None:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch))
    except (OverflowError, ValueError, OSError):
        return None


class StateLock:
    """One loop per state directory: an exclusive ``flock`` on ``loopctl.lock``.

    The kernel drops a ``flock`` when its holder dies, so a SIGKILLed loop never leaves a stale
    lock; the pid, start time and host written into the file only serve the error message. The
    file is never deleted (deleting lock files lets two processes lock different inodes)."""

    #: How long ``acquire`` keeps trying, so a brief ``holder()`` probe never makes it fail.
    retry_s = 0.2

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = Path(state_dir)
        self.path = self.state_dir / LOCK_FILE
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        fd = self._open()
        self._lock(fd)
        import socket  # here: `loopctl status` reads a lock, it never takes one

        from loopctl.guard import loop_pid  # the process the user started, its guard

        record = {"pid": loop_pid(), "started_at": time.time(), "hostname": socket.gethostname()}
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self._fd = fd

    def _open(self) -> int:
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise StateError(
                f"cannot create the lock file {self.path} ({exc.strerror or exc}); make "
                f"{self.state_dir} writable or use --state-dir"
            ) from None

    def _lock(self, fd: int) -> None:
        """``flock`` ``fd`` within :attr:`retry_s`, or close it and raise :class:`StateError`."""
        deadline = time.monotonic() + self.retry_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(0.01)
                    continue
                info = _read_lock_info(fd)
                os.close(fd)
                raise StateError(self._busy_message(info)) from None
            except OSError as exc:
                os.close(fd)
                raise StateError(
                    f"cannot lock {self.path} ({exc.strerror or exc}); loopctl needs a file "
                    f"system with flock support: use --state-dir to pick a local directory"
                ) from None

    def _busy_message(self, info: Mapping[str, Any]) -> str:
        parts = [f"pid {info['pid']}" if info.get("pid") is not None else "pid unknown"]
        started = info.get("started_at")
        when = _format_time(started) if started is not None else None
        if when:
            parts.append(f"started {when}")
        host = info.get("hostname")
        import socket

        if host and host != socket.gethostname():
            parts.append(f"on host {host}")
        return (
            f"another loop ({', '.join(parts)}) is running in {self.state_dir}; "
            f"stop it or use --state-dir"
        )

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    def holder(self) -> dict[str, Any] | None:
        """``{"pid", "started_at", "hostname"}`` of the loop holding the lock (values may be
        None), or None when no loop holds it. Works from any process, this one included."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _read_lock_info(fd)
            except OSError:
                return None
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None
        finally:
            os.close(fd)

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
