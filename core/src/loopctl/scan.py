"""Find lines by rules, cheaply: a literal prefilter, then compiled patterns, with caps.

Logs can be many megabytes, and a regular expression run on every line of them is slow (a big
alternation is slower still: ``re`` tries every branch at every position). Each
:class:`ScanRule` therefore names a few *literals*, substrings that every line its pattern
matches must contain. A :class:`Scanner` runs a rule's pattern only on a line that holds one of
its literals, and over a whole text it looks for the literals with ``str.find`` (a fast C
search; with many literals, one search of a pattern of them all instead) and reads only the
lines around the hits. Lines are cut to ``line_chars`` before any
literal or pattern looks at them, and the caps on candidate lines keep a noisy literal cheap.

The prefilter only saves time: with ``prefilter=False`` a scanner runs every rule on every line
and gives the same matches (when the caps on candidate lines are not reached).

Test-output extraction, the failure classifier and the error categorizer all scan this way::

    from loopctl import ScanRule, Scanner

    scanner = Scanner([ScanRule("oom", r"[Oo]ut of memory", ("memory",), "MEMORY")],
                      ignore_case=True)
    found = scanner.first("fatal: Out of memory")   # ScanMatch; found.tag == "MEMORY"
    for hit in scanner.search(log_text, max_lines=5_000):
        ...

.. versionadded:: 0.1
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, NamedTuple, TypeVar

import attrs

from loopctl.lazyre import LazyPattern, alternation, lazy_compile

T = TypeVar("T")

#: Lines longer than this are cut before a rule looks at them (the decisive part comes early).
LINE_CHARS = 4096
#: A scanner with this many distinct literals or more finds a line's candidate rules with one
#: pattern of them all, once it has looked at GATE_AFTER lines with an ``in`` test per literal
#: (building the pattern costs a few milliseconds: more than a short text's lines save).
GATE_FROM = 24
GATE_AFTER = 64
#: Past this many literals found in one line, the ``in`` test per literal decides instead.
_MAX_GATE_HITS = 16
#: Candidate lines a ``combine=True`` scanner tries rule by rule before it compiles its
#: alternation (the results are the same either way; only the cost differs).
COMBINE_AFTER = 64
#: A scanner with this many distinct literals or more finds the lines of a whole text that hold
#: them in one pass of a pattern of them all (:meth:`Scanner.search`), not with one ``str.find``
#: per literal through the whole text (for the error categorizer's 270 causes: 20 ms on half a
#: megabyte where the finds take 45). Below it, the finds are faster.
ONE_PASS_FROM = 128
#: Past this many candidate lines, a one-pass search falls back to the finds (which stop at
#: the caps on candidate lines; one pass reads the whole text).
ONE_PASS_LINES = 1024
#: Characters a scanner searches literal by literal, in all, before it compiles that pattern
#: (about 18 ms for 270 literals: what one pass saves on some 400 KB of text; short texts
#: never need it).
ONE_PASS_AFTER = 256 * 1024

_ANSI = lazy_compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def strip_ansi(text: str) -> str:
    """``text`` without ANSI colour codes and terminal titles (cheap when it has none)."""
    return _ANSI.sub("", text) if "\x1b" in text else text


def _pattern(value: str | re.Pattern[str] | LazyPattern[str]) -> LazyPattern[str]:
    if isinstance(value, LazyPattern):
        return value
    return LazyPattern(value) if isinstance(value, str) else LazyPattern.of(value)


def _literals(value: str | Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _check_literals(rule: ScanRule[object], _attribute: object, value: tuple[str, ...]) -> None:
    if not value or not all(value):
        raise ValueError(f"rule {rule.name!r}: literals must be one or more non-empty strings")


@attrs.frozen
class ScanRule(Generic[T]):
    """One rule: ``pattern`` is searched in a line that contains one of ``literals``.

    Every line the pattern can match must contain at least one literal, or the scanner never
    shows it that line. ``tag`` is the caller's own data (a category, a handler, a richer rule
    object); the scanner hands it back with each match.
    """

    #: A name for messages and tests; the scanner does not require it to be unique.
    name: str
    #: Searched (``re.search``, not ``match``) in one line. Given as a string, a compiled
    #: pattern or a :class:`~loopctl.LazyPattern`; held as a LazyPattern, so a string is
    #: compiled when the rule first runs (a scanner runs only the rules whose literals occur).
    pattern: LazyPattern[str] = attrs.field(converter=_pattern)
    #: Substrings of which a line must contain one before ``pattern`` runs on it; a single
    #: string is one literal. Lowercase when the scanner ignores case.
    literals: tuple[str, ...] = attrs.field(converter=_literals, validator=_check_literals)
    #: The caller's data, returned with each match (``ScanMatch.tag``).
    tag: T


@attrs.frozen
class ScanMatch(Generic[T]):
    """A line where a rule's pattern matched."""

    #: The rule that matched (the first in order, on this line).
    rule: ScanRule[T]
    #: The line as the pattern saw it: cut to the scanner's ``line_chars``, normalized.
    line: str
    #: The pattern's match in ``line``.
    match: re.Match[str]
    #: Where the line starts in the searched text (:meth:`Scanner.search`), or its index in the
    #: sequence given to :meth:`Scanner.search_lines`.
    offset: int = 0

    @property
    def tag(self) -> T:
        """The matching rule's ``tag``."""
        return self.rule.tag


class Scanner(Generic[T]):
    """Rules in order, ready to be tried on lines or searched for in a whole text.

    :param rules: tried in this order; on each line the first that matches wins.
    :param line_chars: lines are cut to this many characters before anything looks at them.
    :param ignore_case: the literals are lowercase and are looked for in the lowercased line
        (the patterns keep their own flags).
    :param prefilter: False runs every rule on every line; only for tests that check the
        literals change nothing but speed.
    :param combine: also join every pattern into one alternation that rejects most lines at C
        speed before the rules are tried one by one. Worth it for many rules whose literals are
        common words; skipped (``combined`` is None) when the patterns' flags differ or the
        alternation does not compile (repeated group names). It is compiled once the scanner
        has tried :data:`COMBINE_AFTER` candidate lines rule by rule: compiling a big
        alternation costs more than a short text's few lines save.
    :param normalize: applied to each line after the cut, before literals and patterns see
        it (:func:`strip_ansi`, ``str.strip`` …).
    :raises ValueError: when ``ignore_case`` is set and a literal is not lowercase.
    """

    def __init__(
        self,
        rules: Iterable[ScanRule[T]],
        *,
        line_chars: int = LINE_CHARS,
        ignore_case: bool = False,
        prefilter: bool = True,
        combine: bool = False,
        normalize: Callable[[str], str] | None = None,
    ) -> None:
        #: The rules, in the order they are tried.
        self.rules: tuple[ScanRule[T], ...] = tuple(rules)
        #: Lines are cut to this many characters.
        self.line_chars = line_chars
        #: Whether literals are looked for in lowercased text.
        self.ignore_case = ignore_case
        #: Whether the literals (and ``combined``) are used at all.
        self.prefilter = prefilter
        #: Applied to each (cut) line before anything looks at it.
        self.normalize = normalize
        if ignore_case:
            upper = sorted({lit for r in self.rules for lit in r.literals if lit != lit.lower()})
            if upper:
                raise ValueError(f"literals must be lowercase when ignoring case: {upper}")
        #: Every distinct literal, in the order the rules first name them.
        self.literals: tuple[str, ...] = tuple(
            dict.fromkeys(lit for rule in self.rules for lit in rule.literals)
        )
        self._combine = combine
        self._combined: re.Pattern[str] | None = None
        self._tried_lines = 0  # candidate lines tried rule by rule (before the alternation)
        # literal -> the indexes of the rules that name it: a line's candidate rules come from
        # one `in` test per distinct literal.
        index: dict[str, list[int]] = {}
        for number, rule in enumerate(self.rules):
            for literal in rule.literals:
                index.setdefault(literal, []).append(number)
        self._by_literal = tuple((literal, tuple(numbers)) for literal, numbers in index.items())
        #: Lines :meth:`first` may still look at before it builds its literal gate (None: it
        #: never does, having few literals).
        self._gate_after: int | None = GATE_AFTER if len(index) >= GATE_FROM else None
        self._gate: _Gate | None = None
        # One pass over a text for every literal (:class:`_OnePass`), built on first use:
        # only with many literals, none holding a line end.
        self._one_pass = (
            prefilter
            and len(index) >= ONE_PASS_FROM
            and not any("\n" in literal for literal in index)
        )
        self._one_pass_str: _OnePass[str] | None = None
        self._one_pass_bytes: _OnePass[bytes] | None = None
        self._searched = 0  # characters of the texts searched (counted while _one_pass)

    def __repr__(self) -> str:
        return f"<Scanner {len(self.rules)} rules, {len(self.literals)} literals>"

    @property
    def combined(self) -> re.Pattern[str] | None:
        """One alternation of every pattern (``combine=True``), else None; compiled on first
        use."""
        if self._combine and self._combined is None:
            self._combined = _combine(self.rules)
            self._combine = self._combined is not None
        return self._combined

    def first(self, line: str) -> ScanMatch[T] | None:
        """The first rule, in order, that matches ``line``; None when none does."""
        # The hot path of every scan: one `in` test per distinct literal, no other call.
        if len(line) > self.line_chars:
            line = line[: self.line_chars]
        if self.normalize is not None:
            line = self.normalize(line)
        if not self.prefilter:
            return self._every_rule(line)
        haystack = line.lower() if self.ignore_case else line
        gate = self._gate
        if gate is None and self._gate_after is not None:
            self._gate_after -= 1
            if self._gate_after < 0:
                gate = self._gate = _Gate(self._by_literal)
        candidates = gate.candidates(haystack) if gate is not None else None
        if candidates is None:
            candidates = ()
            for literal, numbers in self._by_literal:  # a plain loop: cheaper than a comprehension
                if literal in haystack:
                    candidates += numbers
        if not candidates:
            return None
        if self._combine:
            if self._tried_lines < COMBINE_AFTER:
                self._tried_lines += 1
            elif (combined := self.combined) is not None and combined.search(line) is None:
                return None
        if len(candidates) > 1:
            candidates = tuple(sorted(set(candidates)))
        rules = self.rules
        for number in candidates:
            rule = rules[number]
            found = rule.pattern.search(line)
            if found is not None:
                return ScanMatch(rule, line, found)
        return None

    def _every_rule(self, line: str) -> ScanMatch[T] | None:
        for rule in self.rules:
            found = rule.pattern.search(line)
            if found is not None:
                return ScanMatch(rule, line, found)
        return None

    def matches(self, line: str) -> list[ScanMatch[T]]:
        """Every rule, in order, that matches ``line``."""
        text = line[: self.line_chars]
        if self.normalize is not None:
            text = self.normalize(text)
        if self.prefilter:
            haystack = text.lower() if self.ignore_case else text
            numbers = sorted({n for lit, ns in self._by_literal if lit in haystack for n in ns})
            rules = [self.rules[number] for number in numbers]
        else:
            rules = list(self.rules)
        found = ((rule, rule.pattern.search(text)) for rule in rules)
        return [ScanMatch(rule, text, match) for rule, match in found if match is not None]

    def search_lines(self, lines: Iterable[str]) -> Iterator[ScanMatch[T]]:
        """The first match on each of ``lines`` that has one, in order (``offset`` is the
        line's index)."""
        first = self.first
        for index, line in enumerate(lines):
            found = first(line)
            if found is not None:
                yield found if index == 0 else attrs.evolve(found, offset=index)

    def search(
        self,
        text: str,
        *,
        max_lines: int | None = None,
        per_literal: int | None = None,
        from_end: bool = False,
    ) -> Iterator[ScanMatch[T]]:
        """The first match on each line of ``text`` that has one, in output order.

        Only lines holding a literal are read (every line with ``prefilter=False``), and only so
        many of them:

        :param max_lines: at most this many candidate lines in all (the literals are looked
            for in order; the lines of the first ones are kept).
        :param per_literal: at most this many lines per literal from the start of ``text``.
        :param from_end: with ``per_literal``: when the start already had that many lines for
            a literal, also up to that many from the end backwards (the decisive lines of a
            log are at its start or its end).

        ``offset`` is where the line starts in ``text``. A literal split by a line end, or
        by colour codes that ``normalize`` removes, is not found.
        """
        if not text:
            return
        limits = _Limits(max_lines, per_literal, from_end)
        if not self.prefilter:
            yield from self._search_every_line(text, limits)
        elif not self.ignore_case or text.isascii():
            yield from self._search_str(text, limits)
        else:
            yield from self._search_bytes(text, limits)

    def _in_one_pass(self, size: int) -> bool:
        """Whether to search a text of ``size`` characters in one pass: once the texts searched
        come to :data:`ONE_PASS_AFTER` characters, this one included."""
        if not self._one_pass:
            return False
        self._searched += size
        return self._searched >= ONE_PASS_AFTER

    def _search_str(self, text: str, limits: _Limits) -> Iterator[ScanMatch[T]]:
        haystack = text.lower() if self.ignore_case else text
        one_pass = None
        if self._in_one_pass(len(haystack)):
            if self._one_pass_str is None:
                self._one_pass_str = _OnePass(self.literals, alternation(self.literals))
            one_pass = self._one_pass_str
        spans = _spans(haystack, self.literals, "\n", limits, one_pass)
        width = self.line_chars
        for begin in sorted(spans):
            line = text[begin : min(spans[begin], begin + width)]
            found = self._line_match(line, begin)
            if found is not None:
                yield found

    def _search_bytes(self, text: str, limits: _Limits) -> Iterator[ScanMatch[T]]:
        """Case-insensitive search in non-ASCII text: ``bytes.lower`` keeps byte offsets (it
        only folds ASCII, as the literals are), where ``str.lower`` may change the length and
        is slower."""
        data = text.encode("utf-8", "surrogatepass")
        literals = tuple(literal.encode("utf-8") for literal in self.literals)
        one_pass = None
        if self._in_one_pass(len(data)):
            if self._one_pass_bytes is None:
                words = [literal.decode("latin-1") for literal in literals]
                source = alternation(words).encode("latin-1")
                self._one_pass_bytes = _OnePass(literals, source)
            one_pass = self._one_pass_bytes
        spans = _spans(data.lower(), literals, b"\n", limits, one_pass)
        width = self.line_chars
        byte_at, char_at = 0, 0
        for begin in sorted(spans):
            char_at += len(data[byte_at:begin].decode("utf-8", "surrogatepass"))
            byte_at = begin
            raw = data[begin : min(spans[begin], begin + width * 4)]
            line = raw.decode("utf-8", "replace")[:width]
            found = self._line_match(line, char_at)
            if found is not None:
                yield found

    def _search_every_line(self, text: str, limits: _Limits) -> Iterator[ScanMatch[T]]:
        begin, count = 0, 0
        while begin < len(text) and (limits.max_lines is None or count < limits.max_lines):
            end = text.find("\n", begin)
            if end == -1:
                end = len(text)
            found = self._line_match(text[begin : min(end, begin + self.line_chars)], begin)
            if found is not None:
                yield found
            begin, count = end + 1, count + 1

    def _line_match(self, line: str, offset: int) -> ScanMatch[T] | None:
        found = self.first(line[:-1] if line.endswith("\r") else line)
        return found if found is None or offset == 0 else attrs.evolve(found, offset=offset)


class _Gate:
    """Every literal of a scanner in one pattern (:func:`~loopctl.lazyre.alternation`): the
    rules a line may match come from a search or two, not from an ``in`` test per literal
    (270 of them for the error categorizer's causes)."""

    def __init__(self, by_literal: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
        numbers = dict(by_literal)
        self.pattern = re.compile(alternation(numbers))
        #: Each literal the pattern can match -> the rules of it and of the literals it starts
        #: with (where a literal is a prefix of another, the pattern matches the longer one).
        self.runs = {
            literal: tuple(
                number
                for end in range(1, len(literal) + 1)
                for number in numbers.get(literal[:end], ())
            )
            for literal in numbers
        }

    def candidates(self, haystack: str) -> tuple[int, ...] | None:
        """The rules whose literals ``haystack`` holds (None: more hits than it is worth)."""
        search = self.pattern.search
        runs = self.runs
        found = search(haystack)
        candidates: tuple[int, ...] = ()
        hits = 0
        while found is not None:
            hits += 1
            if hits > _MAX_GATE_HITS:
                return None
            candidates += runs[found.group()]
            found = search(haystack, found.start() + 1)  # literals may overlap
        return candidates


class _Limits(NamedTuple):
    """How many lines a search yields (a NamedTuple: an attrs class costs every command that
    scans a log, ``loopctl classify`` among them, about 0.5 ms to define)."""

    max_lines: int | None
    per_literal: int | None
    from_end: bool


S = TypeVar("S", str, bytes)


class _OnePass(Generic[S]):
    """Every literal of a scanner in one pattern, to find the lines of a whole text that hold
    them in one pass, with the literals each line holds (none of the literals holds a line
    end)."""

    def __init__(self, literals: tuple[S, ...], source: S) -> None:
        self.pattern: re.Pattern[S] = re.compile(source)
        number = {literal: index for index, literal in enumerate(literals)}
        #: Each literal the pattern can match -> its number and those of the literals it starts
        #: with (where a literal is a prefix of another, the pattern matches the longer one).
        self.runs: dict[S, tuple[int, ...]] = {
            literal: tuple(
                number[literal[:end]]
                for end in range(1, len(literal) + 1)
                if literal[:end] in number
            )
            for literal in literals
        }

    def lines(
        self, haystack: S, newline: S, most: int
    ) -> list[tuple[int, int, tuple[int, ...]]] | None:
        """(start, end, numbers of the literals it holds) of each line of ``haystack`` that
        holds a literal, in order; None when there are more than ``most`` such lines."""
        search = self.pattern.search
        runs = self.runs
        size = len(haystack)
        found: list[tuple[int, int, tuple[int, ...]]] = []
        hit = search(haystack)
        while hit is not None:
            if len(found) >= most:
                return None
            position = hit.start()
            begin = haystack.rfind(newline, 0, position) + 1
            end = haystack.find(newline, position)
            if end == -1:
                end = size
            numbers = runs[hit.group()]
            more = search(haystack, position + 1, end)  # literals may overlap
            while more is not None:
                numbers += runs[more.group()]
                more = search(haystack, more.start() + 1, end)
            found.append((begin, end, numbers))
            hit = search(haystack, end)
        return found


def _spans(
    haystack: S,
    literals: tuple[S, ...],
    newline: S,
    limits: _Limits,
    one_pass: _OnePass[S] | None = None,
) -> dict[int, int]:
    """Line start -> line end for the lines of ``haystack`` that hold a literal, within the
    limits: the lines of each literal in turn, from the start (and the end) of ``haystack``,
    until the caps are reached. ``one_pass`` finds the lines of all the literals at once
    (the same spans), unless they are too many."""
    if one_pass is not None:
        found = one_pass.lines(haystack, newline, ONE_PASS_LINES)
        if found is not None:
            return _spans_of_lines(found, len(literals), limits)
    spans: dict[int, int] = {}
    total = limits.max_lines
    each = limits.per_literal
    size = len(haystack)
    for literal in literals:
        if total is not None and len(spans) >= total:
            break
        position = haystack.find(literal)
        count = 0
        starts: set[int] = set()
        while position != -1:
            if (each is not None and count >= each) or (total is not None and len(spans) >= total):
                break
            begin = haystack.rfind(newline, 0, position) + 1
            end = haystack.find(newline, position)
            if end == -1:
                end = size
            spans[begin] = end
            starts.add(begin)
            count += 1
            position = haystack.find(literal, end)
        if position == -1 or each is None or not limits.from_end or count < each:
            continue
        position, count = haystack.rfind(literal), 0  # a noisy literal: its last lines too
        while position != -1 and count < each:
            if total is not None and len(spans) >= total:
                break
            begin = haystack.rfind(newline, 0, position) + 1
            if begin in starts:
                break
            end = haystack.find(newline, position)
            spans[begin] = size if end == -1 else end
            count += 1
            position = haystack.rfind(literal, 0, begin)
    return spans


def _spans_of_lines(
    lines: list[tuple[int, int, tuple[int, ...]]], count: int, limits: _Limits
) -> dict[int, int]:
    """:func:`_spans` from the lines that hold each literal: the same steps as the finds."""
    by_literal: list[list[int]] = [[] for _ in range(count)]
    for line, (_begin, _end, numbers) in enumerate(lines):
        for number in set(numbers) if len(numbers) > 1 else numbers:
            by_literal[number].append(line)
    spans: dict[int, int] = {}
    total = limits.max_lines
    each = limits.per_literal
    for mine in by_literal:
        if total is not None and len(spans) >= total:
            break
        taken = 0
        starts: set[int] = set()
        for line in mine:
            if (each is not None and taken >= each) or (total is not None and len(spans) >= total):
                break
            begin, end, _numbers = lines[line]
            spans[begin] = end
            starts.add(begin)
            taken += 1
        else:
            continue  # every line of the literal taken (the finds reached the end)
        if each is None or not limits.from_end or taken < each:
            continue
        for back, line in enumerate(reversed(mine)):  # a noisy literal: its last lines too
            if back >= each or (total is not None and len(spans) >= total):
                break
            begin, end, _numbers = lines[line]
            if begin in starts:
                break
            spans[begin] = end
    return spans


def _combine(rules: tuple[ScanRule[T], ...]) -> re.Pattern[str] | None:
    """One alternation of the rules' patterns (None when their flags differ or it will not
    compile)."""
    flags = {rule.pattern.flags & ~re.UNICODE for rule in rules}  # implied for str patterns
    if not rules or len(flags) != 1:
        return None
    try:
        joined = "|".join(f"(?:{rule.pattern.pattern})" for rule in rules)
        return re.compile(joined, flags.pop())
    except re.error:
        return None


__all__ = [
    "COMBINE_AFTER",
    "LINE_CHARS",
    "LazyPattern",
    "ScanMatch",
    "ScanRule",
    "Scanner",
    "strip_ansi",
]
