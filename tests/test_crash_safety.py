"""A loop survives being killed: SIGKILL it at random points many times, check after every kill
that every state file still parses, and that ``loopctl resume`` then finishes the loop.

The random kill points come from a seeded generator, so a failure names its round and can be
replayed; the state of the machine (how far a loop gets in a given time) still varies, which is
the point: each run of this test hits a different spread of phases.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopctl import state as st

pytestmark = pytest.mark.timing  # SIGKILLs at random moments, orphans awaited

#: A goal that is hard to keep byte-exact: CRLF, a front-matter fence, quotes, backslashes,
#: a tab, non-ASCII, an astral character, a Unicode line separator, trailing spaces.
GOAL = (
    "Make `add` correct.\r\n---\n"
    'keep "quotes", back\\slash, tab\there, ünïcødé ✓ 🚀 \u2028 and\n'
    "  trailing spaces   \n"
)
GOAL_FIRST_LINE = "Make `add` correct."
SEED = 1234
ROUNDS = 15
KILL_AFTER_S = (0.05, 1.5)
#: How long an agent orphaned by the kill may take to notice and exit.
ORPHAN_GRACE_S = 5.0
MAX_ITERATIONS = 20
#: What loop-state.md may say after a SIGKILL: the loop did not end, or it had just completed.
KILLED_STATUSES = ("running", "restarting", "complete")
ERROR_SUMMARY_KEYS = {"iteration", "error_count", "error_lines", "test_cmd"}
_TEMP_FILE = re.compile(r"\.(.+)\.(\d+)\.[0-9a-f]{8}\.tmp")
_PROBLEM_LINE = re.compile(r"(\S+) line (\d+): ")


def progress_scenario(fix: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Six turns: five that make visible progress (files, usage, a tool call) with short sleeps
    so kills land in every phase, then one that fixes the bug and says it is done."""
    turns: list[list[dict[str, Any]]] = []
    for step in range(1, 6):
        turns.append(
            [
                {"say": f"Step {step}: reading the failing test."},
                {"write": f"notes/step-{step}.md", "content": f"# Step {step}\n" + "done\n" * step},
                {"sleep": 0.03},
                {"usage": {"input_tokens": 1000 * step, "output_tokens": 150}},
                {"run": f"echo checked step {step}"},
                {"sleep": 0.05},
                {"say": f"Step {step} finished; the fix comes later."},
                {"sleep": 0.02},
            ]
        )
    turns.append(
        [
            {"say": "Fixing add()."},
            {"sleep": 0.05},
            fix,
            {"usage": {"input_tokens": 7000, "output_tokens": 200}},
            {"sleep": 0.05},
            {"done": True},
        ]
    )
    return turns


class Epoch:
    """One loop from ``run`` to completion, across however many kills and resumes it takes."""

    def __init__(self) -> None:
        self.kills = 0
        self.seen: set[str] = set()  # state files that existed after some kill: must stay
        self.torn: dict[str, set[int]] = {st.EVENTS_FILE: set(), st.ITERATIONS_FILE: set()}


def _line_count(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            state = handle.read().rpartition(b")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X", b"x")


def check_state_files(box: Any, epoch: Epoch, where: str) -> st.LoopState | None:
    """Every state file a reader might open is whole and valid; returns loop-state.md's state
    (None before the first state write of the loop)."""
    state_dir = box.state_dir
    names = set(os.listdir(state_dir)) if state_dir.is_dir() else set()
    for name in sorted(names - box.STATE_NAMES):
        temp = _TEMP_FILE.fullmatch(name)
        # Leftovers of a writer killed mid-write are hidden, say .tmp, and name a dead pid;
        # `.write-test` is the start-up writability probe.
        assert temp is not None or name == ".write-test", f"{where}: stray file {name!r}"
        if temp is not None:
            assert temp.group(1) in box.STATE_NAMES, (
                f"{where}: temp file of an unknown file {name!r}"
            )
            assert not _pid_alive(int(temp.group(2))), f"{where}: {name} belongs to a live pid"
    for name in epoch.seen:
        assert name in names, f"{where}: {name} existed after an earlier kill and is now gone"

    state: st.LoopState | None = None
    if st.LOOP_STATE_FILE in names:
        state = st.read_loop_state(state_dir / st.LOOP_STATE_FILE)  # raises if unparseable
        assert state.original_goal == GOAL, f"{where}: original goal changed"
        assert state.goal == GOAL, f"{where}: working goal changed (no plugin edits it here)"
        assert state.status in KILLED_STATUSES, f"{where}: status {state.status!r}"
        assert 0 <= state.iteration <= MAX_ITERATIONS, f"{where}: iteration {state.iteration}"

    if st.ERROR_SUMMARY_FILE in names:
        path = state_dir / st.ERROR_SUMMARY_FILE
        raw = json.loads(path.read_text("utf-8"))
        assert isinstance(raw, dict), f"{where}: error-summary.json is not an object"
        assert set(raw) == ERROR_SUMMARY_KEYS, f"{where}: error-summary.json keys {sorted(raw)}"
        summary = st.read_error_summary(path)
        assert summary is not None
        assert summary["error_count"] == len(summary["error_lines"]), where
        assert summary["iteration"] >= 0, where  # 0: the tests run before the first turn

    if st.PROGRESS_FILE in names:
        text = (state_dir / st.PROGRESS_FILE).read_text("utf-8")
        assert text.startswith("# loopctl progress\n"), f"{where}: progress.md is {text[:80]!r}"
        assert GOAL_FIRST_LINE in text, f"{where}: progress.md lost the goal"

    records_by_file: dict[str, list[dict[str, Any]]] = {}
    torn_from_end: set[str] = set()  # the bad lines as `status` names them, counting from the end
    for name in (st.EVENTS_FILE, st.ITERATIONS_FILE):
        if name not in names:
            records_by_file[name] = []
            continue
        path = state_dir / name
        read = st.read_jsonl(path)
        bad: set[int] = set()
        for problem in read.problems:
            match = _PROBLEM_LINE.match(problem)
            assert match is not None, f"{where}: {problem}"
            assert match.group(1) == name, f"{where}: {problem}"
            bad.add(int(match.group(2)))
        # Only the last line may be torn by this kill; lines torn by earlier kills stay where
        # they were (the next writer starts a new line after them).
        allowed = epoch.torn[name] | {_line_count(path)}
        assert bad <= allowed, f"{where}: {name} has bad lines {sorted(bad - allowed)}"
        epoch.torn[name] |= bad
        records_by_file[name] = read.records
        count = _line_count(path)
        torn_from_end |= {
            f"{name}, the last line" if n == count else f"{name}, line {count - n + 1} from the end"
            for n in bad
        }

    for event in records_by_file[st.EVENTS_FILE]:
        assert isinstance(event.get("type"), str), f"{where}: event without a type: {event}"
        assert isinstance(event.get("ts"), (int, float)), f"{where}: event without ts: {event}"
    raw_numbers = [record.get("iteration") for record in records_by_file[st.ITERATIONS_FILE]]
    numbers = [n for n in raw_numbers if isinstance(n, int)]
    assert numbers == raw_numbers, f"{where}: iteration numbers {raw_numbers}"
    assert numbers == sorted(set(numbers)), f"{where}: iterations not increasing: {numbers}"
    if numbers:  # else `loopctl run` would start over beside the journal of this loop
        assert state is not None, f"{where}: iterations recorded but no loop-state.md"

    code, data, err = box.status_in_process()
    if state is None:
        assert code == 2, f"{where}: status without a loop exited {code}: {err}"
        assert "no loop" in err, f"{where}: {err}"
    else:
        assert code == 0, f"{where}: `loopctl status --json` failed ({code}): {err}"
        assert data is not None
        assert data["running"] is False, f"{where}: the lock outlived the killed loop"
        assert data["state"]["original_goal"] == GOAL, where
        # a loop killed after it recorded its end is said to have ended so, not to have died
        said = data["ended"]["status"] if data["ended"] else state.status
        assert data["status"].startswith(said), where
        # status reports the torn lines it meets at the end of the journals, and nothing else
        named = {problem.split(": ", 1)[0] for problem in data["problems"]}
        assert named <= torn_from_end, f"{where}: {data['problems']}"

    epoch.seen |= names & {
        st.LOOP_STATE_FILE,
        st.ERROR_SUMMARY_FILE,
        st.PROGRESS_FILE,
        st.EVENTS_FILE,
        st.ITERATIONS_FILE,
    }
    return state


def check_completed(box: Any, epoch: Epoch, where: str, *, exited: bool) -> None:
    """The loop finished: status complete, goal intact, iterations in order with at most one
    lost per kill, and the bug fixed. ``exited``: the process ended by itself (so its report
    and final event were written, not cut off by a kill)."""
    state = box.loop_state()
    assert state.status == "complete", where
    assert state.original_goal == GOAL, where
    records = box.iterations()
    numbers = [record["iteration"] for record in records]
    assert numbers, f"{where}: no iterations recorded"
    assert numbers == sorted(set(numbers)), f"{where}: iterations not increasing: {numbers}"
    missing = sorted(set(range(1, numbers[-1] + 1)) - set(numbers))
    assert len(missing) <= epoch.kills, f"{where}: lost {missing} with {epoch.kills} kills"
    starts = [e for e in box.events() if e.get("type") == "iteration.start"]
    # Each kill may cost the one iteration in flight: started, never recorded, redone.
    assert len(starts) - len(records) <= epoch.kills, (
        f"{where}: {len(starts)} iterations started, {len(records)} recorded, {epoch.kills} kills"
    )
    last = records[-1]
    assert last["tests_passed"] is True, where
    assert (last["decision"], last["reason"]) == ("stop", "complete"), where
    assert box.project.read("calc.py") == box.FIXED_CALC, where
    if exited:
        report = box.report()
        assert (report["status"], report["exit_code"]) == ("complete", 0), where
        assert report["goal"] == GOAL, f"{where}: report.json goal changed"
        final = box.events()[-1]
        assert (final["type"], final["status"]) == ("loop.end", "complete"), where
    status = box.status()  # the real command, once per finished loop
    assert status["running"] is False, where
    assert status["status"] == "complete", where
    assert status["state"]["original_goal"] == GOAL, where


def next_command(box: Any) -> list[str]:
    if not (box.state_dir / st.LOOP_STATE_FILE).exists():
        return ["run", GOAL, "--json", "--no-plugins"]  # killed before its first state write
    return ["resume", "--json", "--no-plugins"]


def _phase(box: Any, events_before: int) -> str:
    """What the loop was doing when it was killed: its last event of this round."""
    new = box.events()[events_before:]
    return str(new[-1].get("type")) if new else "start-up"


def test_sigkill_at_random_points_then_resume_finishes(sandbox: Any) -> None:
    box = sandbox
    box.configure(max_iterations=MAX_ITERATIONS)
    box.script(progress_scenario(box.FIX_ACTION), repeat_last=True)
    rng = random.Random(SEED)
    epoch = Epoch()
    phases: dict[str, int] = {}
    kills = 0
    finished_by_resume = 0

    for round_number in range(1, ROUNDS + 1):
        command = next_command(box)
        events_before = len(box.events())
        delay = rng.uniform(*KILL_AFTER_S)
        # Every third round counts from the spawn, so start-up (lock, reading the state) gets
        # its share of kills however slow the machine; the others count from the loop's first
        # event, so most kills land in the loop's phases on a slow machine too.
        from_spawn = round_number % 3 == 1
        proc = box.spawn(*command)
        # a loop killed after its loop.end is closed by resume with no loop.resume event
        ended = command[0] == "resume" and [e["type"] for e in box.events()][-1:] == ["loop.end"]
        if not from_spawn and not ended:
            first = "loop.start" if command[0] == "run" else "loop.resume"
            box.wait_for_event(first, proc, after=events_before, timeout=30)
        try:
            proc.wait(timeout=delay)
            killed = False
        except subprocess.TimeoutExpired:
            box.kill_loop(proc)
            killed = True
        since = "its start" if from_spawn else "the loop's first event"
        where = f"round {round_number} (`loopctl {command[0]}`, kill {delay:.2f} s after {since})"
        if killed:
            kills += 1
            epoch.kills += 1
            phase = _phase(box, events_before)
            phases[phase] = phases.get(phase, 0) + 1
            where += f" in phase {phase}"
        else:
            assert proc.returncode == 0, (
                f"{where}: exited {proc.returncode}:\n{box.output_of(proc)}"
            )

        left = box.wait_for_no_processes(ORPHAN_GRACE_S)
        assert not left, f"{where}: still running {ORPHAN_GRACE_S:g} s after the kill: {left}"
        state = check_state_files(box, epoch, where)

        if not killed:  # it finished before its kill came
            assert state is not None, where
            assert state.status == "complete", where
        if state is not None and state.status == "complete":
            check_completed(box, epoch, where, exited=not killed)
            finished_by_resume += command[0] == "resume"
            # Start over: a new loop, from scratch, over the same project.
            shutil.rmtree(box.state_dir)
            shutil.rmtree(box.path / "notes", ignore_errors=True)
            box.project.write("calc.py", box.BUGGY_CALC)
            epoch = Epoch()

    if box.state_dir.exists():  # the last loop is unfinished: resume (or re-run) it to the end
        command = next_command(box)
        done = box.run(*command, timeout=60)
        where = f"final `loopctl {command[0]}`"
        assert done.returncode == 0, f"{where}: exited {done.returncode}:\n{done.stderr[-3000:]}"
        assert not box.wait_for_no_processes(ORPHAN_GRACE_S), where
        check_state_files(box, epoch, where)
        check_completed(box, epoch, where, exited=True)
        finished_by_resume += command[0] == "resume"

    assert finished_by_resume >= 1, "no loop was ever finished by `loopctl resume`"
    assert kills >= ROUNDS // 2, f"only {kills} of {ROUNDS} rounds were killed: too fast"
    assert "agent.start" in phases, f"no kill hit an agent turn: {phases}"


# --- the rare kill points, made deterministic ----------------------------------------------------
#
# A random SIGKILL almost never lands inside a write of a few hundred bytes, so the two things such
# a kill leaves behind are planted by hand here: a torn last JSONL line, and the temp file of an
# atomic write that never got renamed.


def _killed_in_iteration_two(box: Any) -> None:
    """Leave a loop SIGKILLed while iteration 2's agent is running (iteration 1 recorded)."""
    box.configure(max_iterations=MAX_ITERATIONS)
    box.script(
        [
            [{"say": "Step 1."}, {"usage": {"input_tokens": 900, "output_tokens": 90}}],
            # The orphaned agent wakes up, finds its reader gone and exits by itself.
            [{"say": "Step 2."}, {"sleep": 0.3}, {"say": "Step 2 finished."}],
            [{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}],
        ],
        repeat_last=True,
    )
    proc = box.spawn("run", GOAL, "--json", "--no-plugins")
    first_end = box.wait_for_event("iteration.end", proc)
    assert first_end["iteration"] == 1
    starts = box.events().index(first_end)
    box.wait_for_event("agent.start", proc, after=starts)
    box.kill_loop(proc)
    left = box.wait_for_no_processes(ORPHAN_GRACE_S)
    assert not left, f"the orphaned agent outlived the kill by {ORPHAN_GRACE_S:g} s: {left}"
    assert [r["iteration"] for r in box.iterations()] == [1]
    assert box.loop_state().status == "running"


def _append_torn(path: Path, record: dict[str, Any]) -> int:
    """Append the first half of ``record``'s JSON line, as a kill mid-write would; returns the
    number of the torn line."""
    line = json.dumps(record, separators=(",", ":")).encode()
    with open(path, "ab") as stream:
        stream.write(line[: len(line) // 2])
    return _line_count(path)


def test_resume_after_a_torn_last_line_redoes_that_iteration(sandbox: Any) -> None:
    box = sandbox
    _killed_in_iteration_two(box)
    iterations_file = box.state_dir / st.ITERATIONS_FILE
    events_file = box.state_dir / st.EVENTS_FILE
    torn_record = {**box.iterations()[0], "iteration": 2}
    torn_iteration_line = _append_torn(iterations_file, torn_record)
    torn_event_line = _append_torn(
        events_file, {"type": "iteration.end", "ts": 1.0, "iteration": 2}
    )

    code, data, err = box.status_in_process()
    assert code == 0, err
    assert data is not None
    assert data["running"] is False
    assert [r["iteration"] for r in data["recent"]] == [1]  # the torn line is skipped

    done = box.run("resume", "--json", "--no-plugins")
    assert done.returncode == 0, done.stderr[-3000:]
    assert box.loop_state().status == "complete"
    assert box.loop_state().original_goal == GOAL

    read = st.read_jsonl(iterations_file)
    assert read.problems == [
        f"iterations.jsonl line {torn_iteration_line}: not valid JSON (torn write?)"
    ]
    assert [r["iteration"] for r in read.records] == [1, 2, 3]  # 2 was in flight: redone
    events = st.read_jsonl(events_file)
    assert events.problems == [f"events.jsonl line {torn_event_line}: not valid JSON (torn write?)"]
    assert events.records[-1]["type"] == "loop.end"
    assert events.records[-1]["status"] == "complete"
    assert box.report()["goal"] == GOAL


def test_resume_removes_temp_files_a_killed_writer_left(sandbox: Any) -> None:
    box = sandbox
    box.configure(max_iterations=MAX_ITERATIONS)
    box.script([[{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]])
    gone = subprocess.Popen(["true"])
    gone.wait()
    # What a loop killed in its first iteration leaves: loop-state.md says running, by a dead pid.
    box.state_dir.mkdir()
    state = st.LoopState(
        goal=GOAL,
        original_goal=GOAL,
        iteration=1,
        status="running",
        agent="scripted",
        test_cmd=box.test_cmd,
        workdir=str(box.path),
        pid=gone.pid,
        max_iterations=MAX_ITERATIONS,
    )
    st.write_loop_state(box.state_dir / st.LOOP_STATE_FILE, state)
    dead = [
        box.state_dir / f".{st.LOOP_STATE_FILE}.{gone.pid}.0badc0de.tmp",
        box.state_dir / f".{st.PROGRESS_FILE}.{gone.pid}.deadbeef.tmp",
    ]
    live = box.state_dir / f".{st.ERROR_SUMMARY_FILE}.{os.getpid()}.01234567.tmp"
    for path in [*dead, live]:
        path.write_text('---\ngoal: "half a write', encoding="utf-8")

    done = box.run("resume", "--json", "--no-plugins")
    assert done.returncode == 0, done.stderr[-3000:]
    assert box.loop_state().status == "complete"
    assert box.loop_state().original_goal == GOAL
    assert live.exists(), "a temp file of a live writer must be left alone"
    assert [p.name for p in dead if p.exists()] == []
