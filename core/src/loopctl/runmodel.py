"""The data of a running loop: an agent's turn (:class:`TurnResult`, its messages and tool
calls), a test run (:class:`TestRun`), what plugins return from hooks (:class:`Decision`,
:class:`PromptSection` …) and events.

Part of :mod:`loopctl.model`, which offers every name here: a module of its own so that the
commands that only read what a loop recorded (``loopctl status``, ``loopctl classify``) do not
define these classes (each attrs class costs a command's start-up about 0.3 ms); it is loaded
the first time one of them is used.
"""

from __future__ import annotations

import enum
from typing import Any

import attrs

from loopctl.model import ErrorKind, Usage


@attrs.define
class ToolCall:
    """One tool call the agent made, reduced to what a person or a briefing needs."""

    name: str
    #: The input that identifies the call: a file path, a command line, a pattern.
    key_input: str = ""
    id: str = ""
    #: A short excerpt of the tool's result, filled in when the result arrives.
    result_excerpt: str | None = None
    is_error: bool | None = None
    #: Exit code of a shell command, when the agent reports it.
    exit_code: int | None = None


class MessageKind(str, enum.Enum):
    """What a parsed agent message carries."""

    INIT = "init"  # session started; session_id and model are known
    TEXT = "text"  # assistant prose
    TOOL_CALL = "tool_call"  # the agent asked for a tool
    TOOL_RESULT = "tool_result"  # a tool answered (tool_call.id names the call)
    USAGE = "usage"  # a model request completed; `usage` is that request's usage
    SYSTEM = "system"  # CLI housekeeping: retries, compaction, warnings
    ERROR = "error"  # the CLI reported an error (not necessarily terminal)
    RESULT = "result"  # the turn's final result line


@attrs.define
class AgentMessage:
    """One parsed message from a running agent, streamed to plugins through ``on_agent_message``.

    ``usage`` is set on the message that completes a model request, once per request, so
    ``usage.context_tokens`` of the latest main-thread message is the current context fill.
    Messages from sub-agents carry ``sidechain=True`` and must not count toward that fill.
    """

    kind: MessageKind
    text: str | None = None
    tool_call: ToolCall | None = None
    usage: Usage | None = None
    session_id: str | None = None
    model: str | None = None
    context_window: int | None = None
    sidechain: bool = False
    #: The CLI's own type name for the line this came from (e.g. ``assistant``, ``item.completed``).
    raw_type: str = ""


@attrs.define
class TurnOutcome:
    """How a turn ended. ``error_kind`` is None on success; ``message`` is the CLI's own words."""

    error_kind: ErrorKind | None = None
    message: str = ""
    #: For rate limits: when the CLI says the limit resets (epoch seconds).
    retry_at: float | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None


@attrs.define
class TurnResult:
    """Everything an adapter learned from one agent turn."""

    outcome: TurnOutcome = attrs.Factory(TurnOutcome)
    #: False when the agent could not even be started (its executable is missing, say):
    #: trying again cannot help, so the loop stops instead of retrying.
    started: bool = True
    session_id: str | None = None
    final_text: str = ""
    tool_calls: list[ToolCall] = attrs.Factory(list)
    #: Usage of each main-thread model request, in order.
    requests: list[Usage] = attrs.Factory(list)
    #: Context fill after the latest main-thread request; None when no usage was reported.
    context_tokens: int | None = None
    context_window: int | None = None
    cost_usd: float | None = None
    #: True when ``cost_usd`` was estimated from token counts and a price table
    #: (:mod:`loopctl.pricing`), not reported by the CLI.
    cost_estimated: bool = False
    model: str | None = None
    exit_code: int | None = None
    duration_s: float = 0.0
    stderr_tail: str = ""
    #: True when loopctl ended the turn early (a plugin asked, or a timeout fired).
    interrupted: bool = False
    interrupt_reason: str = ""

    @property
    def usage(self) -> Usage:
        """Sum over every request of the turn: what the turn cost, not how full the context is."""
        total = Usage()
        for request in self.requests:
            total = total + request
        return total


@attrs.define
class TestRun:
    """The result of running the test command once."""

    __test__ = False  # not a pytest test class

    command: str
    exit_code: int | None
    duration_s: float = 0.0
    timed_out: bool = False
    #: The tail of the combined output, bounded by ``limits.test_output_bytes``.
    output: str = ""
    #: The decisive error lines extracted from the output, in order, bounded.
    error_lines: list[str] = attrs.Factory(list)
    #: Ids of failing tests where the runner names them (``tests/test_x.py::test_y``).
    failing_tests: list[str] = attrs.Factory(list)
    #: Which output format the extractor recognised (pytest, cargo, go, …), or "generic".
    runner: str = "generic"
    #: Normalised fingerprint of the error lines (numbers, paths, hex, times masked); "" on pass.
    fingerprint: str = ""
    #: How many tests passed and failed, where the runner's summary says (None otherwise).
    passed_count: int | None = None
    failed_count: int | None = None
    #: "" for the iteration's own test run; a plugin's re-run carries the label it gave
    #: :meth:`loopctl.Loop.run_tests` (``rerun``, ``flaky-check`` …).
    label: str = ""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class Action(str, enum.Enum):
    CONTINUE = "continue"
    RESTART = "restart"
    STOP = "stop"


#: Strength of each action when several plugins decide at once: the strongest wins.
ACTION_STRENGTH = {Action.CONTINUE: 0, Action.RESTART: 1, Action.STOP: 2}


@attrs.define(frozen=True)
class Decision:
    """What a plugin asks the loop to do next (returned from ``after_iteration`` or
    ``on_agent_message``). Use the constructors: ``Decision.restart("context_exhaustion", "…")``,
    ``Decision.stop("dependency_issue", "…")``, ``Decision.complete()``."""

    action: Action
    #: A short machine-readable reason (``context_exhaustion``, ``stuck``, ``dependency_issue``…).
    reason: str = ""
    #: Words for the user: shown when the loop restarts or stops, and in the report.
    message: str = ""
    #: For a stop: the run's :class:`StopStatus` value, which sets the exit code.
    status: str = ""
    #: At most this many more iterations after this one (a plugin cutting the budget: a
    #: loop it judges unproductive, say). None leaves the budget alone; the loop always gets
    #: at least the next iteration it has already decided on.
    remaining_iterations: int | None = None
    #: The plugin that returned it (filled in by the plugin host); ``engine`` for loopctl's own.
    source: str = ""

    @classmethod
    def proceed(
        cls, reason: str = "", message: str = "", *, remaining_iterations: int | None = None
    ) -> Decision:
        """Go on with the next iteration (optionally with a smaller budget)."""
        return cls(Action.CONTINUE, reason, message, remaining_iterations=remaining_iterations)

    @classmethod
    def restart(
        cls, reason: str, message: str = "", *, remaining_iterations: int | None = None
    ) -> Decision:
        """End the agent session after this iteration and start a fresh one (optionally with a
        smaller budget)."""
        return cls(Action.RESTART, reason, message, remaining_iterations=remaining_iterations)

    @classmethod
    def stop(cls, reason: str, message: str = "", *, status: str = "plugin") -> Decision:
        """Stop the loop. ``status`` (a :class:`StopStatus` value) sets the exit code; a
        plugin's own stop keeps the default ``plugin`` (exit code 17)."""
        return cls(Action.STOP, reason, message, status=str(getattr(status, "value", status)))

    @classmethod
    def complete(cls, message: str = "the goal is met") -> Decision:
        """Stop the loop as a success (status ``complete``, exit code 0)."""
        return cls(Action.STOP, "complete", message, status="complete")


@attrs.define(frozen=True)
class NotAgentsFault:
    """Returned from ``on_failure``: this iteration failed for a reason the agent cannot fix (a
    flaky test, a broken environment). Stuck detection skips it, as it skips rate limits and
    network errors, and the record is annotated with ``not_agents_fault``."""

    reason: str
    #: The plugin that returned it (filled in by the plugin host).
    source: str = ""


@attrs.define(frozen=True)
class CompletionVeto:
    """Returned from ``on_success``: do not count this iteration's passing tests as completion
    (a pass the plugin believes is flaky, say). The loop goes on."""

    reason: str
    #: The plugin that returned it (filled in by the plugin host).
    source: str = ""


@attrs.define(frozen=True)
class PromptSection:
    """A titled block of the agent prompt, contributed through ``compose_prompt``.

    Sections are placed by descending ``priority``; when the prompt is over its size budget,
    the lowest-priority unprotected sections are trimmed first (at line boundaries, with a notice).
    """

    title: str
    body: str
    #: 0–100; higher comes first and is trimmed last. The goal is 100.
    priority: int = 50
    #: Protected sections are never trimmed.
    protected: bool = False
    #: Which plugin contributed it (filled in by the engine when empty).
    source: str = ""


@attrs.define(frozen=True)
class RunOption:
    """A ``loopctl run``/``resume`` option a plugin adds (``register_run_options``): ``flag``
    sets the config key ``key`` (a dotted path such as ``plugins.NAME.KEY``)."""

    flag: str
    key: str
    help: str = ""
    metavar: str = "VALUE"
    #: The values accepted, when the option is an enumeration.
    choices: tuple[str, ...] | None = None


@attrs.define(frozen=True)
class Event:
    """One line of ``events.jsonl``: a ``type`` such as ``loop.context_usage``, a timestamp, and data."""

    type: str
    ts: float
    data: dict[str, Any] = attrs.Factory(dict)
    iteration: int | None = None

    def to_json(self) -> dict[str, Any]:
        line: dict[str, Any] = {"type": self.type, "ts": self.ts}
        if self.iteration is not None:
            line["iteration"] = self.iteration
        line.update(self.data)
        return line
