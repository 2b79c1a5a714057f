"""The ``gemini`` adapter: Google's Gemini CLI, run as ``gemini -p "" --output-format stream-json``.

The CLI prints one JSON event per line: ``init`` (session id, model), ``message`` (the user's
prompt, then the assistant's text in ``delta`` pieces), ``tool_use`` / ``tool_result``,
``error`` (warnings and non-fatal errors; not terminal) and a final ``result`` with ``status``
(``success`` or ``error`` with an ``error.type`` and ``error.message``) and ``stats``: the
process's token totals per model. Some failures print nothing on stdout (no credentials: exit
41 and a line on stderr), so the exit code carries meaning too: 41 auth, 42 bad input, 44
sandbox, 52 config, 53 turn limit (``max_turns``), 54 fatal tool error, 55 untrusted folder,
130 cancelled. An API error ends the process with the HTTP status as its exit code, which the
OS cuts to 8 bits: 400 → 144, 401 → 145, 403 → 147, 429 → 173, 500 → 244; those are mapped back.

Tokens: the stats are totals over the turn's requests (the main model's, plus the CLI's helper
calls on other models, which are reported as sub-agent rows that do not fill the context). The
context fill is estimated as the main model's tokens divided by the number of model requests
(one more than the rounds of tool calls): a lower bound of the last request's fill. Since a
total is not one request, it is reported as a SYSTEM message and a single aggregate entry in
``TurnResult.requests``, never as a USAGE message whose fill a context monitor would misread.
The CLI reports no context window; it comes from the model table.

Unattended runs: ``--approval-mode yolo`` (every tool call approved; ``auto_edit`` approves edits
only) and ``--skip-trust``: without it, in a folder the user never trusted, the CLI silently
falls back to asking for approval, which nobody answers. The prompt goes on stdin (``-p ""``
switches to headless mode and is appended to it). ``--resume <session id>`` continues a session
recorded for the same working directory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import attrs

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.agents.transcript import (
    classify_error_text,
    count,
    decode_object,
    key_input_of,
    retry_at_from_text,
    text_or_none,
)
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

_FINAL_TEXT_LIMIT = 64 * 1024
_EXCERPT_LIMIT = 1000
_MESSAGE_LIMIT = 4000
_KEY_INPUTS = (
    "file_path",
    "absolute_path",
    "path",
    "dir_path",
    "command",
    "pattern",
    "query",
    "url",
    "paths",
)

#: The CLI's own exit codes (``FatalError`` subclasses).
EXIT_CODES: dict[int, tuple[ErrorKind, str]] = {
    41: (ErrorKind.AUTH, "authentication failed"),
    42: (ErrorKind.UNKNOWN, "the CLI rejected its input"),
    44: (ErrorKind.CRASHED, "the sandbox could not start"),
    52: (ErrorKind.CRASHED, "the CLI's configuration is invalid"),
    53: (ErrorKind.MAX_TURNS, "reached the session turn limit"),
    54: (ErrorKind.CRASHED, "a tool failed fatally"),
    55: (ErrorKind.AUTH, "the working directory is not trusted"),
    130: (ErrorKind.INTERRUPTED, "cancelled"),
}


def http_status_from_exit_code(exit_code: int | None) -> int | None:
    """The HTTP status an API error exit code stands for (exit code = status mod 256)."""
    if exit_code is None or not 144 <= exit_code <= 255:
        return None
    status = exit_code + 256
    return status if 400 <= status <= 511 else None


def kind_for_http_status(status: int) -> ErrorKind:
    if status in (401, 403):
        return ErrorKind.AUTH
    if status == 402:
        return ErrorKind.BILLING
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status in (408, 504) or status >= 500:
        return ErrorKind.NETWORK
    return ErrorKind.UNKNOWN


@attrs.define
class GeminiSettings(AgentSettings):
    """``[agents.gemini]``."""

    approval_mode: str = attrs.field(
        default="yolo",
        metadata={
            "doc": "`--approval-mode`, passed as given: `yolo` approves every tool call, "
            "`auto_edit` edits only; `default` and `plan` (0.61) would wait for answers."
        },
    )
    skip_trust: bool = attrs.field(
        default=True,
        metadata={"doc": "`--skip-trust`: trust the working directory for this session."},
    )
    sandbox: bool = attrs.field(
        default=False,
        metadata={"doc": "`--sandbox`: run tools in Gemini CLI's container sandbox."},
    )
    allowed_mcp_server_names: list[str] = attrs.field(
        factory=list,
        metadata={
            "doc": "`--allowed-mcp-server-names`: the MCP servers (of Gemini CLI's own "
            "settings) the agent may use; empty: all of them."
        },
    )
    policy: list[str] = attrs.field(
        factory=list,
        metadata={
            "doc": "`--policy`: policy files or directories for Gemini CLI's policy engine, "
            "which allows and denies tools."
        },
    )


class GeminiAgent(AgentAdapter):
    name: ClassVar[str] = "gemini"
    description: ClassVar[str] = "Google Gemini CLI (gemini --output-format stream-json)"
    executable: ClassVar[str | None] = "gemini"
    settings_class: ClassVar[type[AgentSettings]] = GeminiSettings
    option_settings: ClassVar[Mapping[str, str]] = {
        "--approval-mode": "approval_mode",
        "--model": "model",
        "-m": "model",
        "--allowed-mcp-server-names": "allowed_mcp_server_names",
        "--policy": "policy",
    }

    def invocation(self, request: TurnRequest) -> Invocation:
        settings = self.settings_as(GeminiSettings)
        argv = self.program()
        argv += ["--prompt", "", "--output-format", "stream-json"]
        argv += ["--approval-mode", settings.approval_mode]
        if settings.skip_trust:
            argv.append("--skip-trust")
        if settings.sandbox:
            argv.append("--sandbox")
        if settings.model:
            argv += ["--model", settings.model]
        for server in settings.allowed_mcp_server_names:
            argv += ["--allowed-mcp-server-names", str(server)]
        for policy in settings.policy:
            argv += ["--policy", str(policy)]
        if request.session_id:
            argv += ["--resume", request.session_id]
        argv += [str(arg) for arg in settings.extra_args]
        return Invocation(argv=argv, stdin=request.prompt.encode("utf-8", errors="replace"))

    def new_parser(self) -> StreamParser:
        return GeminiParser(model=self.settings.model, model_windows=self.model_windows)


class GeminiParser(StreamParser):
    """Maps ``stream-json`` events to messages and a TurnResult; skips anything else."""

    def __init__(
        self,
        *,
        model: str | None = None,
        model_windows: Mapping[str, int] | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self.model = model
        self.model_windows = dict(model_windows or {})
        self.wall_clock = wall_clock
        self.session_id: str | None = None
        self.texts: list[str] = []
        self.text_open = False
        self.tool_calls: list[ToolCall] = []
        self.calls_by_id: dict[str, ToolCall] = {}
        self.tool_rounds = 0
        self.last_was_tool_use = False
        self.errors: list[str] = []
        self.result: dict[str, Any] | None = None
        self.requests: list[Usage] = []
        self.context_tokens: int | None = None

    @property
    def done(self) -> bool:
        return self.result is not None

    def feed(self, line: bytes) -> list[AgentMessage]:
        event = decode_object(line)
        if event is None:
            return []
        kind = event.get("type")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return []
        try:
            messages = handler(self, event)
        except Exception:  # noqa: BLE001 - a surprise in one event must not end the turn
            return []
        self.last_was_tool_use = kind == "tool_use"
        return messages

    def _on_init(self, event: dict[str, Any]) -> list[AgentMessage]:
        self.session_id = text_or_none(event.get("session_id")) or self.session_id
        self.model = text_or_none(event.get("model")) or self.model
        return [
            AgentMessage(
                kind=MessageKind.INIT,
                session_id=self.session_id,
                model=self.model,
                context_window=self._window(),
                raw_type="init",
            )
        ]

    def _on_message(self, event: dict[str, Any]) -> list[AgentMessage]:
        content = text_or_none(event.get("content"))
        if event.get("role") != "assistant" or content is None:
            return []
        if self.text_open and self.texts:
            self.texts[-1] = (self.texts[-1] + content)[-_FINAL_TEXT_LIMIT:]
        else:
            self.texts.append(content[-_FINAL_TEXT_LIMIT:])
        self.text_open = event.get("delta") is True
        while len(self.texts) > 1 and sum(len(t) + 1 for t in self.texts) > _FINAL_TEXT_LIMIT:
            self.texts.pop(0)
        return [AgentMessage(kind=MessageKind.TEXT, text=content, raw_type="message")]

    def _on_tool_use(self, event: dict[str, Any]) -> list[AgentMessage]:
        self.text_open = False
        if not self.last_was_tool_use:
            self.tool_rounds += 1
        parameters = event.get("parameters")
        call = ToolCall(
            name=text_or_none(event.get("tool_name")) or "unknown",
            key_input=key_input_of(parameters if isinstance(parameters, dict) else {}, _KEY_INPUTS),
            id=text_or_none(event.get("tool_id")) or "",
        )
        self.tool_calls.append(call)
        if call.id:
            self.calls_by_id[call.id] = call
        return [AgentMessage(kind=MessageKind.TOOL_CALL, tool_call=call, raw_type="tool_use")]

    def _on_tool_result(self, event: dict[str, Any]) -> list[AgentMessage]:
        self.text_open = False
        call_id = text_or_none(event.get("tool_id")) or ""
        call = self.calls_by_id.get(call_id) or ToolCall(name="", id=call_id)
        error = event.get("error")
        error_text = text_or_none(error.get("message")) if isinstance(error, dict) else None
        output = text_or_none(event.get("output"))
        call.is_error = event.get("status") == "error" or error_text is not None
        excerpt = error_text if call.is_error and error_text else output
        call.result_excerpt = None if excerpt is None else excerpt[:_EXCERPT_LIMIT]
        return [AgentMessage(kind=MessageKind.TOOL_RESULT, tool_call=call, raw_type="tool_result")]

    def _on_error(self, event: dict[str, Any]) -> list[AgentMessage]:
        message = text_or_none(event.get("message")) or ""
        self.errors = [*self.errors[-9:], message]
        return [AgentMessage(kind=MessageKind.ERROR, text=message, raw_type="error")]

    def _on_result(self, event: dict[str, Any]) -> list[AgentMessage]:
        self.result = event
        messages = self._usage(event.get("stats"))
        error = event.get("error")
        text = text_or_none(error.get("message")) if isinstance(error, dict) else None
        messages.append(
            AgentMessage(
                kind=MessageKind.RESULT,
                text=text or (self.texts[-1] if self.texts else ""),
                session_id=self.session_id,
                raw_type="result",
            )
        )
        return messages

    def _usage(self, stats: object) -> list[AgentMessage]:
        if not isinstance(stats, dict):
            return []
        models = stats.get("models")
        per_model: dict[str, Usage] = {}
        if isinstance(models, dict):
            for name, raw in models.items():
                if isinstance(name, str) and isinstance(raw, dict):
                    per_model[name] = _usage_of(raw)
        if not per_model:
            per_model[self.model or "?"] = _usage_of(stats)
        main = (
            self.model
            if self.model in per_model
            else max(per_model, key=lambda name: per_model[name].context_tokens)
        )
        messages: list[AgentMessage] = []
        for name, usage in per_model.items():
            if usage.context_tokens == 0:
                continue
            if name != main:  # the CLI's helper calls: they do not fill the main context
                messages.append(
                    AgentMessage(
                        kind=MessageKind.USAGE,
                        usage=usage,
                        model=name,
                        session_id=self.session_id,
                        sidechain=True,
                        raw_type="result",
                    )
                )
                continue
            # a total over several requests is not one request's fill: no USAGE message for it
            self.requests.append(usage)
            requests_made = self.tool_rounds + 1
            self.context_tokens = usage.context_tokens // requests_made or None
            messages.append(
                AgentMessage(
                    kind=MessageKind.SYSTEM,
                    text=(
                        f"{name} over about {requests_made} request(s): {usage.input_tokens} "
                        f"input, {usage.cache_read_input_tokens} cached, {usage.output_tokens} "
                        "output"
                    ),
                    model=name,
                    session_id=self.session_id,
                    context_window=self._window(),
                    raw_type="result",
                )
            )
        return messages

    _handlers: ClassVar[dict[str, Callable[[GeminiParser, dict[str, Any]], list[AgentMessage]]]] = {
        "init": _on_init,
        "message": _on_message,
        "tool_use": _on_tool_use,
        "tool_result": _on_tool_result,
        "error": _on_error,
        "result": _on_result,
    }

    def _window(self) -> int | None:
        return context_window_for(self.model, self.model_windows)

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        return TurnResult(
            outcome=self._outcome(exit_code, stderr),
            session_id=self.session_id,
            final_text="\n".join(self.texts)[-_FINAL_TEXT_LIMIT:],
            tool_calls=list(self.tool_calls),
            requests=list(self.requests),
            context_tokens=self.context_tokens,
            context_window=self._window(),
            model=self.model,
            exit_code=exit_code,
        )

    def _outcome(self, exit_code: int | None, stderr: str) -> TurnOutcome:
        result = self.result
        tail = _stderr_message(stderr)
        if result is not None and result.get("status") == "success":
            return TurnOutcome()
        if result is not None:
            error = result.get("error")
            error = error if isinstance(error, dict) else {}
            message = text_or_none(error.get("message")) or (self.errors[-1] if self.errors else "")
            if error.get("type") == "FatalTurnLimitedError" or exit_code == 53:
                return TurnOutcome(ErrorKind.MAX_TURNS, message)
            return self._classified(message or tail, exit_code)
        if exit_code == 0:
            return TurnOutcome(ErrorKind.INVALID_OUTPUT, "gemini exited without its result line")
        if exit_code is None:
            last = self.errors[-1] if self.errors else tail
            kind = classify_error_text(last) if last else ErrorKind.UNKNOWN
            if kind is not ErrorKind.UNKNOWN:  # ended while retrying: say what it retried
                return self._classified(last, None)
            words = "gemini was ended before its result line"
            return TurnOutcome(ErrorKind.CRASHED, f"{words}: {last}" if last else words)
        return self._classified(tail or (self.errors[-1] if self.errors else ""), exit_code)

    def _classified(self, message: str, exit_code: int | None) -> TurnOutcome:
        kind = classify_error_text(message) if message else ErrorKind.UNKNOWN
        if kind is ErrorKind.UNKNOWN and exit_code is not None:
            status = http_status_from_exit_code(exit_code)
            if status is not None:
                kind = kind_for_http_status(status)
            elif exit_code in EXIT_CODES:
                kind = EXIT_CODES[exit_code][0]
                message = message or f"gemini: {EXIT_CODES[exit_code][1]}"
            elif exit_code != 0:
                kind = ErrorKind.CRASHED
        elif exit_code in (41, 53, 130):
            kind = EXIT_CODES[exit_code][0]
        if not message:
            message = f"gemini exited with code {exit_code}"
        retry_at = None
        if kind is ErrorKind.RATE_LIMIT:
            clock = self.wall_clock
            retry_at = (
                retry_at_from_text(message) if clock is None else retry_at_from_text(message, clock)
            )
        return TurnOutcome(kind, message[:_MESSAGE_LIMIT], retry_at)


def _usage_of(raw: Mapping[str, Any]) -> Usage:
    prompt = count(raw.get("input_tokens"))
    cached = min(count(raw.get("cached")), prompt)
    output = count(raw.get("output_tokens"))
    total = count(raw.get("total_tokens"))
    thoughts = max(total - prompt - output, 0)  # thinking and tool-use tokens, billed as output
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=output + thoughts,
        cache_read_input_tokens=cached,
    )


def _stderr_message(stderr: str) -> str:
    """The telling lines of stderr: no start-up chatter, stack frames or lone braces."""
    noise = ("YOLO mode is enabled", "Warning: 256-color", "Ripgrep is not available", "[STARTUP]")
    lines = [
        line.strip()
        for line in stderr.strip().splitlines()
        if line.strip()
        and not line[0].isspace()
        and not line.startswith(noise)
        and line.strip() not in ("{", "}")
    ]
    return "\n".join(lines[-5:])[-_MESSAGE_LIMIT:]
