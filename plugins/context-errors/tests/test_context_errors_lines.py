"""The lines loopctl's views show for this plugin's events (their ``summary`` field)."""

from __future__ import annotations

from loopctl_context_errors import lines
from loopctl_context_errors.categories import BUILTIN_RULES, Category


def test_every_category_reads_in_words() -> None:
    assert set(lines.CATEGORY_WORDS) == {category.value for category in Category}
    for words in lines.CATEGORY_WORDS.values():
        assert words
        assert "_" not in words


def test_a_missing_dependency_is_named_as_the_failure_classifier_names_it() -> None:
    line = lines.context_generated(
        "tests", "RESOURCE_ERROR", "resource.missing-python-module", 0, 0
    )
    assert line == (
        "error report: tests failed with a missing dependency "
        "(RESOURCE_ERROR, rule resource.missing-python-module); not seen before"
    )
    # other resource problems are not called a dependency
    disk = lines.context_generated("tests", "RESOURCE_ERROR", "resource.disk-full", 2, 1)
    assert "something the environment lacks" in disk
    assert disk.endswith("seen 2 times before, fixed once")


def test_the_missing_dependency_rules_exist() -> None:
    names = {rule.name for rule in BUILTIN_RULES}
    assert not lines.MISSING_DEPENDENCY_RULES - names


def test_a_resolved_suggestion_reads_in_words() -> None:
    assert lines.suggestion_resolved(1, True, "its_tests_pass", 0) == (
        "the suggestions of iteration 1 worked: the tests they were for pass"
    )
    assert lines.suggestion_resolved(2, True, "tests_pass", 0) == (
        "the suggestions of iteration 2 worked: the tests pass"
    )
    assert lines.suggestion_resolved(3, False, "still_failing", 2) == (
        "the suggestions of iteration 3 did not work yet: 2 of their tests still fail"
    )
