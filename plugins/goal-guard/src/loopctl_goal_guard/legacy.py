"""Recover the user's goal from a goal the bash predecessor contaminated.

The bash tool appended synthesized sections to the goal (test failures, review remarks, human
feedback, build history), each after a blank line and starting with a fixed sentinel, and it
prepended one (``KNOWN FIX (from past success):`` followed by a blank line). Legacy state files
have no ``original_goal`` (or one that the same bug contaminated), so the only way back to the
user's words is to cut those sections off again, exactly where the bash tool's own sanitizer
cut them: at the first blank line that is followed by a sentinel.
"""

from __future__ import annotations

import re

import attrs

#: The prefix the bash tool prepended, ended by the first blank line.
KNOWN_FIX_PREFIX = "KNOWN FIX (from past success):"

#: The sentinels of the sections the bash tool appended, as they start after a blank line. The
#: "IMPORTANT — …" ones are also matched with an en dash or ASCII hyphens for hand-edited files.
SUFFIX_SENTINELS: tuple[str, ...] = (
    "BLOCKING ISSUES",
    "IMPORTANT — Previous build",
    "IMPORTANT — Code review",
    "IMPORTANT — Architecture",
    "IMPORTANT — Compound quality",
    "IMPORTANT (TDD mode)",
    "HUMAN FEEDBACK",
    "Historical context",
    "Discoveries from",
    "File hotspots",
    "Active security alerts",
    "Coverage baseline",
    "WARNING: Memory system",
    "## Previous Session Context",
    "## Plan Summary",
    "## Key Design Decisions",
    "## Skill Guidance",
    "## Historical Build Context",
    # goal-guard's own heading for notes in the working goal, should a goal ever be recovered
    # from a working goal this plugin wrote.
    "## Notes (goal-guard",
)


def _sentinel_pattern(sentinel: str) -> str:
    escaped = re.escape(sentinel)
    return escaped.replace(re.escape(" — "), r"[ \t]*(?:—|–|-{1,2})[ \t]*")


# A blank line (the bash tool wrote exactly "\n\n"; spaces on the blank line and CRLF endings of
# hand-edited files are tolerated), then a sentinel at the start of the next line. The match
# starts at the newline that ends the user's last line, so the goal keeps its exact text.
_SUFFIX = re.compile(
    r"\n[ \t]*\r?\n(?P<sentinel>" + "|".join(_sentinel_pattern(s) for s in SUFFIX_SENTINELS) + ")"
)
_BLANK_LINE = re.compile(r"\r?\n[ \t]*\r?\n")


@attrs.frozen
class Recovery:
    """What :func:`strip_synthesized_sections` found."""

    #: The goal with the synthesized sections removed (the input when nothing was found).
    text: str
    #: The sentinels of the removed sections, in the order they appeared.
    removed: tuple[str, ...] = ()
    #: How many characters were removed.
    removed_chars: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.removed)


def strip_synthesized_sections(goal: str) -> Recovery:
    """The goal without the sections the bash predecessor synthesized into it.

    A leading ``KNOWN FIX (from past success):`` block is removed through the first blank line
    (repeatedly, if it was prepended more than once); everything from the first blank line that
    is followed by a suffix sentinel to the end is removed. A result that would be empty is not
    used: the input is returned unchanged. Never raises.
    """
    text = goal
    removed: list[str] = []
    while text.startswith(KNOWN_FIX_PREFIX):
        blank = _BLANK_LINE.search(text)
        if blank is None:
            break
        removed.append(KNOWN_FIX_PREFIX)
        text = text[blank.end() :]
    match = _SUFFIX.search(text)
    if match is not None:
        removed.extend(m.group("sentinel") for m in _SUFFIX.finditer(text, match.start()))
        text = text[: match.start()]
    if not removed or not text.strip():
        return Recovery(goal)
    return Recovery(text, tuple(removed), len(goal) - len(text))


__all__ = ["KNOWN_FIX_PREFIX", "SUFFIX_SENTINELS", "Recovery", "strip_synthesized_sections"]
