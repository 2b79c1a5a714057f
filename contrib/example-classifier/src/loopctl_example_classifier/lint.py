"""Recognise a failure that is only lint or formatting, not behaviour.

When a loop's test command includes a linter (``ruff check . && pytest``), a run can fail on an
unused import while every test passes. Calling that a code error sends the agent hunting for a
bug that is not there; the right move is to fix the reported rules (or let the linter fix them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import attrs

#: ``path:line:col: CODE message`` (ruff concise, flake8, pycodestyle, pylint's parseable form).
_RULE_LINE = re.compile(r"^\S+?:\d+:\d+: (?:[A-Z]{1,3}\d{2,4}|[CRWEF]\d{4})\b")
#: ruff's full format: ``F401 [*] `os` imported but unused`` headers.
_RUFF_HEADER = re.compile(r"^[A-Z]{1,3}\d{2,4} (?:\[\*\] )?\S")
_SUMMARIES = (
    re.compile(r"^Found \d+ errors?\b"),  # ruff check
    re.compile(r"^\d+ files? would be reformatted"),  # ruff format --check / black
    re.compile(r"^Would reformat: |^would reformat "),  # ruff format / black, per file
    re.compile(r"^✖ \d+ problems? \(\d+ errors?"),  # eslint
    re.compile(r"^Your code has been rated at "),  # pylint
)
#: Signs that tests ran and failed: then the failure is not (only) lint.
_TEST_FAILURE = re.compile(
    r"Traceback \(most recent call last\)|^FAILED |AssertionError|^FAIL: |^not ok \d|"
    r"^--- FAIL|test result: FAILED|^ERROR: test"
)
#: How much of the end of the output is read (a linter prints its verdict last).
TAIL_CHARS = 200_000


@attrs.frozen
class LintFinding:
    confidence: float
    lines: tuple[str, ...]
    linter: str


def find_lint_failure(output: str, error_lines: Sequence[str] = ()) -> LintFinding | None:
    """A :class:`LintFinding` when the failure is lint only, else None. Never raises."""
    text = output[-TAIL_CHARS:]
    lines = [line.rstrip() for line in text.splitlines()]
    if any(_TEST_FAILURE.search(line) for line in (*lines, *error_lines)):
        return None
    rules = [line for line in lines if _RULE_LINE.match(line) or _RUFF_HEADER.match(line)]
    summaries = [line for line in lines if any(p.match(line) for p in _SUMMARIES)]
    if not rules and not summaries:
        return None
    confidence = 0.9 if summaries else 0.75
    return LintFinding(confidence, tuple(_first(rules, 5) + _first(summaries, 2)), _linter(lines))


def _first(items: Iterable[str], count: int) -> list[str]:
    return list(items)[:count]


def _linter(lines: Sequence[str]) -> str:
    text = "\n".join(lines[-50:])
    if "fixable with" in text or "would be reformatted" in text:
        return "ruff"
    if "✖" in text:
        return "eslint"
    if "rated at" in text:
        return "pylint"
    return "a linter"
