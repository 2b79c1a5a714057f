"""Reading a runner's own report: JUnit XML (``loopctl.junit``) and ``go test -json``.

Every test run with a report is read twice (the report, and the output as a fallback), so the
report reader must cost little next to the output reader. Inputs, built from the real captures
in ``core/tests/data/test-output``:

- a JUnit report of 20,000 test cases, 200 of them failing with pytest's failure text (the
  real ``pytest_junit_xunit1.report.xml``'s failures, repeated): ``read_junit`` against the
  standard library's ``xml.etree.ElementTree.fromstring`` on the same bytes, which only builds
  the tree and reads nothing out of it;
- a 10 MB ``go test -json`` stream (the real capture, its packages renamed and repeated):
  ``parse_test_output`` against ``json.loads`` of every line.

No issue names a target; the ratios are what to compare between runs.
"""

from __future__ import annotations

import json
import re
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

from loopctl import parse_test_output
from loopctl.junit import read_junit

CAPTURES = Path(__file__).parent.parent / "core" / "tests" / "data" / "test-output"
CASES = 20_000
FAILING_EVERY = 100
SIZE = 10_000_000
ROUNDS = 5


def junit_report() -> bytes:
    real = (CAPTURES / "pytest_junit_xunit1.report.xml").read_text()
    failures = re.findall(r"<testcase [^>]*>\s*<failure.*?</testcase>", real, re.DOTALL)
    cases = []
    for i in range(CASES):
        if i % FAILING_EVERY == 0:
            cases.append(failures[i // FAILING_EVERY % len(failures)].replace("test_", f"t{i}_"))
        else:
            cases.append(
                f'<testcase classname="tests.test_mod_{i % 97}" name="test_case_{i}" '
                f'file="tests/test_mod_{i % 97}.py" line="{i % 300}" time="0.001" />'
            )
    body = "".join(cases)
    return (
        '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
        f'<testsuite name="pytest" tests="{CASES}">{body}</testsuite></testsuites>'
    ).encode()


def go_json_stream() -> str:
    real = (CAPTURES / "go_test_json.txt").read_text()
    copies = []
    for i in range(SIZE // len(real) + 1):
        copies.append(real.replace("example.com/calcproj", f"example.com/calcproj{i}"))
    return "".join(copies)


def best_ms(work: Callable[[], object]) -> float:
    """The best of a few rounds: a busy machine slows some rounds, not all."""
    timings = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings) * 1000


def decode_every_line(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.startswith("{") and json.loads(line))


def figures() -> list[Figure]:
    report = junit_report()
    found = read_junit(report)
    assert len(found.failing) == CASES // FAILING_EVERY, len(found.failing)
    etree_ms = best_ms(lambda: ET.fromstring(report))
    junit_ms = best_ms(lambda: read_junit(report))
    stream = go_json_stream()
    assert parse_test_output(stream).runner == "go"
    decode_ms = best_ms(lambda: decode_every_line(stream))
    go_ms = best_ms(lambda: parse_test_output(stream))
    return [
        Figure(f"JUnit report, {CASES:,} cases: {len(report) / 1e6:.1f} MB", junit_ms, "ms"),
        Figure("  baseline: ElementTree.fromstring", etree_ms, "ms", note="same run"),
        Figure("  read_junit / baseline", junit_ms / etree_ms, "x", note="lower is better"),
        Figure(f"go test -json stream: {len(stream) / 1e6:.0f} MB", go_ms, "ms"),
        Figure("  baseline: json.loads every line", decode_ms, "ms", note="same run"),
        Figure("  parse / baseline", go_ms / decode_ms, "x", note="lower is better"),
    ]


if __name__ == "__main__":
    print_table(figures())
