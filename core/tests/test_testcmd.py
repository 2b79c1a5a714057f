from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, SimpleNamespace
from unittest.mock import Mock

import pytest

from loopctl import testcmd
from loopctl.procgroup import group_members, interrupt
from loopctl.testcmd import run_test_command

PY = sys.executable

pytestmark = pytest.mark.timing  # real process groups, timeouts and signals


def _alive(pid: int) -> bool:
    """Running, not merely an unreaped zombie (this machine's init may never reap orphans)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] not in "ZX"


def _wait_for_pid(path: Path, timeout_s: float = 5.0) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text().strip() if path.exists() else ""
        if text:
            return int(text)
        time.sleep(0.01)
    raise AssertionError(f"{path} was never written")


def _once_written(path: Path) -> Callable[[int], None]:
    """An ``on_start`` that returns once the command wrote ``path`` (so it got as far as the
    test asserts it did): the timeout is counted from the spawn, and a loaded machine can take
    longer than a short one to start the shell; the wait for the command begins after this."""

    def on_start(pgid: int) -> None:
        deadline = time.monotonic() + 60
        while not (path.exists() and path.read_text().strip()):
            assert time.monotonic() < deadline, f"{path} was never written"
            time.sleep(0.01)

    return on_start


@pytest.fixture
def leftover_pids() -> Iterator[list[int]]:
    """Pids a test expects to be gone; any still alive at the end are killed (and fail the test)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_passing_command(tmp_path: Path) -> None:
    run = run_test_command("echo all good; cat", cwd=tmp_path, timeout_s=10)  # stdin is closed
    assert run.passed
    assert (run.exit_code, run.timed_out) == (0, False)
    assert run.output == "all good\n"
    assert (run.error_lines, run.failing_tests, run.fingerprint) == ([], [], "")
    assert run.command == "echo all good; cat"
    assert run.duration_s > 0


def test_exit_codes_and_silent_failures(tmp_path: Path) -> None:
    run = run_test_command("exit 3", cwd=tmp_path, timeout_s=10)
    assert (run.exit_code, run.passed) == (3, False)
    assert run.error_lines == ["loopctl: the test command exited with code 3 and no output"]
    assert run.fingerprint
    killed = run_test_command("kill -9 $$", cwd=tmp_path, timeout_s=10)
    assert killed.exit_code == 128 + 9


def test_a_passing_run_carries_no_error_lines(tmp_path: Path) -> None:
    run = run_test_command("echo 'error: only a log line'", cwd=tmp_path, timeout_s=10)
    assert run.passed
    assert (run.error_lines, run.fingerprint) == ([], "")


def test_unrecognised_failure_uses_the_output_tail(tmp_path: Path) -> None:
    script = "for i in 1 2 3 4 5 6 7; do echo step $i; done; exit 1"
    run = run_test_command(script, cwd=tmp_path, timeout_s=10)
    assert run.error_lines == [f"step {i}" for i in range(3, 8)]


def _write_failing_project(root: Path) -> None:
    (root / "tests").mkdir(parents=True)
    (root / "calc.py").write_text("def add(a, b):\n    return a + b + 1\n")
    (root / "tests" / "test_calc.py").write_text(
        textwrap.dedent(
            """
            from calc import add


            def test_add():
                assert add(2, 2) == 4


            def test_fine():
                assert add(1, 1) == 3
            """
        )
    )


def test_real_pytest_failure_is_extracted_and_fingerprinted_stably(tmp_path: Path) -> None:
    runs = []
    for name in ("first", "second"):
        _write_failing_project(tmp_path / name)
        runs.append(
            run_test_command(
                f"{PY} -m pytest -p no:cacheprovider -q",
                cwd=tmp_path / name,
                timeout_s=60,
                env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": "."},
            )
        )
    first, second = runs
    assert (first.exit_code, first.runner) == (1, "pytest")
    assert first.failing_tests == ["tests/test_calc.py::test_add"]
    assert "E       assert 5 == 4" in first.error_lines
    assert "tests/test_calc.py:6: AssertionError" in first.error_lines
    assert len(first.fingerprint) == 16
    # the same failure in another directory, at another time: the same fingerprint
    assert second.fingerprint == first.fingerprint


def test_env_adds_to_the_inherited_environment(tmp_path: Path) -> None:
    run = run_test_command(
        'echo "$LOOPCTL_TESTCMD_VAR" && command -v sh >/dev/null && echo path-ok',
        cwd=tmp_path,
        timeout_s=10,
        env={"LOOPCTL_TESTCMD_VAR": "hello"},
    )
    assert run.output == "hello\npath-ok\n"


def test_timeout_kills_the_whole_group(tmp_path: Path, leftover_pids: list[int]) -> None:
    command = "echo started; sleep 1000 & echo $! > child.pid; sleep 1000"
    started = time.monotonic()
    run = run_test_command(command, cwd=tmp_path, timeout_s=0.5, kill_grace_s=60.0,
                           on_start=_once_written(tmp_path / "child.pid"))  # fmt: skip
    elapsed = time.monotonic() - started
    child = _wait_for_pid(tmp_path / "child.pid")
    leftover_pids.append(child)
    assert run.timed_out
    assert run.exit_code is None
    assert not run.passed
    assert run.output == "started\n"
    assert run.error_lines[0] == "loopctl: the test command timed out after 0.5 s"
    assert run.fingerprint
    assert 0.5 <= elapsed < 30  # SIGTERM was enough: the 60 s grace period was not waited out
    assert not _alive(child)


def test_timeout_escalates_to_sigkill(tmp_path: Path, leftover_pids: list[int]) -> None:
    command = "trap '' TERM; sleep 1000 & echo $! > child.pid; sleep 1000"
    started = time.monotonic()
    run = run_test_command(command, cwd=tmp_path, timeout_s=0.3, kill_grace_s=0.4,
                           on_start=_once_written(tmp_path / "child.pid"))  # fmt: skip
    elapsed = time.monotonic() - started
    child = _wait_for_pid(tmp_path / "child.pid")
    leftover_pids.append(child)
    assert run.timed_out
    assert elapsed >= 0.7  # the 0.4 s grace was given before SIGKILL
    assert not _alive(child)


def test_background_processes_do_not_outlive_a_normal_exit(
    tmp_path: Path, leftover_pids: list[int]
) -> None:
    # the grandchild keeps the output pipe open: waiting for end-of-file would hang for 1000 s
    command = "sleep 1000 & echo $! > child.pid; echo done"
    run = run_test_command(command, cwd=tmp_path, timeout_s=60)
    child = _wait_for_pid(tmp_path / "child.pid")
    leftover_pids.append(child)
    assert run.passed  # waiting for the grandchild's end-of-file would have timed out
    assert run.output == "done\n"
    assert not _alive(child)


@pytest.fixture(params=["pidfd", "polling"])
def exit_wait(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of waiting for the command's exit: a pidfd, or (no pidfd) the process itself."""
    if request.param == "polling":
        monkeypatch.setattr(testcmd, "_exit_fd", lambda pid: None)
    return str(request.param)


def _no_fixed_sleeps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail on any ``time.sleep`` in the runner: once the output ends, it must wait for the
    process, not for a tick (that tick was a 50 ms stall on every instant command)."""

    def sleep(seconds: float) -> None:
        raise AssertionError(f"the test command runner slept {seconds} s")

    monkeypatch.setattr(testcmd, "time", SimpleNamespace(monotonic=time.monotonic, sleep=sleep))


def test_an_exit_after_the_output_ends_is_waited_for_not_polled(
    tmp_path: Path, exit_wait: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _no_fixed_sleeps(monkeypatch)
    for command, code, output in [
        ("echo instant; exit 1", 1, "instant\n"),
        # end of output well before the exit: the runner must wait for the exit itself
        (
            f"echo closing; exec >&- 2>&-; {PY} -c 'import time; time.sleep(0.3)'; exit 3",
            3,
            "closing\n",
        ),
    ]:
        run = run_test_command(command, cwd=tmp_path, timeout_s=60)
        assert (run.exit_code, run.timed_out, run.output) == (code, False, output), exit_wait


def test_a_grandchild_holding_the_output_open_with_either_exit_wait(
    tmp_path: Path, exit_wait: str, leftover_pids: list[int]
) -> None:
    run = run_test_command("sleep 1000 & echo $! > child.pid; exit 4", cwd=tmp_path, timeout_s=60)
    leftover_pids.append(_wait_for_pid(tmp_path / "child.pid"))
    assert (run.exit_code, run.timed_out) == (4, False), exit_wait
    assert not _alive(leftover_pids[0])


def test_output_is_bounded_to_head_and_tail(tmp_path: Path) -> None:
    run = run_test_command("seq 1 200000", cwd=tmp_path, timeout_s=30, output_limit=10_000)
    full = "".join(f"{i}\n" for i in range(1, 200_001))
    omitted = len(full) - 10_000
    assert run.output == full[:2000] + f"\n... [{omitted} bytes omitted] ...\n" + full[-8000:]
    assert run.passed


def test_endless_output_still_times_out(tmp_path: Path) -> None:
    # endless output, and a file once 2,000 lines of it are out (more than the limit keeps)
    endless = "n=0; while :; do echo y; n=$((n+1)); [ $n = 2000 ] && echo $n > out; done"
    run = run_test_command(endless, cwd=tmp_path, timeout_s=0.5, output_limit=1000,
                           on_start=_once_written(tmp_path / "out"))  # fmt: skip
    assert run.timed_out
    assert run.output.startswith("y\ny\n")
    assert "bytes omitted" in run.output


def test_output_under_the_limit_is_kept_whole(tmp_path: Path) -> None:
    run = run_test_command("seq 1 1000", cwd=tmp_path, timeout_s=30, output_limit=10_000)
    assert run.output == "".join(f"{i}\n" for i in range(1, 1001))
    # 3-byte characters straddle the head/tail split at 2000 bytes; none may be broken
    (tmp_path / "euros.txt").write_text("\u20ac" * 3000, encoding="utf-8")
    euros = run_test_command("cat euros.txt", cwd=tmp_path, timeout_s=30, output_limit=10_000)
    assert euros.output == "\u20ac" * 3000


def test_binary_garbage_output(tmp_path: Path) -> None:
    script = tmp_path / "garbage.py"
    script.write_text(
        "import sys\n"
        "sys.stdout.buffer.write(bytes(range(256)) * 400 + b'\\xff\\xfe\\x00error: boom\\n')\n"
        "sys.exit(1)\n"
    )
    run = run_test_command(f"{PY} garbage.py", cwd=tmp_path, timeout_s=30, output_limit=50_000)
    assert run.exit_code == 1
    assert "\ufffd" in run.output
    assert "\x00" in run.output
    assert "omitted" in run.output
    assert any("error: boom" in line for line in run.error_lines)
    assert run.fingerprint


def test_missing_working_directory_is_reported_not_raised(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    run = run_test_command("true", cwd=missing, timeout_s=10)
    assert run.exit_code == 127
    assert not run.passed
    assert run.error_lines == [
        f"loopctl: cannot start the test command: the working directory {missing} does not exist"
    ]
    assert run.output.strip() == run.error_lines[0]
    assert run.fingerprint


def test_nul_in_command_is_reported_not_raised(tmp_path: Path) -> None:
    run = run_test_command("echo a\x00b", cwd=tmp_path, timeout_s=10)
    assert run.exit_code == 127
    assert run.error_lines[0].startswith("loopctl: cannot start the test command:")


def test_keyboard_interrupt_kills_the_group_and_propagates(
    tmp_path: Path, leftover_pids: list[int]
) -> None:
    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.4)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_test_command("sleep 1000 & echo $! > child.pid; wait", cwd=tmp_path, timeout_s=30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    child = _wait_for_pid(tmp_path / "child.pid")
    leftover_pids.append(child)
    assert not _alive(child)


# --- descendants that leave the group; interrupts while it starts; huge timeouts ---------------

ESCAPES = (
    # a group of its own in the command's session, with an empty environment
    f"{PY} -c \"import os; os.setpgid(0, 0); os.execve('/bin/sleep', ['sleep', '1000'], {{}})\" "
    "> /dev/null 2>&1 & echo $! > setpgid.pid; "
    # a session of its own, as daemons do (known by the variable loopctl gives the command)
    "setsid sh -c 'echo $$ > setsid.pid; exec sleep 1000' > /dev/null 2>&1 < /dev/null & "
    "while [ ! -s setsid.pid ]; do sleep 0.01; done; echo done"
)


def test_descendants_that_left_the_group_are_ended_and_reaped(
    tmp_path: Path, subreaper: None, leftover_pids: list[int]
) -> None:
    run = run_test_command(ESCAPES, cwd=tmp_path, timeout_s=60)
    escaped = [_wait_for_pid(tmp_path / name) for name in ("setpgid.pid", "setsid.pid")]
    leftover_pids.extend(escaped)
    assert run.passed, run.output
    for pid in escaped:  # gone, and not even a zombie waiting for this process to reap it
        assert not Path(f"/proc/{pid}").exists(), f"{pid} outlived the test command"


def test_an_interrupt_while_the_command_starts_ends_it_once_it_is_known(
    tmp_path: Path, leftover_pids: list[int]
) -> None:
    """A stop signal's handler raises through ``interrupt()``: while the command is being
    started (here: while the engine records its group) it waits, then ends the group."""
    groups: list[int] = []

    def on_start(pgid: int) -> None:
        groups.append(pgid)
        interrupt(KeyboardInterrupt())  # as the engine's handler does for SIGINT
        (tmp_path / "recorded").write_text("the interrupt waited for this")

    with pytest.raises(KeyboardInterrupt):
        run_test_command(
            "echo $$ > sh.pid; sleep 1000", cwd=tmp_path, timeout_s=60, on_start=on_start
        )
    assert (tmp_path / "recorded").exists()
    assert len(groups) == 1
    assert group_members(groups[0]) == []


@pytest.mark.parametrize("timeout_s", [math.inf, 1e7, 1e300, math.nan])
def test_timeouts_of_any_size_run_the_command_to_its_end(tmp_path: Path, timeout_s: float) -> None:
    run = run_test_command("echo fine", cwd=tmp_path, timeout_s=timeout_s)
    assert run.passed
    assert run.output == "fine\n"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="Linux /proc only")
def test_the_escaped_process_check_lists_this_process_children_without_scanning_proc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loopctl import procgroup

    running = subprocess.Popen(["sleep", "30"])
    exited = subprocess.Popen(["true"])
    os.waitid(os.P_PID, exited.pid, os.WEXITED | os.WNOWAIT)  # a zombie: exited, not reaped
    try:
        children = procgroup._child_pids()
        assert {running.pid, exited.pid} <= set(children)
        assert os.getppid() not in children  # only children, not every process on the machine
        # a kernel without the children files: every pid, which the caller then filters
        monkeypatch.setattr(procgroup, "_read", Mock(side_effect=FileNotFoundError))
        assert {running.pid, exited.pid, os.getppid()} <= set(procgroup._child_pids())
    finally:
        running.kill()
        running.wait()
        exited.wait()


def test_a_same_size_edit_within_the_same_second_is_tested_as_edited(tmp_path: Path) -> None:
    """Python trusts a cached .pyc whose source has the same size and whole-second mtime: the
    test command must not leave caches that hide an agent's quick same-size fix."""
    source = tmp_path / "calc.py"
    source.write_text("X = 1\n")
    command = f"{PY} -c 'import sys, calc; sys.exit(calc.X)'"
    caller = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    assert run_test_command(command, cwd=tmp_path, timeout_s=60, base_env=caller).exit_code == 1
    stamp = source.stat().st_mtime_ns
    source.write_text("X = 0\n")  # the fix: same size, and (forced here) the same mtime
    os.utime(source, ns=(stamp, stamp))
    assert run_test_command(command, cwd=tmp_path, timeout_s=60, base_env=caller).exit_code == 0
    # the user's own choice wins
    run = run_test_command(
        f"{PY} -c 'import sys; sys.exit(sys.dont_write_bytecode)'",
        cwd=tmp_path,
        timeout_s=60,
        env={"PYTHONDONTWRITEBYTECODE": ""},
    )
    assert run.exit_code == 0
