"""The needles a rule's pattern implies: lowercase literals of which every match contains one.

Read off the pattern's parse tree: a run of literal characters (``[Cc]`` counts as ``c``) in a
sequence must appear in every match of it; an alternation implies the union of what each of its
branches implies (when every branch implies something), a group or a repeat of at least once
what its body implies. Of the sets a sequence offers, the most selective is kept (the longest
shortest literal). The rules keep these in their source (parsing every pattern would cost each
run's start a few milliseconds): the tests check they are still what their patterns imply.
"""

from __future__ import annotations

from typing import Any

try:
    import re._constants as sc  # type: ignore[import-not-found,unused-ignore]
    import re._parser as sp  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # Python 3.10
    import sre_constants as sc  # type: ignore[no-redef,unused-ignore]
    import sre_parse as sp  # type: ignore[no-redef,unused-ignore]

#: Needles shorter than this are too common to be worth more than a rule's own.
MIN_NEEDLE = 4


def implied_needles(pattern: str, flags: int = 0) -> frozenset[str] | None:
    """What every match of ``pattern`` contains one of (lowercase), or None if nothing is
    implied."""
    found = _implied(list(sp.parse(pattern, flags)))
    return frozenset(found) if found else None


def better_needles(pattern: str, flags: int, needles: tuple[str, ...]) -> tuple[str, ...]:
    """The implied needles when they are more selective than ``needles``, else ``needles``."""
    implied = implied_needles(pattern, flags)
    if implied is None:
        return needles
    shortest = min(len(n) for n in implied)
    if shortest >= MIN_NEEDLE and shortest > min(len(n) for n in needles):
        return tuple(sorted(implied))
    return needles


def _char(op: Any, av: Any) -> str | None:
    """The lowercase ASCII character an item stands for, if it stands for exactly one."""
    if op is sc.LITERAL:
        return chr(av).lower() if av < 128 else None
    if op is sc.IN:
        chars = set()
        for item_op, item in av:
            if item_op is not sc.LITERAL or item >= 128:
                return None
            chars.add(chr(item).lower())
        return chars.pop() if len(chars) == 1 else None
    return None


def _implied(items: list[Any]) -> set[str] | None:
    offers: list[set[str]] = []
    run: list[str] = []
    for op, av in [*items, (None, None)]:
        char = _char(op, av) if op is not None else None
        if char is not None:
            run.append(char)
            continue
        if run:
            offers.append({"".join(run)})
            run = []
        inner: set[str] | None = None
        if op is sc.BRANCH:
            branches = [_implied(list(branch)) for branch in av[1]]
            if all(branches):
                inner = set().union(*branches)  # type: ignore[arg-type]
        elif op is sc.SUBPATTERN:
            inner = _implied(list(av[-1]))
        elif op in (sc.MAX_REPEAT, sc.MIN_REPEAT) and av[0] >= 1:
            inner = _implied(list(av[2]))
        if inner:
            offers.append(inner)
    if not offers:
        return None
    return max(offers, key=lambda offer: (min(len(n) for n in offer), -len(offer)))
