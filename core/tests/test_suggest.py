"""``did you mean`` over names a user typed: never crashes, never corrects a right name."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.suggest import close_match, did_you_mean

NAMES = st.lists(st.text(max_size=30), max_size=20)


@settings(deadline=None)
@given(word=st.text(max_size=40), known=NAMES)
def test_close_match_is_a_known_name_or_none(word: str, known: list[str]) -> None:
    found = close_match(word, known)
    assert found is None or found in known
    assert (found is None) == (did_you_mean(word, known) == "")


@settings(deadline=None)
@given(known=NAMES.filter(bool), data=st.data())
def test_an_exact_name_is_never_corrected(known: list[str], data: st.DataObject) -> None:
    word = data.draw(st.sampled_from(known))
    assert close_match(word, known) is None


def test_typos_find_the_name() -> None:
    known = ["goal-guard", "context-monitor", "context-errors", "failure-classifier"]
    assert close_match("goal-gaurd", known) == "goal-guard"
    assert close_match("context-monitr", known) == "context-monitor"
    assert close_match("Goal-Guard", known) == "goal-guard"
    assert close_match("zzz", known) is None
