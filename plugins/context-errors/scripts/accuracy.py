"""Measure the categorizer on the labelled corpus of real tool output and publish the numbers.

    python plugins/context-errors/scripts/accuracy.py           # print, and update the docs page
    python plugins/context-errors/scripts/accuracy.py --check   # exit 1 if the page is stale

Accuracy counts every case; the UNKNOWN rate counts only cases whose label is a real category
(how often the categorizer gives up on output it should have recognised). The development set
is the corpus the rules were written against; the holdout set (ids ``h-…``) was generated after
the rules were frozen and is reported separately, as the honest estimate of how the rules
generalise. The ecosystem set (ids ``e-…``, issue #27) is tools the rules were not written for;
what the rules said when they first saw it is kept in ``tests/corpus/first_sight.json`` and
reported beside the current figure, per ecosystem. The block between the markers in
docs/plugins/context-errors.md is rewritten.

    python plugins/context-errors/scripts/accuracy.py --record-first-sight

adds the current predictions of ``e-…`` to ``e5-…`` cases that ``first_sight.json`` does not hold yet (run it
right after generating new cases, before any rule is written for them); it never changes an
entry that is there.
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
FIRST_SIGHT = CORPUS / "first_sight.json"
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
    ecosystem: str = ""


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

    def by_ecosystem(self) -> dict[str, list[Prediction]]:
        groups: dict[str, list[Prediction]] = {}
        for p in self.predictions:
            groups.setdefault(p.ecosystem, []).append(p)
        return dict(sorted(groups.items()))


#: The sets, by the start of a case's id (the development set takes the rest).
SETS = (
    ("holdout", "h-"),
    ("ecosystems", "e-"),
    ("ecosystems, second round", "e2-"),
    ("ecosystems, third round", "e3-"),
    ("ecosystems, fourth round", "e4-"),
    ("ecosystems, fourth round's held-out check", "e5-"),
)
#: What the report says above each ecosystem round.
ROUND_TITLES = {
    "ecosystems": "Ecosystems the rules were not written for (ids `e-…`, issue #27):",
    "ecosystems, second round": "Second round (ids `e2-…`), written after the rules for the "
    "first were frozen; first sight is its honest measure:",
    "ecosystems, third round": "Third round (ids `e3-…`), written after the rules for the "
    "second were frozen:",
    "ecosystems, fourth round": "Fourth round (ids `e4-…`, `fresh_round.py`): tools and "
    "situations neither corpus had, shared with the failure classifier's corpus:",
    "ecosystems, fourth round's held-out check": "The fourth round's held-out check (ids "
    "`e5-…`): other tools in the same situations, written after its rules were frozen; first "
    "sight is its honest measure:",
}


def evaluate(cases: Sequence[dict[str, Any]] | None = None) -> tuple[Scores, ...]:
    """The development, holdout and ecosystem rounds' scores over the corpus (as in SETS)."""
    from loopctl_context_errors.categories import categorize

    if cases is None:
        manifest = json.loads((CORPUS / "manifest.json").read_text(encoding="utf-8"))
        cases = manifest["cases"]
    parts: dict[str, list[Prediction]] = {name: [] for name in ("development", *dict(SETS))}
    for case in cases:
        text = (CORPUS / case["file"]).read_text(encoding="utf-8")
        found = categorize(text)
        prediction = Prediction(
            case["id"],
            case["tool"],
            case["label"],
            found.category.value,
            found.rule_name,
            case.get("ecosystem", ""),
        )
        part = next((name for name, start in SETS if case["id"].startswith(start)), "development")
        parts[part].append(prediction)
    return tuple(Scores(name, found) for name, found in parts.items())


def first_sight(path: Path = FIRST_SIGHT) -> dict[str, str]:
    """Each ecosystem case's category as the rules said when they first saw it."""
    if not path.exists():
        return {}
    data: dict[str, str] = json.loads(path.read_text(encoding="utf-8"))["predictions"]
    return data


def record_first_sight(scores: Scores, path: Path = FIRST_SIGHT) -> int:
    """Add the predictions of cases not recorded yet; never change a recorded one."""
    known = first_sight(path)
    new = {p.id: p.predicted for p in scores.predictions if p.id not in known}
    if new:
        data = {
            "about": "what the rules said when they first saw each e-/e2- case (scripts/accuracy.py)",
            "predictions": dict(sorted({**known, **new}.items())),
        }
        path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return len(new)


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


def _ratio(right: int, total: int) -> str:
    return f"{right}/{total} ({right / total:.0%})" if total else "—"


def _ecosystem_table(scores: Scores, seen: dict[str, str]) -> list[str]:
    rows = [
        "| ecosystem | cases | first sight | now |",
        "|---|---:|---:|---:|",
    ]
    groups = {**scores.by_ecosystem(), "all": scores.predictions}
    for name, predictions in groups.items():
        first = sum(1 for p in predictions if seen.get(p.id) == p.label)
        now = sum(1 for p in predictions if p.predicted == p.label)
        total = len(predictions)
        label = f"**{name}**" if name == "all" else name
        rows.append(f"| {label} | {total} | {_ratio(first, total)} | {_ratio(now, total)} |")
    return rows


def _misses(misses: list[Prediction]) -> list[str]:
    if not misses:
        return ["- none"]
    return [
        f"- `{p.id}` ({p.tool}): labelled {p.label}, predicted {p.predicted} (rule `{p.rule}`)"
        for p in misses
    ]


def _ecosystem_part(scores: Scores, seen: dict[str, str], title: str) -> list[str]:
    misses = scores.misses()
    return [
        "",
        title,
        "",
        *_summary(scores),
        "",
        *_ecosystem_table(scores, seen),
        "",
        f"Misclassified ({len(misses)}):",
        "",
        *_misses(misses),
    ]


def render_block(
    dev: Scores, holdout: Scores, *rounds: Scores, seen: dict[str, str] | None = None
) -> str:
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
    lines += _misses(misses)
    for part in rounds:
        if part.total:
            lines += _ecosystem_part(part, seen or {}, ROUND_TITLES[part.name])
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
    parser.add_argument(
        "--record-first-sight",
        action="store_true",
        help="record the predictions of new e- and e2- cases in first_sight.json",
    )
    args = parser.parse_args(argv)
    dev, holdout, *rounds = evaluate()
    if args.record_first_sight:
        added = record_first_sight(Scores("new", [p for r in rounds for p in r.predictions]))
        print(f"{FIRST_SIGHT}: {added} first-sight predictions recorded", file=sys.stderr)
    block = render_block(dev, holdout, *rounds, seen=first_sight())
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
