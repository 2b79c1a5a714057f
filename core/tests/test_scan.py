"""loopctl.scan: the literal prefilter only saves time, the caps hold, odd input never raises."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopctl
from loopctl import scan
from loopctl.scan import COMBINE_AFTER, ScanMatch, Scanner, ScanRule, strip_ansi

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

RULES = [
    ScanRule("oom", r"[Oo]ut of memory|MemoryError", ("memory", "Memory"), "memory"),
    ScanRule("refused", r"[Cc]onnection refused|ECONNREFUSED", ("efused", "REFUSED"), "network"),
    ScanRule("error", r"^(?:E\s+)?\w*Error: ", "Error: ", "error"),
    ScanRule("fail", r"\bFAIL(?:ED)?\b", "FAIL", "fail"),
]
LOWER_RULES = [
    # ASCII case variants only: a (?i) pattern would also match "TİMEOUT", whose lowercase
    # does not hold the literal, breaking the literals' contract
    ScanRule(
        "timeout",
        r"[Tt]ime ?[Oo]ut|[Tt]imed out|TIME ?OUT|TIMED OUT",
        ("timeout", "timed out", "time out"),
        "timeout",
    ),
    ScanRule("error", r"\b(?:[Ee]rror|ERROR)\b", "error", "error"),
    ScanRule("cause", r"^\s*(?:[Cc]aused by|CAUSED BY):", "caused by:", "cause"),
]
WORDS = [
    "Out of memory",
    "MemoryError",
    "Connection refused",
    "ECONNREFUSED",
    "TypeError: x",
    "FAILED",
    "FAIL",
    "timed out",
    "TimeOut",
    "ERROR",
    "Caused by: y",
    "é",
    "İ",
    "\r",
    "ok",
    " ",
]
lines = st.lists(
    st.one_of(st.sampled_from(WORDS), st.text(string.printable + "éİλ→\x1b", max_size=12)),
    max_size=8,
).map("".join)
texts = st.lists(lines, max_size=25).map("\n".join)


def _pairs(matches: list[ScanMatch[str]]) -> list[tuple[int, str, str]]:
    return [(m.offset, m.rule.name, m.line) for m in matches]


def test_the_public_names_are_exported_from_loopctl() -> None:
    assert loopctl.Scanner is Scanner
    assert loopctl.ScanRule is ScanRule
    assert loopctl.ScanMatch is ScanMatch
    assert loopctl.strip_ansi is strip_ansi
    assert {"Scanner", "ScanRule", "ScanMatch", "strip_ansi"} <= set(loopctl.__all__)


def test_first_gives_the_first_rule_in_order_with_its_tag() -> None:
    scanner = Scanner(RULES)
    found = scanner.first("FAILED: MemoryError: Out of memory")
    assert found is not None
    assert (found.rule.name, found.tag, found.match.group()) == ("oom", "memory", "MemoryError")
    assert scanner.first("all good") is None
    assert [m.rule.name for m in scanner.matches("E   MemoryError: boom FAILED")] == [
        "oom",
        "error",
        "fail",
    ]


def test_a_rule_runs_only_on_lines_holding_one_of_its_literals() -> None:
    # the pattern would match, but the line lacks the literal: the literals are a contract
    rule = ScanRule("x", r"boom", "BOOM", None)
    assert Scanner([rule]).first("boom") is None
    assert Scanner([rule], prefilter=False).first("boom") is not None


def test_rules_are_validated() -> None:
    with pytest.raises(ValueError, match="non-empty"):
        ScanRule("x", "x", (), None)
    with pytest.raises(ValueError, match="non-empty"):
        ScanRule("x", "x", ("a", ""), None)
    with pytest.raises(ValueError, match="lowercase"):
        Scanner([ScanRule("x", "x", "Upper", None)], ignore_case=True)
    assert ScanRule("x", "x", "one", None).literals == ("one",)
    assert ScanRule("x", re.compile("x"), ["a", "b"], None).literals == ("a", "b")


def test_search_reads_lines_in_output_order_with_their_offsets() -> None:
    text = "ok\nFAILED a\r\nfine\nConnection refused\n"
    found = list(Scanner(RULES).search(text))
    assert _pairs(found) == [(3, "fail", "FAILED a"), (18, "refused", "Connection refused")]
    assert text[found[1].offset :].startswith("Connection refused")


def test_search_ignoring_case_keeps_offsets_in_non_ascii_text() -> None:
    text = "λ ok\nİ TIMED OUT\nσ Error here\n"
    found = list(Scanner(LOWER_RULES, ignore_case=True).search(text))
    assert [m.rule.name for m in found] == ["timeout", "error"]
    for match in found:
        assert text[match.offset :].startswith(match.line)


def test_caps_on_candidate_lines() -> None:
    text = "".join(f"FAIL {i}\n" for i in range(1000))
    scanner = Scanner(RULES)
    assert len(list(scanner.search(text, max_lines=10))) == 10
    ends = [m.line for m in scanner.search(text, per_literal=3, from_end=True)]
    assert ends == ["FAIL 0", "FAIL 1", "FAIL 2", "FAIL 997", "FAIL 998", "FAIL 999"]
    assert len(list(scanner.search(text, per_literal=3))) == 3
    assert len(list(Scanner(RULES, prefilter=False).search(text, max_lines=7))) == 7


def test_lines_are_cut_and_normalized_before_anything_looks_at_them() -> None:
    scanner = Scanner(RULES, line_chars=20, normalize=lambda line: strip_ansi(line).strip())
    assert scanner.first("x" * 30 + " FAILED") is None
    found = scanner.first("  \x1b[31mFAILED\x1b[0m  ")
    assert found is not None
    assert found.line == "FAILED"
    assert strip_ansi("\x1b]0;title\x07a\x1b[1mb") == "ab"


def test_patterns_compile_when_a_line_first_needs_them() -> None:
    rules = [
        ScanRule("oom", r"[Oo]ut of memory", "memory", "memory"),
        ScanRule("fail", re.compile(r"\bFAIL\b"), "FAIL", "fail"),
        ScanRule("bad", r"(unclosed", "never", "bad"),  # broken: fails only once it runs
    ]
    scanner = Scanner(rules)
    assert isinstance(rules[0].pattern, loopctl.LazyPattern)
    assert rules[0].pattern._compiled is None
    assert scanner.first("nothing to see") is None
    assert rules[0].pattern._compiled is None  # no literal, no compile
    found = scanner.first("fatal: out of memory")
    assert found is not None
    assert found.tag == "memory"
    assert rules[0].pattern._compiled is not None
    assert scanner.first("FAIL here").tag == "fail"  # type: ignore[union-attr]
    with pytest.raises(re.error):
        scanner.first("never")
    # a string, a compiled pattern and a LazyPattern of the same source are the same rule
    same = [
        ScanRule("r", value, "x", None)
        for value in (r"x\d", re.compile(r"x\d"), loopctl.LazyPattern(r"x\d"))
    ]
    assert same[0] == same[1] == same[2]
    assert len({hash(rule) for rule in same}) == 1
    assert ScanRule("r", r"x\d", "x", None) != ScanRule("r", re.compile(r"x\d", re.I), "x", None)
    assert loopctl.LazyPattern(r"a(b)").sub(r"<\1>", "zab") == "z<b>"
    assert loopctl.LazyPattern(r"\d").findall("a1b2") == ["1", "2"]


def test_a_combining_scanner_compiles_its_alternation_after_enough_candidate_lines() -> None:
    scanner = Scanner(RULES, combine=True)
    for _ in range(COMBINE_AFTER):
        assert scanner.first("nothing") is None  # not a candidate line: not counted
        assert scanner.first("FAILED") is not None
    assert scanner._combined is None
    assert scanner.first("a FAIL line") is not None
    assert scanner._combined is not None
    assert scanner.first("no word break: FAILX") is None


@FAST
@given(text=texts)
def test_a_combining_scanner_finds_what_a_plain_one_finds_before_and_after_combining(
    text: str,
) -> None:
    lines = text.splitlines() * (COMBINE_AFTER // max(len(text.splitlines()), 1) + 2)
    for rules, ignore_case in ((RULES, False), (LOWER_RULES, True)):
        combining = Scanner(rules, ignore_case=ignore_case, combine=True)
        plain = Scanner(rules, ignore_case=ignore_case)
        for line in lines:
            got, want = combining.first(line), plain.first(line)
            assert (got and got.rule.name) == (want and want.rule.name)


def test_combined_prefilter_is_dropped_when_it_cannot_compile() -> None:
    assert Scanner(RULES, combine=True).combined is not None
    named = [ScanRule("a", r"(?P<x>a)", "a", None), ScanRule("b", r"(?P<x>b)", "b", None)]
    assert Scanner(named, combine=True).combined is None
    assert Scanner(RULES).combined is None


# --- properties: outside input -------------------------------------------------------------------


@FAST
@given(line=lines)
def test_the_prefilter_never_changes_a_lines_result(line: str) -> None:
    for rules, ignore_case in ((RULES, False), (LOWER_RULES, True)):
        fast = Scanner(rules, ignore_case=ignore_case, combine=True)
        slow = Scanner(rules, ignore_case=ignore_case, prefilter=False)
        quick, every = fast.first(line), slow.first(line)
        assert (quick and quick.rule.name) == (every and every.rule.name)
        assert [m.rule.name for m in fast.matches(line)] == [
            m.rule.name for m in slow.matches(line)
        ]


@FAST
@given(text=texts)
def test_the_prefilter_never_changes_a_texts_result(text: str) -> None:
    for rules, ignore_case in ((RULES, False), (LOWER_RULES, True)):
        fast = Scanner(rules, ignore_case=ignore_case)
        slow = Scanner(rules, ignore_case=ignore_case, prefilter=False)
        assert _pairs(list(fast.search(text))) == _pairs(list(slow.search(text)))
        assert _pairs(list(fast.search_lines(text.split("\n")))) == _pairs(
            list(slow.search_lines(text.split("\n")))
        )


@FAST
@given(
    text=texts,
    max_lines=st.integers(0, 6),
    per_literal=st.integers(0, 4),
    from_end=st.booleans(),
    line_chars=st.integers(1, 30),
)
def test_the_caps_are_never_exceeded(
    text: str, max_lines: int, per_literal: int, from_end: bool, line_chars: int
) -> None:
    for rules, ignore_case in ((RULES, False), (LOWER_RULES, True)):
        scanner = Scanner(rules, ignore_case=ignore_case, line_chars=line_chars)
        capped = list(scanner.search(text, max_lines=max_lines))
        assert len(capped) <= max_lines
        each = list(scanner.search(text, per_literal=per_literal, from_end=from_end))
        limit = per_literal * len(scanner.literals) * (2 if from_end else 1)
        assert len(each) <= limit
        offsets = [m.offset for m in each]
        assert offsets == sorted(set(offsets))
        for match in [*capped, *each]:
            assert len(match.line) <= line_chars
            assert "\n" not in match.line
            assert text[match.offset :].startswith(match.line)


#: Literals that overlap, nest and share prefixes: ``err`` starts ``error`` and ``errno``,
#: ``or`` ends ``error``, ``rno`` crosses ``errno``; enough of them for a literal gate.
GATE_WORDS = ["err", "error", "errno", "or", "rno", "no", "rro", "e.r", "Err", "x"] + [
    f"w{i}d" for i in range(20)
]
GATE_RULES = [
    ScanRule(f"r{i}", re.escape(word), (word,), word) for i, word in enumerate(GATE_WORDS)
] + [ScanRule("both", r"err.*no", ("err", "no"), "both")]


def _gated(rules: list[ScanRule[str]]) -> Scanner[str]:
    scanner = Scanner(rules)
    for _ in range(scan.GATE_AFTER + 1):
        scanner.first("nothing here")
    assert scanner._gate is not None
    return scanner


@FAST
@given(st.lists(st.sampled_from([*GATE_WORDS, "e", "r", "n", " ", "."]), max_size=40).map("".join))
def test_the_literal_gate_finds_every_rule_the_per_literal_test_finds(line: str) -> None:
    """A scanner with many literals finds a line's candidate rules with one pattern of them all:
    the same rules an ``in`` test per literal finds, overlapping and nested literals included,
    so ``first`` gives the same match before and after the gate is built."""
    gated, plain = _gated(GATE_RULES), Scanner(GATE_RULES)
    assert gated._gate is not None
    expected = {n for literal, ns in plain._by_literal if literal in line for n in ns}
    candidates = gated._gate.candidates(line)
    assert candidates is None or set(candidates) == expected
    found, wanted = gated.first(line), plain.first(line)
    assert (found and found.rule.name) == (wanted and wanted.rule.name)


def test_a_scanner_with_few_literals_builds_no_gate() -> None:
    few = Scanner(RULES)
    for _ in range(scan.GATE_AFTER + 1):
        few.first("nothing here")
    assert few._gate is None


#: Enough literals for a one-pass search (:data:`loopctl.scan.ONE_PASS_FROM`), overlapping and
#: nested as the gate's are; lowercase, for a scanner that ignores case.
ONE_PASS_WORDS = [w.lower() for w in GATE_WORDS] + [f"v{i}q" for i in range(scan.ONE_PASS_FROM)]
ONE_PASS_RULES = [
    ScanRule(f"r{i}", re.escape(word), (word,), word) for i, word in enumerate(ONE_PASS_WORDS)
] + [ScanRule("both", r"err.*no", ("err", "no"), "both")]
one_pass_texts = st.lists(
    st.lists(
        st.sampled_from([*ONE_PASS_WORDS[:12], "v3q", "V7Q", "e", "r", "n", " ", ".", "é", "\r"]),
        max_size=12,
    ).map("".join),
    max_size=30,
).map("\n".join)


@FAST
@given(
    text=one_pass_texts,
    max_lines=st.one_of(st.none(), st.integers(0, 8)),
    per_literal=st.one_of(st.none(), st.integers(0, 4)),
    from_end=st.booleans(),
    most=st.integers(0, 40),
)
def test_a_one_pass_search_finds_the_lines_the_finds_find(
    text: str, max_lines: int | None, per_literal: int | None, from_end: bool, most: int
) -> None:
    """With many literals a scanner finds the lines of a text that hold them in one pass: the
    same lines, caps included, as one ``str.find`` per literal (in str and in bytes, and when
    it falls back to the finds past its limit on lines)."""
    for ignore_case in (False, True):
        one_pass = Scanner(ONE_PASS_RULES, ignore_case=ignore_case)
        finds = Scanner(ONE_PASS_RULES, ignore_case=ignore_case)
        finds._one_pass = False
        assert one_pass._one_pass
        limits = {"max_lines": max_lines, "per_literal": per_literal, "from_end": from_end}
        original = scan.ONE_PASS_LINES, scan.ONE_PASS_AFTER
        try:
            scan.ONE_PASS_LINES, scan.ONE_PASS_AFTER = most, 0
            assert _pairs(list(one_pass.search(text, **limits))) == _pairs(
                list(finds.search(text, **limits))
            )
        finally:
            scan.ONE_PASS_LINES, scan.ONE_PASS_AFTER = original
    if max_lines is None and per_literal is None:
        slow = Scanner(ONE_PASS_RULES, prefilter=False)
        assert _pairs(list(Scanner(ONE_PASS_RULES).search(text))) == _pairs(list(slow.search(text)))


def test_a_scanner_with_few_literals_searches_literal_by_literal() -> None:
    assert not Scanner(GATE_RULES)._one_pass
    assert Scanner(ONE_PASS_RULES)._one_pass
    newline = ScanRule("newline", "a\nb", ("a\nb",), "newline")
    assert not Scanner([*ONE_PASS_RULES, newline])._one_pass
    assert not Scanner(ONE_PASS_RULES, prefilter=False)._one_pass


@pytest.mark.slow
def test_a_one_pass_pattern_is_compiled_only_once_the_texts_searched_are_long() -> None:
    scanner = Scanner(ONE_PASS_RULES)
    assert list(scanner.search("an errno here\n" * 100)) != []
    assert scanner._one_pass_str is None
    text = "quiet\n" * (scan.ONE_PASS_AFTER // 6) + "an errno here\n"
    found = list(scanner.search(text))
    assert scanner._one_pass_str is not None
    assert [m.offset for m in found] == [len(text) - len("an errno here\n")]
    assert _pairs(found) == _pairs(list(Scanner(ONE_PASS_RULES, prefilter=False).search(text)))
