"""A tiny scripted stand-in for the OpenAI Responses API, on 127.0.0.1.

The real Codex CLI can be pointed at it with a custom model provider (see
:func:`codex_provider_args`), which is how the Codex transcripts under
``tests/data/transcripts/codex`` were recorded and how the end-to-end tests run Codex without a
network or an account. Each ``POST …/responses`` takes the next scripted reply: a streamed list
of SSE events, an HTTP error, or a dropped connection.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from fake_http import QuietHandler, ScriptedServer

from loopctl.testing.responses_server import (
    API_KEY_ENV,
    PROVIDER_ID,
    codex_provider_args,
    response_events,
)

__all__ = ["API_KEY_ENV", "PROVIDER_ID", "codex_provider_args"]


@attrs.define
class Reply:
    """One answer to one request: SSE events (status 200), or an HTTP error, or a drop."""

    events: list[dict[str, Any]] = attrs.Factory(list)
    status: int = 200
    body: str = ""
    headers: dict[str, str] = attrs.Factory(dict)
    #: Close the connection after the headers without sending a body (a lost network).
    drop: bool = False


def usage(
    input_tokens: int, output_tokens: int, cached: int = 0, reasoning: int = 0
) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": input_tokens + output_tokens,
    }


def text_reply(text: str, response_id: str, tokens: dict[str, Any]) -> Reply:
    """The model answers with prose and ends its turn."""
    item = {
        "type": "message",
        "role": "assistant",
        "id": f"msg_{response_id}",
        "content": [{"type": "output_text", "text": text}],
    }
    return Reply(events=list(response_events(response_id, [item], tokens)))


def function_call_reply(
    name: str, arguments: dict[str, Any], call_id: str, response_id: str, tokens: dict[str, Any]
) -> Reply:
    """The model asks for one function call (e.g. ``shell`` or ``exec_command``)."""
    item = {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": json.dumps(arguments),
    }
    return Reply(events=list(response_events(response_id, [item], tokens)))


def custom_tool_reply(
    name: str, tool_input: str, call_id: str, response_id: str, tokens: dict[str, Any]
) -> Reply:
    """The model calls a freeform tool (Codex's ``apply_patch`` is one)."""
    item = {
        "type": "custom_tool_call",
        "id": f"ctc_{call_id}",
        "call_id": call_id,
        "name": name,
        "input": tool_input,
    }
    return Reply(events=list(response_events(response_id, [item], tokens)))


def failed_reply(code: str, message: str, response_id: str) -> Reply:
    """The response fails in-stream (``response.failed``), as the API does for context overflow."""
    return Reply(
        events=[
            {"type": "response.created", "response": {"id": response_id}},
            {
                "type": "response.failed",
                "response": {"id": response_id, "error": {"code": code, "message": message}},
            },
        ]
    )


def error_reply(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> Reply:
    body = json.dumps({"error": {"message": message, "type": code, "code": code}})
    return Reply(status=status, body=body, headers=dict(headers or {}))


class FakeResponsesServer(ScriptedServer[Reply]):
    """Serves ``replies`` in order; once they run out, every request gets ``fallback``."""

    url_path = "/v1"

    def __init__(self, replies: Sequence[Reply], fallback: Reply | None = None) -> None:
        super().__init__(replies, fallback if fallback is not None else Reply(drop=True))

    def handler_class(self) -> type[QuietHandler]:
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self.send_text(200, json.dumps({"object": "list", "data": [], "models": []}), {})

            def do_POST(self) -> None:
                reply = server.take(self.read_json())
                if reply.drop:
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("content-length", "0")
                    self.end_headers()
                    self.close_connection = True
                    return
                if reply.status != 200:
                    headers = {"content-type": "application/json", **reply.headers}
                    self.send_text(reply.status, reply.body, headers)
                    return
                stream = "".join(
                    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
                    for event in reply.events
                )
                self.send_text(200, stream, {"content-type": "text/event-stream", **reply.headers})

        return Handler


def serve(replies: Sequence[Reply], fallback: Reply | None = None) -> FakeResponsesServer:
    """``with serve([...]) as server:`` a started server, stopped at the end."""
    return FakeResponsesServer(replies, fallback)
