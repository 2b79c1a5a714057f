"""``loopctl resume`` continues exactly the loop that was running, and nothing else.

- A loop killed after it recorded its ending (its last iteration's stop decision in
  ``iterations.jsonl``, or ``loop.end`` in ``events.jsonl``) but before ``loop-state.md`` said
  so is closed by ``resume``: no agent turn, no test run, no second ``loop.end``; ``status``
  says how it ended, not that it died.
- A restart the loop decided but did not carry out (killed right after the decision, or the
  disk filled up during the restart) is carried out by ``resume`` before any agent turn, and the
  session it was meant to leave is never resumed.
- A fresh ``run`` sets the earlier run's files aside: its report and counters are its own.

The kills are exact: the test-only seam of :mod:`loopctl.state.faults` SIGKILLs the run right
after the durable write named (its number found in a run that logged its writes). The scripted
agent records every turn it plays (``record_prompts``), so the tests count the agent's turns.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loopctl import state as st
from loopctl.model import EXIT_CODES
from loopctl.state.faults import KILL_AFTER_WRITE_ENV

GOAL = "Make add() return the sum of its arguments."
SAY = {"say": "Looked at calc.py; not done yet."}
OVERFLOW = {"error": "context_overflow", "message": "prompt is too long"}
TURNS_FILE = "turns.jsonl"


def _script(box: Any, *turns: list[dict[str, Any]]) -> None:
    box.script(list(turns), repeat_last=True, record_prompts=TURNS_FILE)


def _fix(box: Any) -> list[dict[str, Any]]:
    return [{"say": "Fixing add()."}, box.FIX_ACTION, {"done": True}]


def turns(box: Any) -> list[dict[str, Any]]:
    """The agent turns played so far: ``{"turn", "session_id"}`` each, in order."""
    path = box.root / TURNS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def _loopctl(
    box: Any, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        box.argv(*args),
        cwd=box.path,
        env={**box.env(), **(env or {})},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _start_over(box: Any) -> None:
    for path in sorted(box.state_dir.glob("**/*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (box.root / TURNS_FILE).unlink(missing_ok=True)
    box.project.write("calc.py", box.BUGGY_CALC)


def append_of(name: str, nth: Callable[[list[dict[str, Any]]], int]) -> Callable[..., str]:
    """The write that appended line ``nth(events)`` (0-based) to the journal ``name``, as the
    kill seam names it (``N@NAME``: the writes to one file keep their order from run to run,
    the background writer's interleave with the loop's differently)."""

    def found(events: list[dict[str, Any]]) -> str:
        return f"{nth(events) + 1}@{name}"

    return found


def the_event(type: str) -> Callable[[list[dict[str, Any]]], int]:
    return lambda events: next(i for i, e in enumerate(events) if e["type"] == type)


def killed_after(box: Any, flags: list[str], found: Callable[..., str]) -> int:
    """Run the loop once whole; start over and run it again, SIGKILLed right after the write
    ``found(events)`` names. Returns the whole run's exit code."""
    whole = _loopctl(box, "run", GOAL, *flags)
    spec = found(box.events())
    _start_over(box)
    killed = _loopctl(box, "run", GOAL, *flags, env={KILL_AFTER_WRITE_ENV: spec})
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    return whole.returncode


def loop_ends(box: Any) -> list[dict[str, Any]]:
    return [e for e in box.events() if e["type"] == "loop.end"]


@pytest.mark.parametrize(
    "kill_after",
    [
        pytest.param(append_of(st.ITERATIONS_FILE, lambda events: 1), id="the-stop-record"),
        pytest.param(append_of(st.EVENTS_FILE, the_event("loop.end")), id="loop.end"),
    ],
)
def test_a_loop_killed_after_it_recorded_its_end_is_closed_by_resume_without_a_turn(
    sandbox: Any, kill_after: Callable[..., int]
) -> None:
    box = sandbox
    box.configure(max_iterations=5)
    _script(box, [SAY], _fix(box))
    flags = ["--json", "--no-plugins"]
    assert killed_after(box, flags, kill_after) == 0
    assert box.loop_state().status == "running"  # the kill came before the final state
    assert [r["iteration"] for r in box.iterations()] == [1, 2]
    played = turns(box)
    assert [t["turn"] for t in played] == [1, 2]

    status = box.status()
    assert status["status"].startswith("complete"), status["status"]
    assert "died" not in status["status"]
    assert "died" not in (box.state_dir / st.PROGRESS_FILE).read_text("utf-8")

    resumed = _loopctl(box, "resume", "--no-plugins")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "complete" in resumed.stdout
    assert "already ended" in resumed.stdout + resumed.stderr
    assert turns(box) == played, "resume ran the agent again"
    assert [r["iteration"] for r in box.iterations()] == [1, 2]
    assert not [e for e in box.events() if e["type"] == "tests.start" and e.get("iteration") == 3]
    ends = loop_ends(box)
    assert [(e["status"], e["exit_code"]) for e in ends] == [("complete", 0)]
    state = box.loop_state()
    assert (state.status, state.iteration) == ("complete", 2)
    assert state.reason == "the tests pass"
    report = box.report()
    assert (report["status"], report["exit_code"], report["iterations"]) == ("complete", 0, 2)
    assert "complete: the tests pass" in (box.state_dir / st.PROGRESS_FILE).read_text("utf-8")
    assert box.status()["status"] == "complete"
    again = _loopctl(box, "resume", "--no-plugins")
    assert again.returncode == 2  # closed for good
    assert "is complete" in again.stderr


def test_run_over_a_loop_that_ended_but_was_not_closed_says_resume_closes_it(
    sandbox: Any,
) -> None:
    box = sandbox
    box.configure(max_iterations=5)
    _script(box, [SAY], _fix(box))
    flags = ["--no-plugins"]
    killed_after(box, flags, append_of(st.EVENTS_FILE, the_event("loop.end")))
    played = turns(box)
    again = _loopctl(box, "run", GOAL, *flags)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "had ended (complete, decided by iteration 2)" in again.stderr
    assert "`loopctl resume` closes it" in again.stderr
    assert "unfinished loop" not in again.stderr
    assert turns(box) == played, "run started the agent"


def test_a_loop_killed_after_a_non_zero_ending_closes_with_that_ending_s_exit_code(
    sandbox: Any,
) -> None:
    box = sandbox
    box.configure(max_iterations=2)
    _script(box, [SAY])
    flags = ["--json", "--no-plugins"]
    code = killed_after(box, flags, append_of(st.EVENTS_FILE, the_event("loop.end")))
    assert code == EXIT_CODES["max_iterations"]
    played = turns(box)
    assert box.status()["status"].startswith("max_iterations")

    resumed = _loopctl(box, "resume", "--no-plugins")
    assert resumed.returncode == EXIT_CODES["max_iterations"], resumed.stderr
    assert turns(box) == played
    assert [e["status"] for e in loop_ends(box)] == ["max_iterations"]
    assert box.loop_state().status == "max_iterations"
    # closed, it resumes as any loop that reached its limit: with a higher one, it goes on
    more = _loopctl(box, "resume", "--no-plugins", "--max-iterations", "3")
    assert more.returncode == EXIT_CODES["max_iterations"], more.stderr
    assert [t["turn"] for t in turns(box)] == [1, 2, 3]


def _restart_scenario(box: Any) -> None:
    """Iteration 1 fails, the agent runs out of context in 2 (the engine restarts the session),
    iteration 3 fixes the bug: with ``--session resume``, 2 continues 1's session."""
    box.configure(max_iterations=6)
    _script(box, [SAY], [OVERFLOW], _fix(box))


def assert_restarted_once_before_turn_3(box: Any, played_before: list[dict[str, Any]]) -> None:
    """The loop completed after one restart, archived in restart-1/, and no turn after it ran in
    the session it left."""
    state = box.loop_state()
    assert (state.status, state.restarts) == ("complete", 1)
    assert (box.state_dir / "restart-1").is_dir()
    assert [e["number"] for e in box.events() if e["type"] == "loop.restart"] == [1]
    records = box.iterations()
    assert [(r["iteration"], r["decision"]) for r in records] == [
        (1, "continue"),
        (2, "restart"),
        (3, "stop"),
    ]
    assert [r["restarts"] for r in records] == [0, 0, 1]
    played = turns(box)
    assert played[: len(played_before)] == played_before
    left = {t["session_id"] for t in played if t["turn"] <= 2}
    after = [t for t in played if t["turn"] >= 3]
    assert after, played
    assert all(t["session_id"] not in left for t in after), played


def test_a_restart_decided_right_before_a_kill_is_carried_out_on_resume(sandbox: Any) -> None:
    box = sandbox
    _restart_scenario(box)
    flags = ["--json", "--no-plugins", "--session", "resume"]
    killed_after(box, flags, append_of(st.ITERATIONS_FILE, lambda events: 1))
    assert [r["decision"] for r in box.iterations()] == ["continue", "restart"]
    played = turns(box)
    assert [t["turn"] for t in played] == [1, 2]
    assert played[0]["session_id"] == played[1]["session_id"]  # --session resume

    resumed = _loopctl(box, "resume", "--json", "--no-plugins")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert [t["turn"] for t in turns(box)] == [1, 2, 3]
    assert_restarted_once_before_turn_3(box, played)


def test_a_restart_cut_short_by_a_full_disk_is_carried_out_on_resume(
    sandbox: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loopctl.cli.app import main

    box = sandbox
    _restart_scenario(box)
    monkeypatch.chdir(box.path)
    for name in list(os.environ):
        if name.startswith("LOOPCTL_"):
            monkeypatch.delenv(name)

    def full(state_dir: Path, number: int, **kwargs: Any) -> Path:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(state_dir / "restart-1"))

    with monkeypatch.context() as patch:
        patch.setattr(st, "archive_restart", full)
        code = main(["run", GOAL, "--json", "--no-plugins", "--session", "resume"])
    assert code == EXIT_CODES["disk_full"]
    assert box.loop_state().status == "disk_full"
    assert not (box.state_dir / "restart-1").exists()
    played = turns(box)
    assert [t["turn"] for t in played] == [1, 2]

    assert main(["resume", "--json", "--no-plugins"]) == 0  # space is back
    assert [t["turn"] for t in turns(box)] == [1, 2, 3]
    assert_restarted_once_before_turn_3(box, played)


# --- a fresh run in a state directory that holds an earlier one ------------------------------------


def test_a_fresh_run_sets_the_earlier_run_aside_and_reports_only_itself(sandbox: Any) -> None:
    box = sandbox
    _restart_scenario(box)
    first = _loopctl(box, "run", GOAL, "--json", "--no-plugins")
    assert first.returncode == 0, first.stderr[-3000:]
    assert (box.state_dir / "restart-1").is_dir()
    first_logs = sorted(p.name for p in (box.state_dir / st.LOGS_DIR).iterdir())
    assert first_logs  # iteration 3's, after the restart

    box.project.write("calc.py", box.BUGGY_CALC)
    (box.root / TURNS_FILE).unlink()
    _script(box, _fix(box))
    second = _loopctl(box, "run", GOAL, "--json", "--no-plugins")
    assert second.returncode == 0, second.stderr[-3000:]

    aside = box.state_dir / "previous-run-1"
    assert (aside / "restart-1").is_dir()
    assert sorted(p.name for p in (aside / st.LOGS_DIR).iterdir()) == first_logs
    assert st.restart_numbers(box.state_dir) == []
    logs = sorted(p.name for p in (box.state_dir / st.LOGS_DIR).iterdir())
    assert logs
    # the tests before the first turn (and their flaky check) log as iteration 0
    assert all(name.startswith(("iteration-0000.", "iteration-0001.")) for name in logs), logs
    report = box.report()
    assert (report["iterations"], report["restarts"], report["recorded_iterations"]) == (1, 0, 1)
    assert [r["iteration"] for r in box.iterations()] == [1]
    warnings = [e["message"] for e in box.events() if e["type"] == "loop.warning"]
    assert any("previous-run-1" in message for message in warnings), warnings


def test_a_fresh_run_s_report_counts_only_its_own_context_errors(sandbox: Any) -> None:
    """The context-errors plugin's report section counts the failures and suggestion sets of
    this run, not those an earlier run in the same state directory left in its ledger."""
    box = sandbox
    box.configure(max_iterations=3)
    _script(box, [SAY])
    first = _loopctl(box, "run", GOAL, "--json")
    assert first.returncode == EXIT_CODES["max_iterations"], first.stderr[-3000:]
    # the tests before the first turn failed too: their failure is reported as well
    assert "Failures reported: 4" in (box.state_dir / st.REPORT_MD_FILE).read_text("utf-8")

    box.project.write("calc.py", box.BUGGY_CALC)
    _script(box, _fix(box))
    second = _loopctl(box, "run", GOAL, "--json")
    assert second.returncode == 0, second.stderr[-3000:]
    report = (box.state_dir / st.REPORT_MD_FILE).read_text("utf-8")
    # only its own: the failure before its first turn, fixed by that turn (not the first run's 4)
    assert "Failures reported: 1 (ASSERTION_FAILURE 1)" in report, report
    assert "Suggestion sets judged: 1, effective: 1" in report, report
