"""What the fake model APIs share: a threaded HTTP server on 127.0.0.1 (a free port) that
serves scripted replies in order, then a fallback, and records every request."""

from __future__ import annotations

import abc
import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Generic, TypeVar

ReplyT = TypeVar("ReplyT")


class QuietHandler(BaseHTTPRequestHandler):
    """A keep-alive handler that logs nothing and reads and writes whole bodies."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def read_json(self) -> dict[str, Any]:
        """The request body as a JSON object (``{"unparsed": text}`` when it is not JSON,
        ``{"body": value}`` when it is JSON but not an object)."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            return {"unparsed": raw.decode("utf-8", "replace")}
        return body if isinstance(body, dict) else {"body": body}

    def send_text(self, status: int, text: str, headers: dict[str, str]) -> None:
        data = text.encode("utf-8")
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class ScriptedServer(abc.ABC, Generic[ReplyT]):
    """Serves ``replies`` in order, then ``fallback``; a context manager that starts and stops
    it. Subclasses give :meth:`handler_class` and may set :attr:`url_path` (``/v1``)."""

    url_path = ""

    def __init__(self, replies: Sequence[ReplyT], fallback: ReplyT) -> None:
        self.replies = list(replies)
        self.fallback = fallback
        self.requests: list[Any] = []
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self.handler_class())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{self.url_path}"

    def start(self) -> ScriptedServer[ReplyT]:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, request: Any) -> None:
        with self.lock:
            self.requests.append(request)

    def take(self, request: Any) -> ReplyT:
        """Record ``request`` and return the next scripted reply."""
        with self.lock:
            self.requests.append(request)
            return self.replies.pop(0) if self.replies else self.fallback

    @abc.abstractmethod
    def handler_class(self) -> type[QuietHandler]:
        """The request handler of this fake API (each fake server defines its own)."""
