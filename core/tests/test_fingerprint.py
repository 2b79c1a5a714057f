from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.fingerprints import fingerprint, normalize_line


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("tests/test_calc.py:7: AssertionError", "<PATH>/test_calc.py:<N>: AssertionError"),
        (
            "/tmp/pytest-of-root/pytest-12/test_x0/tests/test_calc.py:7: assert 5 == 4",
            "<PATH>/test_calc.py:<N>: assert <N> == <N>",
        ),
        (
            r"C:\Users\dev\proj\tests\test_calc.py:12: error",
            "<PATH>/test_calc.py:<N>: error",
        ),
        (
            "self = <tests.test_strings.TestWords object at 0x7fd4e3bbf750>",
            "self = <tests.test_strings.TestWords object at <HEX>>",
        ),
        ("2024-05-01T12:03:04.123Z ERROR boom", "<TIME> ERROR boom"),
        ("Tue, 01 May 2024 12:03:04 +0000 request failed", "<TIME> request failed"),
        ("May  1 12:03:04 host kernel: oops", "<TIME> host kernel: oops"),
        ("at 12:03:04,567 retrying", "at <TIME> retrying"),
        ("commit 3f2a9c1d4e5b6a7c8d9e0f1a2b3c4d5e6f7a8b9c broke it", "commit <HEX> broke it"),
        ("id 123e4567-e89b-12d3-a456-426614174000 missing", "id <HEX> missing"),
        ("connect to 127.0.0.1:5432 refused", "connect to <HOST>:<N> refused"),
        (
            "GET http://api.example.com:8080/v1/items failed",
            "GET http://<HOST>:<PATH>/items failed",
        ),
        ("see /var/log/2024-01-02/0x1f/a1b2c3d4e5/run.log", "see <PATH>/run.log"),
        ("cannot reach localhost or db.internal", "cannot reach <HOST> or <HOST>"),
        ("5 failed, 2 passed in 0.07s", "<N> failed, <N> passed in <N>"),
        ("  many\t  spaces   here ", "many spaces here"),
        ("\x1b[31mred\x1b[0m text", "red text"),
        # identifiers, error codes and versions are not numbers
        (
            "error[E0308]: mismatched types in test_2 on x86_64",
            "error[E0308]: mismatched types in test_2 on x86_64",
        ),
        ("calc.ts(2,3): error TS2322: bad", "calc.ts(<N>,<N>): error TS2322: bad"),
    ],
)
def test_normalize_line_examples(line: str, expected: str) -> None:
    assert normalize_line(line) == expected


def test_fingerprint_is_16_hex_chars_and_empty_for_nothing() -> None:
    assert re.fullmatch(r"[0-9a-f]{16}", fingerprint(["AssertionError: boom"]))
    assert fingerprint([]) == ""
    assert fingerprint(["", "   ", "\t"]) == ""


def test_fingerprint_dedupes_but_keeps_order() -> None:
    assert fingerprint(["a failed", "a failed", "b failed"]) == fingerprint(
        ["a failed", "b failed"]
    )
    assert fingerprint(["a failed", "b failed"]) != fingerprint(["b failed", "a failed"])
    # lines that normalise equal count once
    assert fingerprint(["x at line 3", "x at line 4"]) == fingerprint(["x at line 9"])


def test_same_error_in_two_runs_matches_and_other_files_differ() -> None:
    run_1 = [
        "/tmp/tmpa1b2c3/proj/tests/test_calc.py:7: assert 5 == 4",
        "self = <Calc object at 0x7f00aa11>",
        "FAILED tests/test_calc.py::test_add - assert 5 == 4 (2024-05-01 10:00:00)",
    ]
    run_2 = [
        "/home/ci/work/proj/tests/test_calc.py:9: assert 6 == 4",
        "self = <Calc object at 0x55dd0012ff>",
        "FAILED tests/test_calc.py::test_add - assert 6 == 4 (2024-06-02 11:30:01)",
    ]
    assert fingerprint(run_1) == fingerprint(run_2)
    other_file = [run_1[0].replace("test_calc.py", "test_io.py"), *run_1[1:]]
    assert fingerprint(other_file) != fingerprint(run_1)


# --- properties ---------------------------------------------------------------------------------

_TRICKY = [
    *"0123456789abcdefxXT:./\\-_ <>Z+@~%[](),'\"\t\n\x00\x1bµ",
    "\x1b[31m",
    "localhost",
    "::1",
    "0x",
    ".com",
    "C:\\",
    "http://",
    "2024-01-02",
    "12:34:56",
    "<N>",
    "<PATH>",
    "Tue, ",
    "May ",
]
tricky_text = st.lists(st.sampled_from(_TRICKY), max_size=40).map("".join)
any_text = st.one_of(st.text(), tricky_text)


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_normalize_never_raises_and_is_idempotent(text: str) -> None:
    once = normalize_line(text)
    assert normalize_line(once) == once


@settings(max_examples=100, deadline=None)
@given(st.lists(any_text, max_size=5))
def test_fingerprint_never_raises(lines: list[str]) -> None:
    result = fingerprint(lines)
    assert result == "" or re.fullmatch(r"[0-9a-f]{16}", result)


#: Words that no mask touches: letters outside a-f cannot be hex, and there is no dot for a host.
words = st.text(alphabet="ghijklmnopqrstuvwxyz", min_size=3, max_size=8)


#: Values that differ between runs of the same error, by kind (each kind masks the same way).
VOLATILE_KINDS: list[st.SearchStrategy[str]] = [
    st.integers(0, 10**9).map(str),
    st.floats(0, 10**4, allow_nan=False).map(lambda f: f"{f:.3f}s"),
    st.integers(1, 2**64).map(hex),
    st.binary(min_size=20, max_size=20).map(lambda b: "f" + b.hex()[1:]),
    st.uuids().map(str),
    st.datetimes().map(lambda d: d.isoformat()),
    st.times().map(lambda t: t.strftime("%H:%M:%S")),
    st.ip_addresses(v=4).map(str),
]


def _directory() -> st.SearchStrategy[str]:
    segment = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=8).filter(
        lambda s: s not in {".", ".."}
    )
    return st.tuples(st.booleans(), st.lists(segment, min_size=1, max_size=4)).map(
        lambda t: ("/" if t[0] else "") + "/".join(t[1]) + "/"
    )


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_lines_differing_only_in_volatile_parts_match(data: st.DataObject) -> None:
    kinds = st.sampled_from(["word", "path", *range(len(VOLATILE_KINDS))])
    template = data.draw(st.lists(kinds, max_size=8))
    fixed_words = [data.draw(words) for _ in template]
    basenames = [data.draw(words) + ".py" for _ in template]

    def render() -> str:
        parts = []
        for kind, word, basename in zip(template, fixed_words, basenames, strict=True):
            if kind == "word":
                parts.append(word)
            elif kind == "path":
                parts.append(data.draw(_directory()) + basename)
            else:
                parts.append(data.draw(VOLATILE_KINDS[int(kind)]))
        return " ".join(parts)

    first, second = render(), render()
    assert normalize_line(first) == normalize_line(second)
    assert fingerprint([first, "E   assert x"]) == fingerprint([second, "E   assert x"])


@settings(max_examples=100, deadline=None)
@given(st.lists(words, min_size=1, max_size=8), st.lists(words, min_size=1, max_size=8))
def test_different_messages_differ(first: list[str], second: list[str]) -> None:
    if first == second:
        return
    assert fingerprint([" ".join(first)]) != fingerprint([" ".join(second)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=6))
def test_the_fingerprint_is_sha1_of_the_normalised_lines_as_stored_runs_have_it(lines):
    """Fingerprints are stored (iterations.jsonl, the failure memory) and compared across
    runs: hashing without OpenSSL must give the very same digest."""
    import hashlib

    parts = list(dict.fromkeys(n for n in map(normalize_line, lines) if n))
    text = "\n".join(parts).encode("utf-8", "surrogatepass")
    assert fingerprint(lines) == (hashlib.sha1(text).hexdigest()[:16] if parts else "")


def test_a_known_fingerprint_stays_the_same():
    assert fingerprint(["E   assert 1 == 2", "tests/test_x.py:7: AssertionError"]) == (
        "eb3fe6d5ddf01d79"  # what hashlib.sha1 gave before
    )


def test_fingerprinting_does_not_load_openssl():
    import subprocess
    import sys

    code = (
        "import sys\nfrom loopctl.fingerprints import fingerprint\nfingerprint(['x 1'])\n"
        "print('_hashlib' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "False"
