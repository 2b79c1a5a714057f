"""The events this plugin writes to ``events.jsonl`` (none of them ever holds the token)."""

from __future__ import annotations

from typing import Any

POSTED = "github.comment_posted"
FAILED = "github.comment_failed"
DISABLED = "github.disabled"
EVENT_TYPES = (POSTED, FAILED, DISABLED)


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl.events import BOOL, INT, OPT_INT, STR, STR_LIST, event

    return {
        POSTED: event(
            "The context-error comment was created or updated on GitHub.",
            {
                "action": {"enum": ["created", "updated"]},
                "comment_id": OPT_INT,
                "url": STR,
                "state": {"enum": ["failing", "resolved", "stopped", "passed"]},
                "for_iteration": OPT_INT,
            },
            {"superseded": INT, "attempts": INT, "recreated": BOOL},
            line="github: comment {action} ({state}) {url}",
        ),
        FAILED: event(
            "A comment update did not go out; the loop goes on.",
            {
                "status": OPT_INT,
                "reason": STR,
                "message": STR,
                "for_iteration": OPT_INT,
                "stopped": BOOL,
            },
            line="github: comment not posted ({reason}): {message}",
        ),
        DISABLED: event(
            "The plugin posts nothing this run: something is missing (the message says what to "
            "set). Also written as a loop.warning.",
            {"reason": STR, "message": STR, "missing": STR_LIST},
            line="",
        ),
    }


__all__ = ["DISABLED", "EVENT_TYPES", "FAILED", "POSTED", "event_schemas"]
