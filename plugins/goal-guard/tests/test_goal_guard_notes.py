"""Notes: deduplicated with a count, attributed, expiring when resolved, within a budget."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_goal_guard.notes import (
    NOTICE_ROOM,
    Note,
    NoteBook,
    NoteJournal,
    TestOutcome,
    coerce_note,
)


def note(text: str, **fields: Any) -> Note:
    return Note(text=text, source=fields.pop("source", "reviewer"), **fields)


def test_the_same_note_from_two_iterations_is_kept_once_with_a_count() -> None:
    book = NoteBook()
    assert book.report(note("rename the helper"), 1) == "added"
    assert book.report(note("rename the helper"), 1) == "merged"  # same iteration: no count
    assert book.report(note("rename the helper"), 3) == "seen"
    assert book.report(note("Rename   the helper", source="linter"), 4) == "seen"
    [entry] = book.entries.values()
    assert (entry.count, entry.first_iteration, entry.last_iteration) == (3, 1, 4)
    assert entry.sources == ("reviewer", "linter")
    assert entry.render() == (
        "- Rename   the helper _(reviewer, linter, iteration 1, seen 3×, last in iteration 4)_"
    )


def test_numbers_and_paths_do_not_make_a_note_new() -> None:
    book = NoteBook()
    book.report(note("build took 3.2 s in /tmp/abc/x.py at 12:00:01"), 1)
    book.report(note("build took 41.9 s in /tmp/zzz/x.py at 13:10:07"), 2)
    assert len(book) == 1
    assert next(iter(book.entries.values())).text.startswith("build took 41.9 s")  # latest


def test_explicit_keys_are_per_source() -> None:
    book = NoteBook()
    book.report(note("a", key="k", source="one"), 1)
    book.report(note("b", key="k", source="two"), 1)
    book.report(note("a, updated", key="k", source="one"), 2)
    assert sorted(book.entries) == ["one:k", "two:k"]
    assert book.entries["one:k"].text == "a, updated"


def test_a_test_failure_note_expires_when_its_test_passes() -> None:
    book = NoteBook()
    book.report(note("x fails", tests=("t.py::x",)), 1)
    book.report(note("y fails", tests=("t.py::y",)), 1)
    book.report(note("about the run", until_pass=True), 1)
    book.report(note("a review remark"), 1)
    assert book.expire(2, TestOutcome(passed=False, failing=None)) == []  # runner named none
    gone = book.expire(2, TestOutcome(passed=False, failing=frozenset({"t.py::y"})))
    assert gone == [("text:x fails", "its tests pass")]
    assert book.expire(3, TestOutcome(passed=True)) == [
        ("text:y fails", "tests pass"),
        ("text:about the run", "tests pass"),
    ]
    assert [e.text for e in book.entries.values()] == ["a review remark"]


def test_resolved_and_stale_notes_go() -> None:
    book = NoteBook(default_ttl=3)
    book.report(note("old"), 1)
    book.report(note("kept fresh"), 1)
    book.report(note("short-lived", ttl_iterations=1), 1)
    book.report(note("until resolved", key="r"), 1)
    assert book.report(note("", key="r", resolved=True), 2) == "resolved"
    assert book.report(note("", key="nope", resolved=True), 2) == "unknown"
    assert [k for k, _ in book.expire(2, None)] == ["text:short-lived"]
    book.report(note("kept fresh"), 3)
    assert [k for k, _ in book.expire(4, None)] == ["text:old"]
    assert list(book.entries) == ["text:kept fresh"]


def test_the_budget_drops_lowest_priority_then_oldest_with_a_notice() -> None:
    book = NoteBook()
    for i in range(30):
        book.report(note(f"remark {i:02d} " + "x" * 60, key=f"r{i}"), i)
    book.report(note("important", key="imp", priority=90), 0)
    book.report(note("trivia", key="triv", priority=5), 29)
    budget = 800
    rendered = book.render(budget)
    assert len(rendered.body) <= budget
    assert rendered.total == 32
    assert rendered.shown + rendered.left_out == 32
    lines = rendered.body.splitlines()
    assert lines[0].startswith("- important")  # highest priority first, even though oldest
    assert "trivia" not in rendered.body  # lowest priority goes first
    shown = [int(line[len("- remark ") :][:2]) for line in lines if line.startswith("- remark")]
    assert shown == sorted(shown)
    assert shown[-1] == 29
    assert shown[0] == 30 - len(shown)  # the oldest left out
    assert lines[-1] == (
        f"_{rendered.left_out} older or lower-priority notes left out to keep this section "
        f"within {budget} characters._"
    )


def test_re_reporting_an_old_note_keeps_it_in_the_budget() -> None:
    book = NoteBook()
    for i in range(20):
        book.report(note("y" * 80, key=f"r{i}"), i)
    assert "r0" not in book.render(400).body
    book.report(note("the first one, again", key="r0"), 20)
    assert "the first one, again" in book.render(400).body


def test_the_cap_evicts_the_lowest_priority_oldest_notes() -> None:
    book = NoteBook(max_notes=3)
    book.report(note("keep: high", priority=80), 1)
    for i in range(4):
        book.report(note(f"n{i} words"), i)
    assert book.evict_over_cap() == ["text:n0 words", "text:n1 words"]
    assert sorted(book.entries) == ["text:keep: high", "text:n2 words", "text:n3 words"]


def test_the_journal_round_trips_and_compacts(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    book, journal = NoteBook(), NoteJournal(path)
    journal.reset()
    compacted = False
    for i in range(400):
        book.report(note(f"remark {i % 7} words", key=f"k{i % 7}", tests=(f"t{i % 3}",)), i)
        if i % 50 == 0:
            book.remove("reviewer:k3")
        compacted |= journal.append(book.take_changes(), book)
    journal.close()
    assert compacted
    assert journal.lines <= 4 * len(book) + 256
    again = NoteBook()
    assert NoteJournal(path).read_into(again) == (0, [])
    assert {k: e.to_json() for k, e in again.entries.items()} == {
        k: e.to_json() for k, e in book.entries.items()
    }
    assert [e.key for e in again.keep_order()] == [e.key for e in book.keep_order()]
    again.report(note("new"), 401)
    assert again.entries["text:new"].seq > max(e.seq for e in book.entries.values())


def test_a_torn_or_damaged_journal_loses_only_its_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    book, journal = NoteBook(), NoteJournal(path)
    book.report(note("one"), 1)
    book.report(note("two"), 1)
    journal.append(book.take_changes(), book)
    journal.close()
    with path.open("a") as handle:
        handle.write('{"op": "put", "key": 3}\n{"op": "explode"}\n{"op": "put", "key": "x", "te')
    again = NoteBook()
    bad, problems = NoteJournal(path).read_into(again)
    assert (bad, len(problems)) == (2, 1)
    assert sorted(again.entries) == ["text:one", "text:two"]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("plain text", Note("plain text", source="p")),
        (
            {"text": "t", "priority": 300, "tests": "a::b"},
            Note("t", "p", priority=100, tests=("a::b",)),
        ),
        ({"text": "t", "priority": math.nan, "ttl_iterations": 0}, Note("t", "p")),
        ({"text": "t", "priority": True, "until_pass": 1}, Note("t", "p")),
        ({"key": "k", "resolved": True}, Note("", "p", key="k", resolved=True)),
        ({"text": "   "}, None),
        ({"text": 5}, None),
        (["not", "a", "note"], None),
        (None, None),
    ],
)
def test_plugins_may_return_notes_in_plain_shapes(raw: Any, expected: Note | None) -> None:
    assert coerce_note(raw, default_source="p", max_chars=400) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=6)
    ),
    max_leaves=20,
)
note_like = st.fixed_dictionaries(
    {},
    optional={
        "text": json_values | st.text(max_size=600),
        "key": json_values,
        "priority": json_values,
        "tests": json_values,
        "until_pass": json_values,
        "resolved": json_values,
        "ttl_iterations": json_values,
        "source": json_values,
    },
)


@settings(max_examples=100, deadline=None)
@given(raw=json_values | note_like)
def test_coercion_never_raises_and_bounds_every_field(raw: Any) -> None:
    result = coerce_note(raw, default_source="plugin", max_chars=100)
    if result is not None:
        assert len(result.text) <= 100
        assert 0 <= result.priority <= 100
        assert result.text.strip() or result.resolved
        assert all(isinstance(t, str) for t in result.tests)
        assert result.source


@settings(max_examples=200, deadline=None)
@given(
    reports=st.lists(
        st.tuples(
            st.text(min_size=1, max_size=300) | st.text(min_size=100, max_size=400),
            st.integers(0, 100),
            st.integers(1, 50),
            st.sampled_from(["a", "b", "c"]),
        ),
        max_size=60,
    ),
    budget=st.integers(600, 3000),
)
def test_the_rendered_notes_always_fit_the_budget(
    reports: list[tuple[str, int, int, str]], budget: int
) -> None:
    book = NoteBook(max_notes=40)
    for text, priority, iteration, source in reports:
        coerced = coerce_note(
            {"text": text, "priority": priority, "source": source},
            default_source="x",
            max_chars=400,
        )
        if coerced is not None:
            book.report(coerced, iteration)
    book.evict_over_cap()
    assert len(book) <= 40
    rendered = book.render(budget)
    assert len(rendered.body) <= budget
    assert rendered.shown + rendered.left_out == len(book)
    assert (rendered.left_out > 0) == ("left out to keep" in rendered.body)
    # What is shown is exactly the head of the keep order: nothing left out outranks (higher
    # priority, or same priority and more recently reported) anything shown.
    lines = f"\n{rendered.body}\n"
    for position, entry in enumerate(book.keep_order()):
        assert (f"\n{entry.render()}\n" in lines) == (position < rendered.shown)
    json.dumps(book.snapshot_lines())  # the journal can always be written
    assert budget > NOTICE_ROOM
