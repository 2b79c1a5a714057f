"""The briefing a fresh session starts from (``context-summary.md``).

It is built from what loopctl itself observed (the goal, the tests, git, the tool calls), never
from the exhausted agent's own words, so it is deterministic: the same inputs give the same text.
Sections come in priority order; when the whole is over the budget, the lowest-priority sections
are shortened first, by whole lines from their end (never mid-line), and a closing notice says
what was cut. Protected sections (why the session ended, the failed approaches, the files an
interrupted turn left possibly incomplete) are never cut.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

import attrs

#: Wrap width for free text (the goal, a handoff), so a budget cut can keep whole lines.
WRAP = 100
#: Longest single line kept from a test error or a failing test id.
ERROR_LINE_CHARS = 200
MAX_FAILING_TESTS = 10
MAX_ERROR_LINES = 10
MAX_INCOMPLETE_FILES = 50


@attrs.define
class Section:
    """One titled part of the briefing. Position in the list is its priority (first = highest)."""

    title: str
    lines: list[str]
    protected: bool = False


@attrs.define
class BriefingInputs:
    """Everything the briefing is made of, as plain data (gathered by the monitor)."""

    goal: str = ""
    #: Why the session ended: warn, hard, overflow, handoff, or another restart reason.
    trigger: str = "warn"
    restart_number: int = 0
    iteration: int = 0
    max_iterations: int = 0
    tokens: int | None = None
    window: int | None = None
    warn_threshold: float = 0.7
    hard_threshold: float = 0.9
    #: None when no test run happened yet.
    tests_passed: bool | None = None
    test_command: str = ""
    failing_tests: list[str] = attrs.Factory(list)
    error_lines: list[str] = attrs.Factory(list)
    #: Lines about files modified since the loop began (a summary line first).
    modified: list[str] = attrs.Factory(list)
    failed_approaches: list[str] = attrs.Factory(list)
    #: Files a cut-off turn changed and left as they were: possibly incomplete.
    incomplete_files: list[str] = attrs.Factory(list)
    #: Files a cut-off turn changed that were restored to their pre-turn state (rollback).
    restored_files: list[str] = attrs.Factory(list)
    #: loopctl's cross-check of the handoff against git, then the agent's handoff text.
    handoff_check: list[str] = attrs.Factory(list)
    handoff: str = ""
    recent_activity: list[str] = attrs.Factory(list)
    older_activity: list[str] = attrs.Factory(list)


@attrs.define
class Briefing:
    """A finished briefing: the text, the sections it was made of, and what the budget cut."""

    text: str
    sections: list[Section]
    #: "Title (kept n of m lines)" or "Title (left out)" for every section the budget cut.
    trimmed: list[str]
    budget: int
    trigger: str = ""
    #: ``deterministic``, or the plugin whose ``context_monitor_briefing`` replaced the text.
    source: str = "deterministic"


def _single_lines(lines: Sequence[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        out.extend(part.rstrip() for part in str(line).replace("\r", "\n").split("\n"))
    return [line for line in out if line.strip()]


def _capped(text: str, limit: int = ERROR_LINE_CHARS) -> str:
    folded = " ".join(part.strip() for part in str(text).splitlines() if part.strip())
    return folded if len(folded) <= limit else folded[: limit - 1].rstrip() + "…"


def wrap(text: str, width: int = WRAP) -> list[str]:
    """Free text as lines of at most ``width`` characters, paragraphs kept apart."""
    lines: list[str] = []
    for paragraph in str(text).replace("\r", "\n").split("\n"):
        if paragraph.strip():
            lines += textwrap.wrap(
                paragraph.strip(), width, break_long_words=True, break_on_hyphens=False
            )
    return lines


def _why(inputs: BriefingInputs) -> list[str]:
    if inputs.tokens is not None and inputs.window:
        fill = (
            f"{round(100 * inputs.tokens / inputs.window, 1):g}% full "
            f"({inputs.tokens:,} of {inputs.window:,} tokens)"
        )
    elif inputs.tokens is not None:
        fill = f"at {inputs.tokens:,} tokens (window unknown)"
    else:
        fill = "of unknown fill"
    reasons = {
        "warn": f"its context window was {fill}, over the warn threshold of "
        f"{inputs.warn_threshold:.0%}",
        "hard": f"its context window was {fill}, over the hard threshold of "
        f"{inputs.hard_threshold:.0%}; the turn was ended mid-way",
        "overflow": f"the agent ran out of context (last measured: {fill})",
        "handoff": f"its context window was {fill}; it was asked to wrap up and hand off first",
    }
    reason = reasons.get(inputs.trigger, f"of a restart ({inputs.trigger}); context {fill}")
    where = f"iteration {inputs.iteration}"
    if inputs.max_iterations:
        where += f" of at most {inputs.max_iterations}"
    lines = [
        f"loopctl ended the previous agent session after {where} "
        f"(restart {inputs.restart_number}) because {reason}.",
        "You start with an empty context: this briefing is what loopctl saw happen. The files "
        "on disk are the truth; re-read them before you edit.",
    ]
    if inputs.tests_passed is None:
        lines.append("Tests: not run yet.")
    elif inputs.tests_passed:
        lines.append("Tests: the latest run passed.")
    else:
        count = len(inputs.failing_tests)
        lines.append("Tests: the latest run failed" + (f" ({count} failing)." if count else "."))
    return lines


def _file_lines(paths: Sequence[str]) -> list[str]:
    files = sorted(dict.fromkeys(str(p) for p in paths if str(p).strip()))
    shown = [f"- {_capped(path)}" for path in files[:MAX_INCOMPLETE_FILES]]
    if len(files) > MAX_INCOMPLETE_FILES:
        shown.append(f"- … and {len(files) - MAX_INCOMPLETE_FILES} more")
    return shown


def sections_for(inputs: BriefingInputs) -> list[Section]:
    """The briefing's sections, highest priority first (empty ones left out)."""
    sections = [Section("Why this is a fresh session", _why(inputs), protected=True)]
    if inputs.failed_approaches:
        sections.append(
            Section(
                "Approaches that did not work (do not repeat them)",
                [
                    ("  " if index else "- ") + line
                    for approach in inputs.failed_approaches
                    for index, line in enumerate(_single_lines([approach]))
                ],
                protected=True,
            )
        )
    if inputs.incomplete_files:
        shown = _file_lines(inputs.incomplete_files)
        shown.insert(0, "The last turn was cut off while it was changing these files:")
        sections.append(
            Section("Possibly incomplete: verify before building on them", shown, protected=True)
        )
    if inputs.restored_files:
        shown = _file_lines(inputs.restored_files)
        shown.insert(0, "The last turn was cut off; its changes to these files were undone:")
        sections.append(Section("Restored to before the interrupted turn", shown, protected=True))
    goal = wrap(inputs.goal)
    if goal:
        sections.append(Section("Goal", goal))
    handoff = _single_lines(inputs.handoff_check) + wrap(inputs.handoff)
    if handoff:
        sections.append(Section("Handoff from the previous session (its own words)", handoff))
    errors: list[str] = []
    if inputs.failing_tests:
        errors.append("Failing tests:")
        errors += [f"- {_capped(t)}" for t in inputs.failing_tests[:MAX_FAILING_TESTS]]
        if len(inputs.failing_tests) > MAX_FAILING_TESTS:
            errors.append(f"- … and {len(inputs.failing_tests) - MAX_FAILING_TESTS} more")
    error_lines = [line for line in inputs.error_lines if str(line).strip()]
    if error_lines:
        errors.append(
            "Latest error lines"
            + (f" (`{_capped(inputs.test_command, 120)}`):" if inputs.test_command else ":")
        )
        errors += [f"    {_capped(line)}" for line in error_lines[-MAX_ERROR_LINES:]]
    if errors:
        sections.append(Section("Failing tests and latest errors", errors))
    if inputs.modified:
        sections.append(
            Section("Files modified since the loop began", _single_lines(inputs.modified))
        )
    if inputs.recent_activity:
        sections.append(
            Section("Latest tool calls (newest first)", _single_lines(inputs.recent_activity))
        )
    if inputs.older_activity:
        sections.append(
            Section("Earlier tool calls (reduced)", _single_lines(inputs.older_activity))
        )
    return sections


def _render(titles: Sequence[str], kept: Sequence[Sequence[str]]) -> str:
    return "\n\n".join(
        f"### {title}\n" + "\n".join(lines)
        for title, lines in zip(titles, kept, strict=True)
        if lines
    )


def _notice(budget: int, trimmed: Sequence[str]) -> str:
    if not trimmed:
        return ""
    return f"_Briefing budget ({budget:,} characters) reached; cut: " + "; ".join(trimmed) + "._"


def fit(sections: Sequence[Section], budget: int) -> tuple[str, list[str]]:
    """Render ``sections`` within ``budget`` characters; returns the text and what was cut.

    Lowest-priority unprotected sections lose whole lines from their end first; a section left
    with no line is left out with its title. Protected sections are always kept whole, so the
    text can exceed the budget only when they alone do.
    """
    titles = [section.title for section in sections]
    kept = [list(section.lines) for section in sections]
    originals = [len(lines) for lines in kept]
    order = [i for i in range(len(sections) - 1, -1, -1) if not sections[i].protected]

    def cut_list() -> list[str]:
        cut = []
        for i in range(len(sections)):
            if len(kept[i]) == originals[i]:
                continue
            if kept[i]:
                cut.append(f"{titles[i]} (kept {len(kept[i])} of {originals[i]} lines)")
            else:
                cut.append(f"{titles[i]} (left out)")
        return cut

    while True:
        body = _render(titles, kept)
        notice = _notice(budget, cut_list())
        text = f"{body}\n\n{notice}" if notice and body else (notice or body)
        over = len(text) - budget
        if over <= 0:
            return text, cut_list()
        victim = next((i for i in order if kept[i]), None)
        if victim is None:
            return text, cut_list()  # only protected sections are left
        lines = kept[victim]
        while lines and over > 0:
            over -= len(lines.pop()) + 1
        if not lines:
            continue
        # the first cut of a section lengthens the notice: go round again to re-measure


def build_briefing(inputs: BriefingInputs, budget: int) -> Briefing:
    """The deterministic briefing for ``inputs`` within ``budget`` characters."""
    sections = sections_for(inputs)
    text, trimmed = fit(sections, budget)
    return Briefing(
        text=text, sections=sections, trimmed=trimmed, budget=budget, trigger=inputs.trigger
    )


def trim_text(text: str, budget: int) -> tuple[str, bool]:
    """Any text (a replacement briefing from another plugin) cut to ``budget`` characters at a
    line boundary, with a notice; returns the text and whether it was cut."""
    text = text.strip()
    if len(text) <= budget:
        return text, False
    notice = f"_Briefing cut to its budget of {budget:,} characters._"
    room = budget - len(notice) - 2
    lines = text.split("\n")
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > room:
            break
        kept.append(line)
        used += len(line) + 1
    body = "\n".join(kept).rstrip()
    return (f"{body}\n\n{notice}" if body else notice), True
