"""Graceful handoff (S7 in the analysis), off by default.

At the warn threshold the agent gets one more turn in the same session, asked to finish the step
it is on and write a short handoff note; then the session is restarted. The note is the agent's
own words from a context that is already degraded, so loopctl never trusts it alone: it is
cross-checked against git (files it names that did not change, changed files it does not name)
and shown beside the deterministic briefing, never instead of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

#: The file the agent is asked to write, in the state directory.
HANDOFF_FILE = "handoff.md"
#: How much of the note is kept.
MAX_HANDOFF_CHARS = 4000

_PATHISH = re.compile(r"(?<![\w/.-])([\w.-]+(?:/[\w.-]+)*\.[A-Za-z0-9]{1,8}|[\w.-]+(?:/[\w.-]+)+)")


def request_text(path: Path, reading: str) -> str:
    """The prompt section that asks for the handoff."""
    return (
        f"Your context window is {reading}. loopctl will start a fresh session after this "
        "turn, and that session will not remember this one.\n\n"
        "In this turn: finish the step you are on (do not start new work), make sure every file "
        "you edited is complete and consistent, then write a short handoff note to "
        f"`{path}` with: what is done, what remains, approaches that did not work, and any file "
        "that is still half-done. The next session starts from that note and from git."
    )


def read_handoff(path: Path) -> str | None:
    """The note the agent wrote (bounded), or None if there is none."""
    try:
        data = path.read_bytes()[: MAX_HANDOFF_CHARS * 4]
    except OSError:
        return None
    text = data.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    if len(text) > MAX_HANDOFF_CHARS:
        text = text[:MAX_HANDOFF_CHARS].rsplit("\n", 1)[0] + "\n[… the rest of the note is cut]"
    return text


def mentioned_paths(text: str) -> list[str]:
    """Things in ``text`` that look like file paths (``src/a.py``, ``README.md``)."""
    found = []
    for match in _PATHISH.finditer(text):
        candidate = match.group(1).strip(".").lstrip("./")
        if not candidate or candidate.startswith(("http", "www.")):
            continue
        if "/" not in candidate:
            stem, _, extension = candidate.rpartition(".")
            # "e.g", "i.e", "1.2.3" are not files
            if len(stem) < 2 or not any(char.isalpha() for char in extension):
                continue
        found.append(candidate)
    return list(dict.fromkeys(found))


def cross_check(text: str, changed: Iterable[str], exists: Iterable[str] = ()) -> list[str]:
    """loopctl's check of the note against git: files it names that show no change, and changed
    files it does not name. ``exists`` lists named paths that exist (unchanged files it only
    mentions are fine to name)."""
    changed_set = {path.strip() for path in changed if path.strip()}
    named = mentioned_paths(text)
    existing = set(exists)

    def is_changed(name: str) -> bool:
        return any(path == name or path.endswith("/" + name) for path in changed_set)

    def is_named(path: str) -> bool:
        return any(path == name or path.endswith("/" + name) for name in named)

    lines = ["loopctl checked the note against git:"]
    missing = [name for name in named if not is_changed(name) and name not in existing]
    unchanged = [name for name in named if not is_changed(name) and name in existing]
    unnamed = sorted(path for path in changed_set if not is_named(path))
    if missing:
        lines.append("- named in the note but not found in the project: " + ", ".join(missing[:10]))
    if unchanged:
        lines.append("- named in the note but not changed: " + ", ".join(unchanged[:10]))
    if unnamed:
        lines.append(
            "- changed but not named in the note: "
            + ", ".join(unnamed[:10])
            + (f" and {len(unnamed) - 10} more" if len(unnamed) > 10 else "")
        )
    if len(lines) == 1:
        lines.append("- every changed file is named in the note, and every file it names changed.")
    return lines
