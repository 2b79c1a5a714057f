"""The events loopctl-otel writes, declared for the published schema of ``events.jsonl``.

Every type starts with the plugin's name, ``otel.``; the names are published as the constants
below (re-exported from :mod:`loopctl_otel`), for other plugins and tests to match on.
"""

from __future__ import annotations

from typing import Any

#: What every event type of this plugin starts with.
PREFIX = "otel."
#: Where this run's telemetry goes.
EXPORTING = PREFIX + "exporting"
#: An export failed (written once per run).
EXPORT_FAILED = PREFIX + "export_failed"
#: A setup problem that did not stop the run.
WARNING = PREFIX + "warning"
EVENT_TYPES = (EXPORTING, EXPORT_FAILED, WARNING)


def event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl import EventField, define_event

    return {
        EXPORTING: define_event(
            "Where this run's telemetry goes: per signal, an OTLP URL, 'stderr' (console), "
            "'memory' (tests) or the host application's provider.",
            {
                "summary": EventField.STR,
                "traces": EventField.OPT_STR,
                "metrics": EventField.OPT_STR,
            },
            {"trace_id": EventField.OPT_STR},
            line="otel: {summary}",
        ),
        EXPORT_FAILED: define_event(
            "Telemetry could not be exported (collector down, HTTP error, timeout). Written "
            "once per run; the loop goes on and later exports are still tried.",
            {"signals": EventField.STR, "destination": EventField.STR, "error": EventField.STR},
            line="otel: could not export {signals} to {destination}: {error} "
            "(the loop goes on; telemetry of this run may be incomplete)",
        ),
        WARNING: define_event(
            "A problem setting up OpenTelemetry that did not stop the run.",
            {"message": EventField.STR},
            line="otel: {message}",
        ),
    }


__all__ = ["EVENT_TYPES", "EXPORTING", "EXPORT_FAILED", "PREFIX", "WARNING", "event_schemas"]
