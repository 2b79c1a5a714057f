"""Whole loops through the real engine: scripted agent subprocess, real test command, real git."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path

import pytest
from calc_loop import FIX, IDLE, make_calc_project, run

from loopctl import hookimpl
from loopctl.agents.supervisor import Supervision
from loopctl.engine import LoopError
from loopctl.model import CompletionVeto, Decision, PromptSection
from loopctl.procgroup import group_members
from loopctl.state import (
    StateLock,
    read_error_summary,
    read_jsonl,
    read_loop_state,
    read_running,
)


@pytest.fixture
def project(loopctl_project):
    return make_calc_project(loopctl_project)


def test_a_loop_that_fixes_the_bug_completes_with_exit_code_0(project):
    result = run(
        project,
        [
            [{"say": "looking"}, {"usage": {"input_tokens": 1000, "output_tokens": 50}}],
            [{"read": "calc.py"}, FIX],
        ],
    )
    assert result.status == "complete"
    assert result.outcome.exit_code == 0
    assert [r["tests_passed"] for r in result.records] == [False, True]
    assert result.records[0]["failing_tests"]  # unittest names the failing test
    assert result.records[0]["agent"]["usage"]["input_tokens"] == 1000
    reported, silent = result.events_of("agent.end")
    assert (reported["tokens"], reported["usage"]) == (
        1050,
        {
            "input_tokens": 1000,
            "output_tokens": 50,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    )
    assert (silent["tokens"], silent["usage"]) == (None, None)  # no usage reported: unknown
    assert result.records[1]["changed_files"] == ["calc.py"]
    assert project.read("calc.py") == "def add(a, b):\n    return a + b\n"
    state = result.loop_state()
    assert state.status == "complete"
    assert state.original_goal == "make add() add"
    assert read_error_summary(result.state_dir / "error-summary.json")["error_count"] == 0
    report = result.report()
    assert report["status"] == "complete"
    assert report["iterations"] == 2
    assert (
        "# loopctl run report: complete (finished)" in (result.state_dir / "report.md").read_text()
    )
    types = [e["type"] for e in result.events]
    assert types[0] == "loop.start"
    assert types[-1] == "loop.end"
    assert all("ts" in e for e in result.events)
    prompt = (result.state_dir / "logs" / "iteration-0002.prompt.md").read_text()
    assert "## Your Goal\n\nmake add() add" in prompt
    assert "## Last Test Run" in prompt
    assert "test_add" in prompt


def test_the_iteration_limit_stops_with_a_nonzero_documented_code(project):
    result = run(
        project, [IDLE], config={"limits": {"max_iterations": 2}, "stuck": {"enabled": False}}
    )
    assert result.status == "max_iterations"
    assert result.outcome.exit_code == 10
    assert len(result.records) == 2


def _section(prompt: str, title: str) -> str:
    """The body of a prompt's section ("" when it has none)."""
    _, found, rest = prompt.partition(f"## {title}\n\n")
    return rest.split("\n## ", 1)[0] if found else ""


WRONG = {"replace": "calc.py", "old": "a - b", "new": "a * b"}
FIX_WRONG = {"replace": "calc.py", "old": "a * b", "new": "a + b"}


@pytest.mark.slow
def test_a_failed_change_is_in_the_next_prompt_with_its_diff(project):
    """Iteration 1 changes calc.py wrongly: iteration 2's prompt shows that change (its diff
    lines), not only the file's name; iteration 3's says iteration 2 changed nothing, and it is
    one entry (issue 24, defects 1 to 3)."""
    result = run(
        project,
        [[{"read": "calc.py"}, WRONG, {"say": "I made add multiply."}], IDLE, [FIX_WRONG]],
    )
    assert result.status == "complete"
    logs = result.state_dir / "logs"
    second = _section(
        (logs / "iteration-0002.prompt.md").read_text(), "Approaches That Did Not Work"
    )
    assert "iteration 1 changed calc.py" in second, second
    assert "-    return a - b" in second, second
    assert "+    return a * b" in second, second
    third = _section(
        (logs / "iteration-0003.prompt.md").read_text(), "Approaches That Did Not Work"
    )
    entries = [line for line in third.splitlines() if line.startswith("- ")]
    assert len(entries) == 1, third
    assert entries[0].startswith("- iteration 1 changed calc.py; iteration 2 changed nothing;")
    assert "+    return a * b" in third


@pytest.mark.slow
def test_an_iteration_that_changed_nothing_is_not_credited_with_a_change(project):
    """Iterations that changed nothing are named as such, never as "changing calc.py"."""
    result = run(
        project,
        [[WRONG], IDLE, IDLE, [FIX_WRONG]],
        config={"stuck": {"enabled": False}},
    )
    assert result.status == "complete"
    (entry,) = result.loop_state().failed_approaches
    first = entry.splitlines()[0]
    assert first.startswith("iteration 1 changed calc.py; iterations 2-3 changed nothing;"), entry


def test_a_plugins_growing_line_is_one_entry_updated_in_place(project):
    """A producer that notes the same failure each iteration with a growing range ("iterations
    1-2 …", "iterations 1-3 …") keeps one entry, the latest, where it was."""

    class Noter:
        @hookimpl
        def after_iteration(self, loop, record):
            loop.add_failed_approach(
                f"iterations 1-{record.iteration} kept failing with: the same thing",
                source="noter",
            )

    result = run(
        project,
        [IDLE],
        config={"stuck": {"enabled": False}, "limits": {"max_iterations": 4}},
        plugins={"noter": Noter()},
    )
    mine = [t for t in result.loop_state().failed_approaches if "the same thing" in t]
    assert mine == ["iterations 1-4 kept failing with: the same thing"]


def test_a_fresh_session_loop_that_changes_nothing_stops_after_the_window(project):
    """session = "fresh": three iterations in a row with the same failure and no change at all
    stop the loop at the third, saying so; no restart (it would give the same prompt again)."""
    result = run(project, [IDLE], config={"limits": {"max_iterations": 10}})
    assert result.status == "stuck"
    assert len(result.records) == 3
    assert not result.events_of("loop.restart")
    assert "3 times in a row, and the agent changed nothing in any of them" in (
        result.outcome.message
    ), result.outcome.message


def test_a_fresh_session_loop_is_nudged_then_stopped_without_a_restart(project):
    """A change, then the same failure with no change: the nudge, then the stop (a restart in a
    fresh-session loop would change nothing)."""
    result = run(project, [[WRONG], IDLE], config={"limits": {"max_iterations": 10}})
    assert result.status == "stuck"
    assert [e["escalation"] for e in result.events_of("loop.stuck")] == ["nudge", "stop"]
    assert not result.events_of("loop.restart")
    assert len(result.records) == 4


@pytest.mark.slow
def test_stuck_escalates_nudge_then_restart_then_stop(project):
    result = run(
        project,
        [IDLE],
        config={"session": "resume", "stuck": {"window": 2}, "limits": {"max_iterations": 10}},
    )
    assert result.status == "stuck"
    assert result.outcome.exit_code == 12
    escalations = [e["escalation"] for e in result.events_of("loop.stuck")]
    assert escalations == ["nudge", "restart", "stop"]
    assert len(result.events_of("loop.restart")) == 1
    assert (result.state_dir / "restart-1" / "loop-state.md").exists()
    nudged = (result.state_dir / "restart-1" / "logs" / "iteration-0003.prompt.md").read_text()
    assert "## Try a Different Approach" in nudged
    assert result.report()["failed_approaches"]


@pytest.mark.slow
def test_one_stuck_streak_is_one_failed_approach_however_often_it_escalates(project):
    """Issue 25: "What was tried" listed iterations 1-2, 1-3 and 1-4 of one streak, each said
    by a "noted a failed approach" line."""
    result = run(
        project,
        [IDLE],
        config={"session": "resume", "stuck": {"window": 2}, "limits": {"max_iterations": 10}},
    )
    approaches = result.report()["failed_approaches"]
    assert len(approaches) == 1, approaches
    last = result.records[-1]["iteration"]
    assert approaches[0].startswith(f"iterations 1-{last} "), approaches
    noted = [e for e in result.events_of("loop.failed_approach") if not e.get("updated")]
    assert len(noted) == 1  # noted once, then updated in place (the view shows the first)


@pytest.mark.slow
def test_the_stuck_stop_counts_the_restarts_the_streak_went_through(project):
    """A plugin restarts the session after iteration 1, stuck detection after iteration 3: the
    stop line counts both (it always said "a restart")."""

    class RestartOnce:
        @hookimpl
        def after_iteration(self, loop, record):
            if record.iteration == 1:
                return Decision.restart("test", "a fresh start")
            return None

    result = run(
        project,
        [IDLE],
        config={"session": "resume", "stuck": {"window": 2}, "limits": {"max_iterations": 10}},
        plugins={"restart-once": RestartOnce()},
    )
    assert result.status == "stuck"
    assert [e["escalation"] for e in result.events_of("loop.stuck")] == [
        "nudge",
        "restart",
        "stop",
    ]
    assert len(result.events_of("loop.restart")) == 2
    message = result.outcome.message
    assert "4 times in a row, through a nudge and 2 restarts" in message, message
    assert message in (result.state_dir / "report.md").read_text()


@pytest.mark.slow
def test_the_stop_line_names_the_plugin_that_cut_the_iteration_limit(project):
    """A plugin's decision lowers the limit from 6 to 2: the stop line, the report and the final
    state say who, from what, and why (it said only "reached the iteration limit (2)")."""

    class Cutter:
        @hookimpl
        def after_iteration(self, loop, record):
            if record.iteration == 1:
                return Decision.proceed("unproductive", remaining_iterations=1)
            return None

    result = run(
        project,
        [IDLE],
        config={"stuck": {"enabled": False}, "limits": {"max_iterations": 6}},
        plugins={"budget-cutter": Cutter()},
    )
    assert result.status == "max_iterations"
    (cut,) = result.events_of("loop.iteration_budget_reduced")
    assert (cut["max_iterations"], cut["source"]) == (2, "budget-cutter")
    expected = (
        "reached the iteration limit (2) without meeting the goal; budget-cutter lowered it "
        "from 6 (unproductive)"
    )
    assert result.outcome.message == expected
    assert result.events_of("loop.end")[0]["message"] == expected
    assert f"**Why it stopped:** {expected}" in (result.state_dir / "report.md").read_text()
    assert result.loop_state().iteration_limit_cut == {
        "from": 6,
        "to": 2,
        "by": ["budget-cutter"],
        "reason": "unproductive",
    }


def test_an_iteration_limit_nobody_cut_names_no_one(project):
    result = run(
        project, [IDLE], config={"stuck": {"enabled": False}, "limits": {"max_iterations": 1}}
    )
    assert result.outcome.message == "reached the iteration limit (1) without meeting the goal"
    assert result.loop_state().iteration_limit_cut is None


def test_a_plugin_that_raises_is_reported_and_the_loop_goes_on(project):
    class Broken:
        @hookimpl
        def after_iteration(self, loop, record):
            raise RuntimeError("plugin bug")

        @hookimpl
        def compose_prompt(self, loop):
            raise KeyError("no prompt today")

    result = run(project, [[FIX]], plugins={"broken": Broken()})
    assert result.status == "complete"
    errors = result.events_of("plugin.error")
    assert {(e["plugin"], e["hook"]) for e in errors} == {
        ("broken", "after_iteration"),
        ("broken", "compose_prompt"),
    }
    assert "RuntimeError: plugin bug" in json.dumps(result.report()["plugin_errors"])


@pytest.mark.slow
def test_a_plugin_restart_archives_artifacts_and_starts_a_fresh_session(project):
    seen = []

    class Restarter:
        @hookimpl
        def after_iteration(self, loop, record):
            if loop.iteration == 1:
                return Decision.restart("context_exhaustion", "70% full")
            return None

        @hookimpl
        def on_restart(self, loop, restart):
            seen.append((restart.number, restart.reason, restart.archive_dir.name, loop.session_id))

        @hookimpl
        def compose_prompt(self, loop):
            if loop.restarts:
                return PromptSection(
                    "Previous Session Context (Summarized)", "briefing text", priority=95
                )
            return None

    result = run(
        project, [IDLE, [FIX]], plugins={"restarter": Restarter()}, config={"session": "resume"}
    )
    assert result.status == "complete"
    assert seen == [(1, "context_exhaustion", "restart-1", None)]
    assert (result.state_dir / "restart-1" / "logs" / "iteration-0001.agent.jsonl").exists()
    assert (
        "Previous Session Context (Summarized)"
        in (result.state_dir / "logs" / "iteration-0002.prompt.md").read_text()
    )
    sessions = [r["agent"]["session_id"] for r in result.records]
    assert sessions[0] != sessions[1]  # fresh session after the restart


@pytest.mark.slow
def test_resume_mode_keeps_the_session_until_a_restart(project):
    result = run(
        project, [IDLE, IDLE, [FIX]], config={"session": "resume", "stuck": {"enabled": False}}
    )
    sessions = {r["agent"]["session_id"] for r in result.records}
    assert len(sessions) == 1


@pytest.mark.slow
def test_max_restarts_stops_the_loop(project):
    class AlwaysRestart:
        @hookimpl
        def after_iteration(self, loop, record):
            return Decision.restart("test", "again")

    result = run(
        project, [IDLE], plugins={"r": AlwaysRestart()}, config={"limits": {"max_restarts": 1}}
    )
    assert result.status == "max_restarts"
    assert result.outcome.exit_code == 11
    assert len(result.events_of("loop.restart")) == 1


def test_auth_errors_stop_at_once(project):
    result = run(project, [[{"error": "auth", "message": "Not logged in · Please run /login"}]])
    assert result.status == "auth"
    assert result.outcome.exit_code == 14
    assert "Not logged in" in result.outcome.message
    assert len(result.records) == 1


def test_a_crashing_agent_is_retried_with_fresh_sessions_then_stops(project):
    result = run(
        project, [[{"exit": 3}]], config={"limits": {"max_agent_crashes": 2, "max_restarts": 5}}
    )
    assert result.status == "agent_error"
    assert result.outcome.exit_code == 13
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["agent_crash", "agent_crash"]


@pytest.mark.slow
def test_a_context_overflow_restarts_with_a_fresh_session(project):
    result = run(
        project,
        [[{"error": "context_overflow", "message": "Prompt is too long"}], [FIX]],
        config={"session": "resume"},
    )
    assert result.status == "complete"
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["context_exhaustion"]


@pytest.mark.slow
def test_the_completion_signal_must_be_a_whole_line(project):
    turns = [[FIX, {"say": "I am not LOOPCTL_DONE yet"}], [{"done": True}]]
    result = run(
        project, turns, config={"completion_signal": "LOOPCTL_DONE", "stuck": {"enabled": False}}
    )
    assert result.status == "complete"
    assert len(result.records) == 2  # the first pass had the signal only inside prose
    assert result.events_of("loop.completion_signal_missing")


@pytest.mark.slow
def test_token_budget_stops_the_loop(project):
    turns = [[{"usage": {"input_tokens": 6000, "output_tokens": 100}}]]
    result = run(
        project, turns, config={"limits": {"max_tokens": 10000}, "stuck": {"enabled": False}}
    )
    assert result.status == "budget"
    assert result.outcome.exit_code == 15
    assert len(result.records) == 2


def test_a_veto_keeps_a_passing_iteration_from_completing(project):
    class Veto:
        @hookimpl
        def on_success(self, loop, record, test_run):
            assert test_run.passed
            return CompletionVeto("flaky pass") if loop.iteration == 1 else None

    result = run(project, [[FIX], IDLE], plugins={"veto": Veto()})
    assert result.status == "complete"
    assert len(result.records) == 2
    (vetoed,) = result.events_of("loop.completion_vetoed")
    assert vetoed["reason"] == "veto: flaky pass"  # the host names the plugin


def test_a_second_loop_in_the_same_state_dir_is_refused(project):
    from loopctl.testing import run_loop

    lock = StateLock(project.path / ".loopctl")
    (project.path / ".loopctl").mkdir()
    lock.acquire()
    try:
        with pytest.raises(Exception, match="another loop") as info:
            run_loop(project, "goal", turns=[[FIX]])
        assert "--state-dir" in str(info.value)
    finally:
        lock.release()


def test_an_unfinished_loop_is_not_silently_overwritten(project):
    from loopctl.testing import run_loop

    result = run(project, [IDLE], config={"limits": {"max_iterations": 1}})
    state_file = result.state_dir / "loop-state.md"
    text = state_file.read_text().replace('status: "max_iterations"', 'status: "running"')
    state_file.write_text(text)
    with pytest.raises(LoopError, match="loopctl resume"):
        run_loop(project, "another goal", turns=[[FIX]])


def test_resume_continues_from_the_state_files(project):
    from loopctl.testing import run_loop

    first = run(
        project, [IDLE], config={"limits": {"max_iterations": 1}, "stuck": {"enabled": False}}
    )
    state_file = first.state_dir / "loop-state.md"
    state_file.write_text(
        state_file.read_text().replace('status: "max_iterations"', 'status: "interrupted"')
    )
    second = run_loop(
        project,
        "ignored",
        turns=[IDLE, [FIX]],
        resume=True,
        config={"limits": {"max_iterations": 3}},
    )
    assert second.status == "complete"
    assert read_loop_state(state_file).original_goal == "make add() add"
    iterations = [r["iteration"] for r in read_jsonl(first.state_dir / "iterations.jsonl").records]
    assert iterations == [1, 2]
    assert second.events_of("loop.resume")


@pytest.mark.slow
def test_a_rate_limit_is_waited_out_and_the_iteration_retried(project):
    turns = [
        [
            {
                "error": "rate_limit",
                "message": "usage limit reached",
                "retry_after": 0.5,
                "once": True,
            },
            FIX,
        ]
    ]
    result = run(project, turns, config={"limits": {"max_iterations": 1}})
    assert result.status == "complete"  # the waited-out turn did not use up the only iteration
    waits = result.events_of("agent.rate_limit_wait")
    assert len(waits) == 1
    assert 0 < waits[0]["seconds"] <= 1.0
    assert [r["iteration"] for r in result.records] == [1]


def test_a_rate_limit_past_the_wall_clock_stops_the_run(project):
    turns = [[{"error": "rate_limit", "message": "limit reached", "retry_after": 3600}]]
    result = run(project, turns, config={"limits": {"wall_clock_s": 60}})
    assert result.status == "wall_clock"
    assert "rate limited until" in result.outcome.message
    assert not result.events_of("agent.rate_limit_wait")


def test_a_loop_that_hit_its_limit_can_be_resumed_with_a_higher_one(project):
    from loopctl.testing import run_loop

    first = run(project, [IDLE], config={"limits": {"max_iterations": 1}})
    assert first.status == "max_iterations"
    second = run_loop(
        project,
        "ignored",
        turns=[IDLE, [FIX]],
        resume=True,
        config={"limits": {"max_iterations": 2}},
    )
    assert second.status == "complete"
    assert [r["iteration"] for r in second.records] == [1, 2]
    # a resumed loop runs no tests before its first turn (test_tests_first: a new run does)
    resumed = max(i for i, e in enumerate(second.events) if e["type"] == "loop.resume")
    after = [e["type"] for e in second.events[resumed:]]
    assert after.index("iteration.start") < after.index("tests.start")


def test_a_corrupt_state_file_is_not_overwritten_by_a_new_run(project):
    from loopctl.testing import run_loop

    state_dir = project.path / ".loopctl"
    state_dir.mkdir()
    (state_dir / "loop-state.md").write_text("---\nthis is: not: valid\n")
    with pytest.raises(LoopError, match="--fresh-state"):
        run_loop(project, "goal", turns=[[FIX]])
    assert (state_dir / "loop-state.md").read_text() == "---\nthis is: not: valid\n"


@pytest.mark.timing  # ends a turn mid-stream
def test_a_plugin_can_end_the_turn_mid_stream_and_ask_for_a_restart(project):
    from loopctl.model import MessageKind

    class Watcher:
        @hookimpl
        def on_agent_message(self, loop, message):
            if message.kind is MessageKind.USAGE and message.usage.context_tokens > 150_000:
                return Decision.restart("context_exhaustion", "over the hard threshold")
            return None

    heavy = [{"usage": {"input_tokens": 160_000}}, {"sleep": 30}, FIX]
    result = run(project, [heavy, [FIX]], plugins={"watcher": Watcher()})
    assert result.status == "complete"
    first = result.records[0]["agent"]
    assert first["interrupted"] is True
    assert first["interrupt_reason"] == "context_exhaustion"
    assert result.events_of("agent.turn_stopped")[0]["reason"] == "context_exhaustion"
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["context_exhaustion"]
    assert len(result.records) == 2  # the 30 s sleep was cut short, the fix came next session


@pytest.mark.slow
def test_plugins_write_state_files_off_the_loops_path_and_rerun_tests(project, monkeypatch):
    """``loop.write_file``: atomic, latest content wins, done before a restart archives the
    logs, fsynced unless ``durable=False``; a plugin's ``loop.run_tests`` logs beside the
    iteration's own test log, never over it."""
    import loopctl.engine as engine_module

    seen = []
    written: dict[str, set[bool]] = {}
    real_write = engine_module.st.atomic_write_text

    def watched(path, text, *, durable=True):
        written.setdefault(Path(path).name, set()).add(durable)
        real_write(path, text, durable=durable)

    monkeypatch.setattr(engine_module.st, "atomic_write_text", watched)

    class Writer:
        @hookimpl
        def after_iteration(self, loop, record):
            loop.write_file("verdict.json", json.dumps({"iteration": loop.iteration}))
            loop.write_file("lazy.txt", lambda: f"rendered later for {record.iteration}\n")
            loop.write_file("view.md", f"iteration {loop.iteration}\n", durable=False)
            if loop.iteration == 1:
                rerun = loop.run_tests(label="second look")
                seen.append(rerun.passed)
                return Decision.restart("plugin_test", "archive what was written")
            return None

    result = run(project, [IDLE, [FIX]], plugins={"writer": Writer()})
    assert result.status == "complete"
    assert json.loads((result.state_dir / "verdict.json").read_text()) == {"iteration": 2}
    assert (result.state_dir / "lazy.txt").read_text() == "rendered later for 2\n"
    assert (result.state_dir / "view.md").read_text() == "iteration 2\n"
    assert (written["verdict.json"], written["view.md"]) == ({True}, {False})
    archived = result.state_dir / "restart-1"
    assert seen == [False]
    logs = archived / "logs"
    assert "FAIL" in (logs / "iteration-0001.tests.log").read_text()
    assert "FAIL" in (logs / "iteration-0001.second-look.tests.log").read_text()
    assert not result.events_of("state.write_error")
    assert not list(result.state_dir.glob(".*.tmp"))


def test_the_state_writer_writes_a_file_once_for_rewrites_that_waited():
    import threading

    from loopctl.engine import BackgroundWriter

    writer = BackgroundWriter()
    gate, written = threading.Event(), []
    writer.submit(gate.wait)  # the writer is busy
    for n in range(5):
        writer.submit(lambda n=n: written.append(("state", n)), key="loop-state.md")
    writer.submit(lambda: written.append(("log", 0)))
    gate.set()
    writer.close()
    assert written == [("state", 4), ("log", 0)]


def test_the_state_writer_holds_what_comes_while_the_loop_is_busy_until_it_waits():
    """Nothing is queued (so the writer's thread is not woken) while the loop is busy; once it
    waits, what was held is written first, in order; a flush or a close writes it too."""
    import threading

    from loopctl.engine import BackgroundWriter

    waiting = threading.Event()
    writer = BackgroundWriter(waiting=waiting)
    written: list[str] = []
    writer.submit(lambda: written.append("log 1"))
    writer.submit(lambda: written.append("state 1"), key="loop-state.md")
    writer.submit(lambda: written.append("state 2"), key="loop-state.md")
    assert writer._queue.qsize() == 0
    assert written == []
    waiting.set()
    writer.release()
    writer.submit(lambda: written.append("log 2"))
    writer.flush()
    assert written == ["log 1", "state 2", "log 2"]
    waiting.clear()
    writer.submit(lambda: written.append("log 3"))
    assert writer._queue.qsize() == 0
    assert writer.flush(timeout_s=10)
    assert written[-1] == "log 3"
    assert not waiting.is_set()
    writer.submit(lambda: written.append("last"))
    writer.close()
    assert written[-1] == "last"


def test_the_state_writer_survives_a_ctrl_c_in_the_middle_of_a_submit():
    """Ctrl-C raises KeyboardInterrupt in the loop's thread wherever it is, also inside
    ``Queue.put`` or between a submit's two steps. Left like that, the final state write was
    never made and closing the writer waited for ever (a loop interrupted 15 ms after its
    agent started hung in _finish with status running)."""
    import threading

    from loopctl.engine import BackgroundWriter

    writer = BackgroundWriter()
    gate, written = threading.Event(), []
    writer.submit(gate.wait)
    # What an interrupted put leaves: the item queued, counted, but no waiter woken.
    queued = writer._queue
    gate.set()
    while queued.qsize():  # the writer took the gate and waits for more
        threading.Event().wait(0.01)
    with queued.mutex:
        queued._put(lambda: written.append("queued, not woken"))
        queued.unfinished_tasks += 1
    # What an interrupted submit leaves: the file registered as waiting, its write not queued.
    writer._latest["loop-state.md"] = lambda: written.append("registered, not queued")
    writer.submit(lambda: written.append("final state"), key="loop-state.md")

    closing = threading.Thread(target=writer.close, daemon=True)
    closing.start()
    closing.join(timeout=10)
    assert not closing.is_alive(), "closing the writer hung"
    assert written == ["queued, not woken", "final state"]


@pytest.mark.slow
def test_background_tasks_run_off_the_loop_and_are_done_before_it_ends(project):
    import threading

    ran, at_end = [], []

    class Tasks:
        @hookimpl
        def after_iteration(self, loop, record):
            iteration = loop.iteration
            loop.in_background(lambda: ran.append((iteration, threading.current_thread().name)))
            loop.in_background(lambda: 1 / 0)

        @hookimpl
        def on_loop_end(self, loop, outcome):
            at_end.append((loop.wait_for_background(5.0), len(ran)))

    result = run(project, [IDLE, [FIX]], plugins={"tasks": Tasks()})
    assert result.status == "complete"
    assert ran == [(1, "loopctl-plugin-tasks"), (2, "loopctl-plugin-tasks")]
    assert at_end == [(True, 2)]
    errors = result.events_of("state.write_error")
    assert [("ZeroDivisionError" in e["error"]) for e in errors] == [True, True]


def test_background_work_waits_until_the_agent_and_the_tests_have_started(project, monkeypatch):
    """Starting a process takes the interpreter lock several times: the background threads (the
    writer, the plugins' tasks) may work only once it has started. The snapshot's git status is
    a process the loop starts itself, once the tests have started (no thread of ours competes)."""
    import loopctl.engine as engine_module
    import loopctl.workspace as workspace_module

    seen: list[tuple[str, bool]] = []
    started = {"tests": False}
    engines = []

    class Grab:
        @hookimpl
        def before_iteration(self, loop):
            engines.append(loop._driver)
            started["tests"] = False

    def watched(name, real):
        def call(*args, on_start, **kwargs):
            waiting = engines[-1]._waiting
            seen.append((f"{name} starting: background may run", waiting.is_set()))

            def started_now(pgid):
                started[name] = True
                on_start(pgid)
                seen.append((f"{name} started: background may run", waiting.is_set()))

            return real(*args, on_start=started_now, **kwargs)

        return call

    real_start = workspace_module.Workspace.start_snapshot

    def start_snapshot(self):
        if engines:  # an iteration's (the loop's first snapshot is taken before any)
            where = threading.current_thread().name
            seen.append((f"git status started in {where} after the tests", started["tests"]))
        return real_start(self)

    monkeypatch.setattr(engine_module, "run_turn", watched("agent", engine_module.run_turn))
    monkeypatch.setattr(
        engine_module, "run_test_command", watched("tests", engine_module.run_test_command)
    )
    monkeypatch.setattr(workspace_module.Workspace, "start_snapshot", start_snapshot)
    # the iterations' commands (the tests run before the first turn have no agent beside them)
    result = run(project, [IDLE, [FIX]], plugins={"grab": Grab()}, config={"test_first": False})
    assert result.status == "complete"
    assert sorted(set(seen)) == [
        ("agent started: background may run", True),
        ("agent starting: background may run", False),
        ("git status started in MainThread after the tests", True),
        ("tests started: background may run", True),
        ("tests starting: background may run", False),
    ]


@pytest.mark.slow
def test_loop_state_is_rendered_when_the_loop_waits_not_when_an_iteration_ends(
    project, monkeypatch
):
    """loop-state.md is rendered where the background writer is about to write it: when the
    next command starts after an iteration changed it, and at the end (an iteration's end only
    marks it stale). The running command's process group goes to running.json the moment it
    starts, never through a rewrite of loop-state.md."""
    import loopctl.engine as engine_module

    rendered: list[tuple[int, bool, bool]] = []
    groups: list[tuple[str, bool]] = []
    real = engine_module.st.render_loop_state
    real_set = engine_module.st.RunningRecord.set

    def counting(state, body=""):
        rendered.append(
            (state.iteration, state.agent_process is not None, state.test_process is not None)
        )
        return real(state, body)

    def recording(self, kind, group):
        groups.append((kind, bool(group_members(group[0]))))  # running when recorded
        real_set(self, kind, group)

    monkeypatch.setattr(engine_module.st, "render_loop_state", counting)
    monkeypatch.setattr(engine_module.st.RunningRecord, "set", recording)
    result = run(project, [IDLE, IDLE, [FIX]], config={"test_first": False})
    assert result.status == "complete"
    # the start; iteration 1's end when iteration 2's agent starts, 2's at 3's; the end
    assert [iteration for iteration, _, _ in rendered] == [0, 2, 3, 3]
    assert not any(agent or tests for _, agent, tests in rendered)
    assert groups == [("agent", True), ("tests", True)] * 3
    final = read_loop_state(result.state_dir / "loop-state.md")
    assert (final.status, final.iteration) == ("complete", 3)
    assert final.summary is not None
    assert final.summary["records"] == 3
    assert read_running(result.state_dir) is None  # nothing runs any more


@pytest.mark.slow
def test_events_are_redacted_for_the_journal_and_every_listener_and_clean_ones_kept(project):
    """An event with a secret in its data reaches events.jsonl, the return value and on_event
    redacted; one with nothing to hide is kept exactly (also its non-ASCII text)."""
    secret = "hunter2-" + "x7Qp9" * 4
    seen, returned = [], []

    class Emitter:
        @hookimpl
        def before_iteration(self, loop):
            returned.append(loop.emit("emitter.secret", note=f"password={secret}", n=1))
            returned.append(loop.emit("emitter.plain", note="naïve \u2028 text", n=[1, 2]))

        @hookimpl
        def on_event(self, event, loop):
            if event.type.startswith("emitter."):
                seen.append((event.type, event.data))

    result = run(project, [IDLE, [FIX]], plugins={"emitter": Emitter()})
    assert result.status == "complete"
    journal = (result.state_dir / "events.jsonl").read_text(encoding="utf-8")
    assert secret not in journal
    assert [e["note"] for e in result.events_of("emitter.secret")] == ["password=[REDACTED]"] * 2
    plain = result.events_of("emitter.plain")
    assert [(e["note"], e["n"]) for e in plain] == [("naïve \u2028 text", [1, 2])] * 2
    assert all(secret not in str(data) for _, data in seen)
    assert ("emitter.plain", {"note": "naïve \u2028 text", "n": [1, 2]}) in seen
    assert all(secret not in str(event.data) for event in returned)


@pytest.mark.slow
def test_a_restart_waits_for_background_tasks(project):
    """Work a plugin handed over before a restart is done before the archive is made."""
    import time

    class Slow:
        @hookimpl
        def after_iteration(self, loop, record):
            if loop.iteration == 1:
                loop.in_background(
                    lambda: (
                        time.sleep(0.2),
                        loop.state_dir.joinpath("slow.txt").write_text("done"),
                    )
                )
                return Decision.restart("plugin_test", "archive after the task")
            return None

        @hookimpl
        def on_restart(self, loop, restart):
            assert (loop.state_dir / "slow.txt").read_text() == "done"

    result = run(project, [IDLE, [FIX]], plugins={"slow": Slow()})
    assert result.status == "complete"
    assert not result.events_of("plugin.error")


def test_an_agent_that_cannot_start_stops_the_loop_at_once(project):
    """A missing executable will be missing on every retry: one iteration, a message saying
    what to install or set, exit code 13 (agent_error)."""
    result = run(
        project,
        [IDLE],
        agent="command",
        config={"agent_cmd": "loopctl-no-such-agent --go", "limits": {"max_restarts": 3}},
    )
    assert result.status == "agent_error"
    assert result.outcome.exit_code == 13
    assert len(result.records) == 1
    assert "'loopctl-no-such-agent' not found" in result.outcome.message
    assert not result.events_of("loop.restart")


def test_withheld_variables_reach_neither_the_agent_nor_the_tests(project, monkeypatch):
    monkeypatch.setenv("DEPLOY_SECRET_TOKEN", "s3cr3t-value")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "akid-value")
    monkeypatch.setenv("DEPLOY_REGION", "eu-kept")
    result = run(
        project,
        [[{"run": "env > agent-env.txt"}]],
        test_cmd="env > tests-env.txt; exit 1",
        config={
            "withhold_env": ["DEPLOY_SECRET_*", "AWS_ACCESS_KEY_ID"],
            "limits": {"max_iterations": 1},
        },
    )
    assert result.status == "max_iterations"
    for seen in (project.read("agent-env.txt"), project.read("tests-env.txt")):
        assert "DEPLOY_REGION=eu-kept" in seen  # only the named ones are withheld
        assert "s3cr3t-value" not in seen
        assert "akid-value" not in seen


@pytest.mark.slow
@pytest.mark.parametrize("timeout_s", [math.inf, 1e7], ids=["inf", "1e7"])
def test_timeouts_too_large_for_select_do_not_crash_the_loop(project, timeout_s):
    """They used to raise OverflowError from the supervisor (exit 1, while loop.end said 13)."""
    limits = Supervision(timeout_s=timeout_s, idle_timeout_s=timeout_s)
    result = run(project, [[FIX]], supervision=limits)
    assert result.status == "complete"
    assert result.outcome.exit_code == 0


@pytest.mark.slow
def test_a_hook_past_the_wall_clock_is_stopped_and_its_plugin_not_called_again(project, capfd):
    """In-process: the watchdog stops the hook at the limit, the loop ends with wall_clock, and
    the plugin's later hooks (its on_loop_end) are skipped, since each would hang the end too."""
    never = threading.Event()
    called: list[str] = []

    class Sleepy:
        @hookimpl
        def on_loop_start(self, loop):
            never.wait()

        @hookimpl
        def on_loop_end(self, loop, outcome):
            called.append("on_loop_end")

    result = run(
        project, [[FIX]], plugins={"sleepy": Sleepy()}, config={"limits": {"wall_clock_s": 1.0}}
    )
    assert (result.status, result.outcome.exit_code) == ("wall_clock", 16)
    (hung,) = result.events_of("plugin.hung")
    assert (hung["plugin"], hung["hook"]) == ("sleepy", "on_loop_start")
    assert "plugin 'sleepy' is still running its on_loop_start hook" in capfd.readouterr().err
    assert called == []
    assert not result.records  # stopped before the first iteration


@pytest.mark.slow
def test_a_run_over_journals_without_their_loop_state_starts_them_fresh(project):
    """Deleting loop-state.md and running again gave iterations 1, 2, 1, 2 in one journal:
    the old loop's files are moved aside, named in a warning, and the new journals are its own."""
    first = run(project, [IDLE], config={"limits": {"max_iterations": 2}})
    assert [r["iteration"] for r in first.records] == [1, 2]
    old_events = (first.state_dir / "events.jsonl").read_bytes()
    (first.state_dir / "loop-state.md").unlink()

    second = run(project, [[FIX]])
    assert second.status == "complete"
    assert [r["iteration"] for r in second.records] == [1]
    assert [e["type"] for e in second.events].count("loop.start") == 1
    aside = first.state_dir / "previous-run-1"
    assert (aside / "events.jsonl").read_bytes() == old_events
    assert [r["iteration"] for r in read_jsonl(aside / "iterations.jsonl").records] == [1, 2]
    assert (aside / "logs" / "iteration-0002.prompt.md").is_file()
    assert not (first.state_dir / "logs" / "iteration-0002.prompt.md").exists()
    (warning,) = [e["message"] for e in second.events_of("loop.warning")]
    assert "no loop-state.md" in warning
    assert str(aside) in warning

    (first.state_dir / "loop-state.md").unlink()  # once more: the next free name
    run(project, [[FIX]])
    assert (first.state_dir / "previous-run-2" / "events.jsonl").is_file()


@pytest.mark.slow
def test_loop_run_id_is_new_for_each_run_and_kept_by_resume(project):
    """``loop.run_id`` tells a loop's own records from an earlier loop's in the same state
    directory: a fresh ``run`` makes one (in loop-state.md from its first write), ``resume``
    keeps it."""
    from loopctl.testing import run_loop

    seen: list[str | None] = []

    class Ids:
        @hookimpl
        def on_loop_start(self, loop):
            seen.append(loop.run_id)

    limits = {"stuck": {"enabled": False}}
    first = run(
        project, [IDLE], plugins={"ids": Ids()}, config={"limits": {"max_iterations": 1}, **limits}
    )
    run_loop(
        project,
        "ignored",
        turns=[IDLE],
        resume=True,
        plugins={"ids": Ids()},
        config={"limits": {"max_iterations": 2}, **limits},
    )
    run(project, [[FIX]], plugins={"ids": Ids()})
    assert len(seen) == 3
    assert seen[0]
    assert seen[0] == seen[1] != seen[2]
    assert read_loop_state(first.state_dir / "loop-state.md").run_id == seen[2]
    aside = read_loop_state(first.state_dir / "previous-run-1" / "loop-state.md")
    assert aside.run_id == seen[0]
