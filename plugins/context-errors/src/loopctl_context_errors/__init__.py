"""loopctl-context-errors: context-rich error reports, a failure memory shared across projects,
and suggestions that learn which fixes work.

The public API is imported lazily (``loopctl plugins list`` imports the plugin module, and with
it this package, so importing it must stay cheap)::

    from loopctl_context_errors import categorize, build_report, render_github, FailureMemory

The names of the events it writes are published here too (``CONTEXT_GENERATED``,
``SUGGESTION_RECORDED``, ``SUGGESTION_RESOLVED``, ``EVENT_TYPES``): subscribe through them.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.2.0"

_EXPORTS = {
    "Category": "categories",
    "Categorization": "categories",
    "Rule": "categories",
    "RuleSet": "categories",
    "Tier": "categories",
    "BUILTIN_RULES": "categories",
    "categorize": "categories",
    "FailureMemory": "memory",
    "SimilarFailure": "memory",
    "QueryOutcome": "memory",
    "default_memory_path": "memory",
    "resolve_memory_path": "memory",
    "Suggestion": "suggest",
    "generate_suggested_actions": "suggest",
    "ErrorReport": "report",
    "build_report": "report",
    "render_terminal": "report",
    "render_plain": "report",
    "render_markdown": "report",
    "render_github": "report",
    "render_json": "report",
    "Ledger": "ledger",
    "validate_event": "events",
    "CONTEXT_GENERATED": "events",
    "SUGGESTION_RECORDED": "events",
    "SUGGESTION_RESOLVED": "events",
    "MEMORY_UNAVAILABLE": "events",
    "MEMORY_SPOOL": "events",
    "EVENT_TYPES": "events",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'loopctl_context_errors' has no attribute {name!r}")
    attribute = "validate" if name == "validate_event" else name
    return getattr(import_module(f"loopctl_context_errors.{module}"), attribute)


def query_similar_failures(
    error_text: str, max_results: int = 3, *, memory: Any = None, timeout_s: float = 5.0
) -> list[Any]:
    """The seed's ``query_similar_failures``: similar stored failures, [] when the memory is
    missing, locked or slow. Never raises."""
    from loopctl_context_errors.categories import categorize
    from loopctl_context_errors.memory import FailureMemory, resolve_memory_location

    try:
        if memory is None:
            location = resolve_memory_location()
            if location is None:
                return []
            memory = FailureMemory(location, timeout_s=timeout_s)
        found = categorize(error_text)
        outcome = memory.query_similar(found.decisive_lines, limit=max_results, timeout_s=timeout_s)
        return list(outcome.results)
    except Exception:  # noqa: BLE001 - documented: never raises
        return []


def categorize_error(error_text: str) -> str:
    """The seed's ``categorize_error``: the category name (``"TYPE_ERROR"`` …). Never raises."""
    from loopctl_context_errors.categories import categorize

    return categorize(error_text).category.value


def format_context_error_report(
    error_msg: str,
    stage_id: str = "tests",
    iteration: int | None = None,
    goal: str = "",
    issue_number: str = "",
    *,
    memory: Any = None,
    color: bool | None = None,
) -> str:
    """The seed's terminal report: the four sections (plain text under NO_COLOR or no TTY)."""
    from loopctl_context_errors.report import build_report, render_terminal

    report = build_report(
        error_msg, stage=stage_id, iteration=iteration, goal=goal, issue=issue_number,
        memory=memory,
    )  # fmt: skip
    return render_terminal(report, color=color)


def format_github_error_comment(
    error_msg: str,
    stage_id: str = "tests",
    iteration: int | None = None,
    goal: str = "",
    issue_number: str = "",
    *,
    memory: Any = None,
) -> str:
    """The seed's GitHub comment: markdown with the log in ``<details>``, within 65,536 chars."""
    from loopctl_context_errors.report import build_report, render_github

    report = build_report(
        error_msg, stage=stage_id, iteration=iteration, goal=goal, issue=issue_number,
        memory=memory,
    )  # fmt: skip
    return render_github(report)


__all__ = [
    *_EXPORTS,
    "__version__",
    "categorize_error",
    "format_context_error_report",
    "format_github_error_comment",
    "query_similar_failures",
]
