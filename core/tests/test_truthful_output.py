"""The files and lines people read say the same thing, and the truth: sessions count from 1
everywhere, unknown tokens are unknown (never 0), every number reads ``75,000`` whether in
``report.md``, ``progress.md``, ``loopctl status`` or the console. Real loops: the scripted
agent as a subprocess, a real test command, real git."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from calc_loop import FIX, IDLE, make_calc_project, run

from loopctl import hookimpl
from loopctl import state as st
from loopctl.model import Decision, Event
from loopctl.status import collect_status, render_status
from loopctl.testing import Project, RunResult
from loopctl.view import describe


@pytest.fixture
def project(loopctl_project: Project) -> Project:
    return make_calc_project(loopctl_project)


def lines(result: RunResult) -> list[str]:
    """The console's plain lines of the run, as the plain view prints them."""
    return [describe(event) for event in result.live_events]


def table_rows(text: str) -> list[list[str]]:
    """The cells of a Markdown table's body rows (those starting with a number)."""
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if re.match(r"\| \d", line)
    ]


class RestartAfterFirst:
    @hookimpl
    def after_iteration(self, loop: Any, record: Any) -> Decision | None:
        return Decision.restart("test", "a fresh start") if record.iteration == 1 else None


@pytest.mark.slow
def test_sessions_count_from_one_in_the_report_and_on_the_console(project: Project) -> None:
    """Iteration 2 runs in the second session: report.md says session 2 where it said
    ``restarts`` 1 beside a console that said "#1"; report.json keeps ``restarts`` (0-based,
    as documented) and adds ``session``."""
    result = run(
        project,
        [IDLE, [FIX]],
        config={"stuck": {"enabled": False}},
        plugins={"restart-after-first": RestartAfterFirst()},
    )
    assert result.status == "complete"
    report_md = (result.state_dir / "report.md").read_text("utf-8")
    assert "| # | session | tests |" in report_md
    assert [row[:3] for row in table_rows(report_md)] == [["1", "1", "fail"], ["2", "2", "pass"]]
    per_iteration = result.report()["per_iteration"]
    assert [(r["restarts"], r["session"]) for r in per_iteration] == [(0, 1), (1, 2)]
    console = lines(result)
    assert "restart 1: the agent starts session 2 (test) — a fresh start" in console
    assert "iteration 2 (session 2)" in console
    assert "iteration 1" in console  # the first session is not worth a word
    assert not any("#1" in line for line in console)
    status = render_status(collect_status(result.state_dir))
    assert "iteration 2 of 20, session 2 (1 restart), agent scripted, session mode" in status


def test_unknown_tokens_are_unknown_in_every_file(project: Project) -> None:
    """The scripted agent reports no usage: the console says "tokens unknown", and so do
    report.md, report.json (null), progress.md and ``loopctl status`` (they said 0)."""
    result = run(project, [IDLE, [FIX]], config={"stuck": {"enabled": False}})
    assert result.status == "complete"
    assert all("tokens unknown" in describe(e) for e in result.live_events if e.type == "agent.end")
    report = result.report()
    assert report["tokens"] is None
    assert report["usage_reported"] == 0
    assert [r["tokens"] for r in report["per_iteration"]] == [None, None]
    report_md = (result.state_dir / "report.md").read_text("utf-8")
    assert "- **Tokens:** unknown" in report_md
    assert [row[4] for row in table_rows(report_md)] == ["unknown", "unknown"]
    progress = (result.state_dir / st.PROGRESS_FILE).read_text("utf-8")
    assert [row[4] for row in table_rows(progress)] == ["unknown", "unknown"]
    assert "tokens unknown" in progress
    assert " 0 tokens" not in progress
    status = render_status(collect_status(result.state_dir))
    assert "unknown tokens" in status
    assert " 0 tokens" not in status


@pytest.mark.slow
def test_tokens_reported_by_some_iterations_say_so(project: Project) -> None:
    result = run(
        project,
        [[{"say": "looking"}, {"usage": {"input_tokens": 1200, "output_tokens": 34}}], [FIX]],
        config={"stuck": {"enabled": False}},
    )
    report = result.report()
    assert (report["tokens"], report["usage_reported"]) == (1234, 1)
    assert [r["tokens"] for r in report["per_iteration"]] == [1234, None]
    report_md = (result.state_dir / "report.md").read_text("utf-8")
    assert "- **Tokens:** 1,234 (reported for 1 of 2 iterations)" in report_md
    progress = (result.state_dir / st.PROGRESS_FILE).read_text("utf-8")
    assert "1,234 tokens (1,200 in, 34 out, 0 cache reads; reported for 1 of 2 iterations)" in (
        progress
    )
    assert [row[4] for row in table_rows(progress)] == ["1,234", "unknown"]


def test_numbers_read_the_same_in_report_progress_status_and_console(project: Project) -> None:
    """75,000 everywhere: the report's context column said 75000, progress.md 75.0k."""
    result = run(
        project,
        [[{"say": "looking"}, {"usage": {"input_tokens": 74_000, "output_tokens": 1_000}}], [FIX]],
        config={"stuck": {"enabled": False}},
    )
    report_md = (result.state_dir / "report.md").read_text("utf-8")
    first = table_rows(report_md)[0]
    assert (first[4], first[5]) == ("75,000", "75,000")  # tokens, context
    assert "- **Tokens:** 75,000 (reported for 1 of 2 iterations)" in report_md
    progress = (result.state_dir / st.PROGRESS_FILE).read_text("utf-8")
    assert table_rows(progress)[0][4] == "75,000"
    assert "75.0k" not in progress
    status = render_status(collect_status(result.state_dir))
    assert "#1: tests fail (1 failing), 75,000 tokens" in status
    (end, *_) = [e for e in result.live_events if e.type == "agent.end"]
    assert "75,000 tokens, context 75,000" in describe(end)


def test_the_report_json_keeps_numbers_as_numbers(project: Project) -> None:
    result = run(
        project,
        [[{"say": "x"}, {"usage": {"input_tokens": 75_000}}], [FIX]],
        config={"stuck": {"enabled": False}},
    )
    data = json.loads((result.state_dir / "report.json").read_text("utf-8"))
    assert data["per_iteration"][0]["context_tokens"] == 75_000
    assert data["tokens"] == 75_000


def test_describe_counts_the_session_only_with_a_number() -> None:
    odd = Event(type="loop.restart", ts=0.0, iteration=2, data={"number": "x", "reason": "r"})
    assert describe(odd) == "restart x: the agent starts a fresh session (r)"


def test_the_live_panel_says_unknown_until_an_agent_reports_tokens() -> None:
    import io

    from rich.console import Console

    from loopctl.view import LiveView

    def panel(*tokens: int | None) -> tuple[LiveView, str]:
        out = io.StringIO()
        view = LiveView(5, console=Console(file=out, force_terminal=True, width=100))
        for count in tokens:
            view(Event(type="agent.end", ts=0.0, iteration=1, data={"tokens": count}))
        view.close()
        return view, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())

    view, text = panel(None)
    assert view.tokens is None
    assert re.search(r"tokens {2,}unknown", text), text  # the panel's row, not an event line
    view, text = panel(None, 75_000, None)
    assert view.tokens == 75_000
    assert re.search(r"tokens {2,}75,000", text), text


class ReadsProgressAtStart:
    """Keeps what progress.md said when the loop started (``on_loop_start``)."""

    def __init__(self, state_dir: Any) -> None:
        self.path = state_dir / st.PROGRESS_FILE
        self.seen: list[str] = []

    @hookimpl
    def on_loop_start(self, loop: Any) -> None:
        self.seen.append(self.path.read_text("utf-8"))


@pytest.mark.slow
def test_a_run_and_a_resume_rewrite_progress_as_they_start(project: Project) -> None:
    """progress.md showed the last run's word (``complete``, ``max_iterations``) until the new
    run's first iteration ended."""
    first = run(project, [[FIX]])
    assert first.status == "complete"
    project.write("calc.py", "def add(a, b):\n    return a - b\n")
    project.commit("buggy again")
    reader = ReadsProgressAtStart(first.state_dir)
    second = run(
        project,
        [IDLE],
        config={"stuck": {"enabled": False}, "limits": {"max_iterations": 1}},
        plugins={"reader": reader},
    )
    assert second.status == "max_iterations"
    assert "**Status:** running\n" in reader.seen[0]
    assert "No iterations yet." in reader.seen[0]
    resumed = run(
        project,
        [[FIX]],
        config={"limits": {"max_iterations": 2}},
        plugins={"reader": reader},
        resume=True,
    )
    assert resumed.status == "complete"
    assert "**Status:** running\n" in reader.seen[1]  # not "max_iterations: reached …"
    assert "| 1 | fail |" in reader.seen[1]
