"""A scripted Anthropic Messages API server, so the real Claude Code CLI can run offline in tests.

The server answers ``POST /v1/messages`` (streaming SSE and plain JSON) from a *scenario*: a list
of replies consumed in order by the main conversation. A reply is text, tool calls (``Read``,
``Edit``, ``Write``, ``Bash`` with their inputs), the usage numbers to report, or an API error
(HTTP status plus Anthropic's error JSON). Once the scenario is used up every further request gets
a plain ``done`` text, or, when the server has a ``behaviour``, the behaviour's reply. Everything
else the CLI calls gets a harmless answer.

**Reactive use.** A *behaviour model* is any callable taking the request as an
:class:`~loopctl.testing.conversation.AgentRequest` (the prompt, the tool calls and their results,
the conversation's size) and returning the next :class:`Reply`: it chooses from what the request
really holds, so the same facts get the same answer whichever harness sent them
(:mod:`loopctl.testing.behaviours` has a library of them). Two settings make the figures and limits
follow the requests themselves:

* ``measured_usage=True``: each answer's usage is computed from the request, not taken from the
  reply: ``input_tokens`` is :func:`~loopctl.testing.conversation.request_tokens` (the system
  prompt and messages at four characters a token), ``output_tokens`` the same estimate of what the
  reply holds; nothing is reported as cached. A harness that sends more pays more.
  :meth:`ScriptedModelServer.usage_totals` adds up what was billed (error answers cost nothing).
* ``context_window=N``: a request estimated over ``N`` tokens gets the API's prompt-too-long
  error, as a real conversation that has outgrown the window does (compaction requests too), and
  consumes no scenario reply.

What Claude Code 2.1 sends in print mode, found by logging it: a ``HEAD /`` connectivity check,
then one streaming ``POST /v1/messages?beta=true`` per model request, all offering its tools.
Requests that offer tools (the main thread and its sub-agents, which run one after another)
consume the scenario in order. Two kinds do not:

* compaction: the CLI asks for a summary of the conversation (its last user message holds the
  summary instructions) with the usual tools; answered with ``compact_reply`` (a summary by
  default; an API error makes the compaction fail);
* side requests without tools (titles, quota checks with a small model in other modes of the
  CLI): answered with a short text.

Every request is recorded for assertions::

    with ScriptedModelServer([read("calc.py"), edit("calc.py", "a - b", "a + b"),
                              text("Fixed.", usage={"input_tokens": 40_000})]) as server:
        env = server.cli_env(home=tmp_path / "home")
        ...  # run `claude -p` with env
        assert server.main_requests[1].body["messages"][-1]["role"] == "user"

The server is stdlib ``http.server`` (threaded), bound to 127.0.0.1 on a free port. What does
not depend on the API (the scenario then the behaviour, the measured usage and the window, the
records) is :class:`ReplyServer`, with :class:`ReplyHandler` for the handlers' plumbing:
:class:`loopctl.testing.responses_server.ResponsesModelServer` is the same server speaking the
OpenAI Responses API, for the Codex CLI.
"""

from __future__ import annotations

import abc
import base64
import hashlib
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

import attrs

from loopctl.testing.conversation import AgentRequest, request_tokens, system_text, text_tokens

__all__ = [
    "COMPACT_SUMMARY",
    "DEFAULT_MODEL",
    "DONE_TEXT",
    "AgentRequest",
    "ApiError",
    "Behaviour",
    "RecordedRequest",
    "Reply",
    "ReplyHandler",
    "ReplyServer",
    "ScriptedModelServer",
    "ToolUse",
    "api_error",
    "as_reply",
    "auth_error",
    "bash",
    "context_usage",
    "edit",
    "is_compaction_request",
    "is_main_request",
    "overloaded",
    "prompt_too_long",
    "rate_limited",
    "read",
    "text",
    "tools",
    "write",
]

#: The model the CLI is told to use in tests (a real name, so its window is in the model table).
DEFAULT_MODEL = "claude-sonnet-4-5"
#: What the server says once the scenario is used up, and to side requests.
DONE_TEXT = "done"
#: The answer to Claude Code's compaction (conversation summary) requests.
COMPACT_SUMMARY = (
    "<analysis>The conversation so far was summarised by the scripted model server.</analysis>\n"
    "<summary>1. Primary Request and Intent: make the failing tests pass.</summary>"
)
#: Words of Claude Code's compaction prompt (the last user message of a summary request).
COMPACT_MARKERS = (
    "create a detailed summary of the conversation",
    "Respond with TEXT ONLY. Do NOT call any tools",
)

_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    """A unique id in the API's style (``msg_…``, ``toolu_…``)."""
    return f"{prefix}_{int(time.time() * 1000):013d}{next(_ids):06d}"


# --- replies -------------------------------------------------------------------------------------


@attrs.define
class ToolUse:
    """One ``tool_use`` block: the CLI runs the tool and sends its result in the next request."""

    name: str
    input: dict[str, Any] = attrs.Factory(dict)
    id: str = attrs.Factory(lambda: new_id("toolu"))


@attrs.define
class ApiError:
    """An HTTP error answer in Anthropic's shape: ``{"type": "error", "error": {...}}``."""

    status: int
    type: str
    message: str
    #: Extra response headers (``retry-after``, ``anthropic-ratelimit-unified-reset``, …).
    headers: dict[str, str] = attrs.Factory(dict)


@attrs.define
class Reply:
    """One answer of the scenario.

    ``usage`` holds the request's token counts (``input_tokens``, ``output_tokens``,
    ``cache_creation_input_tokens``, ``cache_read_input_tokens``); missing keys default to a small
    plausible figure. ``times`` repeats the reply for that many consecutive main requests (useful
    for errors the CLI retries). ``thinking`` adds an extended-thinking block before the rest, as
    the real models send when Claude Code asks for thinking (it does by default).
    """

    text: str | None = None
    thinking: str | None = None
    tool_calls: list[ToolUse] = attrs.Factory(list)
    usage: dict[str, int] = attrs.Factory(dict)
    error: ApiError | None = None
    stop_reason: str | None = None
    times: int = 1
    #: Seconds to wait before answering (to test timeouts; keep it short).
    delay_s: float = 0.0

    def resolved_stop_reason(self) -> str:
        if self.stop_reason:
            return self.stop_reason
        return "tool_use" if self.tool_calls else "end_turn"


def context_usage(context: int, output: int = 500) -> dict[str, int]:
    """Usage of a request that fills ``context`` tokens of the window in all, most of it read
    from the cache as in a real long session: for making the context gauge reach a figure."""
    if context < 1_200 + output:
        raise ValueError(f"context must be at least {1_200 + output} tokens, got {context}")
    return {
        "input_tokens": 200,
        "cache_creation_input_tokens": 1_000,
        "cache_read_input_tokens": context - 1_200 - output,
        "output_tokens": output,
    }


def text(
    words: str, *, usage: Mapping[str, int] | None = None, thinking: str | None = None
) -> Reply:
    """A plain text answer (the turn ends here unless more replies follow a tool call)."""
    return Reply(text=words, usage=dict(usage or {}), thinking=thinking)


def tools(
    *calls: ToolUse,
    say: str | None = None,
    usage: Mapping[str, int] | None = None,
    thinking: str | None = None,
) -> Reply:
    """One answer holding several tool calls (and optionally some text before them)."""
    return Reply(text=say, tool_calls=list(calls), usage=dict(usage or {}), thinking=thinking)


def _tool(
    name: str,
    tool_input: dict[str, Any],
    say: str | None,
    usage: Mapping[str, int] | None,
    thinking: str | None = None,
) -> Reply:
    return tools(ToolUse(name, tool_input), say=say, usage=usage, thinking=thinking)


def read(
    path: str,
    *,
    say: str | None = None,
    usage: Mapping[str, int] | None = None,
    thinking: str | None = None,
) -> Reply:
    """A ``Read`` call. Claude Code refuses to Edit a file the session has not Read."""
    return _tool("Read", {"file_path": path}, say, usage, thinking)


def edit(
    path: str,
    old: str,
    new: str,
    *,
    say: str | None = None,
    usage: Mapping[str, int] | None = None,
    thinking: str | None = None,
) -> Reply:
    """An ``Edit`` call replacing ``old`` (which must occur exactly once) with ``new``."""
    tool_input = {"file_path": path, "old_string": old, "new_string": new}
    return _tool("Edit", tool_input, say, usage, thinking)


def write(
    path: str,
    content: str,
    *,
    say: str | None = None,
    usage: Mapping[str, int] | None = None,
    thinking: str | None = None,
) -> Reply:
    """A ``Write`` call (a new file, or one the session has Read)."""
    return _tool("Write", {"file_path": path, "content": content}, say, usage, thinking)


def bash(
    command: str,
    *,
    say: str | None = None,
    usage: Mapping[str, int] | None = None,
    thinking: str | None = None,
) -> Reply:
    """A ``Bash`` call."""
    tool_input = {"command": command, "description": "run a command"}
    return _tool("Bash", tool_input, say, usage, thinking)


def api_error(
    status: int,
    error_type: str,
    message: str,
    *,
    times: int = 1,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """An HTTP error for the next ``times`` main requests."""
    return Reply(error=ApiError(status, error_type, message, dict(headers or {})), times=times)


def prompt_too_long(tokens: int = 210_000, maximum: int = 200_000, *, times: int = 1) -> Reply:
    """The API's answer to a conversation that no longer fits the context window."""
    return api_error(
        400,
        "invalid_request_error",
        f"prompt is too long: {tokens} tokens > {maximum} maximum",
        times=times,
    )


def rate_limited(*, times: int = 1, retry_after_s: int = 0) -> Reply:
    return api_error(
        429,
        "rate_limit_error",
        "This request would exceed the rate limit for your organization. Please try again later.",
        times=times,
        headers={"retry-after": str(retry_after_s)},
    )


def auth_error(*, times: int = 1) -> Reply:
    return api_error(401, "authentication_error", "invalid x-api-key", times=times)


def overloaded(*, times: int = 1) -> Reply:
    return api_error(529, "overloaded_error", "Overloaded", times=times)


#: A behaviour model: the next answer to a conversation request, chosen from what it holds.
Behaviour = Callable[[AgentRequest], "Reply | Mapping[str, Any]"]


def reply_tokens(reply: Reply) -> int:
    """The estimated output tokens of ``reply``: its text, thinking and tool inputs."""
    parts = [reply.text or "", reply.thinking or ""]
    parts += [json.dumps(call.input) for call in reply.tool_calls]
    return text_tokens(*parts)


def as_reply(item: Reply | Mapping[str, Any]) -> Reply:
    """A :class:`Reply` from itself or from a plain dict (``{"text": …, "tools": [...]}``,
    ``{"error": {"status": 400, "type": …, "message": …}}``)."""
    if isinstance(item, Reply):
        return item
    data = dict(item)
    error = data.pop("error", None)
    calls = [
        call
        if isinstance(call, ToolUse)
        else ToolUse(str(call["name"]), dict(call.get("input", {})))
        for call in data.pop("tools", data.pop("tool_calls", []))
    ]
    reply = Reply(
        text=data.pop("text", None),
        thinking=data.pop("thinking", None),
        tool_calls=calls,
        usage=dict(data.pop("usage", {})),
        stop_reason=data.pop("stop_reason", None),
        times=int(data.pop("times", 1)),
        delay_s=float(data.pop("delay_s", 0.0)),
    )
    if error is not None:
        err = dict(error)
        reply.error = ApiError(
            int(err["status"]),
            str(err.get("type", "api_error")),
            str(err.get("message", "")),
            dict(err.get("headers", {})),
        )
    if data:
        raise ValueError(f"unknown reply keys {sorted(data)} (expected text, tools, usage, error…)")
    return reply


# --- recorded requests ---------------------------------------------------------------------------


@attrs.define
class RecordedRequest:
    """One request the server received, and how it was answered."""

    method: str
    path: str
    headers: dict[str, str]
    #: The parsed JSON body (None when there was none or it was not JSON).
    body: Any
    #: ``main`` (consumed a scenario reply or got the after-scenario "done"), ``compact``
    #: (a conversation summary), ``side``, ``count_tokens`` or ``other``.
    kind: str
    #: Index of the scenario reply that answered it (None: not from the scenario).
    reply_index: int | None = None
    status: int = 200
    at: float = attrs.Factory(time.time)
    #: The usage the answer reported (empty for error answers and non-message requests).
    usage: dict[str, int] = attrs.Factory(dict)

    @property
    def model(self) -> str | None:
        return self.body.get("model") if isinstance(self.body, dict) else None

    @property
    def messages(self) -> list[Any]:
        found = self.body.get("messages") if isinstance(self.body, dict) else None
        return found if isinstance(found, list) else []

    @property
    def system_text(self) -> str:
        return system_text(self.body.get("system") if isinstance(self.body, dict) else None)

    def tool_result_ids(self) -> list[str]:
        """The ``tool_use_id`` of every tool result this request sends back."""
        found: list[str] = []
        for message in self.messages:
            content = message.get("content") if isinstance(message, dict) else None
            if isinstance(content, list):
                found += [
                    str(block.get("tool_use_id"))
                    for block in content
                    if isinstance(block, dict) and block.get("type") == "tool_result"
                ]
        return found


# --- the server ----------------------------------------------------------------------------------


_ServerT = TypeVar("_ServerT", bound="ReplyServer")


class ReplyServer(abc.ABC):
    """What every scripted model server shares, whatever API it speaks: a threaded HTTP server on
    127.0.0.1 (a free port), the scenario's replies then the ``behaviour``'s (or ``done``), the
    ``measured_usage`` and ``context_window`` rules, the recorded requests and their usage.

    A subclass gives :meth:`handler` (the request handler class of its API; its instances reach
    the server as ``server_ref``) and reads each conversation request into the Messages-shaped
    body that :meth:`main_reply`, :meth:`over_window` and :meth:`usage` take.
    """

    def __init__(
        self,
        scenario: Iterable[Reply | Mapping[str, Any]] = (),
        *,
        behaviour: Behaviour | None = None,
        measured_usage: bool = False,
        context_window: int | None = None,
        model: str = DEFAULT_MODEL,
        log_path: Path | None = None,
    ) -> None:
        if context_window is not None and context_window < 1:
            raise ValueError(f"context_window must be at least 1 token, got {context_window}")
        self.model = model
        self.behaviour = behaviour
        self.measured_usage = measured_usage
        self.context_window = context_window
        self.log_path = log_path
        #: Exceptions the behaviour raised, oldest first.
        self.behaviour_errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._replies: list[Reply] = [as_reply(item) for item in scenario]
        self._next = 0
        self._used_of_next = 0
        self._started_at = time.monotonic()
        self._requests: list[RecordedRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @abc.abstractmethod
    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class of the server's API."""

    @abc.abstractmethod
    def cli_env(self, home: Path, *, model: str | None = None) -> dict[str, str]:
        """Environment for the agent CLI that speaks the server's API: talk to this server, stay
        offline and quiet, and read nothing of the user's (``home`` becomes ``HOME``)."""

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self: _ServerT) -> _ServerT:
        if self._httpd is not None:
            return self
        self._started_at = time.monotonic()
        handler = type("_BoundHandler", (self.handler(),), {"server_ref": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self: _ServerT) -> _ServerT:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the model server is not running: call start() first")
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- scenario and records -----------------------------------------------------------------

    def add(self, *replies: Reply | Mapping[str, Any]) -> None:
        """Append replies to the scenario (also while the CLI runs)."""
        with self._lock:
            self._replies += [as_reply(item) for item in replies]

    @property
    def remaining(self) -> int:
        """Scenario replies not used yet."""
        with self._lock:
            return len(self._replies) - self._next

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def main_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.kind == "main"]

    def usage_totals(self) -> dict[str, int]:
        """The usage of every answer so far, added up (``requests``: how many were answered with
        a message; error answers are not billed)."""
        totals = dict.fromkeys(USAGE_KEYS, 0)
        answered = 0
        for request in self.requests:
            if request.usage:
                answered += 1
                for key in USAGE_KEYS:
                    totals[key] += request.usage.get(key, 0)
        return {**totals, "requests": answered}

    # --- answering (called from handler threads) -----------------------------------------------

    def record(self, request: RecordedRequest) -> None:
        """Keep ``request`` (and append it to ``log_path`` as a JSON line)."""
        with self._lock:
            self._requests.append(request)
        if self.log_path is not None:
            line = {
                "method": request.method,
                "path": request.path,
                "kind": request.kind,
                "reply_index": request.reply_index,
                "status": request.status,
                "usage": request.usage,
                "headers": request.headers,
                "body": request.body,
            }
            with self._lock, open(self.log_path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(line) + "\n")

    def _take_reply(self) -> tuple[Reply | None, int | None]:
        """The next scenario reply (None once it is used up) and its index."""
        with self._lock:
            if self._next >= len(self._replies):
                return None, None
            index = self._next
            reply = self._replies[index]
            self._used_of_next += 1
            if self._used_of_next >= max(1, reply.times):
                self._next += 1
                self._used_of_next = 0
            return reply, index

    def over_window(self, body: Any) -> Reply | None:
        """The prompt-too-long answer for a request over ``context_window`` (None: it fits)."""
        if self.context_window is None:
            return None
        tokens = request_tokens(body)
        if tokens <= self.context_window:
            return None
        return prompt_too_long(tokens, self.context_window)

    def main_reply(self, body: Any) -> tuple[Reply, int | None]:
        """The answer to a conversation request: the scenario's next reply, else the
        behaviour's, else ``done``; and the scenario index (None when not from the scenario)."""
        taken, index = self._take_reply()
        with self._lock:
            number = sum(1 for request in self._requests if request.kind == "main")
        if taken is not None:
            if taken.delay_s > 0:
                time.sleep(taken.delay_s)
            return taken, index
        if self.behaviour is None:
            return Reply(text=DONE_TEXT), None
        request = AgentRequest.from_body(
            body, number=number, elapsed_s=time.monotonic() - self._started_at
        )
        try:
            return as_reply(self.behaviour(request)), None
        except Exception as error:  # noqa: BLE001 - a broken behaviour must show, not hang the CLI
            with self._lock:
                self.behaviour_errors.append(error)
            message = f"behaviour failed: {type(error).__name__}: {error}"
            return api_error(500, "api_error", message), None

    def usage(self, reply: Reply, body: Any) -> dict[str, int]:
        """The usage to report for ``reply`` (empty for an error answer)."""
        if reply.error is not None:
            return {}
        if not self.measured_usage:
            return _full_usage(reply.usage)
        return {
            "input_tokens": request_tokens(body),
            "output_tokens": reply_tokens(reply),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }


class ScriptedModelServer(ReplyServer):
    """A threaded HTTP server on 127.0.0.1 speaking enough of the Messages API for Claude Code.

    ``scenario`` replies answer the main-conversation requests in order; once they are used up,
    ``behaviour`` (a :data:`Behaviour`) answers the rest, or a plain ``done`` when there is none.
    ``measured_usage`` and ``context_window`` make the usage figures and the window follow the
    requests' real size (see the module's docstring). ``early_output_tokens`` puts a reply's
    whole usage (output tokens included) into ``message_start``: Claude Code's stream-json
    ``assistant`` lines show the usage of ``message_start`` only (the real API sends the final
    output count in ``message_delta``), so this makes the lines carry exactly the scenario's
    numbers. Set it to False to mimic the real API (``output_tokens: 1`` at start).

    A behaviour that raises is answered with an HTTP 500 ``api_error`` naming the exception, and
    the exception is kept in :attr:`behaviour_errors`, so a broken behaviour fails loudly.
    """

    def __init__(
        self,
        scenario: Iterable[Reply | Mapping[str, Any]] = (),
        *,
        behaviour: Behaviour | None = None,
        measured_usage: bool = False,
        context_window: int | None = None,
        model: str = DEFAULT_MODEL,
        early_output_tokens: bool = True,
        compact_reply: Reply | Mapping[str, Any] | None = None,
        log_path: Path | None = None,
    ) -> None:
        super().__init__(
            scenario,
            behaviour=behaviour,
            measured_usage=measured_usage,
            context_window=context_window,
            model=model,
            log_path=log_path,
        )
        self.compact_reply = (
            as_reply(compact_reply)
            if compact_reply is not None
            else Reply(text=COMPACT_SUMMARY, usage={"input_tokens": 3000, "output_tokens": 400})
        )
        self.early_output_tokens = early_output_tokens

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _Handler

    def cli_env(self, home: Path, *, model: str | None = None) -> dict[str, str]:
        """Environment for the Claude Code CLI: talk to this server, stay offline and quiet, and
        read nothing of the user's (``home`` becomes ``HOME`` and holds the CLI's config, and
        ``home/tmp`` the files it would otherwise leave in ``/tmp/claude-UID``)."""
        home = Path(home)
        (home / ".claude").mkdir(parents=True, exist_ok=True)
        (home / "tmp").mkdir(exist_ok=True)
        return {
            "CLAUDE_CODE_TMPDIR": str(home / "tmp"),
            "ANTHROPIC_BASE_URL": self.url,
            "ANTHROPIC_API_KEY": "sk-ant-test-loopctl",
            "ANTHROPIC_MODEL": model or self.model,
            "ANTHROPIC_SMALL_FAST_MODEL": "claude-3-5-haiku-20241022",
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "IS_SANDBOX": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_BUG_COMMAND": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
            "CLAUDE_CODE_MAX_RETRIES": "0",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }


def is_main_request(body: Any) -> bool:
    """True for a conversation turn (main thread or sub-agent): it offers tools to the model.

    Claude Code's own side requests (titles, summaries, checks with the small model) offer none.
    """
    if not isinstance(body, dict):
        return False
    offered = body.get("tools")
    return isinstance(offered, list) and len(offered) > 0


def is_compaction_request(body: Any) -> bool:
    """True for Claude Code's request to summarise the conversation (auto or reactive compaction).

    It offers the usual tools, so it would pass for a main request; its last user message holds
    the summary instructions.
    """
    if not isinstance(body, dict):
        return False
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return False
    content = messages[-1].get("content")
    if isinstance(content, str):
        texts = [content]
    elif isinstance(content, list):
        texts = [
            str(block.get("text", ""))
            for block in content
            if isinstance(block, dict) and block.get("type") == "text"
        ]
    else:
        return False
    return any(marker in text for text in texts for marker in COMPACT_MARKERS)


class ReplyHandler(BaseHTTPRequestHandler):
    """What the servers' request handlers share: quiet, keep-alive, JSON in and out, and
    recording each request on the server (``server_ref``)."""

    server_ref: ReplyServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the requests are recorded instead."""

    def read_body(self) -> Any:
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        raw = self.rfile.read(length) if length > 0 else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def send_json(
        self, status: int, payload: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", new_id("req"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def recorded(
        self,
        body: Any,
        kind: str,
        index: int | None = None,
        status: int = 200,
        usage: dict[str, int] | None = None,
    ) -> None:
        path = self.path
        self.server_ref.record(
            RecordedRequest(
                method=self.command,
                path=path,
                headers={k.lower(): v for k, v in self.headers.items()},
                body=body,
                kind=kind,
                reply_index=index,
                status=status,
                usage=dict(usage or {}),
            )
        )

    def send_events(self, events: Iterable[Mapping[str, Any]]) -> None:
        """A streamed answer: ``events`` as server-sent events (each named by its ``type``), then
        the connection closes."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("request-id", new_id("req"))
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for data in events:
            self.wfile.write(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def send_error_json(self, error: ApiError, payload: Any) -> None:
        """An HTTP error answer with ``payload`` (its API's error JSON) and ``error.headers``."""
        self.send_json(error.status, payload, {"x-should-retry": "false", **error.headers})


class _Handler(ReplyHandler):
    """The Messages API (Claude Code)."""

    server_ref: ScriptedModelServer

    # --- verbs ----------------------------------------------------------------------------------

    def do_GET(self) -> None:
        self.recorded(None, "other")
        self.send_json(200, {"data": [], "has_more": False})

    def do_HEAD(self) -> None:
        self.recorded(None, "other")
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self.read_body()
        path = self.path.split("?", 1)[0].rstrip("/")
        if path.endswith("/v1/messages/count_tokens"):
            self.recorded(body, "count_tokens")
            self.send_json(200, {"input_tokens": _estimate_tokens(body)})
            return
        if not path.endswith("/v1/messages"):
            self.recorded(body, "other")
            self.send_json(200, {})
            return
        server = self.server_ref
        stream = isinstance(body, dict) and body.get("stream") is True
        model = body.get("model") if isinstance(body, dict) else None
        model = model if isinstance(model, str) and model else server.model
        too_long = server.over_window(body)
        index: int | None = None
        if is_compaction_request(body):
            kind, reply = "compact", too_long or server.compact_reply
        elif not is_main_request(body):
            kind = "side"
            reply = Reply(text=DONE_TEXT, usage={"input_tokens": 50, "output_tokens": 2})
        elif too_long is not None:
            kind, reply = "main", too_long
        else:
            kind = "main"
            reply, index = server.main_reply(body)
        usage = server.usage(reply, body)
        status = reply.error.status if reply.error is not None else 200
        self.recorded(body, kind, index, status, usage)
        self._answer(reply, model, stream, usage)

    # --- answers --------------------------------------------------------------------------------

    def _answer(self, reply: Reply, model: str, stream: bool, usage: dict[str, int]) -> None:
        if reply.error is not None:
            error = reply.error
            self.send_error_json(
                error,
                {
                    "type": "error",
                    "error": {"type": error.type, "message": error.message},
                    "request_id": new_id("req"),
                },
            )
            return
        message_id = new_id("msg")
        blocks = _content_blocks(reply)
        if not stream:
            self.send_json(
                200,
                {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": blocks,
                    "stop_reason": reply.resolved_stop_reason(),
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            return
        self._stream(reply, model, message_id, blocks, usage)

    def _stream(
        self,
        reply: Reply,
        model: str,
        message_id: str,
        blocks: list[dict[str, Any]],
        usage: dict[str, int],
    ) -> None:
        start_usage = dict(usage)
        if not self.server_ref.early_output_tokens:
            start_usage["output_tokens"] = min(1, usage["output_tokens"])
        self.send_events(_sse_events(reply, model, message_id, blocks, usage, start_usage))


def _sse_events(
    reply: Reply,
    model: str,
    message_id: str,
    blocks: list[dict[str, Any]],
    usage: dict[str, int],
    start_usage: dict[str, int],
) -> Iterator[dict[str, Any]]:
    """The server-sent events of one streamed answer, in the API's order (``type`` names each)."""
    message: dict[str, Any] = {"id": message_id, "type": "message", "role": "assistant"}
    message["model"] = model
    message.update(content=[], stop_reason=None, stop_sequence=None, usage=start_usage)
    yield {"type": "message_start", "message": message}
    yield {"type": "ping"}
    for index, block in enumerate(blocks):
        if block["type"] == "thinking":
            start: dict[str, Any] = {"type": "thinking", "thinking": "", "signature": ""}
            deltas: list[dict[str, Any]] = [
                {"type": "thinking_delta", "thinking": piece}
                for piece in _pieces(block["thinking"])
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif block["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            encoded = json.dumps(block["input"])
            half = len(encoded) // 2  # two partial deltas, as the API splits its JSON
            deltas = [
                {"type": "input_json_delta", "partial_json": part}
                for part in (encoded[:half], encoded[half:])
            ]
        yield {"type": "content_block_start", "index": index, "content_block": start}
        for delta in deltas:
            yield {"type": "content_block_delta", "index": index, "delta": delta}
        yield {"type": "content_block_stop", "index": index}
    stop = {"stop_reason": reply.resolved_stop_reason(), "stop_sequence": None}
    yield {"type": "message_delta", "delta": stop, "usage": usage}
    yield {"type": "message_stop"}


#: The API streams text a few tokens at a time; the server sends pieces of about this many chars.
DELTA_CHARS = 40


def _pieces(words: str) -> list[str]:
    return [words[i : i + DELTA_CHARS] for i in range(0, len(words), DELTA_CHARS)] or [""]


def _content_blocks(reply: Reply) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if reply.thinking is not None:
        blocks.append(
            {
                "type": "thinking",
                "thinking": reply.thinking,
                "signature": _signature(reply.thinking),
            }
        )
    if reply.text is not None or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.text if reply.text is not None else DONE_TEXT})
    for call in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.input})
    return blocks


def _signature(thinking: str) -> str:
    """A stand-in for the API's opaque thinking signature (base64, a few hundred bytes)."""
    seed = hashlib.sha256(thinking.encode("utf-8")).digest()
    return base64.b64encode(seed * 12).decode("ascii")


#: The usage figures every answer reports.
USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


def _full_usage(given: Mapping[str, int]) -> dict[str, int]:
    return {
        "input_tokens": int(given.get("input_tokens", 1200)),
        "output_tokens": int(given.get("output_tokens", 40)),
        "cache_creation_input_tokens": int(given.get("cache_creation_input_tokens", 0)),
        "cache_read_input_tokens": int(given.get("cache_read_input_tokens", 0)),
    }


def _estimate_tokens(body: Any) -> int:
    """About four characters a token, like the API's own rough figure."""
    return max(1, len(json.dumps(body)) // 4) if body is not None else 1
