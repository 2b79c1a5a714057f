"""``[plugins.context-monitor]``: the thresholds, the window, the briefing budget.

Checked when the config loads, so a bad value stops ``loopctl run`` before the first iteration
with a message naming the key (``plugins.context-monitor.warn_threshold: …``).
"""

from __future__ import annotations

import math
from typing import Literal

import attrs

from loopctl import InvalidFields

#: The config section name, the plugin's entry-point name.
SECTION = "context-monitor"
#: The smallest briefing budget that still holds the status line and a few failed approaches.
MIN_BUDGET_CHARS = 300


@attrs.define(kw_only=True)
class ContextMonitorConfig:
    """The plugin's settings; every field has a default, so an absent section is fine."""

    #: Fraction of the window at which the session is restarted after the iteration.
    warn_threshold: float = 0.70
    #: Fraction at which a running turn is ended at the next message boundary.
    hard_threshold: float = 0.90
    #: The context window in tokens, overriding what the agent reports and the model table.
    window: int | None = None
    #: Context windows by model name, merged over loopctl's ``[models]`` table.
    models: dict[str, int] = attrs.Factory(dict)
    #: Size budget of the briefing (context-summary.md) in characters.
    summary_budget_chars: int = 2000
    #: How many of the latest tool calls the briefing shows in detail.
    recent_tool_calls: int = 10
    #: How many distinct older tool calls (per kind: reads, edits, commands, other) are kept.
    activity_retention: int = 200
    #: At the warn threshold, first ask the agent to finish its step and write a handoff.
    graceful_handoff: bool = False
    #: What to do with the files an interrupted turn changed: list them, or restore them.
    on_interrupted_turn: Literal["flag", "rollback"] = "flag"
    #: How long a plugin implementing ``context_monitor_briefing`` may take.
    briefing_hook_timeout_s: float = 60.0

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[tuple[str | int, ...], str]] = []
        warn, hard = self.warn_threshold, self.hard_threshold
        if not (math.isfinite(warn) and 0 < warn < 1):
            problems.append(
                (("warn_threshold",), f"must be a fraction between 0 and 1 (e.g. 0.7), got {warn}")
            )
        if not (math.isfinite(hard) and 0 < hard <= 1):
            problems.append(
                (("hard_threshold",), f"must be a fraction above 0 and at most 1, got {hard}")
            )
        elif math.isfinite(warn) and 0 < warn < 1 and hard <= warn:
            problems.append(
                (
                    ("hard_threshold",),
                    f"must be above warn_threshold ({warn}), got {hard}",
                )
            )
        if self.window is not None and self.window < 1:
            problems.append(
                (("window",), f"must be a context window in tokens (1 or more), got {self.window}")
            )
        for model, size in self.models.items():
            if size < 1:
                problems.append(
                    (
                        ("models", model),
                        f"must be a context window in tokens (1 or more), got {size}",
                    )
                )
        if self.summary_budget_chars < MIN_BUDGET_CHARS:
            problems.append(
                (
                    ("summary_budget_chars",),
                    f"must be at least {MIN_BUDGET_CHARS} characters, got {self.summary_budget_chars}",
                )
            )
        if self.recent_tool_calls < 0:
            problems.append(
                (("recent_tool_calls",), f"must be 0 or more, got {self.recent_tool_calls}")
            )
        if self.activity_retention < 0:
            problems.append(
                (("activity_retention",), f"must be 0 or more, got {self.activity_retention}")
            )
        timeout = self.briefing_hook_timeout_s
        if not (math.isfinite(timeout) and timeout > 0):
            problems.append(
                (
                    ("briefing_hook_timeout_s",),
                    f"must be a positive number of seconds, got {timeout}",
                )
            )
        if problems:
            raise InvalidFields(problems)


attrs.resolve_types(ContextMonitorConfig)
