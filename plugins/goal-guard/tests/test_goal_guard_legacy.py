"""Recovering the user's goal from a goal the bash predecessor synthesized sections into."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loopctl_goal_guard.legacy import (
    KNOWN_FIX_PREFIX,
    SUFFIX_SENTINELS,
    strip_synthesized_sections,
)

GOAL = 'Fix the login bug.\n\nUsers with a "+" in their email cannot sign in; add a test.'


@pytest.mark.parametrize("sentinel", SUFFIX_SENTINELS)
def test_every_suffix_sentinel_is_cut_off(sentinel: str) -> None:
    contaminated = f"{GOAL}\n\n{sentinel}: something the loop synthesized\n- detail\n"
    recovery = strip_synthesized_sections(contaminated)
    assert recovery.text == GOAL
    assert recovery.removed == (sentinel,)
    assert recovery.removed_chars == len(contaminated) - len(GOAL)


def test_a_realistic_bash_era_goal_is_recovered_exactly() -> None:
    contaminated = (
        f"{KNOWN_FIX_PREFIX} pin the hashing library\n"
        "run npm ci before the tests\n"
        "\n"
        f"{GOAL}\n"
        "\n"
        "BLOCKING ISSUES (from review):\n- tests/test_login.py::test_plus fails\n"
        "\n"
        "IMPORTANT — Previous build failed at: npm test\n"
        "\n"
        "HUMAN FEEDBACK: keep the public API\n"
    )
    recovery = strip_synthesized_sections(contaminated)
    assert recovery.text == GOAL
    assert recovery.removed == (
        KNOWN_FIX_PREFIX,
        "BLOCKING ISSUES",
        "IMPORTANT — Previous build",
        "HUMAN FEEDBACK",
    )


@pytest.mark.parametrize(
    "spelling",
    ["IMPORTANT - Previous build", "IMPORTANT – Previous build", "IMPORTANT -- Previous build"],
)
def test_hand_edited_dashes_and_crlf_are_tolerated(spelling: str) -> None:
    assert strip_synthesized_sections(f"{GOAL}\n\n{spelling}: x").text == GOAL
    crlf = GOAL.replace("\n", "\r\n")
    assert strip_synthesized_sections(f"{crlf}\r\n\r\nBLOCKING ISSUES: x").text == crlf + "\r"
    assert strip_synthesized_sections(f"{GOAL}\n  \nBLOCKING ISSUES: x").text == GOAL


@pytest.mark.parametrize(
    "goal",
    [
        GOAL,
        "Explain the BLOCKING ISSUES we hit last week in docs/incidents.md",  # not after a blank
        "BLOCKING ISSUES: the goal itself starts with the words",  # nothing before: not cut
        "Fix it.\nBLOCKING ISSUES on the next line are the user's own words",
        f"{KNOWN_FIX_PREFIX} but no blank line follows, so this is all the user's",
        "\n\nBLOCKING ISSUES: only a synthesized section, nothing to recover",
    ],
)
def test_text_that_is_not_a_synthesized_section_is_kept(goal: str) -> None:
    recovery = strip_synthesized_sections(goal)
    assert recovery.text == goal
    assert not recovery.changed


user_text = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=200)


@settings(max_examples=200, deadline=None)
@given(goal=user_text, sentinel=st.sampled_from(SUFFIX_SENTINELS), tail=st.text(max_size=100))
def test_a_goal_without_sentinels_comes_back_exactly(goal: str, sentinel: str, tail: str) -> None:
    assume(goal.strip() and not goal.startswith(KNOWN_FIX_PREFIX))
    assume(not strip_synthesized_sections(goal).changed)
    recovered = strip_synthesized_sections(f"{goal}\n\n{sentinel}{tail}")
    assert recovered.text == goal
    assert recovered.removed[0] == sentinel


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300))
def test_never_raises_and_only_ever_removes(text: str) -> None:
    recovery = strip_synthesized_sections(text)
    assert recovery.removed_chars == len(text) - len(recovery.text)
    assert recovery.text in text
    assert recovery.changed == (recovery.text != text)
