"""Failed approaches: what each failed iteration changed, and how the tests ended after it.

A fresh agent must be told *how* the loop failed before, or it retries the dead end. After every
iteration whose tests fail (infrastructure failures aside), the engine notes one entry per
distinct approach in ``loop.failed_approaches``:

* an iteration that changed files starts an entry: which iteration, which files, the change
  itself (the ``-``/``+`` lines of its diff against the iteration's start, capped) and the
  failure after it. When the diff cannot be told exactly (no git, HEAD moved, a file already
  changed before the iteration), the agent's own words (the last line it said) stand in for it.
  The diff is preferred: a few lines say exactly what was tried, where the agent's report is
  longer, repeats the failure, and may be wrong about what it did;
* an iteration that changed nothing and failed the same way as the iteration before it is added
  to that iteration's entry ("iterations 2-3 changed nothing"), updated in place; one that
  starts a streak of its own gets an entry with the agent's words (why it changed nothing);
* an iteration that made the same change as an earlier entry (the same diff) updates that entry;
* an iteration that made progress (fewer failing tests than the one before; for the first
  turn, than the tests run before it, ``test_first``) is no failed approach and gets no entry.

Everything an entry quotes is redacted.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from loopctl.model import IterationRecord
from loopctl.redaction import redact
from loopctl.stuck import same_failure

#: The most changed lines an entry quotes, and their characters.
MAX_DIFF_LINES = 12
MAX_DIFF_CHARS = 900
MAX_LINE_CHARS = 160
#: The agent's words: the last line it said in its turn, at most this long.
MAX_WORDS_CHARS = 200
MAX_FAILURE_CHARS = 300
MAX_FILES_NAMED = 5

#: ``iteration 3`` / ``iterations 2-5`` in a failed approach's text (masked to compare texts).
_ITERATION_REFS = re.compile(r"\biterations? \d+(?:\s*-\s*\d+)?(?:(?:,| and) \d+(?:-\d+)?)*")


def bullet(text: str) -> str:
    """A failed approach as a markdown list item, the lines after the first (its diff)
    indented under it."""
    return "- " + text.replace("\n", "\n  ")


def same_approach(a: str, b: str) -> bool:
    """Whether two failed approaches say the same thing but for the iterations they name:
    a producer's growing line (``iterations 1-3 …``, then ``iterations 1-4 …``) is one entry."""
    return _masked(a) == _masked(b)


def _masked(text: str) -> str:
    return " ".join(_ITERATION_REFS.sub("iterations #", text).split()).lower()


@attrs.define
class Approach:
    """One distinct approach: a change (or none), the iterations behind it, the failure after."""

    failure: str
    files: list[str] = attrs.Factory(list)
    diff: str = ""
    words: str = ""
    #: Iterations that made this change.
    changed: list[int] = attrs.Factory(list)
    #: Iterations that changed nothing and failed the same way.
    idle: list[int] = attrs.Factory(list)

    @property
    def last(self) -> int:
        return max(self.changed + self.idle)

    def text(self) -> str:
        parts = []
        if self.changed:
            files = ", ".join(self.files[:MAX_FILES_NAMED])
            more = len(self.files) - MAX_FILES_NAMED
            parts.append(
                f"{iterations(self.changed)} changed {files}"
                + (f" and {more} more" if more > 0 else "")
            )
        if self.idle:
            parts.append(f"{iterations(self.idle)} changed nothing")
        head = "; ".join(parts)
        if self.words:
            head += f" (the agent said: {self.words})"
        each = " each time" if len(self.changed) + len(self.idle) > 1 else ""
        head += f"; the tests still failed{each} with: {self.failure}"
        return head + (f"\n{self.diff}" if self.diff else "")


def iterations(numbers: Sequence[int]) -> str:
    """``iteration 3``, ``iterations 2-4``, ``iterations 1, 3-4``."""
    ordered = sorted(set(numbers))
    spans: list[str] = []
    start = prev = ordered[0]
    for number in [*ordered[1:], None]:
        if number is not None and number == prev + 1:
            prev = number
            continue
        spans.append(str(start) if start == prev else f"{start}-{prev}")
        if number is not None:
            start = prev = number
    return ("iteration " if len(ordered) == 1 else "iterations ") + ", ".join(spans)


def capped_diff(diff: str) -> str:
    """The changed lines, at most :data:`MAX_DIFF_LINES` of at most :data:`MAX_LINE_CHARS`
    characters (and :data:`MAX_DIFF_CHARS` in all), indented, redacted."""
    lines = [
        line if len(line) <= MAX_LINE_CHARS else line[: MAX_LINE_CHARS - 1] + "…"
        for line in redact(diff).splitlines()
    ]
    kept: list[str] = []
    size = 0
    for line in lines[:MAX_DIFF_LINES]:
        if size + len(line) > MAX_DIFF_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    if len(kept) < len(lines):
        kept.append(f"… and {len(lines) - len(kept)} more changed lines")
    return "\n".join(f"    {line}" for line in kept)


def last_words(final_text: str) -> str:
    """The agent's conclusion: the last line of what it said in its turn (the adapters join
    the turn's messages, so its first line is often "Let me run the tests"), redacted, at most
    :data:`MAX_WORDS_CHARS`."""
    line = next((part.strip() for part in reversed(final_text.splitlines()) if part.strip()), "")
    line = redact(line)
    return line if len(line) <= MAX_WORDS_CHARS else line[: MAX_WORDS_CHARS - 1] + "…"


@attrs.define
class ApproachBook:
    """The engine's entries in the failed approaches, each with the text it has in the list."""

    entries: list[tuple[Approach, str]] = attrs.Factory(list)

    def note(
        self,
        record: IterationRecord,
        previous: IterationRecord | None,
        *,
        failure: str,
        diff: str,
        final_text: str,
    ) -> tuple[str | None, str] | None:
        """Take in a failed iteration (``previous``: the last one counted before it); return
        ``(old text or None, new text)`` for the list, or None when it is no failed approach."""
        failure = redact(failure)[:MAX_FAILURE_CHARS]
        counted_before = previous is not None and not previous.tests_passed
        if record.changed_files:
            if (
                previous is not None
                and counted_before
                and len(record.failing_tests) < len(previous.failing_tests)
            ):
                return None  # progress: no dead end
            diff = capped_diff(diff) if diff else ""
            words = "" if diff else last_words(final_text)
            found = next((e for e, _ in self.entries if diff and e.diff == diff), None)
            if found is not None:
                found.changed.append(record.iteration)
                found.failure = failure
                return self._put(found)
            approach = Approach(failure, list(record.changed_files), diff, words)
            approach.changed.append(record.iteration)
            return self._put(approach)
        last = self.entries[-1][0] if self.entries else None
        if (
            last is not None
            and previous is not None
            and counted_before
            and previous.iteration == last.last
            and same_failure(previous, record)
        ):
            last.idle.append(record.iteration)
            return self._put(last)
        approach = Approach(failure, words=last_words(final_text))
        approach.idle.append(record.iteration)
        return self._put(approach)

    def _put(self, approach: Approach) -> tuple[str | None, str]:
        text = approach.text()
        for index, (entry, old) in enumerate(self.entries):
            if entry is approach:
                self.entries[index] = (approach, text)
                return old, text
        self.entries.append((approach, text))
        return None, text
