"""How this plugin's events read to a person: the ``summary`` each event carries.

loopctl's plain and live views show an event's ``summary`` field and know nothing of this
plugin; the whole data stays in ``events.jsonl`` and ``--json``. A category names what kind of
error the output shows; the failure classifier's mode names what the loop does about it. So
the line puts the category in words, and says "missing dependency" where the rule found a
module, package or program that is not installed: the classifier calls that a
``dependency_issue``, and a ``RESOURCE_ERROR`` next to it no longer reads as a disagreement.
"""

from __future__ import annotations

from loopctl_context_errors.categories import Category

#: Each category in words (what kind of error the output shows).
CATEGORY_WORDS: dict[str, str] = {
    Category.FILE_ACCESS.value: "a file that is missing or cannot be read or written",
    Category.FUNCTION_ERROR.value: "a name that does not exist",
    Category.SYNTAX_ERROR.value: "code or data that does not parse",
    Category.ASSERTION_FAILURE.value: "a failed assertion",
    Category.TYPE_ERROR.value: "a wrong type or value",
    Category.TIMEOUT.value: "a timeout",
    Category.MEMORY_ERROR.value: "memory exhausted or corrupted",
    Category.NETWORK_ERROR.value: "a network failure",
    Category.RESOURCE_ERROR.value: "something the environment lacks",
    Category.UNKNOWN.value: "an error no rule recognises",
}
#: Rules whose finding is, in the failure classifier's words, a dependency issue.
MISSING_DEPENDENCY_RULES = frozenset(
    {
        "resource.missing-python-module",
        "resource.missing-js-package",
        "resource.missing-crate",
        "resource.missing-java-class",
        "resource.missing-command",
        "mypy.missing-import",
    }
)


def category_words(category: str, rule: str | None = None) -> str:
    if rule in MISSING_DEPENDENCY_RULES:
        return "a missing dependency"
    return CATEGORY_WORDS.get(category, category.replace("_", " ").lower())


def _times(count: int) -> str:
    return "once" if count == 1 else f"{count} times"


def context_generated(stage: str, category: str, rule: str, similar: int, fixed: int) -> str:
    """``error report: tests failed with a missing dependency (RESOURCE_ERROR, rule …); not
    seen before``."""
    if similar <= 0:
        seen = "not seen before"
    else:
        seen = f"seen {_times(similar)} before" + (f", fixed {_times(fixed)}" if fixed else "")
    return (
        f"error report: {stage} failed with {category_words(category, rule)} "
        f"({category}, rule {rule}); {seen}"
    )


def suggestion_resolved(
    suggested_at: int | None, effective: bool, reason: str, still_failing: int
) -> str:
    """``the suggestions of iteration 1 worked: the tests pass``."""
    whose = f"of iteration {suggested_at}" if suggested_at else "made earlier"
    if reason == "tests_pass":
        outcome = "worked: the tests pass"
    elif reason == "its_tests_pass":
        outcome = "worked: the tests they were for pass"
    elif effective:
        outcome = "worked"
    else:
        outcome = "did not work yet" + (
            f": {still_failing} of their tests still fail" if still_failing else ""
        )
    return f"the suggestions {whose} {outcome}"


__all__ = ["CATEGORY_WORDS", "MISSING_DEPENDENCY_RULES", "category_words", "context_generated"]
