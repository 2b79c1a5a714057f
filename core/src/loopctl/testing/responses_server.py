"""A reactive OpenAI Responses API server, so the real Codex CLI runs offline against the same
behaviour models as Claude Code.

:class:`ResponsesModelServer` is :class:`~loopctl.testing.model_server.ReplyServer` (the scenario,
the ``behaviour``, ``measured_usage``, ``context_window``, the recorded requests) speaking the
Responses API: each ``POST …/responses`` is read into the same
:class:`~loopctl.testing.conversation.AgentRequest` facts as a Messages API request, so a
behaviour model answers Codex exactly as it answers Claude Code, and its :class:`Reply` goes back
as Responses server-sent events.

**Reading a request** (:func:`as_messages`): Codex sends its system prompt and context as
``developer`` messages and a ``<environment_context>`` user message (which names the working
directory as ``<cwd>``): these become the system text. The user's words become user messages;
``function_call`` / ``custom_tool_call`` items the tool calls, and their ``*_output`` items the
results (the command's output after Codex's ``Output:`` line; a command that exited non-zero is
an error result).

**Answering with tools** (:func:`codex_command`): Codex 0.169 offers ``exec_command`` (a shell
command line) and ``apply_patch`` (a freeform patch). The behaviours' tools become
``exec_command`` calls: ``Bash`` runs its command as is, ``Read`` is ``cat -n`` (the numbered
lines Claude Code's Read shows), ``Edit`` replaces its text exactly once and fails otherwise,
``Write`` writes the file. The server remembers each call it made, so the next request reads
them back as the behaviour's own ``Read`` / ``Edit`` / ``Write`` / ``Bash`` calls; a call it did
not make reads as ``Bash`` (``exec_command``) or by its own name.

**Errors**: an :class:`ApiError` goes out as an HTTP error in OpenAI's shape
(``{"error": {"message", "type", "code"}}``, the code Codex knows for the kind: 429
``rate_limit_exceeded``, 401 ``invalid_api_key``); a prompt too long for ``context_window`` as
an in-stream ``response.failed`` with ``context_length_exceeded``, as the API does.

Codex is pointed at the server with a custom model provider: :meth:`ResponsesModelServer.cli_env`
writes one into ``CODEX_HOME/config.toml`` (:func:`codex_config`), or give
:func:`codex_provider_args` on the command line.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from loopctl.testing.model_server import (
    DONE_TEXT,
    Reply,
    ReplyHandler,
    ReplyServer,
    ToolUse,
    new_id,
)

__all__ = [
    "API_KEY_ENV",
    "CODEX_MODEL",
    "PROVIDER_ID",
    "ResponsesModelServer",
    "as_messages",
    "codex_command",
    "codex_config",
    "codex_provider_args",
    "response_events",
    "response_usage",
]

#: The model provider id Codex is told to use.
PROVIDER_ID = "loopctl_fake"
#: The environment variable Codex reads the (fake) API key from.
API_KEY_ENV = "LOOPCTL_FAKE_OPENAI_KEY"
#: The model Codex is told to use (a real name, so Codex knows its window).
CODEX_MODEL = "gpt-5.5"
#: How long ``exec_command`` waits for a command before it answers with a session to poll.
YIELD_MS = 120_000

#: User messages Codex sends as context, not as the user's words.
_CONTEXT = ("<environment_context>", "<user_instructions>", "# AGENTS.md instructions")
_EXIT = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
_OUTPUT = re.compile(r"^Output:\n", re.MULTILINE)

#: The OpenAI error code Codex recognises for each kind of error.
_CODES = {
    "rate_limit_error": "rate_limit_exceeded",
    "authentication_error": "invalid_api_key",
    "overloaded_error": "server_is_overloaded",
    "api_error": "server_error",
}


# --- pointing Codex at a server ------------------------------------------------------------------


def _provider(base_url: str, retries: int) -> dict[str, str]:
    return {
        "name": '"loopctl scripted"',
        "base_url": json.dumps(base_url),
        "env_key": json.dumps(API_KEY_ENV),
        "wire_api": '"responses"',
        # fail fast instead of reconnects with back-off
        "stream_max_retries": str(retries),
        "request_max_retries": str(retries),
    }


def codex_provider_args(base_url: str, *, retries: int = 1) -> list[str]:
    """``codex exec`` options that send every model request to ``base_url`` (``…/v1``); Codex
    retries a failed request ``retries`` times (after the ``retry-after`` a 429 gives)."""
    args = ["-c", f"model_provider={json.dumps(PROVIDER_ID)}"]
    for key, value in _provider(base_url, retries).items():
        args += ["-c", f"model_providers.{PROVIDER_ID}.{key}={value}"]
    return args


def codex_config(base_url: str, model: str = CODEX_MODEL, *, retries: int = 0) -> str:
    """A ``config.toml`` for ``CODEX_HOME`` that sends every model request to ``base_url``
    (``retries``: as for :func:`codex_provider_args`; none by default, as the Claude server's
    environment asks of Claude Code)."""
    lines = [f"model = {json.dumps(model)}", f"model_provider = {json.dumps(PROVIDER_ID)}", ""]
    lines.append(f"[model_providers.{PROVIDER_ID}]")
    lines += [f"{key} = {value}" for key, value in _provider(base_url, retries).items()]
    return "\n".join(lines) + "\n"


# --- reading a request -----------------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _output(item: Mapping[str, Any]) -> tuple[str, bool]:
    """A tool output item's text (after Codex's ``Output:`` line) and whether it failed."""
    raw = item.get("output")
    if isinstance(raw, Mapping):  # {"content": …, "success": …}
        return _text(raw.get("content")), raw.get("success") is False
    text = _text(raw)
    exit_code = _EXIT.search(text)
    body = _OUTPUT.split(text, maxsplit=1)
    return (body[1] if len(body) == 2 else text), bool(exit_code and exit_code.group(1) != "0")


def _arguments(item: Mapping[str, Any]) -> dict[str, Any]:
    try:
        value = json.loads(str(item.get("arguments") or "{}"))
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _call_block(item: Mapping[str, Any], calls: Mapping[str, ToolUse]) -> dict[str, Any]:
    """A ``tool_use`` block for a call item: the behaviour's own call when this server made it."""
    call_id = str(item.get("call_id", ""))
    made = calls.get(call_id)
    if made is not None:
        name, tool_input = made.name, dict(made.input)
    elif item.get("type") == "custom_tool_call":
        name, tool_input = str(item.get("name", "")), {"input": str(item.get("input", ""))}
    elif item.get("name") in ("exec_command", "shell", "local_shell"):
        arguments = _arguments(item)
        command = arguments.get("cmd", arguments.get("command", ""))
        command = shlex.join(map(str, command)) if isinstance(command, list) else str(command)
        name, tool_input = "Bash", {"command": command}
    else:
        name, tool_input = str(item.get("name", "")), _arguments(item)
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def as_messages(body: Any, calls: Mapping[str, ToolUse] | None = None) -> dict[str, Any]:
    """A Responses API request body as the Messages API body holding the same facts (``system``,
    ``messages`` with ``tool_use`` / ``tool_result`` blocks, ``model``): what
    :meth:`AgentRequest.from_body` reads and :func:`request_tokens` sizes. ``calls`` are the
    calls this server made, by call id (read back as the behaviour's own tools)."""
    data: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    items = data.get("input")
    items = [item for item in items if isinstance(item, Mapping)] if isinstance(items, list) else []
    system = [str(data["instructions"])] if isinstance(data.get("instructions"), str) else []
    messages: list[dict[str, Any]] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            role, words = item.get("role"), _text(item.get("content"))
            if role in ("developer", "system") or words.lstrip().startswith(_CONTEXT):
                system.append(words)
            elif words.strip():
                block = {"type": "text", "text": words}
                messages.append({"role": "assistant" if role == "assistant" else "user",
                                 "content": [block]})  # fmt: skip
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            messages.append({"role": "assistant", "content": [_call_block(item, calls or {})]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            text, failed = _output(item)
            result = {"type": "tool_result", "tool_use_id": str(item.get("call_id", "")),
                      "content": text, "is_error": failed}  # fmt: skip
            messages.append({"role": "user", "content": [result]})
    model = data.get("model")
    return {"model": model if isinstance(model, str) else "", "system": "\n\n".join(system),
            "messages": messages}  # fmt: skip


def is_conversation(body: Any) -> bool:
    """A conversation turn of Codex: it offers tools (other requests offer none)."""
    offered = body.get("tools") if isinstance(body, Mapping) else None
    return isinstance(offered, list) and len(offered) > 0


# --- answering -------------------------------------------------------------------------------------

#: ``python3 -c`` programs for the file tools (their arguments come as one JSON argument).
_EDIT = (
    "import json,pathlib,sys\n"
    "path,old,new=json.loads(sys.argv[1])\n"
    "file=pathlib.Path(path)\n"
    "text=file.read_text()\n"
    "found=text.count(old)\n"
    "if found!=1: sys.exit(f'{path}: the text to replace occurs {found} times, not once')\n"
    "file.write_text(text.replace(old,new,1))\n"
    "print(f'{path}: edited')"
)
_WRITE = (
    "import json,pathlib,sys\n"
    "path,content=json.loads(sys.argv[1])\n"
    "file=pathlib.Path(path)\n"
    "file.parent.mkdir(parents=True,exist_ok=True)\n"
    "file.write_text(content)\n"
    "print(f'{path}: written')"
)


def codex_command(call: ToolUse) -> str:
    """The shell command line Codex runs (``exec_command``) for one of the behaviours' tools
    (``Bash``, ``Read``, ``Edit``, ``Write``); another tool is a :class:`ValueError`."""
    given = call.input
    if call.name == "Bash":
        return str(given.get("command", ""))
    path = str(given.get("file_path", ""))
    if call.name == "Read":
        return f"cat -n -- {shlex.quote(path)}"
    if call.name == "Edit":
        values = [path, str(given.get("old_string", "")), str(given.get("new_string", ""))]
        return f"python3 -c {shlex.quote(_EDIT)} {shlex.quote(json.dumps(values))}"
    if call.name == "Write":
        values = [path, str(given.get("content", ""))]
        return f"python3 -c {shlex.quote(_WRITE)} {shlex.quote(json.dumps(values))}"
    raise ValueError(f"Codex has no tool for {call.name!r} (known: Bash, Read, Edit, Write)")


def _items(reply: Reply) -> Iterator[dict[str, Any]]:
    """The output items of ``reply``: its text as a message, then its tool calls."""
    if reply.text is not None or not reply.tool_calls:
        words = reply.text if reply.text is not None else DONE_TEXT
        yield {"type": "message", "role": "assistant", "id": new_id("msg"),
               "content": [{"type": "output_text", "text": words, "annotations": []}]}  # fmt: skip
    for call in reply.tool_calls:
        # not a login shell: its profile would reset PATH
        arguments = {"cmd": codex_command(call), "login": False, "yield_time_ms": YIELD_MS}
        yield {"type": "function_call", "id": new_id("fc"), "call_id": call.id,
               "name": "exec_command", "arguments": json.dumps(arguments)}  # fmt: skip


def response_usage(usage: Mapping[str, int]) -> dict[str, Any]:
    """The Responses API's usage object for a recorded usage (Messages API keys): cached and
    cache-written input count as input, cache reads as ``cached_tokens``."""
    cached = int(usage.get("cache_read_input_tokens", 0))
    prompt = int(usage.get("input_tokens", 0)) + cached
    prompt += int(usage.get("cache_creation_input_tokens", 0))
    output = int(usage.get("output_tokens", 0))
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + output,
    }


def response_events(
    response_id: str, items: Iterable[Mapping[str, Any]], usage: Mapping[str, Any]
) -> Iterator[dict[str, Any]]:
    """The server-sent events of one streamed response holding ``items`` (messages, function
    calls, custom tool calls), ending with ``response.completed`` and its ``usage`` (the
    Responses API's usage object)."""
    yield {"type": "response.created", "response": {"id": response_id}}
    for index, item in enumerate(items):
        if item.get("type") == "message":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "content": []}}  # fmt: skip
            for part in item.get("content", []):
                delta = part.get("text", "")
                yield {"type": "response.output_text.delta", "output_index": index, "delta": delta}
        elif item.get("type") == "function_call":
            yield {"type": "response.output_item.added", "output_index": index,
                   "item": {**item, "arguments": ""}}  # fmt: skip
        yield {"type": "response.output_item.done", "output_index": index, "item": dict(item)}
    completed = {"id": response_id, "status": "completed", "usage": dict(usage)}
    yield {"type": "response.completed", "response": completed}


def _failed_events(response_id: str, code: str, message: str) -> list[dict[str, Any]]:
    failed = {"id": response_id, "status": "failed", "error": {"code": code, "message": message}}
    return [
        {"type": "response.created", "response": {"id": response_id}},
        {"type": "response.failed", "response": failed},
    ]


class ResponsesModelServer(ReplyServer):
    """A threaded HTTP server on 127.0.0.1 speaking enough of the Responses API for Codex
    (``POST /v1/responses``, streamed). It takes the keyword arguments of
    :class:`~loopctl.testing.model_server.ReplyServer` (``behaviour``, ``measured_usage``,
    ``context_window``, ``model``, ``log_path``): those of
    :class:`~loopctl.testing.model_server.ScriptedModelServer` but the Claude-only ones."""

    def __init__(
        self,
        scenario: Iterable[Reply | Mapping[str, Any]] = (),
        *,
        model: str = CODEX_MODEL,
        **settings: Any,
    ) -> None:
        super().__init__(scenario, model=model, **settings)
        self._calls: dict[str, ToolUse] = {}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return _ResponsesHandler

    @property
    def base_url(self) -> str:
        """The provider's base URL (Codex appends ``/responses``)."""
        return f"{self.url}/v1"

    def made_calls(self) -> dict[str, ToolUse]:
        """The tool calls this server answered with, by call id."""
        with self._lock:
            return dict(self._calls)

    def remember(self, reply: Reply) -> None:
        with self._lock:
            self._calls.update((call.id, call) for call in reply.tool_calls)

    def cli_env(self, home: Path, *, model: str | None = None) -> dict[str, str]:
        """Environment for the Codex CLI: ``home`` becomes ``HOME``; ``home/.codex`` is
        ``CODEX_HOME``, whose ``config.toml`` sends every model request to this server."""
        codex_home = Path(home) / ".codex"
        codex_home.mkdir(parents=True, exist_ok=True)
        config = codex_config(self.base_url, model or self.model)
        (codex_home / "config.toml").write_text(config, encoding="utf-8")
        return {
            "HOME": str(home),
            "CODEX_HOME": str(codex_home),
            API_KEY_ENV: "sk-loopctl-test",
            "XDG_CONFIG_HOME": str(Path(home) / ".config"),
            "RUST_LOG": "error",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }


class _ResponsesHandler(ReplyHandler):
    """The Responses API (Codex)."""

    server_ref: ResponsesModelServer

    def do_GET(self) -> None:
        self.recorded(None, "other")
        self.send_json(200, {"object": "list", "data": [], "models": []})

    def do_POST(self) -> None:
        body = self.read_body()
        if not self.path.split("?", 1)[0].rstrip("/").endswith("/responses"):
            self.recorded(body, "other")
            self.send_json(200, {})
            return
        server = self.server_ref
        facts = as_messages(body, server.made_calls())
        index: int | None = None
        if not is_conversation(body):
            kind, reply = "side", Reply(text=DONE_TEXT, usage={"input_tokens": 50})
        else:
            kind = "main"
            too_long = server.over_window(facts)
            reply, index = (too_long, None) if too_long is not None else server.main_reply(facts)
        usage = server.usage(reply, facts)
        status = reply.error.status if reply.error is not None else 200
        if reply.error is not None and reply.error.type == "invalid_request_error":
            status = 200  # the API says a prompt is too long inside the stream
        self.recorded(body, kind, index, status, usage)
        server.remember(reply)
        self._answer(reply, usage)

    def _answer(self, reply: Reply, usage: dict[str, int]) -> None:
        response_id = new_id("resp")
        error = reply.error
        if error is not None and error.type == "invalid_request_error":
            self.send_events(_failed_events(response_id, "context_length_exceeded", error.message))
        elif error is not None:
            code = _CODES.get(error.type, error.type)
            payload = {"error": {"message": error.message, "type": error.type, "code": code}}
            self.send_error_json(error, payload)
        else:
            self.send_events(response_events(response_id, _items(reply), response_usage(usage)))
