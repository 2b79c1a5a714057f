"""The supervisor's fault suite: real misbehaving processes, short limits, no survivors."""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import attrs
import pytest

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.agents.scripted import ScriptedParser
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.model import AgentMessage, Decision, ErrorKind, MessageKind, TurnResult
from loopctl.procgroup import group_members, interrupt, process_start_time, supervisor_token

FAKE_AGENT = Path(__file__).parent / "fake_agents" / "fake_agent.py"
GRACE, KILL_AFTER, IDLE = 0.3, 0.5, 0.5
#: The wall clock no test here should reach: a turn that does shows up as a TIMEOUT outcome.
WALL_CLOCK = 60.0
#: Short grace periods, and no idle limit that could decide a turn: the idle clock starts when
#: the agent is spawned, and a loaded machine can take longer than IDLE to start its
#: interpreter. A test of idleness says when its idle limit counts from (the helpers below).
FAST = Supervision(
    timeout_s=WALL_CLOCK, idle_timeout_s=WALL_CLOCK, grace_s=GRACE, kill_after_s=KILL_AFTER
)
#: Idle from the spawn on: for an agent that never prints (start-up cannot change the outcome).
IDLE_FROM_SPAWN = attrs.evolve(FAST, idle_timeout_s=IDLE)

pytestmark = pytest.mark.timing  # real processes, short limits, signals


class FakeAgent(AgentAdapter):
    """Runs tests/fake_agents/fake_agent.py in a given mode and parses it as the scripted agent."""

    name: ClassVar[str] = "fake"

    def __init__(
        self,
        *args: str,
        stdin: bytes | None = None,
        env: dict[str, str | None] | None = None,
        settings: AgentSettings | None = None,
    ) -> None:
        super().__init__(settings)
        self.args = args
        self.stdin = stdin
        self.env = env or {}

    def invocation(self, request: TurnRequest) -> Invocation:
        return Invocation([sys.executable, str(FAKE_AGENT), *self.args], self.stdin, dict(self.env))

    def new_parser(self) -> StreamParser:
        return ScriptedParser()


class ArgvAgent(AgentAdapter):
    name: ClassVar[str] = "argv"

    def __init__(self, argv: list[str]) -> None:
        super().__init__()
        self.argv = argv

    def invocation(self, request: TurnRequest) -> Invocation:
        return Invocation(self.argv)

    def new_parser(self) -> StreamParser:
        return ScriptedParser()


def _alive(pid: int) -> bool:
    """True if ``pid`` runs (zombies waiting for a reaper do not count: they are dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rpartition(b")")[2].split()[0] not in (b"Z", b"X")


def _assert_no_survivors(pidfile: Path) -> None:
    pids = [int(text) for text in pidfile.read_text().split()] if pidfile.exists() else []
    assert pids, "the fake agent did not record its pid"
    pgid = pids[0]  # the agent leads its own process group
    assert [pid for pid in pids if _alive(pid)] == []
    assert group_members(pgid) == []
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        pass
    else:  # only zombies left (reparented to an init that does not reap): all dead
        assert not any(_alive(pid) for pid in pids)


def idle_once(
    idle: float, kind: MessageKind, limits: Supervision = FAST
) -> tuple[Supervision, Callable[[AgentMessage], None]]:
    """Limits whose idle limit is ``idle`` from the agent's first message of ``kind`` on, and
    the ``on_message`` that sets it then (the supervisor reads its limits at each wait): a test
    of what idleness does after the agent said something waits for it to say it, however long
    its start-up took."""
    armed = attrs.evolve(limits, idle_timeout_s=WALL_CLOCK)

    def on_message(message: AgentMessage) -> None:
        if message.kind is kind:
            armed.idle_timeout_s = idle

    return armed, on_message


def once_running(tmp_path: Path) -> Callable[[int], None]:
    """An ``on_start`` that returns once the fake agent runs (it recorded its pid): a limit
    shorter than the interpreter's start-up then ends an agent that runs, as the test asserts,
    not one still starting (the supervisor's wait begins after ``on_start``)."""

    def on_start(pgid: int) -> None:
        pidfile = tmp_path / "pids"
        deadline = time.monotonic() + WALL_CLOCK
        while not (pidfile.exists() and pidfile.read_text().split()):
            assert time.monotonic() < deadline, "the fake agent never started"
            time.sleep(0.01)

    return on_start


def _run(
    tmp_path: Path, agent: AgentAdapter, limits: Supervision = FAST, **kwargs: object
) -> tuple[TurnResult, float, Path]:
    pidfile = tmp_path / "pids"
    env = dict(os.environ, FAKE_PIDFILE=str(pidfile))
    request = TurnRequest(prompt="go", workdir=tmp_path, iteration=1)
    started = time.monotonic()
    result = run_turn(agent, request, supervision=limits, env=env, **kwargs)  # type: ignore[arg-type]
    return result, time.monotonic() - started, pidfile


def test_clean_turn_is_ok_and_the_transcript_is_raw_stdout(tmp_path: Path) -> None:
    transcript = tmp_path / "logs" / "agent.jsonl"
    seen: list[AgentMessage] = []

    def on_message(message: AgentMessage) -> None:
        seen.append(message)

    result, elapsed, pidfile = _run(
        tmp_path, FakeAgent("ok"), transcript=transcript, on_message=on_message
    )
    assert result.outcome.ok
    assert result.exit_code == 0
    assert result.session_id == "s1"
    assert result.final_text == "hello"
    assert not result.interrupted
    assert [m.kind for m in seen] == [MessageKind.INIT, MessageKind.TEXT, MessageKind.RESULT]
    lines = transcript.read_text().splitlines()
    assert len(lines) == 3
    assert '"result"' in lines[2]
    assert 0 < result.duration_s <= elapsed
    _assert_no_survivors(pidfile)


def test_hang_after_result_ends_after_grace_with_the_result_standing(tmp_path: Path) -> None:
    # idle is shorter than grace here: once the result line is in, idleness must not matter
    grace = 1.0
    limits, on_message = idle_once(0.3, MessageKind.RESULT, attrs.evolve(FAST, grace_s=grace))
    result, elapsed, pidfile = _run(
        tmp_path, FakeAgent("hang_after_result"), limits, on_message=on_message
    )
    assert result.outcome.ok, result.outcome
    assert result.exit_code is None  # we ended it
    assert not result.interrupted
    assert grace <= elapsed < WALL_CLOCK / 2
    _assert_no_survivors(pidfile)


def test_hang_mid_stream_is_an_idle_timeout(tmp_path: Path) -> None:
    limits, on_message = idle_once(IDLE, MessageKind.TEXT)  # "thinking"
    result, elapsed, pidfile = _run(
        tmp_path, FakeAgent("hang_mid_stream"), limits, on_message=on_message
    )
    assert result.outcome.error_kind is ErrorKind.IDLE_TIMEOUT
    assert result.interrupted
    assert result.interrupt_reason == "idle_timeout"
    assert result.exit_code is None
    assert result.final_text == "thinking"  # what arrived before the hang is kept
    assert elapsed >= IDLE
    _assert_no_survivors(pidfile)


def test_an_agent_ignoring_sigterm_gets_sigkill(tmp_path: Path) -> None:
    result, elapsed, pidfile = _run(tmp_path, FakeAgent("ignore_sigterm"))
    assert result.outcome.ok
    assert result.exit_code is None
    assert GRACE + KILL_AFTER <= elapsed < WALL_CLOCK / 2
    _assert_no_survivors(pidfile)


def test_a_grandchild_holding_stdout_is_killed_after_grace(tmp_path: Path) -> None:
    result, elapsed, pidfile = _run(tmp_path, FakeAgent("grandchild"))
    assert result.outcome.ok
    assert result.exit_code == 0  # the agent itself exited normally
    assert len(pidfile.read_text().split()) == 2
    assert elapsed < WALL_CLOCK / 2  # the grandchild was ended, not waited for
    _assert_no_survivors(pidfile)


def test_a_background_helper_is_killed_even_after_a_clean_exit(tmp_path: Path) -> None:
    result, elapsed, pidfile = _run(tmp_path, FakeAgent("daemon"))
    assert result.outcome.ok
    assert result.exit_code == 0
    assert len(pidfile.read_text().split()) == 2
    assert elapsed < WALL_CLOCK / 2
    _assert_no_survivors(pidfile)


def test_closing_stdout_without_exiting_ends_after_grace(tmp_path: Path) -> None:
    limits = Supervision(
        timeout_s=WALL_CLOCK, idle_timeout_s=WALL_CLOCK, grace_s=GRACE, kill_after_s=KILL_AFTER
    )
    result, elapsed, pidfile = _run(tmp_path, FakeAgent("close_stdout"), limits)
    assert result.outcome.error_kind is ErrorKind.CRASHED  # no result line, and we ended it
    assert result.exit_code is None
    assert GRACE <= elapsed < WALL_CLOCK / 2  # ended by the grace period, not a timeout
    _assert_no_survivors(pidfile)


def test_block_buffered_output_that_never_arrives_is_an_idle_timeout(tmp_path: Path) -> None:
    result, _elapsed, pidfile = _run(
        tmp_path, FakeAgent("block_buffered"), IDLE_FROM_SPAWN, on_start=once_running(tmp_path)
    )
    assert result.outcome.error_kind is ErrorKind.IDLE_TIMEOUT
    assert result.requests == []
    assert result.context_tokens is None
    _assert_no_survivors(pidfile)


@pytest.mark.parametrize("size", [4_000, 8_000, 65_536])
def test_a_line_cut_off_without_newline_is_invalid_output(tmp_path: Path, size: int) -> None:
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("truncated", str(size)))
    assert result.outcome.error_kind is ErrorKind.INVALID_OUTPUT
    assert result.exit_code == 0
    _assert_no_survivors(pidfile)


def test_a_complete_last_line_without_newline_is_still_parsed(tmp_path: Path) -> None:
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("unterminated_result", "65536"))
    assert result.outcome.ok
    assert result.session_id == "s1"
    _assert_no_survivors(pidfile)


def test_invalid_json_in_the_result_line_is_invalid_output(tmp_path: Path) -> None:
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("invalid_json_result"))
    assert result.outcome.error_kind is ErrorKind.INVALID_OUTPUT
    assert result.session_id == "s1"  # from the init line
    _assert_no_survivors(pidfile)


def test_exit_without_result_line_is_a_crash_with_stderr(tmp_path: Path) -> None:
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("no_result", "3"))
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert result.exit_code == 3
    assert "fatal: something broke" in result.stderr_tail
    assert "fatal: something broke" in result.outcome.message
    _assert_no_survivors(pidfile)


def test_non_json_noise_is_skipped(tmp_path: Path) -> None:
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("noise"))
    assert result.outcome.ok
    assert result.requests == []  # the malformed usage line counted for nothing
    assert result.session_id == "s1"
    _assert_no_survivors(pidfile)


def test_a_10_mb_single_line_is_read_whole(tmp_path: Path) -> None:
    size = 10 * 1024 * 1024
    texts: list[int] = []

    def on_message(message: AgentMessage) -> None:
        if message.kind is MessageKind.TEXT and message.text:
            texts.append(len(message.text))

    result, _elapsed, pidfile = _run(
        tmp_path, FakeAgent("big_line", str(size)), on_message=on_message
    )
    assert result.outcome.ok
    assert texts == [size]
    assert 0 < len(result.final_text) <= 64 * 1024  # the kept text is bounded
    _assert_no_survivors(pidfile)


def test_a_flood_on_stderr_neither_deadlocks_nor_grows_unbounded(tmp_path: Path) -> None:
    limits = Supervision(
        timeout_s=WALL_CLOCK,
        idle_timeout_s=WALL_CLOCK,
        grace_s=GRACE,
        kill_after_s=KILL_AFTER,
        stderr_limit=1000,
    )
    result, _elapsed, pidfile = _run(
        tmp_path, FakeAgent("stderr_flood", str(2 * 1024 * 1024)), limits
    )
    assert result.outcome.ok
    assert len(result.stderr_tail) <= 1000
    assert result.stderr_tail.endswith("LAST STDERR LINE\n")  # not a deadlock timed out
    _assert_no_survivors(pidfile)


def test_a_large_prompt_on_stdin_is_written_without_blocking(tmp_path: Path) -> None:
    prompt = b"p" * (3 * 1024 * 1024)
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("echo_stdin", stdin=prompt))
    assert result.final_text == f"got {len(prompt)} bytes"
    _assert_no_survivors(pidfile)


def test_environment_layers(tmp_path: Path) -> None:
    os.environ["LOOPCTL_TEST_INHERITED"] = "from-os"  # only visible when env is not given
    try:
        settings = AgentSettings(env={"BY_SETTINGS": "user", "BY_BOTH": "user wins"})
        agent = FakeAgent(
            "env",
            "BY_CALLER,DROPPED,BY_INVOCATION,BY_SETTINGS,BY_BOTH,LOOPCTL_TEST_INHERITED",
            env={"DROPPED": None, "BY_INVOCATION": "adapter", "BY_BOTH": "adapter"},
            settings=settings,
        )
        pidfile = tmp_path / "pids"
        env = {
            "PATH": os.environ.get("PATH", ""),
            "BY_CALLER": "caller",
            "DROPPED": "x",
            "FAKE_PIDFILE": str(pidfile),
        }
        request = TurnRequest(prompt="", workdir=tmp_path, iteration=1)
        result = run_turn(agent, request, supervision=FAST, env=env)
    finally:
        del os.environ["LOOPCTL_TEST_INHERITED"]
    assert result.final_text.splitlines() == [
        "BY_CALLER=caller",
        "DROPPED=<unset>",
        "BY_INVOCATION=adapter",
        "BY_SETTINGS=user",
        "BY_BOTH=user wins",
        "LOOPCTL_TEST_INHERITED=<unset>",
    ]


def test_wall_clock_timeout(tmp_path: Path) -> None:
    limits = Supervision(
        timeout_s=0.5, idle_timeout_s=WALL_CLOCK, grace_s=GRACE, kill_after_s=KILL_AFTER
    )
    result, elapsed, pidfile = _run(
        tmp_path, FakeAgent("chatty"), limits, on_start=once_running(tmp_path)
    )
    assert result.outcome.error_kind is ErrorKind.TIMEOUT
    assert result.interrupted
    assert result.interrupt_reason == "timeout"
    assert result.exit_code is None
    assert elapsed >= 0.5
    _assert_no_survivors(pidfile)


def test_a_decision_from_on_message_ends_the_turn_at_once(tmp_path: Path) -> None:
    seen: list[str] = []

    def on_message(message: AgentMessage) -> Decision | None:
        if message.kind is MessageKind.TEXT:
            seen.append(message.text or "")
            if len(seen) == 3:
                return Decision.restart("context_exhaustion", "context is 90% full")
        return None

    limits = Supervision(
        timeout_s=WALL_CLOCK, idle_timeout_s=WALL_CLOCK, grace_s=WALL_CLOCK, kill_after_s=KILL_AFTER
    )
    result, elapsed, pidfile = _run(tmp_path, FakeAgent("chatty"), limits, on_message=on_message)
    assert seen == ["tick 1", "tick 2", "tick 3"]  # nothing delivered after the decision
    assert result.interrupted
    assert result.interrupt_reason == "context_exhaustion"
    assert result.outcome.error_kind is ErrorKind.INTERRUPTED
    assert result.exit_code is None
    assert elapsed < WALL_CLOCK / 2  # at once: the grace period was not waited out
    _assert_no_survivors(pidfile)


def test_keyboard_interrupt_ends_the_group_then_propagates(tmp_path: Path) -> None:
    def on_message(message: AgentMessage) -> None:
        if message.kind is MessageKind.TEXT:
            raise KeyboardInterrupt

    pidfile = tmp_path / "pids"
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, FakeAgent("chatty"), on_message=on_message)
    _assert_no_survivors(pidfile)


def test_a_missing_executable_is_a_crashed_turn_naming_it(tmp_path: Path) -> None:
    agent = ArgvAgent(["/nonexistent/bin/agent-xyz", "--flag"])
    result = run_turn(agent, TurnRequest(prompt="", workdir=tmp_path, iteration=1))
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert "/nonexistent/bin/agent-xyz" in result.outcome.message
    assert result.exit_code is None


def test_a_missing_working_directory_is_a_crashed_turn(tmp_path: Path) -> None:
    agent = ArgvAgent([sys.executable, "-c", "pass"])
    missing = tmp_path / "gone"
    result = run_turn(agent, TurnRequest(prompt="", workdir=missing, iteration=1))
    assert result.outcome.error_kind is ErrorKind.CRASHED
    assert str(missing) in result.outcome.message


class ExplodingParser(StreamParser):
    def feed(self, line: bytes) -> list[AgentMessage]:
        raise RuntimeError("parser bug")

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        raise RuntimeError("finish bug")


def test_a_broken_parser_becomes_an_outcome_not_an_exception(tmp_path: Path) -> None:
    class Broken(FakeAgent):
        def new_parser(self) -> StreamParser:
            return ExplodingParser()

    result, _elapsed, pidfile = _run(tmp_path, Broken("ok"))
    assert result.outcome.error_kind is ErrorKind.INVALID_OUTPUT
    assert "finish bug" in result.outcome.message
    assert "parser bug" in result.stderr_tail
    assert result.exit_code == 0
    _assert_no_survivors(pidfile)


def test_the_agent_runs_in_its_own_process_group_and_workdir(tmp_path: Path) -> None:
    code = (
        "import json, os; print(json.dumps({'type': 'text', 'text': "
        "f'{os.getpgrp() == os.getpid()} {os.getcwd()}'}))"
    )
    agent = ArgvAgent([sys.executable, "-c", code])
    result = run_turn(agent, TurnRequest(prompt="", workdir=tmp_path, iteration=1))
    assert result.final_text == f"True {os.path.realpath(tmp_path)}"


@pytest.mark.parametrize("seconds", [1e7, float("inf")])
def test_huge_timeouts_do_not_overflow_the_wait(tmp_path: Path, seconds: float) -> None:
    """The config refuses such numbers (limits are range-checked at load), but a Supervision
    built in Python must not crash either: epoll cannot wait ~25 days, let alone infinity."""
    limits = Supervision(
        timeout_s=seconds, idle_timeout_s=seconds, grace_s=GRACE, kill_after_s=KILL_AFTER
    )
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("hang_after_result"), limits)
    assert result.outcome.ok
    _assert_no_survivors(pidfile)


class PlainAgent(FakeAgent):
    """The fake agent read as plain text, line by line (the ``command`` adapter's parser)."""

    def new_parser(self) -> StreamParser:
        from loopctl.agents.command import CommandParser

        return CommandParser()


def test_an_over_long_line_is_cut_as_it_streams_and_its_start_still_parsed(
    tmp_path: Path,
) -> None:
    """The first ``max_line_bytes`` of a 10 MB line reach the parser, the rest up to the newline
    is discarded, and the next line is read as usual; the cut is said in the turn's notes."""
    size, cap = 10 * 1024 * 1024, 64 * 1024
    limits = attrs.evolve(FAST, max_line_bytes=cap)
    lines: list[str] = []

    def on_message(message: AgentMessage) -> None:
        lines.append(message.text)

    result, _elapsed, pidfile = _run(
        tmp_path, PlainAgent("long_plain_line", str(size)), limits, on_message=on_message
    )
    assert result.outcome.ok
    assert lines == ["y" * cap, "after"]
    assert f"loopctl: cut a stdout line of {size} bytes to its first {cap} bytes" in (
        result.stderr_tail
    )
    _assert_no_survivors(pidfile)


@pytest.mark.parametrize("cap", [1, 7, 65_536, 65_537, 200_000])
def test_line_cutting_at_any_cap_keeps_the_other_lines_whole(tmp_path: Path, cap: int) -> None:
    """Cuts that fall anywhere relative to the 64 KiB reads (before, on, after a read's end)."""
    limits = attrs.evolve(FAST, max_line_bytes=cap)
    lines: list[str] = []
    result, _elapsed, _pidfile = _run(
        tmp_path,
        PlainAgent("long_plain_line", str(150_000)),
        limits,
        on_message=lambda message: lines.append(message.text),  # type: ignore[func-returns-value]
    )
    assert result.outcome.ok
    assert lines == ["y" * min(cap, 150_000), "after"[:cap]]
    assert ("loopctl: cut a stdout line of 150000 bytes" in result.stderr_tail) == (cap < 150_000)


def test_a_line_longer_than_the_default_cap_is_never_held_whole(tmp_path: Path) -> None:
    """A 64 MB line with the default limits: memory stays near the 16 MiB cap (the line was
    buffered whole before: 629 MB of RSS for a 200 MB line). The lines around it still count."""
    import tracemalloc

    size = 64 * 1024 * 1024
    tracemalloc.start()
    try:
        limits = attrs.evolve(Supervision(), grace_s=GRACE, kill_after_s=KILL_AFTER)
        result, _elapsed, pidfile = _run(tmp_path, FakeAgent("long_json_line", str(size)), limits)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * Supervision().max_line_bytes < size, f"peak {peak / 1e6:.0f} MB"
    assert result.outcome.ok  # the result line after the cut one was read
    assert result.final_text == "after"
    assert "loopctl: cut a stdout line" in result.stderr_tail
    _assert_no_survivors(pidfile)


def test_the_transcript_is_capped_and_says_where_it_was_cut(tmp_path: Path) -> None:
    transcript = tmp_path / "agent.jsonl"
    limits = attrs.evolve(FAST, transcript_limit=100_000)
    result, _elapsed, pidfile = _run(
        tmp_path, PlainAgent("long_plain_line", str(3_000_000)), limits, transcript=transcript
    )
    assert result.outcome.ok
    data = transcript.read_bytes()
    kept, _, last = data.rpartition(b"\n")
    assert last == b""
    head, _, note_line = kept.rpartition(b"\n")
    assert head == b"y" * 100_000  # the start, as written, then the note on a line of its own
    note = json.loads(note_line)
    assert note["type"] == "loopctl.transcript_cut"
    assert (note["kept_bytes"], note["cut_bytes"]) == (100_000, 3_000_000 + 7 - 100_000)
    assert "limits.agent_log_bytes" in note["message"]
    _assert_no_survivors(pidfile)


def test_a_transcript_under_its_cap_has_no_note(tmp_path: Path) -> None:
    transcript = tmp_path / "agent.jsonl"
    limits = attrs.evolve(FAST, transcript_limit=100_000)
    _run(tmp_path, FakeAgent("ok"), limits, transcript=transcript)
    assert b"loopctl.transcript_cut" not in transcript.read_bytes()


# --- descendants that leave the group; interrupts while the agent starts; huge timeouts ---------


def _gone_and_reaped(pid: int) -> bool:
    """Not running, and not a zombie waiting for this process to reap it either."""
    return not Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("how", ["setsid", "setpgid"])
def test_a_descendant_that_left_the_group_is_ended_and_reaped(
    tmp_path: Path, subreaper: None, how: str
) -> None:
    """setsid: a double-forked daemon in a session of its own, known by the variable loopctl
    puts in the agent's environment; setpgid: a group of its own in the agent's session, with
    an empty environment, known by its session."""
    result, elapsed, pidfile = _run(tmp_path, FakeAgent("escape", how))
    assert result.outcome.ok, result.outcome
    _agent, escaped = (int(pid) for pid in pidfile.read_text().split())
    assert _gone_and_reaped(escaped), f"pid {escaped} ({how}) outlived the turn"
    assert elapsed < WALL_CLOCK / 2
    _assert_no_survivors(pidfile)


def test_the_supervisor_token_names_this_process_also_in_a_forked_child() -> None:
    """The token is read once per process: a child forked after that has its own."""
    mine = supervisor_token()
    assert mine == supervisor_token()
    assert mine.split(".")[0] == str(os.getpid())
    assert mine.split(".")[1] == str(process_start_time(os.getpid()))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: say its token and go
        os.write(write_end, supervisor_token().encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        theirs = pipe.read().decode()
    os.waitpid(pid, 0)
    assert theirs.split(".")[0] == str(pid)
    assert theirs != mine


def test_an_interrupt_while_the_agent_starts_ends_it_once_it_is_known(tmp_path: Path) -> None:
    """A stop signal's handler raises through ``interrupt()``: while the agent is being started
    (here: while the engine records its group) it waits, then ends the started group."""
    started: list[int] = []

    def on_start(pgid: int) -> None:
        started.append(pgid)
        interrupt(KeyboardInterrupt())  # as the engine's handler does for SIGINT
        (tmp_path / "recorded").write_text("the interrupt waited for this")

    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, FakeAgent("hang_mid_stream"), on_start=on_start)
    assert (tmp_path / "recorded").exists()
    assert len(started) == 1
    assert group_members(started[0]) == []


@pytest.mark.parametrize(
    ("timeout_s", "idle_timeout_s"),
    [(math.inf, math.inf), (1e7, 1e7), (1e300, math.inf), (math.nan, math.nan), (None, None)],
    ids=["inf", "1e7", "1e300", "nan", "none"],
)
def test_timeouts_of_any_size_run_the_turn_to_its_end(
    tmp_path: Path, timeout_s: float | None, idle_timeout_s: float | None
) -> None:
    """Timeouts too large for select() (milliseconds in a C int) mean "no limit in practice",
    never an OverflowError; NaN means no limit."""
    limits = Supervision(
        timeout_s=timeout_s, idle_timeout_s=idle_timeout_s, grace_s=GRACE, kill_after_s=KILL_AFTER
    )
    result, _elapsed, pidfile = _run(tmp_path, FakeAgent("ok"), limits)
    assert result.outcome.ok, result.outcome
    assert result.final_text == "hello"
    _assert_no_survivors(pidfile)
