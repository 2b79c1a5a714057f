"""A misbehaving agent for the supervisor's fault tests: ``fake_agent.py MODE [ARG]``.

It speaks the scripted agent's JSON lines (so ScriptedParser reads it) and misbehaves as MODE
says. Every process it starts appends its pid to the file named by $FAKE_PIDFILE, so tests can
prove that none of them outlives the turn.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path


def record_pid() -> None:
    pidfile = os.environ.get("FAKE_PIDFILE")
    if pidfile:
        with open(pidfile, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")


def wait_for_pids(count: int) -> None:
    """Wait until ``count`` processes have recorded their pid, so a child started in the
    background is known to the test before this agent goes on (never a guessed sleep)."""
    pidfile = os.environ.get("FAKE_PIDFILE")
    if not pidfile:
        return
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with open(pidfile, encoding="utf-8") as handle:
                if len(handle.read().split()) >= count:
                    return
        except OSError:
            pass
        time.sleep(0.01)


def line(event: Mapping[str, object], *, flush: bool = True) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    if flush:
        sys.stdout.flush()


RESULT = {
    "type": "result",
    "is_error": False,
    "error_kind": None,
    "message": "",
    "session_id": "s1",
}
INIT = {"type": "init", "session_id": "s1", "model": "fake"}


def sleep_forever() -> None:
    while True:
        time.sleep(60)


def main() -> int:
    record_pid()
    mode = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else ""
    if mode == "ok":
        line(INIT)
        line({"type": "text", "text": "hello"})
        line(RESULT)
    elif mode == "hang_after_result":
        line(INIT)
        line(RESULT)
        sleep_forever()
    elif mode == "hang_mid_stream":
        line(INIT)
        line({"type": "text", "text": "thinking"})
        sleep_forever()
    elif mode == "ignore_sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        line(INIT)
        line(RESULT)
        sleep_forever()
    elif mode == "grandchild":
        # The grandchild inherits stdout and keeps it open long after we exit.
        subprocess.Popen([sys.executable, __file__, "sleeper"])
        wait_for_pids(2)  # the grandchild runs (and holds stdout) before the turn can end
        line(INIT)
        line(RESULT)
        return 0
    elif mode == "daemon":
        # A background helper that does not hold stdout: the agent exits, the helper stays.
        subprocess.Popen(
            [sys.executable, __file__, "sleeper"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_pids(2)  # the helper runs before the turn can end
        line(INIT)
        line(RESULT)
        return 0
    elif mode == "escape":
        # A descendant that leaves the agent's process group, then the agent exits. ARG says
        # how: "setsid" (double-forked into a session of its own, as daemons do) or "setpgid"
        # (a group of its own in the agent's session, exec'd with an empty environment).
        if os.fork() == 0:
            if arg == "setsid":
                os.setsid()
                if os.fork() != 0:
                    os._exit(0)
            else:
                os.setpgid(0, 0)
            record_pid()
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            if arg == "setpgid":
                os.execve(sys.executable, [sys.executable, __file__, "sleeper"], {})
            sleep_forever()
        pidfile = Path(os.environ["FAKE_PIDFILE"])
        while len(pidfile.read_text(encoding="utf-8").split()) < 2:  # the escaped one's pid
            time.sleep(0.01)
        line(INIT)
        line(RESULT)
        return 0
    elif mode == "close_stdout":
        line(INIT)
        sys.stdout.flush()
        os.close(1)
        sleep_forever()
    elif mode == "sleeper":
        sleep_forever()
    elif mode == "block_buffered":
        line(INIT, flush=False)
        line({"type": "text", "text": "buffered"}, flush=False)
        sleep_forever()
    elif mode == "truncated":
        size = int(arg)
        text = json.dumps({"type": "text", "text": "x" * size})
        sys.stdout.write(text[:size])  # cut mid-string, no newline, then exit
        sys.stdout.flush()
    elif mode == "unterminated_result":
        size = int(arg)
        padded = dict(RESULT, message="m" * size)
        sys.stdout.write(json.dumps(padded))  # a complete result line without its newline
        sys.stdout.flush()
    elif mode == "invalid_json_result":
        line(INIT)
        sys.stdout.write('{"type": "result", "is_error": false, "session_id": \n')
        sys.stdout.flush()
    elif mode == "no_result":
        line(INIT)
        line({"type": "text", "text": "about to die"})
        sys.stderr.write("fatal: something broke\n")
        return int(arg or 3)
    elif mode == "noise":
        sys.stdout.write("Loading...\n\x1b[32mgreen\x1b[0m\n")
        sys.stdout.buffer.write(b'\xff\xfe\x00binary\x80\n[1, 2, 3]\n"just a string"\nnull\n')
        sys.stdout.write('{"type": "usage", "usage": "many"}\n{"type": 7}\n')
        line(INIT)
        line(RESULT)
    elif mode == "big_line":
        size = int(arg)
        line(INIT)
        line({"type": "text", "text": "y" * size})
        line(RESULT)
    elif mode == "long_plain_line":
        # SIZE bytes of text on one line, written a MiB at a time, then one short line
        size, piece = int(arg), b"y" * (1 << 20)
        for _ in range(size // len(piece)):
            sys.stdout.buffer.write(piece)
        sys.stdout.buffer.write(b"y" * (size % len(piece)) + b"\nafter\n")
        sys.stdout.flush()
    elif mode == "long_json_line":
        # a text event of about SIZE bytes on one line, streamed, then the result
        size, piece = int(arg), "y" * (1 << 20)
        line(INIT)
        sys.stdout.write('{"type": "text", "text": "')
        for _ in range(size // len(piece)):
            sys.stdout.write(piece)
        sys.stdout.write('"}\n')
        line({"type": "text", "text": "after"})
        line(RESULT)
    elif mode == "stderr_flood":
        sys.stderr.write("e" * int(arg) + "\nLAST STDERR LINE\n")
        sys.stderr.flush()
        line(INIT)
        line(RESULT)
    elif mode == "echo_stdin":
        data = sys.stdin.buffer.read()
        line({"type": "text", "text": f"got {len(data)} bytes"})
        line(RESULT)
    elif mode == "env":
        for name in arg.split(","):
            line({"type": "text", "text": f"{name}={os.environ.get(name, '<unset>')}"})
        line(RESULT)
    elif mode == "chatty":
        line(INIT)
        count = 0
        while True:
            count += 1
            line({"type": "text", "text": f"tick {count}"})
            time.sleep(0.02)
    else:
        sys.stderr.write(f"unknown mode {mode}\n")
        return 64
    return 0


if __name__ == "__main__":
    sys.exit(main())
