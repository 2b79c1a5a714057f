"""Run the test command once and report what happened as a :class:`~loopctl.model.TestRun`.

The command runs through ``/bin/sh -c`` in a process group of its own, so that everything it
starts (test workers, a server a test forgot to stop, ``sleep 1000 &``) can be ended together:
on a timeout, on Ctrl-C, and after a normal exit, because a leftover process would otherwise
hold files or ports into the next iteration. Output is read as it comes and kept bounded.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from loopctl.debuglog import debug
from loopctl.fingerprints import fingerprint
from loopctl.model import TestRun
from loopctl.procgroup import (
    GONE_AFTER_KILL_S,
    SUPERVISOR_ENV,
    deferred_interrupts,
    end_escaped,
    group_alive,
    set_running,
    signal_group,
    supervisor_token,
    wait_group_gone,
)
from loopctl.testreport import ReportPlan, discard_report, plan_report, read_results
from loopctl.withhold import child_environment

#: How many error lines a TestRun carries at most (the extractor's bound).
_MAX_ERROR_LINES = 40
#: Lines shown from the end of the output when the extractor found nothing decisive.
_TAIL_LINES = 5
_READ_SIZE = 65536
#: Reads per wake-up, so that a command that never stops printing cannot starve the timeout.
_READS_PER_WAKE = 32
_POLL_S = 0.05
#: After the command exits, output still readable is collected for at most this long.
_DRAIN_S = 0.5
#: Python's bytecode caches (and pytest's rewritten-assertion caches) are trusted when the
#: source's size and whole-second mtime match: an agent's same-size fix made within the second
#: of the last test run would be tested as the old code. So the tests write none, unless the
#: environment or ``[env]`` says otherwise (``PYTHONDONTWRITEBYTECODE=""`` turns this off).
_FRESH_SOURCES = {"PYTHONDONTWRITEBYTECODE": "1"}
#: Exit codes a shell uses when a command cannot be run.
_CANNOT_EXECUTE, _NOT_FOUND = 126, 127


class _BoundedCapture:
    """Keeps the first 20% and the last 80% of ``limit`` bytes of a stream of any length."""

    def __init__(self, limit: int) -> None:
        self.limit = max(limit, 0)
        self.head_limit = self.limit // 5
        self.tail_limit = self.limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk and self.tail_limit > 0:
            self.tail += chunk
            if len(self.tail) > 2 * self.tail_limit:  # trim in batches, not on every chunk
                del self.tail[: -self.tail_limit]

    def text(self) -> str:
        if self.total <= self.limit:  # nothing cut: decode as one, so no character is split
            return bytes(self.head + self.tail).decode("utf-8", errors="replace")
        head = bytes(self.head).decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        omitted = self.total - len(self.head) - len(tail)
        marker = f"\n... [{omitted} bytes omitted] ...\n"
        return head + marker + tail.decode("utf-8", errors="replace")


class _Runner:
    """One run of the command: its process, its output, and the ending of its group."""

    def __init__(self, process: subprocess.Popen[bytes], capture: _BoundedCapture) -> None:
        self.process = process
        self.capture = capture
        self.pgid = process.pid  # start_new_session: the shell leads its own group
        assert process.stdout is not None
        self.fd = process.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd, selectors.EVENT_READ)
        self.eof = False
        #: Readable once the command has exited (Linux pidfd), so no wait is a fixed tick.
        self.exit_fd = _exit_fd(process.pid)
        if self.exit_fd is not None:
            self.selector.register(self.exit_fd, selectors.EVENT_READ)
        set_running(self.pgid, True)

    def read_available(self, wait_s: float) -> None:
        """Wait up to ``wait_s`` for output, then read everything that is there."""
        if self.eof:
            self._wait_exit(wait_s)
            return
        ready = {key.fd for key, _ in self.selector.select(timeout=max(wait_s, 0))}
        if self.exit_fd in ready:  # exited: stays readable, so stop watching it
            self.selector.unregister(self.exit_fd)
        if self.fd not in ready:
            return
        for _ in range(_READS_PER_WAKE):
            try:
                chunk = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                self.eof = True
                return
            if not chunk:
                self.eof = True
                return
            self.capture.feed(chunk)

    def _wait_exit(self, wait_s: float) -> None:
        """All output is read: wait up to ``wait_s`` for the command's exit itself."""
        if wait_s <= 0 or self.process.poll() is not None:
            return
        if self.exit_fd is not None:
            select.select([self.exit_fd], [], [], wait_s)
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=wait_s)

    def wait(self, deadline: float) -> bool:
        """Read output until the command exits; False if ``deadline`` came first."""
        while self.process.poll() is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.read_available(remaining if remaining < _POLL_S else _POLL_S)  # NaN: _POLL_S
        drain_until = time.monotonic() + _DRAIN_S
        while not self.eof and time.monotonic() < drain_until:
            before = self.capture.total
            self.read_available(0)
            if self.capture.total == before:
                break  # nothing more right now; a lingering grandchild may hold the pipe open
        return True

    def end_group(self, grace_s: float) -> None:
        """SIGTERM the group, give it ``grace_s`` to go (reading its output), then SIGKILL and
        wait until it is gone; then end the descendants that left the group."""
        if self.process.poll() is None or group_alive(self.pgid):
            try:
                signal_group(self.pgid, signal.SIGTERM)
                give_up = time.monotonic() + grace_s
                while time.monotonic() < give_up:
                    self.read_available(_POLL_S)
                    if self.process.poll() is not None and not group_alive(self.pgid):
                        break
            finally:  # also when interrupted while waiting: no more patience
                with deferred_interrupts():  # and no interrupting the rest: it ends them
                    signal_group(self.pgid, signal.SIGKILL)
                    try:
                        self.process.wait(timeout=GONE_AFTER_KILL_S)
                    except subprocess.TimeoutExpired:  # unkillable (D state): do not hang on it
                        pass
                    # SIGKILL is delivered asynchronously: the members may take a moment to die.
                    wait_group_gone(self.pgid, GONE_AFTER_KILL_S)
        with deferred_interrupts():
            end_escaped(self.pgid, grace_s)

    def close(self) -> None:
        set_running(self.pgid, False)
        self.selector.close()
        if self.exit_fd is not None:
            os.close(self.exit_fd)
        if self.process.stdout is not None:
            self.process.stdout.close()


def _exit_fd(pid: int) -> int | None:
    """A file descriptor that becomes readable when ``pid`` exits, where the system has them."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # not Linux, an old kernel, or seccomp says no
        return None


def _exit_status(returncode: int) -> int:
    """Python reports death by signal N as -N; shells say 128+N, and so does loopctl."""
    return 128 - returncode if returncode < 0 else returncode


def _cannot_start(command: str, cwd: Path, error: Exception, duration_s: float) -> TestRun:
    if not cwd.is_dir():
        reason = f"the working directory {cwd} does not exist"
    else:
        reason = str(error) or type(error).__name__
    line = f"loopctl: cannot start the test command: {reason}"
    code = _CANNOT_EXECUTE if isinstance(error, PermissionError) else _NOT_FOUND
    return TestRun(
        command=command,
        exit_code=code,
        duration_s=duration_s,
        output=line + "\n",
        error_lines=[line],
        fingerprint=fingerprint([line]),
    )


def _tail_lines(output: str) -> list[str]:
    lines = [line.strip()[:500] for line in output.splitlines()[-50:] if line.strip()]
    return lines[-_TAIL_LINES:]


#: Words that start a shell construct rather than name a program.
_SHELL_WORDS = frozenset(
    {"!", "{", "}", "[[", "]]", "case", "do", "done", "elif", "else", "esac", "fi", "for"}
    | {"function", "if", "in", "select", "then", "time", "until", "while"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def first_program(command: str) -> str | None:
    """The program a shell command line starts with (``pytest`` in ``CI=1 pytest -q && x``),
    or None when it does not start with a plain word: a subshell, a variable, a glob, a
    keyword, a redirection, or quotes that do not close. Only the shell can tell those."""
    lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        for token in lexer:
            if _ASSIGNMENT.match(token):
                continue  # VAR=value before the program
            if token in _SHELL_WORDS or not token or set(token) <= set("();<>|&"):
                return None
            return None if any(char in token for char in "$`*?[~") else token
    except ValueError:
        return None
    return None


def missing_program(command: str, *, cwd: Path, env: Mapping[str, str] | None = None) -> str | None:
    """The program ``command`` starts with (:func:`first_program`) if ``/bin/sh`` cannot find
    it in ``cwd`` with ``env``: not a builtin, a function, a file on ``PATH`` or the path of a
    file. None when it is found, or when only running the command can tell."""
    program = first_program(command)
    if program is None:
        return None
    try:
        found = subprocess.run(
            ["/bin/sh", "-c", 'command -v -- "$1" >/dev/null 2>&1', "sh", program],
            cwd=cwd,
            env=None if env is None else dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return None  # the run itself will say what is wrong
    return program if found.returncode != 0 else None


def run_test_command(
    command: str,
    *,
    cwd: Path,
    timeout_s: float,
    output_limit: int = 1_000_000,
    env: Mapping[str, str] | None = None,
    kill_grace_s: float = 2.0,
    base_env: Mapping[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
    report: str | None = None,
    ask_pytest: bool = False,
) -> TestRun:
    """Run ``command`` with ``/bin/sh -c`` in ``cwd`` and report the result. Never raises, except
    that a KeyboardInterrupt ends the command's whole process group and is then re-raised.

    ``env`` adds variables to ``base_env`` (default: the inherited environment without the
    withheld variables, :func:`loopctl.withhold.child_environment`). stdin is
    closed; stdout and stderr are merged and kept up to ``output_limit`` bytes (the first 20%
    and the last 80%, with a ``... [N bytes omitted] ...`` line between). After ``timeout_s`` the process group gets
    SIGTERM, then SIGKILL after ``kill_grace_s``; the run is ``timed_out`` with no exit code.
    Processes the command left behind are ended the same way when it exits, and those that
    left its group where loopctl is a subreaper (:func:`loopctl.procgroup.end_escaped`).
    ``on_start`` is called with the command's process group id once it runs (the engine
    records it, so a loop that takes over from a killed one can end a command left running).
    ``report`` (the ``test_report`` setting) and ``ask_pytest`` (loopctl may add
    ``--junitxml`` to a pytest command) say where the runner's own report is read from
    (:func:`loopctl.testreport.plan_report`); the output is read when there is none.
    """
    started = time.monotonic()
    cwd = Path(cwd)
    full_env = {
        **_FRESH_SOURCES,
        **(child_environment() if base_env is None else base_env),
        **(env or {}),
        SUPERVISOR_ENV: supervisor_token(),  # how its escaped descendants are known
    }
    capture = _BoundedCapture(output_limit)
    plan = plan_report(command, cwd=cwd, report=report, ask_pytest=ask_pytest, env=full_env)
    runner: _Runner | None = None
    debug("loopctl.tests", "running the test command in %s: /bin/sh -c %r", cwd, plan.command)
    try:
        with deferred_interrupts():  # Ctrl-C now would lose the started process: not yet
            try:
                process = subprocess.Popen(
                    ["/bin/sh", "-c", plan.command],
                    cwd=cwd,
                    env=full_env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except (OSError, ValueError, subprocess.SubprocessError) as error:
                discard_report(plan)
                return _cannot_start(command, cwd, error, time.monotonic() - started)
            runner = _Runner(process, capture)
            if on_start is not None:
                on_start(runner.pgid)
        finished = runner.wait(started + timeout_s)
        runner.end_group(kill_grace_s)
        runner.read_available(0)  # what the ended processes wrote on their way out
    except BaseException:  # Ctrl-C (or anything else): leave no process behind, then go on up
        if runner is not None:
            runner.end_group(min(kill_grace_s, 0.5))
        discard_report(plan)
        raise
    finally:
        if runner is not None:
            runner.close()
    duration_s = time.monotonic() - started

    returncode = process.returncode
    exit_code = _exit_status(returncode) if finished and returncode is not None else None
    debug("loopctl.tests", "the test command ended: exit %s after %.1f s", exit_code, duration_s)
    try:
        return _test_run(
            command, capture.text(), exit_code, not finished, duration_s, timeout_s, plan
        )
    finally:
        discard_report(plan)


def _test_run(
    command: str,
    output: str,
    exit_code: int | None,
    timed_out: bool,
    duration_s: float,
    timeout_s: float,
    plan: ReportPlan | None = None,
) -> TestRun:
    found, note = read_results(output, plan, max_lines=_MAX_ERROR_LINES)
    run = TestRun(
        command=command,
        exit_code=exit_code,
        duration_s=duration_s,
        timed_out=timed_out,
        output=f"{output.rstrip(chr(10))}\n{note}\n" if note else output,
        runner=found.runner,
        passed_count=found.passed_count,
        failed_count=found.failed_count,
    )
    if run.passed:
        return run
    error_lines = found.error_lines or _tail_lines(output)
    if timed_out:
        error_lines = [f"loopctl: the test command timed out after {timeout_s:g} s", *error_lines]
    elif not error_lines:
        error_lines = [f"loopctl: the test command exited with code {exit_code} and no output"]
    run.error_lines = error_lines[:_MAX_ERROR_LINES]
    run.failing_tests = found.failing_tests
    run.fingerprint = fingerprint(run.error_lines)
    return run


__all__ = ["first_program", "missing_program", "run_test_command"]
