"""Run every benchmark and print one table of figures (``nox -s bench``)."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

#: Each module has figures() -> list[Figure]. Plugins' benchmarks join this list as they land.
BENCHMARKS = [
    "bench_startup",
    "bench_engine",
    "bench_claude_parser",
    "bench_goal_guard",
    "bench_context_monitor",
]


def main(names: list[str]) -> int:
    figures: list[Figure] = []
    for name in names or BENCHMARKS:
        started = time.perf_counter()
        module = importlib.import_module(name)
        figures.append(
            Figure(f"[{name}]", time.perf_counter() - started, "s", note="benchmark run time")
        )
        figures.extend(module.figures())
    print_table(figures)
    return 0 if all(f.ok is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
