"""The guard: the process between a fleet worker and the loop it runs.

    python -m loopctl_fleet.guard --grace 10 -- loopctl run …

The worker starts the guard with a pipe as its standard input and never writes to it: the
pipe is the loop's **lifeline**. When the worker dies, however it dies (SIGKILL, OOM), the
kernel closes the worker's end and the guard reads end-of-file within milliseconds; when the
worker cancels the task it sends SIGTERM. Either way the guard sends the loop SIGTERM (loopctl
then ends its agent and its tests and exits 130), waits ``--grace`` seconds, and SIGKILLs it if
it is still there. The guard owns every process the loop starts (``loopctl.ending_descendants``:
a child subreaper on Linux), so when it exits nothing of the task is left running, not even what
an agent started with ``setsid``: at most one agent works on a task at any moment.

The guard's exit status is the loop's (128 + the signal for a loop ended by one). Its standard
output and error are the loop's: the worker reads the loop's ``--json`` events from them.
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence


class Guard:
    """Runs one loop and ends it when the lifeline breaks or a stop signal comes."""

    def __init__(self, argv: Sequence[str], grace_s: float) -> None:
        self.argv = list(argv)
        self.grace_s = grace_s
        self.exited = threading.Event()
        # a signal handler only writes the signal's number here (no lock is safe in a handler);
        # the watcher thread reads it
        self._wake_r, self._wake_w = os.pipe()

    def on_signal(self, signum: int, _frame: object = None) -> None:
        os.write(self._wake_w, bytes([signum]))

    def run(self) -> int:
        from loopctl import ending_descendants

        with ending_descendants(self.grace_s):
            loop = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL)
            threading.Thread(target=self._watch, args=(loop,), daemon=True).start()
            code = loop.wait()
            self.exited.set()
        return code if code >= 0 else 128 - code

    def _watch(self, loop: subprocess.Popen[bytes]) -> None:
        reason = self._wait_for_stop()
        if self.exited.is_set():
            return
        _say(f"{reason}: ending the loop (pid {loop.pid})")
        _signal(loop, signal.SIGTERM)
        if not self.exited.wait(self.grace_s):
            _say(f"the loop did not end within {self.grace_s:g} s: killing it")
            _signal(loop, signal.SIGKILL)

    def _wait_for_stop(self) -> str:
        """Block until the lifeline closes or a stop signal comes; say which."""
        lifeline = sys.stdin.fileno()
        while True:
            ready, _, _ = select.select([lifeline, self._wake_r], [], [])
            if self._wake_r in ready:
                return signal.Signals(os.read(self._wake_r, 1)[0]).name
            try:
                if not os.read(lifeline, 4096):  # nobody writes to it: only its end matters
                    return "the worker is gone (its lifeline closed)"
            except OSError:
                return "the worker is gone (its lifeline broke)"


def _signal(process: subprocess.Popen[bytes], signum: int) -> None:
    try:
        process.send_signal(signum)
    except OSError:
        pass


def _say(text: str) -> None:
    """Say ``text`` on stderr, if anyone still reads it: a stderr that is a pipe to the dead
    worker (a landing's test output) must not keep the guard from ending the command."""
    try:
        sys.stderr.write(f"loopctl-fleet guard: {text}\n")
        sys.stderr.flush()
    except OSError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m loopctl_fleet.guard",
        description="Run a loop; end it and everything it started when stdin closes or on SIGTERM.",
    )
    parser.add_argument("--grace", type=float, default=10.0, metavar="SECONDS")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the loop's command after --")
    guard = Guard(command, max(args.grace, 0.0))
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, guard.on_signal)
    return guard.run()


if __name__ == "__main__":
    sys.exit(main())
