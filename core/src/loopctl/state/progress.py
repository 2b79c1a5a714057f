"""``progress.md``: a summary of the loop that stays short enough to read whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loopctl import humanize
from loopctl.state.files import atomic_write_text
from loopctl.state.layout import ITERATIONS_FILE

# --- progress.md ---------------------------------------------------------------------------------


def _cell(value: Any, limit: int) -> str:
    """One line of table-safe markdown, at most ``limit`` characters."""
    text = value if isinstance(value, str) else str(value)
    text = " ".join(text[: limit * 4].split())  # also folds newlines and other line breaks
    text = "".join(char if char.isprintable() else "?" for char in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text.replace("\\", "\\\\").replace("|", "\\|")


_tokens_text = humanize.count  # one formatting of numbers for people: 75,000 everywhere


def _duration_text(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m {int(seconds % 60):02d}s"
    if seconds < 360_000:
        return f"{int(seconds // 3600)}h {int(seconds % 3600 // 60):02d}m"
    return f"{seconds / 86400:.3g}d"


_TOKEN_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _usage_of(record: Mapping[str, Any]) -> dict[str, float]:
    agent = record.get("agent")
    usage = agent.get("usage") if isinstance(agent, Mapping) else None
    if not isinstance(usage, Mapping):
        return {}
    return {
        key: number
        for key in _TOKEN_KEYS
        if (number := humanize.finite(usage.get(key))) is not None
    }


def _usage_known(record: Mapping[str, Any], usage: Mapping[str, float]) -> bool:
    """Whether the record's agent reported its usage (``requests``; a record of an older
    loopctl has none: then any token counted)."""
    agent = record.get("agent")
    requests = humanize.finite(agent.get("requests")) if isinstance(agent, Mapping) else None
    return bool(requests) or any(usage.values())


def _cost_of(record: Mapping[str, Any]) -> float | None:
    agent = record.get("agent")
    return humanize.finite(agent.get("cost_usd")) if isinstance(agent, Mapping) else None


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _row(record: Mapping[str, Any]) -> str:
    """One table row; a value of the wrong type shows as ``?`` or ``-``."""
    iteration = record.get("iteration")
    iteration_text = "?"
    if isinstance(iteration, int) and not isinstance(iteration, bool) and abs(iteration) < 10**12:
        iteration_text = str(iteration)
    passed = record.get("tests_passed")
    fingerprint = record.get("error_fingerprint")
    usage = _usage_of(record)
    duration = humanize.finite(record.get("duration_s"))
    cells = [
        iteration_text[:12],
        "pass" if passed is True else "fail" if passed is False else "?",
        _failing_text(record)[:12],
        _cell(fingerprint, 60) if isinstance(fingerprint, str) and fingerprint else "",
        (_tokens_text(sum(usage.values())) if _usage_known(record, usage) else humanize.UNKNOWN)
        if usage
        else "-",
        _duration_text(max(duration, 0.0)) if duration is not None else "-",
        _cell(_decision_text(record), 40),
    ]
    return "| " + " | ".join(cells) + " |"


def _failing_text(record: Mapping[str, Any]) -> str:
    """How many tests failed, else how many errors were found."""
    failing_tests = record.get("failing_tests")
    error_count = humanize.finite(record.get("error_count"))
    if isinstance(failing_tests, list) and failing_tests:
        return str(len(failing_tests))
    if record.get("tests_passed") is True:
        return "0"
    if error_count is not None:
        return f"{error_count:.0f} err" if abs(error_count) < 1e9 else "many"
    return "-"


def _decision_text(record: Mapping[str, Any]) -> str:
    """The decision, with its reason unless the loop simply continued."""
    decision = record.get("decision")
    text = decision if isinstance(decision, str) else "?"
    reason = record.get("reason")
    if text not in ("continue", "?") and isinstance(reason, str) and reason:
        text = f"{text}: {reason}"
    return text


def render_progress(
    records: Sequence[Mapping[str, Any]],
    *,
    goal: str,
    status: str,
    max_rows: int = 20,
    totals: Mapping[str, Any] | None = None,
) -> str:
    """``progress.md``: the goal, the status, a table of the last ``max_rows`` iterations and
    totals. Its size does not grow with the number of iterations, so a person (or an agent)
    can always read it whole. ``records`` are ``iterations.jsonl`` dicts; bad values show as ?.

    ``totals``: the running summary of every iteration (``loop-state.md``'s ``summary``), when
    ``records`` are only the last ones; without it the totals are those of ``records``."""
    records = [record for record in records if isinstance(record, Mapping)]
    lines = [
        "# loopctl progress",
        "",
        f"**Goal:** {_goal_text(goal)}",
        "",
        f"{_STATUS_PREFIX}{_cell(status, 300)}",
        "",
        *_table(records, max_rows, _whole(totals, "records", len(records))),
        _totals(records) if totals is None else _summary_totals(totals),
        "",
    ]
    return "\n".join(lines)


_STATUS_PREFIX = "**Status:** "


def set_progress_status(path: Path, status: str) -> bool:
    """Rewrite the **Status:** line of the ``progress.md`` at ``path`` (atomically), leaving the
    rest as it is: what ``loopctl status`` does when it finds that the loop which wrote it died.
    False when there is no such file or line (nothing is written)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if line.startswith(_STATUS_PREFIX):
            lines[index] = _STATUS_PREFIX + _cell(status, 300)
            atomic_write_text(path, "\n".join(lines))
            return True
    return False


def _goal_text(goal: str) -> str:
    """The goal's first line; `` …`` says there is more."""
    first_line, more, _ = goal.strip().partition("\n")
    text = _cell(first_line, 200) if first_line.strip() else "(none)"
    if more and not text.endswith("…"):
        text += " …"
    return text


def _table(records: Sequence[Mapping[str, Any]], max_rows: int, count: int) -> list[str]:
    """The lines of the table of the last ``max_rows`` records (of ``count`` in all), each group
    ending blank."""
    shown = records[-max_rows:] if max_rows > 0 else []
    if not shown:
        return ["No iterations yet.", ""]
    lines = [
        "| iteration | tests | failing | error fingerprint | tokens | duration | decision |",
        "|---:|---|---:|---|---:|---:|---|",
        *(_row(record) for record in shown),
        "",
    ]
    if len(shown) < count:
        lines += [
            f"Last {len(shown)} of {count} iterations; all are in {ITERATIONS_FILE}.",
            "",
        ]
    return lines


def _whole(totals: Mapping[str, Any] | None, key: str, default: int) -> int:
    """A count of ``totals`` (a whole number >= 0), else ``default``."""
    value = totals.get(key) if totals is not None else None
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**15:
        return value
    return default


def _summary_totals(totals: Mapping[str, Any]) -> str:
    """The **Totals:** line from the running summary."""
    tokens = {key: float(_whole(totals, key, 0)) for key in _TOKEN_KEYS}
    cost = humanize.finite(totals.get("cost_usd")) if _whole(totals, "costs_reported", 0) else None
    records = _whole(totals, "records", 0)
    reported = _whole(totals, "usage_reported", records if any(tokens.values()) else 0)
    return _totals_line(
        records, min(_whole(totals, "restarts", 0), 10**9), tokens, cost, reported=reported
    )


def _totals(records: Sequence[Mapping[str, Any]]) -> str:
    """The **Totals:** line: iterations, restarts, tokens and (when reported) cost."""
    totals: dict[str, float] = dict.fromkeys(_TOKEN_KEYS, 0.0)
    costs: list[float] = []
    restarts = reported = 0
    for record in records:
        usage = _usage_of(record)
        reported += _usage_known(record, usage)
        for key, count in usage.items():
            totals[key] += count
        record_cost = _cost_of(record)
        if record_cost is not None:
            costs.append(record_cost)
        before = record.get("restarts", record.get("generation"))  # 0.1 called it generation
        if isinstance(before, int) and not isinstance(before, bool):
            restarts = max(restarts, min(before, 10**9))
    return _totals_line(
        len(records), restarts, totals, sum(costs) if costs else None, reported=reported
    )


def _totals_line(
    iterations: int,
    restarts: int,
    totals: Mapping[str, float],
    cost: float | None,
    *,
    reported: int,
) -> str:
    """The **Totals:** line; ``reported``: the iterations whose agent reported its usage (the
    tokens are unknown when none did, and a lower bound when only some did)."""
    summary = f"**Totals:** {_plural(iterations, 'iteration')}, {_plural(restarts, 'restart')}, "
    if iterations and not reported:
        summary += "tokens unknown (the agent reports no usage)"
    else:
        summary += (
            f"{_tokens_text(sum(totals.values()))} tokens "
            f"({_tokens_text(totals['input_tokens'])} in, "
            f"{_tokens_text(totals['output_tokens'])} out, "
            f"{_tokens_text(totals['cache_read_input_tokens'])} cache reads"
            + (
                f"; reported for {reported} of {iterations} iterations"
                if reported < iterations
                else ""
            )
            + ")"
        )
    if cost is not None:
        summary += f", ${cost:.2f}" if abs(cost) < 1e9 else f", ${cost:.3g}"
    return summary
