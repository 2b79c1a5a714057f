"""Engine overhead per iteration: everything except the agent and the test command.

A loop of 1,000 iterations runs with the ``command`` agent (a shell writing one file) and a
test command that
always fails after 50 ms (``sleep 0.05; false``), stuck detection off, the four first-party
plugins loaded. The engine takes its working-tree snapshot (one ``git status``) while the tests run, as it
does in real loops; with an instant test command (``false``: the second, informational figure)
the part of the snapshot that the test run cannot hide shows up as overhead. A small plugin
records ``time.perf_counter()`` at each event, so per iteration::

    overhead = (next iteration.start - this iteration.start) - agent span - tests span

where the agent span is agent.start → agent.end (process spawn included: that is the agent) and
the tests span is tests.start → tests.end. The baseline, measured in the same run, is the cost
of one ``true`` process spawn, the unit the agent and tests spans are made of.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, median_ms, print_table, time_commands

from loopctl import hookimpl
from loopctl.testing import make_project, run_loop

ITERATIONS = 1000
#: The issue's figure is "with all four plugins installed": exactly those, whatever else
#: (contrib, a developer's own) is installed in this environment.
FIRST_PARTY = ["context-monitor", "failure-classifier", "context-errors", "goal-guard"]
#: A test command that fails differently every time (random words), so that no plugin sees a
#: repeated failure and changes the loop's course: the benchmark measures steady-state cost.
FAILING = "head -c 12 /dev/urandom | base64 | tr -d '0-9+/='; false"


class Clock:
    def __init__(self) -> None:
        self.marks: list[tuple[str, int | None, float]] = []

    @hookimpl
    def on_event(self, event):  # type: ignore[no-untyped-def]
        self.marks.append((event.type, event.iteration, time.perf_counter()))


def overheads(marks: list[tuple[str, int | None, float]]) -> list[float]:
    starts: dict[int, float] = {}
    spans: dict[int, float] = {}
    opened: dict[str, float] = {}
    for kind, iteration, t in marks:
        if iteration is None:
            continue
        if kind == "iteration.start":
            starts[iteration] = t
        elif kind in ("agent.start", "tests.start"):
            opened[kind] = t
        elif kind == "agent.end":
            spans[iteration] = spans.get(iteration, 0.0) + t - opened.pop("agent.start")
        elif kind == "tests.end":
            spans[iteration] = spans.get(iteration, 0.0) + t - opened.pop("tests.start")
    return [
        starts[i + 1] - starts[i] - spans.get(i, 0.0) for i in sorted(starts) if i + 1 in starts
    ]


def measure(iterations: int, test_cmd: str) -> tuple[list[float], list[str]]:
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        # the context-errors plugin's per-user failure memory: a private one for the benchmark
        os.environ["XDG_DATA_HOME"] = tmp
        project = make_project(Path(tmp) / "project")
        project.write("app.py", "x = 1\n")
        project.commit("app")
        clock = Clock()
        result = run_loop(
            project,
            "benchmark the engine",
            agent="command",
            test_cmd=test_cmd,
            config={
                # The agent changes a file every turn: progress, so no plugin calls it a loop.
                "agent_cmd": "sh -c 'date +%N > progress.txt'",
                "limits": {"max_iterations": iterations, "max_agent_crashes": iterations},
                "stuck": {"enabled": False},
                "plugins": {"enable": FIRST_PARTY},
            },
            plugins={"bench-clock": clock},
            load_installed_plugins=True,
        )
        assert result.status == "max_iterations", result.outcome
        return overheads(clock.marks), result.live_events[0].data["plugins"]


def figures(iterations: int = ITERATIONS) -> list[Figure]:
    per_iteration, plugins = measure(iterations, f"sleep 0.05; {FAILING}")
    instant, _ = measure(min(iterations, 200), FAILING)
    spawn = median_ms(time_commands({"true": ["true"]}, runs=51)["true"])
    first = median_ms(per_iteration[:100])
    last = median_ms(per_iteration[-100:])
    overall = median_ms(per_iteration)
    return [
        Figure(
            "engine overhead per iteration (median)",
            overall,
            "ms",
            "<= 5 ms",
            overall <= 5.0,
            f"{len(per_iteration)} iterations; plugins: {', '.join(plugins)}",
        ),
        Figure("  iterations 1-100 (median)", first, "ms"),
        Figure(f"  iterations {iterations - 99}-{iterations} (median)", last, "ms"),
        Figure(
            "  flatness: last 100 / first 100", last / first, "x", "<= 1.25", last / first <= 1.25
        ),
        Figure("  p90", statistics.quantiles(per_iteration, n=10)[-1] * 1000, "ms"),
        Figure(
            "  with an instant test command", median_ms(instant), "ms", note="snapshot not hidden"
        ),
        Figure("  baseline: one `true` spawn", spawn, "ms", note="same run"),
        Figure("  overhead / spawn", overall / spawn, "x"),
    ]


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else ITERATIONS
    print_table(figures(count))
