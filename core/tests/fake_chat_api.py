"""A tiny scripted stand-in for the OpenAI Chat Completions API, on 127.0.0.1.

aider (through litellm) talks to it with ``--openai-api-base http://127.0.0.1:PORT/v1``, which is
how the aider transcripts under ``tests/data/transcripts/aider`` were recorded without an account
or a network. Each ``POST …/chat/completions`` takes the next scripted reply.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from fake_http import QuietHandler, ScriptedServer


@attrs.define
class ChatReply:
    """An assistant message with usage (status 200), or an HTTP error with an OpenAI error body."""

    content: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status: int = 200
    error_code: str = ""
    error_message: str = ""
    headers: dict[str, str] = attrs.Factory(dict)


def error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> ChatReply:
    return ChatReply(
        status=status, error_code=code, error_message=message, headers=dict(headers or {})
    )


class FakeChatServer(ScriptedServer[ChatReply]):
    url_path = "/v1"

    def __init__(self, replies: Sequence[ChatReply], fallback: ChatReply | None = None) -> None:
        super().__init__(replies, fallback or ChatReply("(no more scripted replies)", 10, 5))

    def handler_class(self) -> type[QuietHandler]:
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": []}, {})

            def do_POST(self) -> None:
                body = self.read_json()
                reply = server.take(body)
                if reply.status != 200:
                    payload = {
                        "error": {
                            "message": reply.error_message,
                            "type": reply.error_code,
                            "param": None,
                            "code": reply.error_code,
                        }
                    }
                    self._send(reply.status, payload, reply.headers)
                    return
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 1_700_000_000,
                    "model": body.get("model", "gpt-4o"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": reply.content},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": reply.prompt_tokens,
                        "completion_tokens": reply.completion_tokens,
                        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                    },
                }
                self._send(200, payload, reply.headers)

            def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                self.send_text(
                    status, json.dumps(payload), {"content-type": "application/json", **headers}
                )

        return Handler


def serve(replies: Sequence[ChatReply], fallback: ChatReply | None = None) -> FakeChatServer:
    """``with serve([...]) as server:`` a started server, stopped at the end."""
    return FakeChatServer(replies, fallback)
