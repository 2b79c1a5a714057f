"""A tiny scripted stand-in for the Gemini API (``generativelanguage``), on 127.0.0.1.

Gemini CLI sends its model requests to ``GOOGLE_GEMINI_BASE_URL`` when that variable is set
(its "gateway" auth type), which is how the Gemini transcripts under
``tests/data/transcripts/gemini`` were recorded without an account or a network. Each
``…:streamGenerateContent`` request takes the next scripted reply; any other request
(``generateContent`` for the CLI's own helper calls, ``countTokens``) gets a small fixed answer.
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
class GeminiReply:
    """SSE chunks (status 200), or an HTTP error with a Google-style error body."""

    chunks: list[dict[str, Any]] = attrs.Factory(list)
    status: int = 200
    body: str = ""
    headers: dict[str, str] = attrs.Factory(dict)


def usage_metadata(prompt: int, output: int, cached: int = 0, thoughts: int = 0) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": output,
        "totalTokenCount": prompt + output + thoughts,
    }
    if cached:
        meta["cachedContentTokenCount"] = cached
    if thoughts:
        meta["thoughtsTokenCount"] = thoughts
    return meta


def text_reply(text: str, tokens: dict[str, Any]) -> GeminiReply:
    half = max(len(text) // 2, 1)
    return GeminiReply(
        chunks=[
            {"candidates": [{"content": {"role": "model", "parts": [{"text": text[:half]}]}}]},
            {
                "candidates": [
                    {
                        "content": {"role": "model", "parts": [{"text": text[half:]}]},
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": tokens,
            },
        ]
    )


def call_reply(name: str, args: dict[str, Any], tokens: dict[str, Any]) -> GeminiReply:
    return GeminiReply(
        chunks=[
            {
                "candidates": [
                    {
                        "content": {
                            "role": "model",
                            "parts": [{"functionCall": {"name": name, "args": args}}],
                        },
                        "finishReason": "STOP",
                    }
                ],
                "usageMetadata": tokens,
            }
        ]
    )


def error_reply(
    status: int, state: str, message: str, details: list[Any] | None = None
) -> GeminiReply:
    error: dict[str, Any] = {"code": status, "message": message, "status": state}
    if details:
        error["details"] = details
    return GeminiReply(status=status, body=json.dumps({"error": error}))


#: What the CLI's helper calls (next-speaker check and the like) get: "the user speaks next".
HELPER_ANSWER = {
    "candidates": [
        {
            "content": {
                "role": "model",
                "parts": [{"text": json.dumps({"reasoning": "done", "next_speaker": "user"})}],
            },
            "finishReason": "STOP",
        }
    ],
    "usageMetadata": usage_metadata(50, 10),
}


class FakeGeminiServer:
    """Serves ``replies`` to streaming requests in order; then ``fallback`` (or an empty text)."""

    def __init__(self, replies: Sequence[GeminiReply], fallback: GeminiReply | None = None) -> None:
        self.replies = list(replies)
        self.fallback = fallback
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def start(self) -> FakeGeminiServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_reply(self, path: str, body: dict[str, Any]) -> GeminiReply | None:
        with self.lock:
            self.requests.append((path, body))
            if ":streamGenerateContent" not in path:
                return None
            if self.replies:
                return self.replies.pop(0)
            return self.fallback or text_reply("(no more scripted replies)", usage_metadata(10, 5))

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._send(200, json.dumps({"models": []}), {"content-type": "application/json"})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                reply = server.next_reply(self.path, body if isinstance(body, dict) else {})
                if reply is None:
                    answer = {"totalTokens": 100} if ":countTokens" in self.path else HELPER_ANSWER
                    self._send(200, json.dumps(answer), {"content-type": "application/json"})
                    return
                if reply.status != 200:
                    headers = {"content-type": "application/json", **reply.headers}
                    self._send(reply.status, reply.body, headers)
                    return
                stream = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in reply.chunks)
                self._send(200, stream, {"content-type": "text/event-stream", **reply.headers})

            def _send(self, status: int, text: str, headers: dict[str, str]) -> None:
                data = text.encode("utf-8")
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def serve(
    replies: Sequence[GeminiReply], fallback: GeminiReply | None = None
) -> Iterator[FakeGeminiServer]:
    server = FakeGeminiServer(replies, fallback).start()
    try:
        yield server
    finally:
        server.stop()
