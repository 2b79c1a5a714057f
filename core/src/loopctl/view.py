"""What a person (or a script) sees while a loop runs.

* ``live``: on a terminal, one line per event printed *above* a rich live panel (iteration N of
  max, the phase, elapsed time, tokens and context fill when known, the last test result), as
  pip, uv and cargo print above their progress bars: the terminal's scrollback keeps every
  line, the panel stays at the bottom. ``NO_COLOR`` turns its colours off (rich reads it), not
  the panel; ``FORCE_COLOR`` turns them on where rich would not, and on a pipe or a file
  gives the coloured lines without the panel.
* ``plain``: one line per event, for logs, pipes, ``TERM=dumb`` and ``--plain``; never an
  escape code.
* ``json``: every event as one JSON object per line on stdout, for scripts.

How an event reads (:func:`describe`): the core's own events have lines written here; a
plugin's event reads as the ``line`` template its schema declares, else as the ``summary``
string its data carries (:data:`SUMMARY_FIELD`), else generically (its name and its fields in
words). Every line passes :func:`loopctl.terminal.sanitize_line`.

A view never stops a loop: a closed pipe (``loopctl run … | head``) silences the view, and an
event it cannot describe is shown generically.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import IO, TYPE_CHECKING, Any, Protocol

from loopctl import humanize
from loopctl.model import Event
from loopctl.terminal import sanitize_line

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from loopctl.model import AgentMessage

#: Events too frequent to show one line each (a rate-limit wait ticks every second).
QUIET_EVENTS = frozenset({"agent.rate_limit_waiting"})
MODES = ("live", "plain", "json")


class View(Protocol):
    def __call__(self, event: Event) -> None: ...

    def on_message(self, message: AgentMessage) -> None: ...

    def close(self) -> None: ...


#: The data field in which a plugin writes how its event reads to a person (one line, in words).
SUMMARY_FIELD = "summary"


def choose_mode(*, json_output: bool, plain: bool = False, stream: IO[str] | None = None) -> str:
    """``json`` if asked; ``plain`` if asked (``--plain``); ``live`` on a terminal (not
    ``TERM=dumb``), and where ``FORCE_COLOR`` asks for colour on a pipe or a file (then
    without the panel, :func:`make_view`); ``plain`` otherwise. ``NO_COLOR`` takes the colour
    out of the live view, not the view."""
    if json_output:
        return "json"
    if plain:
        return "plain"
    tty = _is_terminal(stream or sys.stdout)
    if tty and os.environ.get("TERM") != "dumb":
        return "live"
    if not tty and os.environ.get("FORCE_COLOR") and not os.environ.get("NO_COLOR"):
        return "live"  # coloured lines, without the panel (make_view)
    return "plain"


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


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


_number = humanize.finite  # a finite number, or None for anything else (text, NaN, a huge int)
_count = humanize.count  # the one formatting of numbers for people (report.md, progress.md too)


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
    session = f" (session {_count(restarts + 1)})" if restarts else ""  # sessions count from 1
    return f"iteration {_text(e.iteration)}{session}"


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


def _tests_start(e: Event, d: Mapping[str, Any]) -> str:
    again = f" again ({_text(d.get('label'))})" if d.get("label") else ""
    first = " before the first turn" if e.iteration is None else ""
    return f"running tests{again}{first}: {_text(d.get('command'))}"


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


#: What each escalation of stuck detection does, in words.
_STUCK_WORDS = {
    "nudge": "telling the agent to try something else",
    "restart": "restarting the agent session",
    "stop": "stopping the loop",
}

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
    "tests.start": _tests_start,
    "tests.end": _tests_end,
    "tests.flaky": lambda e, d: (
        f"flaky: {_text(', '.join(str(t) for t in d.get('failing_tests') or []), 'a test', 300)} "
        "failed, then passed on an immediate re-run with nothing changed; taken as passing"
    ),
    "iteration.end": _iteration_end,
    "loop.completion_vetoed": lambda e, d: (
        f"tests passed, but completion was vetoed: {_text(d.get('reason'))}"
    ),
    "loop.completion_signal_missing": lambda e, d: (
        f"tests passed, but the agent did not say `{_text(d.get('signal'))}`; going on"
    ),
    "loop.stuck": lambda e, d: (
        f"stuck: the same failure {_plural(d.get('streak'), 'time')} in a row → "
        + _STUCK_WORDS.get(str(d.get("escalation")), _text(d.get("escalation")))
    ),
    "loop.failed_approach": lambda e, d: (
        ""
        if d.get("updated")
        else f"noted a failed approach: {_text(str(d.get('text') or '').partition(chr(10))[0])}"
    ),  # its first line (the diff under it is the prompt's); an entry updated was noted once
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
        f"restart {_text(d.get('number'))}: the agent starts "
        + (f"session {_count(n + 1)}" if (n := _number(d.get("number"))) else "a fresh session")
        + f" ({_text(d.get('reason'))}){_tail(d.get('message'))}"
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
}


#: Line templates plugins declared for their events (``loopctl.events.event(line=...)``).
_PLUGIN_LINES: dict[str, str] = {}


def use_event_lines(lines: Mapping[str, str]) -> None:
    """Show plugins' events with the line templates they declared."""
    _PLUGIN_LINES.update(lines)


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "?"


def describe(event: Event, lines: Mapping[str, str] | None = None) -> str:
    """One human line for an event ("" for an event its plugin hides from the views); never
    raises, whatever the event's data holds.

    In this order: the core's line for its own events; the ``line`` template a plugin declared
    for the event (``define_event(line=...)``); the ``summary`` string in the event's data
    (:data:`SUMMARY_FIELD`, which a plugin writes when a template cannot say it; ``""`` hides
    the event from the views); else the
    event's name and its fields in words (:func:`generic_line`). ``lines``: the templates to use
    instead of those :func:`use_event_lines` set."""
    data = event.data if isinstance(event.data, Mapping) else {}
    describer = _DESCRIBERS.get(event.type)
    if describer is not None:
        try:
            return describer(event, data)
        except Exception:  # noqa: BLE001 - odd data from a plugin: fall back to the generic line
            pass
    template = (_PLUGIN_LINES if lines is None else lines).get(event.type)
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
    summary = data.get(SUMMARY_FIELD)
    if isinstance(summary, str):  # "" hides the event, as an empty template does
        return _text(summary, "", 500)
    return generic_line(event.type, data)


def _words(value: Any) -> str:
    """A field's value in words: text as it is, numbers with separators, yes/no, a short list
    joined, anything bigger counted; "" for nothing."""
    if value is None or value == "" or value == [] or value == {}:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _count(value, "")
    if isinstance(value, str):
        return _text(value, "", 120)
    if isinstance(value, (list, tuple)):
        if all(
            isinstance(item, (str, int, float)) and not isinstance(item, bool) for item in value
        ):
            shown = [_words(item) for item in value[:3]]
            more = f" and {len(value) - 3} more" if len(value) > 3 else ""
            return _text(", ".join(item for item in shown if item) + more, "", 160)
        return _plural(len(value), "item")
    if isinstance(value, Mapping):
        return _plural(len(value), "field")
    return _text(str(value), "", 120)


def generic_line(type: str, data: Mapping[str, Any]) -> str:
    """``name (field value; field value)`` for an event nobody wrote a line for: field names
    with spaces, empty fields left out, lists and objects counted, never a cut-off repr."""
    parts = []
    for key, value in data.items():
        if key == "traceback" or not isinstance(key, str):
            continue
        words = _words(value)
        name = _text(key.replace("_", " "), "", 40)
        if words and name:
            parts.append(f"{name} {words}")
    name = _text(type)
    return name + (f" ({'; '.join(parts)})" if parts else "")


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


def _stamp(ts: Any) -> str:
    try:
        return time.strftime("%H:%M:%S", time.localtime(ts))
    except (TypeError, ValueError, OverflowError, OSError):
        return "--:--:--"


class _Turn:
    """What a view keeps of the agent's running turn: the lines its messages add at the
    view's ``detail`` (:mod:`loopctl.actions`), and the last thing it wrote."""

    def __init__(self, detail: str) -> None:
        self.detail = detail
        self.last_text: str | None = None

    def lines(self, message: AgentMessage) -> list[str]:
        from loopctl.actions import message_lines
        from loopctl.model import MessageKind

        if message.kind is MessageKind.TEXT and not message.sidechain and message.text:
            self.last_text = message.text
        return message_lines(message, self.detail)

    def before(self, event: Event) -> list[str]:
        """Lines shown before an event's own: the agent's last words before ``agent.end``."""
        if event.type == "agent.start":
            self.last_text = None
        if event.type != "agent.end" or self.detail != "actions":
            return []
        from loopctl.actions import said_line

        line, self.last_text = said_line(self.last_text), None
        return [line] if line else []


class PlainView:
    """``[HH:MM:SS] line`` per event, flushed at once so ``tail -f`` and pipes see it live;
    and the agent's actions as its turn goes (``detail``, :mod:`loopctl.actions`)."""

    def __init__(self, stream: IO[str] | None = None, *, detail: str = "actions") -> None:
        self.stream = stream or sys.stdout
        self.broken = False
        self.turn = _Turn(detail)

    def __call__(self, event: Event) -> None:
        if event.type in QUIET_EVENTS:
            return
        stamp = _stamp(event.ts)
        for line in [*self.turn.before(event), describe(event)]:
            if line:
                self._write(f"[{stamp}] {line}")

    def on_message(self, message: AgentMessage) -> None:
        lines = self.turn.lines(message)
        if lines:
            stamp = _stamp(time.time())
            for line in lines:
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

    def on_message(self, message: AgentMessage) -> None:
        pass  # events only: each line is an events.jsonl line


def _silence(stream: IO[str]) -> None:
    """Point a dead stdout at /dev/null so the interpreter's final flush does not complain."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass


class LiveView:
    """Each event's line printed above a rich Live panel, which is redrawn four times a second
    and stays at the bottom of the terminal; rich is imported only for this view. The console
    is rich's default one, so rich reads ``NO_COLOR``, ``FORCE_COLOR`` and the terminal's size
    itself.

    The view redraws the panel from a thread of its own, under the lock its lines are printed
    under: rich's own refresh thread could draw the panel between a line's cursor reset and
    its write, which glued that line to the panel's bottom border.

    ``panel=False`` (``FORCE_COLOR`` where stdout is not a terminal) prints the coloured lines
    only, and the panel once at the end: there is no terminal to redraw it in."""

    #: Seconds between the panel's redraws.
    redraw_every = 0.25

    def __init__(
        self,
        max_iterations: int,
        *,
        console: Console | None = None,
        panel: bool = True,
        detail: str = "actions",
    ) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console()
        self.max_iterations = max_iterations
        self.iteration = 0
        self.phase = "starting"
        self.started = time.monotonic()
        self.tokens: int | None = None  # None until an agent reports its usage
        #: What the running turn's requests used so far (agent.end then counts the turn).
        self.turn_tokens: int | None = None
        self.context: tuple[int, int | None] | None = None
        self.turn = _Turn(detail)
        self.last_tests = "—"
        self._lock = threading.Lock()
        #: Held while anything is written to the terminal: a line, or the panel's redraw.
        self._screen = threading.RLock()
        self._closed = threading.Event()
        self.live: Live | None = None
        if panel:
            self.live = Live(
                console=self.console,
                get_renderable=self._render,
                auto_refresh=False,
                transient=False,
            )
            self.live.start()
            threading.Thread(target=self._tick, name="loopctl-live-view", daemon=True).start()

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
                self.turn_tokens = None
                if _number(d.get("tokens")) is not None:
                    self.tokens = (self.tokens or 0) + int(_number(d.get("tokens")) or 0)
                tokens = _number(d.get("context_tokens"))
                if tokens:
                    window = _number(d.get("context_window"))
                    self.context = (int(tokens), int(window) if window else None)
            elif event.type == "tests.end":
                self.last_tests = _tests_end(event, d)
            elif event.type == "agent.rate_limit_wait":
                self.phase = f"waiting for the rate limit ({_seconds(d.get('seconds'))})"
            elif event.type == "loop.restart":
                self.phase = "restarting the agent session"
            elif event.type == "loop.end":
                self.phase = f"ended: {_text(d.get('status'))}"
        if event.type not in QUIET_EVENTS:
            for line in self.turn.before(event):
                self._print(event.ts, line, "italic")
            line = describe(event)
            if line:
                self._print(event.ts, line, _line_style(event))
        self._refresh()

    def on_message(self, message: AgentMessage) -> None:
        """An agent's message: its lines (the view's ``detail``), and its tokens in the panel
        as they are used."""
        usage = message.usage
        if usage is not None:
            with self._lock:
                self.turn_tokens = (self.turn_tokens or 0) + usage.total_tokens
                if not message.sidechain and usage.context_tokens:
                    window = message.context_window or (self.context or (0, None))[1]
                    self.context = (usage.context_tokens, window)
        for line in self.turn.lines(message):
            self._print(time.time(), line, "dim" if line.startswith("  ") else "cyan")

    def _print(self, ts: float, line: str, style: str) -> None:
        """``[HH:MM:SS] line`` above the panel: it goes to the terminal's scrollback."""
        from rich.text import Text

        text = Text()
        text.append(f"[{_stamp(ts)}] ", style="dim")
        text.append(line, style=style)  # Text: brackets in messages are not markup
        try:
            with self._screen:
                self.console.print(text, soft_wrap=True)
        except (BrokenPipeError, ValueError, OSError):  # the terminal is gone; the loop goes on
            pass

    def _tick(self) -> None:
        """Redraw the panel four times a second (its elapsed time moves) until closed."""
        while not self._closed.wait(self.redraw_every):
            self._refresh()

    def _refresh(self) -> None:
        if self.live is None:
            return
        try:
            with self._screen:
                if not self._closed.is_set():
                    self.live.refresh()
        except (BrokenPipeError, ValueError, OSError):
            pass

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
            grid.add_row("tokens", _panel_tokens(self.tokens, self.turn_tokens))
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
            return Panel(grid, title="loopctl", border_style="cyan")

    def close(self) -> None:
        if self.live is None:
            try:
                self.console.print(self._render())
            except (BrokenPipeError, ValueError, OSError):
                pass
            return
        with self._screen:
            self._closed.set()
            try:
                self.live.refresh()
            finally:
                self.live.stop()


def _panel_tokens(done: int | None, running: int | None) -> str:
    """The run's tokens: its finished turns' and what the running turn used so far."""
    if running is None:
        return humanize.tokens(done)
    return humanize.tokens((done or 0) + running) + " (this turn so far)"


def _line_style(event: Event) -> str:
    """The colour of an event's line in the live view (none where the event says nothing bad)."""
    data = event.data if isinstance(event.data, Mapping) else {}
    if event.type == "tests.end":
        return "green" if data.get("passed") else "red"
    if event.type in ("loop.warning", "plugin.error", "plugin.hung", "state.write_error"):
        return "yellow"
    if event.type == "loop.end":
        return "bold green" if data.get("exit_code") == 0 else "bold red"
    if event.type == "iteration.start":
        return "bold"
    return ""


def make_view(mode: str, *, max_iterations: int, detail: str = "actions") -> View:
    """The view of ``mode``; ``detail`` (:data:`loopctl.actions.DETAILS`): how much of the
    agent's turn it shows (the JSON view shows events only)."""
    if mode == "json":
        return JsonView()
    if mode == "live":
        return LiveView(max_iterations, panel=_is_terminal(sys.stdout), detail=detail)
    return PlainView(detail=detail)
