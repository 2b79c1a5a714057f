"""Reading a test command's output: ``loopctl.parse_test_output`` on 10 MB logs.

Every iteration's test output goes through ``parse_test_output`` (runner, failing tests, error lines,
fingerprint), so a long, chatty test suite must not make the loop slow. Two inputs, built from
the real captures in ``core/tests/data/test-output``:

- a ``pytest -v`` run of 10 MB: the real verbose capture with ~135,000 more PASSED lines before
  its failures (the common case: a big suite with a few failures at the end);
- every runner's capture (pytest, unittest, jest, node, cargo, tsc, mypy, ...) repeated to 10 MB,
  so that every extractor scans the whole log.

Baseline, measured in the same run on the same text: ``splitlines()`` and one substring test per
line, the least any line-based reader pays. No issue names a target; the figures are there to
catch a regression (the ratio is what to compare between runs). A loop keeps 1 MB of test
output by default (``limits.test_output_bytes``), so these logs are ten times what it reads.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

from loopctl import parse_test_output

CAPTURES = Path(__file__).parent.parent / "core" / "tests" / "data" / "test-output"
SIZE = 10_000_000
ROUNDS = 5


def verbose_pytest_log() -> str:
    head, _, rest = (CAPTURES / "pytest_verbose_line.txt").read_text().partition("\n\n")
    passing = "".join(
        f"tests/test_mod_{i % 97}.py::test_case_{i} PASSED{' ' * 30}[ {i % 100:2d}%]\n"
        for i in range(1000)
    )
    padding = passing * (SIZE // len(passing) + 1)
    return f"{head}\n{padding}\n{rest}"


def every_runner_log() -> str:
    captures = "".join(path.read_text() for path in sorted(CAPTURES.glob("*.txt")))
    return captures * (SIZE // len(captures) + 1)


def best_ms(work: Callable[[], object]) -> float:
    """The best of a few rounds: a busy machine slows some rounds, not all."""
    timings = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings) * 1000


def line_scan(text: str) -> int:
    return sum(1 for line in text.splitlines() if "FAILED" in line)


def figures() -> list[Figure]:
    rows = []
    for label, text in (("pytest -v", verbose_pytest_log()), ("every runner", every_runner_log())):
        found = parse_test_output(text)
        assert found.failing_tests, f"{label}: the failures at the end were not found"
        baseline = best_ms(lambda text=text: line_scan(text))  # type: ignore[misc]
        measured = best_ms(lambda text=text: parse_test_output(text))  # type: ignore[misc]
        megabytes = len(text) / 1e6
        rows += [
            Figure(f"test output, {label}: {megabytes:.0f} MB", measured, "ms"),
            Figure("  baseline: splitlines + `in`", baseline, "ms", note="same run"),
            Figure("  parse / baseline", measured / baseline, "x", note="lower is better"),
        ]
    return rows


if __name__ == "__main__":
    print_table(figures())
