"""A loop's cost stays flat as its history grows: what each iteration, ``resume`` and the report
read and write does not depend on how many iterations came before."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from calc_loop import IDLE, make_calc_project, run
from hypothesis import given, settings
from hypothesis import strategies as st_

from loopctl import hookimpl, records
from loopctl import state as st
from loopctl.history import RECENT_RECORDS, History, RunTotals, load_history
from loopctl.loop import LoopOutcome
from loopctl.model import AgentSummary, Decision, IterationRecord, Usage
from loopctl.records import structure_record
from loopctl.records import unstructure_record as to_row
from loopctl.report import REPORT_ITERATIONS, RunSummary, build_report, render_markdown
from loopctl.state.gitignore import GITIGNORE_TEXT
from loopctl.testing import Project, RunResult, make_project, run_loop


@pytest.fixture
def project(tmp_path) -> Project:
    """The calc project in a repository whose own ``.gitignore`` does not mention the state
    directory (the testing kit's does)."""
    project = make_project(tmp_path / "project")
    project.write(".gitignore", "__pycache__/\n")
    return make_calc_project(project)


# --- the state directory ignores itself in git ---------------------------------------------------


@pytest.mark.slow
def test_git_status_lists_none_of_the_state_files_after_a_run(project):
    result = run(
        project, [IDLE], config={"limits": {"max_iterations": 3}, "stuck": {"enabled": False}}
    )
    assert result.status == "max_iterations"
    assert (result.state_dir / "logs").is_dir()
    assert (result.state_dir / ".gitignore").read_text().startswith("*\n")
    listed = project.git("status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in listed if ".loopctl/" in line] == []
    assert any("loopctl.toml" in line for line in listed)  # the user's own files still show


@pytest.mark.slow
def test_an_existing_state_dir_gets_its_gitignore_on_resume(project):
    first = run(project, [IDLE], config={"limits": {"max_iterations": 1}})
    (first.state_dir / ".gitignore").unlink()  # as loopctl 0.2.0 left it
    assert ".loopctl/" in project.git("status", "--porcelain", "--untracked-files=all")
    run_loop(project, "", turns=[IDLE], resume=True, config={"limits": {"max_iterations": 2}})
    assert (first.state_dir / ".gitignore").is_file()
    assert ".loopctl/" not in project.git("status", "--porcelain", "--untracked-files=all")


@pytest.mark.slow
def test_a_state_dir_elsewhere_ignores_itself_too(project, tmp_path):
    elsewhere = tmp_path / "state"
    result = run(
        project, [IDLE], config={"state_dir": str(elsewhere), "limits": {"max_iterations": 1}}
    )
    assert result.state_dir == elsewhere
    assert (elsewhere / ".gitignore").is_file()


def test_the_gitignore_is_never_written_over_a_project_or_another_file(tmp_path):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    assert not st.ignore_in_git(work, work)  # --state-dir .
    assert not st.ignore_in_git(tmp_path, work)  # a parent of the project
    assert not (work / ".gitignore").exists()
    assert not (tmp_path / ".gitignore").exists()
    own = work / "notes"
    own.mkdir()
    (own / "todo.txt").write_text("mine")
    assert not st.ignore_in_git(own, work)  # the user's directory, none of loopctl's files
    (own / st.LOOP_STATE_FILE).write_text("---\n")
    (own / ".gitignore").write_text("todo.txt\n")
    assert not st.ignore_in_git(own, work)  # a .gitignore of the user's stays as it is
    assert (own / ".gitignore").read_text() == "todo.txt\n"
    fresh = work / ".loopctl"
    fresh.mkdir()
    assert st.ignore_in_git(fresh, work)
    assert (fresh / ".gitignore").read_text() == GITIGNORE_TEXT
    assert not st.ignore_in_git(fresh, work)  # once


def test_without_git_the_snapshot_never_walks_a_state_dir_of_any_name(tmp_path, monkeypatch):
    from loopctl import workspace as ws

    monkeypatch.setattr(ws, "MAX_SCANNED_FILES", 5)
    state = tmp_path / "run-state" / "logs"  # not .loopctl: not among SKIP_DIRS
    state.mkdir(parents=True)
    for number in range(10):
        (state / st.log_name(number, "tests.log")).write_text("x")
    (tmp_path / "zz").mkdir()  # walked after run-state/
    (tmp_path / "zz" / "calc.py").write_text("return a - b\n")
    workspace = ws.Workspace(tmp_path, ignore=("run-state",))
    assert not workspace.is_git
    assert set(workspace.snapshot().files) == {"zz/calc.py"}


# --- the running summary: resume reads what was appended since, not the whole journal ------------

USAGE = {"usage": {"input_tokens": 1000, "output_tokens": 50}}
QUIET = {"stuck": {"enabled": False}}


def _records(rows: list[dict[str, Any]]) -> list[IterationRecord]:
    return [structure_record(row) for row in rows]


def _save_state(state_dir: Path, **changes: Any) -> None:
    path = state_dir / st.LOOP_STATE_FILE
    st.write_loop_state(path, attrs.evolve(st.read_loop_state(path), **changes))


def _same_totals(saved: Any, expected: RunTotals) -> bool:
    """Whether a saved summary holds ``expected``'s totals (where in the journal aside)."""
    found = RunTotals.from_json(saved).to_json()
    return {**found, "journal_bytes": 0} == {**expected.to_json(), "journal_bytes": 0}


def _summary_warnings(result: RunResult) -> list[str]:
    """The warnings of this run (the journal holds the earlier runs' too) about the summary."""
    return [
        e.data["message"]
        for e in result.live_events
        if e.type == "loop.warning" and "summary" in e.data["message"]
    ]


@pytest.mark.slow
def test_the_summary_saved_with_the_state_covers_the_whole_journal(project):
    result = run(
        project, [[{"say": "x"}, USAGE]], config={"limits": {"max_iterations": 3}, **QUIET}
    )
    summary = result.loop_state().summary
    assert summary is not None
    journal = result.state_dir / st.ITERATIONS_FILE
    assert summary["journal_bytes"] == journal.stat().st_size
    assert _same_totals(summary, RunTotals.of(_records(result.records)))
    assert summary["records"] == 3
    assert summary["input_tokens"] == 3000


@pytest.mark.slow
def test_resume_folds_in_what_was_appended_after_the_summary_was_saved(project):
    """A kill between the journal append and the next loop-state.md leaves a summary one
    record behind: resume adds that record, once."""
    first = run(project, [[{"say": "x"}, USAGE]], config={"limits": {"max_iterations": 3}, **QUIET})
    journal = first.state_dir / st.ITERATIONS_FILE
    lagging = RunTotals.of(_records(first.records[:2]))
    lagging.journal_bytes = len(b"".join(journal.read_bytes().splitlines(keepends=True)[:2]))
    _save_state(first.state_dir, summary=lagging.to_json(), status="interrupted")
    second = run_loop(
        project,
        "",
        turns=[[{"say": "x"}, USAGE]],
        resume=True,
        config={"limits": {"max_iterations": 5}, **QUIET},
    )
    assert second.status == "max_iterations"
    assert [r["iteration"] for r in second.records] == [1, 2, 3, 4, 5]
    assert _same_totals(second.loop_state().summary, RunTotals.of(_records(second.records)))
    assert second.report()["tokens"] == 5 * 1050
    assert "**Totals:** 5 iterations" in (second.state_dir / st.PROGRESS_FILE).read_text()
    assert _summary_warnings(second) == []


@pytest.mark.slow
def test_resume_keeps_the_stuck_streak_of_the_iterations_before_it(project):
    """The same failure twice, then a resume: with a window of 3 the third in a row (the
    first after the resume) escalates, as without the resume: in a fresh-session loop where no
    iteration changed anything, the stop."""

    class StopAfterTwo:
        @hookimpl
        def after_iteration(self, loop, record, test_run):
            return Decision.stop("enough", "stopped for the test") if loop.iteration == 2 else None

    config = {"stuck": {"window": 3}, "limits": {"max_iterations": 4}}  # the same file twice
    first = run(project, [IDLE], config=config, plugins={"stop": StopAfterTwo()})
    assert first.loop_state().summary["stuck_streak"] == 2
    second = run_loop(project, "", turns=[IDLE], resume=True, config=config)
    stuck = [
        (e.iteration, e.data["escalation"]) for e in second.live_events if e.type == "loop.stuck"
    ]
    assert stuck[0] == (3, "stop")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("summary", "why"),
    [
        (None, "has no summary of iterations.jsonl (an earlier loopctl wrote it)"),
        ("{not json", "is damaged (it is not an object (str))"),
        ({"version": 1, "records": "lots"}, "is damaged (`records` is not a whole number"),
        ({"version": 7}, "is damaged (it is version 7, not 1)"),
        ("huge", "does not match it (it covers 999999999 bytes"),
        ("wrong last", "does not match it (its last record is iteration 2, the journal's there"),
    ],
    ids=["missing", "not-json", "bad-field", "other-version", "past-the-end", "other-journal"],
)
def test_a_missing_or_damaged_summary_is_rebuilt_from_the_journal(project, summary, why):
    first = run(project, [[{"say": "x"}, USAGE]], config={"limits": {"max_iterations": 3}, **QUIET})
    saved = first.loop_state().summary
    if summary == "huge":
        summary = {**saved, "journal_bytes": 999_999_999}
    elif summary == "wrong last":
        summary = {**saved, "last_iteration": 2}
    if summary == "{not json":
        path = first.state_dir / st.LOOP_STATE_FILE
        text = re.sub(r"(?m)^summary: .*$", "summary: {not json", path.read_text())
        path.write_text(text.replace('status: "max_iterations"', 'status: "interrupted"'))
    else:
        _save_state(first.state_dir, summary=summary, status="interrupted")
    second = run_loop(
        project,
        "",
        turns=[[{"say": "x"}, USAGE]],
        resume=True,
        config={"limits": {"max_iterations": 4}, **QUIET},
    )
    assert second.status == "max_iterations"
    (warning,) = _summary_warnings(second)
    assert why in warning
    assert warning.endswith("rebuilt it from the 3 records there")
    assert _same_totals(second.loop_state().summary, RunTotals.of(_records(second.records)))
    assert second.report()["tokens"] == 4 * 1050


def _long_loop(project: Project, count: int) -> Path:
    """A loop of ``count`` iterations, made cheaply: one real iteration, its record copied
    ``count`` times into the journal (every 7th passing), and loop-state.md as loopctl 0.2.0
    left it (no summary), interrupted at the last one."""
    first = run(project, [[{"say": "x"}, USAGE]], config={"limits": {"max_iterations": 1}, **QUIET})
    row = first.records[0]
    lines = [
        json.dumps({**row, "iteration": n, "tests_passed": n % 7 == 0}) + "\n"
        for n in range(1, count + 1)
    ]
    (first.state_dir / st.ITERATIONS_FILE).write_text("".join(lines))
    _save_state(first.state_dir, summary=None, iteration=count, status="interrupted")
    return first.state_dir


@pytest.mark.slow
def test_a_long_loop_resumes_reading_only_the_end_of_its_journal(project, monkeypatch):
    count = 3 * RECENT_RECORDS
    _long_loop(project, count)
    seen: list[int] = []

    class Reader:
        @hookimpl
        def on_loop_start(self, loop):
            history = loop.history
            seen.extend([len(history), history[0].iteration, history[-1].iteration])
            seen.append(sum(1 for _ in history))

    config = {"limits": {"max_iterations": count}, **QUIET}
    first = run_loop(project, "", resume=True, config=config, plugins={"reader": Reader()})
    assert first.status == "max_iterations"
    (note,) = _summary_warnings(first)
    assert note.endswith(f"rebuilt it from the {count:,} records there")
    assert seen == [count, 1, count, count]  # older records are read back from the journal
    report = first.report()
    assert len(report["per_iteration"]) == REPORT_ITERATIONS
    assert report["per_iteration"][0]["iteration"] == count - REPORT_ITERATIONS + 1
    earlier = report["earlier_iterations"]
    assert earlier["count"] == count - REPORT_ITERATIONS
    assert earlier["before_iteration"] == count - REPORT_ITERATIONS + 1
    passing = (count - REPORT_ITERATIONS) // 7
    assert (earlier["tests_passed"], earlier["tests_failed"]) == (
        passing,
        count - REPORT_ITERATIONS - passing,
    )
    assert report["tokens"] == count * 1050
    assert earlier["tokens"] == (count - REPORT_ITERATIONS) * 1050
    markdown = (first.state_dir / st.REPORT_MD_FILE).read_text()
    assert f"The last {REPORT_ITERATIONS} of {count} iterations;" in markdown
    progress = (first.state_dir / st.PROGRESS_FILE).read_text()
    assert f"**Totals:** {count} iterations" in progress
    assert f"Last 20 of {count} iterations" in progress

    # Resumed again, the summary saved above is used: the records read do not depend on the
    # length of the journal, only on how many are kept in memory.
    structured = [0]
    real = records.structure_record

    def counting(data: Any) -> IterationRecord:
        structured[0] += 1
        return real(data)

    monkeypatch.setattr(records, "structure_record", counting)
    _save_state(first.state_dir, status="interrupted")
    second = run_loop(project, "", resume=True, config=config)
    assert _summary_warnings(second) == []
    assert structured[0] <= RECENT_RECORDS + 5
    assert second.report()["earlier_iterations"] == earlier


# --- the report: the last iterations in full, the ones before summed up --------------------------


def _history(count: int) -> list[IterationRecord]:
    return [
        IterationRecord(
            iteration=n,
            tests_passed=n % 5 == 0,
            failing_tests=[] if n % 5 == 0 else [f"test_{n}"],
            decision="restart" if n % 11 == 0 else "continue",
            duration_s=1.5,
            agent=AgentSummary(
                usage=Usage(input_tokens=n, output_tokens=2),
                cost_usd=0.01 if n % 2 else None,
                error_kind="timeout" if n % 13 == 0 else None,
            ),
        )
        for n in range(1, count + 1)
    ]


def _summary(history: Sequence[IterationRecord], **changes: Any) -> RunSummary:
    return RunSummary(
        outcome=LoopOutcome(status="max_iterations", reason="max_iterations", iterations=10),
        goal="make it pass",
        agent="scripted",
        test_cmd="pytest",
        start_commit=None,
        state_dir=Path(".loopctl"),
        elapsed_s=12.0,
        history=history,
        **changes,
    )


#: The keys of report.json, in order, as loopctl 0.2.0 wrote them.
REPORT_KEYS = [
    "status", "reason", "message", "exit_code", "goal", "agent", "test_cmd", "iterations",
    "restarts", "tokens", "usage_reported", "recorded_iterations", "cost_usd", "elapsed_s", "failed_approaches", "plugin_errors",
    "per_iteration", "sections", "next", "last_iteration",
]  # fmt: skip


def test_the_report_of_a_short_run_lists_every_iteration_as_before():
    history = _history(REPORT_ITERATIONS)
    report = build_report(_summary(history))
    assert list(report) == REPORT_KEYS
    assert report == build_report(_summary(history, totals=RunTotals.of(history)))
    assert [row["iteration"] for row in report["per_iteration"]] == list(range(1, 51))
    assert report["tokens"] == sum(r.agent.usage.total_tokens for r in history)
    assert report["cost_usd"] == round(sum(r.agent.cost_usd or 0.0 for r in history), 4)
    markdown = render_markdown(report)
    assert "summed up" not in markdown
    assert markdown.count("\n| ") == 1 + REPORT_ITERATIONS  # the header and the rows


def test_the_report_of_a_long_run_sums_up_all_but_the_last_iterations():
    history = _history(10_000)
    totals = RunTotals.of(history)
    report = build_report(_summary(history[-REPORT_ITERATIONS:], totals=totals))
    assert list(report) == [*REPORT_KEYS[:17], "earlier_iterations", *REPORT_KEYS[17:]]
    assert [row["iteration"] for row in report["per_iteration"]] == list(range(9951, 10_001))
    earlier, before = report["earlier_iterations"], history[:-REPORT_ITERATIONS]
    assert earlier == {
        "count": 9950,
        "before_iteration": 9951,
        "tests_passed": sum(r.tests_passed for r in before),
        "tests_failed": sum(not r.tests_passed for r in before),
        "decisions": {"continue": 9950 - 9950 // 11, "restart": 9950 // 11},
        "agent_outcomes": {"ok": 9950 - 9950 // 13, "timeout": 9950 // 13},
        "tokens": sum(r.agent.usage.total_tokens for r in before),
        "cost_usd": round(sum(r.agent.cost_usd or 0.0 for r in before), 4),
        "duration_s": 9950 * 1.5,
    }
    assert report["tokens"] == sum(r.agent.usage.total_tokens for r in history)
    assert report["cost_usd"] == round(sum(r.agent.cost_usd or 0.0 for r in history), 4)
    markdown = render_markdown(report)
    assert "The last 50 of 10,000 iterations; the 9,950 before #9951 are summed up" in markdown
    assert "- **decisions:** continue 9,046, restart 904" in markdown
    assert markdown.count("\n| ") == 1 + REPORT_ITERATIONS


# --- JSON as the state files write it ------------------------------------------------------------

_text = st_.text(st_.characters(exclude_categories=()) | st_.characters(categories=["Cs"]))
_json = st_.recursive(
    st_.none() | st_.booleans() | st_.integers() | st_.floats() | _text,
    lambda inner: st_.lists(inner, max_size=4) | st_.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_json)
def test_json_text_is_the_indenting_encoders_text_made_faster(value: Any) -> None:
    assert st.json_text(value) == st.json_one_line(value, indent=2) + "\n"


# --- History and load_history ----------------------------------------------------------------------


def _journal(path: Path, rows: Sequence[dict[str, Any] | str]) -> list[int]:
    """Write ``rows`` (records, or raw text for a bad line) and return each line's end."""
    ends, size = [], 0
    with open(path, "w", encoding="utf-8") as stream:
        for row in rows:
            line = row if isinstance(row, str) else json.dumps(row) + "\n"
            stream.write(line)
            size += len(line.encode())
            ends.append(size)
    return ends


def test_history_keeps_the_last_records_and_reads_older_ones_back(tmp_path):
    records_ = _history(12)
    rows: list[dict[str, Any] | str] = [to_row(r) for r in records_]
    rows[3:3] = ['{"torn": \n', '{"iteration": "not a number"}\n', "\n", "[1, 2]\n"]
    journal = tmp_path / st.ITERATIONS_FILE
    _journal(journal, rows)
    history = History(journal, records_[-4:], count=12, keep=4)
    assert len(history) == 12
    assert list(history) == records_
    assert list(reversed(history)) == records_[::-1]
    assert history[0] == records_[0]
    assert history[-5] == records_[-5]  # the newest one read back
    assert history[2:9:3] == records_[2:9:3]
    assert history[-1] is records_[-1]  # the recent ones are the objects themselves
    with pytest.raises(IndexError):
        history[12]
    more = IterationRecord(iteration=13)
    with open(journal, "a", encoding="utf-8") as stream:
        stream.write(json.dumps(to_row(more)) + "\n")
    history.append(more)
    assert len(history) == 13
    assert list(history) == [*records_, more]


_kinds = st_.sampled_from([None, None, None, "timeout", "rate_limit", "crashed"])


@st_.composite
def _records_st(draw: st_.DrawFn) -> list[IterationRecord]:
    count = draw(st_.integers(0, 30))
    return [
        IterationRecord(
            iteration=n,
            tests_passed=draw(st_.booleans()),
            error_fingerprint=draw(st_.sampled_from(["", "a", "b"])),
            failing_tests=draw(st_.lists(st_.sampled_from(["t1", "t2"]), max_size=2)),
            tree_hash=draw(st_.sampled_from([None, "x", "y"])),
            decision=draw(st_.sampled_from(["continue", "restart", "stop"])),
            duration_s=draw(st_.sampled_from([0.0, 0.5, 1.25])),
            agent=AgentSummary(
                usage=Usage(input_tokens=draw(st_.integers(0, 10**6))),
                cost_usd=draw(st_.sampled_from([None, 0.5, 0.125])),
                error_kind=draw(_kinds),
            ),
        )
        for n in range(1, count + 1)
    ]


@settings(max_examples=60, deadline=None)
@given(
    history=_records_st(),
    saved_after=st_.integers(0, 30),
    junk=st_.lists(st_.tuples(st_.integers(0, 30), st_.sampled_from(["{torn\n", "[]\n", "\n"]))),
    keep=st_.integers(1, 8),
    torn_tail=st_.booleans(),
)
def test_resuming_from_a_saved_summary_gives_what_rebuilding_it_does(
    tmp_path_factory, history, saved_after, junk, keep, torn_tail
):
    """Whatever was appended after the summary was saved (bad lines included), the totals, the
    history and the stuck replay are those of every record folded in from the start."""
    rows: list[dict[str, Any] | str] = [to_row(r) for r in history]
    for where, line in sorted(junk, reverse=True):
        rows.insert(min(where, len(rows)), line)
    if torn_tail:
        rows.append('{"iteration": 99, "tor')
    journal = tmp_path_factory.mktemp("j") / st.ITERATIONS_FILE
    ends = _journal(journal, rows)
    saved_after = min(saved_after, len(history))
    saved = RunTotals.of(history[:saved_after])
    record_lines = [i for i, row in enumerate(rows) if isinstance(row, dict)]
    if saved_after:
        saved.journal_bytes = ends[record_lines[saved_after - 1]]
    loaded = load_history(journal, saved.to_json(), keep=keep)
    rebuilt = load_history(journal, None, keep=keep)
    assert loaded.note is None
    assert rebuilt.note is not None
    expected = RunTotals.of(history)
    for found in (loaded, rebuilt):
        assert {**found.totals.to_json(), "journal_bytes": 0} == {
            **expected.to_json(),
            "journal_bytes": 0,
        }
        assert list(found.history) == history
        assert found.totals.stuck_previous == expected.stuck_previous
        assert found.rows == [to_row(r) for r in history[-20:]]
    if torn_tail:
        # the torn line is not covered: it is looked at again
        assert loaded.totals.journal_bytes == (ends[-2] if len(ends) > 1 else 0)
    else:
        assert loaded.totals.journal_bytes == (ends[-1] if ends else 0)
