from hypothesis import given, settings
from hypothesis import strategies as s

from loopctl.model import PromptSection
from loopctl.prompt import compose


def test_sections_are_ordered_by_priority_then_contribution_order():
    composed = compose(
        [
            PromptSection("Low", "l", priority=10),
            PromptSection("Goal", "g", priority=100, protected=True),
            PromptSection("MidA", "a", priority=50),
            PromptSection("MidB", "b", priority=50),
        ],
        budget_chars=10_000,
    )
    assert composed.included == ["Goal", "MidA", "MidB", "Low"]
    assert (
        composed.text.index("## Goal")
        < composed.text.index("## MidA")
        < composed.text.index("## Low")
    )
    assert composed.trimmed == []


def test_lowest_priority_is_trimmed_first_at_line_boundaries_with_a_notice():
    low = "\n".join(f"low line {i}" for i in range(200))
    high = "\n".join(f"high line {i}" for i in range(20))
    composed = compose(
        [PromptSection("High", high, priority=80), PromptSection("Low", low, priority=10)],
        budget_chars=1_200,
    )
    assert len(composed.text) <= 1_200
    assert high in composed.text  # the important section is whole
    assert "Low (" in composed.trimmed[0]
    assert "shortened or left out: Low" in composed.text
    kept_low = composed.text.split("## Low\n\n", 1)[1] if "## Low" in composed.text else ""
    for line in kept_low.splitlines():
        if line.startswith("low line"):
            assert line in low.splitlines()  # never cut mid-line


def test_protected_sections_survive_any_budget():
    goal = "x" * 5_000
    composed = compose(
        [
            PromptSection("Goal", goal, priority=100, protected=True),
            PromptSection("Notes", "n" * 900),
        ],
        budget_chars=600,
    )
    assert goal in composed.text
    assert "Notes" not in composed.included


@settings(max_examples=150, deadline=None)
@given(
    bodies=s.lists(s.text(min_size=0, max_size=400), min_size=1, max_size=8),
    priorities=s.lists(s.integers(0, 100), min_size=8, max_size=8),
    budget=s.integers(500, 3_000),
)
def test_unprotected_prompts_fit_the_budget(bodies, priorities, budget):
    sections = [
        PromptSection(f"S{i}", body, priority=priorities[i]) for i, body in enumerate(bodies)
    ]
    composed = compose(sections, budget)
    assert len(composed.text) <= budget
