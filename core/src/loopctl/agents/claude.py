"""The ``claude`` adapter: Anthropic's Claude Code CLI in print mode with stream-json output.

Each turn runs ``claude -p --output-format stream-json --verbose`` with the prompt on stdin
(``--resume ID`` continues a session). The CLI prints one JSON object per line:

* ``system`` lines: ``init`` (session id, model), then housekeeping such as ``api_retry``,
  ``status`` (compacting), ``compact_boundary``, ``task_*`` (sub-agents);
* ``assistant`` lines: one per content block, so one API message (one model request) can span
  several lines that share ``message.id`` and carry the same usage;
* ``user`` lines: tool results, matched to their call by ``tool_use_id``;
* ``rate_limit_event`` lines (subscription limits, with ``resetsAt``);
* ``system``/``thinking_tokens`` progress lines, one per streamed thinking delta: skipped unread;
* one final ``result`` line: outcome, cost, and per-model figures including ``contextWindow``.

Lines with a non-null ``parent_tool_use_id`` come from sub-agents (the Task tool); they are
reported with ``sidechain=True`` and never count toward the context fill. Errors the CLI turns into
a message (rate limits, auth, "Prompt is too long") arrive as an ``assistant`` line with model
``<synthetic>`` and zero usage, followed by a ``result`` with ``is_error: true``; the synthetic
line is reported as an ERROR message and its zero usage is not a request.
"""

from __future__ import annotations

import datetime as dt
import re
import shlex
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs
import msgspec

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.config import context_window_for
from loopctl.model import (
    AgentMessage,
    ErrorKind,
    MessageKind,
    ToolCall,
    TurnOutcome,
    TurnResult,
    Usage,
)

__all__ = [
    "ClaudeAgent",
    "ClaudeParser",
    "ClaudeSettings",
    "classify_outcome",
    "parse_reset_time",
]

#: Tool calls kept in full (the most recent); older ones are only counted.
MAX_KEPT_TOOL_CALLS = 1000
#: Main-thread requests kept one by one; older ones are folded into the first entry so the
#: turn's token total stays right while memory stays flat.
MAX_KEPT_REQUESTS = 2_000
FINAL_TEXT_LIMIT = 64 * 1024
EXCERPT_LIMIT = 1000
KEY_INPUT_LIMIT = 500
MESSAGE_LIMIT = 4000
#: The model name Claude Code gives the messages it makes up itself (errors, interruptions).
SYNTHETIC_MODEL = "<synthetic>"
#: Tool input fields that identify a call, most telling first.
KEY_INPUT_FIELDS = (
    "file_path",
    "notebook_path",
    "command",
    "pattern",
    "url",
    "query",
    "path",
    "skill",
    "description",
    "prompt",
)

_decode = msgspec.json.decode
# Calling a class with keywords costs twice the positional call: ``type.__call__`` packs the
# keywords into a dict for ``__init__``. The hot paths (text, tool calls and results, usage) skip
# that step: they make the instance and call attrs' own ``__init__`` with the same keywords, which
# measured as fast as the positional call without depending on the order of the fields.
_new = object.__new__
_init_message = AgentMessage.__init__


# --- the typed shapes of the bulk lines -----------------------------------------------------------
# ``assistant`` and ``user`` lines are nearly all of a transcript. Decoding them into these structs
# skips what loopctl does not need (``tool_use_result`` repeats a Read's whole file, for one) and
# is faster than building dicts. A line that does not fit (a future CLI, a hostile one) fails
# validation and goes the lenient way: decoded to plain data and read field by field.


class _Usage(msgspec.Struct, gc=False):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    cache_read_input_tokens: int | None = None


class _ToolInput(msgspec.Struct, gc=False):
    file_path: str | None = None
    notebook_path: str | None = None
    command: str | None = None
    pattern: str | None = None
    url: str | None = None
    query: str | None = None
    path: str | None = None
    skill: str | None = None
    description: str | None = None
    prompt: str | None = None


class _Part(msgspec.Struct, gc=False):
    type: str = ""
    text: str | None = None


class _Block(msgspec.Struct, gc=False):
    type: str = ""
    text: str | None = None
    id: str | None = None
    name: str | None = None
    input: _ToolInput | None = None
    tool_use_id: str | None = None
    content: str | list[_Part] | None = None
    is_error: bool | None = None


class _Message(msgspec.Struct, gc=False):
    id: str | None = None
    model: str | None = None
    usage: _Usage | None = None
    content: list[_Block] | str | None = None


class _Line(msgspec.Struct, gc=False):
    type: str = ""
    message: _Message | None = None
    parent_tool_use_id: str | None = None
    isSidechain: bool | None = None  # the CLI's own field name
    error: str | None = None


_LINE_DECODER = msgspec.json.Decoder(_Line)
# the kinds the hot paths make, looked up once (a class attribute lookup per message adds up)
_TEXT, _ERROR, _TOOL_CALL, _TOOL_RESULT, _USAGE = (
    MessageKind.TEXT,
    MessageKind.ERROR,
    MessageKind.TOOL_CALL,
    MessageKind.TOOL_RESULT,
    MessageKind.USAGE,
)
_BULK_PREFIXES = (b'{"type":"assistant"', b'{"type":"user"')
#: Progress lines skipped undecoded: one per streamed thinking delta, they can outnumber all
#: other lines together and say nothing a plugin can act on.
_PROGRESS_PREFIX = b'{"type":"system","subtype":"thinking_tokens"'
#: The same, recognised after decoding (a CLI that orders its keys differently).
_PROGRESS_SUBTYPES = frozenset({"thinking_tokens"})


# --- the adapter ----------------------------------------------------------------------------------


@attrs.define
class ClaudeSettings(AgentSettings):
    """``[agents.claude]``.

    ``bypassPermissions`` lets the agent edit and run without asking; the adapter sets
    ``IS_SANDBOX=1`` so that it also works as root (where ``--dangerously-skip-permissions`` is
    refused). ``allowed_tools`` (``["Read", "Edit", "Bash(git *)"]``) become ``--allowedTools``:
    the tools used without asking. Under ``bypassPermissions`` every tool is allowed anyway, so
    pair them with ``permission_mode = "dontAsk"`` to keep the agent to that list.
    """

    permission_mode: str = attrs.field(
        default="bypassPermissions",
        metadata={
            "doc": "`--permission-mode`, passed as given (the CLI says which modes it knows: "
            "`acceptEdits`, `auto`, `bypassPermissions`, `manual`, `dontAsk`, `plan` in 2.1.332)."
        },
    )
    max_turns: int | None = attrs.field(
        default=None, metadata={"doc": "`--max-turns`: most model round trips in one turn."}
    )
    allowed_tools: list[str] = attrs.field(
        factory=list,
        metadata={"doc": '`--allowedTools`: tools used without asking (`"Bash(git *)"`).'},
    )
    disallowed_tools: list[str] = attrs.field(
        factory=list,
        metadata={"doc": "`--disallowedTools`: tools the agent may not use, in any mode."},
    )
    mcp_config: list[str] = attrs.field(
        factory=list,
        metadata={"doc": "`--mcp-config`: MCP server config files (or JSON strings) to load."},
    )
    strict_mcp_config: bool = attrs.field(
        default=False,
        metadata={"doc": "`--strict-mcp-config`: only the MCP servers of `mcp_config`."},
    )
    append_system_prompt: str | None = attrs.field(
        default=None, metadata={"doc": "`--append-system-prompt`: added to the system prompt."}
    )
    keep_sessions: bool = attrs.field(
        default=False,
        metadata={
            "doc": "Let Claude Code store the sessions of a fresh-session run (off: "
            "`--no-session-persistence`, so no transcript is left per iteration). Resumed "
            "sessions are always stored."
        },
    )


class ClaudeAgent(AgentAdapter):
    name: ClassVar[str] = "claude"
    description: ClassVar[str] = "Anthropic Claude Code CLI (claude -p, stream-json)"
    executable: ClassVar[str | None] = "claude"
    settings_class: ClassVar[type[AgentSettings]] = ClaudeSettings
    option_settings: ClassVar[Mapping[str, str]] = {
        "--permission-mode": "permission_mode",
        "--model": "model",
        "--max-turns": "max_turns",
        "--allowedTools": "allowed_tools",
        "--allowed-tools": "allowed_tools",
        "--disallowedTools": "disallowed_tools",
        "--disallowed-tools": "disallowed_tools",
        "--mcp-config": "mcp_config",
        "--append-system-prompt": "append_system_prompt",
    }

    def __init__(
        self,
        settings: AgentSettings | None = None,
        *,
        model_windows: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(settings, model_windows=model_windows)
        #: What the session the last invocation resumes had cost so far (for its parser).
        self._resumed_cost = 0.0

    def invocation(self, request: TurnRequest) -> Invocation:
        settings = self.settings_as(ClaudeSettings)
        argv = self._base_argv()
        mode = settings.permission_mode or "bypassPermissions"
        argv += ["-p", "--output-format", "stream-json", "--verbose", "--permission-mode", mode]
        if settings.model:
            argv += ["--model", settings.model]
        max_turns = settings.max_turns
        if max_turns is not None:
            if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
                raise ValueError(
                    f"[agents.claude] max_turns = {max_turns!r} must be a whole number of at least 1 "
                    "(or left out for no limit)"
                )
            argv += ["--max-turns", str(max_turns)]
        allowed = [str(tool) for tool in settings.allowed_tools]
        if allowed:
            argv += ["--allowedTools", ",".join(allowed)]
        denied = [str(tool) for tool in settings.disallowed_tools]
        if denied:
            argv += ["--disallowedTools", ",".join(denied)]
        for config in settings.mcp_config:
            argv += ["--mcp-config", str(config)]
        if settings.strict_mcp_config:
            argv.append("--strict-mcp-config")
        if settings.append_system_prompt:
            argv += ["--append-system-prompt", settings.append_system_prompt]
        if request.budget_usd is not None:
            argv += ["--max-budget-usd", dollars(request.budget_usd)]
        if request.session_id:
            argv += ["--resume", request.session_id]
        elif not request.keep_session and not settings.keep_sessions:
            argv.append("--no-session-persistence")
        argv += [str(arg) for arg in settings.extra_args]
        env: dict[str, str | None] = {}
        if mode == "bypassPermissions":
            env["IS_SANDBOX"] = "1"
        self._resumed_cost = request.session_cost_usd if request.session_id else 0.0
        return Invocation(
            argv=argv, stdin=request.prompt.encode("utf-8", errors="replace"), env=env
        )

    def _base_argv(self) -> list[str]:
        command = self.settings.command
        if not command or not command.strip():
            return ["claude"]
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(
                f"[agents.claude] command = {command!r} is not a valid command line ({exc}); "
                "check its quotes"
            ) from None
        return argv or ["claude"]

    def new_parser(self) -> StreamParser:
        resumed_cost, self._resumed_cost = self._resumed_cost, 0.0
        return ClaudeParser(resumed_cost=resumed_cost)


def dollars(amount: float) -> str:
    """A dollar amount for ``--max-budget-usd``: at most 6 decimals, never 0 (the CLI wants more
    than 0; a budget that is spent stops the loop before the turn)."""
    text = f"{max(amount, 0.000001):.6f}".rstrip("0").rstrip(".")
    return text


# --- the parser -----------------------------------------------------------------------------------


class ClaudeParser(StreamParser):
    """Turns Claude Code's stream-json lines into messages and a :class:`TurnResult`.

    Usage is reported once per API message (``message.id``), when the next line shows the message
    is complete, with the largest figures seen for it. Memory stays flat however long the turn:
    only the last :data:`MAX_KEPT_TOOL_CALLS` tool calls, a bounded tail of text, and per-request
    usage (folded beyond :data:`MAX_KEPT_REQUESTS`) are kept; raw lines never are.
    """

    def __init__(self, *, resumed_cost: float = 0.0) -> None:
        #: What loopctl recorded as the resumed session's cost before this turn (0: a fresh
        #: session): Claude Code reports a resumed session's running total, not the turn's.
        self.resumed_cost = resumed_cost
        self.session_id: str | None = None
        self.model: str | None = None  # as init names it, e.g. "claude-opus-4-1[1m]"
        self.api_model: str | None = None  # as the API names it in assistant messages
        self._texts: deque[str] = deque()
        self._text_chars = 0
        self.tool_calls: deque[ToolCall] = deque(maxlen=MAX_KEPT_TOOL_CALLS)
        self.tool_call_count = 0
        self._calls_by_id: dict[str, ToolCall] = {}
        self._requests: deque[Usage] = deque()
        self._folded: Usage | None = None
        # the API message being streamed: its usage is reported once it is complete
        self._pending_id: str | None = None
        self._pending_counts = (0, 0, 0, 0)  # input, output, cache creation, cache read
        self._pending_sidechain = False
        self._seen_ids: dict[str, None] = {}
        self.context_tokens: int | None = None
        self.context_window: int | None = None
        self.last_error_code: str | None = None
        self.rate_limit_reset: float | None = None
        self.errors: list[str] = []
        # from the result line
        self._result_seen = False
        self.result_subtype: str | None = None
        self.result_is_error: bool | None = None
        self.result_text: str | None = None
        self.result_errors: list[str] = []
        self.api_error_status: int | None = None
        self.terminal_reason: str | None = None
        self.cost_usd: float | None = None
        #: Input-side tokens (input, cache read and write) of ``result.usage`` (this process) and
        #: summed over ``result.modelUsage``: the latter is the session's running total when a
        #: resumed session's figures are cumulative.
        self._result_input_tokens = 0
        self._model_usage_input_tokens = 0
        #: The sum of ``model_usage_since_last_result`` costs over the result lines (each covers
        #: the spend since the one before it, in this process); None when the CLI gives none.
        self._cost_since_results: float | None = None
        #: Whether the process started background tasks that can report back after the result
        #: (sub-agents that outlive their call): then only the process's exit ends the turn. A
        #: command the agent left running in the background (Bash's ``run_in_background``: a dev
        #: server, a watcher, ``sleep 600``) is not one: the CLI only waits for it to end.
        self.background_tasks = False

    @property
    def done(self) -> bool:
        # After background tasks (a Task sub-agent runs in the background since 2.1.3xx), Claude
        # Code may start another turn when one reports back: a second ``init`` and ``result``
        # in the same process. Only the process's exit says it is over then.
        return self._result_seen and not self.background_tasks

    # --- lines --------------------------------------------------------------------------------

    def feed(self, line: bytes) -> list[AgentMessage]:
        if type(line) is not bytes:
            line = bytes(line)
        if line.startswith(_PROGRESS_PREFIX):
            return []
        if line.startswith(_BULK_PREFIXES):  # the fast way, for nearly every other line
            try:
                typed = _LINE_DECODER.decode(line)
            except Exception:  # noqa: BLE001 - not this shape: the lenient way
                return self._feed_plain(line)
            return self._on_bulk(typed)
        return self._feed_plain(line)

    def _feed_plain(self, line: bytes) -> list[AgentMessage]:
        try:
            data = _decode(line)
        except Exception:  # noqa: BLE001 - not JSON (or too deep): not our line, skip it
            return []
        if type(data) is not dict:
            return []
        kind = data.get("type")
        if kind == "assistant" or kind == "user":
            try:
                lenient = _lenient_line(data)
            except Exception:  # noqa: BLE001 - nothing usable in it after all
                return []
            return self._on_bulk(lenient)
        out: list[AgentMessage] = []
        if self._pending_id is not None:
            out.append(self._flush_pending())
        handler = self._handlers.get(kind) if type(kind) is str else None
        if handler is not None:
            try:
                out += handler(self, data)
            except Exception:  # noqa: BLE001 - a surprise in one line must not end the turn
                pass
        return out

    def _on_bulk(self, line: _Line) -> list[AgentMessage]:
        out: list[AgentMessage] = []
        pending = self._pending_id
        if pending is not None:
            message = line.message
            if line.type != "assistant" or message is None or not pending or message.id != pending:
                out.append(self._flush_pending())
        try:
            if line.type == "assistant":
                self._on_assistant(line, out)
            elif line.type == "user":
                self._on_user(line, out)
        except Exception:  # noqa: BLE001 - a surprise in one line must not end the turn
            pass
        return out

    def _on_system(self, data: dict[str, Any]) -> list[AgentMessage]:
        subtype = _str(data.get("subtype")) or ""
        if subtype in _PROGRESS_SUBTYPES:
            return []
        if subtype == "init":
            self.session_id = _str(data.get("session_id")) or self.session_id
            self.model = _str(data.get("model")) or self.model
            window = context_window_for(self.model, {})
            if window and self.context_window is None:
                self.context_window = window
            return [
                AgentMessage(
                    kind=MessageKind.INIT,
                    session_id=self.session_id,
                    model=self.model,
                    context_window=self.context_window,
                    raw_type="system",
                )
            ]
        if (subtype == "task_started" and data.get("is_backgrounded") is True) or (
            subtype == "background_tasks_changed" and data.get("tasks")
        ):
            self.background_tasks = self.background_tasks or _can_report_back(subtype, data)
        return [
            AgentMessage(
                kind=MessageKind.SYSTEM,
                text=_describe_system(subtype, data),
                session_id=self.session_id,
                sidechain=_is_sidechain(data),
                raw_type=f"system/{subtype}" if subtype else "system",
            )
        ]

    # --- assistant and user lines: nearly every line of a transcript ---------------------------

    def _on_assistant(self, line: _Line, out: list[AgentMessage]) -> None:
        """The line's usage (:meth:`_note_request`), then a message per text or tool-use block."""
        message = line.message
        if message is None:
            return
        sidechain = line.parent_tool_use_id is not None or line.isSidechain is True
        error_code = line.error
        if error_code:
            self.last_error_code = error_code
        synthetic = message.model == SYNTHETIC_MODEL
        if not synthetic:  # a message the CLI made up is not a request, and has no real model
            self._note_request(message, sidechain)
        is_error = synthetic or bool(error_code)
        content = message.content
        for block in content if type(content) is list else _text_blocks(content):
            block_type = block.type  # thinking blocks say nothing a plugin can act on
            if block_type == "text":
                if block.text is not None:
                    out.append(self._text_message(block.text, is_error, sidechain))
            elif block_type == "tool_use":
                out.append(self._tool_call_message(block, sidechain))

    def _note_request(self, message: _Message, sidechain: bool) -> None:
        """The model and the usage of a line of a real API message. Its first line begins a
        request; later lines (same ``message.id``) can only raise the counts."""
        model = message.model
        if model and not sidechain:
            self.api_model = model
        usage = message.usage
        if usage is None:
            return
        message_id = message.id or ""
        if not message_id or message_id != self._pending_id:
            self._begin_request(message_id, usage, sidechain)
            return
        pi, po, pcc, pcr = self._pending_counts
        i, o = usage.input_tokens or 0, usage.output_tokens or 0
        cc, cr = usage.cache_creation_input_tokens or 0, usage.cache_read_input_tokens or 0
        if i > pi or o > po or cc > pcc or cr > pcr:
            self._pending_counts = (max(i, pi), max(o, po), max(cc, pcc), max(cr, pcr))

    def _text_message(self, words: str, is_error: bool, sidechain: bool) -> AgentMessage:
        """An ERROR message for words the CLI reports as an error, else TEXT; the main
        thread's text is kept for the turn's final text."""
        if is_error:
            self._remember_error(words)
            kind = _ERROR
        else:
            if not sidechain:
                self._keep_text(words)
            kind = _TEXT
        agent_message = _new(AgentMessage)
        _init_message(
            agent_message,
            kind=kind,
            text=words,
            session_id=self.session_id,
            sidechain=sidechain,
            raw_type="assistant",
        )
        return agent_message

    def _tool_call_message(self, block: _Block, sidechain: bool) -> AgentMessage:
        """The call, kept (and indexed by id for its result)."""
        # name, key input, id: positional, as keywords would cost this hot path (see _new)
        call = ToolCall(block.name or "unknown", _key_input(block.input), block.id or "")
        self.tool_calls.append(call)
        self.tool_call_count += 1
        if call.id:
            self._index_call(call)
        agent_message = _new(AgentMessage)
        _init_message(
            agent_message,
            kind=_TOOL_CALL,
            tool_call=call,
            session_id=self.session_id,
            sidechain=sidechain,
            raw_type="assistant",
        )
        return agent_message

    def _on_user(self, line: _Line, out: list[AgentMessage]) -> None:
        message = line.message
        content = message.content if message is not None else None
        if not content or isinstance(content, str):
            return
        sidechain = line.parent_tool_use_id is not None or line.isSidechain is True
        session_id = self.session_id
        calls = self._calls_by_id
        for block in content:
            if block.type != "tool_result":
                continue
            call_id = block.tool_use_id or ""
            call = calls.get(call_id) or ToolCall(name="", id=call_id)
            excerpt = _excerpt(block.content)
            # a result without is_error is a success (the API's default)
            call.is_error = False if block.is_error is None else block.is_error
            call.result_excerpt = excerpt
            if call.name == "Bash":
                call.exit_code = _exit_code(excerpt, call.is_error)
            agent_message = _new(AgentMessage)
            _init_message(
                agent_message,
                kind=_TOOL_RESULT,
                tool_call=call,
                session_id=session_id,
                sidechain=sidechain,
                raw_type="user",
            )
            out.append(agent_message)

    def _on_rate_limit(self, data: dict[str, Any]) -> list[AgentMessage]:
        info = data.get("rate_limit_info")
        if type(info) is not dict:
            return []
        status = _str(info.get("status")) or ""
        resets = _number(info.get("resetsAt"))
        if resets is not None and status == "rejected":
            self.rate_limit_reset = resets / 1000.0 if resets > 1e11 else resets
        words = f"rate limit {status or 'event'}"
        limit_type = _str(info.get("rateLimitType"))
        if limit_type:
            words += f" ({limit_type})"
        if resets is not None:
            words += f", resets at {resets:.0f}"
        return [
            AgentMessage(
                kind=MessageKind.SYSTEM,
                text=words,
                session_id=self.session_id,
                raw_type="rate_limit_event",
            )
        ]

    def _on_result(self, data: dict[str, Any]) -> list[AgentMessage]:
        self._result_seen = True
        self.session_id = _str(data.get("session_id")) or self.session_id
        self.result_subtype = _str(data.get("subtype"))
        is_error = data.get("is_error")
        self.result_is_error = is_error if type(is_error) is bool else None
        self.result_text = _str(data.get("result"))
        errors = data.get("errors")
        self.result_errors = []  # a later result line (after a background task) starts over
        if type(errors) is list:
            self.result_errors = [e for e in errors if type(e) is str][:20]
        status = data.get("api_error_status")
        self.api_error_status = status if type(status) is int else None
        self.terminal_reason = _str(data.get("terminal_reason"))
        cost = _number(data.get("total_cost_usd"))
        if cost is not None and cost >= 0:
            self.cost_usd = cost
        usage = data.get("usage")
        if type(usage) is dict:
            self._result_input_tokens = sum(
                _count(usage.get(key))
                for key in (
                    "input_tokens",
                    "cache_read_input_tokens",
                    "cache_creation_input_tokens",
                )
            )
        model_usage = data.get("modelUsage")
        if type(model_usage) is dict:
            self._model_usage_input_tokens = sum(
                _count(figures.get(key))
                for figures in model_usage.values()
                if type(figures) is dict
                for key in ("inputTokens", "cacheReadInputTokens", "cacheCreationInputTokens")
            )
        since = data.get("model_usage_since_last_result")
        if type(since) is dict:
            spent = sum(
                _number(figures.get("costUSD")) or 0.0
                for figures in since.values()
                if type(figures) is dict
            )
            self._cost_since_results = (self._cost_since_results or 0.0) + spent
        window = self._window_from_model_usage(data.get("modelUsage"))
        if window:
            self.context_window = window
        words = self.result_text or "; ".join(self.result_errors) or self.result_subtype or ""
        return [
            AgentMessage(
                kind=MessageKind.RESULT,
                text=words,
                session_id=self.session_id,
                model=self.model,
                context_window=self.context_window,
                raw_type="result",
            )
        ]

    _handlers: ClassVar[dict[str, Callable[[ClaudeParser, dict[str, Any]], list[AgentMessage]]]] = {
        "system": _on_system,
        "rate_limit_event": _on_rate_limit,
        "result": _on_result,
    }

    # --- usage ----------------------------------------------------------------------------------

    def _begin_request(self, message_id: str, raw: _Usage, sidechain: bool) -> None:
        """The usage on the first line of an API message; its later lines raise the counts in
        :meth:`_note_request`. A message seen before (it came back after other lines) is not
        counted again."""
        if message_id and message_id in self._seen_ids:
            return
        self._pending_id = message_id
        self._pending_counts = (
            raw.input_tokens or 0,
            raw.output_tokens or 0,
            raw.cache_creation_input_tokens or 0,
            raw.cache_read_input_tokens or 0,
        )
        self._pending_sidechain = sidechain

    def _flush_pending(self) -> AgentMessage:
        message_id, sidechain = self._pending_id, self._pending_sidechain
        i, o, cc, cr = self._pending_counts
        self._pending_id = None
        if message_id:
            seen = self._seen_ids
            seen[message_id] = None
            if len(seen) > MAX_KEPT_TOOL_CALLS * 5 // 4:  # trimmed now and then, not every time
                self._seen_ids = dict.fromkeys(list(seen)[-MAX_KEPT_TOOL_CALLS:])
        i, o = (i if i > 0 else 0), (o if o > 0 else 0)
        cc, cr = (cc if cc > 0 else 0), (cr if cr > 0 else 0)
        usage = Usage(i, o, cc, cr)
        if not sidechain:
            fill = i + o + cc + cr  # usage.context_tokens, without the property call
            if fill > 0:
                requests = self._requests
                if len(requests) >= MAX_KEPT_REQUESTS:
                    oldest = requests.popleft()
                    self._folded = oldest if self._folded is None else self._folded + oldest
                requests.append(usage)
                self.context_tokens = fill
        agent_message = _new(AgentMessage)
        _init_message(
            agent_message,
            kind=_USAGE,
            usage=usage,
            session_id=self.session_id,
            model=self.model,
            context_window=self.context_window,
            sidechain=sidechain,
            raw_type="assistant",
        )
        return agent_message

    def _window_from_model_usage(self, model_usage: object) -> int | None:
        """The main model's ``contextWindow`` from ``result.modelUsage``."""
        if type(model_usage) is not dict:
            return None
        windows: dict[str, tuple[int, int]] = {}
        for name, figures in model_usage.items():
            if type(name) is not str or type(figures) is not dict:
                continue
            window = figures.get("contextWindow")
            if type(window) is int and window > 0:
                tokens = sum(
                    _count(figures.get(key))
                    for key in ("inputTokens", "outputTokens", "cacheReadInputTokens")
                )
                windows[name] = (window, tokens)
        if not windows:
            return None
        for wanted in (self.model, self.api_model):
            if wanted and wanted in windows:
                return windows[wanted][0]
        if self.api_model:
            for name, (window, _tokens) in windows.items():
                if name.startswith(self.api_model):
                    return window
        return max(windows.values(), key=lambda item: item[1])[0]

    # --- keeping things (bounded) ------------------------------------------------------------

    def _keep_text(self, words: str) -> None:
        if len(words) > FINAL_TEXT_LIMIT:
            words = words[-FINAL_TEXT_LIMIT:]
        self._texts.append(words)
        self._text_chars += len(words) + 1
        while (
            len(self._texts) > 1 and self._text_chars - len(self._texts[0]) - 1 > FINAL_TEXT_LIMIT
        ):
            self._text_chars -= len(self._texts.popleft()) + 1

    def _index_call(self, call: ToolCall) -> None:
        """Remember the call by id for its result, keeping only the recent ones."""
        by_id = self._calls_by_id
        by_id[call.id] = call
        if len(by_id) > MAX_KEPT_TOOL_CALLS * 5 // 4:  # trimmed now and then, not every time
            self._calls_by_id = dict(list(by_id.items())[-MAX_KEPT_TOOL_CALLS:])

    def _remember_error(self, words: str) -> None:
        self.errors.append(words[:MESSAGE_LIMIT])
        if len(self.errors) > 20:
            del self.errors[0]

    # --- the end --------------------------------------------------------------------------------

    @property
    def requests(self) -> list[Usage]:
        """Usage of each main-thread request so far (the oldest folded into the first entry)."""
        head = [self._folded] if self._folded is not None else []
        return head + list(self._requests)

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        try:
            if self._pending_id is not None:
                self._flush_pending()
            outcome = self._outcome(exit_code, stderr)
        except Exception as exc:  # noqa: BLE001 - finish never raises
            outcome = TurnOutcome(ErrorKind.UNKNOWN, f"cannot read Claude Code's result: {exc!r}")
        final_text = "\n".join(self._texts)[-FINAL_TEXT_LIMIT:]
        if not final_text and self.result_text and outcome.ok:
            final_text = self.result_text[-FINAL_TEXT_LIMIT:]
        window = self.context_window
        if window is None:
            window = context_window_for(self.model or self.api_model, {})
        return TurnResult(
            outcome=outcome,
            session_id=self.session_id,
            final_text=final_text,
            tool_calls=list(self.tool_calls),
            requests=self.requests,
            context_tokens=self.context_tokens,
            context_window=window,
            cost_usd=self.turn_cost(),
            model=self.model or self.api_model,
            exit_code=exit_code,
        )

    def turn_cost(self) -> float | None:
        """This turn's cost. Claude Code's ``total_cost_usd`` is a resumed session's running
        total in newer versions (2.1.332), the process's own spend in older ones (2.1.197).
        Each result line's ``model_usage_since_last_result`` (2.1.332) gives the spend since the
        previous one exactly: their sum is the turn's cost. Without it, when ``modelUsage`` holds
        more tokens than the turn's own ``usage`` and the total is at least what loopctl recorded
        for the resumed session before, the turn cost the difference."""
        if self._cost_since_results is not None:
            return self._cost_since_results
        cost = self.cost_usd
        before = self.resumed_cost
        if cost is None or before <= 0:
            return cost
        cumulative = self._model_usage_input_tokens > self._result_input_tokens
        if cumulative and cost >= before:
            return cost - before
        return cost

    def _outcome(self, exit_code: int | None, stderr: str) -> TurnOutcome:
        tail = (stderr or "").strip()[-MESSAGE_LIMIT:]
        if not self._result_seen:
            if exit_code != 0:
                how = "was ended" if exit_code is None else f"exited with code {exit_code}"
                words = f"Claude Code {how} before its result line"
                detail = tail or (self.errors[-1] if self.errors else "")
                return TurnOutcome(ErrorKind.CRASHED, f"{words}: {detail}" if detail else words)
            return TurnOutcome(
                ErrorKind.INVALID_OUTPUT,
                "Claude Code exited without a result line (is it a stream-json capable version?)"
                + (f": {tail}" if tail else ""),
            )
        return classify_outcome(
            subtype=self.result_subtype,
            is_error=self.result_is_error,
            text=self.result_text,
            errors=self.result_errors or self.errors[-1:],
            api_error_status=self.api_error_status,
            terminal_reason=self.terminal_reason,
            error_code=self.last_error_code,
            rate_limit_reset=self.rate_limit_reset,
            stderr=tail,
        )


# --- outcome mapping ------------------------------------------------------------------------------

_SUBTYPE_KINDS = {
    "error_max_turns": ErrorKind.MAX_TURNS,
    "error_max_budget_usd": ErrorKind.BUDGET,
    "error_max_structured_output_retries": ErrorKind.INVALID_OUTPUT,
}
_TERMINAL_KINDS = {
    "prompt_too_long": ErrorKind.CONTEXT_OVERFLOW,
    "blocking_limit": ErrorKind.CONTEXT_OVERFLOW,
    "max_turns": ErrorKind.MAX_TURNS,
}
#: The ``error`` field Claude Code puts on its synthetic assistant line.
_ERROR_CODE_KINDS = {
    "authentication_failed": ErrorKind.AUTH,
    "oauth_org_not_allowed": ErrorKind.AUTH,
    "billing_error": ErrorKind.BILLING,
    "rate_limit": ErrorKind.RATE_LIMIT,
    "overloaded": ErrorKind.NETWORK,
    "server_error": ErrorKind.NETWORK,
}
_CONTEXT_TEXT = re.compile(
    r"prompt is too long|context (?:window|length) exceeded|exceeds? the context window|"
    r"conversation too long|input is too long",
    re.IGNORECASE,
)
_AUTH_TEXT = re.compile(
    r"not logged in|please run /login|invalid api key|authentication[_ ]error|"
    r"authentication failed|oauth token (?:has )?(?:expired|revoked)|invalid x-api-key|"
    r"disabled organi[sz]ation|\b401\b|\b403\b|permission_error",
    re.IGNORECASE,
)
_BILLING_TEXT = re.compile(
    r"credit balance|billing|out of (?:usage )?credits|spend limit|payment|purchase credits",
    re.IGNORECASE,
)
_RATE_LIMIT_TEXT = re.compile(
    r"usage limit|rate limit|rate_limit|hit your (?:\w+ )*limit|limit reached|\b429\b|"
    r"too many requests|resets? (?:at |in )?\d",
    re.IGNORECASE,
)
_NETWORK_TEXT = re.compile(
    r"overloaded|unable to connect|connection (?:error|refused|reset)|econn|etimedout|"
    r"enotfound|fetch failed|socket hang up|network|timed? ?out|\b5\d\d\b|server[_ ]error|"
    r"api_error|internal server error|service unavailable|bad gateway",
    re.IGNORECASE,
)


def classify_outcome(
    *,
    subtype: str | None,
    is_error: bool | None,
    text: str | None,
    errors: list[str] | None = None,
    api_error_status: int | None = None,
    terminal_reason: str | None = None,
    error_code: str | None = None,
    rate_limit_reset: float | None = None,
    stderr: str = "",
    now: float | None = None,
) -> TurnOutcome:
    """Map the fields of Claude Code's ``result`` line onto a :class:`TurnOutcome`.

    The CLI's own words are kept verbatim in ``message``. For rate limits, ``retry_at`` is the
    reset time when the CLI gives one (``rate_limit_event``, ``…|1760000000``, ``resets 3pm``).
    """
    words = text or "; ".join(errors or []) or stderr or (subtype or "")
    words = words[:MESSAGE_LIMIT]
    failed = is_error is True or (subtype is not None and subtype != "success")
    if not failed:
        return TurnOutcome()
    haystack = " ".join([text or "", *(errors or [])])
    if subtype in _SUBTYPE_KINDS:
        return TurnOutcome(_SUBTYPE_KINDS[subtype], words)
    if terminal_reason in _TERMINAL_KINDS:
        return TurnOutcome(_TERMINAL_KINDS[terminal_reason], words)
    if _CONTEXT_TEXT.search(haystack) or api_error_status == 413:
        return TurnOutcome(ErrorKind.CONTEXT_OVERFLOW, words)
    kind = _kind_from_signals(api_error_status, error_code, haystack)
    if kind is ErrorKind.RATE_LIMIT:
        retry_at = rate_limit_reset
        if retry_at is None:
            retry_at = parse_reset_time(haystack, now=now)
        return TurnOutcome(ErrorKind.RATE_LIMIT, words, retry_at=retry_at)
    if kind is not None:
        return TurnOutcome(kind, words)
    if subtype == "error_during_execution":
        return TurnOutcome(ErrorKind.CRASHED, words)
    return TurnOutcome(ErrorKind.UNKNOWN, words)


def _kind_from_signals(status: int | None, error_code: str | None, text: str) -> ErrorKind | None:
    # the words first where they are more specific than the status: a 400 about credit is billing
    if _BILLING_TEXT.search(text) and not _RATE_LIMIT_TEXT.search(text):
        return ErrorKind.BILLING
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status is not None and (500 <= status <= 599):
        return ErrorKind.NETWORK
    if error_code in _ERROR_CODE_KINDS:
        return _ERROR_CODE_KINDS[error_code]
    if _AUTH_TEXT.search(text):
        return ErrorKind.AUTH
    if _RATE_LIMIT_TEXT.search(text):
        return ErrorKind.RATE_LIMIT
    if _BILLING_TEXT.search(text):
        return ErrorKind.BILLING
    if _NETWORK_TEXT.search(text):
        return ErrorKind.NETWORK
    return None


# --- reset times ----------------------------------------------------------------------------------

_EPOCH_SUFFIX = re.compile(r"\|\s*(\d{9,13})\b")
_RESETS_IN = re.compile(
    r"resets?\s+in\s+(?:(\d+)\s*d(?:ays?)?\s*)?(?:(\d+)\s*h(?:ours?|rs?)?\s*)?(?:(\d+)\s*m(?:in(?:utes?)?)?)?",
    re.IGNORECASE,
)
_RESETS_AT = re.compile(
    r"resets?\s+(?:at\s+)?"
    r"(?:(?P<month>jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+(?P<day>\d{1,2}),?\s+"
    r"(?:at\s+)?)?"
    r"(?P<hour>\d{1,2})(?::(?P<minute>\d{2}))?\s*(?P<ampm>am|pm)?"
    r"(?:\s*\((?P<zone>[^)]+)\))?",
    re.IGNORECASE,
)
_MONTHS = {
    name: i
    for i, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"],
        start=1,
    )
}


def parse_reset_time(text: str, *, now: float | None = None) -> float | None:
    """When a usage limit resets, in epoch seconds, from the CLI's words; None if not said.

    Understands ``…limit reached|1760000000`` (older CLIs), ``resets in 2h 30m``, and
    ``resets 3pm (Europe/London)`` / ``resets Nov 23, 3:30pm (UTC)`` (the next such moment).
    """
    if not text:
        return None
    try:
        return _parse_reset_time(text, now)
    except Exception:  # noqa: BLE001 - odd words never break the outcome
        return None


def _parse_reset_time(text: str, now: float | None) -> float | None:
    import time

    current = time.time() if now is None else now
    match = _EPOCH_SUFFIX.search(text)
    if match:
        value = float(match.group(1))
        return value / 1000.0 if value > 1e11 else value
    match = _RESETS_IN.search(text)
    if match and any(match.groups()):
        days, hours, minutes = (int(g) if g else 0 for g in match.groups())
        return current + days * 86400 + hours * 3600 + minutes * 60
    match = _RESETS_AT.search(text)
    if not match:
        return None
    hour = int(match.group("hour"))
    minute = int(match.group("minute") or 0)
    ampm = (match.group("ampm") or "").lower()
    if ampm == "pm" and hour < 12:
        hour += 12
    elif ampm == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or (not ampm and match.group("minute") is None):
        return None  # a bare number is not a time of day
    zone = _zone(match.group("zone"))
    local_now = dt.datetime.fromtimestamp(current, zone)
    if match.group("month"):
        month = _MONTHS[match.group("month").lower()[:3]]
        day = int(match.group("day"))
        candidate = local_now.replace(
            month=month, day=day, hour=hour, minute=minute, second=0, microsecond=0
        )
        if candidate.timestamp() < current - 86400:
            candidate = candidate.replace(year=candidate.year + 1)
        return candidate.timestamp()
    candidate = local_now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if candidate.timestamp() <= current:
        candidate += dt.timedelta(days=1)
    return candidate.timestamp()


def _zone(name: str | None) -> dt.tzinfo | None:
    """The named time zone; UTC for ``UTC``/``GMT``; None (local time) when unknown."""
    if not name:
        return None
    name = name.strip()
    if name.upper() in ("UTC", "GMT", "Z"):
        return dt.timezone.utc
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(name)
    except Exception:  # noqa: BLE001 - unknown zone names, missing tzdata
        return None


# --- small helpers --------------------------------------------------------------------------------


def _message_id(data: Mapping[str, Any]) -> str | None:
    message = data.get("message")
    if type(message) is dict:
        found = message.get("id")
        return found if type(found) is str else None
    return None


#: Background task types that are commands the agent left running, not work that reports back
#: into the session: after the result line the CLI only waits for them to end.
_SHELL_TASK_TYPES = frozenset({"local_bash"})


def _can_report_back(subtype: str, data: Mapping[str, Any]) -> bool:
    """Whether a ``task_started`` (backgrounded) or ``background_tasks_changed`` line names a
    background task other than a shell command: a sub-agent (``local_agent``), or a type this
    adapter does not know (the safe side: wait for the process's exit)."""
    if subtype == "task_started":
        tasks: Any = [data]
    else:
        tasks = data.get("tasks")
    if not isinstance(tasks, list):
        return True
    return any(
        not isinstance(task, Mapping) or task.get("task_type") not in _SHELL_TASK_TYPES
        for task in tasks
    )


def _is_sidechain(data: Mapping[str, Any]) -> bool:
    parent = data.get("parent_tool_use_id")
    return (parent is not None and parent != "") or data.get("isSidechain") is True


def _describe_system(subtype: str, data: Mapping[str, Any]) -> str:
    if subtype == "api_retry":
        return (
            f"api_retry: attempt {data.get('attempt')} of {data.get('max_retries')} after "
            f"{data.get('error_status') or data.get('error')}"
        )
    if subtype == "compact_boundary":
        meta = data.get("compact_metadata")
        if type(meta) is dict:
            return (
                f"compact_boundary ({meta.get('trigger', '?')}): "
                f"{meta.get('pre_tokens', '?')} -> {meta.get('post_tokens', '?')} tokens"
            )
    if subtype == "status":
        status = data.get("status")
        result = data.get("compact_result")
        if result is not None:
            error = data.get("compact_error")
            return f"compaction {result}" + (f" ({error})" if error else "")
        return f"status: {status}"
    return subtype or "system"


def _str(value: object) -> str | None:
    return value if type(value) is str else None


def _number(value: object) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _count(value: object) -> int:
    """A token count: a non-negative int; anything else counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _key_input(tool_input: _ToolInput | None) -> str:
    """The first of KEY_INPUT_FIELDS that is set, cut to KEY_INPUT_LIMIT."""
    if tool_input is None:
        return ""
    t = tool_input
    for value in (
        t.file_path,
        t.notebook_path,
        t.command,
        t.pattern,
        t.url,
        t.query,
        t.path,
        t.skill,
        t.description,
        t.prompt,
    ):
        if value is not None:
            return value[:KEY_INPUT_LIMIT]
    return ""


def _text_blocks(content: object) -> list[_Block]:
    """Message content that is not a list of blocks (a plain string): one text block, or none
    when it is empty."""
    return [_Block(type="text", text=str(content))] if content else []


# --- the lenient way: plain data that did not fit the structs, taken field by field --------------


def _lenient_line(data: Mapping[str, Any]) -> _Line:
    """A :class:`_Line` made of whatever parts of ``data`` have the expected types."""
    parent = data.get("parent_tool_use_id")
    return _Line(
        type=_str(data.get("type")) or "",
        message=_lenient_message(data.get("message")),
        parent_tool_use_id=None if parent is None or parent == "" else str(parent),
        isSidechain=data.get("isSidechain") is True,
        error=_str(data.get("error")),
    )


def _lenient_message(data: object) -> _Message | None:
    if type(data) is not dict:
        return None
    raw_usage = data.get("usage")
    usage = None
    if type(raw_usage) is dict:
        usage = _Usage(
            input_tokens=_count(raw_usage.get("input_tokens")),
            output_tokens=_count(raw_usage.get("output_tokens")),
            cache_creation_input_tokens=_count(raw_usage.get("cache_creation_input_tokens")),
            cache_read_input_tokens=_count(raw_usage.get("cache_read_input_tokens")),
        )
    content = data.get("content")
    blocks: list[_Block] | str | None = None
    if type(content) is str:
        blocks = content
    elif type(content) is list:
        blocks = [_lenient_block(item) for item in content if type(item) is dict]
    return _Message(
        id=_str(data.get("id")), model=_str(data.get("model")), usage=usage, content=blocks
    )


def _lenient_block(data: Mapping[str, Any]) -> _Block:
    raw_input = data.get("input")
    tool_input = None
    if type(raw_input) is dict:
        tool_input = _ToolInput(**{k: _str(raw_input.get(k)) for k in KEY_INPUT_FIELDS})
    content = data.get("content")
    parts: str | list[_Part] | None = None
    if type(content) is str:
        parts = content
    elif type(content) is list:
        parts = [
            _Part(type=_str(item.get("type")) or "", text=_str(item.get("text")))
            for item in content
            if type(item) is dict
        ]
    is_error = data.get("is_error")
    return _Block(
        type=_str(data.get("type")) or "",
        text=_str(data.get("text")),
        id=_str(data.get("id")),
        name=_str(data.get("name")),
        input=tool_input,
        tool_use_id=_str(data.get("tool_use_id")),
        content=parts,
        is_error=is_error if type(is_error) is bool else None,
    )


def _excerpt(content: str | list[_Part] | None) -> str | None:
    """The start of a tool result: a string, or the text parts of a list (images skipped)."""
    if content is None:
        return None
    if isinstance(content, str):
        return content[:EXCERPT_LIMIT]
    parts: list[str] = []
    size = 0
    for part in content:
        words = part.text
        if part.type == "text" and words is not None:
            parts.append(words[: EXCERPT_LIMIT - size])
            size += len(parts[-1]) + 1
            if size >= EXCERPT_LIMIT:
                break
    return "\n".join(parts)[:EXCERPT_LIMIT] if parts else ""


_EXIT_CODE = re.compile(r"^(?:Error: )?Exit code (\d+)")


def _exit_code(excerpt: str | None, is_error: bool | None) -> int | None:
    if excerpt:
        match = _EXIT_CODE.match(excerpt)
        if match:
            return int(match.group(1))
    return 0 if is_error is False else None
