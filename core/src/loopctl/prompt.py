"""Assemble the agent prompt from plugins' sections, within a size budget.

Sections are placed by descending priority (ties keep contribution order). When the whole prompt
is over budget, the lowest-priority unprotected sections are cut first: each is shortened to
whole lines (never mid-line) or dropped, and a notice at the end says what was cut, so the agent
knows the prompt is incomplete.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from loopctl.model import PromptSection


@attrs.define
class ComposedPrompt:
    text: str
    #: Titles of the sections that made it in, in order.
    included: list[str]
    #: "Title (n of m chars kept)" for every section that was shortened or dropped.
    trimmed: list[str]


def _render(section: PromptSection, body: str) -> str:
    """The section as markdown; the body exactly as given (a goal keeps its trailing spaces)."""
    return f"## {section.title}\n\n{body}" + ("" if body.endswith("\n") else "\n")


def _keep_whole_lines(body: str, room: int) -> str:
    """The longest prefix of ``body`` made of whole lines that fits in ``room`` characters."""
    if room <= 0:
        return ""
    cut = body[: room + 1]
    if len(cut) <= room:
        return body
    end = cut.rfind("\n")
    return body[:end] if end > 0 else ""


def compose(sections: Sequence[PromptSection], budget_chars: int) -> ComposedPrompt:
    """Order ``sections`` and fit them into ``budget_chars`` (protected sections always fit)."""
    ordered = sorted(enumerate(sections), key=lambda pair: (-pair[1].priority, pair[0]))
    bodies = {index: section.body for index, section in ordered}
    notice_room = 200  # reserved for the trim notice

    def total() -> int:
        return sum(
            len(_render(sections[i], bodies[i])) + 1 for i, _ in ordered if bodies[i].strip()
        )

    trimmed: list[str] = []
    if total() > budget_chars:
        # Trim from the least important end; protected sections are never touched.
        for index, section in sorted(ordered, key=lambda pair: (pair[1].priority, -pair[0])):
            if section.protected or not bodies[index].strip():
                continue
            over = total() + notice_room - budget_chars
            if over <= 0:
                break
            original = bodies[index]
            rendered_overhead = len(_render(section, "")) + 1
            room = len(original) - over
            kept = _keep_whole_lines(original, room) if room > rendered_overhead else ""
            bodies[index] = kept
            trimmed.append(f"{section.title} ({len(kept)} of {len(original)} chars kept)")
    parts = [_render(sections[i], bodies[i]) for i, _ in ordered if bodies[i].strip()]
    included = [sections[i].title for i, _ in ordered if bodies[i].strip()]
    if trimmed:
        parts.append(
            "_Prompt budget reached; shortened or left out: " + "; ".join(trimmed) + "._\n"
        )
    return ComposedPrompt(text="\n".join(parts), included=included, trimmed=trimmed)
