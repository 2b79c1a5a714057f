"""What a person (or a script) sees while a loop runs.

* ``live``: a rich panel on a terminal: iteration N of max, the phase (agent or tests), elapsed
  time, tokens and context fill when known, the last test result, and recent events.
* ``plain``: one line per event, for logs, pipes and ``NO_COLOR``.
* ``json``: every event as one JSON object per line on stdout, for scripts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from typing import IO, Any

from loopctl.model import Event

QUIET_EVENTS = frozenset({"agent.rate_limit_waiting"})


def choose_mode(*, json_output: bool, stream: IO[str] | None = None) -> str:
    """``json`` if asked; ``live`` on a colour terminal; ``plain`` otherwise (or with NO_COLOR)."""
    if json_output:
        return "json"
    stream = stream or sys.stdout
    if os.environ.get("NO_COLOR") or not stream.isatty() or os.environ.get("TERM") == "dumb":
        return "plain"
    return "live"


def describe(event: Event) -> str:
    """One human line for an event."""
    d = event.data
    t = event.type
    if t in ("loop.start", "loop.resume"):
        verb = "resuming" if t == "loop.resume" else "starting"
        return f"{verb} loop: agent {d.get('agent')}, tests `{d.get('test_cmd')}`, up to {d.get('max_iterations')} iterations"
    if t == "iteration.start":
        return f"iteration {event.iteration} (session {d.get('generation', 0) + 1})"
    if t == "agent.start":
        return f"agent {d.get('agent')} working (prompt {d.get('prompt_chars')} chars)"
    if t == "agent.end":
        status = "ok" if d.get("outcome") == "ok" else f"error: {d.get('error_kind')} {d.get('message', '')[:120]}"
        ctx = _context(d.get("context_tokens"), d.get("context_window"))
        return f"agent done in {d.get('duration_s')} s: {status}; {d.get('tool_calls')} tool calls, {d.get('tokens')} tokens{ctx}"
    if t == "tests.start":
        return f"running tests: {d.get('command')}"
    if t == "tests.end":
        if d.get("passed"):
            return f"tests passed ({d.get('duration_s')} s)"
        why = "timed out" if d.get("timed_out") else f"exit {d.get('exit_code')}"
        return f"tests failed ({why}, {d.get('failing')} failing, {d.get('error_count')} error lines)"
    if t == "iteration.end":
        return f"iteration {event.iteration} → {d.get('decision')} {d.get('reason', '')}".rstrip()
    if t == "loop.restart":
        return f"restarting the agent session (#{d.get('number')}: {d.get('reason')}) {d.get('message', '')}".rstrip()
    if t == "loop.end":
        return f"loop ended: {d.get('status')} — {d.get('message') or d.get('reason')} (exit code {d.get('exit_code')})"
    if t == "plugin.error":
        return f"plugin {d.get('plugin')} failed in {d.get('hook')}: {d.get('error')}"
    if t == "agent.rate_limit_wait":
        return f"rate limited: waiting {d.get('seconds')} s — {d.get('message', '')}"
    if t == "loop.context_usage":
        return f"context {d.get('percent')}% full ({d.get('tokens')} of {d.get('window')} tokens)"
    rest = ", ".join(f"{k}={_short(v)}" for k, v in d.items() if k not in ("traceback",))
    return f"{t}" + (f": {rest}" if rest else "")


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= 120 else text[:117] + "…"


def _context(tokens: Any, window: Any) -> str:
    if not tokens:
        return ""
    if window:
        return f", context {tokens}/{window} ({100 * tokens / window:.0f}%)"
    return f", context {tokens} tokens"


class PlainView:
    def __init__(self, stream: IO[str] | None = None) -> None:
        self.stream = stream or sys.stdout

    def __call__(self, event: Event) -> None:
        if event.type in QUIET_EVENTS:
            return
        stamp = time.strftime("%H:%M:%S", time.localtime(event.ts))
        print(f"[{stamp}] {describe(event)}", file=self.stream, flush=True)

    def close(self) -> None:
        pass


class JsonView(PlainView):
    def __call__(self, event: Event) -> None:
        print(json.dumps(event.to_json(), default=str, ensure_ascii=False), file=self.stream, flush=True)


class LiveView:
    """A rich Live panel; rich is imported only when this view is used."""

    def __init__(self, max_iterations: int) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = Console()
        self.max_iterations = max_iterations
        self.iteration = 0
        self.phase = "starting"
        self.started = time.monotonic()
        self.tokens = 0
        self.context: tuple[int, int | None] | None = None
        self.last_tests = "—"
        self.recent: deque[str] = deque(maxlen=6)
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
        self.live.start()

    def __call__(self, event: Event) -> None:
        d = event.data
        if event.type == "iteration.start":
            self.iteration = event.iteration or self.iteration
        elif event.type == "agent.start":
            self.phase = "agent"
        elif event.type == "tests.start":
            self.phase = "tests"
        elif event.type == "agent.end":
            self.tokens += int(d.get("tokens") or 0)
            if d.get("context_tokens"):
                self.context = (int(d["context_tokens"]), d.get("context_window"))
        elif event.type == "loop.context_usage" and d.get("tokens"):
            self.context = (int(d["tokens"]), d.get("window"))
        elif event.type == "tests.end" and d.get("command"):
            self.last_tests = "passed" if d.get("passed") else f"failed ({d.get('failing')} failing)"
        elif event.type == "agent.rate_limit_wait":
            self.phase = f"waiting for rate limit ({d.get('seconds')} s)"
        elif event.type == "loop.end":
            self.phase = f"ended: {d.get('status')}"
        if event.type not in QUIET_EVENTS and event.type not in ("tests.start", "agent.start"):
            self.recent.append(describe(event))
        self.live.update(self._render())

    def _render(self) -> Any:
        from rich.panel import Panel
        from rich.progress_bar import ProgressBar
        from rich.table import Table

        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_row("iteration", f"{self.iteration} of {self.max_iterations}")
        grid.add_row("phase", self.phase)
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
        grid.add_row("last tests", self.last_tests)
        for line in self.recent:
            grid.add_row("", line)
        return Panel(grid, title="loopctl", border_style="cyan")

    def close(self) -> None:
        self.live.update(self._render())
        self.live.stop()


def make_view(mode: str, *, max_iterations: int) -> PlainView | LiveView:
    if mode == "json":
        return JsonView()
    if mode == "live":
        return LiveView(max_iterations)
    return PlainView()
