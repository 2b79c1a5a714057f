"""The fuel gauge: how full the current session's context window is, from the adapters' messages.

The fill is the ``usage.context_tokens`` of the latest main-thread model request (input, cache
creation, cache read and output of that one request). It is never a sum: each request already
carries the whole conversation, so summing requests, turns or processes (as the bash predecessor
did) measures work done, not fullness. Sub-agent requests (``sidechain``) have their own context
and are ignored. A message without usage, or with zero tokens, is no measurement: the gauge stays
where it was, and "nothing measured yet" is reported as unknown, never as 0.

:meth:`Gauge.observe` runs on every streamed message, so it does integer work only: thresholds
are turned into token counts once per window size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping

import attrs

from loopctl import AgentMessage, MessageKind

# What one observation found (bit flags, combined).
NOTHING = 0
#: A new measurement whose whole percent differs from the last one reported (worth an event).
CHANGED = 1
#: The first measurement of the session: its baseline.
FIRST = 2
#: The fill reached the warn threshold for the first time in this session.
WARN = 4
#: The fill reached the hard threshold for the first time in this session.
HARD = 8


def threshold_tokens(fraction: float, window: int) -> int:
    """The smallest token count at or over ``fraction`` of ``window``.

    Exactly 70% of 200,000 is 140,000 and counts as reached; the tiny tolerance absorbs float
    rounding (0.7 * 200,000 is 139,999.99999999997 in binary floating point)."""
    return max(1, math.ceil(fraction * window - 1e-6))


@attrs.define(frozen=True)
class Reading:
    """One gauge value: tokens in the context and the window, either possibly unknown."""

    tokens: int | None
    window: int | None

    @property
    def known(self) -> bool:
        return self.tokens is not None and self.window is not None and self.window > 0

    @property
    def fraction(self) -> float | None:
        if self.tokens is None or self.window is None or self.window <= 0:
            return None
        return self.tokens / self.window

    @property
    def percent(self) -> float | None:
        fraction = self.fraction
        return None if fraction is None else round(100 * fraction, 1)

    def describe(self) -> str:
        if self.tokens is None:
            return "unknown (no token usage reported yet)"
        if not self.known:
            return f"{self.tokens:,} tokens (window unknown)"
        return f"{self.percent:g}% full ({self.tokens:,} of {self.window:,} tokens)"


class Gauge:
    """The context fill of one agent session at a time.

    The monitor calls :meth:`new_session` whenever loopctl starts a fresh agent session (every
    iteration in ``fresh`` mode, after a restart in ``resume`` mode); between those the gauge
    keeps its value, so in ``resume`` mode it follows the session across iterations.
    """

    __slots__ = (
        "_limits",
        "_model_windows",
        "baseline",
        "emitted_percent",
        "hard",
        "hard_hit",
        "model",
        "override",
        "reported_window",
        "session_id",
        "tokens",
        "warn",
        "warned",
        "window",
        "window_for_model",
    )

    def __init__(
        self,
        *,
        warn: float,
        hard: float,
        override: int | None = None,
        window_for_model: Callable[[str | None], int | None] | None = None,
        model: str | None = None,
    ) -> None:
        self.warn = warn
        self.hard = hard
        self.override = override if override and override > 0 else None
        self.window_for_model = window_for_model or (lambda model: None)
        self._limits: dict[int, tuple[int, int]] = {}
        self._model_windows: dict[str | None, int | None] = {}
        self.model = model
        self.session_id: str | None = None
        self.tokens: int | None = None
        self.window: int | None = None
        self.reported_window: int | None = None
        self.baseline: int | None = None
        self.warned = False
        self.hard_hit = False
        self.emitted_percent: int | None = None

    def new_session(self, session_id: str | None = None) -> None:
        """Start over: a fresh session has no fill until its first request reports one."""
        self.session_id = session_id
        self.tokens = None
        self.window = None
        self.reported_window = None
        self.baseline = None
        self.warned = False
        self.hard_hit = False
        self.emitted_percent = None

    def restore(self, session_id: str | None, tokens: int | None, window: int | None) -> None:
        """Carry a resumed session's last known fill over (after ``loopctl resume``)."""
        self.new_session(session_id)
        if tokens is not None and tokens > 0:
            self.tokens = tokens
            self.baseline = tokens
            self.window = window if window and window > 0 else None
            self.reported_window = self.window
            limits = self.limits()
            if limits is not None:
                self.warned = tokens >= limits[0]
                self.hard_hit = tokens >= limits[1]

    @property
    def reading(self) -> Reading:
        return Reading(self.tokens, self.window)

    def limits(self) -> tuple[int, int] | None:
        """(warn, hard) thresholds in tokens for the current window, or None if it is unknown."""
        window = self.window
        if window is None or window <= 0:
            return None
        limits = self._limits.get(window)
        if limits is None:
            limits = (threshold_tokens(self.warn, window), threshold_tokens(self.hard, window))
            self._limits[window] = limits
        return limits

    def resolve_window(self, model: str | None = None) -> int | None:
        """Override, else what the agent reported in this session, else the model table."""
        if self.override is not None:
            return self.override
        if self.reported_window is not None:
            return self.reported_window
        return self._window_of(model or self.model)

    def _window_of(self, model: str | None) -> int | None:
        try:
            return self._model_windows[model]
        except KeyError:
            pass
        try:
            window = self.window_for_model(model)
        except Exception:  # noqa: BLE001 - a bad table entry means "unknown", not a crash
            window = None
        if window is not None and (not isinstance(window, int) or window <= 0):
            window = None
        if len(self._model_windows) < 64:
            self._model_windows[model] = window
        return window

    def observe(self, message: AgentMessage) -> int:
        """Take one streamed message into account; returns the flags of what happened."""
        if message.sidechain:
            return NOTHING
        reported = message.context_window
        if reported is not None and reported > 0:
            self.reported_window = reported
        if message.model:
            self.model = message.model
        if message.session_id:
            self.session_id = message.session_id
        usage = message.usage
        if usage is None or message.kind is MessageKind.INIT:
            return NOTHING
        tokens = usage.context_tokens
        if tokens <= 0:
            return NOTHING  # "no usage" is unknown, never a fill of 0
        self.tokens = tokens
        window = self.override or self.reported_window or self._window_of(self.model)
        self.window = window
        flags = NOTHING
        if self.baseline is None:
            self.baseline = tokens
            flags = FIRST
        if window is None:
            return flags | (CHANGED if flags else NOTHING)
        percent = tokens * 100 // window
        if percent != self.emitted_percent:
            self.emitted_percent = percent
            flags |= CHANGED
        limits = self._limits.get(window) or self.limits()
        assert limits is not None
        if tokens >= limits[0] and not self.warned:
            self.warned = True
            flags |= WARN
        if tokens >= limits[1] and not self.hard_hit:
            self.hard_hit = True
            flags |= HARD
        return flags


def window_lookup(
    plugin_table: Mapping[str, int], loopctl_window: Callable[[str], int | None]
) -> Callable[[str | None], int | None]:
    """A model → window function: the plugin's own ``models`` table first, then loopctl's
    (``loop.context_window``: its ``[models]`` config over the built-in table).

    A ``models`` entry names a model exactly, or a prefix of its name (the longest wins);
    case and a provider path (``openrouter/…/``) are ignored. No model, no window.
    """
    table = {name.strip().lower(): size for name, size in plugin_table.items() if name.strip()}

    def lookup(model: str | None) -> int | None:
        if not model or not model.strip():
            return None
        if table:
            name = model.strip().lower()
            candidates = list(dict.fromkeys([name, name.rsplit("/", 1)[-1]]))
            for candidate in candidates:
                if candidate in table:
                    return table[candidate]
            for candidate in candidates:
                prefixes = [key for key in table if candidate.startswith(key)]
                if prefixes:
                    return table[max(prefixes, key=len)]
        return loopctl_window(model)

    return lookup
