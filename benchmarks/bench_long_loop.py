"""A long loop's `resume`, final report and memory: flat in the length of its history.

A loop of 50 and one of 10,000 iterations are made the same way: one real iteration through
the CLI (the ``command`` agent, a failing test command, no plugins), then its record copied into
``iterations.jsonl`` as many times, with the running summary ``loop-state.md`` saves (as a loop
that ran that long leaves them). Figures, each as a ratio of the 10,000-iteration loop to the
50-iteration one, measured in the same run:

* **``loopctl resume``, end to end** — the loop is at its iteration limit, so resume loads the
  state, writes the final report, progress and state, and exits: the command the issue timed
  (761 ms, 2.8x the 49-iteration loop's, before the running summary). Taken in turns.
* **the final report alone** — ``write_report`` with the records the engine hands it (the last
  50 and the running totals).
* **memory** — peak of the engine's history and totals (tracemalloc) while 10,000 records are
  appended, against 500.

    python benchmarks/bench_long_loop.py
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, median_ms, print_table, time_commands

from loopctl import records
from loopctl import state as st
from loopctl.history import History, RunTotals
from loopctl.loop import LoopOutcome
from loopctl.report import REPORT_ITERATIONS, RunSummary, write_report
from loopctl.testing import make_project

SHORT, LONG = 50, 10_000
LOOPCTL = [sys.executable, "-m", "loopctl"]


def make_loop(root: Path, count: int) -> Path:
    """A loop of ``count`` iterations at its limit, as described above; its project dir."""
    project = make_project(root / f"loop-{count}")
    project.write("agent.sh", "#!/bin/sh\ncat >/dev/null\necho edit >> work.txt\n")
    os.chmod(project.path / "agent.sh", 0o755)
    project.commit("agent")
    subprocess.run(
        [
            *LOOPCTL,
            "run",
            "make the tests pass",
            "--agent-cmd",
            "./agent.sh",
            "--test-cmd",
            "echo 'FAILED tests/test_x.py::test_case - AssertionError'; false",
            "--max-iterations",
            "1",
            "--no-plugins",
        ],
        cwd=project.path,
        capture_output=True,
        check=False,
    )
    state_dir = project.path / st.DEFAULT_STATE_DIR
    journal = state_dir / st.ITERATIONS_FILE
    row = json.loads(journal.read_text().splitlines()[0])
    with open(journal, "w", encoding="utf-8") as stream:
        for n in range(1, count + 1):
            stream.write(json.dumps({**row, "iteration": n}) + "\n")
    totals = RunTotals.of(
        records.structure_record({**row, "iteration": n}) for n in range(1, count + 1)
    )
    totals.journal_bytes = journal.stat().st_size
    path = state_dir / st.LOOP_STATE_FILE
    state = st.read_loop_state(path)
    st.write_loop_state(
        path,
        attrs.evolve(state, iteration=count, max_iterations=count, summary=totals.to_json()),
    )
    return project.path


def resume_command(workdir: Path) -> list[str]:
    return ["sh", "-c", f"cd '{workdir}' && exec {' '.join(LOOPCTL)} resume >/dev/null 2>&1"]


def report_seconds(workdir: Path, runs: int = 21) -> list[float]:
    """Seconds of ``write_report`` as the engine calls it at the end of that loop."""
    state_dir = workdir / st.DEFAULT_STATE_DIR
    state = st.read_loop_state(state_dir / st.LOOP_STATE_FILE)
    totals = RunTotals.from_json(state.summary)
    history = History(
        state_dir / st.ITERATIONS_FILE,
        [
            records.structure_record(r)
            for r in st.tail_jsonl(state_dir / st.ITERATIONS_FILE, REPORT_ITERATIONS)
        ],
        count=totals.records,
    )
    summary = RunSummary(
        outcome=LoopOutcome("max_iterations", "max_iterations", iterations=totals.records),
        goal=state.original_goal,
        agent=state.agent,
        test_cmd=state.test_cmd,
        start_commit=state.start_commit,
        state_dir=state_dir,
        elapsed_s=1.0,
        history=history[-REPORT_ITERATIONS:],
        totals=totals,
    )
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        write_report(state_dir, summary)
        samples.append(time.perf_counter() - started)
    return samples


def history_peak(count: int, template: dict[str, object], journal: Path) -> int:
    """Peak bytes (tracemalloc) of a History and RunTotals taking ``count`` records."""
    tracemalloc.start()
    history, totals = History(journal), RunTotals()
    for n in range(1, count + 1):
        record = records.structure_record({**template, "iteration": n})
        history.append(record)
        totals.add(record)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def figures() -> list[Figure]:
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-long-") as tmp:
        root = Path(tmp)
        os.environ["XDG_DATA_HOME"] = tmp
        short, long = make_loop(root, SHORT), make_loop(root, LONG)
        times = time_commands(
            {"short": resume_command(short), "long": resume_command(long)}, runs=15
        )
        resume_ratio = median_ms(times["long"]) / median_ms(times["short"])
        report_short, report_long = report_seconds(short), report_seconds(long)
        report_ratio = statistics.median(report_long) / statistics.median(report_short)
        journal = long / st.DEFAULT_STATE_DIR / st.ITERATIONS_FILE
        template = json.loads(journal.read_text().splitlines()[0])
        peak_500, peak_10k = (
            history_peak(500, template, journal),
            history_peak(LONG, template, journal),
        )
        sizes = [
            (path / st.DEFAULT_STATE_DIR / st.REPORT_JSON_FILE).stat().st_size
            for path in (short, long)
        ]
        shutil.rmtree(root, ignore_errors=True)
    return [
        Figure(
            f"`loopctl resume`, {SHORT}-iteration loop (median)", median_ms(times["short"]), "ms"
        ),
        Figure(
            f"`loopctl resume`, {LONG:,}-iteration loop (median)", median_ms(times["long"]), "ms"
        ),
        Figure(
            f"  resume {LONG:,} / {SHORT}",
            resume_ratio,
            "x",
            "<= 1.5",
            resume_ratio <= 1.5,
            "interleaved runs; the issue measured 2.8x before",
        ),
        Figure(
            f"  final report {LONG:,} / {SHORT}",
            report_ratio,
            "x",
            "<= 1.5",
            report_ratio <= 1.5,
            f"write_report {statistics.median(report_long) * 1000:.2f} ms; "
            f"report.json {sizes[1]:,} B vs {sizes[0]:,} B",
        ),
        Figure(
            f"  history memory {LONG:,} / 500 records",
            peak_10k / peak_500,
            "x",
            "<= 1.2",
            peak_10k / peak_500 <= 1.2,
            f"tracemalloc peak {peak_10k / 1024:.0f} KB vs {peak_500 / 1024:.0f} KB",
        ),
    ]


if __name__ == "__main__":
    print_table(figures())
