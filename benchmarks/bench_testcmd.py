"""What running the test command through loopctl costs over running it plainly.

An instant command (prints a pytest-style failure line and exits 1) through
``loopctl.testcmd.run_test_command`` (own process group, bounded capture, the group ended
afterwards, the output parsed) against ``subprocess.run`` of the same ``/bin/sh -c`` command,
taken in turns in one run. The runner used to sleep up to 50 ms once the output had ended
instead of waiting for the process (issue 13: 51.4 ms against 1.3 ms).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

from loopctl.testcmd import run_test_command

COMMAND = "echo 'FAILED tests/test_calc.py::test_add - assert 1 == 2'; exit 1"
ROUNDS = 300


def figures() -> list[Figure]:
    plain: list[float] = []
    loopctl: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        for _ in range(ROUNDS):
            started = time.perf_counter()
            subprocess.run(["/bin/sh", "-c", COMMAND], cwd=cwd, capture_output=True, check=False)
            plain.append(time.perf_counter() - started)
            started = time.perf_counter()
            run_test_command(COMMAND, cwd=cwd, timeout_s=60)
            loopctl.append(time.perf_counter() - started)
    plain_ms, ours_ms = statistics.median(plain) * 1000, statistics.median(loopctl) * 1000
    mean_over = (statistics.fmean(loopctl) - statistics.fmean(plain)) * 1000
    return [
        Figure(
            "test command over subprocess.run (median)",
            ours_ms - plain_ms,
            "ms",
            "<= 2 ms",
            ours_ms - plain_ms <= 2,
        ),
        Figure(
            "test command over subprocess.run (mean)",
            mean_over,
            "ms",
            "<= 2 ms",
            mean_over <= 2,
        ),
        Figure("  run_test_command (median)", ours_ms, "ms", note=f"{ROUNDS} runs in turns"),
        Figure("  baseline: subprocess.run (median)", plain_ms, "ms", note="same run"),
    ]


if __name__ == "__main__":
    print_table(figures())
