"""The events this plugin writes to ``events.jsonl`` (none of them ever holds the token).

Every type starts with the plugin's name, ``github.``; the names are published as the constants
below (re-exported from :mod:`loopctl_github`), for other plugins and tests to match on.
"""

from __future__ import annotations

from typing import Any

#: What every event type of this plugin starts with.
PREFIX = "github."
#: The comment was created or updated.
POSTED = PREFIX + "comment_posted"
#: An update did not go out; the loop goes on.
FAILED = PREFIX + "comment_failed"
#: Nothing is posted this run (a setting or the context-errors plugin is missing).
DISABLED = PREFIX + "disabled"
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
            {
                "superseded": EventField.INT,
                "attempts": EventField.INT,
                "recreated": EventField.BOOL,
            },
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


__all__ = ["DISABLED", "EVENT_TYPES", "FAILED", "POSTED", "PREFIX", "event_schemas"]
