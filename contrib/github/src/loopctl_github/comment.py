"""What the comment says, and the hidden marker that makes it findable again.

The body always starts with ``<!-- loopctl:context-errors key=KEY -->``: invisible on GitHub,
and how a later run recognises the comment to update (a marker somewhere inside a log excerpt
does not count: it must open the body). The key is the config's ``comment_key`` or, by default,
a short hash of the goal, so re-running the same loop updates the same comment.
"""

from __future__ import annotations

import hashlib
import html
import re
from typing import Any

import attrs

#: GitHub's limit on a comment body, characters.
GITHUB_COMMENT_LIMIT = 65_536
#: Room left for the report once the marker, the headline and the footer are in.
REPORT_BUDGET = GITHUB_COMMENT_LIMIT - 2_000
MARKER_TEMPLATE = "<!-- loopctl:context-errors key={key} -->"
_UNSAFE_KEY_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def default_key(goal: str) -> str:
    """One comment per goal: a rerun of the same loop finds its comment again."""
    return "goal-" + hashlib.sha256(goal.encode("utf-8", errors="replace")).hexdigest()[:12]


def comment_key(configured: str, goal: str) -> str:
    if configured:
        return _UNSAFE_KEY_CHARS.sub("-", configured)[:64] or default_key(goal)
    return default_key(goal)


def marker(key: str) -> str:
    return MARKER_TEMPLATE.format(key=key)


def has_marker(body: object, key: str) -> bool:
    """True when ``body`` is one of ours for ``key`` (the marker opens it)."""
    return isinstance(body, str) and body.lstrip("\ufeff \t\r\n").startswith(marker(key))


@attrs.frozen
class LastReport:
    """The latest report, rendered; kept in the state directory so a resumed run can still
    show it when it marks the failure resolved."""

    iteration: int | None
    category: str
    stage: str
    markdown: str

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: object) -> LastReport | None:
        if not isinstance(data, dict):
            return None
        iteration = data.get("iteration")
        markdown = data.get("markdown")
        if not isinstance(markdown, str) or not markdown.strip():
            return None
        return cls(
            iteration=iteration if isinstance(iteration, int) else None,
            category=str(data.get("category") or "UNKNOWN")[:40],
            stage=str(data.get("stage") or "tests")[:100],
            markdown=markdown[:REPORT_BUDGET],
        )


def render_report(report: Any) -> LastReport:
    """The context-errors report in GitHub's format, leaving room for our wrapper."""
    from loopctl_context_errors import render_github

    category = getattr(report, "category", None)
    return LastReport(
        iteration=getattr(report, "iteration", None),
        category=str(getattr(category, "value", category) or "UNKNOWN"),
        stage=str(getattr(report, "stage", "") or "tests"),
        markdown=render_github(report, max_chars=REPORT_BUDGET),
    )


def _footer(text: str) -> str:
    return (
        f"\n\n<sub>{text} — posted by loopctl-github; this comment is edited in place as the "
        "loop goes on.</sub>\n"
    )


def _plain(text: str, limit: int = 300) -> str:
    """Loop text (an outcome message) safe inside our markdown: no HTML, no markup injection."""
    from loopctl import redact

    flat = " ".join(str(text).split())[:limit]
    return html.escape(redact(flat), quote=False).replace("`", "'")


def _fit(body: str) -> str:
    if len(body) <= GITHUB_COMMENT_LIMIT:
        return body
    return body[: GITHUB_COMMENT_LIMIT - 40].rsplit("\n", 1)[0] + "\n\n_(truncated)_\n"


def _collapsed(last: LastReport) -> str:
    where = f"iteration {last.iteration}, " if last.iteration is not None else ""
    summary = html.escape(f"Last failure report ({where}{last.category}, stage {last.stage})")
    return f"<details><summary>{summary}</summary>\n\n{last.markdown.strip()}\n\n</details>"


def failing_body(key: str, last: LastReport) -> str:
    at = f"iteration {last.iteration}" if last.iteration is not None else "the latest iteration"
    return _fit(f"{marker(key)}\n{last.markdown.rstrip()}{_footer(f'Updated at {at}')}")


def resolved_body(key: str, last: LastReport | None, iteration: int, iterations: int) -> str:
    """The loop ended with passing tests: say so first, keep the last report collapsed."""
    lines = [
        marker(key),
        "### ✅ loopctl: resolved — the tests pass",
        "",
        f"The failure reported here was fixed: the loop completed at iteration {iteration} "
        f"({iterations} iteration{'s' if iterations != 1 else ''} in all).",
    ]
    if last is not None:
        lines += ["", _collapsed(last)]
    return _fit("\n".join(lines) + _footer(f"Final update at iteration {iteration}"))


def passed_body(key: str, iteration: int) -> str:
    """A clean run found a comment an earlier run left: it no longer describes the code."""
    lines = [
        marker(key),
        "### ✅ loopctl: the tests pass",
        "",
        f"The latest run completed at iteration {iteration} with no failure to report; the "
        "failure an earlier run reported here is gone.",
    ]
    return _fit("\n".join(lines) + _footer(f"Final update at iteration {iteration}"))


def stopped_body(
    key: str, last: LastReport | None, status: str, message: str, iteration: int
) -> str:
    """The loop ended without passing tests: the last report stays open, with why it stopped."""
    why = f": {_plain(message)}" if message.strip() else ""
    lines = [
        marker(key),
        f"### ⚠️ loopctl stopped ({_plain(status, 60)}) at iteration {iteration}{why}",
        "",
    ]
    if last is not None:
        lines += ["The last failure report:", "", last.markdown.strip()]
    else:
        lines += ["The tests were still failing when the loop stopped."]
    return _fit("\n".join(lines) + _footer(f"Final update at iteration {iteration}"))


__all__ = [
    "GITHUB_COMMENT_LIMIT",
    "REPORT_BUDGET",
    "LastReport",
    "comment_key",
    "default_key",
    "failing_body",
    "has_marker",
    "marker",
    "passed_body",
    "render_report",
    "resolved_body",
    "stopped_body",
]
