"""The engine's failed approaches: one entry per approach, each change credited precisely."""

from __future__ import annotations

from loopctl.approaches import MAX_DIFF_LINES, ApproachBook, same_approach
from loopctl.model import IterationRecord


def failed(i, changed=(), tests=("t1",), fingerprint="fp"):
    return IterationRecord(
        iteration=i,
        error_fingerprint=fingerprint,
        failing_tests=list(tests),
        changed_files=list(changed),
    )


def note(book, record, previous, diff="", final_text=""):
    return book.note(record, previous, failure="assert 1 == 2", diff=diff, final_text=final_text)


def test_a_change_then_no_change_is_one_entry_crediting_only_the_change():
    book = ApproachBook()
    one = failed(1, ["a.py"])
    old, text = note(book, one, None, diff="a.py\n-x = 1\n+x = 2")
    assert old is None
    assert (
        text.splitlines()[0]
        == "iteration 1 changed a.py; the tests still failed with: assert 1 == 2"
    )
    assert "    +x = 2" in text
    two = failed(2)
    old2, text2 = note(book, two, one)
    assert old2 == text
    assert text2.startswith("iteration 1 changed a.py; iteration 2 changed nothing;")
    assert len(book.entries) == 1


def test_the_same_change_made_again_updates_its_entry():
    book = ApproachBook()
    first = failed(1, ["a.py"])
    note(book, first, None, diff="a.py\n-x\n+y")
    second = failed(2, ["b.py"], fingerprint="other")
    note(book, second, first, diff="b.py\n-p\n+q")
    _, text = note(book, failed(3, ["a.py"]), second, diff="a.py\n-x\n+y")
    assert text.startswith("iterations 1, 3 changed a.py")
    assert len(book.entries) == 2


def test_progress_is_no_failed_approach():
    book = ApproachBook()
    before = failed(1, tests=("t1", "t2"))
    assert note(book, failed(2, ["a.py"], tests=("t2",)), before, diff="a.py\n-x\n+y") is None


def test_the_diff_is_capped_and_redacted_and_words_stand_in_without_it():
    book = ApproachBook()
    diff = (
        "a.py\n"
        + "\n".join(f"+line {n}" for n in range(40))
        + "\n+API_KEY=sk-abcdef0123456789abcdef0123"
    )
    _, text = note(book, failed(1, ["a.py"]), None, diff=diff)
    assert f"+line {MAX_DIFF_LINES - 2}" in text
    assert "+line 39" not in text
    assert "more changed lines" in text
    assert "sk-abcdef0123456789" not in text
    _, words = note(
        book,
        failed(2, ["c.py"], fingerprint="x"),
        None,
        final_text="Let me look.\nI rewrote c.py.\n",
    )
    assert "(the agent said: I rewrote c.py.)" in words


def test_a_growing_line_is_the_same_approach():
    assert same_approach(
        "iterations 1-3 kept failing with: X", "iterations 1-4 kept failing with: X"
    )
    assert not same_approach(
        "iterations 1-3 kept failing with: X", "iterations 1-3 kept failing with: Y"
    )
