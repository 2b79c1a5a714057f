"""``python benchmarks/efficacy/run.py``: run the scenarios against the contestants.

    run.py                                   # every scenario, every contestant: a table
    run.py --json                            # the same as one JSON document
    run.py -s control-add -c bare-fresh -c loopctl
    run.py --list                            # the scenarios and contestants there are

Without ``-c`` the Claude Code contestants run; the Codex ones (``codex-bare-fresh``, …) run when
named, on the scenarios whose ``clis`` name ``codex`` (a pair a scenario does not support is left
out, and said so). Claude Code and Codex come from ``$LOOPCTL_E2E_NPM_PREFIX`` (``nox -s
efficacy`` installs them there) or PATH. Exit status: 0 when every run finished (whatever its score), 2 for bad input (a malformed
scenario, an unknown name, no CLI), 3 when a behaviour model failed or a run that was not cut left
a process running (the harness kills them either way).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path

from efficacy import chart, harness, report
from efficacy.contestants import CONTESTANTS, Contestant
from efficacy.scenario import SCENARIOS, Scenario, load_all
from loopctl.configfile import ConfigError
from loopctl.testing.realcli import find_cli


def _arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="run.py", description="The efficacy benchmark (docs/efficacy.md)."
    )
    parser.add_argument("-s", "--scenario", action="append", help="run this scenario (repeat)")
    parser.add_argument("-c", "--contestant", action="append", help="run this contestant (repeat)")
    parser.add_argument("--scenarios", type=Path, default=SCENARIOS, help="the scenarios' folder")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        help="run this many contestants at once (each run has its own directory, server and "
        "processes; wall clocks are the scenarios' own, so keep it at most the cores)",
    )
    parser.add_argument("--keep", action="store_true", help="keep each run's directory")
    parser.add_argument("--list", action="store_true", help="list scenarios and contestants")
    parser.add_argument("--chart", type=Path, help="write the chart (SVG) to this file")
    parser.add_argument(
        "--records", type=Path, help="append each run's record to this file as it ends (JSON lines)"
    )
    parser.add_argument(
        "--from-records",
        type=Path,
        help="run nothing: report the runs of a --records file (table, --json, --chart)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help=f"the smoke run: {', '.join(SMOKE)} with bare-fresh and loopctl-plugins; exit 1 "
        "unless the harness worked (a run of each scenario done, the control done by both, no "
        "behaviour error, nothing left running)",
    )
    return parser.parse_args(argv)


def _run_all(
    args: argparse.Namespace,
    pairs: list[tuple[Scenario, Contestant]],
    clis: Mapping[str, str | None],
    base: Path,
) -> list[harness.RunRecord]:
    """Every (scenario, contestant) run, ``args.jobs`` at a time; the records in ``pairs``'
    order, each appended to ``args.records`` as it ends."""
    lock = threading.Lock()

    def run(pair: tuple[Scenario, Contestant]) -> harness.RunRecord:
        scenario, contestant = pair
        record = harness.run_one(
            scenario,
            contestant,
            cli=str(clis[contestant.cli]),
            base=base,
            keep=args.keep,
            log=lambda line: print(line, file=sys.stderr, flush=True),
        )
        if args.records:
            line = json.dumps(report.as_json([record], {})["runs"][0]) + "\n"
            with lock, args.records.open("a", encoding="utf-8") as handle:
                handle.write(line)
        return record

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        return list(pool.map(run, pairs))


def _error(message: str) -> int:
    print(f"efficacy: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str]) -> int:
    args = _arguments(argv)
    if args.smoke:
        args.scenario = args.scenario or list(SMOKE)
        args.contestant = args.contestant or list(SMOKE_CONTESTANTS)
    try:
        scenarios = load_all(args.scenarios, args.scenario)
    except ConfigError as error:
        return _error(str(error))
    if args.from_records:
        records = report.read_records(args.from_records)
        print(
            json.dumps(report.as_json(records, {}), indent=2)
            if args.json
            else report.table(records)
        )
        if args.chart:
            chart.write(args.chart, records)
        return 0
    if args.list:
        for scenario in scenarios:
            print(f"{scenario.name}: {scenario.spec.pattern}")
        print("contestants: " + ", ".join(CONTESTANTS))
        return 0
    if args.jobs < 1:
        return _error(f"--jobs must be at least 1, not {args.jobs}")
    unknown = [name for name in args.contestant or [] if name not in CONTESTANTS]
    if unknown:
        return _error(f"unknown contestant {unknown[0]!r} (there are: {', '.join(CONTESTANTS)})")
    contestants = [CONTESTANTS[name] for name in args.contestant or CONTESTANTS]
    clis = {c.cli: find_cli(c.cli) for c in contestants}
    missing = next((name for name, path in clis.items() if path is None), None)
    if missing is not None:
        return _error(
            f"{PACKAGES[missing][0]} not found: install it with `npm install --prefix DIR "
            f"{PACKAGES[missing][1]}` and set LOOPCTL_E2E_NPM_PREFIX=DIR (nox -s efficacy does)"
        )
    started = datetime.datetime.now(datetime.timezone.utc)
    with tempfile.TemporaryDirectory(prefix="loopctl-efficacy-") as base:
        records = _run_all(args, list(runs(scenarios, contestants)), clis, Path(base))
        if args.keep:  # the runs' directories outlive the temporary one
            kept = Path(tempfile.mkdtemp(prefix="loopctl-efficacy-kept-"))
            for entry in Path(base).iterdir():
                os.replace(entry, kept / entry.name)
            print(f"efficacy: the runs' directories are in {kept}", file=sys.stderr)
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "clis": clis,
        "scenarios": {s.name: s.spec.pattern for s in scenarios},
    }
    print(
        json.dumps(report.as_json(records, meta), indent=2) if args.json else report.table(records)
    )
    if args.chart:
        chart.write(args.chart, records)
    broken = any(
        r.behaviour_errors or (r.leaked and not r.stopped.startswith("cut:")) for r in records
    )
    if args.smoke:
        problems = smoke_problems(records)
        for problem in problems:
            print(f"efficacy: smoke: {problem}", file=sys.stderr)
        return 1 if problems or broken else 0
    return 3 if broken else 0


#: Each agent CLI's name and npm package.
PACKAGES = {
    "claude": ("Claude Code", "@anthropic-ai/claude-code"),
    "codex": ("Codex", "@openai/codex"),
}


def runs(
    scenarios: list[Scenario], contestants: list[Contestant]
) -> list[tuple[Scenario, Contestant]]:
    """Every scenario with every contestant whose CLI it names in ``clis`` (the others are left
    out, said so on stderr)."""
    pairs = []
    for scenario in scenarios:
        for contestant in contestants:
            if contestant.cli in scenario.spec.clis:
                pairs.append((scenario, contestant))
            else:
                print(
                    f"efficacy: {scenario.name} / {contestant.name}: left out (the scenario runs "
                    f"with {', '.join(scenario.spec.clis)})",
                    file=sys.stderr,
                )
    return pairs


#: The smoke run's scenarios: a control, a crash mid-turn, an API error for good.
SMOKE = ("control-add", "crash-mid-turn", "auth-error")
SMOKE_CONTESTANTS = ("bare-fresh", "loopctl-plugins")


def smoke_problems(records: list[harness.RunRecord]) -> list[str]:
    """What shows the harness (not a contestant) did not work: a scenario no run completed, a
    control not done, a behaviour error, a process left by a run that ended by itself."""
    problems = [
        f"{scenario}: no run completed"
        for scenario in dict.fromkeys(r.scenario for r in records)
        if not any(r.completed for r in records if r.scenario == scenario)
    ]
    for r in records:
        name = f"{r.scenario} / {r.contestant}"
        if r.scenario.startswith("control") and not r.completed:
            problems.append(f"{name}: the control was not done ({r.stopped})")
        if r.behaviour_errors:
            problems.append(f"{name}: behaviour errors: {'; '.join(r.behaviour_errors)}")
        if r.leaked and not r.stopped.startswith("cut:"):
            problems.append(f"{name}: left running: {', '.join(r.leaked)}")
    return problems
