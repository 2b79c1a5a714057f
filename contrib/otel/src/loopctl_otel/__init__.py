"""Export loopctl runs as OpenTelemetry traces and metrics (the ``otel`` plugin).

Cheap to import: the OpenTelemetry SDK is loaded when a run starts. For tests, route a run's
telemetry to the SDK's in-memory exporter and reader with :func:`inject`::

    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from loopctl_otel import inject

    spans = InMemorySpanExporter()
    with inject(span_exporter=spans):
        run_loop("make the tests pass", plugins={"otel": loopctl_otel.plugin}, ...)
    names = [span.name for span in spans.get_finished_spans()]

The names of the events it writes are published here (``EXPORTING``, ``EXPORT_FAILED``,
``WARNING``, ``EVENT_TYPES``, ``PREFIX``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from loopctl_otel.events import EVENT_TYPES, EXPORT_FAILED, EXPORTING, PREFIX, WARNING

__version__ = "0.2.0"


@contextmanager
def inject(*, span_exporter: Any = None, metric_reader: Any = None) -> Iterator[None]:
    """Runs started inside this block export to ``span_exporter`` (a SpanExporter, wrapped in
    the usual BatchSpanProcessor; never shut down, so it can serve several runs) and
    ``metric_reader`` (a MetricReader; the SDK lets a reader serve one run only) instead of the
    configured exporter. See :func:`loopctl_otel.pipeline.inject`."""
    from loopctl_otel import pipeline

    with pipeline.inject(span_exporter=span_exporter, metric_reader=metric_reader):
        yield


__all__ = [
    "EVENT_TYPES",
    "EXPORTING",
    "EXPORT_FAILED",
    "PREFIX",
    "WARNING",
    "__version__",
    "inject",
]
