"""Runs one agent turn as a supervised process and turns whatever happens into a TurnResult.

Agent CLIs misbehave in every way a process can: they hang after printing their result, stop
talking mid-stream, ignore SIGTERM, leave grandchildren holding the stdout pipe, print 10 MB on one
line or garbage instead of JSON. The supervisor owns all of that so adapters only parse lines.

Guarantees of :func:`run_turn`:

* the agent runs in its own process group, and that whole group is ended when the turn ends
  (SIGTERM, then SIGKILL after ``kill_after_s``), and gone before :func:`run_turn` returns;
  where loopctl is a subreaper (Linux), descendants that left the group are ended too
  (:func:`loopctl.procgroup.end_escaped`): no orphan processes survive a turn;
* every turn ends: wall-clock and idle timeouts (of any size: inf, NaN and 1e300 mean none), a
  grace period after the result line, and a grace period for a pipe held open by a grandchild
  after the agent itself exited;
* nothing the agent prints makes it raise: bad output becomes an outcome, never an exception.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, TypeGuard

import attrs

from loopctl.agents.base import (
    AgentAdapter,
    Invocation,
    MessageCallback,
    StreamParser,
    TurnRequest,
)
from loopctl.debuglog import debug
from loopctl.model import Decision, ErrorKind, TurnOutcome, TurnResult
from loopctl.procgroup import (
    GONE_AFTER_KILL_S,
    SUPERVISOR_ENV,
    deferred_interrupts,
    end_escaped,
    group_alive,
    set_running,
    signal_group,
    supervisor_token,
)
from loopctl.redaction import StreamRedactor, redact
from loopctl.withhold import child_environment

_READ_CHUNK = 1 << 16
#: How often process exit is polled when the platform has no pidfd to wait on.
_POLL_TICK_S = 0.05
#: How often group membership is checked while waiting for a signalled group to die.
_REAP_TICK_S = 0.01
#: The longest single wait in select(): epoll and poll take milliseconds in a C int, so a
#: timeout of 1e7 s (or inf) cannot be passed as it is; a longer wait wakes up and waits again.
_MAX_WAIT_S = 3600.0


@attrs.define
class Supervision:
    """Time and size limits for one turn. ``None`` disables a timeout."""

    #: Wall clock per turn.
    timeout_s: float | None = 1800.0
    #: No stdout bytes for this long ends the turn (unless the result line was already seen).
    idle_timeout_s: float | None = 300.0
    #: How long the process may linger after its result line, after it exited while a grandchild
    #: still holds stdout, or after it closed stdout without exiting.
    grace_s: float = 2.0
    #: SIGTERM, then this long, then SIGKILL (to the whole process group).
    kill_after_s: float = 3.0
    #: Bytes of stderr kept (the tail).
    stderr_limit: int = 65536
    #: A stdout line longer than this is cut as it streams (memory guard): its first
    #: ``max_line_bytes`` still go to the parser, the rest up to the newline is discarded.
    max_line_bytes: int = 16 * 1024 * 1024
    #: Bytes of stdout written to the transcript (its start); what comes after is counted, not
    #: written, and a last line in the file says how much was cut. None: no cap.
    transcript_limit: int | None = 5_000_000


def run_turn(
    adapter: AgentAdapter,
    request: TurnRequest,
    *,
    on_message: MessageCallback | None = None,
    supervision: Supervision | None = None,
    transcript: Path | None = None,
    env: Mapping[str, str] | None = None,
    on_start: Callable[[int], None] | None = None,
) -> TurnResult:
    """Run one agent turn to its end and return what the adapter's parser made of it.

    The child environment is ``env`` (default: ``os.environ`` without the withheld variables,
    :func:`loopctl.withhold.child_environment`), then the invocation's ``env``,
    then the adapter settings' ``env`` (the user's word wins); a ``None`` value removes a
    variable. Raw stdout is appended to ``transcript`` when given. A message for which
    ``on_message`` returns a :class:`~loopctl.model.Decision` ends the turn there.
    ``on_start`` is called with the agent's process group id once it runs (the engine records
    it, so a loop that takes over from a killed one can end an agent left running).
    A CLI that printed nothing on stdout and failed with an option parser's refusal on stderr
    (:meth:`AgentAdapter.rejected_command_line`) ends the turn with outcome ``USAGE``.

    Raises only what the adapter's ``invocation`` raises for bad settings (``ValueError``), what
    ``on_message`` raises, and ``KeyboardInterrupt`` (after ending the process group).
    """
    limits = supervision if supervision is not None else Supervision()
    invocation = adapter.invocation(request)
    parser = adapter.new_parser()
    started = time.monotonic()
    child_env = _child_env(env, invocation, adapter)
    child_env[SUPERVISOR_ENV] = supervisor_token()  # how its escaped descendants are known
    turn: _SupervisedTurn | None = None
    try:
        with deferred_interrupts():  # Ctrl-C now would lose the started process: not yet
            proc_or_error = _start(adapter, request, invocation, child_env)
            if isinstance(proc_or_error, str):
                return TurnResult(
                    outcome=TurnOutcome(ErrorKind.CRASHED, proc_or_error),
                    started=False,
                    duration_s=time.monotonic() - started,
                )
            turn = _SupervisedTurn(
                proc_or_error, parser, on_message, limits, transcript, started, invocation.stdin
            )
            if on_start is not None:
                on_start(proc_or_error.pid)
    except BaseException:
        if turn is not None:
            turn.abandon()
        raise
    result = turn.run(adapter.name)
    if not turn.stdout_seen and result.exit_code not in (None, 0) and not result.interrupted:
        rejected = _rejected_command_line(adapter, result.stderr_tail, invocation.argv)
        if rejected:
            result.outcome = TurnOutcome(ErrorKind.USAGE, rejected)
    return result


def _rejected_command_line(adapter: AgentAdapter, stderr: str, argv: list[str]) -> str | None:
    """The adapter's usage error for a CLI that refused its command line (None: it did not, or
    the adapter's check failed: then the parser's outcome stands)."""
    try:
        found = adapter.rejected_command_line(stderr, [os.fspath(arg) for arg in argv])
    except Exception:  # noqa: BLE001 - a third-party adapter's check must not end the turn
        return None
    return found if isinstance(found, str) else None


def _child_env(
    base: Mapping[str, str] | None, invocation: Invocation, adapter: AgentAdapter
) -> dict[str, str]:
    merged = dict(child_environment() if base is None else base)
    settings_env = getattr(getattr(adapter, "settings", None), "env", None)
    layers: list[Mapping[str, str | None]] = [invocation.env or {}]
    if isinstance(settings_env, Mapping):
        layers.append(settings_env)
    for layer in layers:
        for name, value in layer.items():
            if value is None:
                merged.pop(str(name), None)
            else:
                merged[str(name)] = str(value)
    return merged


def _start(
    adapter: AgentAdapter,
    request: TurnRequest,
    invocation: Invocation,
    child_env: dict[str, str],
) -> subprocess.Popen[bytes] | str:
    """Start the agent in a new session (own process group), or say why it cannot start."""
    argv = [os.fspath(arg) for arg in invocation.argv]
    if not argv:
        return f"the {adapter.name} agent produced an empty command line"
    workdir = Path(request.workdir)
    if not workdir.is_dir():
        return f"cannot start the {adapter.name} agent: working directory {workdir} does not exist"
    debug("loopctl.agent", "starting the %s agent in %s: %s", adapter.name, workdir, _shown(argv))
    try:
        return subprocess.Popen(
            argv,
            cwd=workdir,
            stdin=subprocess.PIPE if invocation.stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=child_env,
            start_new_session=True,
            close_fds=True,
        )
    except FileNotFoundError:
        where = "on PATH" if os.sep not in argv[0] else "(no such file)"
        if getattr(adapter.settings, "command", None):  # the user's command: theirs to check
            return (
                f"cannot start the {adapter.name} agent: command {argv[0]!r} not found {where}; "
                "check the agent command (--agent-cmd, agent_cmd, or "
                f"[agents.{adapter.name}] command)"
            )
        return (
            f"cannot start the {adapter.name} agent: executable {argv[0]!r} not found {where} "
            f"(install it, or set [agents.{adapter.name}] command)"
        )
    except PermissionError:
        return f"cannot start the {adapter.name} agent: {argv[0]!r} is not executable"
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"cannot start the {adapter.name} agent {argv[0]!r}: {exc}"


def _shown(argv: list[str], limit: int = 120) -> str:
    """A command line for the debug log: each argument cut to ``limit`` characters (a prompt
    given as an argument is long), secrets redacted."""
    import shlex

    return redact(shlex.join(a if len(a) <= limit else a[:limit] + "…" for a in argv))


class _SupervisedTurn:
    """The state of one running turn: pipes, line buffer, deadlines and what ended it."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        parser: StreamParser,
        on_message: MessageCallback | None,
        limits: Supervision,
        transcript: Path | None,
        started: float,
        stdin_data: bytes | None,
    ) -> None:
        self.proc = proc
        self.stdin_data = stdin_data or b""
        self.pgid = proc.pid  # start_new_session makes the child its group's leader
        self.parser = parser
        self.on_message = on_message
        self.limits = limits
        self.started = started
        self.notes: list[str] = []
        self.redactor = StreamRedactor()
        self.transcript = self._open_transcript(transcript)
        self.transcript_written = 0
        self.transcript_cut = 0
        self.transcript_ends_line = True
        self.line = bytearray()
        #: Whether the agent printed anything on stdout (a CLI that refused its command line
        #: prints only on stderr).
        self.stdout_seen = False
        #: Bytes of the current line discarded past ``max_line_bytes`` (0: not cutting).
        self.line_cut = 0
        self.stderr = bytearray()
        self.decision: Decision | None = None
        self.parser_done = False
        self.parser_failed = False
        self.stdin_pending = memoryview(b"")
        self.group_ended = False
        set_running(self.pgid, True)

    # --- the turn ---------------------------------------------------------------------------

    def run(self, agent_name: str) -> TurnResult:
        try:
            reason = self._pump()
            exit_code = self.proc.poll()  # None: still running, so we are the ones ending it
            self._end_group()
            self._drain_after_end()
        except BaseException:  # KeyboardInterrupt, or on_message raised: never leave orphans
            if not self.group_ended:
                self._end_group()
            raise
        finally:
            self._close()
        return self._result(agent_name, reason, exit_code)

    def abandon(self) -> None:
        """End the turn before it ran (an interrupt while it started)."""
        try:
            self._end_group()
        finally:
            self._close()

    def _pump(self) -> str:
        """Move bytes until something ends the turn; return what ended it."""
        proc = self.proc
        assert proc.stdout is not None
        assert proc.stderr is not None
        selector = selectors.DefaultSelector()
        stdout_fd, stderr_fd = proc.stdout.fileno(), proc.stderr.fileno()
        selector.register(stdout_fd, selectors.EVENT_READ, "stdout")
        selector.register(stderr_fd, selectors.EVENT_READ, "stderr")
        self._register_stdin(selector)
        pidfd = _open_pidfd(proc.pid)
        if pidfd is not None:
            selector.register(pidfd, selectors.EVENT_READ, "exit")
        stdout_open = True
        eof_at: float | None = None
        exited_at: float | None = None
        done_at: float | None = None
        last_output = self.started
        try:
            while True:
                now = time.monotonic()
                if exited_at is None and proc.poll() is not None:
                    exited_at = now
                if self.parser_done and done_at is None:
                    done_at = now
                deadlines = self._deadlines(stdout_open, eof_at, exited_at, done_at, last_output)
                if self.decision is not None:
                    return "decision"
                if not stdout_open and exited_at is not None:
                    return "finished"
                due = [name for name, at in deadlines.items() if now >= at]
                if due:
                    return due[0]
                wait = min(deadlines.values(), default=now + _MAX_WAIT_S) - now
                if pidfd is None:
                    wait = min(wait, _POLL_TICK_S)
                for key, _events in selector.select(_wait_s(wait)):
                    if key.data == "stdout":
                        chunk = _read(stdout_fd)
                        if chunk is None:
                            continue
                        if chunk:
                            last_output = time.monotonic()
                            self._on_stdout(chunk)
                        else:
                            selector.unregister(stdout_fd)
                            stdout_open, eof_at = False, time.monotonic()
                    elif key.data == "stderr":
                        chunk = _read(stderr_fd)
                        if chunk is None:
                            continue
                        if chunk:
                            self._on_stderr(chunk)
                        else:
                            selector.unregister(stderr_fd)
                    elif key.data == "stdin":
                        self._write_stdin(selector)
                    elif key.data == "exit":
                        selector.unregister(key.fd)
                    if self.decision is not None:
                        break
        finally:
            selector.close()
            if pidfd is not None:
                os.close(pidfd)

    def _deadlines(
        self,
        stdout_open: bool,
        eof_at: float | None,
        exited_at: float | None,
        done_at: float | None,
        last_output: float,
    ) -> dict[str, float]:
        """When each applicable limit runs out, in the order they are checked."""
        limits = self.limits
        deadlines: dict[str, float] = {}
        if _is_limit(limits.timeout_s):
            deadlines["timeout"] = self.started + limits.timeout_s
        if done_at is not None:
            deadlines["done_grace"] = done_at + limits.grace_s
        elif _is_limit(limits.idle_timeout_s) and stdout_open:
            deadlines["idle"] = last_output + limits.idle_timeout_s
        if exited_at is not None and stdout_open:
            deadlines["exit_grace"] = exited_at + limits.grace_s
        if eof_at is not None and exited_at is None:
            deadlines["eof_grace"] = eof_at + limits.grace_s
        return deadlines

    # --- stdout lines -----------------------------------------------------------------------

    def _on_stdout(self, chunk: bytes) -> None:
        """Split ``chunk`` into lines for the parser. A line is held only up to
        ``max_line_bytes``; the rest of an over-long line is counted and dropped as it streams,
        so memory stays bounded whatever the agent prints."""
        self.stdout_seen = True
        self._write_transcript(chunk)
        start, size, limit = 0, len(chunk), self.limits.max_line_bytes
        while self.decision is None and start < size:
            newline = chunk.find(b"\n", start)
            end = size if newline < 0 else newline
            if not self.line and not self.line_cut and end - start <= limit and newline >= 0:
                self._dispatch(chunk[start:end])  # the common case: a whole line in the chunk
                start = end + 1
                continue
            room = limit - len(self.line)
            if self.line_cut or end - start > room:
                keep = max(room, 0)
                self.line += chunk[start : start + keep]
                self.line_cut += end - start - keep
            else:
                self.line += chunk[start:end]
            if newline < 0:
                break
            start = end + 1
            self._end_line()

    def _end_line(self) -> None:
        """Hand the held line to the parser (its start, if it was cut) and start a new one."""
        line = bytes(self.line)
        self.line.clear()
        if self.line_cut:
            self.notes.append(
                f"loopctl: cut a stdout line of {len(line) + self.line_cut} bytes to its first "
                f"{len(line)} bytes"
            )
            self.line_cut = 0
        self._dispatch(line)

    def _dispatch(self, line: bytes) -> None:
        """Feed one line to the parser and its messages to ``on_message``."""
        try:
            messages = self.parser.feed(line)
        except Exception as exc:  # noqa: BLE001 - a parser bug must not end supervision
            messages = []
            if not self.parser_failed:
                self.parser_failed = True
                self.notes.append(f"loopctl: the agent's parser failed on a line: {exc!r}")
        for message in messages or ():
            if self.on_message is None:
                continue
            answer = self.on_message(message)
            if isinstance(answer, Decision):
                self.decision = answer
                break
        self.parser_done = self._parser_is_done()

    def _parser_is_done(self) -> bool:
        try:
            return bool(self.parser.done)
        except Exception:  # noqa: BLE001 - same: a broken parser is reported, not raised
            return False

    def _on_stderr(self, chunk: bytes) -> None:
        self.stderr += chunk
        overflow = len(self.stderr) - max(self.limits.stderr_limit, 0)
        if overflow > 0:
            del self.stderr[:overflow]

    # --- stdin --------------------------------------------------------------------------------

    def _register_stdin(self, selector: selectors.BaseSelector) -> None:
        stdin = self.proc.stdin
        if stdin is None:
            return
        data = self.stdin_data
        if not data:
            _close_quietly(stdin)
            return
        os.set_blocking(stdin.fileno(), False)
        self.stdin_pending = memoryview(data)
        selector.register(stdin.fileno(), selectors.EVENT_WRITE, "stdin")

    def _write_stdin(self, selector: selectors.BaseSelector) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            written = os.write(stdin.fileno(), self.stdin_pending[:_READ_CHUNK])
        except BlockingIOError:
            return
        except OSError:  # the agent closed stdin or exited: it does not want the rest
            written = len(self.stdin_pending)
        self.stdin_pending = self.stdin_pending[written:]
        if not self.stdin_pending:
            selector.unregister(stdin.fileno())
            _close_quietly(stdin)

    # --- the end ------------------------------------------------------------------------------

    def _end_group(self) -> None:
        """SIGTERM the whole group, wait ``kill_after_s``, SIGKILL what is left and wait until
        it is gone, reap the agent; then end the descendants that left the group."""
        self.group_ended = True
        proc, pgid = self.proc, self.pgid
        try:
            if proc.poll() is None or group_alive(pgid):
                _signal_group(proc, pgid, signal.SIGTERM)
                self._wait_group_gone(self.limits.kill_after_s)
        finally:  # also when interrupted while waiting: no more patience
            with deferred_interrupts():  # and no interrupting the rest: it is what ends them
                if proc.poll() is None or group_alive(pgid):
                    _signal_group(proc, pgid, signal.SIGKILL)
                    self._wait_group_gone(GONE_AFTER_KILL_S)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=1.0)
                end_escaped(pgid, self.limits.kill_after_s)

    def _wait_group_gone(self, seconds: float) -> bool:
        deadline = time.monotonic() + max(seconds, 0.0)
        while True:
            self.proc.poll()
            if not group_alive(self.pgid):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_REAP_TICK_S)

    def _drain_after_end(self) -> None:
        """Read what the dead group left in the pipes, then flush the last unterminated line."""
        proc = self.proc
        if proc.stdout is not None and not proc.stdout.closed:
            for chunk in _drain(proc.stdout.fileno()):
                self._on_stdout(chunk)
        if proc.stderr is not None and not proc.stderr.closed:
            for chunk in _drain(proc.stderr.fileno()):
                self._on_stderr(chunk)
        if (self.line or self.line_cut) and self.decision is None:
            self._end_line()

    def _close(self) -> None:
        set_running(self.pgid, False)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                _close_quietly(stream)
        self._append_transcript(self.redactor.finish())
        if self.transcript is not None:
            if self.transcript_cut:
                self._note_transcript_cut()
            _close_quietly(self.transcript)
            self.transcript = None

    def _result(self, agent_name: str, reason: str, exit_code: int | None) -> TurnResult:
        stderr_tail = self.stderr.decode("utf-8", errors="replace")
        if self.notes:
            stderr_tail = "\n".join([stderr_tail.rstrip("\n"), *self.notes]).lstrip("\n")
        try:
            result = self.parser.finish(exit_code, stderr_tail)
            if not isinstance(result, TurnResult):
                raise TypeError(f"finish() returned {type(result).__name__}, not TurnResult")
        except Exception as exc:  # noqa: BLE001 - the turn still gets a result
            result = TurnResult(
                outcome=TurnOutcome(
                    ErrorKind.INVALID_OUTPUT, f"the {agent_name} parser failed: {exc!r}"
                )
            )
        result.exit_code = exit_code
        result.stderr_tail = stderr_tail
        result.duration_s = time.monotonic() - self.started
        limits = self.limits
        if self.decision is not None:
            result.interrupted = True
            result.interrupt_reason = self.decision.reason
            if not self.parser_done:
                words = f"turn ended by loopctl ({self.decision.action.value}"
                words += f": {self.decision.reason})" if self.decision.reason else ")"
                if self.decision.message:
                    words += f" {self.decision.message}"
                result.outcome = TurnOutcome(ErrorKind.INTERRUPTED, words)
        elif reason == "timeout" and not self.parser_done:
            result.interrupted, result.interrupt_reason = True, "timeout"
            result.outcome = TurnOutcome(
                ErrorKind.TIMEOUT, f"the agent turn exceeded its {limits.timeout_s:g} s time limit"
            )
        elif reason == "idle" and not self.parser_done:
            result.interrupted, result.interrupt_reason = True, "idle_timeout"
            result.outcome = TurnOutcome(
                ErrorKind.IDLE_TIMEOUT,
                f"the agent printed nothing for {limits.idle_timeout_s:g} s",
            )
        return result

    # --- transcript ---------------------------------------------------------------------------

    def _open_transcript(self, path: Path | None) -> IO[bytes] | None:
        if path is None:
            return None
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            return open(path, "ab")
        except OSError as exc:
            self.notes.append(f"loopctl: cannot write the transcript {path}: {exc}")
            return None

    def _write_transcript(self, chunk: bytes) -> None:
        """Append ``chunk`` to the transcript, redacted: whole lines only (a secret split
        across two reads is still one line when it is redacted); :meth:`_close` writes the
        rest."""
        if self.transcript is not None:
            self._append_transcript(self.redactor.feed(chunk))

    def _append_transcript(self, chunk: bytes) -> None:
        if self.transcript is None or not chunk:
            return
        limit = self.limits.transcript_limit
        if limit is not None and self.transcript_written + len(chunk) > limit:
            room = max(limit - self.transcript_written, 0)
            self.transcript_cut += len(chunk) - room
            chunk = chunk[:room]
            if not chunk:
                return
        try:
            self.transcript.write(chunk)
            self.transcript_written += len(chunk)
            self.transcript_ends_line = chunk.endswith(b"\n")
        except OSError as exc:
            self.notes.append(f"loopctl: stopped writing the transcript: {exc}")
            _close_quietly(self.transcript)
            self.transcript = None

    def _note_transcript_cut(self) -> None:
        """End a cut transcript with one JSON line that says so (parsers skip it)."""
        assert self.transcript is not None
        note = {
            "type": "loopctl.transcript_cut",
            "message": (
                f"loopctl kept the first {self.transcript_written} bytes of the agent's output "
                f"here and cut the {self.transcript_cut} bytes after them "
                "(limits.agent_log_bytes)"
            ),
            "kept_bytes": self.transcript_written,
            "cut_bytes": self.transcript_cut,
        }
        text = ("" if self.transcript_ends_line else "\n") + json.dumps(note) + "\n"
        with contextlib.suppress(OSError, ValueError):
            self.transcript.write(text.encode())


# --- process helpers ----------------------------------------------------------------------------


def _is_limit(seconds: float | None) -> TypeGuard[float]:
    """True for a timeout that can run out (None and NaN never do; inf never comes)."""
    return seconds is not None and not math.isnan(seconds)


def _wait_s(seconds: float) -> float:
    """``seconds`` as a timeout select() accepts, whatever the float: 0 to _MAX_WAIT_S."""
    if math.isnan(seconds):
        return _MAX_WAIT_S
    return min(max(seconds, 0.0), _MAX_WAIT_S)


def _open_pidfd(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux 5.3+), else None."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return None
    try:
        fd: int = pidfd_open(pid)
    except OSError:
        return None
    return fd


def _read(fd: int) -> bytes | None:
    """The next chunk of ``fd``: ``b""`` at end of file, None when nothing is ready after all."""
    try:
        return os.read(fd, _READ_CHUNK)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


def _drain(fd: int) -> list[bytes]:
    """Whatever can be read from ``fd`` without waiting (the writers are dead by now)."""
    chunks: list[bytes] = []
    try:
        os.set_blocking(fd, False)
        while True:
            chunk = os.read(fd, _READ_CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # EAGAIN: a writer escaped the group and keeps the pipe open; stop here
        pass
    return chunks


def _signal_group(proc: subprocess.Popen[bytes], pgid: int, sig: int) -> None:
    signal_group(pgid, sig)
    if proc.poll() is None:  # the agent may have moved itself to another group
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            proc.send_signal(sig)


def _close_quietly(stream: IO[bytes]) -> None:
    with contextlib.suppress(OSError, ValueError):
        stream.close()
