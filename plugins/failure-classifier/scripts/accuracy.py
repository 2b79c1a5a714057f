"""Measure the classifier on the labelled corpus of real failure output (``tests/corpus``).

Every case is classified exactly as ``loopctl classify`` would classify it (raw logs in
iteration order, with ``--same-code``/``--rerun-log`` where the case has them, or a loop's state
directory), in a throwaway copy of the case's project files. Prints accuracy, per-mode precision,
recall and F1, macro-F1 and the confusion matrix, and with ``--write-docs`` puts the same tables
into ``docs/plugins/failure-classifier.md`` between the accuracy markers.

Usage: ``python scripts/accuracy.py [--write-docs | --check] [--json]`` (``--check`` exits 1
when the docs page does not show what the corpus gives now).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "corpus" / "cases"
#: Cases written after the rules were frozen; never used to tune them.
HELDOUT = HERE.parent / "tests" / "corpus" / "heldout"
DOCS = HERE.parents[2] / "docs" / "plugins" / "failure-classifier.md"
START, END = "<!-- accuracy:start -->", "<!-- accuracy:end -->"
MODES = ("dependency_issue", "test_flakiness", "infinite_loop", "context_exhaustion", "code_error")
#: The ecosystem of each case, from the tool that made its output (``case.json``'s ``tool``).
ECOSYSTEMS: dict[str, str] = {
    **dict.fromkeys(
        (
            "pip",
            "pip+pytest",
            "pytest",
            "pytest+hypothesis",
            "python",
            "python -m",
            "unittest",
            "uv",
            "poetry",
            "tox",
            "nox",
            "mypy",
        ),
        "Python",
    ),
    **dict.fromkeys(
        ("node", "node --test", "npm", "npm test", "npx", "pnpm", "jest", "vitest", "tsc"),
        "JavaScript",
    ),
    **dict.fromkeys(("cargo", "cargo build", "cargo test"), "Rust"),
    **dict.fromkeys(("go build", "go test"), "Go"),
    **dict.fromkeys(("make", "gcc", "g++", "ld", "cmake"), "C and C++"),
    **dict.fromkeys(("javac", "java", "mvn"), "Java"),
    **dict.fromkeys(("ruby", "bundle"), "Ruby"),
    **dict.fromkeys(("php", "composer"), "PHP"),
    "mix": "Elixir",
    **dict.fromkeys(("cabal", "ghc"), "Haskell"),
    **dict.fromkeys(("kotlinc", "kotlin", "gradle"), "Kotlin and Gradle"),
    "bazel": "Bazel",
    "conan": "Conan",
    "nix": "Nix",
    "pre-commit": "pre-commit",
    **dict.fromkeys(("sh", "bash"), "shell"),
    **dict.fromkeys(("psql", "docker"), "services"),
    "loopctl": "loop history",
    # issue 27's fifth round (``case.json`` names its ecosystem; these give the order)
    **dict.fromkeys(("perl", "cpanm", "prove"), "Perl"),
    **dict.fromkeys(("lua", "luarocks"), "Lua"),
    "dune": "OCaml/dune",
    **dict.fromkeys(("erl", "rebar3"), "Erlang/rebar3"),
    "gfortran": "Fortran",
    "meson": "Meson",
    "configure": "Autotools",
    "yarn": "Yarn",
    "exec": "programs and libraries",
    "tclsh": "Tcl",
    "sqlite3": "SQLite",
    "awk": "awk",
}
#: Each case's verdict the first time it was classified, before any rule was written for it
#: (``--first-sight NAME`` records the cases not in it yet as a new round): the honest measure of
#: how the rules generalise, shown beside today's figure for the same cases.
FIRST_SIGHT = HERE.parent / "tests" / "corpus" / "first-sight.json"
#: Cases the classifier gets wrong, and why: the accuracy test asserts that these, and only
#: these, are misclassified (a fix removes its line; a new miss must be explained here).
KNOWN_MISSES: dict[str, str] = {
    "pytest-plugin-fixture": (
        "pytest says only \"fixture 'mocker' not found\", exactly as for a fixture the project "
        "forgot to write; telling the two apart needs a list of plugin fixtures' names"
    ),
    # The third held-out round across ecosystems: left unfixed so that its figure stays an
    # honest estimate of the wordings the patterns have not seen.
    "h-py-version-conflict": (
        "held out: no pattern for pkg_resources' VersionConflict (an installed version that "
        "does not satisfy a requirement)"
    ),
    "h-go-vendor-inconsistent": 'held out: no pattern for Go\'s "inconsistent vendoring"',
    "h-gxx-std-too-new": (
        "held out: no pattern for a compiler that does not know the language standard asked "
        "for (`unrecognized command-line option '-std=c++29'`)"
    ),
    # The fourth held-out round (the new ecosystems, issue 27): recorded at first sight in
    # first-sight.json, then three of its four misses were generalised into rules.
    "h-php-extension-function": (
        "held out: `Call to undefined function imagecreatetruecolor()` is PHP's wording for a "
        "function the project forgot to write too; telling them apart needs the names of "
        "every extension's functions"
    ),
    "h-mvn-enforcer-java": (
        "held out: no pattern for Maven's enforcer rules (`RequireJavaVersion failed`)"
    ),
}
#: The targets the issue sets (and the accuracy test asserts).
TARGET_MACRO_F1 = 0.90
TARGET_FLAKY_PRECISION = 0.95


def _materialise(source: Path, target: Path, workdir: Path) -> None:
    """Copy ``source`` to ``target`` with ``{WORKDIR}``/``{TMP}`` put back as real paths."""
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8", errors="replace")
        text = text.replace("{WORKDIR}", str(workdir)).replace("{TMP}", str(workdir.parent))
        destination.write_text(text, encoding="utf-8")


def classify_case(case_dir: Path, *, elsewhere: bool = False) -> dict[str, Any]:
    """The verdict on one case: ``{id, label, predicted, confidence, detector, error}``; with
    ``elsewhere``, classified from an empty directory, not from its project (which is still where
    the output's paths say), as ``loopctl classify --log`` run outside the project would."""
    from loopctl_failure_classifier.offline import classify_offline

    meta = json.loads((case_dir / "case.json").read_text(encoding="utf-8"))
    row: dict[str, Any] = {
        "id": meta["id"],
        "label": meta["label"],
        "tool": meta["tool"],
        "ecosystem": meta.get("ecosystem") or ECOSYSTEMS.get(meta["tool"], "other"),
        "set": "held-out" if case_dir.parent.name == "heldout" else "development",
        "generated": meta.get("generated", ""),
    }
    with tempfile.TemporaryDirectory(prefix="fc-accuracy-") as tmp:
        root = Path(tmp)
        workdir = root / "project"
        workdir.mkdir()
        if (case_dir / "workdir").is_dir():
            _materialise(case_dir / "workdir", workdir, workdir)
        cwd = workdir
        if elsewhere:
            cwd = root / "elsewhere"
            cwd.mkdir()
        try:
            if meta["kind"] == "state":
                state = root / "state"
                _materialise(case_dir / "state", state, workdir)
                result = classify_offline(state_dir=state, workdir=cwd)
            else:
                logs_dir = root / "logs"
                _materialise(case_dir / "logs", logs_dir, workdir)
                logs = sorted(logs_dir.glob("*.log"), key=lambda p: int(p.stem))
                rerun = None
                if (case_dir / "rerun.log").is_file():
                    rerun = root / "rerun.log"
                    text = (case_dir / "rerun.log").read_text(encoding="utf-8")
                    rerun.write_text(text.replace("{WORKDIR}", str(workdir)), encoding="utf-8")
                result = classify_offline(
                    logs=logs,
                    rerun_log=rerun,
                    same_code=bool(meta.get("same_code")),
                    workdir=cwd,
                )
            row.update(
                predicted=result.verdict.mode,
                confidence=round(result.verdict.confidence, 3),
                detector=result.verdict.detector,
                error=None,
            )
        except Exception as exc:  # noqa: BLE001 - a crash is a result to report
            row.update(predicted="CRASH", confidence=0.0, detector="", error=repr(exc))
    return row


def evaluate(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Accuracy, per-mode precision/recall/F1, macro-F1 and the confusion matrix."""
    confusion: dict[str, Counter[str]] = {mode: Counter() for mode in MODES}
    for row in rows:
        confusion.setdefault(row["label"], Counter())[row["predicted"]] += 1
    per_mode: dict[str, dict[str, float]] = {}
    for mode in MODES:
        tp = confusion[mode][mode]
        predicted = sum(c[mode] for c in confusion.values())
        actual = sum(confusion[mode].values())
        precision = tp / predicted if predicted else 0.0
        recall = tp / actual if actual else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_mode[mode] = {
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "support": actual,
            "predicted": predicted,
        }
    correct = sum(1 for row in rows if row["label"] == row["predicted"])
    return {
        "cases": len(rows),
        "accuracy": correct / len(rows) if rows else 0.0,
        "macro_f1": sum(m["f1"] for m in per_mode.values()) / len(MODES),
        "per_mode": per_mode,
        "confusion": {mode: dict(confusion[mode]) for mode in MODES},
        "crashes": sum(1 for row in rows if row["predicted"] == "CRASH"),
        "errors": [row for row in rows if row["label"] != row["predicted"]],
        "tools": sorted({row["tool"] for row in rows}),
    }


def case_dirs() -> list[Path]:
    return [
        case
        for root in (CORPUS, HELDOUT)
        if root.is_dir()
        for case in sorted(root.iterdir())
        if (case / "case.json").exists()
    ]


def by_ecosystem(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per ecosystem: cases, accuracy, and recall of the two modes every ecosystem has."""
    found: dict[str, dict[str, Any]] = {}
    order = [*dict.fromkeys(ECOSYSTEMS.values()), "other"]
    for name in order:
        part = [row for row in rows if row["ecosystem"] == name]
        if not part:
            continue
        entry: dict[str, Any] = {
            "cases": len(part),
            "accuracy": sum(r["label"] == r["predicted"] for r in part) / len(part),
        }
        for mode in ("dependency_issue", "code_error"):
            labelled = [r for r in part if r["label"] == mode]
            right = sum(r["predicted"] == mode for r in labelled)
            entry[mode] = (right, len(labelled))
        found[name] = entry
    return found


def first_sight_rounds(path: Path | None = None) -> list[dict[str, Any]]:
    """The recorded first-sight rounds: ``[{name, rules, date, cases: {id: {label, predicted,
    ecosystem}}}]``, oldest first."""
    path = path or FIRST_SIGHT
    if not path.is_file():
        return []
    rounds: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["rounds"]
    return rounds


def record_first_sight(
    rows: Sequence[dict[str, Any]], name: str, rules: str, since: str, path: Path | None = None
) -> dict[str, Any]:
    """Add the rows of cases made on or after ``since`` (an ISO date) that no round holds yet as
    a new round ``name`` (the verdicts of the rules at commit ``rules``); the round, or an empty
    one when there is no such case."""
    path = path or FIRST_SIGHT
    rounds = first_sight_rounds(path)
    seen = {case for round_ in rounds for case in round_["cases"]}
    new = {
        row["id"]: {k: row[k] for k in ("label", "predicted", "ecosystem")}
        for row in rows
        if row["id"] not in seen and row["generated"] >= since
    }
    round_ = {"name": name, "rules": rules, "date": dt.date.today().isoformat(), "cases": new}
    if new:
        rounds.append(round_)
        text = json.dumps({"rounds": rounds}, indent=1, sort_keys=True) + "\n"
        path.write_text(text, encoding="utf-8")
    return round_


def first_sight(
    rows: Sequence[dict[str, Any]], rounds: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per round and ecosystem: cases, right at first sight, right now (the same cases)."""
    now = {row["id"]: row for row in rows}
    found = []
    for round_ in rounds:
        per: dict[str, dict[str, int]] = {}
        for case, seen in sorted(round_["cases"].items(), key=lambda item: _order(item[1])):
            if case not in now:
                continue  # a case since removed from the corpus
            entry = per.setdefault(seen["ecosystem"], {"cases": 0, "first": 0, "now": 0})
            entry["cases"] += 1
            entry["first"] += seen["predicted"] == seen["label"]
            entry["now"] += now[case]["predicted"] == now[case]["label"]
        found.append({"name": round_["name"], "rules": round_["rules"], "ecosystems": per})
    return found


def _order(seen: dict[str, Any]) -> int:
    names = [*dict.fromkeys(ECOSYSTEMS.values())]
    return names.index(seen["ecosystem"]) if seen["ecosystem"] in names else len(names)


def run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows = [classify_case(case) for case in case_dirs()]
    report = evaluate(rows)
    report["first_sight"] = first_sight(rows, first_sight_rounds())
    report["sets"] = {
        name: {
            key: value
            for key, value in evaluate([r for r in rows if r["set"] == name]).items()
            if key in ("cases", "accuracy", "macro_f1")
        }
        for name in ("development", "held-out")
    }
    report["ecosystems"] = by_ecosystem(rows)
    return rows, report


def render(report: dict[str, Any]) -> str:
    short = {m: m.split("_")[0] for m in MODES}
    lines = [
        f"Measured on **{report['cases']} cases** of real output "
        f"({', '.join(report['tools'])}); regenerate with "
        "`python plugins/failure-classifier/scripts/accuracy.py --write-docs`.",
        "",
        f"- accuracy: **{report['accuracy']:.3f}**",
        f"- macro-F1 over the five modes: **{report['macro_f1']:.3f}** (target ≥ {TARGET_MACRO_F1})",
        f"- `test_flakiness` precision: **{report['per_mode']['test_flakiness']['precision']:.3f}** "
        f"(target ≥ {TARGET_FLAKY_PRECISION})",
        f"- crashes: **{report['crashes']}**",
        "",
        "| set | cases | accuracy | macro-F1 |",
        "|---|---|---|---|",
        *[
            f"| {name} | {part['cases']} | {part['accuracy']:.3f} | {part['macro_f1']:.3f} |"
            for name, part in report.get("sets", {}).items()
        ],
        "",
        "Per ecosystem (the tool that printed the output; recall: right / labelled):",
        "",
        "| ecosystem | cases | accuracy | `dependency_issue` recall | `code_error` recall |",
        "|---|---|---|---|---|",
        *[
            f"| {name} | {part['cases']} | {part['accuracy']:.3f} | "
            + " | ".join(
                f"{right}/{total}" if total else "–"
                for right, total in (part["dependency_issue"], part["code_error"])
            )
            + " |"
            for name, part in report.get("ecosystems", {}).items()
        ],
        "",
        "| mode | precision | recall | F1 | cases |",
        "|---|---|---|---|---|",
    ]
    for mode in MODES:
        m = report["per_mode"][mode]
        lines.append(
            f"| `{mode}` | {m['precision']:.3f} | {m['recall']:.3f} | {m['f1']:.3f} | {m['support']} |"
        )
    lines += _render_first_sight(report.get("first_sight", []))
    lines += [
        "",
        "Confusion matrix (rows: the true mode, columns: the classifier's verdict):",
        "",
        "| true \\ predicted | " + " | ".join(short[m] for m in MODES) + " |",
        "|---|" + "---|" * len(MODES),
    ]
    for mode in MODES:
        cells = " | ".join(str(report["confusion"][mode].get(p, 0)) for p in MODES)
        lines.append(f"| {short[mode]} | {cells} |")
    if report["errors"]:
        lines += ["", "Misclassified cases:", ""]
        lines += [
            f"- `{row['id']}` ({row['set']}): {row['label']} classified as {row['predicted']} "
            f"({row['detector']})"
            + (f": {KNOWN_MISSES[row['id']]}" if row["id"] in KNOWN_MISSES else "")
            for row in report["errors"]
        ]
    return "\n".join(lines)


def _render_first_sight(rounds: Sequence[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for round_ in rounds:
        per = round_["ecosystems"]
        total = {k: sum(e[k] for e in per.values()) for k in ("cases", "first", "now")}
        lines += [
            "",
            f"First sight, {round_['name']}: each case classified once by the rules of "
            f"`{round_['rules']}`, before any rule was written for it, and now:",
            "",
            "| ecosystem | cases | first sight | now |",
            "|---|---|---|---|",
            *[
                f"| {name} | {e['cases']} | {e['first'] / e['cases']:.3f} | "
                f"{e['now'] / e['cases']:.3f} |"
                for name, e in per.items()
            ],
            f"| all | {total['cases']} | {total['first'] / max(1, total['cases']):.3f} | "
            f"{total['now'] / max(1, total['cases']):.3f} |",
        ]
    return lines


def docs_text(report: dict[str, Any], path: Path = DOCS) -> str:
    """The docs page with the accuracy block rendered from ``report``."""
    text = path.read_text(encoding="utf-8")
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{render(report)}\n{END}{after}"


def write_docs(report: dict[str, Any], path: Path = DOCS) -> None:
    path.write_text(docs_text(report, path), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write-docs", action="store_true", help=f"update {DOCS.name}")
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 if {DOCS.name} shows other figures"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--first-sight",
        metavar="NAME",
        help=f"record the new cases {FIRST_SIGHT.name} lacks as a round NAME (before writing rules)",
    )
    parser.add_argument(
        "--since",
        metavar="DATE",
        default=dt.date.today().isoformat(),
        help="with --first-sight: the cases made on or after this date (default today)",
    )
    args = parser.parse_args(argv)
    rows, report = run()
    if args.first_sight:
        rules = _head_commit()
        round_ = record_first_sight(rows, args.first_sight, rules, args.since)
        print(f"{len(round_['cases'])} cases recorded at first sight (rules {rules})")
        rows, report = run()
    if args.check:
        if docs_text(report) != DOCS.read_text(encoding="utf-8"):
            print(f"{DOCS} is out of date: run {Path(__file__).name} --write-docs", file=sys.stderr)
            return 1
        print(f"{DOCS.name} is up to date")
        return 0
    if args.json:
        print(json.dumps({"report": report, "rows": rows}, indent=2))
    else:
        print(render(report))
    if args.write_docs:
        write_docs(report)
    ok = report["macro_f1"] >= TARGET_MACRO_F1 and (
        report["per_mode"]["test_flakiness"]["precision"] >= TARGET_FLAKY_PRECISION
    )
    return 0 if ok and not report["crashes"] else 1


def _head_commit() -> str:
    """The commit of the rules being measured (the checkout's HEAD), or "unknown"."""
    import subprocess

    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


if __name__ == "__main__":
    if shutil.which("git") is None:
        print("note: git is not installed; state cases are still classified", file=sys.stderr)
    sys.exit(main())
