"""A tiny scripted stand-in for the Gemini API (``generativelanguage``), on 127.0.0.1.

Gemini CLI sends its model requests to ``GOOGLE_GEMINI_BASE_URL`` when that variable is set
(its "gateway" auth type), which is how the Gemini transcripts under
``tests/data/transcripts/gemini`` were recorded without an account or a network. Each
``…:streamGenerateContent`` request takes the next scripted reply; any other request
(``generateContent`` for the CLI's own helper calls, ``countTokens``) gets a small fixed answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from fake_http import QuietHandler, ScriptedServer


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


class FakeGeminiServer(ScriptedServer[GeminiReply]):
    """Serves ``replies`` to streaming requests in order; then ``fallback`` (or an empty text)."""

    def __init__(self, replies: Sequence[GeminiReply], fallback: GeminiReply | None = None) -> None:
        no_more = text_reply("(no more scripted replies)", usage_metadata(10, 5))
        super().__init__(replies, fallback or no_more)

    def handler_class(self) -> type[QuietHandler]:
        server = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self.send_text(
                    200, json.dumps({"models": []}), {"content-type": "application/json"}
                )

            def do_POST(self) -> None:
                request = (self.path, self.read_json())
                if ":streamGenerateContent" not in self.path:
                    server.record(request)
                    answer = {"totalTokens": 100} if ":countTokens" in self.path else HELPER_ANSWER
                    self.send_text(200, json.dumps(answer), {"content-type": "application/json"})
                    return
                reply = server.take(request)
                if reply.status != 200:
                    headers = {"content-type": "application/json", **reply.headers}
                    self.send_text(reply.status, reply.body, headers)
                    return
                stream = "".join(f"data: {json.dumps(chunk)}\r\n\r\n" for chunk in reply.chunks)
                self.send_text(200, stream, {"content-type": "text/event-stream", **reply.headers})

        return Handler


def serve(replies: Sequence[GeminiReply], fallback: GeminiReply | None = None) -> FakeGeminiServer:
    """``with serve([...]) as server:`` a started server, stopped at the end."""
    return FakeGeminiServer(replies, fallback)
