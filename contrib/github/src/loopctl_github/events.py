"""The events this plugin writes to ``events.jsonl`` (none of them ever holds the token)."""

from __future__ import annotations

from typing import Any

POSTED = "github.comment_posted"
FAILED = "github.comment_failed"
DISABLED = "github.disabled"
EVENT_TYPES = (POSTED, FAILED, DISABLED)


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl import EventField, define_event

    return {
        POSTED: define_event(
            "The context-error comment was created or updated on GitHub.",
            {
                "action": {"enum": ["created", "updated"]},
                "comment_id": EventField.OPT_INT,
                "url": EventField.STR,
                "state": {"enum": ["failing", "resolved", "stopped", "passed"]},
                "for_iteration": EventField.OPT_INT,
            },
            {"superseded": EventField.INT, "attempts": EventField.INT, "recreated": EventField.BOOL},
            line="github: comment {action} ({state}) {url}",
        ),
        FAILED: define_event(
            "A comment update did not go out; the loop goes on.",
            {
                "status": EventField.OPT_INT,
                "reason": EventField.STR,
                "message": EventField.STR,
                "for_iteration": EventField.OPT_INT,
                "stopped": EventField.BOOL,
            },
            line="github: comment not posted ({reason}): {message}",
        ),
        DISABLED: define_event(
            "The plugin posts nothing this run: something is missing (the message says what to "
            "set). Also written as a loop.warning.",
            {"reason": EventField.STR, "message": EventField.STR, "missing": EventField.STR_LIST},
            line="",
        ),
    }


__all__ = ["DISABLED", "EVENT_TYPES", "FAILED", "POSTED", "event_schemas"]
