"""What a person (or a script) sees while a loop runs.

* ``live``: a rich panel on a terminal: iteration N of max, the phase (agent or tests), elapsed
  time, tokens and context fill when known, the last test result, and recent events.
* ``plain``: one line per event, for logs, pipes and ``NO_COLOR``; never an escape code.
* ``json``: every event as one JSON object per line on stdout, for scripts.

A view never stops a loop: a closed pipe (``loopctl run … | head``) silences the view, and an
event it cannot describe is shown generically.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol

from loopctl.model import Event
from loopctl.terminal import sanitize_line

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

#: Events too frequent to show one line each (a rate-limit wait ticks every second).
QUIET_EVENTS = frozenset({"agent.rate_limit_waiting"})
MODES = ("live", "plain", "json")


class View(Protocol):
    def __call__(self, event: Event) -> None: ...

    def close(self) -> None: ...


def choose_mode(*, json_output: bool, stream: IO[str] | None = None) -> str:
    """``json`` if asked; ``live`` on a colour terminal; ``plain`` otherwise (or with NO_COLOR)."""
    if json_output:
        return "json"
    stream = stream or sys.stdout
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError, OSError):
        tty = False
    if os.environ.get("NO_COLOR") or not tty or os.environ.get("TERM") == "dumb":
        return "plain"
    return "live"


# --- one line per event ---------------------------------------------------------------------------


def _text(value: Any, default: str = "?", limit: int = 200) -> str:
    """``value`` as short, one-line, escape-free text; ``default`` when it is missing."""
    if value is None or value == "":
        return default
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    text = sanitize_line(text)  # escape sequences, C0/C1 controls, CR and BS: gone
    if not text:
        return default
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number(value: Any) -> float | None:
    """A finite number, or None for anything else (text, NaN, a huge int)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _count(value: Any, default: str = "?") -> str:
    number = _number(value)
    if number is None:
        return default
    return f"{number:,.0f}" if number == int(number) else f"{number:,.2f}"


def _seconds(value: Any) -> str:
    number = _number(value)
    return "? s" if number is None else f"{number:.1f} s"


def _plural(value: Any, noun: str) -> str:
    return f"{_count(value)} {noun}" + ("" if _number(value) == 1 else "s")


def _context(tokens: Any, window: Any) -> str:
    used, size = _number(tokens), _number(window)
    if not used:
        return ""
    if size:
        return f", context {used:,.0f}/{size:,.0f} ({100 * used / size:.0f}%)"
    return f", context {used:,.0f} tokens"


def _tail(*parts: Any) -> str:
    """`` — part, part`` for the parts that are present."""
    present = [_text(p, "") for p in parts]
    present = [p for p in present if p]
    return (" — " + ", ".join(present)) if present else ""


def _loop_start(e: Event, d: Mapping[str, Any]) -> str:
    verb = "resuming" if e.type == "loop.resume" else "starting"
    return (
        f"{verb} loop: agent {_text(d.get('agent'))}, tests `{_text(d.get('test_cmd'))}`, "
        f"up to {_plural(d.get('max_iterations'), 'iteration')}"
    )


def _iteration_start(e: Event, d: Mapping[str, Any]) -> str:
    restarts = _number(d.get("restarts", d.get("generation"))) or 0
    after = f" (after {_plural(restarts, 'restart')})" if restarts else ""
    return f"iteration {_text(e.iteration)}{after}"


def _agent_end(e: Event, d: Mapping[str, Any]) -> str:
    if d.get("outcome") == "ok":
        status = "ok"
    else:
        status = f"failed ({_text(d.get('error_kind'), 'error')}: {_text(d.get('message'), 'no message', 120)})"
    if d.get("interrupted"):
        status += ", interrupted"
    tokens = (
        "tokens unknown" if _number(d.get("tokens")) is None else _plural(d.get("tokens"), "token")
    )
    return (
        f"agent done in {_seconds(d.get('duration_s'))}: {status}; "
        f"{_plural(d.get('tool_calls'), 'tool call')}, {tokens}"
        f"{_context(d.get('context_tokens'), d.get('context_window'))}"
    )


def _tests_end(e: Event, d: Mapping[str, Any]) -> str:
    if d.get("passed"):
        return f"tests passed ({_seconds(d.get('duration_s'))})"
    why = "timed out" if d.get("timed_out") else f"exit {_text(d.get('exit_code'))}"
    return (
        f"tests failed ({why}, {_count(d.get('failing'))} failing, "
        f"{_plural(d.get('error_count'), 'error line')})"
    )


def _iteration_end(e: Event, d: Mapping[str, Any]) -> str:
    decision = _text(d.get("decision"), "continue")
    reason = _text(d.get("reason"), "")
    return f"iteration {_text(e.iteration)} done → {decision}" + (f" ({reason})" if reason else "")


def _loop_end(e: Event, d: Mapping[str, Any]) -> str:
    why = _text(d.get("message"), "") or _text(d.get("reason"), "")
    return (
        f"loop ended: {_text(d.get('status'))}"
        + (f" — {why}" if why else "")
        + f" (exit code {_text(d.get('exit_code'))})"
    )


_DESCRIBERS: dict[str, Callable[[Event, Mapping[str, Any]], str]] = {
    "loop.start": _loop_start,
    "loop.resume": _loop_start,
    "loop.warning": lambda e, d: f"warning: {_text(d.get('message'), 'no details', 500)}",
    "iteration.start": _iteration_start,
    "agent.start": lambda e, d: (
        f"agent {_text(d.get('agent'))} working (prompt {_count(d.get('prompt_chars'))} chars"
        + (", trimmed to fit" if d.get("trimmed") else "")
        + ")"
    ),
    "agent.end": _agent_end,
    "agent.turn_stopped": lambda e, d: (
        f"agent turn stopped early: {_text(d.get('reason'))}{_tail(d.get('message'))}"
    ),
    "agent.rate_limit_wait": lambda e, d: (
        f"rate limited: waiting {_seconds(d.get('seconds'))}"
        + (f" (until {_text(d.get('until'))})" if d.get("until") else "")
        + _tail(d.get("message"))
    ),
    "agent.rate_limit_waiting": lambda e, d: (
        f"still rate limited: {_seconds(d.get('seconds_left'))} left"
    ),
    "tests.start": lambda e, d: f"running tests: {_text(d.get('command'))}",
    "tests.end": _tests_end,
    "iteration.end": _iteration_end,
    "loop.completion_vetoed": lambda e, d: (
        f"tests passed, but completion was vetoed: {_text(d.get('reason'))}"
    ),
    "loop.completion_signal_missing": lambda e, d: (
        f"tests passed, but the agent did not say `{_text(d.get('signal'))}`; going on"
    ),
    "loop.stuck": lambda e, d: (
        f"stuck: the same failure {_plural(d.get('streak'), 'time')} in a row "
        f"(escalation: {_text(d.get('escalation'))})"
    ),
    "loop.failed_approach": lambda e, d: f"noted a failed approach: {_text(d.get('text'))}",
    "loop.not_agents_fault": lambda e, d: (
        f"not counted against the agent ({_text(d.get('source'))}): {_text(d.get('reason'))}"
    ),
    "loop.original_goal_restored": lambda e, d: (
        f"original goal restored by {_text(d.get('source'))} "
        f"({_count(d.get('chars'))} chars; the state file had {_count(d.get('previous_chars'))})"
    ),
    "loop.working_goal_set": lambda e, d: (
        f"working goal updated by {_text(d.get('source'))} ({_count(d.get('chars'))} chars)"
    ),
    "loop.iteration_budget_reduced": lambda e, d: (
        f"iteration limit lowered to {_count(d.get('max_iterations'))} by "
        f"{_text(d.get('source'))}{_tail(d.get('reason'))}"
    ),
    "loop.restart": lambda e, d: (
        f"restarting the agent session (#{_text(d.get('number'))}: {_text(d.get('reason'))})"
        + _tail(d.get("message"))
    ),
    "loop.end": _loop_end,
    "plugin.error": lambda e, d: (
        f"plugin {_text(d.get('plugin'))} failed in {_text(d.get('hook'))}: "
        f"{_text(d.get('error'))} (skipped)"
    ),
    "plugin.hung": lambda e, d: (
        f"plugin {_text(d.get('plugin'))} was still running its {_text(d.get('hook'))} hook "
        f"{_seconds(d.get('running_s'))} in, at the wall-clock limit; stopped it"
    ),
    "state.write_error": lambda e, d: (
        f"could not write a state file (the loop goes on): {_text(d.get('error'))}"
    ),
    "loop.context_usage": lambda e, d: (
        f"context {_count(d.get('percent'))}% full "
        f"({_count(d.get('tokens'))} of {_count(d.get('window'))} tokens)"
    ),
}


#: Line templates plugins declared for their events (``loopctl.events.event(line=...)``).
_PLUGIN_LINES: dict[str, str] = {}


def use_event_lines(lines: Mapping[str, str]) -> None:
    """Show plugins' events with the line templates they declared."""
    _PLUGIN_LINES.update(lines)


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def describe(event: Event) -> str:
    """One human line for an event ("" for an event its plugin hides from the views); never
    raises, whatever the event's data holds."""
    data = event.data if isinstance(event.data, Mapping) else {}
    describer = _DESCRIBERS.get(event.type)
    if describer is not None:
        try:
            return describer(event, data)
        except Exception:  # noqa: BLE001 - odd data from a plugin: fall back to the generic line
            pass
    template = _PLUGIN_LINES.get(event.type)
    if template is not None:
        if not template:
            return ""
        try:
            used = _template_fields(template)
            fields = _Fields(
                {
                    key: value
                    if isinstance(value, (int, float)) and not isinstance(value, bool)
                    else _text(value, "", 200)
                    for key, value in data.items()
                    if used is None or key in used
                }
            )
            return _text(template.format_map(fields), "", 500)
        except (ValueError, KeyError, IndexError, AttributeError):
            pass
    rest = ", ".join(
        f"{_text(key, '', 40)}={_text(value, '', 120)}"
        for key, value in data.items()
        if key != "traceback"
    )
    return f"{_text(event.type)}" + (f": {rest}" if rest else "")


@functools.lru_cache(maxsize=256)
def _template_fields(template: str) -> frozenset[str] | None:
    """The data keys a line template names (None: it cannot be parsed, so all of them): an
    event's other values are not made into text (a plugin's event may carry long lists)."""
    import re
    import string

    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name]
    except ValueError:
        return None
    return frozenset(re.split(r"[.\[]", name, maxsplit=1)[0] for name in names)


# --- the views ------------------------------------------------------------------------------------


class PlainView:
    """``[HH:MM:SS] line`` per event, flushed at once so ``tail -f`` and pipes see it live."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout
        self.broken = False

    def __call__(self, event: Event) -> None:
        if event.type in QUIET_EVENTS:
            return
        try:
            stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
        except (TypeError, ValueError, OverflowError, OSError):
            stamp = "--:--:--"
        line = describe(event)
        if line:
            self._write(f"[{stamp}] {line}")

    def _write(self, line: str) -> None:
        if self.broken:
            return
        try:
            print(line, file=self.stream, flush=True)
        except (BrokenPipeError, ValueError):  # reader gone (`| head`) or stream closed
            self.broken = True
            _silence(self.stream)
        except UnicodeEncodeError:
            encoding = getattr(self.stream, "encoding", None) or "ascii"
            safe = line.encode(encoding, errors="replace").decode(encoding, errors="replace")
            self._write(safe)

    def close(self) -> None:
        pass


class JsonView(PlainView):
    """One JSON object per line (``type``, ``ts``, ``iteration``, data), ASCII-only."""

    def __call__(self, event: Event) -> None:
        self._write(json.dumps(event.to_json(), default=str))


def _silence(stream: IO[str]) -> None:
    """Point a dead stdout at /dev/null so the interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class LiveView:
    """A rich Live panel, redrawn four times a second; rich is imported only for this view."""

    def __init__(self, max_iterations: int, *, console: Console | None = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console()
        self.max_iterations = max_iterations
        self.iteration = 0
        self.phase = "starting"
        self.started = time.monotonic()
        self.tokens = 0
        self.context: tuple[int, int | None] | None = None
        self.last_tests = "—"
        self.recent: deque[str] = deque(maxlen=6)
        self._lock = threading.Lock()
        self.live = Live(
            console=self.console,
            get_renderable=self._render,
            refresh_per_second=4,
            transient=False,
        )
        self.live.start()

    def __call__(self, event: Event) -> None:
        d = event.data
        with self._lock:
            if event.type == "iteration.start":
                self.iteration = event.iteration or self.iteration
            elif (
                event.type == "loop.start"
                or event.type == "loop.resume"
                or event.type == "loop.iteration_budget_reduced"
            ):
                self.max_iterations = int(_number(d.get("max_iterations")) or self.max_iterations)
            elif event.type == "agent.start":
                self.phase = f"agent {_text(d.get('agent'))} working"
            elif event.type == "tests.start":
                self.phase = "running tests"
            elif event.type == "agent.end":
                self.tokens += int(_number(d.get("tokens")) or 0)
                tokens = _number(d.get("context_tokens"))
                if tokens:
                    window = _number(d.get("context_window"))
                    self.context = (int(tokens), int(window) if window else None)
            elif event.type == "loop.context_usage":
                tokens = _number(d.get("tokens"))
                if tokens:
                    window = _number(d.get("window"))
                    self.context = (int(tokens), int(window) if window else None)
            elif event.type == "tests.end":
                self.last_tests = _tests_end(event, d)
            elif event.type == "agent.rate_limit_wait":
                self.phase = f"waiting for the rate limit ({_seconds(d.get('seconds'))})"
            elif event.type == "loop.restart":
                self.phase = "restarting the agent session"
            elif event.type == "loop.end":
                self.phase = f"ended: {_text(d.get('status'))}"
            if event.type not in QUIET_EVENTS and event.type not in ("tests.start", "agent.start"):
                line = describe(event)
                if line:
                    self.recent.append(line)
        self.live.refresh()

    def _render(self) -> RenderableType:
        from rich.panel import Panel
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        with self._lock:
            grid = Table.grid(padding=(0, 2))
            grid.add_column(style="bold")
            grid.add_column()
            grid.add_row("iteration", f"{self.iteration} of {self.max_iterations}")
            grid.add_row("phase", Text(self.phase))
            grid.add_row("elapsed", f"{time.monotonic() - self.started:.0f} s")
            grid.add_row("tokens", f"{self.tokens:,}")
            if self.context is not None:
                tokens, window = self.context
                if window:
                    bar = ProgressBar(total=window, completed=min(tokens, window), width=30)
                    gauge = Table.grid(padding=(0, 1))
                    gauge.add_row(bar, f"{100 * tokens / window:.0f}% ({tokens:,}/{window:,})")
                    grid.add_row("context", gauge)
                else:
                    grid.add_row("context", f"{tokens:,} tokens (window unknown)")
            grid.add_row("last tests", Text(self.last_tests))
            for line in self.recent:
                grid.add_row("", Text(line))  # Text: brackets in messages are not markup
            return Panel(grid, title="loopctl", border_style="cyan")

    def close(self) -> None:
        try:
            self.live.refresh()
        finally:
            self.live.stop()


def make_view(mode: str, *, max_iterations: int) -> View:
    if mode == "json":
        return JsonView()
    if mode == "live":
        return LiveView(max_iterations)
    return PlainView()
