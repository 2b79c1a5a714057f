"""A tiny scripted stand-in for the OpenAI Chat Completions API, on 127.0.0.1.

aider (through litellm) talks to it with ``--openai-api-base http://127.0.0.1:PORT/v1``, which is
how the aider transcripts under ``tests/data/transcripts/aider`` were recorded without an account
or a network. Each ``POST …/chat/completions`` takes the next scripted reply.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs


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


class FakeChatServer:
    def __init__(self, replies: Sequence[ChatReply], fallback: ChatReply | None = None) -> None:
        self.replies = list(replies)
        self.fallback = fallback or ChatReply("(no more scripted replies)", 10, 5)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> FakeChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_reply(self, body: dict[str, Any]) -> ChatReply:
        with self.lock:
            self.requests.append(body)
            return self.replies.pop(0) if self.replies else self.fallback

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": []}, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {}
                reply = server.next_reply(body if isinstance(body, dict) else {})
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
                model = body.get("model", "gpt-4o") if isinstance(body, dict) else "gpt-4o"
                payload = {
                    "id": f"chatcmpl-{len(server.requests)}",
                    "object": "chat.completion",
                    "created": 1_700_000_000,
                    "model": model,
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
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("content-type", "application/json")
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def serve(
    replies: Sequence[ChatReply], fallback: ChatReply | None = None
) -> Iterator[FakeChatServer]:
    server = FakeChatServer(replies, fallback).start()
    try:
        yield server
    finally:
        server.stop()
