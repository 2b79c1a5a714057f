"""The briefing: deterministic, within budget, protected parts kept, never cut mid-line; and the
tool-call log it draws on, bounded by retention."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import ToolCall
from loopctl_context_monitor.activity import ActivityLog, key_line, tool_kind
from loopctl_context_monitor.briefing import (
    BriefingInputs,
    Section,
    build_briefing,
    fit,
    sections_for,
    trim_text,
)
from loopctl_context_monitor.handoff import cross_check, mentioned_paths

GOAL = "Make the test suite of the inventory package pass without changing the tests."


def full_inputs(**overrides: object) -> BriefingInputs:
    fields: dict[str, object] = {
        "goal": GOAL,
        "trigger": "warn",
        "restart_number": 1,
        "iteration": 4,
        "max_iterations": 20,
        "tokens": 150_000,
        "window": 200_000,
        "tests_passed": False,
        "test_command": "pytest -q",
        "failing_tests": ["tests/test_stock.py::test_value"],
        "error_lines": ["E   AssertionError: 17.5 != 27.5"],
        "modified": [
            "2 files changed, 10 insertions(+), 3 deletions(-)",
            "- inventory/stock.py | 9 ++++++---",
            "- inventory/util.py | 4 ++++",
        ],
        "failed_approaches": ["python-slugify is not installed: do not import it"],
        "incomplete_files": ["inventory/util.py"],
        "recent_activity": ["- edited `inventory/stock.py`", "- read `inventory/stock.py`"],
        "older_activity": [f"- read `file{i}.py`" for i in range(200)],
    }
    fields.update(overrides)
    return BriefingInputs(**fields)  # type: ignore[arg-type]


def test_the_briefing_has_every_part_in_priority_order() -> None:
    briefing = build_briefing(full_inputs(older_activity=[]), 4000)
    text = briefing.text
    order = [
        "### Why this is a fresh session",
        "### Approaches that did not work",
        "### Possibly incomplete: verify before building on them",
        "### Goal",
        "### Failing tests and latest errors",
        "### Files modified since the loop began",
        "### Latest tool calls (newest first)",
    ]
    positions = [text.index(title) for title in order]
    assert positions == sorted(positions)
    assert "75% full (150,000 of 200,000 tokens), over the warn threshold of 70%" in text
    assert "iteration 4 of at most 20 (restart 1)" in text
    assert "- inventory/stock.py | 9 ++++++---" in text
    assert "python-slugify is not installed" in text
    assert "E   AssertionError: 17.5 != 27.5" in text
    assert briefing.trimmed == []
    assert "budget" not in text


def test_over_budget_trims_the_lowest_priority_first_with_a_notice() -> None:
    briefing = build_briefing(full_inputs(), 2000)
    assert len(briefing.text) <= 2000
    assert briefing.trimmed[0].startswith("Earlier tool calls (reduced) (")
    assert "Files modified since the loop began" not in " ".join(briefing.trimmed)
    assert briefing.text.endswith("._")
    assert "_Briefing budget (2,000 characters) reached; cut: Earlier tool calls" in briefing.text
    # every kept activity line is a whole original line
    kept = [line for line in briefing.text.splitlines() if line.startswith("- read `file")]
    assert kept == [f"- read `file{i}.py`" for i in range(len(kept))]


def test_protected_parts_survive_any_budget() -> None:
    many = [f"approach {i}: did not work because of reason {i}" for i in range(60)]
    briefing = build_briefing(full_inputs(failed_approaches=many), 2000)
    for approach in many:
        assert f"- {approach}" in briefing.text
    assert "- inventory/util.py" in briefing.text
    assert "Goal (left out)" in briefing.text  # unprotected parts went first


def test_deterministic() -> None:
    assert build_briefing(full_inputs(), 1500).text == build_briefing(full_inputs(), 1500).text


def test_no_git_no_tests_nothing_seen_still_briefs() -> None:
    briefing = build_briefing(BriefingInputs(goal="do it", trigger="overflow"), 2000)
    assert "Tests: not run yet." in briefing.text
    assert "the agent ran out of context (last measured: of unknown fill)" in briefing.text
    assert "### Goal\ndo it" in briefing.text


def test_restored_files_have_their_own_section() -> None:
    text = build_briefing(
        full_inputs(incomplete_files=[], restored_files=["a.py", "new.py"]), 4000
    ).text
    assert "### Restored to before the interrupted turn" in text
    assert "- a.py\n- new.py" in text
    assert "Possibly incomplete" not in text


def test_trim_text_cuts_a_replacement_at_a_line_boundary() -> None:
    text = "\n".join(f"line {i:04d}" for i in range(1000))
    cut, was_cut = trim_text(text, 500)
    assert was_cut
    assert len(cut) <= 500
    body = cut.rsplit("\n\n", 1)[0]
    assert all(line.startswith("line ") and len(line) == 9 for line in body.splitlines())
    assert trim_text("short", 500) == ("short", False)


lines = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=80
)


@settings(max_examples=120, deadline=None)
@given(
    goal=st.text(max_size=600),
    approaches=st.lists(lines, max_size=4),
    incomplete=st.lists(lines, max_size=4),
    errors=st.lists(lines, max_size=15),
    failing=st.lists(lines, max_size=15),
    modified=st.lists(lines, max_size=40),
    recent=st.lists(lines, max_size=20),
    older=st.lists(lines, max_size=60),
    budget=st.integers(300, 5000),
    tokens=st.none() | st.integers(0, 10_000_000),
    window=st.none() | st.integers(0, 2_000_000),
)
def test_any_inputs_give_a_briefing_within_budget_cut_at_lines(
    goal: str,
    approaches: list[str],
    incomplete: list[str],
    errors: list[str],
    failing: list[str],
    modified: list[str],
    recent: list[str],
    older: list[str],
    budget: int,
    tokens: int | None,
    window: int | None,
) -> None:
    inputs = BriefingInputs(
        goal=goal,
        tokens=tokens,
        window=window,
        tests_passed=bool(failing) or None,
        failing_tests=failing,
        error_lines=errors,
        modified=modified,
        failed_approaches=approaches,
        incomplete_files=incomplete,
        recent_activity=recent,
        older_activity=older,
    )
    briefing = build_briefing(inputs, budget)
    sections = sections_for(inputs)
    protected = [s for s in sections if s.protected]
    protected_chars = sum(len(s.title) + 6 + sum(len(x) + 1 for x in s.lines) for s in protected)
    notice_room = 400
    if protected_chars + notice_room <= budget:
        assert len(briefing.text) <= budget
    original = {line for s in sections for line in s.lines}
    for line in briefing.text.split("\n"):
        assert (
            line == ""
            or line.startswith("### ")
            or line.startswith("_Briefing budget (")
            or line in original
        ), line
    for section in protected:
        for line in section.lines:
            assert line in briefing.text


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 200), st.booleans()), max_size=30),
    st.integers(1, 2000),
)
def test_fit_keeps_whole_lines_of_unprotected_sections(
    shape: list[tuple[int, bool]], budget: int
) -> None:
    sections = [
        Section(f"S{i}", [f"{i}:{'x' * size}"] * 3, protected=protected)
        for i, (size, protected) in enumerate(shape)
    ]
    text, _ = fit(sections, budget)
    protected_text = fit([s for s in sections if s.protected], 10**9)[0]
    if len(protected_text) + 600 + 50 * len(shape) <= budget:
        assert len(text) <= budget
    for line in text.split("\n"):
        assert line == "" or line.startswith(("### S", "_Briefing")) or ":" in line
    assert all(s.title in text for s in sections if s.protected)


# --- the tool-call log -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("Read", "read"),
        ("read_file", "read"),
        ("Edit", "edit"),
        ("MultiEdit", "edit"),
        ("Write", "edit"),
        ("file_change", "edit"),
        ("replace", "edit"),
        ("Bash", "command"),
        ("command_execution", "command"),
        ("run_shell_command", "command"),
        ("Grep", "search"),
        ("Glob", "search"),
        ("TodoWrite", "other"),
        ("Task", "other"),
        ("mcp:server/tool", "other"),
    ],
)
def test_tool_kinds_across_clis(name: str, kind: str) -> None:
    assert tool_kind(name) == kind


def test_recent_calls_in_detail_older_reduced_by_type() -> None:
    log = ActivityLog(recent=2, retention=10)
    calls = [
        ToolCall("Read", "a.py", "1"),
        ToolCall("Bash", "pytest -q", "2"),
        ToolCall("Edit", "a.py", "3"),
        ToolCall("Edit", "a.py", "4"),
        ToolCall("Bash", "pytest -q", "5"),
    ]
    for call in calls:
        log.note_call(call)
        if call.name == "Bash":
            call.result_excerpt = "collected 3 items\n1 failed, 2 passed in 0.1s\n"
            call.exit_code = 1
            log.note_result(call)
    assert log.recent_lines() == [
        "- ran `pytest -q` → exit 1: 1 failed, 2 passed in 0.1s",
        "- edited `a.py`",
    ]
    assert log.older_lines() == ["- edited `a.py`", "- ran `pytest -q` → exit 1", "- read `a.py`"]
    assert log.total == 5


def test_key_line_prefers_errors() -> None:
    assert key_line("ok\nTraceback (most recent call last):\nboom\n") == (
        "Traceback (most recent call last):"
    )
    assert key_line("one\ntwo\n") == "two"
    assert key_line(None) == ""
    assert key_line("   \n") == ""


def test_retention_bounds_memory_not_run_length() -> None:
    def peak(calls: int) -> int:
        log = ActivityLog(recent=10, retention=200)
        tracemalloc.start()
        for i in range(calls):
            log.note_call(ToolCall("Read", f"src/module_{i}.py", str(i)))
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(log.recent) == 10
        assert sum(len(t) for t in log.older.values()) <= 200
        return top

    small, large = peak(2_000), peak(20_000)
    assert large < small * 1.5


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.builds(
            ToolCall,
            name=st.text(max_size=30),
            key_input=st.text(max_size=400),
            id=st.text(max_size=5),
            result_excerpt=st.none() | st.text(max_size=200),
            is_error=st.none() | st.booleans(),
            exit_code=st.none() | st.integers(-300, 300),
        ),
        max_size=40,
    ),
    st.integers(0, 5),
    st.integers(0, 5),
)
def test_any_tool_calls_are_logged_without_error(
    calls: list[ToolCall], recent: int, retention: int
) -> None:
    log = ActivityLog(recent=recent, retention=retention)
    for call in calls:
        log.note_call(call)
        log.note_result(call)
    assert len(log.recent) <= recent
    assert all(len(table) <= retention for table in log.older.values())
    for line in log.recent_lines() + log.older_lines():
        assert "\n" not in line
        assert line.startswith("- ")


# --- the handoff cross-check -------------------------------------------------------------------


def test_cross_check_names_mismatches_with_git() -> None:
    note = "Done: src/parser.py is complete. Remaining: wire it into main.py. See README.md."
    check = cross_check(note, changed=["src/parser.py", "src/lexer.py"], exists=["README.md"])
    assert check[0] == "loopctl checked the note against git:"
    assert "- named in the note but not found in the project: main.py" in check
    assert "- named in the note but not changed: README.md" in check
    assert "- changed but not named in the note: src/lexer.py" in check


def test_cross_check_all_consistent() -> None:
    check = cross_check("Edited calc.py", changed=["calc.py"])
    assert check[-1].startswith("- every changed file is named")


def test_mentioned_paths() -> None:
    assert mentioned_paths("see ./src/a.py, docs/guide and http://x.io/y.html") == [
        "src/a.py",
        "docs/guide",
    ]
    assert mentioned_paths("e.g. version 1.2.3, i.e. notes.md") == ["notes.md"]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=500), st.lists(st.text(max_size=30), max_size=10))
def test_cross_check_never_raises(note: str, changed: list[str]) -> None:
    check = cross_check(note, changed)
    assert check[0] == "loopctl checked the note against git:"
    assert len(check) >= 2
