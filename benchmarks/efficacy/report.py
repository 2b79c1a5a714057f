"""The benchmark's output: a table on stdout, or one JSON document (``--json``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from efficacy.harness import RunRecord

COLUMNS = ("scenario", "contestant", "done", "iter", "tokens in", "out", "cost $", "wall s")


def summary(records: Sequence[RunRecord]) -> dict[str, dict[str, Any]]:
    """Per contestant: runs, completed runs, and the tokens and cost of all its runs."""
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        row = found.setdefault(
            record.contestant, {"runs": 0, "completed": 0, "tokens": 0, "cost_usd": 0.0}
        )
        row["runs"] += 1
        row["completed"] += int(record.completed)
        row["tokens"] += record.tokens
        row["cost_usd"] = round(row["cost_usd"] + record.cost_usd, 4)
    return found


def read_records(path: Path) -> list[RunRecord]:
    """The runs a ``--records`` file holds (JSON lines, as :func:`as_json` writes each run)."""
    names = {field.name for field in attrs.fields(RunRecord)}
    return [
        RunRecord(**{key: value for key, value in json.loads(line).items() if key in names})
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]


def as_json(records: Sequence[RunRecord], meta: dict[str, Any]) -> dict[str, Any]:
    return {
        **meta,
        "runs": [{**attrs.asdict(r), "tokens": r.tokens} for r in records],
        "summary": summary(records),
    }


def table(records: Sequence[RunRecord]) -> str:
    """The runs as a plain text table, then how each contestant did over all scenarios."""
    rows = [
        (
            r.scenario,
            r.contestant,
            "yes" if r.completed else ("NO (tests pass)" if r.tests_pass else "NO"),
            str(r.iterations),
            f"{r.input_tokens:,}",
            f"{r.output_tokens:,}",
            f"{r.cost_usd:.3f}",
            f"{r.wall_s:.1f}",
        )
        for r in records
    ]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(COLUMNS)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths, strict=True)) + "  stopped"]
    for row, record in zip(rows, records, strict=True):
        cells = "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        extra = "".join(
            f"; {label}: {', '.join(items)}"
            for label, items in (
                ("left running, killed", record.leaked),
                ("BEHAVIOUR ERRORS", record.behaviour_errors),
            )
            if items
        )
        lines.append(f"{cells}  {record.stopped}{extra}")
    lines.append("")
    for name, totals in summary(records).items():
        lines.append(
            f"{name}: completed {totals['completed']} of {totals['runs']}, "
            f"{totals['tokens']:,} tokens, ${totals['cost_usd']:.3f}"
        )
    return "\n".join(lines)
