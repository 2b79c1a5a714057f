"""Redacting: ``loopctl.redaction`` over test output, and over the small strings of one event.

Everything loopctl writes passes through the redactor (state files, journals, logs, the prompt),
so it must cost little next to the write itself. Inputs, 10 MB each, built from the real
captures in ``core/tests/data/test-output``:

- a ``pytest -v`` run: mostly PASSED lines with a few failures at the end (the common case);
- every runner's capture repeated: tracebacks, assertion diffs, ``KeyError`` and ``token``
  words that wake the assignment rules on every chunk;
- the same with a secret of every recognised kind planted every 200 lines.

Baseline, measured in the same run on the same text: one ``str.replace`` pass (``\\x00`` by
``""``), the least any pass over the text costs. The figure to watch is MB/s; the ratio to the
baseline is what to compare between machines. Then the cost per event: the strings of a
``tests.end`` event redacted one by one, as ``Engine.emit`` does.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

from loopctl import Redactor, redact
from loopctl.redaction import redact_data

CAPTURES = Path(__file__).parent.parent / "core" / "tests" / "data" / "test-output"
SIZE = 10_000_000
ROUNDS = 5
#: Redacting must go at least this fast on ordinary test output (MB/s): a loop writes about
#: 1 MB of test output per iteration (``limits.test_output_bytes``), so 20 MB/s is 50 ms.
TARGET_MB_S = 20.0

SECRETS = (
    "AKIAQWERTYUIOPASDFGH",
    "aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "ghp_" + "a1B2" * 9,
    "glpat-" + "x1Y2" * 5,
    "xoxb-" + "1234567890-" * 2 + "abcdefABCDEF",
    "sk_live_" + "q7W8" * 6,
    "AIza" + "Zx9_" * 8 + "abc",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3In0.c2lnbmF0dXJlMTIz",
    "https://deploy:pa55word@git.example.com/repo.git",
    "pypi-AgEIcHlwaS5vcmc" + "Ab1-" * 15,
    "SG." + "a1B2c3D4e5F6g7H8i9J0k1" + "." + "L2m3N4o5" * 5 + "abc",
    "SK" + "0123456789abcdef" * 2,
    "123456789:AAE" + "x7Y8" * 8 + "zz",
    "dapi" + "0123456789abcdef" * 2,
    "hf_" + "abcdefghijABCDEFGHIJabcdefghijABCD",
    "sk-ant-api03-" + "Q1w2" * 10,
    "Authorization: Bearer Zm9vYmFyMTIzNDU2",
    "DB_PASSWORD=hunter2hunter2",
)


def pytest_log() -> str:
    head, _, rest = (CAPTURES / "pytest_verbose_line.txt").read_text().partition("\n\n")
    passing = "".join(
        f"tests/test_mod_{i % 97}.py::test_case_{i} PASSED{' ' * 30}[ {i % 100:2d}%]\n"
        for i in range(1000)
    )
    return f"{head}\n{passing * (SIZE // len(passing) + 1)}\n{rest}"


def every_runner_log() -> str:
    captures = "".join(path.read_text() for path in sorted(CAPTURES.glob("*.txt")))
    return captures * (SIZE // len(captures) + 1)


def with_secrets(text: str) -> str:
    lines = text.splitlines(keepends=True)
    for index in range(0, len(lines), 200):
        lines[index] = f"leaked: {SECRETS[(index // 200) % len(SECRETS)]}\n"
    return "".join(lines)


def best_s(work: Callable[[], object]) -> float:
    """The best of a few rounds: a busy machine slows some rounds, not all."""
    timings = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def event_data() -> dict[str, object]:
    return {
        "command": "pytest -q tests/",
        "passed": False,
        "exit_code": 1,
        "timed_out": False,
        "failing": 3,
        "failing_tests": [f"tests/test_api.py::test_case_{i}" for i in range(20)],
        "error_count": 12,
        "runner": "pytest",
        "duration_s": 3.2,
    }


def figures() -> list[Figure]:
    rows: list[Figure] = []
    planted = with_secrets(every_runner_log())
    inputs = (
        ("pytest -v", pytest_log()),
        ("every runner", every_runner_log()),
        ("every runner + secrets", planted),
    )
    for label, text in inputs:
        megabytes = len(text) / 1e6
        baseline = best_s(lambda text=text: text.replace("\x00", ""))  # type: ignore[misc]
        measured = best_s(lambda text=text: redact(text))  # type: ignore[misc]
        speed = megabytes / measured
        rows += [
            Figure(
                f"redact, {label}: {megabytes:.0f} MB",
                speed,
                "MB/s",
                target=f">= {TARGET_MB_S:.0f} MB/s",
                ok=speed >= TARGET_MB_S,
            ),
            Figure(
                "  baseline: one str.replace pass", megabytes / baseline, "MB/s", note="same run"
            ),
            Figure("  redact / baseline", measured / baseline, "x", note="time; lower is better"),
        ]
    redacted = redact(planted)
    missed = [secret for secret in SECRETS if secret.split()[-1].split(":")[-1] in redacted]
    assert not missed, f"secrets left in clear: {missed}"
    assert redacted.count(Redactor.MARK) >= planted.count("leaked: "), (
        "a planted secret was not masked"
    )
    data = event_data()
    count = 20_000
    per_event = best_s(lambda: [redact_data(data) for _ in range(count)]) / count
    rows.append(Figure("redact one tests.end event's data", per_event * 1e6, "µs"))
    return rows


if __name__ == "__main__":
    print_table(figures())
