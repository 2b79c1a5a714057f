"""suggestions.jsonl: append-only records, and the effectiveness verdict."""

from __future__ import annotations

from pathlib import Path

from loopctl_context_errors.ledger import Ledger, SuggestionSet, judge

ACTIONS = [
    {"text": "check the path", "source": "category", "key": "category:FILE_ACCESS:check-path"},
    {"text": "re-run", "source": "stage", "key": "stage:tests"},
]


def _set(tests: list[str]) -> SuggestionSet:
    return SuggestionSet("s1", 1, "tests", "FILE_ACCESS", "file.not-found", ACTIONS, tests)


def test_effective_only_when_its_failing_tests_pass() -> None:
    about = ["t.py::a", "t.py::b"]
    assert judge(_set(about), tests_passed=True, failing_now=[]).effective
    verdict = judge(_set(about), tests_passed=False, failing_now=["t.py::c"])
    assert (verdict.effective, verdict.reason) == (True, "its_tests_pass")
    verdict = judge(_set(about), tests_passed=False, failing_now=["t.py::b", "t.py::c"])
    assert (verdict.effective, verdict.reason) == (False, "still_failing")
    assert verdict.still_failing == ["t.py::b"]
    # a run that names no failing tests (a collection error) proves nothing
    assert not judge(_set(about), tests_passed=False, failing_now=[]).effective
    # a suggestion about no named test needs the whole run to pass
    assert not judge(_set([]), tests_passed=False, failing_now=["x"]).effective
    assert judge(_set([]), tests_passed=True, failing_now=[]).effective


def test_resolution_appends_and_never_rewrites(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.record_suggestion(
        "s1", category="FILE_ACCESS", stage="tests", actions=ACTIONS, failing_tests=["a"]
    )
    ledger.record_suggestion("s2", category="TYPE_ERROR", stage="tests", actions=ACTIONS)
    before = ledger.path.read_bytes()
    done = ledger.resolve_outstanding(tests_passed=False, failing_now=["b"], iteration=2)
    after = ledger.path.read_bytes()
    assert after.startswith(before)
    assert [(entry.id, verdict.effective) for entry, verdict in done] == [
        ("s1", True),
        ("s2", False),
    ]
    assert ledger.outstanding() == []
    # resolving again changes nothing: already-resolved sets are left alone
    assert ledger.resolve_outstanding(tests_passed=True, failing_now=[]) == []
    assert ledger.path.read_bytes() == after
    entries = {entry.id: entry for entry in ledger.entries()}
    assert entries["s1"].effective is True
    assert entries["s2"].effective is False
    assert entries["s1"].keys == ["category:FILE_ACCESS:check-path", "stage:tests"]


def test_missing_and_torn_files_are_tolerated(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "nowhere")
    assert ledger.entries() == []
    assert ledger.outstanding() == []
    ledger = Ledger(tmp_path)
    ledger.record_suggestion("s1", category="UNKNOWN", stage="tests", actions=ACTIONS)
    with ledger.path.open("ab") as handle:
        handle.write(b'{"kind": "resolution", "id": "s1", "eff')  # a crash mid-write
    assert [entry.id for entry in ledger.outstanding()] == ["s1"]


def test_a_ledger_given_a_submit_appends_where_it_says_in_order(tmp_path: Path) -> None:
    """In a loop the appends run as background work (while the loop waits): recording a set
    returns its entry at once, and the file gets the lines in order when the work runs."""
    from collections.abc import Callable

    from loopctl_context_errors.ledger import Verdict

    queued: list[Callable[[], None]] = []
    ledger = Ledger(tmp_path, keep_open=True, submit=queued.append)
    entry = ledger.record_suggestion(
        "s1", category="FILE_ACCESS", stage="tests", actions=ACTIONS, failing_tests=["a"]
    )
    ledger.mark_resolved("s1", Verdict(True, "tests_pass", passed_tests=["a"]), iteration=2)
    assert entry.id == "s1"
    assert entry.failing_tests == ["a"]
    assert not ledger.path.exists()
    assert len(queued) == 2
    for task in queued:
        task()
    ledger.close()
    (written,) = Ledger(tmp_path).entries()
    assert (written.id, written.resolved, written.effective) == ("s1", True, True)


def test_each_set_names_the_loop_that_made_it(tmp_path: Path) -> None:
    """A state directory may hold an earlier loop's sets: a loop counts only its own (its
    ``loop.run_id``), and sets of a ledger without ids belong to a loop without one."""
    ledger = Ledger(tmp_path)
    ledger.record_suggestion("old", category="UNKNOWN", stage="tests", actions=ACTIONS)
    ledger.record_suggestion("a1", category="UNKNOWN", stage="tests", actions=ACTIONS, run="A")
    ledger.record_suggestion("b1", category="UNKNOWN", stage="tests", actions=ACTIONS, run="B")
    ledger.record_suggestion("a2", category="UNKNOWN", stage="tests", actions=ACTIONS, run="A")
    assert [e.id for e in Ledger(tmp_path).entries_of("A")] == ["a1", "a2"]
    assert [e.id for e in Ledger(tmp_path).entries_of("B")] == ["b1"]
    assert [e.id for e in Ledger(tmp_path).entries_of(None)] == ["old"]
    assert [e.id for e in Ledger(tmp_path).entries()] == ["old", "a1", "b1", "a2"]
