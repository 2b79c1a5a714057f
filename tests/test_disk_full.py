"""A full disk ends the loop with its own status (``disk_full``, exit 18) and one line for the
user, no traceback; nothing is left torn that ``resume`` cannot read, and ``resume`` completes
the loop once there is space again.

Two ways to fill the disk: a simulated one at the state writers' seam (every write of a state
file goes through ``loopctl.state.files._write``), swept across the whole run so the disk fills
up at every kind of write; and a real tmpfs of a few hundred KB (root only), filled by the test
command itself, run through the real ``loopctl`` command.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loopctl import state as st
from loopctl.cli.app import main
from loopctl.model import EXIT_CODES
from loopctl.testing import python_test_cmd

DISK_FULL_EXIT = EXIT_CODES["disk_full"]
#: What the one line tells the user to do next.
NEXT = {
    "loopctl resume": "continue the loop with `loopctl resume`",
    "loopctl run": "start it with `loopctl run`",
}
GOAL = "make add work"


class FillingDisk:
    """``os.write`` for the state files on a disk with ``room`` bytes left (None: unlimited).
    A write that does not fit writes what fits; the next one fails with ENOSPC, as a real
    disk does."""

    def __init__(self, room: int | None = None) -> None:
        self.room = room
        self.written = 0
        self.failed = 0

    def __call__(self, fd: int, data: Any) -> int:
        if self.room is not None and self.room <= 0:
            self.failed += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if self.room is not None:
            data = data[: self.room]
        written = os.write(fd, data)
        self.written += written
        if self.room is not None:
            self.room -= written
        return written


@pytest.fixture
def box(sandbox: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The sandbox project, a two-turn scenario, and cwd in the project for in-process runs."""
    sandbox.configure(max_iterations=5)
    sandbox.script(
        [
            [{"say": "Looking at add()."}, {"usage": {"input_tokens": 900, "output_tokens": 90}}],
            [  # idempotent, so a resume that redoes it still ends the same way
                {"write": "calc.py", "content": sandbox.FIXED_CALC},
                {"done": True},
            ],
        ]
    )
    monkeypatch.chdir(sandbox.path)
    for name in list(os.environ):
        if name.startswith("LOOPCTL_"):
            monkeypatch.delenv(name)
    return sandbox


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@contextlib.contextmanager
def disk(monkeypatch: pytest.MonkeyPatch, room: int | None) -> Iterator[FillingDisk]:
    fake = FillingDisk(room)
    with monkeypatch.context() as patch:
        patch.setattr("loopctl.state.files._write", fake)
        yield fake


def assert_journals_whole(state_dir: Path) -> None:
    """Every line of both journals is a whole JSON object: nothing torn is left behind."""
    for name in (st.EVENTS_FILE, st.ITERATIONS_FILE):
        read = st.read_jsonl(state_dir / name)
        assert read.problems == [], (name, read.problems)
        data = (state_dir / name).read_bytes() if (state_dir / name).exists() else b""
        assert data == b"" or data.endswith(b"\n"), name


def assert_one_line_no_traceback(out: str, err: str, then: str = "loopctl resume") -> None:
    """No traceback; the run's summary is one line that says what to do (the live view's own
    lines, stamped ``[hh:mm:ss]``, may show the loop.end event too)."""
    assert "Traceback" not in out + err
    said = [
        line
        for line in (out + err).splitlines()
        if "disk is full" in line and not line.startswith("[")
    ]
    assert len(said) == 1, out + err
    assert said[0].startswith("disk_full: the disk is full: cannot write "), said[0]
    assert said[0].endswith(f"free some space, then {NEXT[then]}"), said[0]
    assert "(the loop goes on)" not in out + err  # no write error or plugin failure on top


def test_the_simulated_disk_sees_every_state_write(
    box: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The seam is real: a whole run writes its state through it (else the sweep tests
    nothing)."""
    with disk(monkeypatch, None) as fake:
        code, _out, err = run_main(capsys, "run", GOAL)
    assert code == 0, err
    journals = sum((box.state_dir / n).stat().st_size for n in (st.EVENTS_FILE, st.ITERATIONS_FILE))
    assert fake.written > journals > 0


def _total_bytes(box: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> int:
    with disk(monkeypatch, None) as fake:
        code, _out, err = run_main(capsys, "run", GOAL)
    assert code == 0, err
    shutil.rmtree(box.state_dir)
    box.project.write("calc.py", box.BUGGY_CALC)
    return fake.written


#: Where the disk fills up, as a fraction of what a whole run writes. (A run writes a few KB
#: less when the background writer folds two rewrites of a file into one, so near the end the
#: disk may not fill up at all.)
FRACTIONS = (0.0, 0.02, 0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 0.93)


@pytest.mark.parametrize("fraction", FRACTIONS)
def test_a_disk_that_fills_up_anywhere_in_the_run_ends_it_cleanly_and_resume_finishes(
    box: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fraction: float
) -> None:
    room = int(_total_bytes(box, monkeypatch, capsys) * fraction)
    with disk(monkeypatch, room) as fake:
        code, out, err = run_main(capsys, "run", GOAL)
    assert fake.failed or fraction > 0.9, "the disk never filled up"
    assert_journals_whole(box.state_dir)
    if code == 0:  # it filled up after the loop's own last word: the report, say
        assert "Traceback" not in out + err
        return
    assert code == DISK_FULL_EXIT, out + err
    ends = [e for e in box.events() if e["type"] == "loop.end"]
    assert ends == [] or ends[-1]["status"] == "disk_full"
    if not (box.state_dir / st.LOOP_STATE_FILE).exists():  # full before the loop was saved
        assert_one_line_no_traceback(out, err, then="loopctl run")
        code, out, err = run_main(capsys, "run", GOAL)  # space is back
        assert code == 0, out + err
        return
    assert_one_line_no_traceback(out, err)
    status = box.loop_state().status  # the old state file, or the final one: both readable
    assert status in ("running", "restarting", "disk_full"), status
    status_code, data, status_err = box.status_in_process()
    assert status_code == 0, status_err
    assert data is not None
    assert data["problems"] == []

    # space is back
    code, out, err = run_main(capsys, "resume")
    assert code == 0, out + err
    assert box.loop_state().status == "complete"
    assert_journals_whole(box.state_dir)
    assert box.events()[-1]["type"] == "loop.end"
    assert box.events()[-1]["exit_code"] == 0


def test_a_write_that_fails_once_still_gets_loop_end_and_the_report(
    box: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The disk was full for one write (another process freed space right after): the loop
    stops with disk_full, and loop.end, the report and the final state are written."""
    calls = {"n": 0}
    real = FillingDisk(None)

    def once(fd: int, data: Any) -> int:
        calls["n"] += 1
        if calls["n"] == 12:  # in the first iteration, after the run has started
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(fd, data)

    with monkeypatch.context() as patch:
        patch.setattr("loopctl.state.files._write", once)
        code, out, err = run_main(capsys, "run", GOAL)
    assert code == DISK_FULL_EXIT, out + err
    assert_one_line_no_traceback(out, err)
    assert "report: " in out  # written, so named
    end = box.events()[-1]
    assert (end["type"], end["status"], end["exit_code"]) == ("loop.end", "disk_full", 18)
    assert box.loop_state().status == "disk_full"
    assert "disk_full" in (box.state_dir / st.PROGRESS_FILE).read_text(encoding="utf-8")
    assert box.report()["status"] == "disk_full"
    assert "Free some space" in box.report()["next"]
    assert_journals_whole(box.state_dir)
    assert run_main(capsys, "run", GOAL)[0] == 2  # unfinished: `run` will not start over it
    code, out, err = run_main(capsys, "resume")
    assert code == 0, out + err


def test_an_append_cut_short_by_a_full_disk_leaves_no_partial_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "events.jsonl"
    appender = st.JsonlAppender(path)
    appender.append({"type": "first"})
    # 10 bytes fit: part of the line is written, then ENOSPC
    with disk(monkeypatch, 10), pytest.raises(OSError) as info:
        appender.append({"type": "second", "data": "x" * 100})
    assert info.value.errno == errno.ENOSPC
    assert info.value.filename == str(path)  # the message can say which file
    assert path.read_bytes() == b'{"type":"first"}\n'  # cut back to the last whole line
    appender.append({"type": "third"})
    appender.close()
    assert st.read_jsonl(path).records == [{"type": "first"}, {"type": "third"}]
    assert st.read_jsonl(path).problems == []


def test_an_atomic_write_on_a_full_disk_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "loop-state.md"
    st.atomic_write_text(path, "old\n")
    with disk(monkeypatch, 3), pytest.raises(OSError) as info:
        st.atomic_write_text(path, "new and longer\n")
    assert info.value.filename == str(path)
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop-state.md"]  # no temp file left


# --- a real full disk ---------------------------------------------------------------------------


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 512 KB tmpfs (root only), unmounted afterwards."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs needs root")
    point = tmp_path / "small-disk"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", f"tmpfs-{uuid.uuid4().hex[:8]}", str(point)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield point
    finally:
        subprocess.run(["umount", "-l", str(point)], check=False)


def test_a_real_full_disk_exits_18_with_one_line_and_resume_finishes(
    sandbox: Any, tmpfs: Path
) -> None:
    """The state directory on a 512 KB tmpfs; the test command fills it on its second run
    (the first iteration's state is written, the second iteration's is not), the way a test
    suite that writes a big file would. Then the file is removed and `resume` completes."""
    filler = tmpfs / "filler"
    fill = (  # the second run of the tests fills the disk, once
        f"if [ -e {tmpfs}/ran-once ] && [ ! -e {tmpfs}/filled ]; then touch {tmpfs}/filled; "
        f"dd if=/dev/zero of={filler} bs=4k 2>/dev/null; else touch {tmpfs}/ran-once; fi; "
    )
    # counted from the first turn: the tests before it would be the first run
    sandbox.configure(test_cmd=fill + python_test_cmd(), max_iterations=5, test_first=False)
    sandbox.script(
        [
            [{"say": "Looking at add()."}],
            [{"say": "Still looking."}],
            [{"write": "calc.py", "content": sandbox.FIXED_CALC}, {"done": True}],
        ]
    )
    state_dir = tmpfs / "state"
    done = sandbox.run("run", GOAL, "--state-dir", str(state_dir))
    assert done.returncode == DISK_FULL_EXIT, done.stdout + done.stderr
    assert_one_line_no_traceback(done.stdout, done.stderr)
    sandbox.state_dir = state_dir
    assert_journals_whole(state_dir)
    assert [r["iteration"] for r in sandbox.iterations()][:1] == [1]
    assert sandbox.run("status", "--state-dir", str(state_dir)).returncode == 0

    filler.unlink()  # space is back
    done = sandbox.run("resume", "--state-dir", str(state_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    assert sandbox.loop_state().status == "complete"
    assert_journals_whole(state_dir)
    assert sandbox.events()[-1]["type"] == "loop.end"
