"""The OpenTelemetry pipeline of one run: providers, exporters, and a bounded flush.

Which providers a run records into, in order of precedence:

1. exporters injected with :func:`inject` (tests: the SDK's in-memory exporter and reader);
2. the host process's global SDK providers, when it set them and ``use_global_provider`` is
   on (``opentelemetry-instrument loopctl run …``, or a program that embeds loopctl): loopctl
   records into them, never shuts them down, and only flushes them at the end of the loop;
3. private providers with the configured exporter (``otlp`` or ``console``), never made
   global, shut down at the end of the loop;
4. nothing (``exporter = "none"``, both signals off, or ``OTEL_SDK_DISABLED=true``).

Exporting happens on the SDK's background threads (BatchSpanProcessor,
PeriodicExportingMetricReader). Our exporters are wrapped so a failure (endpoint down, HTTP
4xx/5xx, a timeout) is noted once, with the exporter's own words, and never raised; the SDK's
log lines for it are kept off the terminal (the loop reports it once, as an event). The end of
the loop waits at most ``timeout_s`` for the last export and stops waiting for a signal at its
first failure, so a collector that is down costs milliseconds, not the exporter's retry
schedule. The OTLP exporters post with a session of ours that notes why a post failed.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from loopctl_otel.config import OtelConfig
from loopctl_otel.failures import FailureLog, describe_exception, describe_status, is_decisive
from loopctl_otel.headers import parse_env_headers
from loopctl_otel.urls import Signal, env_timeout_s, signal_endpoint

if TYPE_CHECKING:
    from opentelemetry.metrics import Meter, MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader
    from opentelemetry.sdk.trace.export import SpanExporter
    from opentelemetry.trace import Tracer, TracerProvider

#: The instrumentation scope of everything this plugin records.
SCOPE = "loopctl-otel"
_PREFIXES = ("opentelemetry.exporter",)


# --- failures --------------------------------------------------------------------------------

_local = threading.local()


class _CaptureExportLogs(logging.Filter):
    """On a thread inside one of our exports, an exporter's warnings and errors are the
    failure's details: note them and keep them off the terminal (the loop reports once).
    Records on any other thread (the host application's own exporters) pass untouched."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = getattr(_local, "export", None)
        if context is None or record.levelno < logging.WARNING:
            return True
        failures, signal, noting = context
        if noting:
            try:
                message = record.getMessage()
            except Exception:  # noqa: BLE001 - a malformed record still means a failure
                message = str(record.msg)
            failures.note(signal, message)
        return False


_CAPTURE = _CaptureExportLogs()


def _capture_exporter_logs() -> None:
    """Attach the capture filter to every exporter logger that exists now (idempotent)."""
    names = [n for n in list(logging.root.manager.loggerDict) if n.startswith(_PREFIXES)]
    for name in names:
        logger = logging.getLogger(name)
        if _CAPTURE not in logger.filters:
            logger.addFilter(_CAPTURE)


@contextlib.contextmanager
def _exporting(failures: FailureLog, signal: str, *, noting: bool = True) -> Iterator[None]:
    """Mark this thread as inside one of our exporter calls (``noting``: an export, whose
    warnings are failures; else a flush or shutdown, whose warnings are only kept quiet)."""
    previous = getattr(_local, "export", None)
    _local.export = (failures, signal, noting)
    try:
        yield
    finally:
        _local.export = previous


def _guarded_span_exporter(
    delegate: SpanExporter, failures: FailureLog, *, owned: bool = True
) -> SpanExporter:
    """``delegate``, wrapped; ``owned=False``: the caller's exporter, never shut down."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class GuardedSpanExporter(SpanExporter):
        """Delegates to the real exporter; a failure is noted, never raised."""

        def __init__(self) -> None:
            self.delegate = delegate
            self._closed = False
            self._lock = threading.Lock()

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            try:
                with _exporting(failures, "traces"):
                    result = delegate.export(spans)
            except Exception as exc:  # noqa: BLE001 - an exporter must not take the loop down
                failures.note("traces", f"{type(exc).__name__}: {exc}")
                return SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                failures.note("traces", None)
            return result

        def shutdown(self) -> None:
            with self._lock:
                if self._closed or not owned:
                    return
                self._closed = True
            with contextlib.suppress(Exception), _exporting(failures, "traces", noting=False):
                delegate.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            with contextlib.suppress(Exception), _exporting(failures, "traces", noting=False):
                return bool(delegate.force_flush(timeout_millis))
            return False

    return GuardedSpanExporter()


def _guarded_metric_exporter(delegate: Any, failures: FailureLog) -> Any:
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult

    class GuardedMetricExporter(MetricExporter):
        """Delegates to the real exporter; a failure is noted, never raised."""

        def __init__(self) -> None:
            super().__init__(
                preferred_temporality=getattr(delegate, "_preferred_temporality", None),
                preferred_aggregation=getattr(delegate, "_preferred_aggregation", None),
            )
            self.delegate = delegate
            self._closed = False
            self._lock = threading.Lock()

        def export(
            self, metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any
        ) -> MetricExportResult:
            try:
                with _exporting(failures, "metrics"):
                    result = delegate.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            except Exception as exc:  # noqa: BLE001 - an exporter must not take the loop down
                failures.note("metrics", f"{type(exc).__name__}: {exc}")
                return MetricExportResult.FAILURE
            if result is not MetricExportResult.SUCCESS:
                failures.note("metrics", None)
            return result  # type: ignore[no-any-return]

        def force_flush(self, timeout_millis: float = 10_000) -> bool:
            with contextlib.suppress(Exception), _exporting(failures, "metrics", noting=False):
                return bool(delegate.force_flush(timeout_millis=timeout_millis))
            return False

        def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
            with self._lock:
                if self._closed:
                    return
                self._closed = True
            with contextlib.suppress(Exception), _exporting(failures, "metrics", noting=False):
                delegate.shutdown(timeout_millis=timeout_millis)

    return GuardedMetricExporter()


# --- injection (tests) -----------------------------------------------------------------------


@attrs.define
class _Injected:
    span_exporter: SpanExporter | None
    metric_reader: MetricReader | None


_injected: _Injected | None = None


@contextlib.contextmanager
def inject(
    *, span_exporter: SpanExporter | None = None, metric_reader: MetricReader | None = None
) -> Iterator[None]:
    """Runs started inside this block export to ``span_exporter`` (wrapped in the usual
    BatchSpanProcessor; flushed but never shut down, so it can serve several runs) and
    ``metric_reader`` (the SDK binds a reader to one provider: one run) instead of the
    configured exporter: the way to test with the SDK's ``InMemorySpanExporter`` and
    ``InMemoryMetricReader``. The config's ``traces``/``metrics`` switches still apply."""
    global _injected
    previous, _injected = _injected, _Injected(span_exporter, metric_reader)
    try:
        yield
    finally:
        _injected = previous


# --- the pipeline ----------------------------------------------------------------------------


@attrs.define
class Pipeline:
    """What one run records into, and how its end is flushed."""

    tracer: Tracer | None
    meter: Meter | None
    #: ``injected``, ``global``, ``otlp`` or ``console``, per signal.
    kinds: dict[str, str]
    #: Where each signal goes: a URL, ``stderr``, ``memory``, or the host's provider.
    destinations: dict[str, str]
    timeout_s: float
    failures: FailureLog = attrs.Factory(FailureLog)
    #: Providers this run made, by signal: shut down at the end.
    owned: list[tuple[str, Any]] = attrs.Factory(list)
    #: The host's providers, by signal: flushed at the end, never shut down.
    borrowed: list[tuple[str, Any]] = attrs.Factory(list)
    #: Our wrapped exporters, shut down to abandon an export that is still retrying.
    exporters: list[Any] = attrs.Factory(list)
    #: Problems found while building (bad OTEL_* variables), for the loop to report.
    warnings: list[str] = attrs.Factory(list)
    closed: bool = False

    def close(self) -> float:
        """Flush and shut down, waiting at most ``timeout_s``, and for each signal not past its
        first failed export (a dead endpoint must not hold up the end of the loop with retries;
        a healthy one for the other signal still gets its data). A signal whose export was
        abandoned is noted as failed. Returns the seconds it took; never raises."""
        if self.closed:
            return 0.0
        self.closed = True
        started = time.monotonic()
        millis = int(self.timeout_s * 1000)
        tasks: dict[str, Callable[[], Any]] = {}
        for signal, provider in self.owned:
            tasks[signal] = provider.shutdown
        for signal, provider in self.borrowed:
            flush = getattr(provider, "force_flush", None)
            if callable(flush):
                tasks[signal] = functools.partial(flush, millis)
        if not tasks:
            return 0.0
        finished: set[str] = set()
        lock = threading.Lock()
        wake = self.failures.wake
        before = {signal: self.failures.count_of(signal) for signal in tasks}
        wake.clear()

        def run(signal: str, task: Callable[[], Any]) -> None:
            try:
                task()
            except Exception as exc:  # noqa: BLE001 - reported as an export failure
                self.failures.note(signal, f"the flush failed: {type(exc).__name__}: {exc}")
            finally:
                with lock:
                    finished.add(signal)
                wake.set()

        def waiting() -> list[str]:
            """Signals still exporting that have not failed since the flush began."""
            with lock:
                return [
                    signal
                    for signal in tasks
                    if signal not in finished and self.failures.count_of(signal) == before[signal]
                ]

        for signal, task in tasks.items():
            name = f"loopctl-otel-flush-{signal}"
            threading.Thread(target=run, args=(signal, task), name=name, daemon=True).start()
        deadline = started + self.timeout_s
        while waiting():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            wake.wait(left)
            wake.clear()
        with lock:
            unfinished = [signal for signal in tasks if signal not in finished]
        if unfinished:
            failed = self.failures.snapshot()
            for signal in unfinished:
                if self.failures.count_of(signal) == before[signal]:
                    self.failures.note(
                        signal,
                        f"the last export did not finish within {self.timeout_s:g} s "
                        "(timeout_s); what was left was dropped",
                    )
                elif signal not in failed:  # a decisive cause, its export abandoned
                    self.failures.note(signal)
            for exporter in self.exporters:  # abandon retries still waiting on a dead endpoint
                with contextlib.suppress(Exception):
                    exporter.shutdown()
        return time.monotonic() - started


def sdk_disabled(env: Mapping[str, str] | None = None) -> bool:
    """OTEL_SDK_DISABLED=true: the standard switch that turns every SDK off."""
    env = os.environ if env is None else env
    return env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def host_tracer_provider() -> TracerProvider | None:
    """The global tracer provider, when the host process set one (not the API's default)."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return None
    return provider


def host_meter_provider() -> MeterProvider | None:
    """The global meter provider, when the host process set one (not the API's default)."""
    from opentelemetry import metrics

    provider = metrics.get_meter_provider()
    if isinstance(provider, metrics.NoOpMeterProvider) or type(provider).__name__ in (
        "_ProxyMeterProvider",
        "ProxyMeterProvider",
    ):
        return None
    return provider


def _resource(config: OtelConfig, env: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource

    from loopctl import __version__ as loopctl_version

    detected = Resource.create({})  # OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
    name = config.service_name or env.get("OTEL_SERVICE_NAME", "").strip()
    if not name:
        found = str(detected.attributes.get("service.name", ""))
        name = found if found and not found.startswith("unknown_service") else "loopctl"
    return detected.merge(Resource({"service.name": name, "service.version": loopctl_version}))


def build(
    config: OtelConfig, *, version: str, env: Mapping[str, str] | None = None
) -> Pipeline | None:
    """The pipeline ``config`` asks for, or None when nothing is to be recorded. A signal
    that could not be set up is left out, with a warning in ``pipeline.warnings``."""
    env = os.environ if env is None else env
    want: dict[Signal, bool] = {"traces": config.traces, "metrics": config.metrics}
    if not any(want.values()) or sdk_disabled(env):
        return None
    timeout_s = config.timeout_s or env_timeout_s("traces", env)
    pipeline = Pipeline(tracer=None, meter=None, kinds={}, destinations={}, timeout_s=timeout_s)
    injected = _injected
    if injected is not None:
        _build_injected(pipeline, injected, config, want, version, env)
        return pipeline if pipeline.kinds or pipeline.warnings else None
    host_tracer = host_tracer_provider() if config.use_global_provider else None
    host_meter = host_meter_provider() if config.use_global_provider else None
    if want["traces"] and host_tracer is not None:
        pipeline.tracer = host_tracer.get_tracer(SCOPE, version)
        pipeline.borrowed.append(("traces", host_tracer))
        pipeline.kinds["traces"] = "global"
        pipeline.destinations["traces"] = "the host's provider"
    if want["metrics"] and host_meter is not None:
        pipeline.meter = host_meter.get_meter(SCOPE, version)
        pipeline.borrowed.append(("metrics", host_meter))
        pipeline.kinds["metrics"] = "global"
        pipeline.destinations["metrics"] = "the host's provider"
    own = [s for s, on in want.items() if on and s not in pipeline.kinds]
    if own and config.exporter != "none":
        _build_own(pipeline, config, own, version, env)
    return pipeline if pipeline.kinds or pipeline.warnings else None


def _build_injected(
    pipeline: Pipeline,
    injected: _Injected,
    config: OtelConfig,
    want: dict[Signal, bool],
    version: str,
    env: Mapping[str, str],
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = _resource(config, env)
    if want["traces"] and injected.span_exporter is not None:
        with _signal_setup(pipeline, "traces"):
            exporter = _guarded_span_exporter(
                injected.span_exporter, pipeline.failures, owned=False
            )
            tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
            pipeline.tracer = tracer_provider.get_tracer(SCOPE, version)
            pipeline.owned.append(("traces", tracer_provider))
            pipeline.kinds["traces"] = "injected"
            pipeline.destinations["traces"] = "memory"
    if want["metrics"] and injected.metric_reader is not None:
        with _signal_setup(pipeline, "metrics"):
            meter_provider = MeterProvider(
                metric_readers=[injected.metric_reader],
                resource=resource,
                shutdown_on_exit=False,
                views=_views(),
            )
            pipeline.meter = meter_provider.get_meter(SCOPE, version)
            pipeline.owned.append(("metrics", meter_provider))
            pipeline.kinds["metrics"] = "injected"
            pipeline.destinations["metrics"] = "memory"


def _views() -> list[Any]:
    """Second-sized buckets for the duration histograms (the SDK's defaults suit milliseconds;
    the API's bucket advice, where it exists, only reaches providers we do not own)."""
    from opentelemetry.sdk.metrics.view import ExplicitBucketHistogramAggregation, View

    from loopctl_otel.recorder import DURATION_BUCKETS_S

    aggregation = ExplicitBucketHistogramAggregation(boundaries=list(DURATION_BUCKETS_S))
    return [View(instrument_name="loopctl.*.duration", aggregation=aggregation)]


@contextlib.contextmanager
def _signal_setup(pipeline: Pipeline, signal: str) -> Iterator[None]:
    """One signal that cannot be set up is off for the run; the other one still works."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - reported as a warning, never fatal
        pipeline.warnings.append(f"{signal} are off for this run: {type(exc).__name__}: {exc}")


def _build_own(
    pipeline: Pipeline,
    config: OtelConfig,
    signals: list[Signal],
    version: str,
    env: Mapping[str, str],
) -> None:
    resource = _resource(config, env)
    for signal in signals:
        headers = _headers(pipeline, config, signal, env) if config.exporter == "otlp" else {}
        with _signal_setup(pipeline, signal):
            _add_own_signal(pipeline, config, signal, resource, headers, version, env)
    _capture_exporter_logs()


def _headers(
    pipeline: Pipeline, config: OtelConfig, signal: Signal, env: Mapping[str, str]
) -> dict[str, str]:
    """The config's headers over those of OTEL_EXPORTER_OTLP_<SIGNAL>_HEADERS, or of
    OTEL_EXPORTER_OTLP_HEADERS when that is unset (the spec's order). Bad entries in the
    variable are skipped with a warning."""
    name = f"OTEL_EXPORTER_OTLP_{signal.upper()}_HEADERS"
    if not env.get(name, "").strip():
        name = "OTEL_EXPORTER_OTLP_HEADERS"
    from_env, problems = parse_env_headers(env.get(name, ""))
    for problem in problems:
        warning = f"{name}: {problem} (ignored)"
        if warning not in pipeline.warnings:
            pipeline.warnings.append(warning)
    return {**from_env, **config.header_map}


def _add_own_signal(
    pipeline: Pipeline,
    config: OtelConfig,
    signal: Signal,
    resource: Any,
    headers: dict[str, str],
    version: str,
    env: Mapping[str, str],
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if config.exporter == "otlp":
        endpoint = signal_endpoint(signal, config.endpoint, env)
        session = (
            None
            if _credential_provider(signal, env)
            else _watched_session(pipeline.failures, signal)
        )
        exporter = _otlp_exporter(signal, endpoint, headers, pipeline.timeout_s, session)
        destination = endpoint
    else:
        exporter = _console_exporter(signal)
        destination = "stderr"
    if signal == "traces":
        guarded = _guarded_span_exporter(exporter, pipeline.failures)
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(BatchSpanProcessor(guarded))
        pipeline.tracer = tracer_provider.get_tracer(SCOPE, version)
        pipeline.owned.append(("traces", tracer_provider))
    else:
        guarded = _guarded_metric_exporter(exporter, pipeline.failures)
        reader = PeriodicExportingMetricReader(
            guarded, export_timeout_millis=pipeline.timeout_s * 1000
        )
        meter_provider = MeterProvider(
            metric_readers=[reader], resource=resource, shutdown_on_exit=False, views=_views()
        )
        pipeline.meter = meter_provider.get_meter(SCOPE, version)
        pipeline.owned.append(("metrics", meter_provider))
    pipeline.exporters.append(guarded)
    pipeline.kinds[signal] = config.exporter
    pipeline.destinations[signal] = destination


def _otlp_exporter(
    signal: Signal, endpoint: str, headers: dict[str, str], timeout_s: float, session: Any
) -> Any:
    if signal == "traces":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(
            endpoint=endpoint, headers=headers, timeout=timeout_s, session=session
        )
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(
        endpoint=endpoint, headers=headers, timeout=timeout_s, session=session
    )


def _credential_provider(signal: Signal, env: Mapping[str, str]) -> bool:
    """A credential-provider session named in the environment: the SDK builds that session,
    so ours (which only watches for failures) stays out of its way."""
    names = (
        "OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
        f"OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal.upper()}_CREDENTIAL_PROVIDER",
    )
    return any(env.get(name) for name in names)


def _watched_session(failures: FailureLog, signal: Signal) -> Any:
    """The requests session the OTLP exporter posts with: it also notes why a post failed
    (refused, timed out, HTTP 401…), which the exporter's own messages do not always say."""
    import requests

    class WatchedSession(requests.Session):
        def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
            try:
                response = super().request(method, url, *args, **kwargs)
            except Exception as exc:
                text = describe_exception(exc)
                failures.cause(signal, text, decisive=is_decisive(text))
                raise
            if response.status_code >= 400:
                text = describe_status(response.status_code, response.reason)
                failures.cause(signal, text, decisive=is_decisive(text))
            return response

    return WatchedSession()


def _console_exporter(signal: Signal) -> Any:
    """Console output goes to stderr: stdout belongs to loopctl's views (``--json``)."""
    if signal == "traces":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)
    from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

    return ConsoleMetricExporter(out=sys.stderr)
