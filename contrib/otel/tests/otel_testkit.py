"""Shared helpers for loopctl-otel's tests (a uniquely named module, so it never clashes with
another distribution's test helpers when every test suite runs in one pytest session): a
project whose tests fail until the agent fixes ``add``, the SDK's in-memory exporter and reader,
a local OTLP/HTTP collector, and a scripted agent that reports what its turns cost."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs

from loopctl import hookimpl
from loopctl.testing import Project
from loopctl_otel import plugin as otel_plugin
from loopctl_otel.pipeline import inject

BUGGY = "def add(a, b):\n    return a - b\n"
TESTS = (
    "import unittest\n"
    "from calc import add\n\n\n"
    "class TestAdd(unittest.TestCase):\n"
    "    def test_add(self):\n"
    "        self.assertEqual(add(1, 2), 3)\n\n"
    "    def test_zero(self):\n"
    "        self.assertEqual(add(0, 0), 0)\n"
)
FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
DONE = {"say": "LOOPCTL_DONE"}
PLUGINS = {"otel": otel_plugin}


def usage(inp: int, out: int, read: int = 0, create: int = 0) -> dict[str, Any]:
    return {
        "usage": {
            "input_tokens": inp,
            "output_tokens": out,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": create,
        }
    }


def make_project_files(loopctl_project: Project) -> Project:
    loopctl_project.write("calc.py", BUGGY)
    loopctl_project.write("test_calc.py", TESTS)
    loopctl_project.commit("code")
    return loopctl_project


@attrs.define
class Memory:
    spans: Any
    reader: Any

    def finished(self) -> list[Any]:
        return list(self.spans.get_finished_spans())

    def named(self, name: str) -> list[Any]:
        return sorted((s for s in self.finished() if s.name == name), key=lambda s: s.start_time)

    def children(self, parent: Any) -> list[Any]:
        return sorted(
            (
                s
                for s in self.finished()
                if s.parent is not None and s.parent.span_id == parent.context.span_id
            ),
            key=lambda s: s.start_time,
        )

    def points(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Every data point by metric name: (attributes, value or histogram)."""
        data = self.reader.get_metrics_data()
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        if data is None:
            return found
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    for point in metric.data.data_points:
                        value = getattr(point, "value", None)
                        found.setdefault(metric.name, []).append(
                            (dict(point.attributes), point if value is None else value)
                        )
        return found


@contextlib.contextmanager
def in_memory() -> Iterator[Memory]:
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    with inject(span_exporter=spans, metric_reader=reader):
        yield Memory(spans, reader)


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@attrs.define
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@attrs.define
class Collector:
    """A tiny OTLP/HTTP receiver: records every request, answers with ``status``."""

    server: ThreadingHTTPServer
    requests: list[Received]
    status: list[int]
    #: Answers by path that override ``status`` (``{"/v1/metrics": 404}``).
    by_path: dict[str, int]

    @property
    def endpoint(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def bodies(self, path: str) -> list[bytes]:
        return [r.body for r in self.requests if r.path == path]


@contextlib.contextmanager
def running_collector() -> Iterator[Collector]:
    received: list[Received] = []
    status = [200]
    by_path: dict[str, int] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            received.append(
                Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )
            self.send_response(by_path.get(self.path, status[0]))
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Collector(server, received, status, by_path)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


RunLoop = Callable[..., Any]

# --- an agent that reports cost ---------------------------------------------------------------

#: Dollars per million input and output tokens of the ``priced`` agent.
PRICE_IN, PRICE_OUT = 3.0, 15.0


def turn_cost(inp: int, out: int) -> float:
    return (inp * PRICE_IN + out * PRICE_OUT) / 1_000_000


class PricedAgentPlugin:
    """Registers ``priced``: the scripted agent, reporting a cost for each turn as real CLIs
    do (the scripted agent reports none). Settings: ``[agents.priced] scenario = ...``."""

    @hookimpl
    def register_agents(self) -> list[type[Any]]:
        from loopctl.testing import ScriptedAgent, ScriptedParser

        class PricedParser(ScriptedParser):
            def finish(self, exit_code: int | None, stderr: str) -> Any:
                result = super().finish(exit_code, stderr)
                usage = result.usage
                result.cost_usd = turn_cost(usage.input_tokens, usage.output_tokens)
                return result

        class PricedAgent(ScriptedAgent):
            name = "priced"
            description = "scripted, with a cost per turn"

            def new_parser(self) -> Any:
                return PricedParser()

        return [PricedAgent]


def priced_config(project: Project, turns: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """Config that runs the ``priced`` agent through ``turns``, the test runs counted from the
    first turn (``test_first = false``: the metrics tests count the iterations' runs)."""
    from loopctl.testing import write_scenario

    scenario = write_scenario(project.path / ".priced-scenario.json", turns)
    return {"agents": {"priced": {"scenario": str(scenario)}}, "test_first": False}
