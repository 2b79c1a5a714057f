"""The ``aider`` adapter: aider run once per turn with ``--message-file``.

aider prints plain text, not events, so every stdout line is a TEXT message except the lines
loopctl recognises: ``Applied edit to FILE`` (a tool call that worked), "SEARCH/REPLACE block
failed to match" (one that did not), ``Tokens: 1.5k sent, 40 received. Cost: …`` (a model
request: rounded counts), ``Main model: NAME …`` and the error blocks litellm prints
(``litellm.AuthenticationError: …``, ``… has hit a token limit!``). aider exits 0 even when every
request failed, so the outcome comes from those error blocks: one that no successful request
followed ends the turn with its kind (auth, rate limit, billing, context overflow, network).

Exact usage and cost per request come from aider's ``--analytics-log`` (its ``message_send``
events), which the adapter requests in a temporary directory unless ``analytics_log = false``;
without it the rounded "Tokens:" lines are used. ``--no-analytics`` keeps the events local.

Unattended runs: ``--yes-always`` (every question answered yes), ``--no-auto-commits`` (loopctl
commits), ``--no-pretty``, ``--no-stream``, ``--no-check-update``, and ``COLUMNS`` set wide so
that aider does not wrap its messages. The prompt goes in a temporary ``--message-file``.
Sessions are not resumed: every turn is a fresh aider (``session_id`` is ignored).

The user's files stay the user's: ``--no-gitignore`` (aider would otherwise add ``.aider*`` to
the project's ``.gitignore``), and aider's chat and input history files go to the turn's
temporary directory instead of ``.aider.chat.history.md`` and ``.aider.input.history`` in the
project (loopctl keeps each turn's output in its own ``logs/``).
"""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

import attrs

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.agents.transcript import (
    classify_error_text,
    count,
    decode_object,
    retry_at_from_text,
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

FINAL_TEXT_LIMIT = 64 * 1024
_MESSAGE_LIMIT = 4000
_ERROR_BLOCK_LINES = 12

_APPLIED = re.compile(r"^Applied edit to (?P<path>.+?)\s*$")
_FAILED_MATCH = re.compile(r"SEARCH/REPLACE blocks? failed to match", re.IGNORECASE)
_TOKENS = re.compile(
    r"^Tokens: (?P<sent>[\d.,]+[kM]?) sent(?:, (?P<write>[\d.,]+[kM]?) cache write)?"
    r"(?:, (?P<hit>[\d.,]+[kM]?) cache hit)?, (?P<received>[\d.,]+[kM]?) received\."
    r"(?: Cost: \$(?P<cost>[\d.,]+) message, \$(?P<session>[\d.,]+) session\.)?"
)
_MAIN_MODEL = re.compile(r"^Main model: (?P<model>\S+)")
_COMMIT = re.compile(r"^Commit [0-9a-f]{7,40}\b")
_ERROR_START = re.compile(
    r"^(?:litellm\.\w+(?:Error|Exception)\b|\w+(?:Error|Exception): |"
    r"Model .+ has hit a token limit!|Your estimated chat context of|"
    r"Missing these environment variables|"
    r"Unable to (?:list|find|connect)|.*exceeds the \S+ token limit)"
)
_RETRY = re.compile(r"^Retrying in [\d.]+ seconds")


@attrs.define
class AiderSettings(AgentSettings):
    """``[agents.aider]``."""

    analytics_log: bool = attrs.field(
        default=True,
        metadata={
            "doc": "Ask aider for its analytics log (kept local, in a temporary directory) to "
            "learn exact tokens and cost per request."
        },
    )
    files: list[str] = attrs.field(
        factory=list,
        metadata={"doc": "Files added to the chat on every turn (relative to the project)."},
    )
    edit_format: str | None = attrs.field(
        default=None,
        metadata={"doc": "`--edit-format`; unset lets aider choose for the model."},
    )
    auto_commits: bool = attrs.field(
        default=False,
        metadata={
            "doc": "Let aider commit its own edits (off: they stay in the working tree for "
            "you to review)."
        },
    )


class AiderAgent(AgentAdapter):
    name: ClassVar[str] = "aider"
    description: ClassVar[str] = "aider (plain-text output; fresh session every turn)"
    executable: ClassVar[str | None] = "aider"
    settings_class: ClassVar[type[AgentSettings]] = AiderSettings
    #: aider's repository-map cache (not configurable in aider 0.86): aider's, not the agent's work.
    private_paths: ClassVar[tuple[str, ...]] = (".aider.tags.cache.v4",)
    option_settings: ClassVar[Mapping[str, str]] = {
        "--model": "model",
        "--edit-format": "edit_format",
    }

    def __init__(
        self,
        settings: AgentSettings | None = None,
        *,
        model_windows: Mapping[str, int] | None = None,
    ) -> None:
        super().__init__(settings, model_windows=model_windows)
        self._scratch: Path | None = None

    def invocation(self, request: TurnRequest) -> Invocation:
        settings = self.settings_as(AiderSettings)
        argv = self.program()
        scratch = Path(tempfile.mkdtemp(prefix="loopctl-aider-"))
        message_file = scratch / "message.md"
        message_file.write_text(request.prompt, encoding="utf-8", errors="replace")
        argv += ["--message-file", str(message_file), "--yes-always", "--no-pretty"]
        argv += ["--no-stream", "--no-check-update", "--no-show-release-notes"]
        argv += ["--no-gitignore"]  # never edit the user's .gitignore
        argv += ["--chat-history-file", str(scratch / "chat.history.md")]
        argv += ["--input-history-file", str(scratch / "input.history")]
        argv.append("--auto-commits" if settings.auto_commits else "--no-auto-commits")
        if settings.analytics_log:
            argv += ["--no-analytics", "--analytics-log", str(scratch / "analytics.jsonl")]
        if settings.model:
            argv += ["--model", settings.model]
        if settings.edit_format:
            argv += ["--edit-format", settings.edit_format]
        argv += [str(arg) for arg in settings.extra_args]
        argv += [str(path) for path in settings.files]
        self._scratch = scratch
        return Invocation(argv=argv, stdin=None, env={"COLUMNS": "4096", "TERM": "dumb"})

    def new_parser(self) -> StreamParser:
        scratch, self._scratch = self._scratch, None
        return AiderParser(
            model=self.settings.model, model_windows=self.model_windows, scratch=scratch
        )


class AiderParser(StreamParser):
    """Reads aider's plain-text output; the analytics log (if any) is read in :meth:`finish`."""

    def __init__(
        self,
        *,
        model: str | None = None,
        model_windows: Mapping[str, int] | None = None,
        scratch: Path | None = None,
        wall_clock: Callable[[], float] | None = None,
    ) -> None:
        self.model = model
        self.model_windows = dict(model_windows or {})
        self.scratch = scratch
        self.wall_clock = wall_clock
        self.tail: deque[str] = deque()
        self.tail_chars = 0
        self.tool_calls: list[ToolCall] = []
        self.requests: list[Usage] = []
        self.session_cost: float | None = None
        #: The error block being read, and the last one no successful request followed.
        self.error_lines: list[str] | None = None
        self.pending_error: str | None = None

    def feed(self, line: bytes) -> list[AgentMessage]:
        text = bytes(line).decode("utf-8", errors="replace").rstrip("\r")
        try:
            return self._line(text)
        except Exception:  # noqa: BLE001 - never raise on output
            return []

    def _line(self, text: str) -> list[AgentMessage]:
        self._keep(text)
        stripped = text.strip()
        if self.error_lines is not None:
            if (
                (
                    stripped
                    and not _RETRY.match(stripped)
                    and len(self.error_lines) < _ERROR_BLOCK_LINES
                )
                and not _TOKENS.match(stripped)
                and not _APPLIED.match(stripped)
            ):
                self.error_lines.append(stripped)
                return [AgentMessage(MessageKind.ERROR, text=text, raw_type="error")]
            self.pending_error = " ".join(self.error_lines)
            self.error_lines = None
        if not stripped:
            return []
        if _ERROR_START.match(stripped):
            self.error_lines = [stripped]
            return [AgentMessage(MessageKind.ERROR, text=text, raw_type="error")]
        if _RETRY.match(stripped):
            return [AgentMessage(MessageKind.SYSTEM, text=text, raw_type="retry")]
        applied = _APPLIED.match(stripped)
        if applied:
            call = ToolCall(
                name="edit",
                key_input=applied.group("path"),
                result_excerpt=stripped,
                is_error=False,
            )
            self.tool_calls.append(call)
            return [
                AgentMessage(MessageKind.TOOL_CALL, tool_call=call, raw_type="applied_edit"),
                AgentMessage(MessageKind.TOOL_RESULT, tool_call=call, raw_type="applied_edit"),
            ]
        if _FAILED_MATCH.search(stripped):
            call = ToolCall(name="edit", result_excerpt=stripped, is_error=True)
            self.tool_calls.append(call)
            return [
                AgentMessage(MessageKind.TOOL_CALL, tool_call=call, raw_type="failed_edit"),
                AgentMessage(MessageKind.TOOL_RESULT, tool_call=call, raw_type="failed_edit"),
            ]
        tokens = _TOKENS.match(stripped)
        if tokens:
            return self._tokens_line(tokens, text)
        model = _MAIN_MODEL.match(stripped)
        if model:
            self.model = model.group("model")
            return [
                AgentMessage(
                    MessageKind.INIT,
                    model=self.model,
                    context_window=self._window(),
                    raw_type="main_model",
                )
            ]
        if _COMMIT.match(stripped):
            return [AgentMessage(MessageKind.SYSTEM, text=text, raw_type="commit")]
        return [AgentMessage(MessageKind.TEXT, text=text, raw_type="line")]

    def _tokens_line(self, match: re.Match[str], text: str) -> list[AgentMessage]:
        received = _tokens(match.group("received"))
        self.pending_error = None  # a request answered: earlier errors were retried away
        usage = Usage(
            input_tokens=max(
                _tokens(match.group("sent"))
                - _tokens(match.group("hit"))
                - _tokens(match.group("write")),
                0,
            ),
            output_tokens=received,
            cache_creation_input_tokens=_tokens(match.group("write")),
            cache_read_input_tokens=_tokens(match.group("hit")),
        )
        self.requests.append(usage)
        if match.group("session"):
            self.session_cost = _money(match.group("session"))
        return [
            AgentMessage(
                MessageKind.USAGE,
                usage=usage,
                model=self.model,
                context_window=self._window(),
                raw_type="tokens",
            )
        ]

    def _keep(self, text: str) -> None:
        if len(text) > FINAL_TEXT_LIMIT:
            text = text[-FINAL_TEXT_LIMIT:]
        self.tail.append(text)
        self.tail_chars += len(text) + 1
        while self.tail_chars - len(self.tail[0]) - 1 > FINAL_TEXT_LIMIT:
            self.tail_chars -= len(self.tail.popleft()) + 1

    def _window(self) -> int | None:
        return context_window_for(self.model, self.model_windows)

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        if self.error_lines is not None:
            self.pending_error = " ".join(self.error_lines)
            self.error_lines = None
        requests, cost = self._analytics()
        if requests:
            self.requests = requests
        else:
            cost = self.session_cost
        self._cleanup()
        last = self.requests[-1] if self.requests else None
        return TurnResult(
            outcome=self._outcome(exit_code, stderr),
            final_text="\n".join(self.tail)[-FINAL_TEXT_LIMIT:],
            tool_calls=list(self.tool_calls),
            requests=list(self.requests),
            context_tokens=last.context_tokens
            if last is not None and last.context_tokens
            else None,
            context_window=self._window(),
            cost_usd=cost,
            model=self.model,
            exit_code=exit_code,
        )

    def _analytics(self) -> tuple[list[Usage], float | None]:
        """Per-request usage and the summed cost from the analytics log, when aider wrote one."""
        if self.scratch is None:
            return [], None
        rows: list[Usage] = []
        cost: float | None = None
        try:
            with open(self.scratch / "analytics.jsonl", "rb") as handle:
                for line in handle:
                    event = decode_object(line)
                    if event is None or event.get("event") != "message_send":
                        continue
                    props = event.get("properties")
                    if not isinstance(props, dict):
                        continue
                    rows.append(
                        Usage(
                            input_tokens=count(props.get("prompt_tokens")),
                            output_tokens=count(props.get("completion_tokens")),
                        )
                    )
                    value = props.get("cost")
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        cost = (cost or 0.0) + float(value)
        except OSError:
            return [], None
        return rows, cost

    def _cleanup(self) -> None:
        if self.scratch is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def _outcome(self, exit_code: int | None, stderr: str) -> TurnOutcome:
        tail = stderr.strip()[-_MESSAGE_LIMIT:]
        if self.pending_error:
            message = self.pending_error[:_MESSAGE_LIMIT]
            kind = classify_error_text(message)
            retry_at = None
            if kind is ErrorKind.RATE_LIMIT:
                clock = self.wall_clock
                retry_at = (
                    retry_at_from_text(message)
                    if clock is None
                    else retry_at_from_text(message, clock)
                )
            return TurnOutcome(kind, message, retry_at)
        if exit_code == 0:
            return TurnOutcome()
        if exit_code is None:
            words = "aider was ended before it finished"
            return TurnOutcome(ErrorKind.CRASHED, f"{words}: {tail}" if tail else words)
        kind = classify_error_text(tail) if tail else ErrorKind.CRASHED
        if kind is ErrorKind.UNKNOWN:
            kind = ErrorKind.CRASHED
        return TurnOutcome(kind, tail or f"aider exited with code {exit_code}")


def _tokens(text: str | None) -> int:
    """aider's rounded counts: ``40``, ``1.5k``, ``12k``, ``1.2M``."""
    if not text:
        return 0
    value = text.replace(",", "")
    scale = 1
    if value[-1:] in ("k", "M"):
        scale = 1000 if value[-1] == "k" else 1_000_000
        value = value[:-1]
    try:
        return max(round(float(value) * scale), 0)
    except (ValueError, OverflowError):
        return 0


def _money(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None
