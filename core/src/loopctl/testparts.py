"""What every reader of test results fills in: ranked error lines, failing test ids, counts.

The readers of a runner's text output (:mod:`loopctl.testoutput`), of ``go test -json``
(:mod:`loopctl.gojson`) and of JUnit XML reports (:mod:`loopctl.junit`) each produce a
:class:`Partial`; :func:`bounded` turns its ranked lines into the few that are reported.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

#: Each reported line is cut to this many characters.
REPORTED_LINE_CHARS = 500
#: At most this many detail lines (diff lines, message continuations) per failure.
DETAIL_CAP = 10

# Ranks: when there are more lines than ``max_lines``, headlines are kept first, then locations,
# then details; the kept lines stay in output order.
HEADLINE, LOCATION, DETAIL = 0, 1, 2


@attrs.define
class Partial:
    """What one reader found: ranked lines, failing test ids, and counts where it saw them."""

    runner: str
    entries: list[tuple[int, str]] = attrs.Factory(list)
    failing: list[str] = attrs.Factory(list)
    passed: int | None = None
    failed: int | None = None

    def add(self, text: str, rank: int = HEADLINE) -> None:
        text = text.strip()
        if text:
            self.entries.append((rank, text[:REPORTED_LINE_CHARS]))

    def fail(self, test_id: str) -> None:
        test_id = test_id.strip()
        if test_id:
            self.failing.append(test_id[:REPORTED_LINE_CHARS])

    @property
    def useful(self) -> bool:
        return bool(self.entries or self.failing)


def has_word(text: str) -> bool:
    return any(char.isalnum() for char in text)


def bounded(entries: Iterable[tuple[int, str]], max_lines: int) -> list[str]:
    """Deduplicate in order, then keep at most ``max_lines``: best ranks first, output order."""
    best: dict[str, int] = {}
    order: list[str] = []
    for rank, text in entries:
        if text not in best:
            best[text] = rank
            order.append(text)
        elif rank < best[text]:
            best[text] = rank
    if max_lines <= 0:
        return []
    if len(order) <= max_lines:
        return order
    positions = sorted(range(len(order)), key=lambda i: (best[order[i]], i))[:max_lines]
    return [order[i] for i in sorted(positions)]


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def detect_go_json(text: str) -> bool:
    """Cheap check: does ``text`` hold ``go test -json`` events? (Here, not in
    :mod:`loopctl.gojson`, so that output without them never imports msgspec.)"""
    return '"Action":' in text and (
        '{"Time":' in text or '{"Action":' in text or '{"ImportPath":' in text
    )
