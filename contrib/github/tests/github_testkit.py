"""A fake GitHub REST API on 127.0.0.1 that implements the three calls loopctl-github makes and
checks every request it gets (a unique module name: several plugins' tests share a session).

Checked on each request: the method and path, ``Authorization: Bearer <token>``, ``Accept``,
``X-GitHub-Api-Version``, the User-Agent, and for writes the JSON body's shape (exactly
``{"body": str}``), the hidden marker that opens it and GitHub's 65,536-character limit.
Anything wrong is recorded in ``violations`` (tests assert it stays empty) and answered 400.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import attrs

from loopctl.testing import Project, make_project

OWNER, REPO, ISSUE = "acme", "shop", 7
COMMENTS_PATH = f"/repos/{OWNER}/{REPO}/issues/{ISSUE}/comments"
COMMENT_PATH = re.compile(rf"/repos/{OWNER}/{REPO}/issues/comments/([0-9]+)")
MARKER = re.compile(r"<!-- loopctl:context-errors key=[A-Za-z0-9._-]{1,64} -->")
LIMIT = 65_536

CALC_TEST = (
    "import unittest\nfrom calc import add\n\n"
    "class CalcTest(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)
FIX_ADD = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
SAY = {"say": "looking into it"}


def calc_project(path: Path) -> Project:
    """A project whose one test fails until FIX_ADD is applied."""
    project = make_project(path)
    project.write("calc.py", "def add(a, b):\n    return a - b\n")
    project.write("test_calc.py", CALC_TEST)
    project.commit("calc")
    return project


@attrs.define
class Fault:
    """An answer to give instead of the normal one, ``times`` times, to ``method`` ("*": any)."""

    method: str
    status: int | None = None  # None: only the delay, then the normal answer
    body: Any = None
    headers: dict[str, str] = attrs.Factory(dict)
    times: int = 1
    delay_s: float = 0.0


@attrs.define
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    raw: str
    at: float


class FakeGitHub:
    def __init__(self, token: str, *, page_size: int = 100) -> None:
        self.token = token
        self.page_size = page_size
        self.comments: dict[int, dict[str, Any]] = {}
        self.requests: list[Seen] = []
        self.violations: list[str] = []
        self.faults: list[Fault] = []
        self.delete_after_create = 0
        self.hold: threading.Event | None = None
        #: Requests that reached the server, counted before ``hold`` holds them.
        self.arrived = 0
        self.hold_timed_out = False
        self.lock = threading.Lock()
        self._next_id = 1000
        self._server: ThreadingHTTPServer | None = None

    # --- the test's side ---------------------------------------------------------------

    def start(self) -> FakeGitHub:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                fake._handle(self, "GET")

            def do_POST(self) -> None:
                fake._handle(self, "POST")

            def do_PATCH(self) -> None:
                fake._handle(self, "PATCH")

            def do_PUT(self) -> None:
                fake._handle(self, "PUT")

            def do_DELETE(self) -> None:
                fake._handle(self, "DELETE")

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        if self.hold is not None:
            self.hold.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def api_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def seed(self, body: str, *, user: str = "github-actions[bot]") -> int:
        with self.lock:
            return self._create(body, user)["id"]  # type: ignore[no-any-return]

    def of(self, method: str) -> list[Seen]:
        with self.lock:
            return [r for r in self.requests if r.method == method]

    def methods(self) -> list[str]:
        with self.lock:
            return [r.method for r in self.requests]

    def bodies(self) -> list[str]:
        with self.lock:
            return [c["body"] for c in self.comments.values()]

    # --- the server's side -------------------------------------------------------------

    def _create(self, body: str, user: str) -> dict[str, Any]:
        self._next_id += 1
        comment_id = self._next_id
        comment = {
            "id": comment_id,
            "body": body,
            "user": {"login": user},
            "html_url": f"https://github.com/{OWNER}/{REPO}/issues/{ISSUE}#issuecomment-{comment_id}",
            "url": f"https://api.github.com/repos/{OWNER}/{REPO}/issues/comments/{comment_id}",
        }
        self.comments[comment_id] = comment
        return comment

    def _violation(self, text: str) -> None:
        with self.lock:
            self.violations.append(text)

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        with self.lock:
            self.arrived += 1
        if self.hold is not None and not self.hold.wait(10):
            self.hold_timed_out = True
        parts = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length).decode("utf-8", errors="replace") if length else ""
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                self._violation(f"{method} {parts.path}: the body is not JSON")
        seen = Seen(
            method,
            parts.path,
            parse_qs(parts.query),
            {k.lower(): v for k, v in handler.headers.items()},
            body,
            raw,
            time.monotonic(),
        )
        with self.lock:
            self.requests.append(seen)
            fault = next(
                (f for f in self.faults if f.times > 0 and f.method in (method, "*")), None
            )
            if fault is not None:
                fault.times -= 1
        problems = self._check(seen)
        if fault is not None and fault.delay_s:
            time.sleep(fault.delay_s)
        if problems:
            for problem in problems:
                self._violation(problem)
            return self._send(handler, 400, {"message": "; ".join(problems)})
        if fault is not None and fault.status is not None:
            return self._send(handler, fault.status, fault.body, fault.headers)
        return self._route(handler, seen)

    def _check(self, seen: Seen) -> list[str]:
        where = f"{seen.method} {seen.path}"
        h = seen.headers
        problems = []
        if h.get("authorization") != f"Bearer {self.token}":
            problems.append(f"{where}: wrong or missing Authorization")
        if h.get("accept") != "application/vnd.github+json":
            problems.append(f"{where}: Accept is {h.get('accept')!r}")
        if h.get("x-github-api-version") != "2022-11-28":
            problems.append(f"{where}: X-GitHub-Api-Version is {h.get('x-github-api-version')!r}")
        if not h.get("user-agent", "").startswith("loopctl-github/"):
            problems.append(f"{where}: User-Agent is {h.get('user-agent')!r}")
        if seen.method == "GET":
            if seen.path != COMMENTS_PATH:
                problems.append(f"{where}: unexpected path")
            if seen.query.get("per_page") != ["100"]:
                problems.append(f"{where}: per_page is {seen.query.get('per_page')}")
        elif seen.method in ("POST", "PATCH"):
            if seen.method == "POST" and (seen.path != COMMENTS_PATH or seen.query):
                problems.append(f"{where}: unexpected path")
            if seen.method == "PATCH" and not COMMENT_PATH.fullmatch(seen.path):
                problems.append(f"{where}: unexpected path")
            if not h.get("content-type", "").startswith("application/json"):
                problems.append(f"{where}: Content-Type is {h.get('content-type')!r}")
            body = seen.body
            if not (isinstance(body, dict) and set(body) == {"body"}):
                problems.append(f"{where}: the JSON body is not exactly {{'body': ...}}")
            elif not isinstance(body["body"], str):
                problems.append(f"{where}: body is not a string")
            else:
                if not MARKER.match(body["body"]):
                    problems.append(f"{where}: the body does not open with the marker")
                if len(body["body"]) > LIMIT:
                    problems.append(f"{where}: the body is {len(body['body'])} characters")
        else:
            problems.append(f"{where}: method not used by the GitHub plugin")
        return problems

    def _route(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        if seen.method == "GET":
            with self.lock:
                ordered = [self.comments[k] for k in sorted(self.comments)]
            page = int((seen.query.get("page") or ["1"])[0])
            size = self.page_size
            chunk = ordered[(page - 1) * size : page * size]
            last = max(1, -(-len(ordered) // size))
            headers = {}
            base = f"{self.api_url}{COMMENTS_PATH}?per_page=100"
            links = []
            if page < last:
                links.append(f'<{base}&page={page + 1}>; rel="next"')
                links.append(f'<{base}&page={last}>; rel="last"')
            if page > 1:
                links.append(f'<{base}&page=1>; rel="first"')
            if links:
                headers["Link"] = ", ".join(links)
            return self._send(handler, 200, chunk, headers)
        if seen.method == "POST":
            with self.lock:
                comment = self._create(seen.body["body"], "github-actions[bot]")
                if self.delete_after_create > 0:
                    self.delete_after_create -= 1
                    del self.comments[comment["id"]]
            return self._send(handler, 201, comment)
        match = COMMENT_PATH.fullmatch(seen.path)
        assert match is not None
        with self.lock:
            existing = self.comments.get(int(match.group(1)))
            if existing is not None:
                existing["body"] = seen.body["body"]
        if existing is None:
            return self._send(handler, 404, {"message": "Not Found"})
        return self._send(handler, 200, existing)

    def _send(
        self,
        handler: BaseHTTPRequestHandler,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
    ) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode("utf-8")
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json; charset=utf-8")
            handler.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(data)
        except OSError:
            pass  # the client gave up (a timeout test)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def iter_text_files(state_dir: Path) -> Iterator[tuple[Path, str]]:
    for path in sorted(state_dir.rglob("*")):
        if path.is_file():
            yield path, path.read_text(encoding="utf-8", errors="replace")
