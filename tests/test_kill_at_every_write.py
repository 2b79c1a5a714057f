"""A loop SIGKILLed right after any one of its durable writes can be resumed to the end.

The test-only seam of :mod:`loopctl.state.faults` makes this systematic instead of random: one
run logs its durable writes (atomic rewrites and journal appends), then for each chosen N a run
is SIGKILLed right after its N-th write, and a plain ``loopctl resume`` (no flags) must finish
the loop with exit 0, under the rules the run was started with. Every setting comes from a
flag, so a first write without them would be fatal (the agent command, say: finding 2 of issue
12).

Which N: with ``LOOPCTL_KILL_EVERY_WRITE=1`` (``nox -s kill-campaign``) every write, the
exhaustive campaign; by default, in the suite, the first point of each kind
(:func:`kill_points`: the file just written and the file written next), about 10 of 23 writes
in the first test and 19 of 44 in the second (the counts vary a little with the background
writer): each iteration repeats the same sequences of writes, and the first occurrence of each pair is the one with the least behind it. What the
sample does not cover: the same pair later in the run (a later iteration, between two other
events of ``events.jsonl``). Run the campaign when the state files, the journal or resume
change.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopctl import records
from loopctl import state as st
from loopctl.history import RunTotals
from loopctl.state.faults import KILL_AFTER_WRITE_ENV, WRITE_LOG_ENV
from loopctl.testing import python_test_cmd

#: SIGKILL after each durable write: what survives a kill is the OS's and the file system's
#: (the writes themselves run on every Python in the state tests), so it runs once.
pytestmark = pytest.mark.process

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


#: ``1``: kill after every durable write, not after one of each kind (:func:`kill_points`).
EVERY_WRITE_ENV = "LOOPCTL_KILL_EVERY_WRITE"


def kill_points(writes: list[str]) -> list[int]:
    """The write numbers (from 1) a run is killed after: all of them with EVERY_WRITE_ENV=1;
    else the first of each kind, a kind being the file just written and the file written
    next (``events.jsonl`` then ``loop-state.md``: what a kill there leaves half-way)."""
    if os.environ.get(EVERY_WRITE_ENV) == "1":
        return list(range(1, len(writes) + 1))
    names = [*(Path(path).name for path in writes), "(the end)"]
    first: dict[tuple[str, str], int] = {}
    for n in range(1, len(writes) + 1):
        first.setdefault((names[n - 1], names[n]), n)
    return sorted(first.values())


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
    points = kill_points(writes)
    for n in points:
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

    print(f"\nkilled after {len(points)} of {len(writes)} durable writes: {killed_after}")


# --- the whole run, to its end, through a restart ---------------------------------------------------

#: The scripted agent appends each turn it plays here (``record_prompts``), with its session.
TURNS_FILE = "turns.jsonl"
SAY = {"say": "Looked at calc.py; not done yet."}
OVERFLOW = {"error": "context_overflow", "message": "prompt is too long"}


def _turns(box: Any) -> list[dict[str, Any]]:
    path = box.root / TURNS_FILE
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def _restarting_loop(box: Any) -> list[str]:
    """Iteration 1 fails, the agent runs out of context in 2 (the engine restarts the session),
    3 fixes the bug and says so; ``--session resume``: 2 continues 1's session. The flags."""
    box.configure(max_iterations=6)
    fix = [{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]
    box.script([[SAY], [OVERFLOW], fix], repeat_last=True, record_prompts=TURNS_FILE)
    return ["--json", "--no-plugins", "--session", "resume"]


def _check_the_end(box: Any, where: str) -> None:
    """The loop completed once, after one restart, with the same records as a run never
    killed, and every file says so."""
    state = box.loop_state()
    assert (state.status, state.iteration, state.restarts) == ("complete", 3, 1), where
    records = box.iterations()
    assert [(r["iteration"], r["decision"], r["restarts"]) for r in records] == [
        (1, "continue", 0),
        (2, "restart", 0),
        (3, "stop", 1),
    ], where
    assert (records[2]["status"], records[2]["message"]) == ("complete", "the tests pass"), where
    assert st.restart_numbers(box.state_dir) == [1], where
    events = box.events()
    # a kill between a restart's archive and its state's write makes resume restart again:
    # loop.restart is said once more, with the same number
    restarts = [e["number"] for e in events if e["type"] == "loop.restart"]
    assert restarts in ([1], [1, 1]), f"{where}: {restarts}"
    ends = [
        (e["status"], e["exit_code"], e["iterations"]) for e in events if e["type"] == "loop.end"
    ]
    assert ends == [("complete", 0, 3)], where
    report = box.report()
    assert (report["status"], report["iterations"], report["restarts"]) == ("complete", 3, 1), where
    progress = (box.state_dir / st.PROGRESS_FILE).read_text("utf-8")
    assert "complete: the tests pass" in progress, where
    assert box.project.read("calc.py") == box.FIXED_CALC, where
    code, data, err = box.status_in_process()
    assert code == 0, f"{where}: {err}"
    assert data is not None
    assert data["status"] == "complete", where


def test_a_kill_after_any_durable_write_of_a_whole_run_costs_no_extra_agent_turn(
    sandbox: Any,
) -> None:
    """Every durable write of a run that restarts once and completes, its end included (the
    stop record, the report, ``loop.end``, progress, the final state): killed right after it,
    the loop is resumed (or closed) with not one agent turn more than the kill cost (the turn
    in flight, redone), the restart carried out once, and never in the session it left."""
    box = sandbox
    flags = _restarting_loop(box)
    log = box.root / "writes.log"
    whole = _loopctl(box, "run", GOAL, *flags, env={WRITE_LOG_ENV: str(log)})
    assert whole.returncode == 0, whole.stderr[-3000:]
    _check_the_end(box, "the whole run")
    assert [t["turn"] for t in _turns(box)] == [1, 2, 3]
    writes = log.read_text().splitlines()

    phases: dict[str, int] = {}
    points = kill_points([line.split(" ", 1)[1] for line in writes])
    for n in points:
        _start_over(box)
        (box.root / TURNS_FILE).unlink(missing_ok=True)
        killed_log = box.root / f"writes-{n}.log"
        seam = {KILL_AFTER_WRITE_ENV: str(n), WRITE_LOG_ENV: str(killed_log)}
        killed = _loopctl(box, "run", GOAL, *flags, env=seam)
        last = killed_log.read_text().splitlines()[-1].split(" ", 1)
        events = box.events()
        phase = f"{Path(last[1]).name} after {events[-1]['type'] if events else 'nothing'}"
        where = f"killed after write {n} of {len(writes)} ({phase})"
        if killed.returncode == 0:  # this run wrote less (two rewrites folded into one)
            assert int(last[0]) < n, where
            _check_the_end(box, where)
            continue
        assert killed.returncode == -signal.SIGKILL, f"{where}: exit {killed.returncode}"
        phases[phase] = phases.get(phase, 0) + 1
        recorded = [r["iteration"] for r in box.iterations()]
        played = _turns(box)
        in_flight = len(played) - len(recorded)
        assert in_flight in (0, 1), f"{where}: {len(played)} turns, {recorded} recorded"

        code, data, err = box.status_in_process()
        assert code == 0, f"{where}: status: {err}"
        assert data is not None
        if any(e["type"] == "loop.end" for e in events):
            assert data["status"].startswith("complete"), f"{where}: {data['status']}"
        if box.loop_state().status != "complete":  # else killed after the final state
            resumed = _loopctl(box, "resume", "--json", env={})
            assert resumed.returncode == 0, f"{where}: resume: {resumed.stderr[-3000:]}"

        again = _turns(box)[len(played) :]
        # only what was not recorded runs again: the turn in flight, then the rest
        assert [t["turn"] for t in again] == list(range(len(recorded) + 1, 4)), f"{where}: {again}"
        left = {t["session_id"] for t in _turns(box) if t["turn"] <= 2}
        assert not [t for t in _turns(box) if t["turn"] == 3 and t["session_id"] in left], where
        _check_the_end(box, where)

    print(f"\nkilled after {len(points)} of {len(writes)} durable writes: {phases}")
