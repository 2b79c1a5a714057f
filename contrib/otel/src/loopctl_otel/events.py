"""The events loopctl-otel writes, declared for the published schema of ``events.jsonl``."""

from __future__ import annotations

from typing import Any


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl.events import OPT_STR, STR, event

    return {
        "otel.exporting": event(
            "Where this run's telemetry goes: per signal, an OTLP URL, 'stderr' (console), "
            "'memory' (tests) or the host application's provider.",
            {"summary": STR, "traces": OPT_STR, "metrics": OPT_STR},
            {"trace_id": OPT_STR},
            line="otel: {summary}",
        ),
        "otel.export_failed": event(
            "Telemetry could not be exported (collector down, HTTP error, timeout). Written "
            "once per run; the loop goes on and later exports are still tried.",
            {"signals": STR, "destination": STR, "error": STR},
            line="otel: could not export {signals} to {destination}: {error} "
            "(the loop goes on; telemetry of this run may be incomplete)",
        ),
        "otel.warning": event(
            "A problem setting up OpenTelemetry that did not stop the run.",
            {"message": STR},
            line="otel: {message}",
        ),
    }
