"""Whole loops with the scripted agent (real subprocesses, real git, real files)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from context_monitor_testkit import BUG, FIX, PLUGIN, WINDOW, dump, prompt, usage

from loopctl import hookimpl
from loopctl.testing import Project, RunResult
from loopctl_context_monitor import events as ev

NO_STUCK = {"stuck": {"enabled": False}}
BRIEFING_HEADER = "## Previous Session Context (Summarized)"


def config(session: str = "resume", max_iterations: int = 8, **plugin: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "session": session,
        "limits": {"max_iterations": max_iterations},
        **NO_STUCK,
    }
    if plugin:
        settings["plugins"] = {"context-monitor": plugin}
    return settings


def iteration_usage(result: RunResult) -> list[dict[str, Any]]:
    return [e for e in result.events_of(ev.USAGE) if e["source"] == "iteration"]


def briefing_body(result: RunResult) -> str:
    text = (result.state_dir / "context-summary.md").read_text(encoding="utf-8")
    assert text.startswith("# Previous Session Context (Summarized)\n\n")
    return text.split("\n\n", 1)[1].rstrip("\n")


@pytest.mark.slow
def test_resume_mode_climbing_usage_warns_and_restarts_exactly_at_the_crossing(
    buggy: Project, run_loop: Any
) -> None:
    wrong = "return a * b"
    turns = [
        [{"read": "calc.py"}, usage(60_000)],
        [{"replace": "calc.py", "old": BUG, "new": wrong}, usage(120_000)],
        [{"read": "calc.py"}, usage(139_999)],  # one token under 70%: no warning
        [{"run": "git status --short"}, usage(140_000)],  # exactly 70%: warn, restart after
        [{"replace": "calc.py", "old": wrong, "new": FIX}, usage(20_000), {"done": True}],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status == "complete", dump(result)
    warnings = result.events_of(ev.EXHAUSTION_WARNING)
    assert [(w["iteration"], w["tokens"], w["percent"]) for w in warnings] == [(4, 140_000, 70.0)]
    assert warnings[0]["action"] == "restart after this iteration"
    assert [r["decision"] for r in result.records] == [
        "continue",
        "continue",
        "continue",
        "restart",
        "stop",
    ]
    assert result.records[3]["reason"] == "context_exhaustion"
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["context_exhaustion"]
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    assert restart["iteration"] == 4
    assert restart["trigger"] == "warn"
    assert (restart["tokens"], restart["window"]) == (140_000, WINDOW)

    # the gauge followed the one resumed session, then the fresh one: never a sum
    per_iteration = iteration_usage(result)
    assert [e["tokens"] for e in per_iteration] == [60_000, 120_000, 139_999, 140_000, 20_000]
    assert [e["restarts"] for e in per_iteration] == [0, 0, 0, 0, 1]
    assert all(e["window"] == WINDOW and e["known"] for e in per_iteration)
    sessions = [r["agent"]["session_id"] for r in result.records]
    assert len(set(sessions[:4])) == 1
    assert sessions[4] != sessions[0]
    assert [e["session"] for e in per_iteration] == sessions

    # the briefing: the modified file, the failed approach, within budget, archived, injected
    body = briefing_body(result)
    assert len(body) <= 2000
    assert "calc.py | " in body  # git diff --stat against the start commit
    # the loop's failed approaches (the engine's, one entry updated each iteration) are there
    approaches = result.loop_state().failed_approaches
    assert approaches, "iterations with the same failure make a failed approach"
    assert f"- {approaches[0]}" in body
    assert "- ran `git status --short` → exit 0" in body
    archived = result.state_dir / "restart-1" / "context-summary.md"
    assert archived.read_text(encoding="utf-8") == (
        result.state_dir / "context-summary.md"
    ).read_text(encoding="utf-8")
    assert BRIEFING_HEADER not in prompt(result, 4)
    fresh_prompt = prompt(result, 5)
    assert BRIEFING_HEADER in fresh_prompt
    assert body in fresh_prompt


@pytest.mark.slow
def test_fresh_mode_high_usage_every_iteration_is_no_false_alarm(
    buggy: Project, run_loop: Any
) -> None:
    turns = [[{"read": "calc.py"}, usage(130_000), {"read": "test_calc.py"}, usage(135_000)]]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config("fresh", 4))

    assert result.status == "max_iterations", dump(result)
    assert not result.events_of(ev.EXHAUSTION_WARNING)
    assert not result.events_of("loop.restart")
    per_iteration = iteration_usage(result)
    # 4 × 135,000 would be 270% of the window if summed across iterations
    assert [e["tokens"] for e in per_iteration] == [135_000] * 4
    assert [e["percent"] for e in per_iteration] == [67.5] * 4
    streamed = [e for e in result.events_of(ev.USAGE) if e["source"] == "stream"]
    assert [e["tokens"] for e in streamed] == [130_000, 135_000] * 4
    assert len({e["session"] for e in per_iteration}) == 4  # a new session every iteration


@pytest.mark.slow
def test_fresh_mode_warn_is_reported_without_a_restart(buggy: Project, run_loop: Any) -> None:
    turns = [
        [usage(20_000), {"read": "calc.py"}, usage(150_000)],
        [FIX_ACTION, usage(10_000), {"done": True}],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config("fresh"))

    assert result.status == "complete", dump(result)
    (warning,) = result.events_of(ev.EXHAUSTION_WARNING)
    assert warning["action"].startswith("none: in fresh session mode")
    assert not result.events_of("loop.restart")


FIX_ACTION = {"replace": "calc.py", "old": BUG, "new": FIX}


@pytest.mark.timing  # stops a turn mid-stream
def test_hard_threshold_mid_turn_ends_the_turn_and_restarts_with_flagged_files(
    buggy: Project, run_loop: Any
) -> None:
    turns = [
        [
            {"replace": "calc.py", "old": BUG, "new": "return a * (b"},
            {"write": "helper.py", "content": "def helper(:\n"},
            usage(185_000),  # 92.5%: over the hard threshold of 90%
            {"sleep": 60},
            {"write": "late.txt", "content": "never written: the turn was ended"},
        ],
        [{"replace": "calc.py", "old": "return a * (b", "new": FIX}, usage(20_000), {"done": True}],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status == "complete", dump(result)
    # ended at the usage message: after the 60 s sleep the turn would have written late.txt
    assert not (buggy.path / "late.txt").exists()
    first = result.records[0]
    assert first["agent"]["interrupted"] is True
    assert (first["decision"], first["reason"]) == ("restart", "context_exhaustion")
    (hard,) = result.events_of(ev.HARD_LIMIT)
    assert (hard["tokens"], hard["percent"]) == (185_000, 92.5)
    (stopped,) = result.events_of("agent.turn_stopped")
    assert stopped["reason"] == "context_exhaustion"
    assert len(result.events_of("loop.restart")) == 1
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    assert restart["trigger"] == "hard"
    (cut,) = result.events_of(ev.INTERRUPTED_TURN)
    assert cut["action"] == "flag"
    assert sorted(cut["files"]) == ["calc.py", "helper.py"]
    body = briefing_body(result)
    assert "### Possibly incomplete: verify before building on them" in body
    assert "- calc.py\n- helper.py" in body
    assert "hard threshold of 90%" in body
    assert "- calc.py\n- helper.py" in prompt(result, 2)


@pytest.mark.slow
def test_context_overflow_restarts_once_with_a_fresh_session_and_a_briefing(
    buggy: Project, run_loop: Any
) -> None:
    turns = [
        [
            {"read": "calc.py"},
            usage(150_000),  # over warn too: still only the engine's one restart
            {"error": "context_overflow", "message": "Prompt is too long"},
        ],
        [FIX_ACTION, usage(20_000), {"done": True}],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status == "complete", dump(result)
    first, second = result.records
    assert first["agent"]["error_kind"] == "context_overflow"
    assert (first["decision"], first["reason"]) == ("restart", "context_exhaustion")
    assert [e["reason"] for e in result.events_of("loop.restart")] == ["context_exhaustion"]
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    assert restart["trigger"] == "overflow"
    assert result.events_of(ev.OVERFLOW)
    assert second["restarts"] == 1
    assert second["agent"]["session_id"] != first["agent"]["session_id"]
    body = briefing_body(result)
    assert "the agent ran out of context (last measured: 75% full" in body
    assert BRIEFING_HEADER in prompt(result, 2)


@pytest.mark.slow
def test_storm_guard_stops_when_the_fresh_session_starts_over_warn(
    buggy: Project, run_loop: Any
) -> None:
    turns = [
        [{"read": "calc.py"}, usage(150_000)],  # warn: restart
        [{"read": "calc.py"}, usage(145_000)],  # the fresh session's baseline is 72.5%
        [{"read": "calc.py"}, usage(146_000)],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status == "plugin", dump(result)
    assert result.outcome.reason == "context_baseline_too_high"
    assert "baseline 145,000 tokens" in result.outcome.message
    assert "72.5% full" in result.outcome.message
    assert len(result.events_of("loop.restart")) == 1
    (high,) = result.events_of(ev.BASELINE_HIGH)
    assert (high["iteration"], high["tokens"], high["percent"]) == (2, 145_000, 72.5)
    assert len(result.records) == 2
    assert result.loop_state().reason  # the message is kept


@pytest.mark.timing  # stops a turn mid-stream
def test_storm_guard_shrinks_the_briefing_when_it_is_what_pushed_the_baseline_over(
    buggy: Project, run_loop: Any
) -> None:
    small = 4_000  # warn at 2,800 tokens, hard at 3,600
    turns = [
        [{"read": "calc.py"}, usage(3_000, small)],  # 75%: restart with a briefing
        [{"read": "calc.py"}, usage(2_900, small)],  # baseline 72.5%: the briefing is ~400 tokens
        [{"read": "calc.py"}, usage(3_700, small), {"sleep": 5}],  # hard: restart again
        [FIX_ACTION, usage(1_000, small), {"done": True}],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status == "complete", dump(result)
    (shrunk,) = result.events_of(ev.BRIEFING_SHRUNK)
    assert shrunk["budget_from"] == 2000
    assert 300 <= shrunk["budget_to"] < 2000
    restarts = result.events_of(ev.EXHAUSTION_RESTART)
    assert [r["trigger"] for r in restarts] == ["warn", "hard"]
    assert restarts[1]["briefing_chars"] < restarts[0]["briefing_chars"]
    assert restarts[1]["briefing_budget"] == shrunk["budget_to"]
    assert not result.events_of(ev.BASELINE_TOO_HIGH)


@pytest.mark.slow
def test_no_usage_is_unknown_never_zero(buggy: Project, run_loop: Any) -> None:
    result = run_loop(
        "make test_add pass",
        turns=[[{"read": "calc.py"}, {"usage": {"input_tokens": 0}}]],  # zero tokens: no measure
        plugins=PLUGIN,
        config=config("fresh", 3),
    )

    assert result.status == "max_iterations", dump(result)
    per_iteration = iteration_usage(result)
    assert len(per_iteration) == 3
    for event in per_iteration:
        assert event["tokens"] is None
        assert event["percent"] is None
        assert event["known"] is False
        assert event["reason"] == "the agent reported no token usage"
        assert event["summary"] == ""  # the views say it once, below (issue 25: twice each)
    (unknown,) = result.events_of(ev.USAGE_UNKNOWN)
    assert unknown["agent"] == "scripted"
    assert not result.events_of(ev.EXHAUSTION_WARNING)
    report = (result.state_dir / "report.md").read_text(encoding="utf-8")
    assert "No context fill was measured" in report


@pytest.mark.timing  # stops a turn mid-stream
def test_rollback_restores_the_interrupted_turns_files(buggy: Project, run_loop: Any) -> None:
    buggy.write("draft.py", "DRAFT = 1\n")  # untracked, there before the turn
    turns = [
        [
            {"replace": "calc.py", "old": BUG, "new": "return a * (b"},
            {"replace": "draft.py", "old": "DRAFT = 1", "new": "DRAFT = ("},
            {"write": "brand_new.py", "content": "half = (\n"},
            usage(185_000),
            {"sleep": 5},
        ],
        [FIX_ACTION, usage(20_000), {"done": True}],
    ]
    result = run_loop(
        "make test_add pass",
        turns=turns,
        plugins=PLUGIN,
        config=config(on_interrupted_turn="rollback"),
    )

    assert result.status == "complete", dump(result)
    (rollback,) = result.events_of(ev.ROLLBACK)
    assert sorted(rollback["restored"]) == ["calc.py", "draft.py"]
    assert rollback["deleted"] == ["brand_new.py"]
    assert rollback["failed"] == []
    assert buggy.read("draft.py") == "DRAFT = 1\n"
    assert not (buggy.path / "brand_new.py").exists()
    assert FIX in buggy.read("calc.py")  # restored to the bug, then fixed by iteration 2
    body = briefing_body(result)
    assert "### Restored to before the interrupted turn" in body
    assert "Possibly incomplete" not in body
    assert buggy.git("diff", "--cached", "--name-only") == ""  # the index was left alone


@pytest.mark.slow
def test_graceful_handoff_asks_for_a_note_then_restarts_with_it(
    buggy: Project, run_loop: Any
) -> None:
    note = (
        "Done: looked at calc.py; add() subtracts.\n"
        "Remaining: make add() add.\n"
        "Tried: nothing yet. Also see docs/missing.md.\n"
    )
    turns = [
        [{"read": "calc.py"}, usage(150_000)],  # warn: the next turn wraps up
        [{"write": ".loopctl/handoff.md", "content": note}, usage(155_000)],
        [FIX_ACTION, usage(20_000), {"done": True}],
    ]
    result = run_loop(
        "make test_add pass", turns=turns, plugins=PLUGIN, config=config(graceful_handoff=True)
    )

    assert result.status == "complete", dump(result)
    assert [r["decision"] for r in result.records] == ["continue", "restart", "stop"]
    (requested,) = result.events_of(ev.HANDOFF_REQUESTED)
    assert requested["iteration"] == 1
    handoff_prompt = prompt(result, 2)
    assert "## Context Limit: Finish Up and Hand Off" in handoff_prompt
    assert str(result.state_dir / "handoff.md") in handoff_prompt
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    assert restart["trigger"] == "handoff"
    body = briefing_body(result)
    assert "Remaining: make add() add." in body
    assert "named in the note but not found in the project: docs/missing.md" in body
    assert (
        (result.state_dir / "restart-1" / "handoff.md")
        .read_text(encoding="utf-8")
        .startswith("Done: looked at calc.py")
    )
    assert "Remaining: make add() add." in prompt(result, 3)


class Enricher:
    """Another plugin that enriches the briefing."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.seen: list[str] = []
        self.release = threading.Event()  # holds the slow enricher until the test is over

    @hookimpl
    def context_monitor_briefing(self, loop: Any, briefing: Any) -> str | None:
        self.seen.append(briefing.text)
        if self.behaviour == "raise":
            raise RuntimeError("the summariser is down")
        if self.behaviour == "slow":
            self.release.wait(timeout=60)
        if self.behaviour == "nothing":
            return None
        text: str = briefing.text
        return text + "\n\n### Snapshot by the enricher\n- overall_goal: add numbers"


@pytest.mark.timing  # a hook timeout
@pytest.mark.parametrize(
    ("behaviour", "used", "reason"),
    [
        ("enrich", True, None),
        ("raise", False, "it returned no text"),  # the host isolates it: reported, then None
        ("slow", False, "no answer within 0.3 s"),
        ("nothing", False, "it returned no text"),
    ],
)
def test_another_plugin_can_enrich_the_briefing_with_a_deterministic_fallback(
    buggy: Project, run_loop: Any, behaviour: str, used: bool, reason: str | None
) -> None:
    enricher = Enricher(behaviour)
    turns = [[{"read": "calc.py"}, usage(150_000)], [FIX_ACTION, usage(1_000), {"done": True}]]
    try:
        result = run_loop(
            "make test_add pass",
            turns=turns,
            plugins={"enricher": enricher, **PLUGIN},  # registered before the spec exists
            config=config(briefing_hook_timeout_s=0.3),
        )
    finally:
        enricher.release.set()

    assert result.status == "complete", dump(result)
    (deterministic,) = enricher.seen
    body = briefing_body(result)
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    if used:
        assert (
            body == deterministic + "\n\n### Snapshot by the enricher\n- overall_goal: add numbers"
        )
        assert restart["briefing_source"] == "hook"
        assert not result.events_of(ev.BRIEFING_FALLBACK)
    else:
        assert body == deterministic
        assert restart["briefing_source"] == "deterministic"
        (fallback,) = result.events_of(ev.BRIEFING_FALLBACK)
        assert fallback["reason"] == reason
    if behaviour == "raise":
        (error,) = result.events_of("plugin.error")
        assert error["hook"] == "context_monitor_briefing"


@pytest.mark.slow
def test_resume_carries_the_gauge_of_the_resumed_session(buggy: Project, run_loop: Any) -> None:
    turns = [[{"read": "calc.py"}, usage(100_000)], [{"read": "calc.py"}]]  # turn 2: no usage
    first = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config("resume", 1))
    assert first.status == "max_iterations"
    second = run_loop(
        "make test_add pass", turns=turns, plugins=PLUGIN, config=config("resume", 2), resume=True
    )

    assert second.status == "max_iterations", dump(second)
    per_iteration = iteration_usage(second)
    assert per_iteration[-1]["iteration"] == 2
    assert per_iteration[-1]["tokens"] == 100_000  # the same session, as last measured
    assert per_iteration[-1]["session"] == first.records[0]["agent"]["session_id"]


def test_config_errors_name_the_key(buggy: Project, run_loop: Any) -> None:
    with pytest.raises(Exception, match=r"plugins\.context-monitor\.hard_threshold") as caught:
        run_loop(
            "x",
            turns=[[{"say": "hi"}]],
            plugins=PLUGIN,
            config=config(warn_threshold=0.8, hard_threshold=0.75),
        )
    assert "must be above warn_threshold (0.8)" in str(caught.value)


class InterruptOnce:
    """Ctrl-C right after the restart, before the fresh session's first prompt."""

    def __init__(self) -> None:
        self.fired = False

    @hookimpl
    def before_iteration(self, loop: Any) -> None:
        if loop.restarts == 1 and not self.fired:
            self.fired = True
            raise KeyboardInterrupt


@pytest.mark.slow
def test_a_pending_briefing_survives_loopctl_resume(buggy: Project, run_loop: Any) -> None:
    turns = [[{"read": "calc.py"}, usage(150_000)], [FIX_ACTION, usage(1_000), {"done": True}]]
    interrupter = InterruptOnce()
    first = run_loop(
        "make test_add pass",
        turns=turns,
        plugins={**PLUGIN, "interrupter": interrupter},
        config=config(),
    )
    assert first.status == "interrupted", dump(first)
    assert first.events_of(ev.EXHAUSTION_RESTART)

    second = run_loop(
        "make test_add pass", turns=turns, plugins=PLUGIN, config=config(), resume=True
    )
    assert second.status == "complete", dump(second)
    assert BRIEFING_HEADER in prompt(second, 2)
    assert briefing_body(second) in prompt(second, 2)


@pytest.mark.timing  # an agent timeout
def test_a_turn_cut_by_a_timeout_flags_its_files_in_the_next_prompt(
    buggy: Project, run_loop: Any
) -> None:
    turns = [
        [{"write": "half.py", "content": "def half(:\n"}, usage(30_000), {"sleep": 10}],
        [FIX_ACTION, usage(31_000), {"done": True}],
    ]
    settings = config()
    settings["limits"]["agent_timeout_s"] = 1.0
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=settings)

    assert result.status == "complete", dump(result)
    assert result.records[0]["agent"]["interrupted"] is True
    (cut,) = result.events_of(ev.INTERRUPTED_TURN)
    assert (cut["reason"], cut["action"], cut["files"]) == ("timeout", "flag", ["half.py"])
    assert not result.events_of("loop.restart")
    next_prompt = prompt(result, 2)
    assert "## Possibly Incomplete Edits" in next_prompt
    assert "- half.py" in next_prompt
    assert "## Possibly Incomplete Edits" not in prompt(result, 1)


@pytest.mark.slow
def test_without_git_the_briefing_lists_the_files_loopctl_saw_change(tmp_path: Any) -> None:
    from context_monitor_testkit import make_buggy_files

    from loopctl.testing import make_project, run_loop

    project = make_project(tmp_path / "plain", git=False)
    make_buggy_files(project)
    turns = [
        [{"replace": "calc.py", "old": BUG, "new": "return a * b"}, usage(150_000)],
        [{"replace": "calc.py", "old": "return a * b", "new": FIX}, usage(1_000), {"done": True}],
    ]
    result = run_loop(
        project,
        "make test_add pass",
        turns=turns,
        plugins=PLUGIN,
        config=config(on_interrupted_turn="rollback"),
    )

    assert result.status == "complete", dump(result)
    assert result.events_of(ev.ROLLBACK_UNAVAILABLE)
    body = briefing_body(result)
    assert "### Files modified since the loop began" in body
    assert "1 file changed during the loop (from loopctl's snapshots)" in body
    assert "- calc.py" in body


@pytest.mark.slow
def test_a_rate_limited_turn_that_reached_warn_still_restarts_after_its_retry(
    buggy: Project, run_loop: Any
) -> None:
    # after_iteration sees the rate-limited attempt (ending "rate_limited", result ignored);
    # the retry runs in the same session, where the gauge does not warn a second time
    limited = {"error": "rate_limit", "message": "slow down", "retry_after": 0, "once": True}
    turns = [
        [{"read": "calc.py"}, usage(150_000), limited, {"read": "calc.py"}],
        [FIX_ACTION, usage(1_000), {"done": True}],
    ]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status == "complete", dump(result)
    assert result.events_of("agent.rate_limit_wait"), dump(result)
    assert len(result.events_of(ev.EXHAUSTION_WARNING)) == 1
    assert [r["decision"] for r in result.records] == ["restart", "stop"]
    (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
    assert (restart["iteration"], restart["trigger"]) == (1, "warn")
    # one usage event per recorded iteration: none for the attempt that was retried
    assert [e["iteration"] for e in iteration_usage(result)] == [1, 2]


def test_an_agent_failure_reports_the_fill_and_decides_nothing(
    buggy: Project, run_loop: Any
) -> None:
    turns = [[{"read": "calc.py"}, usage(150_000), {"error": "auth", "message": "log in"}]]
    result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())

    assert result.status != "complete"
    assert [r["ending"] for r in result.records] == ["agent_failed"], dump(result)
    (warning,) = result.events_of(ev.EXHAUSTION_WARNING)
    assert warning["tokens"] == 150_000
    (reported,) = iteration_usage(result)
    assert reported["tokens"] == 150_000
    assert result.records[0]["decision"] == "stop"
    assert result.records[0]["reason"] != "context_exhaustion"
    assert not result.events_of(ev.EXHAUSTION_RESTART)


@pytest.mark.slow
def test_each_run_has_its_own_monitor(buggy: Project, run_loop: Any) -> None:
    # the monitor lives in loop.stash: a second run in the same process starts from nothing
    import weakref

    import loopctl_context_monitor.plugin as module

    turns = [[{"read": "calc.py"}, usage(150_000)], [FIX_ACTION, usage(1_000), {"done": True}]]
    reports = []
    for _ in range(2):
        buggy.write("calc.py", f"def add(a, b):\n    {BUG}\n")
        result = run_loop("make test_add pass", turns=turns, plugins=PLUGIN, config=config())
        assert result.status == "complete", dump(result)
        (restart,) = result.events_of(ev.EXHAUSTION_RESTART)
        assert restart["number"] == 1
        reports.append((result.state_dir / "report.md").read_text(encoding="utf-8"))
    for report in reports:
        assert report.count("- restart 1 after iteration 1") == 1
        assert "restart 2" not in report
    containers = (dict, list, set, weakref.WeakKeyDictionary, weakref.WeakValueDictionary)
    module_state = [
        name
        for name, value in vars(module).items()
        if not name.startswith("__") and isinstance(value, containers)
    ]
    assert module_state == []
