"""goal-guard in real loops: the seed's validation criteria and the issue's tests.

Every loop here is real (a git project, the engine, a test command, an agent process); the
prompts checked are the ones the engine logged in ``logs/iteration-NNNN.prompt.md``.
"""

from __future__ import annotations

import hashlib
import io
import json
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from goal_guard_helpers import (
    PLUGINS,
    TEST_CMD,
    NoteSource,
    config,
    fix_tests,
    goal_section_is,
    notes_section,
    prepare_project,
    prompts,
)

import loopctl_goal_guard as gg
from loopctl import PromptSection, SavedRun, hookimpl
from loopctl_goal_guard import record as rec
from loopctl_goal_guard.guard import NOTES_HEADING

GOAL = (
    'Fix the login bug: users whose email has a "+" cannot sign in.\n'
    "\n"
    "---\n"
    "constraints: {keep: 'the public API'}\n"
    "Paths look like C:\\Users\\x and \\n is not a newline here. Ünïcödé ✓\n"
)
SAY = [[{"say": "working on it"}]]


def violations(result: Any) -> list[dict[str, Any]]:
    return result.events_of(gg.VIOLATION)


def cli(*args: str) -> tuple[int, str, str]:
    """``loopctl ARGS`` in this process (plugin commands included)."""
    from loopctl.__main__ import main

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


# --- a fresh run --------------------------------------------------------------------------------


class Snapshots:
    """Reads loop-state.md from disk as each iteration starts (the seed's manual inspection)."""

    def __init__(self) -> None:
        self.taken: list[Any] = []

    @hookimpl
    def before_iteration(self, loop):
        self.taken.append(SavedRun(loop.state_dir).loop_state())


def test_a_fresh_run_seals_the_goal_and_keeps_notes_beside_it(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    source = NoteSource(per_iteration=0, steady=["Keep the public API unchanged."])
    snapshots = Snapshots()
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "reviewer": source, "snapshots": snapshots},
        config=config(3),
    )
    assert result.status == "max_iterations"
    # The file on disk, as iterations go: original_goal never changes while goal picks up notes.
    assert [s.original_goal for s in snapshots.taken] == [GOAL] * 3
    [sealed] = result.events_of(gg.SEALED)
    assert sealed["sealed_from"] == "cli"
    assert sealed["sha256"] == hashlib.sha256(GOAL.encode()).hexdigest()
    guard_dir = result.state_dir / rec.GUARD_DIR
    assert (guard_dir / rec.GOAL_FILE).read_text(encoding="utf-8") == GOAL
    # The state file: original_goal as first captured, goal = original + rendered notes.
    state = result.loop_state()
    assert state.original_goal == GOAL
    assert state.goal.startswith(GOAL + "\n\n" + NOTES_HEADING + "\n\n")
    assert "Keep the public API unchanged. _(reviewer, iteration 1, seen 3×" in state.goal
    assert "Test `test_a.py::test_one` fails: AssertionError" in state.goal
    # The prompt: "Your Goal" is the original every time; the notes have their own section.
    logged = prompts(result.state_dir)
    assert sorted(logged) == [1, 2, 3]
    assert all(goal_section_is(prompt, GOAL) for prompt in logged.values())
    assert notes_section(logged[1]) == ""
    notes = notes_section(logged[3])
    assert "Keep the public API unchanged. _(reviewer, iteration 1, seen 2×" in notes
    assert "Test `test_a.py::test_one` fails" in notes
    assert "(tests, iteration 1" in notes
    # Every record has the prompt size; the notes size is in goal-guard's events.
    assert [r["prompt_chars"] for r in result.records] == [len(p) for p in logged.values()]
    sizes = result.events_of(gg.NOTES)
    assert [e["iteration"] for e in sizes] == [1, 2, 3]
    assert sizes[2]["shown"] == 2
    assert sizes[2]["left_out"] == 0
    assert sizes[2]["chars"] > 0
    assert sizes[2]["budget_chars"] == 2000
    assert violations(result) == []
    assert "Goal guard" in [s["title"] for s in result.report()["sections"]]


@pytest.mark.slow
def test_a_test_failure_note_expires_when_that_test_passes(loopctl_project, run_loop):
    prepare_project(loopctl_project, failing=["test_a.py::test_one", "test_b.py::test_two"])
    result = run_loop(
        "make the tests pass",
        turns=[SAY[0], [fix_tests(["test_b.py::test_two"])], SAY[0], [fix_tests([])]],
        test_cmd=TEST_CMD,
        plugins=PLUGINS,
        config=config(6),
    )
    assert result.status == "complete"
    logged = prompts(result.state_dir)
    assert "test_one" in notes_section(logged[2])
    assert "test_two" in notes_section(logged[2])
    assert "test_one" not in notes_section(logged[3])  # fixed in iteration 2
    assert (
        "test_two` fails: AssertionError: test_b.py::test_two is broken _(tests, iteration 1, seen 3×"
        in (notes_section(logged[4]))
    )
    expired = result.events_of(gg.NOTES_EXPIRED)
    assert [e["iteration"] for e in expired] == [2, 4]
    assert result.loop_state().goal == "make the tests pass"  # no notes left: just the goal


# --- a plugin trying to change the goal ---------------------------------------------------------


class Contaminator:
    """Does what the bash predecessor's intake stage did: appends synthesized sections to the
    working goal and the prompt's goal section (the original goal it cannot reach: the public
    API has no way to change it)."""

    SYNTHESIZED = "\n\nBLOCKING ISSUES (from review):\n- test_one fails\n"

    @hookimpl
    def before_iteration(self, loop):
        loop.set_working_goal(loop.goal + self.SYNTHESIZED, source="intake")

    @hookimpl
    def compose_prompt(self, loop):
        return PromptSection(
            "Your Goal", loop.goal + "\n\nIMPORTANT — Previous build failed", source="intake"
        )


@pytest.mark.slow
def test_a_plugin_changing_the_goal_is_refused_and_named(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "intake": Contaminator()},
        config=config(3),
    )
    found = violations(result)
    assert [(v["where"], v["plugin"], v["iteration"]) for v in found] == [
        ("compose_prompt", "intake", n) for n in (1, 2, 3)
    ]
    for prompt in prompts(result.state_dir).values():
        assert goal_section_is(prompt, GOAL)
        assert "BLOCKING ISSUES" not in prompt
        assert "Previous build" not in prompt
    state = result.loop_state()
    assert state.original_goal == GOAL
    assert "BLOCKING ISSUES" not in state.goal  # the working goal was put back too
    restored = result.events_of(gg.WORKING_GOAL_RESTORED)
    assert [(e["iteration"], e["plugins"]) for e in restored] == [
        (n, ["intake"]) for n in (1, 2, 3)
    ]


class WorkingGoalSetter:
    """Appends to the working goal in the given iterations, then records ``chatter`` events of
    its own (more than the 200 newest events goal-guard used to read back)."""

    def __init__(self, name: str, iterations: set[int], chatter: int = 0) -> None:
        self.name, self.iterations, self.chatter = name, iterations, chatter

    @hookimpl
    def before_iteration(self, loop):
        if loop.iteration in self.iterations:
            loop.set_working_goal(loop.goal + f"\n\n{self.name} was here", source=self.name)
            for n in range(self.chatter):
                loop.emit(f"{self.name}.chatter", n=n)


@pytest.mark.slow
def test_the_plugins_that_set_the_working_goal_are_named_from_its_events(loopctl_project, run_loop):
    """goal-guard follows ``loop.working_goal_set`` as it is recorded (``on_event``): it names
    every plugin that set the working goal since goal-guard last did, however many events came
    after, and only those."""
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={
            **PLUGINS,
            "first": WorkingGoalSetter("first", {1, 2}, chatter=250),
            "second": WorkingGoalSetter("second", {2, 3}),
        },
        config=config(4),
    )
    restored = result.events_of(gg.WORKING_GOAL_RESTORED)
    assert [(e["iteration"], e["plugins"]) for e in restored] == [
        (1, ["first"]),
        (2, ["first", "second"]),
        (3, ["second"]),  # "first" set it in iteration 2, before goal-guard put it back
    ]
    assert "was here" not in result.loop_state().goal


class LateResolver:
    """Answers resolve_original_goal after goal-guard (an ordinary implementation)."""

    @hookimpl
    def resolve_original_goal(self, loop, stored):
        return stored + "\n\nHUMAN FEEDBACK: also rewrite the UI"


@pytest.mark.slow
@pytest.mark.parametrize("resume", [False, True], ids=["fresh", "resume"])
def test_goal_guard_answers_first_so_no_other_plugin_changes_the_goal(
    loopctl_project, run_loop, resume
):
    prepare_project(loopctl_project)
    plugins = {**PLUGINS, "late": LateResolver()}
    if resume:
        run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(1))
    result = run_loop(
        GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=plugins, config=config(2), resume=resume
    )
    assert result.events_of("loop.original_goal_restored") == []
    assert violations(result) == []
    assert result.loop_state().original_goal == GOAL
    assert all(goal_section_is(p, GOAL) for p in prompts(result.state_dir).values())


class Poker:
    """Changes the goal behind the API's back (the engine's private state; no event)."""

    @hookimpl
    def after_iteration(self, loop, record):
        loop._driver.state.original_goal += "\n\nHUMAN FEEDBACK: also rewrite the UI"


@pytest.mark.slow
def test_a_change_behind_the_apis_back_is_reported_and_kept_out_of_the_prompt(
    loopctl_project, run_loop
):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL, turns=SAY, test_cmd=TEST_CMD, plugins={**PLUGINS, "poker": Poker()}, config=config(3)
    )
    found = violations(result)
    # Once per changed text (iteration 1's change, then iteration 2's), not every iteration.
    assert [(v["iteration"], v["source"], v["where"], v["action"]) for v in found] == [
        (2, "unknown", "before_iteration", "unrepaired"),
        (3, "unknown", "before_iteration", "unrepaired"),
    ]
    assert found[0]["expected_sha256"] == hashlib.sha256(GOAL.encode()).hexdigest()
    assert all(goal_section_is(p, GOAL) for p in prompts(result.state_dir).values())
    # loopctl resume puts the sealed goal back in loop-state.md.
    assert "HUMAN FEEDBACK" in result.loop_state().original_goal
    resumed = run_loop(
        GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(4), resume=True
    )
    repaired = violations(resumed)[-1]  # events.jsonl holds the first run's too
    assert len(violations(resumed)) == len(found) + 1
    assert (repaired["source"], repaired["action"]) == ("state_file", "repaired")
    assert resumed.loop_state().original_goal == GOAL


class EarlyResolver:
    """Answers resolve_original_goal before goal-guard (its own tryfirst, registered later)."""

    @hookimpl(tryfirst=True)
    def resolve_original_goal(self, loop, stored):
        return "KNOWN FIX (from past success): x\n\n" + stored


def test_a_plugin_answering_before_goal_guard_is_named(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "early": EarlyResolver()},
        config=config(1),
    )
    [violation] = violations(result)
    assert (violation["source"], violation["plugin"], violation["where"]) == (
        "plugin",
        "early",
        "resolve_original_goal",
    )
    assert violation["action"] == "unrepaired"
    assert "sealed as found" in violation["detail"]
    [restored] = result.events_of("loop.original_goal_restored")
    assert restored["source"] == "early"


@pytest.mark.slow
def test_a_plugin_answering_before_goal_guard_on_resume_cannot_change_the_prompt(
    loopctl_project, run_loop
):
    prepare_project(loopctl_project)
    run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(1))
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "early": EarlyResolver()},
        config=config(3),
        resume=True,
    )
    [violation] = violations(result)
    assert (violation["source"], violation["plugin"], violation["action"]) == (
        "plugin",
        "early",
        "unrepaired",
    )
    assert violation["expected_sha256"] == rec.goal_digest(GOAL)
    assert all(goal_section_is(p, GOAL) for p in prompts(result.state_dir).values())
    assert rec.load(result.state_dir).sealed.text == GOAL  # the seal is kept


def test_on_violation_stop_ends_the_loop(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "intake": Contaminator()},
        config=config(5, plugins={"goal-guard": {"on_violation": "stop"}}),
    )
    assert result.status == "plugin"
    assert result.outcome.reason == "goal_violation"
    assert len(result.records) == 1
    assert result.loop_state().original_goal == GOAL


# --- resume -------------------------------------------------------------------------------------


def edit_state_file(state_dir: Path, **fields: Any) -> None:
    """Rewrite front-matter lines of loop-state.md by hand (a field set to None is deleted)."""
    path = state_dir / "loop-state.md"
    lines = path.read_text(encoding="utf-8").split("\n")
    out = []
    for line in lines:
        key = line.split(":", 1)[0]
        if key in fields:
            if fields[key] is not None:
                out.append(f"{key}: {json.dumps(fields[key])}")
            continue
        out.append(line)
    path.write_text("\n".join(out), encoding="utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("edited", "detail"),
    [
        (GOAL + "\n\nBLOCKING ISSUES: tests fail", "differs from the sealed goal"),
        (None, "has no original_goal"),
    ],
)
def test_a_state_file_edited_on_disk_is_repaired_on_resume(
    loopctl_project, run_loop, edited, detail
):
    prepare_project(loopctl_project)
    first = run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2))
    assert first.status == "max_iterations"
    edit_state_file(first.state_dir, original_goal=edited)
    code, _out, err = cli("goal", "check", "--state-dir", str(first.state_dir))
    assert code == 1
    assert "differs" in err or "no goal" in err or "another run" in err
    second = run_loop(
        GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(3), resume=True
    )
    [violation] = violations(second)
    assert (violation["source"], violation["where"], violation["action"]) == (
        "state_file",
        "resume",
        "repaired",
    )
    assert detail in violation["detail"]
    assert second.loop_state().original_goal == GOAL
    assert goal_section_is(prompts(second.state_dir)[3], GOAL)
    assert cli("goal", "check", "--state-dir", str(second.state_dir))[0] == 0
    # The notes went on where they were: the test note has been seen in all three iterations.
    assert "seen 3×" in second.loop_state().goal


#: What the bash predecessor left behind: `goal` with synthesized sections, `\n` escapes,
#: ISO times, keys loopctl does not know.
BASH_GOAL = "Add rate limiting to the API.\nKeep the 429 responses JSON."
BASH_CONTAMINATED = (
    BASH_GOAL
    + "\n\nBLOCKING ISSUES (from review):\n- the limiter ignores X-Forwarded-For"
    + "\n\nIMPORTANT — Previous build failed at npm test\n\nHUMAN FEEDBACK: use redis"
)


def bash_state(goal_line: str, original_line: str | None) -> str:
    lines = [
        "---",
        goal_line,
        *([original_line] if original_line is not None else []),
        "iteration: 2",
        "max_iterations: 5",
        "status: running",
        f"test_cmd: {json.dumps(TEST_CMD)}",
        "model: opus",
        "started_at: 2025-05-01T12:00:00Z",
        "consecutive_failures: 1",
        "---",
        "",
        "## Log",
        "",
    ]
    return "\n".join(lines)


def bash_escape(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace("\n", "\\n") + '"'


@pytest.mark.slow
@pytest.mark.parametrize(
    ("original_line", "field"),
    [
        (None, "goal"),  # no original_goal at all
        (f"original_goal: {bash_escape(BASH_CONTAMINATED)}", "original_goal"),  # RC1/RC2
    ],
)
def test_a_legacy_state_file_is_recovered_and_said_so(
    loopctl_project, run_loop, original_line, field
):
    prepare_project(loopctl_project)
    state_dir = loopctl_project.path / ".loopctl"
    state_dir.mkdir()
    (state_dir / "loop-state.md").write_text(
        bash_state(f"goal: {bash_escape(BASH_CONTAMINATED)}", original_line), encoding="utf-8"
    )
    result = run_loop(
        "ignored", turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2), resume=True
    )
    [recovered] = result.events_of(gg.LEGACY_RECOVERED)
    assert recovered["field"] == field
    assert recovered["removed"] == [
        "BLOCKING ISSUES",
        "IMPORTANT — Previous build",
        "HUMAN FEEDBACK",
    ]
    assert recovered["chars"] == len(BASH_GOAL)
    assert result.events_of(gg.SEALED)[0]["sealed_from"] == "legacy"
    assert violations(result) == []
    assert result.loop_state().original_goal == BASH_GOAL
    assert all(goal_section_is(p, BASH_GOAL) for p in prompts(state_dir).values())
    [restored] = result.events_of("loop.original_goal_restored")
    assert restored["source"] == "goal-guard"
    assert restored["chars"] == len(BASH_GOAL)


#: A user's own goal that happens to contain a bash sentinel after a blank line.
SENTINEL_GOAL = "Write the incident report.\n\nBLOCKING ISSUES: list the ones from May."


@pytest.mark.slow
def test_a_record_from_another_run_is_not_mistaken_for_a_violation(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    first = run_loop("first goal", turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(1))
    # The next loop in the same state directory runs without goal-guard, and is resumed with it;
    # its goal is taken as loopctl captured it (a loopctl-era file is never "recovered").
    second = run_loop(SENTINEL_GOAL, turns=SAY, test_cmd=TEST_CMD, config=config(1))
    assert second.state_dir == first.state_dir
    third = run_loop(
        "x", turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2), resume=True
    )
    assert violations(third) == []
    assert third.events_of(gg.RECORD_REPLACED)
    assert third.events_of(gg.LEGACY_RECOVERED) == []
    assert third.loop_state().original_goal == SENTINEL_GOAL
    assert (third.state_dir / rec.GUARD_DIR / rec.GOAL_FILE).read_text() == SENTINEL_GOAL
    assert goal_section_is(prompts(third.state_dir)[2], SENTINEL_GOAL)


def test_a_damaged_record_of_this_run_is_reported_and_resealed(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    first = run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(1))
    guard_dir = first.state_dir / rec.GUARD_DIR
    (guard_dir / rec.GOAL_FILE).write_text("edited")
    (guard_dir / rec.RECORD_FILE).write_text("{not json")
    second = run_loop(
        GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2), resume=True
    )
    [violation] = violations(second)
    assert (violation["source"], violation["action"]) == ("guard_record", "resealed")
    assert (guard_dir / rec.GOAL_FILE).read_text(encoding="utf-8") == GOAL
    assert goal_section_is(prompts(second.state_dir)[2], GOAL)
    assert "(tests, iteration 1)_" in notes_section(prompts(second.state_dir)[2])  # notes kept


BUILD_SH = """\
read -r state < status.txt
case "$state" in
  ok) echo "build ok"; exit 0 ;;
  *) echo "error: $state"; exit 2 ;;
esac
"""


@pytest.mark.slow
def test_a_failure_the_runner_does_not_name_gets_one_note_until_it_changes_or_passes(
    loopctl_project, run_loop
):
    loopctl_project.write("build.sh", BUILD_SH)
    loopctl_project.write("status.txt", "linker cannot find libfoo\n")
    loopctl_project.commit("build")
    write = lambda text: {"write": "status.txt", "content": text + "\n"}  # noqa: E731
    result = run_loop(
        GOAL,
        turns=[SAY[0], [write("undefined symbol bar")], SAY[0], [write("ok")]],
        test_cmd="sh build.sh",
        plugins=PLUGINS,
        config=config(6),
    )
    assert result.status == "complete"
    logged = prompts(result.state_dir)
    assert "`sh build.sh` fails (exit code 2): error: linker cannot find libfoo _(tests" in (
        notes_section(logged[2])
    )
    assert "libfoo" not in notes_section(logged[3])  # superseded by the new failure
    assert "error: undefined symbol bar _(tests, iteration 2, seen 2×" in notes_section(logged[4])
    assert result.loop_state().goal == GOAL  # passed: the note expired


# --- restarts, stuck, status, commands, config, schema ------------------------------------------


@pytest.mark.slow
def test_your_goal_stays_the_original_when_stuck_and_after_a_restart(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "reviewer": NoteSource(per_iteration=0, steady=["Mind the cache."])},
        config=config(6, session="resume", stuck={"enabled": True, "window": 2}),
    )
    assert result.status == "stuck"
    assert result.events_of("loop.restart")
    logged = prompts(result.state_dir)
    assert len(logged) == 4
    assert any("## Try a Different Approach" in p for p in logged.values())  # the nudge
    assert all(goal_section_is(p, GOAL) for p in logged.values())
    assert "Mind the cache." in notes_section(logged[4])  # notes survive the restart
    assert violations(result) == []


@pytest.mark.slow
def test_status_shows_the_prompt_size(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2))
    code, out, _err = cli("status", "--state-dir", str(result.state_dir))
    assert code == 0
    assert f"prompt size: {result.records[-1]['prompt_chars']:,} chars" in out


@pytest.mark.slow
def test_the_goal_commands(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "reviewer": NoteSource(per_iteration=0, steady=["Mind the cache."])},
        config=config(2),
    )
    where = ("--state-dir", str(result.state_dir))
    code, out, _ = cli("goal", "show", *where)
    assert code == 0
    assert out.endswith("---\n" + GOAL)
    assert "loop-state.md agrees: yes" in out
    code, out, _ = cli("goal", "show", "--json", *where)
    data = json.loads(out)
    assert data["sealed"]["text"] == GOAL
    assert data["agrees"] is True
    code, out, _ = cli("goal", "notes", *where)
    assert code == 0
    assert "Mind the cache. _(reviewer, iteration 1, seen 2×" in out
    assert cli("goal", "check", *where)[0] == 0


def test_a_bad_config_value_names_the_key(loopctl_project, run_loop):
    from loopctl import ConfigError

    prepare_project(loopctl_project)
    with pytest.raises(ConfigError, match=r"plugins\.goal-guard\.notes_budget_chars.*at least"):
        run_loop(
            GOAL,
            turns=SAY,
            test_cmd=TEST_CMD,
            plugins=PLUGINS,
            config=config(1, plugins={"goal-guard": {"notes_budget_chars": 10}}),
        )


class Broken:
    @hookimpl
    def goal_guard_notes(self, loop):
        raise RuntimeError("no notes today")


def test_a_failing_note_source_loses_only_its_own_notes(loopctl_project, run_loop):
    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={
            **PLUGINS,
            "broken": Broken(),
            "reviewer": NoteSource(per_iteration=0, steady=["Mind the cache."]),
        },
        config=config(2),
    )
    errors = result.events_of("plugin.error")
    assert errors
    assert all(e["plugin"] == "broken" for e in errors)
    assert "Mind the cache." in notes_section(prompts(result.state_dir)[2])


def test_every_event_of_a_guarded_run_matches_the_published_schema(loopctl_project, run_loop):
    jsonschema = pytest.importorskip("jsonschema")
    from loopctl.testing import event_schema
    from loopctl_goal_guard.events import event_schemas

    prepare_project(loopctl_project)
    result = run_loop(
        GOAL,
        turns=SAY,
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "intake": Contaminator(), "reviewer": NoteSource()},
        config=config(2, plugins={"goal-guard": {"note_ttl_iterations": 1}}),
    )
    validator = jsonschema.Draft202012Validator(event_schema(event_schemas()))
    seen = set()
    for line in result.events:
        validator.validate(line)
        seen.add(line["type"])
    assert {
        gg.SEALED,
        gg.VIOLATION,
        gg.NOTES,
        gg.NOTES_EXPIRED,
        gg.WORKING_GOAL_RESTORED,
    } <= seen
    assert SavedRun(result.state_dir).loop_state().original_goal == GOAL


@pytest.mark.slow
def test_a_failure_inside_the_prompt_wrapper_never_breaks_the_loop(
    loopctl_project, run_loop, monkeypatch
):
    from loopctl_goal_guard.guard import GoalGuard

    def explode(self, results):
        raise RuntimeError("police down")

    monkeypatch.setattr(GoalGuard, "police", explode)
    prepare_project(loopctl_project)
    result = run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2))
    assert result.status == "max_iterations"
    errors = result.events_of("plugin.error")
    assert [(e["plugin"], e["hook"]) for e in errors] == [("goal-guard", "compose_prompt")] * 2
    assert "police down" in errors[0]["traceback"]
    assert all(goal_section_is(p, GOAL) for p in prompts(result.state_dir).values())


class CountingSource(NoteSource):
    """A steady note, and the iterations goal-guard asked for notes after."""

    def __init__(self) -> None:
        super().__init__(per_iteration=0, steady=["Mind the cache."])
        self.asked: list[int] = []

    @hookimpl
    def goal_guard_notes(self, loop: Any) -> list[Any]:
        self.asked.append(loop.iteration)
        return super().goal_guard_notes(loop)


@pytest.mark.slow
def test_an_iteration_retried_after_a_rate_limit_counts_once(loopctl_project, run_loop):
    """after_iteration also closes a rate-limited attempt; goal-guard learns nothing from it
    (the iteration runs again): notes are gathered once per iteration."""
    prepare_project(loopctl_project)
    limited = {"error": "rate_limit", "message": "slow down", "retry_after": 0.1, "once": True}
    source = CountingSource()
    result = run_loop(
        GOAL,
        turns=[[limited, {"say": "working"}], SAY[0]],
        test_cmd=TEST_CMD,
        plugins={**PLUGINS, "reviewer": source},
        config=config(2),
    )
    assert result.events_of("agent.rate_limit_wait")
    assert source.asked == [1, 2]
    goal = result.loop_state().goal
    assert "Mind the cache. _(reviewer, iteration 1, seen 2×, last in iteration 2)" in goal
    assert "test_one` fails: AssertionError: test_a.py::test_one is broken _(tests, " in goal


@pytest.mark.slow
def test_a_resume_of_the_same_loop_without_goal_guards_key_keeps_its_record(
    loopctl_project, run_loop
):
    """A loopctl killed before loop-state.md held goal-guard's key: the record is this loop's
    (loop.run_id says so), not another run's (issue 25)."""
    import re

    prepare_project(loopctl_project)
    first = run_loop(GOAL, turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(1))
    path = first.state_dir / "loop-state.md"
    text, removed = re.subn(r'"goal_guard_run": "[0-9a-f]+"(, )?', "", path.read_text())
    assert removed == 1
    path.write_text(text)
    second = run_loop(
        "x", turns=SAY, test_cmd=TEST_CMD, plugins=PLUGINS, config=config(2), resume=True
    )
    assert second.events_of(gg.RECORD_REPLACED) == []
    assert violations(second) == []
    [sealed] = second.events_of(gg.SEALED)  # the first run's: nothing sealed anew on resume
    assert sealed["sealed_from"] == "cli"
    assert second.loop_state().original_goal == GOAL
