"""The four-section error report, and its three renderings: terminal, GitHub markdown, JSON.

Sections: **What Failed** (stage, iteration, issue, goal, category and the decisive lines),
**Why** (what the category means and which rule decided it), **Similar Past Issues** (from the
failure memory) and **Suggested Actions** (two to four). Every piece of text that came from a
log or a user passes through :func:`loopctl.redact` (loopctl's one redactor); the GitHub rendering
also escapes it, so a log cannot inject markup, mentions or links into a comment, and it always
fits GitHub's 65,536-character comment limit.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

import attrs

from loopctl import redact, sanitize
from loopctl_context_errors.categories import (
    CATEGORY_MEANING,
    Categorization,
    Category,
    RuleSet,
    categorize,
)
from loopctl_context_errors.memory import FailureMemory, QueryOutcome, SimilarFailure
from loopctl_context_errors.suggest import (
    Suggestion,
    candidate_keys,
    generate_suggested_actions,
)

#: GitHub's limit on the body of an issue or pull-request comment.
GITHUB_COMMENT_LIMIT = 65_536
#: How much of the log the reports carry (its end), before the size budget trims it further.
LOG_EXCERPT_CHARS = 48_000
LOG_EXCERPT_LINES = 400
SECTIONS = ("What Failed", "Why", "Similar Past Issues", "Suggested Actions")
#: The statuses of an answer the store gave (now, or earlier in the run: ``cached``).
ANSWERED = frozenset({"ok", "cached"})


@attrs.define
class ErrorReport:
    """Everything a rendering needs; build it with :func:`build_report`."""

    stage: str
    category: Category
    rule: str
    rule_description: str
    decisive_lines: list[str]
    matched_line: str
    suggestions: list[Suggestion]
    similar: list[SimilarFailure] = attrs.Factory(list)
    memory_status: str = "disabled"
    memory_ms: float = 0.0
    #: Why the memory did not answer (a code: ``auth``, ``refused`` …), "" when it did.
    memory_reason: str = ""
    iteration: int | None = None
    goal: str = ""
    issue: str = ""
    runner: str = "generic"
    signature: str = ""
    failing_tests: list[str] = attrs.Factory(list)
    log_excerpt: str = ""
    generated_at: float = attrs.Factory(time.time)

    @property
    def meaning(self) -> str:
        return CATEGORY_MEANING[self.category]

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "iteration": self.iteration,
            "issue": self.issue,
            "goal": self.goal,
            "category": self.category.value,
            "rule": self.rule,
            "rule_description": self.rule_description,
            "why": self.meaning,
            "decisive_lines": list(self.decisive_lines),
            "matched_line": self.matched_line,
            "runner": self.runner,
            "signature": self.signature,
            "failing_tests": list(self.failing_tests),
            "similar_failures": [item.to_json() for item in self.similar],
            "memory": {
                "status": self.memory_status,
                "duration_ms": self.memory_ms,
                **({"reason": self.memory_reason} if self.memory_reason else {}),
            },
            "suggested_actions": [s.to_json() for s in self.suggestions],
            "generated_at": round(self.generated_at, 3),
        }


def _excerpt(text: str, max_lines: int = LOG_EXCERPT_LINES) -> str:
    if max_lines <= 0:
        return ""
    lines = text.splitlines()[-max_lines:]
    excerpt = "\n".join(line[:1000] for line in lines)
    return excerpt[-LOG_EXCERPT_CHARS:]


def build_report(
    text: str,
    *,
    stage: str = "tests",
    iteration: int | None = None,
    goal: str = "",
    issue: str = "",
    decisive_lines: Sequence[str] | None = None,
    failing_tests: Sequence[str] = (),
    memory: FailureMemory | None = None,
    rules: RuleSet | None = None,
    max_similar: int = 3,
    exclude_run: str = "",
    categorization: Categorization | None = None,
    similar: QueryOutcome | None = None,
    excerpt_lines: int = LOG_EXCERPT_LINES,
    project_id: str = "",
) -> ErrorReport:
    """Categorize ``text``, ask the memory, suggest, and assemble a redacted report.

    Never raises: each part degrades on its own (no memory → no similar issues; an odd log →
    UNKNOWN with its last lines).
    """
    from loopctl_context_errors.memory import signature_of

    stage, goal, issue = redact(str(stage)), redact(str(goal or "")), redact(str(issue or ""))
    failing_tests = [redact(str(t)) for t in failing_tests]
    found = categorization or categorize(text, decisive_lines=decisive_lines, rules=rules)
    decisive = [redact(line) for line in found.decisive_lines][:12]
    signature, _ = signature_of(found.decisive_lines)
    outcome = similar
    if outcome is None:
        if memory is None:
            outcome = QueryOutcome(status="disabled")
        else:
            outcome = memory.query_similar(
                found.decisive_lines,
                limit=max_similar,
                category=found.category.value,
                exclude_run=exclude_run,
                project_id=project_id,
            )
    stats = {}
    if memory is not None and outcome.status in ANSWERED:
        stats = memory.suggestion_stats(candidate_keys(found.category, found.rule_name, stage))
    suggestions = generate_suggested_actions(
        found.category,
        stage=stage,
        similar=outcome.results,
        rule=found.rule_name if found.rule is not None else None,
        matched_line=found.matched_line,
        failing_tests=list(failing_tests),
        stats=stats,
    )
    return ErrorReport(
        stage=redact(stage),
        category=found.category,
        rule=found.rule_name,
        rule_description=found.rule.description if found.rule is not None else "",
        decisive_lines=decisive,
        matched_line=redact(found.matched_line),
        suggestions=suggestions,
        similar=list(outcome.results),
        memory_status=outcome.status,
        memory_ms=outcome.duration_ms,
        memory_reason=outcome.reason,
        iteration=iteration,
        goal=redact(goal),
        issue=redact(str(issue or "")),
        runner=found.runner,
        signature=signature,
        failing_tests=[redact(t) for t in failing_tests][:20],
        log_excerpt=redact(_excerpt(text if isinstance(text, str) else "", excerpt_lines)),
    )


# --- plain text and the terminal --------------------------------------------------------------


#: How the "None: the failure memory is …" line says a status.
MEMORY_STATES = {
    "disabled": "off",
    "newer": "unavailable (its schema is newer than this loopctl's: upgrade loopctl)",
    "outdated": "unavailable (its schema is older: run `loopctl memory migrate`)",
}


def _similar_lines(report: ErrorReport) -> list[str]:
    if not report.similar:
        if report.memory_status in ANSWERED or report.memory_status == "missing":
            return ["None found."]
        return [
            f"None: the failure memory is {MEMORY_STATES.get(report.memory_status, report.memory_status)}."
        ]
    lines = []
    for item in report.similar:
        record = item.record
        when = time.strftime("%Y-%m-%d", time.localtime(record.last_seen or record.created_at))
        head = record.decisive[-1] if record.decisive else record.signature
        fix = (
            f"fixed by changing {', '.join(record.fix_files[:4]) or 'the code'}"
            if record.fixed
            else "not fixed yet"
        )
        seen = f", seen {record.occurrences}x" if record.occurrences > 1 else ""
        lines.append(
            f"[{item.match} {item.score:.2f}] {record.category} {item.place()} "
            f"({record.stage}, {when}{seen}): {head[:200]} — {fix}"
        )
    return lines


def _what_failed_lines(report: ErrorReport) -> list[str]:
    where = f"Stage: {report.stage}"
    if report.iteration is not None:
        where += f" · Iteration: {report.iteration}"
    if report.issue:
        where += f" · Issue: {report.issue}"
    lines = [where]
    if report.goal:
        lines.append(f"Goal: {_one_line(report.goal, 300)}")
    lines.append(f"Category: {report.category.value} (rule: {report.rule})")
    if report.failing_tests:
        lines.append("Failing: " + ", ".join(report.failing_tests[:5]))
    return lines


def _why_lines(report: ErrorReport) -> list[str]:
    lines = [report.meaning]
    if report.rule_description:
        lines.append(f"Rule {report.rule}: {report.rule_description}.")
    if report.matched_line:
        lines.append(f"Decided by: {report.matched_line}")
    return lines


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def render_plain(report: ErrorReport) -> str:
    """Plain text, no colour and no box drawing (NO_COLOR, pipes, files)."""
    out: list[str] = [f"Context error report: {report.category.value}", ""]
    out.append("== What Failed ==")
    out.extend(_what_failed_lines(report))
    if report.decisive_lines:
        out.append("Decisive lines:")
        out.extend(f"  {line}" for line in report.decisive_lines)
    out += ["", "== Why =="]
    out.extend(_why_lines(report))
    out += ["", "== Similar Past Issues =="]
    out.extend(f"- {line}" for line in _similar_lines(report))
    out += ["", "== Suggested Actions =="]
    out.extend(f"{i}. {s.text}" for i, s in enumerate(report.suggestions, 1))
    return sanitize(redact("\n".join(out))) + "\n"


def use_color(stream: TextIO | None = None) -> bool:
    """Colour only for a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    stream = stream or sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def render_terminal(report: ErrorReport, *, color: bool | None = None, width: int = 100) -> str:
    """rich panels with colour on a terminal; :func:`render_plain` otherwise."""
    if color is None:
        color = use_color()
    if not color:
        return render_plain(report)
    import io

    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=width, color_system="standard")
    style = "red" if report.category is not Category.UNKNOWN else "yellow"

    def text(lines: Sequence[str]) -> Text:
        return Text(sanitize(redact("\n".join(lines))))  # no terminal control from a log

    what = [*_what_failed_lines(report)]
    if report.decisive_lines:
        what.append("")
        what.extend(report.decisive_lines)
    console.print(
        Panel(text(what), title=f"What Failed — {report.category.value}", border_style=style)
    )
    console.print(Panel(text(_why_lines(report)), title="Why", border_style="cyan"))
    console.print(
        Panel(text(_similar_lines(report)), title="Similar Past Issues", border_style="blue")
    )
    actions = [f"{i}. {s.text}" for i, s in enumerate(report.suggestions, 1)]
    console.print(Panel(Group(text(actions)), title="Suggested Actions", border_style="green"))
    return buffer.getvalue()


# --- markdown ----------------------------------------------------------------------------------

_MD_INLINE = re.compile(r"([\\`*_\[\]|~])")
_MD_LINE_START = re.compile(r"^(\s*)(?:([#+\-=>!])|(\d+)([.)]))")
_AUTOLINK = re.compile(r"(?i)(https?|ftp|mailto|file)(:)|\b(www)(\.)")


def _escape_line_start(match: re.Match[str]) -> str:
    if match.group(2):  # a list, heading, quote or rule marker
        return f"{match.group(1)}\\{match.group(2)}"
    return f"{match.group(1)}{match.group(3)}\\{match.group(4)}"  # "1." → "1\."


def md_escape(text: str) -> str:
    """Text safe to put in GitHub markdown outside code: no HTML, no markup, no mentions, no
    autolinks or references; one line. (Zero-width spaces break what GitHub resolves after
    rendering: ``@user``, ``#123``, bare URLs.)"""
    text = " ".join(str(text).split())
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _AUTOLINK.sub(lambda m: "\u200b".join(g for g in m.groups() if g), text)
    text = _MD_INLINE.sub(r"\\\1", text)
    text = _MD_LINE_START.sub(_escape_line_start, text)
    return text.replace("@", "@\u200b").replace("#", "#\u200b")


def html_escape(text: str) -> str:
    """The light escaping of the local report file: no HTML, markup left readable."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fenced(text: str, info: str = "text") -> str:
    """A fenced code block that no backtick run in ``text`` can close early."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text.replace("\r", "")
    return f"{fence}{info}\n{body}\n{fence}"


def _md_sections(
    report: ErrorReport, heading: str, escape_text: Callable[[str], str] = md_escape
) -> list[str]:
    def escape(text: str) -> str:  # redact first: escaping could hide a secret's shape
        return escape_text(redact(text))

    what = [escape(line) for line in _what_failed_lines(report)]
    parts = [f"{heading} What Failed", "", "  \n".join(what), ""]
    if report.decisive_lines:
        parts += [fenced("\n".join(report.decisive_lines)), ""]
    parts += [f"{heading} Why", ""]
    parts += ["  \n".join(escape(line) for line in _why_lines(report)), ""]
    parts += [f"{heading} Similar Past Issues", ""]
    parts += [f"- {escape(line)}" for line in _similar_lines(report)]
    parts += ["", f"{heading} Suggested Actions", ""]
    parts += [f"{i}. {escape(s.text)}" for i, s in enumerate(report.suggestions, 1)]
    return parts


def render_markdown(report: ErrorReport) -> str:
    """The ``context-error-<stage>.md`` file: the four sections and the log's end."""
    title = f"# Context error: {html_escape(report.stage)} — {report.category.value}"
    parts = [title, "", *_md_sections(report, "##", html_escape), ""]
    if report.log_excerpt:
        parts += ["## Log (end)", "", fenced(report.log_excerpt), ""]
    return sanitize(redact("\n".join(parts)))


def render_github(report: ErrorReport, *, max_chars: int = GITHUB_COMMENT_LIMIT) -> str:
    """A GitHub comment: the four sections, the log in a collapsed ``<details>``, within
    ``max_chars`` (GitHub's limit by default)."""
    iteration = f" (iteration {report.iteration})" if report.iteration is not None else ""
    head = [
        f"### loopctl: stage {md_escape(report.stage)} failed{iteration} — "
        f"**{report.category.value}**",
        "",
    ]
    body = "\n".join(head + _md_sections(report, "####")) + "\n"
    body = sanitize(redact(body))
    if len(body) > max_chars - 200:  # pathological: huge decisive lines or goal
        body = body[: max(0, max_chars - 400)].rsplit("\n", 1)[0] + "\n\n_(report truncated)_\n"
        return _close_fences(body)[:max_chars]
    log = report.log_excerpt
    if not log:
        return body
    wrapper = "\n<details><summary>Error log (last {n} lines)</summary>\n\n{block}\n\n</details>\n"
    room = max_chars - len(body) - len(wrapper) - 64
    lines = log.splitlines()
    # drop lines from the start until the block fits (fence length can grow with content)
    while lines:
        block = fenced("\n".join(lines))
        if len(block) <= room:
            break
        excess = len(block) - room
        drop = max(1, excess // max(1, len(block) // max(1, len(lines))))
        lines = lines[drop:]
    if not lines:
        return body
    return body + wrapper.format(n=len(lines), block=fenced("\n".join(lines)))


def _close_fences(text: str) -> str:
    """Close a code fence left open by truncation."""
    opened: str | None = None
    for line in text.splitlines():
        match = re.match(r"^(`{3,})", line)
        if match is None:
            continue
        if opened is None:
            opened = match.group(1)
        elif match.group(1).startswith(opened) and line.strip() == match.group(1):
            opened = None
    return text + (f"\n{opened}\n" if opened else "")


def redact_json(value: Any) -> Any:
    """Every string in a JSON-like value, redacted (the belt to the inputs' braces)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {str(k): redact_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_json(v) for v in value]
    return value


def render_json(report: ErrorReport) -> dict[str, Any]:
    data = report.to_json()
    data["log_excerpt_chars"] = len(report.log_excerpt)
    result: dict[str, Any] = redact_json(data)
    return result


__all__ = [
    "GITHUB_COMMENT_LIMIT",
    "SECTIONS",
    "ErrorReport",
    "build_report",
    "fenced",
    "html_escape",
    "md_escape",
    "redact_json",
    "render_github",
    "render_json",
    "render_markdown",
    "render_plain",
    "render_terminal",
    "use_color",
]
