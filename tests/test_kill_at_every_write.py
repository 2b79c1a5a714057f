"""A loop SIGKILLed right after any one of its durable writes can be resumed to the end.

The test-only seam of :mod:`loopctl.state.faults` makes this exhaustive instead of random: one
run logs its durable writes (atomic rewrites and journal appends), then for N = 1 … every write
of the first two iterations a run is SIGKILLed right after its N-th write, and a plain
``loopctl resume`` (no flags) must finish the loop with exit 0, under the rules the run was
started with. Every setting comes from a flag, so a first write without them would be fatal
(the agent command, say: finding 2 of issue 12).
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from loopctl import records
from loopctl import state as st
from loopctl.history import RunTotals
from loopctl.state.faults import KILL_AFTER_WRITE_ENV, WRITE_LOG_ENV
from loopctl.testing import python_test_cmd

GOAL = "Make add() return the sum of its arguments."
SIGNAL = "ALL DONE"
#: Fixes the bug in iteration 2, says the completion signal from iteration 3 on: a resume that
#: dropped the signal would end at 2, one that dropped the agent command would fail.
AGENT = """\
import os, pathlib, sys
sys.stdin.read()
iteration = int(os.environ["LOOPCTL_ITERATION"])
if iteration >= 2:
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
print("ALL DONE" if iteration >= 3 else f"iteration {iteration}: looked at calc.py")
"""


def _run_flags(box: Any) -> list[str]:
    agent = box.root / "agent.py"
    agent.write_text(AGENT)
    return [
        "--agent-cmd",
        f"{shlex.quote(sys.executable)} {shlex.quote(str(agent))}",
        "--test-cmd",
        python_test_cmd(),
        "--completion-signal",
        SIGNAL,
        "--max-iterations",
        "6",
        "--no-plugins",
        "--json",
    ]


def _start_over(box: Any) -> None:
    for path in sorted(box.state_dir.glob("**/*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    box.project.write("calc.py", box.BUGGY_CALC)


def _loopctl(box: Any, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        box.argv(*args),
        cwd=box.path,
        env={**box.env(), **env},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _writes_of_the_first_iterations(box: Any, log: Path) -> list[str]:
    """The files of the durable writes up to the one that starts iteration 3, in order."""
    writes = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    events = box.events()
    third = next(
        i for i, e in enumerate(events) if e["type"] == "iteration.start" and e["iteration"] == 3
    )
    events_file = str(box.state_dir / st.EVENTS_FILE)
    appends = [n for n, path in enumerate(writes) if path == events_file]
    return writes[: appends[third] + 1]


def test_a_kill_after_any_durable_write_of_the_first_iterations_is_resumed(sandbox: Any) -> None:
    box = sandbox
    flags = _run_flags(box)
    log = box.root / "writes.log"
    whole = _loopctl(box, "run", GOAL, *flags, env={WRITE_LOG_ENV: str(log)})
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert [r["iteration"] for r in box.iterations()] == [1, 2, 3]
    writes = _writes_of_the_first_iterations(box, log)
    assert writes[0] == str(box.state_dir / st.LOOP_STATE_FILE)  # the first write is the state
    kinds = {Path(path).name for path in writes}
    assert {st.LOOP_STATE_FILE, st.EVENTS_FILE, st.ITERATIONS_FILE, st.PROGRESS_FILE} <= kinds
    assert st.ERROR_SUMMARY_FILE in kinds

    killed_after: dict[str, int] = {}
    for n in range(1, len(writes) + 1):
        _start_over(box)
        killed_log = box.root / f"writes-{n}.log"
        seam = {KILL_AFTER_WRITE_ENV: str(n), WRITE_LOG_ENV: str(killed_log)}
        killed = _loopctl(box, "run", GOAL, *flags, env=seam)
        last = killed_log.read_text().splitlines()[-1].split(" ", 1)
        where = f"killed after write {n} of {len(writes)} ({Path(last[1]).name})"
        assert killed.returncode == -signal.SIGKILL, f"{where}: exit {killed.returncode}"
        assert int(last[0]) == n, where
        state = box.loop_state()  # the first write is there, whole, with the run's settings
        assert state.settings is not None, where
        assert state.settings.config is not None, where
        assert state.settings.config["completion_signal"] == SIGNAL, where
        assert state.settings.agent == "command", where
        assert state.settings.agent_cmd == flags[1], where
        code, _data, err = box.status_in_process()
        assert code == 0, f"{where}: status: {err}"

        resumed = _loopctl(box, "resume", "--json", env={})
        assert resumed.returncode == 0, (
            f"{where}: resume exited {resumed.returncode}:\n" + (resumed.stderr[-3000:])
        )
        state = box.loop_state()
        assert state.status == "complete", where
        numbers = [r["iteration"] for r in box.iterations()]
        assert numbers == sorted(set(numbers)), f"{where}: {numbers}"
        assert numbers[-1] == 3, f"{where}: {numbers}"  # the completion signal was still needed
        assert box.project.read("calc.py") == box.FIXED_CALC, where
        resume = next(e for e in box.events() if e["type"] == "loop.resume")
        assert resume["changed"] == {}, where
        # the running summary resume continued from counts every record once, and no more
        summary = RunTotals.from_json(state.summary)
        journal = box.state_dir / st.ITERATIONS_FILE
        assert summary.journal_bytes == journal.stat().st_size, where
        expected = RunTotals.of(records.structure_record(r) for r in box.iterations())
        assert {**summary.to_json(), "journal_bytes": 0} == {
            **expected.to_json(),
            "journal_bytes": 0,
        }, where
        assert box.report()["tokens"] == expected.known_tokens, where
        assert not [
            e for e in box.events() if e["type"] == "loop.warning" and "summary" in e["message"]
        ], where
        name = Path(last[1]).name
        killed_after[name] = killed_after.get(name, 0) + 1

    print(f"\nkilled after each of {len(writes)} durable writes: {killed_after}")
