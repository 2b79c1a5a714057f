"""Measure the categorizer on the labelled corpus of real tool output and publish the numbers.

    python plugins/context-errors/scripts/accuracy.py           # print, and update the docs page
    python plugins/context-errors/scripts/accuracy.py --check   # exit 1 if the page is stale

Accuracy counts every case; the UNKNOWN rate counts only cases whose label is a real category
(how often the categorizer gives up on output it should have recognised). The development set
is the corpus the rules were written against; the holdout set (ids ``h-…``) was generated after
the rules were frozen and is reported separately, as the honest estimate of how the rules
generalise. The block between the markers in docs/plugins/context-errors.md is rewritten.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "corpus"
DOCS = HERE.parent.parent.parent / "docs" / "plugins" / "context-errors.md"
START = "<!-- context-errors:accuracy:start -->"
END = "<!-- context-errors:accuracy:end -->"
CATEGORIES = (
    "FILE_ACCESS",
    "FUNCTION_ERROR",
    "SYNTAX_ERROR",
    "ASSERTION_FAILURE",
    "TYPE_ERROR",
    "TIMEOUT",
    "MEMORY_ERROR",
    "NETWORK_ERROR",
    "RESOURCE_ERROR",
    "UNKNOWN",
)
SHORT = {
    "FILE_ACCESS": "FILE",
    "FUNCTION_ERROR": "FUNC",
    "SYNTAX_ERROR": "SYN",
    "ASSERTION_FAILURE": "ASSERT",
    "TYPE_ERROR": "TYPE",
    "TIMEOUT": "TIME",
    "MEMORY_ERROR": "MEM",
    "NETWORK_ERROR": "NET",
    "RESOURCE_ERROR": "RES",
    "UNKNOWN": "UNK",
}


@attrs.define
class Prediction:
    id: str
    tool: str
    label: str
    predicted: str
    rule: str


@attrs.define
class Scores:
    name: str
    predictions: list[Prediction]

    @property
    def total(self) -> int:
        return len(self.predictions)

    @property
    def correct(self) -> int:
        return sum(1 for p in self.predictions if p.label == p.predicted)

    @property
    def accuracy(self) -> float:
        return self.correct / self.total if self.total else 0.0

    @property
    def real(self) -> list[Prediction]:
        return [p for p in self.predictions if p.label != "UNKNOWN"]

    @property
    def unknown_rate(self) -> float:
        real = self.real
        return sum(1 for p in real if p.predicted == "UNKNOWN") / len(real) if real else 0.0

    def confusion(self) -> dict[str, dict[str, int]]:
        matrix = {label: dict.fromkeys(CATEGORIES, 0) for label in CATEGORIES}
        for p in self.predictions:
            matrix[p.label][p.predicted] += 1
        return matrix

    def by_tool(self) -> dict[str, tuple[int, int]]:
        tools: dict[str, tuple[int, int]] = {}
        for p in self.predictions:
            right, total = tools.get(p.tool, (0, 0))
            tools[p.tool] = (right + (p.label == p.predicted), total + 1)
        return dict(sorted(tools.items()))

    def misses(self) -> list[Prediction]:
        return [p for p in self.predictions if p.label != p.predicted]


def evaluate(cases: Sequence[dict[str, Any]] | None = None) -> tuple[Scores, Scores]:
    """(development scores, holdout scores) over the corpus."""
    from loopctl_context_errors.categories import categorize

    if cases is None:
        manifest = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
        cases = manifest["cases"]
    dev: list[Prediction] = []
    holdout: list[Prediction] = []
    for case in cases:
        text = (CORPUS / case["file"]).read_text(encoding="utf-8")
        found = categorize(text)
        prediction = Prediction(
            case["id"], case["tool"], case["label"], found.category.value, found.rule_name
        )
        (holdout if case["id"].startswith("h-") else dev).append(prediction)
    return Scores("development", dev), Scores("holdout", holdout)


def _matrix_table(scores: Scores) -> list[str]:
    matrix = scores.confusion()
    head = "| label \\ predicted | " + " | ".join(SHORT[c] for c in CATEGORIES) + " | n |"
    rule = "|---|" + "---:|" * (len(CATEGORIES) + 1)
    rows = [head, rule]
    for label in CATEGORIES:
        counts = matrix[label]
        n = sum(counts.values())
        if n == 0:
            continue
        cells = [
            (f"**{counts[c]}**" if c == label else str(counts[c])) if counts[c] else "·"
            for c in CATEGORIES
        ]
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {n} |")
    return rows


def _summary(scores: Scores) -> list[str]:
    return [
        f"- **{scores.name}** ({scores.total} cases): accuracy **{scores.accuracy:.1%}** "
        f"({scores.correct}/{scores.total}); UNKNOWN on output with a real category "
        f"**{scores.unknown_rate:.1%}** "
        f"({sum(1 for p in scores.real if p.predicted == 'UNKNOWN')}/{len(scores.real)})",
    ]


def render_block(dev: Scores, holdout: Scores) -> str:
    lines = [
        START,
        "",
        "Generated by `scripts/accuracy.py` from `tests/corpus/` — do not edit.",
        "",
    ]
    lines += _summary(dev)
    if holdout.total:
        lines += _summary(holdout)
    combined = Scores("all", dev.predictions + holdout.predictions)
    lines += _summary(combined)
    lines += ["", "Per tool (development + holdout, correct/total):", ""]
    tools = combined.by_tool()
    lines.append("| " + " | ".join(tools) + " |")
    lines.append("|" + "---:|" * len(tools))
    lines.append("| " + " | ".join(f"{r}/{t}" for r, t in tools.values()) + " |")
    lines += ["", "Confusion matrix (development + holdout; rows: label, columns: predicted):", ""]
    lines += _matrix_table(combined)
    misses = combined.misses()
    lines += ["", f"Misclassified ({len(misses)}):", ""]
    if misses:
        lines += [
            f"- `{p.id}` ({p.tool}): labelled {p.label}, predicted {p.predicted} (rule `{p.rule}`)"
            for p in misses
        ]
    else:
        lines.append("- none")
    lines += ["", END]
    return "\n".join(lines)


def update_docs(block: str, path: Path = DOCS) -> bool:
    """Put ``block`` between the markers; True when the file changed."""
    text = path.read_text(encoding="utf-8")
    start, end = text.find(START), text.find(END)
    if start == -1 or end == -1 or end < start:
        raise SystemExit(f"{path}: the accuracy markers are missing")
    updated = text[:start] + block + text[end + len(END) :]
    if updated == text:
        return False
    path.write_text(updated, encoding="utf-8")
    return True


def docs_block(path: Path = DOCS) -> str:
    text = path.read_text(encoding="utf-8")
    start, end = text.find(START), text.find(END)
    return text[start : end + len(END)] if start != -1 and end != -1 else ""


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if the docs are stale")
    args = parser.parse_args(argv)
    dev, holdout = evaluate()
    block = render_block(dev, holdout)
    print(block)
    if args.check:
        if docs_block() != block:
            print(f"{DOCS}: the accuracy block is stale; run scripts/accuracy.py", file=sys.stderr)
            return 1
        return 0
    changed = update_docs(block)
    print(f"{DOCS}: {'updated' if changed else 'already up to date'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
