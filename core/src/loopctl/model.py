"""The data loopctl passes around: agent messages and turns, test runs, iteration records,
decisions and prompt sections.

Everything here is an attrs class with plain-data fields so that it can be written to the state
files with :func:`loopctl.state.to_jsonable` and read back with cattrs. These classes are public
API: plugins receive and return them through the hooks in :mod:`loopctl.hookspecs`.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    # the names loopctl.model offers (from loopctl.runmodel, on first use: __getattr__)
    from loopctl.runmodel import ACTION_STRENGTH as ACTION_STRENGTH
    from loopctl.runmodel import Action as Action
    from loopctl.runmodel import AgentMessage as AgentMessage
    from loopctl.runmodel import CompletionVeto as CompletionVeto
    from loopctl.runmodel import Decision as Decision
    from loopctl.runmodel import Event as Event
    from loopctl.runmodel import MessageKind as MessageKind
    from loopctl.runmodel import NotAgentsFault as NotAgentsFault
    from loopctl.runmodel import PromptSection as PromptSection
    from loopctl.runmodel import RunOption as RunOption
    from loopctl.runmodel import TestRun as TestRun
    from loopctl.runmodel import ToolCall as ToolCall
    from loopctl.runmodel import TurnOutcome as TurnOutcome
    from loopctl.runmodel import TurnResult as TurnResult


class ErrorKind(str, enum.Enum):
    """Why an agent turn did not succeed. Adapters map each CLI's own signals onto these."""

    CONTEXT_OVERFLOW = "context_overflow"
    MAX_TURNS = "max_turns"
    AUTH = "auth"
    BILLING = "billing"
    RATE_LIMIT = "rate_limit"
    NETWORK = "network"
    TIMEOUT = "timeout"
    IDLE_TIMEOUT = "idle_timeout"
    CRASHED = "crashed"
    INVALID_OUTPUT = "invalid_output"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"
    #: The agent CLI rejected its command line at start (an unknown option, a value it does not
    #: accept), or the adapter its settings: a retry cannot help, so the run stops with a usage
    #: error (exit 2) that names the setting.
    USAGE = "usage"
    UNKNOWN = "unknown"


#: Error kinds that are the infrastructure's fault, not the agent's: never evidence of "stuck".
INFRASTRUCTURE_ERRORS = frozenset(
    {ErrorKind.RATE_LIMIT, ErrorKind.NETWORK, ErrorKind.TIMEOUT, ErrorKind.IDLE_TIMEOUT}
)


@attrs.define(frozen=True)
class Usage:
    """Token usage of one model request (not a running total)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def context_tokens(self) -> int:
        """How much of the context window this request occupied, output included."""
        return (
            self.input_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
            + self.output_tokens
        )

    @property
    def total_tokens(self) -> int:
        return self.context_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
        )


@attrs.define
class AgentSummary:
    """The part of a turn kept in the iteration record."""

    outcome: str = "ok"
    error_kind: str | None = None
    message: str = ""
    session_id: str | None = None
    usage: Usage = attrs.Factory(Usage)
    requests: int = 0
    context_tokens: int | None = None
    context_window: int | None = None
    cost_usd: float | None = None
    #: True when ``cost_usd`` was estimated from token counts, not reported by the CLI.
    cost_estimated: bool = False
    tool_calls: int = 0
    interrupted: bool = False
    interrupt_reason: str = ""
    duration_s: float = 0.0

    @classmethod
    def from_turn(cls, turn: TurnResult) -> AgentSummary:
        kind = turn.outcome.error_kind
        return cls(
            outcome="ok" if kind is None else "error",
            error_kind=None if kind is None else kind.value,
            message=turn.outcome.message[:2000],
            session_id=turn.session_id,
            usage=turn.usage,
            requests=len(turn.requests),
            context_tokens=turn.context_tokens,
            context_window=turn.context_window,
            cost_usd=turn.cost_usd,
            cost_estimated=turn.cost_estimated,
            tool_calls=len(turn.tool_calls),
            interrupted=turn.interrupted,
            interrupt_reason=turn.interrupt_reason,
            duration_s=round(turn.duration_s, 3),
        )


class IterationEnd(str, enum.Enum):
    """Why an iteration ended, in :attr:`IterationRecord.ending`: every ``before_iteration`` is
    closed by an ``after_iteration`` whose record says which of these it was."""

    #: The agent's turn ended and the tests ran (the usual case).
    TESTS_RAN = "tests_ran"
    #: The agent's turn failed in a way that ends the loop before the tests (a login or
    #: billing error, an agent that cannot start, too many crashes in a row).
    AGENT_FAILED = "agent_failed"
    #: The agent hit a rate limit; the loop waited it out and tries this iteration again.
    RATE_LIMITED = "rate_limited"
    #: Ctrl-C, SIGTERM or an error inside loopctl ended the iteration early; it is not
    #: recorded in ``iterations.jsonl`` and ``loopctl resume`` runs it again.
    INTERRUPTED = "interrupted"
    #: Not an iteration: the test run before the first agent turn of a fresh run
    #: (``test_first``). Its record (iteration 0, no agent) is seen by ``on_failure`` or
    #: ``on_success`` only, with no ``before_iteration``/``after_iteration`` around it, and is
    #: not written to ``iterations.jsonl``.
    TESTS_FIRST = "tests_first"


@attrs.define
class IterationRecord:
    """One line of ``iterations.jsonl``: what one iteration did and what came of it."""

    iteration: int
    #: How many session restarts came before this iteration.
    restarts: int = 0
    started_at: float = 0.0
    duration_s: float = 0.0
    tests_passed: bool = False
    test_exit_code: int | None = None
    error_count: int = 0
    error_fingerprint: str = ""
    failing_tests: list[str] = attrs.Factory(list)
    changed_files: list[str] = attrs.Factory(list)
    commit: str | None = None
    tree_hash: str | None = None
    agent: AgentSummary = attrs.Factory(AgentSummary)
    prompt_chars: int = 0
    #: What the loop decided after this iteration: continue, restart, stop.
    decision: str = "continue"
    reason: str = ""
    #: A stop's :class:`StopStatus` value ("" for continue and restart, and in older records):
    #: with ``message``, how the loop ended, for ``resume`` and ``status`` when ``loop-state.md``
    #: does not say so yet (its loopctl was killed in between).
    status: str = ""
    #: The words of a stop or restart decision for the user ("" for continue).
    message: str = ""
    #: Set by plugins (e.g. a failure classifier) through :meth:`loopctl.Loop.annotate`.
    annotations: dict[str, Any] = attrs.Factory(dict)
    #: Why the iteration ended: an :class:`IterationEnd` value.
    ending: str = IterationEnd.TESTS_RAN.value


class StopStatus(str, enum.Enum):
    """Why a loop ended. Each maps to an exit code (:data:`EXIT_CODES`); only ``complete`` is 0."""

    COMPLETE = "complete"
    MAX_ITERATIONS = "max_iterations"
    MAX_RESTARTS = "max_restarts"
    STUCK = "stuck"
    AGENT_ERROR = "agent_error"
    AUTH = "auth"
    BUDGET = "budget"
    WALL_CLOCK = "wall_clock"
    INTERRUPTED = "interrupted"
    #: A plugin stopped the loop with a reason of its own (the reason is recorded beside it).
    PLUGIN = "plugin"
    #: The state directory's disk (or the user's quota) is full; ``resume`` continues the loop
    #: once there is space again.
    DISK_FULL = "disk_full"
    #: The agent CLI rejected the command line loopctl gave it (a setting it does not accept),
    #: or the test command cannot pass whatever the code says (reason ``test_command_broken``:
    #: a path it names is missing, its runner refuses its options or finds no test, a program
    #: it runs is not there): exit code 2, as for any other usage error.
    USAGE_ERROR = "usage_error"


#: Exit code for usage errors: bad config, unknown agent, unwritable state directory.
EXIT_USAGE = 2

EXIT_CODES: dict[str, int] = {
    StopStatus.COMPLETE.value: 0,
    StopStatus.MAX_ITERATIONS.value: 10,
    StopStatus.MAX_RESTARTS.value: 11,
    StopStatus.STUCK.value: 12,
    StopStatus.AGENT_ERROR.value: 13,
    StopStatus.AUTH.value: 14,
    StopStatus.BUDGET.value: 15,
    StopStatus.WALL_CLOCK.value: 16,
    StopStatus.PLUGIN.value: 17,
    StopStatus.DISK_FULL.value: 18,
    StopStatus.USAGE_ERROR.value: EXIT_USAGE,
    StopStatus.INTERRUPTED.value: 130,
}


def exit_code_for(status: str) -> int:
    """The exit code of a run that ended with ``status``; unknown (plugin) statuses map to 17."""
    return EXIT_CODES.get(status, EXIT_CODES[StopStatus.PLUGIN.value])


#: The classes of a running loop, defined in :mod:`loopctl.runmodel` when first used: reading
#: iteration records (``loopctl status``, ``loopctl classify``) needs none of them.
_RUN_MODEL = frozenset(
    {
        "ACTION_STRENGTH",
        "Action",
        "AgentMessage",
        "CompletionVeto",
        "Decision",
        "Event",
        "MessageKind",
        "NotAgentsFault",
        "PromptSection",
        "RunOption",
        "TestRun",
        "ToolCall",
        "TurnOutcome",
        "TurnResult",
    }
)

if not TYPE_CHECKING:  # for mypy, the names are the imports above

    def __getattr__(name: str) -> Any:
        if name not in _RUN_MODEL:
            raise AttributeError(f"module 'loopctl.model' has no attribute {name!r}")
        from loopctl import runmodel

        value = getattr(runmodel, name)
        globals()[name] = value
        return value
