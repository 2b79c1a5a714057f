"""goal-guard's work per iteration, at 1,000 accumulated notes (target: at most 1 ms).

A real engine is prepared (a git project, config, state directory, the plugin host with
goal-guard and a note-reporting plugin) and goal-guard's hook implementations are called with
its ``Loop`` exactly as the engine calls them in one iteration: ``before_iteration`` (the goal
check), ``compose_prompt`` (the Notes section), the ``compose_prompt`` wrapper (the "Your Goal"
police), and ``after_iteration`` (three test-failure notes derived from the iteration's test run, the notes
hook of the other plugin with three new and two repeated notes, expiry, the cap, the journal
append, the working goal, the events). Each iteration is timed with ``perf_counter``.

The book starts with 1,000 notes and stays at the 1,000-note cap (the oldest are evicted), so
every timed iteration adds, counts, expires and evicts notes and re-renders the section.

Baselines, measured in the same run: the same work with 10 notes kept (the cost that does not
depend on the number of notes), and the core's own prompt assembly of that iteration (the
built-in sections plus ``loopctl.prompt.compose``), which every loop pays with or without
goal-guard.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, median_ms, print_table

from loopctl import IterationRecord, LoopOutcome, TestRun, hookimpl
from loopctl.launch import prepare
from loopctl.pluginhost import PluginHost, PluginSelection
from loopctl.testing import make_project
from loopctl_goal_guard import plugin
from loopctl_goal_guard.notes import Note

ITERATIONS = 400
GOAL = "Make the failing tests pass without changing their assertions.\n\n" + "Context. " * 50
FAILING = ["tests/test_a.py::test_one", "tests/test_b.py::test_two", "tests/test_c.py::test_three"]


class Reviewer:
    """Reports three new notes and two repeated ones every iteration."""

    @hookimpl
    def goal_guard_notes(self, loop: Any) -> list[Any]:
        fresh = [
            {"text": f"remark {n} of iteration {loop.iteration}", "key": f"r{loop.iteration}-{n}"}
            for n in range(3)
        ]
        return [
            *fresh,
            "Keep the public API unchanged.",
            {"text": "Mind the cache.", "priority": 70},
        ]


def _test_run() -> TestRun:
    return TestRun(
        command="pytest -q",
        exit_code=1,
        error_lines=[f"FAILED {test} - AssertionError: assert 1 == 2" for test in FAILING],
        failing_tests=list(FAILING),
        runner="pytest",
        fingerprint="0123456789abcdef",
    )


def _prepared(root: Path) -> Any:
    project = make_project(root / "project")
    project.write(
        "loopctl.toml",
        'agent = "command"\nagent_cmd = "true"\ntest_cmd = "true"\n'
        "[limits]\nmax_iterations = 100000\n",
    )
    project.commit("config")
    host = PluginHost(PluginSelection(enable=[], autoload=False))
    host.register(plugin, "goal-guard")
    host.register(Reviewer(), "reviewer")
    host.load()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    return prepare(project.path, goal=GOAL, env=env, host=host)


def measure(notes: int, iterations: int) -> tuple[list[float], list[float], int, list[float]]:
    """Per-iteration seconds of goal-guard's hooks and of the core's prompt assembly, how many
    notes were kept at the end, and the seconds of a few journal compactions at that size."""
    from loopctl import builtin
    from loopctl.prompt import compose

    with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as tmp:
        prepared = _prepared(Path(tmp))
        engine = prepared.engine
        loop = engine.loop
        plugin.resolve_original_goal(loop, loop.original_goal)
        plugin.on_loop_start(loop)
        guard = plugin.current_guard(loop)
        assert guard is not None
        guard.book.max_notes = max(notes, 10)
        for n in range(notes):
            guard.book.report(Note(f"accumulated note number {n}", source="seed", key=f"s{n}"), 0)
        guard.book.take_changes()
        guard.journal.reset(guard.book)
        budget = engine.loaded.config.prompt.budget_chars
        guard_times: list[float] = []
        core_times: list[float] = []
        clock: Callable[[], float] = time.perf_counter
        try:
            for _ in range(iterations):
                engine.state.iteration += 1
                test_run = _test_run()
                engine.last_test_run = test_run
                record = IterationRecord(
                    iteration=engine.state.iteration,
                    tests_passed=False,
                    test_exit_code=1,
                    failing_tests=list(FAILING),
                )
                started = clock()
                core_sections = builtin.compose_prompt(loop)
                compose(core_sections, budget)
                core_times.append(clock() - started)

                started = clock()
                plugin.before_iteration(loop)
                notes_section = plugin.compose_prompt(loop)
                wrapper = plugin.police_prompt(loop)
                next(wrapper)
                try:
                    wrapper.send([core_sections, notes_section])
                except StopIteration:
                    pass
                plugin.after_iteration(loop, record, test_run)
                guard_times.append(clock() - started)
            kept = len(guard.book)
            compactions = []
            for _ in range(5):
                started = clock()
                guard.journal.reset(guard.book)
                compactions.append(clock() - started)
        finally:
            engine._finish(LoopOutcome(status="interrupted", reason="benchmark"))
        return guard_times, core_times, kept, compactions


def figures(iterations: int = ITERATIONS) -> list[Figure]:
    at_1000, core, kept, compactions = measure(1000, iterations)
    at_10, _, _, _ = measure(10, iterations)
    median = median_ms(at_1000)
    small = median_ms(at_10)
    core_median = median_ms(core)
    mean = statistics.fmean(at_1000) * 1000
    return [
        Figure(
            "goal-guard work per iteration, 1,000 notes (median)",
            median,
            "ms",
            "<= 1 ms",
            median <= 1.0,
            f"{iterations} iterations, {kept} notes kept",
        ),
        Figure("  mean (journal compactions included)", mean, "ms", "<= 1 ms", mean <= 1.0),
        Figure("  p95", statistics.quantiles(at_1000, n=20)[-1] * 1000, "ms"),
        Figure(
            "  one journal compaction, 1,000 notes",
            median_ms(compactions),
            "ms",
            note="atomic rewrite with fsync; about every 300 iterations here",
        ),
        Figure("  baseline: same work with 10 notes", small, "ms", note="same run"),
        Figure("  1,000 notes / 10 notes", median / small, "x", note="count-independent ~1x"),
        Figure("  baseline: core prompt assembly", core_median, "ms", note="same run"),
        Figure("  goal-guard / core prompt assembly", median / core_median, "x"),
    ]


if __name__ == "__main__":
    count = int(sys.argv[1]) if len(sys.argv) > 1 else ITERATIONS
    print_table(figures(count))
