"""The ``codex`` adapter: OpenAI's Codex CLI, run as ``codex exec --json``.

Codex prints one JSON event per line: ``thread.started`` (the session id), ``turn.started``,
``item.started/updated/completed`` (agent messages, reasoning, shell commands, file changes, MCP
and web-search calls, the to-do list, non-fatal ``error`` items), then ``turn.completed`` or
``turn.failed``. Top-level ``error`` lines are *not* terminal: Codex prints one on every reconnect
("Reconnecting... 2/5 (…)", "Reconnecting... waiting for network (…)").

Tokens. ``turn.completed`` carries a running *session* total (it survives ``exec resume``), summed
over every model request of the turn. The turn's usage is the difference from the previous total,
but its context fill is not: ten requests of 20k tokens each add 200k input tokens while the
context holds about 20k. So the parser reads the exact per-request counts (and Codex's own context
window) from Codex's session log, ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<id>.jsonl``
(``token_count`` events after the turn's ``task_started``), when it exists. Without it (an
``--ephemeral`` run, a moved ``CODEX_HOME``, a transcript parsed later) the turn is one aggregate
usage row and the fill is an estimate: the turn's tokens divided by the number of model requests
it made (one more than its tool calls), which is a lower bound of the last request's fill.
OpenAI counts cached tokens inside ``input_tokens``; they are split out, never added twice.

Unattended runs: ``-c approval_policy="never"`` (Codex never stops to ask) and the
``workspace-write`` sandbox by default (commands may write inside the working directory and the
temp dirs, network off; ``network_access = true`` turns it on, ``sandbox = "danger-full-access"``
or ``bypass_sandbox = true`` lift the sandbox for machines that are sandboxed already). The prompt
goes on stdin (``-`` argument), so its size is not limited by the command line. Resuming is
``codex exec resume <id> -``. A Codex that has lost the network retries forever, printing an
``error`` line every few seconds, which keeps the supervisor's idle watchdog (it counts bytes)
from firing; the parser therefore gives up after ``reconnect_give_up_s`` of nothing but reconnect
errors (it reports ``done``, the supervisor ends the process, the outcome is ``network``).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.agents.transcript import (
    bounded_tail,
    classify_error_text,
    count,
    decode_object,
    int_or_none,
    retry_at_from_text,
    text_or_none,
    usage_from_openai_counts,
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
_KEY_INPUT_LIMIT = 500
_MESSAGE_LIMIT = 4000
_TOOL_ITEMS = frozenset(
    {"command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"}
)
_RECONNECTING = "Reconnecting..."


@attrs.define
class CodexSettings(AgentSettings):
    """``[agents.codex]``."""

    sandbox: str = attrs.field(
        default="workspace-write",
        metadata={
            "doc": "Codex's sandbox mode, passed as given: `read-only`, `workspace-write` or "
            "`danger-full-access` (0.169)."
        },
    )
    network_access: bool = attrs.field(
        default=False,
        metadata={"doc": "Let sandboxed commands reach the network."},
    )
    bypass_sandbox: bool = attrs.field(
        default=False,
        metadata={
            "doc": "`--dangerously-bypass-approvals-and-sandbox`: only inside a sandbox of "
            "your own."
        },
    )
    skip_git_repo_check: bool = attrs.field(
        default=True,
        metadata={
            "doc": "`--skip-git-repo-check`: run in directories that are not git repositories."
        },
    )
    config_overrides: list[str] = attrs.field(
        factory=list,
        metadata={
            "doc": "`-c key=value` overrides of Codex's config.toml, one each: MCP servers "
            '(`mcp_servers.docs.command="docs-mcp"`), features, tools.'
        },
    )
    keep_sessions: bool = attrs.field(
        default=False,
        metadata={
            "doc": "Let Codex store the sessions of a fresh-session run in "
            "`$CODEX_HOME/sessions` (off: `--ephemeral`). Stored sessions also give exact "
            "per-request token counts and Codex's own context window; resumed sessions are "
            "always stored."
        },
    )
    session_log: bool = attrs.field(
        default=True,
        metadata={
            "doc": "Read exact per-request token counts from Codex's session log when it exists."
        },
    )
    reconnect_give_up_s: float | None = attrs.field(
        default=600.0,
        metadata={
            "doc": "Give up after this many seconds of nothing but reconnect errors (unset: never)."
        },
    )


class CodexAgent(AgentAdapter):
    name: ClassVar[str] = "codex"
    description: ClassVar[str] = "OpenAI Codex CLI (codex exec --json)"
    executable: ClassVar[str | None] = "codex"
    settings_class: ClassVar[type[AgentSettings]] = CodexSettings
    option_settings: ClassVar[Mapping[str, str]] = {
        "--model": "model",
        "-m": "model",
        "model": "model",
        "--sandbox": "sandbox",
        "sandbox_mode": "sandbox",
        "sandbox_workspace_write.network_access": "network_access",
    }

    def __init__(
        self,
        settings: AgentSettings | None = None,
        *,
        model_windows: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(settings, model_windows=model_windows)
        #: The last session total seen per session id, so a resumed turn's usage is a difference.
        self.session_totals: dict[str, dict[str, int]] = {}
        #: Whether the last invocation asked Codex not to store its session (for its parser).
        self._ephemeral = False

    def invocation(self, request: TurnRequest) -> Invocation:
        settings = self.settings_as(CodexSettings)
        argv = self.program()
        argv.append("exec")
        if request.session_id:
            argv.append("resume")
        argv.append("--json")
        self._ephemeral = not request.session_id and not (
            request.keep_session or settings.keep_sessions
        )
        if self._ephemeral:
            argv.append("--ephemeral")
        if settings.skip_git_repo_check:
            argv.append("--skip-git-repo-check")
        if settings.model:
            argv += ["-m", settings.model]
        if settings.bypass_sandbox:
            argv.append("--dangerously-bypass-approvals-and-sandbox")
        else:
            argv += ["-c", 'approval_policy="never"', "-c", f'sandbox_mode="{settings.sandbox}"']
            if settings.network_access:
                argv += ["-c", "sandbox_workspace_write.network_access=true"]
        for override in settings.config_overrides:
            argv += ["-c", str(override)]
        argv += [str(arg) for arg in settings.extra_args]
        if request.session_id:
            argv.append(request.session_id)
        argv.append("-")  # the prompt comes on stdin
        return Invocation(argv=argv, stdin=request.prompt.encode("utf-8", errors="replace"))

    def new_parser(self) -> StreamParser:
        settings = self.settings_as(CodexSettings)
        home = codex_home(settings.env)
        ephemeral, self._ephemeral = self._ephemeral, False
        return CodexParser(
            model=settings.model or configured_model(home),
            model_windows=self.model_windows,
            codex_home=home if settings.session_log and not ephemeral else None,
            reconnect_give_up_s=settings.reconnect_give_up_s,
            session_totals=self.session_totals,
        )


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Where Codex keeps its sessions: ``CODEX_HOME`` (settings env first), else ``~/.codex``."""
    value = (env or {}).get("CODEX_HOME") or os.environ.get("CODEX_HOME")
    return Path(value).expanduser() if value else Path.home() / ".codex"


def configured_model(home: Path) -> str | None:
    """The ``model`` of Codex's own ``config.toml`` (what Codex runs when loopctl names none),
    or None when it sets none or cannot be read."""
    from loopctl.configfile import ConfigError, read_toml

    path = home / "config.toml"
    if not path.is_file():
        return None
    try:
        data = read_toml(path, str(path))
    except ConfigError:
        return None
    model = data.get("model")
    return model if isinstance(model, str) and model.strip() else None


@attrs.define
class _Totals:
    input_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    output_tokens: int = 0

    @classmethod
    def read(cls, raw: Mapping[str, Any]) -> _Totals:
        return cls(
            count(raw.get("input_tokens")),
            count(raw.get("cached_input_tokens")),
            count(raw.get("cache_write_input_tokens")),
            count(raw.get("output_tokens")),
        )

    def minus(self, other: _Totals) -> _Totals | None:
        parts = [a - b for a, b in zip(attrs.astuple(self), attrs.astuple(other), strict=False)]
        return None if any(part < 0 for part in parts) else _Totals(*parts)

    def usage(self) -> Usage:
        return usage_from_openai_counts(
            self.input_tokens,
            self.cached_input_tokens,
            self.cache_write_input_tokens,
            self.output_tokens,
        )


class CodexParser(StreamParser):
    """Maps ``codex exec --json`` events to messages and a TurnResult; skips anything else."""

    def __init__(
        self,
        *,
        model: str | None = None,
        model_windows: Mapping[str, int] | None = None,
        codex_home: Path | None = None,
        reconnect_give_up_s: float | None = 600.0,
        session_totals: dict[str, dict[str, int]] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.model = model
        self.model_windows = dict(model_windows or {})
        self.codex_home = codex_home
        self.reconnect_give_up_s = reconnect_give_up_s
        self.session_totals = session_totals if session_totals is not None else {}
        self.clock = clock
        self.wall_clock = wall_clock
        self.session_id: str | None = None
        self.texts: list[str] = []
        self.tool_calls: list[ToolCall] = []
        self.calls_by_item: dict[str, ToolCall] = {}
        self.tool_items_completed = 0
        self.requests: list[Usage] = []
        self.exact_usage = False
        self.context_tokens: int | None = None
        self.context_window: int | None = None
        self.completed = False
        self.failure: str | None = None
        self.last_error: str | None = None
        self.retry_at: float | None = None
        self.reconnecting_since: float | None = None
        self.gave_up = False
        self.previous_total: _Totals | None = None
        self.turn_total: _Totals | None = None

    @property
    def done(self) -> bool:
        return self.completed or self.failure is not None or self.gave_up

    def feed(self, line: bytes) -> list[AgentMessage]:
        event = decode_object(line)
        if event is None:
            return []
        kind = event.get("type")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return []
        if kind != "error":
            self.reconnecting_since = None
        try:
            return handler(self, event)
        except Exception:  # noqa: BLE001 - a surprise in one event must not end the turn
            return []

    # --- events -----------------------------------------------------------------------------

    def _on_thread_started(self, event: dict[str, Any]) -> list[AgentMessage]:
        self.session_id = text_or_none(event.get("thread_id")) or self.session_id
        if self.session_id and self.previous_total is None:
            known = self.session_totals.get(self.session_id)
            if isinstance(known, dict):
                self.previous_total = _Totals.read(known)
        self.context_window = self.context_window or context_window_for(
            self.model, self.model_windows
        )
        return [
            AgentMessage(
                kind=MessageKind.INIT,
                session_id=self.session_id,
                model=self.model,
                context_window=self.context_window,
                raw_type="thread.started",
            )
        ]

    def _on_turn_started(self, event: dict[str, Any]) -> list[AgentMessage]:
        return [AgentMessage(kind=MessageKind.SYSTEM, text="turn started", raw_type="turn.started")]

    def _on_item(self, event: dict[str, Any]) -> list[AgentMessage]:
        raw_type = str(event.get("type"))
        item = event.get("item")
        if not isinstance(item, dict):
            return []
        item_type = item.get("type")
        if item_type in _TOOL_ITEMS:
            return self._tool_item(raw_type, item)
        if raw_type != "item.completed":
            if item_type == "todo_list":
                return [AgentMessage(MessageKind.SYSTEM, text=_todo_text(item), raw_type=raw_type)]
            return []
        if item_type == "agent_message":
            text = text_or_none(item.get("text"))
            if text is None:
                return []
            self.texts.append(text[-_FINAL_TEXT_LIMIT:])
            while len(self.texts) > 1 and sum(len(t) + 1 for t in self.texts) > _FINAL_TEXT_LIMIT:
                self.texts.pop(0)
            return [AgentMessage(kind=MessageKind.TEXT, text=text, raw_type=raw_type)]
        if item_type == "reasoning":
            text = text_or_none(item.get("text")) or ""
            return [AgentMessage(kind=MessageKind.SYSTEM, text=text, raw_type="reasoning")]
        if item_type == "todo_list":
            return [AgentMessage(MessageKind.SYSTEM, text=_todo_text(item), raw_type=raw_type)]
        if item_type == "error":
            text = text_or_none(item.get("message")) or ""
            return [AgentMessage(kind=MessageKind.SYSTEM, text=text, raw_type="error_item")]
        return []

    def _tool_item(self, raw_type: str, item: dict[str, Any]) -> list[AgentMessage]:
        item_id = text_or_none(item.get("id")) or ""
        messages: list[AgentMessage] = []
        call = self.calls_by_item.get(item_id) if item_id else None
        if call is None:
            call = ToolCall(name=_tool_name(item), key_input=_tool_key(item), id=item_id)
            self.tool_calls.append(call)
            if item_id:
                self.calls_by_item[item_id] = call
            messages.append(AgentMessage(MessageKind.TOOL_CALL, tool_call=call, raw_type=raw_type))
        if raw_type == "item.completed":
            self.tool_items_completed += 1
            call.result_excerpt = _tool_excerpt(item)
            call.exit_code = int_or_none(item.get("exit_code"))
            status = item.get("status")
            failed = status in ("failed", "declined") or (call.exit_code not in (None, 0))
            call.is_error = bool(failed or item.get("error"))
            messages.append(
                AgentMessage(MessageKind.TOOL_RESULT, tool_call=call, raw_type=raw_type)
            )
        return messages

    def _on_turn_completed(self, event: dict[str, Any]) -> list[AgentMessage]:
        self.completed = True
        raw = event.get("usage")
        messages: list[AgentMessage] = []
        if isinstance(raw, dict):
            messages = self._usage(_Totals.read(raw))
        messages.append(
            AgentMessage(
                kind=MessageKind.RESULT,
                text=self.texts[-1] if self.texts else "",
                session_id=self.session_id,
                raw_type="turn.completed",
            )
        )
        return messages

    def _usage(self, total: _Totals) -> list[AgentMessage]:
        delta = total.minus(self.previous_total) if self.previous_total is not None else None
        # a turn that completed made at least one request; anything else means the remembered
        # total is not this session's previous one (a transcript parsed twice), so use the total
        turn = delta if delta is not None and delta.input_tokens > 0 else total
        self.previous_total = total
        self.turn_total = total
        if self.session_id:
            self.session_totals[self.session_id] = attrs.asdict(total)
        rows, window, model = self._session_log_rows(total)
        if rows:
            self.exact_usage = True
            self.model = model or self.model
            self.context_window = window or self.context_window
            self.requests.extend(rows)
            self.context_tokens = rows[-1].context_tokens
            return [
                AgentMessage(
                    kind=MessageKind.USAGE,
                    usage=row,
                    session_id=self.session_id,
                    model=self.model,
                    context_window=self.context_window,
                    raw_type="token_count",
                )
                for row in rows
            ]
        usage = turn.usage()
        self.requests.append(usage)
        requests_made = self.tool_items_completed + 1
        self.context_tokens = (
            usage.context_tokens // requests_made if usage.context_tokens else None
        )
        return [
            AgentMessage(
                kind=MessageKind.SYSTEM,
                text=(
                    f"turn usage over about {requests_made} request(s): {usage.input_tokens} input, "
                    f"{usage.cache_read_input_tokens} cached, {usage.output_tokens} output"
                ),
                session_id=self.session_id,
                context_window=self.context_window,
                raw_type="turn.completed",
            )
        ]

    def _on_turn_failed(self, event: dict[str, Any]) -> list[AgentMessage]:
        error = event.get("error")
        message = text_or_none(error.get("message")) if isinstance(error, dict) else None
        self.failure = message or self.last_error or "turn failed"
        self.retry_at = retry_at_from_text(self.failure, self.wall_clock)
        return [
            AgentMessage(
                kind=MessageKind.RESULT,
                text=self.failure,
                session_id=self.session_id,
                raw_type="turn.failed",
            )
        ]

    def _on_error(self, event: dict[str, Any]) -> list[AgentMessage]:
        message = text_or_none(event.get("message")) or ""
        self.last_error = message
        if message.startswith(_RECONNECTING):
            now = self.clock()
            if self.reconnecting_since is None:
                self.reconnecting_since = now
            limit = self.reconnect_give_up_s
            if limit is not None and now - self.reconnecting_since >= limit:
                self.gave_up = True
        else:
            self.reconnecting_since = None
        return [AgentMessage(kind=MessageKind.ERROR, text=message, raw_type="error")]

    _handlers: ClassVar[dict[str, Callable[[CodexParser, dict[str, Any]], list[AgentMessage]]]] = {
        "thread.started": _on_thread_started,
        "turn.started": _on_turn_started,
        "item.started": _on_item,
        "item.updated": _on_item,
        "item.completed": _on_item,
        "turn.completed": _on_turn_completed,
        "turn.failed": _on_turn_failed,
        "error": _on_error,
    }

    # --- the session log ----------------------------------------------------------------------

    def _session_log_rows(self, total: _Totals) -> tuple[list[Usage], int | None, str | None]:
        """Per-request usage of the current turn from Codex's session log, if it agrees."""
        if self.codex_home is None or not self.session_id:
            return [], None, None
        try:
            path = find_session_log(self.codex_home, self.session_id)
            if path is None:
                return [], None, None
            rows, last_total, window, model = read_session_log_turn(path)
        except (OSError, ValueError):
            return [], None, None
        if not rows or last_total != total:
            return [], None, None  # not written yet, or not this turn: the stream's totals win
        return rows, window, model

    # --- the result -------------------------------------------------------------------------

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        if self.turn_total is not None and not self.exact_usage and self.requests:
            rows, window, model = self._session_log_rows(self.turn_total)
            if rows:  # the log was complete only once Codex had exited
                self.exact_usage = True
                self.requests = rows
                self.context_tokens = rows[-1].context_tokens
                self.context_window = window or self.context_window
                self.model = model or self.model
        if self.context_window is None:
            self.context_window = context_window_for(self.model, self.model_windows)
        return TurnResult(
            outcome=self._outcome(exit_code, stderr),
            session_id=self.session_id,
            final_text=bounded_tail(self.texts, _FINAL_TEXT_LIMIT),
            tool_calls=list(self.tool_calls),
            requests=list(self.requests),
            context_tokens=self.context_tokens,
            context_window=self.context_window,
            model=self.model,
            exit_code=exit_code,
        )

    def _outcome(self, exit_code: int | None, stderr: str) -> TurnOutcome:
        if self.failure is not None:
            return self._error(self.failure)
        if self.completed:
            return TurnOutcome()
        if self.gave_up:
            return TurnOutcome(
                ErrorKind.NETWORK,
                f"codex kept reconnecting for {self.reconnect_give_up_s:g} s without an answer: "
                f"{self.last_error}",
            )
        tail = stderr.strip()[-_MESSAGE_LIMIT:]
        if self.last_error:
            outcome = self._error(self.last_error)
            if outcome.error_kind is not ErrorKind.UNKNOWN:
                return outcome
        if exit_code is None:
            words = "codex was ended before its turn finished"
            return TurnOutcome(ErrorKind.CRASHED, f"{words}: {tail}" if tail else words)
        if exit_code != 0:
            kind = classify_error_text(tail) if tail else ErrorKind.CRASHED
            if kind is ErrorKind.UNKNOWN:
                kind = ErrorKind.CRASHED
            return TurnOutcome(kind, tail or f"codex exited with code {exit_code}")
        return TurnOutcome(
            ErrorKind.INVALID_OUTPUT, "codex exited without turn.completed or turn.failed"
        )

    def _error(self, message: str) -> TurnOutcome:
        kind = classify_error_text(message)
        retry_at = retry_at_from_text(message, self.wall_clock)
        if kind is not ErrorKind.RATE_LIMIT:
            retry_at = None
        return TurnOutcome(kind, message[:_MESSAGE_LIMIT], retry_at)


def find_session_log(home: Path, session_id: str) -> Path | None:
    """Codex's rollout file for ``session_id`` under ``home/sessions``, newest first."""
    if not session_id or any(sep in session_id for sep in "/\\*?[]"):
        return None
    found = sorted((home / "sessions").glob(f"*/*/*/rollout-*{session_id}.jsonl"))
    return found[-1] if found else None


def read_session_log_turn(path: Path) -> tuple[list[Usage], _Totals | None, int | None, str | None]:
    """The last turn's per-request usage, last session total, context window and model."""
    rows: list[Usage] = []
    last_total: _Totals | None = None
    window: int | None = None
    model: str | None = None
    for record in _log_records(path):
        payload = record.get("payload")
        if not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if record.get("type") == "turn_context":
            model = text_or_none(payload.get("model")) or model
        elif kind == "task_started":
            rows = []
            window = int_or_none(payload.get("model_context_window")) or window
        elif kind == "token_count":
            info = payload.get("info")
            if not isinstance(info, dict):
                continue
            total_raw, last_raw = info.get("total_token_usage"), info.get("last_token_usage")
            if not isinstance(total_raw, dict) or not isinstance(last_raw, dict):
                continue
            total = _Totals.read(total_raw)
            if total == last_total:
                continue  # a repeated count (rate-limit updates): not a new request
            last_total = total
            rows.append(_Totals.read(last_raw).usage())
            window = int_or_none(info.get("model_context_window")) or window
    return rows, last_total, window, model


_LOG_MARKERS = (b'"token_count"', b'"task_started"', b'"turn_context"')


def _log_records(path: Path) -> Iterator[dict[str, Any]]:
    with open(path, "rb") as handle:
        for line in handle:
            if any(marker in line for marker in _LOG_MARKERS):
                record = decode_object(line)
                if record is not None:
                    yield record


def _tool_name(item: Mapping[str, Any]) -> str:
    item_type = str(item.get("type"))
    if item_type == "mcp_tool_call":
        server, tool = text_or_none(item.get("server")), text_or_none(item.get("tool"))
        return f"mcp:{server or '?'}/{tool or '?'}"
    if item_type == "collab_tool_call":
        return f"collab:{text_or_none(item.get('tool')) or '?'}"
    return item_type


def _tool_key(item: Mapping[str, Any]) -> str:
    item_type = item.get("type")
    if item_type == "command_execution":
        return _unwrap_shell(text_or_none(item.get("command")) or "")[:_KEY_INPUT_LIMIT]
    if item_type == "file_change":
        changes = item.get("changes")
        paths = [
            str(change.get("path"))
            for change in (changes if isinstance(changes, list) else [])
            if isinstance(change, dict) and isinstance(change.get("path"), str)
        ]
        return ", ".join(paths)[:_KEY_INPUT_LIMIT]
    if item_type == "web_search":
        return (text_or_none(item.get("query")) or "")[:_KEY_INPUT_LIMIT]
    if item_type == "mcp_tool_call":
        arguments = item.get("arguments")
        try:
            return json.dumps(arguments, ensure_ascii=False)[:_KEY_INPUT_LIMIT]
        except (TypeError, ValueError):
            return ""
    return (text_or_none(item.get("prompt")) or "")[:_KEY_INPUT_LIMIT]


def _unwrap_shell(command: str) -> str:
    """``/bin/bash -lc 'cat x'`` → ``cat x``: the command the model asked for."""
    try:
        words = shlex.split(command)
    except ValueError:
        return command
    if (
        len(words) == 3
        and words[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
        and words[1]
        in (
            "-lc",
            "-c",
        )
    ):
        return words[2]
    return command


def _tool_excerpt(item: Mapping[str, Any]) -> str | None:
    item_type = item.get("type")
    if item_type == "command_execution":
        output = text_or_none(item.get("aggregated_output"))
        return None if output is None else output[-_EXCERPT_LIMIT:]
    if item_type == "file_change":
        changes = item.get("changes")
        parts = [
            f"{change.get('kind')} {change.get('path')}"
            for change in (changes if isinstance(changes, list) else [])
            if isinstance(change, dict)
        ]
        return f"{item.get('status')}: " + ", ".join(parts)
    if item_type == "mcp_tool_call":
        error = item.get("error")
        if isinstance(error, dict):
            return str(error.get("message"))[:_EXCERPT_LIMIT]
        try:
            return json.dumps(item.get("result"), ensure_ascii=False)[:_EXCERPT_LIMIT]
        except (TypeError, ValueError):
            return None
    status = item.get("status")
    return str(status) if status is not None else None


def _todo_text(item: Mapping[str, Any]) -> str:
    entries = item.get("items")
    lines = [
        ("[x] " if entry.get("completed") is True else "[ ] ") + str(entry.get("text"))
        for entry in (entries if isinstance(entries, list) else [])
        if isinstance(entry, dict)
    ]
    return "\n".join(lines)
