"""Regular expressions compiled when first used, not when their module is imported.

``re`` compiles in Python, about 0.1-2 ms a pattern. The redactor, the test-output extractor and
the plugins' rule sets hold hundreds of patterns, most of which a given text never needs (each
runs only where its literal occurs, or for the runner the output came from), and compiling them
all at import cost every one-shot command (``loopctl status``, ``loopctl classify``, ``loopctl
errors report``) 10-30 ms before it did any work. A :class:`LazyPattern` has the methods of a
compiled pattern and compiles on the first call; :class:`loopctl.ScanRule` holds its pattern as
one.

.. versionadded:: 0.2
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, AnyStr, Generic


class LazyPattern(Generic[AnyStr]):
    """``re.compile(source, flags)``, done on first use: ``search``, ``match``, ``fullmatch``,
    ``finditer``, ``findall``, ``sub`` and ``split`` work as on the compiled pattern, which
    :attr:`compiled` gives. A mistake in the pattern raises ``re.error`` there, not here. Equal
    to another LazyPattern (or to a compiled pattern) that compiles to an equal pattern."""

    __slots__ = ("_compiled", "flags", "pattern")

    def __init__(self, source: AnyStr, flags: int = 0) -> None:
        #: The source, as ``re.Pattern.pattern``.
        self.pattern: AnyStr = source
        #: The flags given (the compiled pattern's ``flags`` also hold the inline ones).
        self.flags = flags
        self._compiled: re.Pattern[AnyStr] | None = None

    @classmethod
    def of(cls, compiled: re.Pattern[AnyStr]) -> LazyPattern[AnyStr]:
        """A compiled pattern, as a LazyPattern (nothing left to compile)."""
        lazy = cls(compiled.pattern, compiled.flags)
        lazy._compiled = compiled
        return lazy

    @property
    def compiled(self) -> re.Pattern[AnyStr]:
        """The compiled pattern (compiled now, the first time)."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.pattern, self.flags)
        return compiled

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyPattern):
            other = other.compiled
        if not isinstance(other, re.Pattern):
            return NotImplemented
        return self.compiled == other

    def __hash__(self) -> int:
        return hash(self.pattern)

    def search(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[AnyStr] | None:
        return self.compiled.search(string, pos, endpos)

    def match(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[AnyStr] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[AnyStr] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def finditer(
        self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[AnyStr]]:
        return self.compiled.finditer(string, pos, endpos)

    def findall(self, string: AnyStr, pos: int = 0, endpos: int = sys.maxsize) -> list[Any]:
        return self.compiled.findall(string, pos, endpos)

    def sub(
        self, repl: AnyStr | Callable[[re.Match[AnyStr]], AnyStr], string: AnyStr, count: int = 0
    ) -> AnyStr:
        return self.compiled.sub(repl, string, count)

    def split(self, string: AnyStr, maxsplit: int = 0) -> list[AnyStr | Any]:
        return self.compiled.split(string, maxsplit)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"


def alternation(words: Iterable[str]) -> str:
    """The source of a pattern matching any one of ``words`` (at least one), factored by their
    common prefixes: where the text holds a word's first character, the regex engine tries only
    the words that start with it, not every word in turn (``a|b|c…`` of 200 words is several
    times slower). Where one word is a prefix of another, the longer one matches. For bytes,
    give the words decoded as latin-1 and encode the result the same way."""
    branches: dict[str, list[str]] = {}
    ends = False
    for word in sorted(set(words)):
        if word:
            branches.setdefault(word[0], []).append(word[1:])
        else:
            ends = True
    alternatives = [
        re.escape(head) + ("" if tails == [""] else alternation(tails))
        for head, tails in branches.items()
    ]
    if len(alternatives) == 1 and not ends:
        return alternatives[0]
    return "(?:" + "|".join(alternatives) + ")" + ("?" if ends else "")


def lazy_compile(source: AnyStr, flags: int = 0) -> LazyPattern[AnyStr]:
    """A pattern compiled on first use (:class:`LazyPattern`)."""
    return LazyPattern(source, flags)
