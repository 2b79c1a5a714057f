"""The real exporters: OTLP/HTTP (protobuf) posted to a local collector on 127.0.0.1 and decoded
there, an endpoint that is down, refuses or never answers, the console exporter, the standard
OTEL_* variables, and a host process that set its own global provider."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from otel_testkit import DONE, FIX, PLUGINS, Collector, closed_port, usage

from loopctl.testing import RunResult
from loopctl_otel.events import EXPORT_FAILED, EXPORTING, WARNING

TURNS = [[{"say": "looking"}, usage(1000, 200)], [FIX, usage(500, 100), DONE]]


def spans_of(bodies: list[bytes]) -> tuple[list[Any], dict[str, str]]:
    """Every span in the posted ExportTraceServiceRequests, and the resource's attributes."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans: list[Any] = []
    resource: dict[str, str] = {}
    for body in bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            for kv in resource_spans.resource.attributes:
                resource[kv.key] = kv.value.string_value
            for scope_spans in resource_spans.scope_spans:
                assert scope_spans.scope.name == "loopctl-otel"
                spans.extend(scope_spans.spans)
    return spans, resource


def metric_names(bodies: list[bytes]) -> dict[str, Any]:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    found: dict[str, Any] = {}
    for body in bodies:
        request = ExportMetricsServiceRequest()
        request.ParseFromString(body)
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    found[metric.name] = metric
    return found


def attribute(span: Any, key: str) -> Any:
    for kv in span.attributes:
        if kv.key == key:
            value = kv.value
            return getattr(value, value.WhichOneof("value"))
    raise KeyError(key)


def flush_seconds(result: RunResult) -> float:
    """How long the end of the loop took after the last iteration (the flush is in there)."""
    last = result.events_of("iteration.end")[-1]["ts"]
    return float(result.events_of("loop.end")[0]["ts"]) - float(last)


@pytest.mark.slow
def test_spans_and_metrics_arrive_over_otlp_http(run_loop: Any, collector: Collector) -> None:
    result = run_loop(
        "make add add",
        turns=TURNS,
        plugins=PLUGINS,
        config={
            "plugins": {
                "otel": {
                    "endpoint": collector.endpoint,
                    "headers": "x-api-key=s3cret,x-team=loop%20ctl",
                    "service_name": "loops-under-test",
                }
            }
        },
    )
    assert result.status == "complete"
    assert not result.events_of(EXPORT_FAILED)
    traces = [r for r in collector.requests if r.path == "/v1/traces"]
    assert traces
    assert traces[0].headers["content-type"] == "application/x-protobuf"
    assert traces[0].headers["x-api-key"] == "s3cret"
    assert traces[0].headers["x-team"] == "loop ctl"
    spans, resource = spans_of(collector.bodies("/v1/traces"))
    assert resource["service.name"] == "loops-under-test"
    names = sorted(s.name for s in spans)
    assert names == sorted(
        ["loopctl.run"] + ["loopctl.iteration", "loopctl.agent", "loopctl.tests"] * 2
    )
    by_id = {s.span_id: s for s in spans}
    (run,) = [s for s in spans if s.name == "loopctl.run"]
    assert run.parent_span_id == b""
    for span in spans:
        if span.name == "loopctl.iteration":
            assert span.parent_span_id == run.span_id
        elif span.name != "loopctl.run":
            assert by_id[span.parent_span_id].name == "loopctl.iteration"
    assert {s.trace_id for s in spans} == {run.trace_id}
    assert attribute(run, "loopctl.status") == "complete"
    iterations = sorted(
        (s for s in spans if s.name == "loopctl.iteration"), key=lambda s: s.start_time_unix_nano
    )
    assert [attribute(s, "loopctl.tokens.input") for s in iterations] == [1000, 500]
    metrics = metric_names(collector.bodies("/v1/metrics"))
    assert {"loopctl.iterations", "loopctl.tokens", "loopctl.iteration.duration"} <= set(metrics)
    assert sum(p.as_int for p in metrics["loopctl.iterations"].sum.data_points) == 2
    exporting = result.events_of(EXPORTING)[0]
    assert exporting["traces"] == f"{collector.endpoint}/v1/traces"
    assert exporting["metrics"] == f"{collector.endpoint}/v1/metrics"


@pytest.mark.timing  # times the flush
def test_a_closed_port_is_one_clear_event_and_does_not_slow_the_loop(
    run_loop: Any, caplog: pytest.LogCaptureFixture
) -> None:
    endpoint = f"http://127.0.0.1:{closed_port()}"
    result = run_loop(
        "make add add",
        turns=TURNS,
        plugins=PLUGINS,
        config={"plugins": {"otel": {"endpoint": endpoint}}},  # default timeout_s: 10
    )
    assert result.status == "complete"
    (failed,) = result.events_of(EXPORT_FAILED)
    assert failed["error"] == "connection refused (is an OTLP collector listening there?)"
    assert endpoint in failed["destination"]
    # The exporter would retry for up to 10 s; the end of the loop stops at the first failure.
    assert flush_seconds(result) < 2.0
    # The SDK's own warnings ("Transient error … retrying") are kept off the terminal.
    noisy = [r for r in caplog.records if r.name.startswith("opentelemetry")]
    assert not noisy, [r.getMessage() for r in noisy]


def test_an_http_error_is_reported_once_with_its_status(
    run_loop: Any, collector: Collector
) -> None:
    collector.status[0] = 401
    result = run_loop(
        "make add add",
        turns=TURNS,
        plugins=PLUGINS,
        config={"plugins": {"otel": {"endpoint": collector.endpoint}}},
    )
    assert result.status == "complete"
    (failed,) = result.events_of(EXPORT_FAILED)
    assert failed["error"].startswith("HTTP 401 Unauthorized")
    assert collector.requests  # it was tried


@pytest.mark.slow
def test_a_signal_the_collector_refuses_does_not_cost_the_other_one(
    run_loop: Any, collector: Collector
) -> None:
    collector.by_path["/v1/metrics"] = 404  # Jaeger, say: traces only
    result = run_loop(
        "make add add",
        turns=TURNS,
        plugins=PLUGINS,
        config={"plugins": {"otel": {"endpoint": collector.endpoint}}},
    )
    (failed,) = result.events_of(EXPORT_FAILED)
    assert failed["signals"] == "metrics"
    assert failed["error"].startswith("HTTP 404")
    spans, _ = spans_of(collector.bodies("/v1/traces"))
    assert len(spans) == 7  # the whole trace arrived


@pytest.mark.timing  # times the flush
def test_an_endpoint_that_never_answers_costs_at_most_timeout_s(run_loop: Any) -> None:
    with socket.socket() as silent:  # accepts connections (the backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        result = run_loop(
            "make add add",
            turns=[[FIX, DONE]],
            plugins=PLUGINS,
            config={
                "plugins": {"otel": {"endpoint": f"http://127.0.0.1:{port}", "timeout_s": 0.5}}
            },
        )
    assert result.status == "complete"
    (failed,) = result.events_of(EXPORT_FAILED)
    # Whichever comes first: the exporter's read timeout, or the end of the loop's wait.
    error = failed["error"]
    assert "timed out" in error or "did not finish within 0.5 s (timeout_s)" in error, error
    assert flush_seconds(result) < 0.5 + 1.0


def test_the_standard_variables_set_endpoint_headers_and_service(
    run_loop: Any, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-from-env=1,broken-entry")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "service-from-env")
    result = run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"headers": {"x-from-config": "2"}}}},
    )
    assert not result.events_of(EXPORT_FAILED)
    traces = [r for r in collector.requests if r.path == "/v1/traces"]
    assert traces[0].headers["x-from-env"] == "1"
    assert traces[0].headers["x-from-config"] == "2"
    _, resource = spans_of(collector.bodies("/v1/traces"))
    assert resource["service.name"] == "service-from-env"
    (warning,) = result.events_of(WARNING)
    assert "OTEL_EXPORTER_OTLP_HEADERS" in warning["message"]
    assert "broken-entry" in warning["message"]


def test_otel_sdk_disabled_turns_everything_off(
    run_loop: Any, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    result = run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"endpoint": collector.endpoint}}},
    )
    assert result.status == "complete"
    assert not [e for e in result.events if e["type"].startswith("otel.")]
    assert collector.requests == []


def test_exporter_none_records_nothing(run_loop: Any, collector: Collector) -> None:
    result = run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"endpoint": collector.endpoint, "exporter": "none"}}},
    )
    assert result.status == "complete"
    assert not result.events_of(EXPORTING)
    assert collector.requests == []


def test_the_console_exporter_writes_json_to_stderr(
    run_loop: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    result = run_loop(
        "make add add",
        turns=[[FIX, DONE]],
        plugins=PLUGINS,
        config={"plugins": {"otel": {"exporter": "console"}}},
    )
    assert result.status == "complete"
    out, err = capfd.readouterr()
    assert '"name": "loopctl.run"' in err
    assert '"name": "loopctl.iterations"' in err
    assert "loopctl.run" not in out
    assert result.events_of(EXPORTING)[0]["traces"] == "stderr"


HOST_SCRIPT = """
import json, sys
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

sys.path.insert(0, sys.argv[2])
from otel_testkit import DONE, FIX, make_project_files
from loopctl.testing import make_project, run_loop
import loopctl_otel.plugin as otel

tracer = trace.get_tracer("host")
runs = []
for n, use_global in enumerate([True, False]):
    project = make_project_files(make_project(Path(sys.argv[1]) / f"p{n}"))
    config = {"plugins": {"otel": {"exporter": "none", "metrics": False,
                                   "use_global_provider": use_global}}}
    with tracer.start_as_current_span(f"host.job{n}"):
        result = run_loop(project, "make add add", turns=[[FIX, DONE]],
                          plugins={"otel": otel}, config=config)
    runs.append({"status": result.status,
                 "otel": [e for e in result.events if e["type"].startswith("otel.")]})
with tracer.start_as_current_span("host.after"):
    pass
spans = [{"name": s.name, "id": s.context.span_id,
          "parent": s.parent.span_id if s.parent else None}
         for s in exporter.get_finished_spans()]
print(json.dumps({"runs": runs, "spans": spans}))
"""


@pytest.mark.slow
def test_a_host_provider_is_used_and_left_running(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(HOST_SCRIPT),
            str(tmp_path),
            str(Path(__file__).parent),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    global_run, private_run = report["runs"]
    assert global_run["status"] == private_run["status"] == "complete"
    assert global_run["otel"][0]["traces"] == "the host's provider"
    assert private_run["otel"] == []  # use_global_provider = false, exporter = "none": off
    spans = {s["name"]: s for s in report["spans"]}
    names = [s["name"] for s in report["spans"]]
    assert names.count("loopctl.run") == 1  # only the run that used the host's provider
    assert spans["loopctl.run"]["parent"] == spans["host.job0"]["id"]  # nested in the host's span
    assert "host.after" in spans  # the host's provider was flushed, not shut down


def test_every_event_of_a_failing_export_fits_the_published_schema(
    run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from loopctl.testing import event_schema
    from loopctl_otel.events import event_schemas

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "not-a-header")  # an otel.warning too
    result = run_loop(
        "make add add",
        turns=TURNS,
        plugins=PLUGINS,
        config={"plugins": {"otel": {"endpoint": f"http://127.0.0.1:{closed_port()}"}}},
    )
    ours = {e["type"] for e in result.events if e["type"].startswith("otel.")}
    assert ours == set(event_schemas())
    validator = jsonschema.Draft202012Validator(event_schema(event_schemas()))
    for line in result.events:
        validator.validate(line)


@pytest.mark.slow
def test_the_run_options_set_exporter_and_endpoint(project: Any, collector: Collector) -> None:
    from loopctl.testing import python_test_cmd, write_scenario

    scenario = write_scenario(project.path / "scenario.json", [[FIX, DONE]])
    project.write(
        "loopctl.toml",
        f'agent = "scripted"\ntest_cmd = {json.dumps(python_test_cmd())}\n\n'
        f"[agents.scripted]\nscenario = {json.dumps(str(scenario))}\n\n"
        '[plugins]\nenable = ["otel"]\n',
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LOOPCTL_", "OTEL_"))}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loopctl",
            "run",
            "make add add",
            "--otel-endpoint",
            collector.endpoint,
        ],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"otel: traces → {collector.endpoint}/v1/traces" in done.stdout
    spans, _ = spans_of(collector.bodies("/v1/traces"))
    assert "loopctl.run" in {s.name for s in spans}
    bad = subprocess.run(
        [sys.executable, "-m", "loopctl", "run", "make add add", "--otel-exporter", "zipkin"],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert bad.returncode == 2
    assert "zipkin" in bad.stderr
