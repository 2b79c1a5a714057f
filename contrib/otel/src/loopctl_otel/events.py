"""The events loopctl-otel writes, declared for the published schema of ``events.jsonl``."""

from __future__ import annotations

from typing import Any


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl import EventField, define_event

    return {
        "otel.exporting": define_event(
            "Where this run's telemetry goes: per signal, an OTLP URL, 'stderr' (console), "
            "'memory' (tests) or the host application's provider.",
            {"summary": EventField.STR, "traces": EventField.OPT_STR, "metrics": EventField.OPT_STR},
            {"trace_id": EventField.OPT_STR},
            line="otel: {summary}",
        ),
        "otel.export_failed": define_event(
            "Telemetry could not be exported (collector down, HTTP error, timeout). Written "
            "once per run; the loop goes on and later exports are still tried.",
            {"signals": EventField.STR, "destination": EventField.STR, "error": EventField.STR},
            line="otel: could not export {signals} to {destination}: {error} "
            "(the loop goes on; telemetry of this run may be incomplete)",
        ),
        "otel.warning": define_event(
            "A problem setting up OpenTelemetry that did not stop the run.",
            {"message": EventField.STR},
            line="otel: {message}",
        ),
    }
