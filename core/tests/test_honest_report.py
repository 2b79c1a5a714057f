"""The run report says what happened, once, in the right words (issue 25), and ``loopctl report``
shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import loopctl

from loopctl.loop import LoopOutcome
from loopctl.model import StopStatus
from loopctl.report import RunSummary, build_report, render_markdown


def _markdown(status: str, **changes: object) -> str:
    summary = RunSummary(
        outcome=LoopOutcome(status=status, reason=status, iterations=3),
        goal="make it pass",
        agent="scripted",
        test_cmd="pytest",
        start_commit=None,
        state_dir=Path(".loopctl"),
        elapsed_s=12.0,
        history=[],
        **changes,  # type: ignore[arg-type]
    )
    return render_markdown(build_report(summary))


@pytest.mark.parametrize(
    ("status", "verdict"),
    [
        ("complete", "finished"),
        ("interrupted", "stopped before its end"),
        ("disk_full", "stopped before its end"),
        ("max_iterations", "gave up"),
        ("stuck", "gave up"),
        ("budget", "out of budget"),
        ("wall_clock", "out of budget"),
    ],
)
def test_the_title_says_how_the_run_ended(status: str, verdict: str) -> None:
    assert StopStatus(status)
    title = _markdown(status).splitlines()[0]
    assert title == f"# loopctl run report: {status} ({verdict})"


def test_the_next_step_points_at_the_failed_approaches_where_they_are() -> None:
    markdown = _markdown("stuck", failed_approaches=["iterations 1-3 kept failing with: E"])
    tried = markdown.index("## What was tried and did not work")
    next_step = markdown.index("## What to look at next")
    assert tried < next_step
    assert "below" not in markdown[next_step:]
    assert "What was tried and did not work" in markdown[next_step:]


@pytest.mark.slow
def test_loopctl_report_prints_the_last_runs_report(tmp_path: Path) -> None:
    missing = loopctl("report", cwd=tmp_path)
    assert missing.returncode == 1
    assert "no loop ran here" in missing.stderr
    failing = ["--agent-cmd", "true", "--test-cmd", "false", "--no-plugins"]
    ran = loopctl("run", "go", *failing, "--max-iterations", "1", cwd=tmp_path)
    assert ran.returncode == 10, ran.stderr
    shown = loopctl("report", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == (tmp_path / ".loopctl" / "report.md").read_text()
    assert shown.stdout.startswith("# loopctl run report: max_iterations (gave up)")
    path = loopctl("report", "--path", cwd=tmp_path)
    assert path.stdout.strip() == str(tmp_path / ".loopctl" / "report.md")
    data = json.loads(loopctl("report", "--json", cwd=tmp_path).stdout)
    assert data["status"] == "max_iterations"
    assert data["iterations"] == 1


def test_loopctl_report_redacts_and_sanitises_what_it_prints(tmp_path: Path) -> None:
    state = tmp_path / ".loopctl"
    state.mkdir()
    (state / "loop-state.md").write_text("")
    (state / "report.md").write_text("# report\n\x1b[31mred\x1b[0m password=hunter2hunter2\n")
    shown = loopctl("report", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout
    assert "hunter2" not in shown.stdout
    assert "red" in shown.stdout


def test_loopctl_report_pages_on_a_terminal(tmp_path: Path) -> None:
    from test_terminal_pty import run_in_terminal, screen

    work = tmp_path / "work"
    (work / ".loopctl").mkdir(parents=True)
    (work / ".loopctl" / "loop-state.md").write_text("")
    (work / ".loopctl" / "report.md").write_text("# the report\n")
    text, code = run_in_terminal(["report"], work, PAGER="sed s/^/paged:/")
    assert code == 0, text
    assert "paged:# the report" in screen(text), text
    text, code = run_in_terminal(["report", "--no-pager"], work, PAGER="sed s/^/paged:/")
    assert "# the report" in screen(text), text
    assert "paged:" not in text


@pytest.mark.slow
def test_a_fresh_runs_report_counts_its_own_iterations_only(tmp_path: Path) -> None:
    """Already fixed by the resume work (previous-run-N/, loop.run_id): kept fixed."""
    failing = ["--agent-cmd", "true", "--test-cmd", "false", "--no-plugins"]
    # two iterations: an agent that changes nothing would be stopped as stuck at the third
    first = loopctl("run", "go", *failing, "--max-iterations", "2", cwd=tmp_path)
    assert first.returncode == 10, first.stderr
    second = loopctl("run", "again", *failing, "--max-iterations", "1", cwd=tmp_path)
    assert second.returncode == 10, second.stderr
    report = json.loads((tmp_path / ".loopctl" / "report.json").read_text())
    assert report["goal"] == "again"
    assert report["iterations"] == 1
    assert report["recorded_iterations"] == 1
    assert [row["iteration"] for row in report["per_iteration"]] == [1]
    markdown = (tmp_path / ".loopctl" / "report.md").read_text()
    assert "summed up" not in markdown
    assert markdown.count("\n| ") == 2, markdown  # the header and one row
