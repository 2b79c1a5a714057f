"""The run report: ``report.md`` for people and ``report.json`` for scripts, written however a
run ends. It answers: did it finish, why did it stop, what did each iteration cost and did it
help, what was tried, and what should a person look at next.

Its size and cost do not grow with the run: it lists the last :data:`REPORT_ITERATIONS`
iterations in full and sums up the ones before them (``iterations.jsonl`` has every one)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from loopctl import humanize, records
from loopctl import state as st
from loopctl.approaches import bullet
from loopctl.history import RunTotals, usage_known
from loopctl.loop import LoopOutcome, ReportSection
from loopctl.model import IterationRecord, StopStatus
from loopctl.pluginhost import HookFailure
from loopctl.terminal import sanitize

#: How many of the last iterations the report lists one by one.
REPORT_ITERATIONS = 50

#: What a person should look at next, by status.
NEXT_STEPS = {
    StopStatus.COMPLETE.value: "Review the agent's changes (`git diff {start}`) and commit them.",
    StopStatus.MAX_ITERATIONS.value: (
        "The goal was not met within the iteration limit. Read the last test output "
        "(`{state_dir}/logs/`), then either continue with `loopctl resume --max-iterations N`, "
        "or sharpen the goal and start a new run."
    ),
    StopStatus.MAX_RESTARTS.value: (
        "The agent needed more fresh sessions than allowed. Look at the restart archives "
        "(`{state_dir}/restart-*/`) for why each session ended."
    ),
    StopStatus.STUCK.value: (
        "The same failure kept repeating, whatever the loop tried (the reason above says what). "
        'The approaches under "What was tried and did not work" above failed; the goal may '
        "need a hint, or the failing test may be wrong."
    ),
    StopStatus.AGENT_ERROR.value: (
        "The agent kept failing. Its own messages are in `{state_dir}/logs/*.agent.jsonl`; "
        "`loopctl agents parse AGENT FILE` shows what loopctl understood of them."
    ),
    StopStatus.AUTH.value: "Fix the agent's login or billing (the message above says which), then `loopctl resume`.",
    StopStatus.BUDGET.value: "The token or cost budget is spent. Raise it in `[limits]` and `loopctl resume` if the progress is worth it.",
    StopStatus.WALL_CLOCK.value: "The wall-clock budget is spent. Raise `limits.wall_clock_s` and `loopctl resume`.",
    StopStatus.INTERRUPTED.value: "The run was interrupted; `loopctl resume` continues it.",
    StopStatus.USAGE_ERROR.value: (
        "A setting cannot work as it is (the reason above says which): the agent's CLI refused "
        "it (its own words list what it accepts), or the test command cannot pass whatever the "
        "code says. Fix it and start again with `loopctl run` (a test command: `loopctl resume "
        "--test-cmd ...`)."
    ),
    StopStatus.DISK_FULL.value: (
        "The disk of `{state_dir}` is full. Free some space, then `loopctl resume` continues "
        "the run where it stopped."
    ),
}


@attrs.frozen
class RunSummary:
    """Everything the report says about a run, handed over by the engine when the run ends."""

    outcome: LoopOutcome
    goal: str
    agent: str
    test_cmd: str
    start_commit: str | None
    state_dir: Path
    elapsed_s: float
    #: The iterations to list one by one (the engine passes the last REPORT_ITERATIONS).
    history: Sequence[IterationRecord]
    failed_approaches: Sequence[str] = ()
    plugin_errors: Sequence[HookFailure] = ()
    sections: Sequence[ReportSection] = ()
    #: The totals of every iteration of the run; None: ``history`` is all of them.
    totals: RunTotals | None = None


def build_report(run: RunSummary) -> dict[str, Any]:
    outcome = run.outcome
    shown = list(run.history)
    totals = run.totals if run.totals is not None else RunTotals.of(shown)
    iterations: list[dict[str, Any]] = []
    for record in shown:
        iterations.append(
            {
                "iteration": record.iteration,
                "restarts": record.restarts,
                "session": record.restarts + 1,
                "tests_passed": record.tests_passed,
                "failing_tests": len(record.failing_tests),
                "error_fingerprint": record.error_fingerprint,
                "tokens": record.agent.usage.total_tokens if usage_known(record) else None,
                "context_tokens": record.agent.context_tokens,
                "cost_usd": record.agent.cost_usd,
                "agent_outcome": record.agent.error_kind or "ok",
                "changed_files": len(record.changed_files),
                "duration_s": record.duration_s,
                "decision": record.decision,
                "reason": record.reason,
            }
        )
    next_step = NEXT_STEPS.get(
        outcome.status,
        "A plugin stopped the run ({reason}); its section below says why.",
    ).format(start=run.start_commit or "HEAD", state_dir=run.state_dir, reason=outcome.reason)
    report = {
        "status": outcome.status,
        "reason": outcome.reason,
        "message": outcome.message,
        "exit_code": outcome.exit_code,
        "goal": run.goal,
        "agent": run.agent,
        "test_cmd": run.test_cmd,
        "iterations": outcome.iterations,
        "restarts": outcome.restarts,
        "tokens": totals.known_tokens,
        "usage_reported": totals.usage_reported,
        "recorded_iterations": totals.records,
        "cost_usd": round(totals.cost_usd, 4),
        "elapsed_s": round(run.elapsed_s, 1),
        "failed_approaches": list(run.failed_approaches),
        "plugin_errors": [
            {"plugin": f.plugin, "hook": f.hook, "error": f.error} for f in run.plugin_errors
        ],
        "per_iteration": iterations,
        **_earlier(totals, shown),
        "sections": [{"title": s.title, "body": s.body, "source": s.source} for s in run.sections],
        "next": next_step,
        "last_iteration": records.unstructure_record(shown[-1]) if shown else None,
    }
    return report


def _earlier(totals: RunTotals, shown: Sequence[IterationRecord]) -> dict[str, Any]:
    """``{"earlier_iterations": {…}}``, the sums of the iterations before those listed, when
    there are any (a report that lists every iteration has no such key)."""
    earlier = totals.minus(RunTotals.of(shown))
    if earlier.records <= 0:
        return {}
    return {
        "earlier_iterations": {
            "count": earlier.records,
            "before_iteration": shown[0].iteration if shown else None,
            "tests_passed": earlier.passed,
            "tests_failed": earlier.failed,
            "decisions": earlier.decisions,
            "agent_outcomes": earlier.agent_outcomes,
            "tokens": earlier.known_tokens,
            "cost_usd": round(earlier.cost_usd, 4),
            "duration_s": round(earlier.duration_s, 1),
        }
    }


#: How the report's title sums up a run that ended so (any other status: ``gave up``).
VERDICTS = {
    StopStatus.COMPLETE.value: "finished",
    StopStatus.INTERRUPTED.value: "stopped before its end",
    StopStatus.DISK_FULL.value: "stopped before its end",
    StopStatus.BUDGET.value: "out of budget",
    StopStatus.WALL_CLOCK.value: "out of budget",
}


def render_markdown(report: dict[str, Any]) -> str:
    verdict = VERDICTS.get(report["status"], "gave up")
    lines = [
        f"# loopctl run report: {report['status']} ({verdict})",
        "",
        f"- **Why it stopped:** {report['message'] or report['reason']}",
        f"- **Iterations:** {report['iterations']}, **restarts:** {report['restarts']}, "
        f"**elapsed:** {report['elapsed_s']} s",
        f"- **Tokens:** {_tokens_total(report)}"
        + (f", **cost:** ${report['cost_usd']:.4f}" if report["cost_usd"] else ""),
        f"- **Agent:** {report['agent']}, **tests:** `{report['test_cmd']}`",
        f"- **Exit code:** {report['exit_code']}",
        "",
        "## Goal",
        "",
        *[f"> {line}" for line in report["goal"].splitlines()],
        "",
        "## Iterations",
        "",
        *_earlier_lines(report),
        "| # | session | tests | failing | tokens | context | agent | decision |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report["per_iteration"]:
        lines.append(
            f"| {row['iteration']} | {row['session']} | "
            f"{'pass' if row['tests_passed'] else 'fail'} | {row['failing_tests']} | "
            f"{humanize.tokens(row['tokens'])} | {humanize.tokens(row['context_tokens'])} | "
            f"{row['agent_outcome']} | {row['decision']} {row['reason']} |".replace("  |", " |")
        )
    if report["failed_approaches"]:
        lines += ["", "## What was tried and did not work", ""]
        lines += [bullet(text) for text in report["failed_approaches"]]
    if report["plugin_errors"]:
        lines += ["", "## Plugin errors", ""]
        lines += [
            f"- `{e['plugin']}` in `{e['hook']}`: {e['error']}" for e in report["plugin_errors"]
        ]
    for section in report["sections"]:
        lines += ["", f"## {section['title']}", "", section["body"].rstrip()]
    lines += ["", "## What to look at next", "", report["next"], ""]
    return "\n".join(lines)


def _tokens_total(report: dict[str, Any]) -> str:
    """The run's tokens: ``unknown`` when no iteration's agent reported its usage, and how many
    did when only some did (the sum is then a lower bound)."""
    text = humanize.tokens(report["tokens"])
    reported: int = report.get("usage_reported") or 0
    records: int = report.get("recorded_iterations") or 0
    if report["tokens"] is not None and 0 < reported < records:
        text += f" (reported for {reported} of {records} iterations)"
    return text


def _earlier_lines(report: dict[str, Any]) -> list[str]:
    """The lines that sum up the iterations before those the table lists (none if it lists
    them all)."""
    earlier = report.get("earlier_iterations")
    if not earlier:
        return []
    shown = len(report["per_iteration"])
    before = earlier["before_iteration"]

    def counts(values: dict[str, int]) -> str:
        return ", ".join(f"{key} {count:,}" for key, count in values.items()) or "none"

    return [
        f"The last {shown:,} of {earlier['count'] + shown:,} iterations; the {earlier['count']:,} "
        f"before #{before} are summed up here (`iterations.jsonl` has every one):",
        "",
        f"- **tests:** passed {earlier['tests_passed']:,}, failed {earlier['tests_failed']:,}",
        f"- **decisions:** {counts(earlier['decisions'])}",
        f"- **agent:** {counts(earlier['agent_outcomes'])}",
        f"- **tokens:** {humanize.tokens(earlier['tokens'])}"
        + (f", **cost:** ${earlier['cost_usd']:.4f}" if earlier["cost_usd"] else "")
        + f", **time:** {earlier['duration_s']} s",
        "",
    ]


def reported(state_dir: Path, outcome: LoopOutcome) -> bool:
    """Whether ``state_dir``'s ``report.json`` is the report of a run that ended as ``outcome``
    (a full disk may have kept it from being written)."""
    try:
        report = json.loads((state_dir / st.REPORT_JSON_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return False
    said = {key: report.get(key) for key in _OUTCOME_KEYS} if isinstance(report, dict) else {}
    return said == {key: getattr(outcome, key) for key in _OUTCOME_KEYS}


#: What a report must say of a run's outcome to be that run's.
_OUTCOME_KEYS = ("status", "reason", "exit_code", "iterations", "restarts")


def write_report(state_dir: Path, run: RunSummary) -> dict[str, Any]:
    """Write ``report.json`` and ``report.md`` into ``state_dir``; returns the report. Both are
    redacted; ``report.md`` is also sanitised (no terminal control), since it is meant to be
    read, often with ``cat``."""
    report = build_report(run)
    st.atomic_write_json(state_dir / "report.json", report)
    st.atomic_write_text(state_dir / "report.md", sanitize(render_markdown(report)))
    return report
