"""``[plugins.otel]``: where the telemetry goes and what it holds.

Checked when the config loads, so a bad value stops ``loopctl run`` before the first iteration
with a message naming the key (``plugins.otel.endpoint: …``). Imports nothing heavy: the
OpenTelemetry SDK is loaded only when a run starts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from loopctl import InvalidFields
from loopctl_otel.headers import HeaderError, parse_headers
from loopctl_otel.peers import CONTEXT_USAGE
from loopctl_otel.urls import EndpointError, check_endpoint

#: The config section name, the plugin's entry-point name.
SECTION = "otel"
#: Events that arrive too often to be worth a span event each (still used for attributes):
#: the core's rate-limit countdown, and the context monitor's fill readings when it is installed.
DEFAULT_EXCLUDED_EVENTS = ("agent.rate_limit_waiting", *((CONTEXT_USAGE,) if CONTEXT_USAGE else ()))

Problem = tuple[tuple[str, ...], str]


def _raise(problems: Sequence[Problem]) -> None:
    """The core's "these fields are wrong" error, so the loader names each key."""
    raise InvalidFields(problems)


@attrs.define(kw_only=True)
class OtelConfig:
    """The plugin's settings; every field has a default, so an absent section is fine."""

    #: Record the run as a trace (run → iterations → agent and test phases).
    traces: bool = True
    #: Record counters and histograms (iterations, tokens, cost, durations, failing tests).
    metrics: bool = True
    #: Where to send them: OTLP/HTTP (protobuf), the console (stderr), or nowhere.
    exporter: Literal["otlp", "console", "none"] = "otlp"
    #: The OTLP/HTTP base URL; ``/v1/traces`` and ``/v1/metrics`` are appended. Unset: the
    #: standard OTEL_EXPORTER_OTLP_[TRACES_|METRICS_]ENDPOINT variables, else localhost:4318.
    endpoint: str | None = None
    #: Extra request headers: a table, or the OTEL_EXPORTER_OTLP_HEADERS form "k=v,k2=v2"
    #: (values URL-encoded). Added to the headers from OTEL_EXPORTER_OTLP_HEADERS.
    headers: Any = attrs.Factory(dict)
    #: The resource's service.name. Unset: OTEL_SERVICE_NAME, else "loopctl".
    service_name: str | None = None
    #: Seconds one export may take (retries included), and the longest the end of the loop
    #: waits for the last export. Unset: OTEL_EXPORTER_OTLP_TIMEOUT, else 10.
    timeout_s: float | None = None
    #: When the host process already set a global OpenTelemetry SDK provider (e.g. under
    #: ``opentelemetry-instrument``), record into it instead of building a private pipeline.
    use_global_provider: bool = True
    #: How much of the goal the run span carries (0: none; goals may hold private details).
    goal_max_chars: int = 200
    #: Which other events become span events (fnmatch patterns over the event type).
    span_events: list[str] = attrs.Factory(lambda: ["*"])
    #: Events never recorded as span events (noisy ones).
    exclude_events: list[str] = attrs.Factory(lambda: list(DEFAULT_EXCLUDED_EVENTS))

    def __attrs_post_init__(self) -> None:
        problems: list[Problem] = []
        if self.endpoint is not None:
            try:
                self.endpoint = check_endpoint(self.endpoint)
            except EndpointError as exc:
                problems.append((("endpoint",), str(exc)))
        if not isinstance(self.headers, (str, dict)):
            problems.append(
                (
                    ("headers",),
                    "expected a table of strings or a string like 'k=v,k2=v2', "
                    f"got {type(self.headers).__name__}",
                )
            )
        else:
            try:
                self.headers = parse_headers(self.headers)
            except HeaderError as exc:
                problems.append((("headers",), str(exc)))
        if self.timeout_s is not None and not (
            math.isfinite(self.timeout_s) and 0 < self.timeout_s <= 600
        ):
            problems.append(
                (
                    ("timeout_s",),
                    f"must be a number of seconds above 0 (at most 600), got {self.timeout_s}",
                )
            )
        if self.service_name is not None and not self.service_name.strip():
            problems.append((("service_name",), "must not be empty (leave it out for 'loopctl')"))
        if self.goal_max_chars < 0:
            problems.append(
                (("goal_max_chars",), f"must be 0 (no goal) or more, got {self.goal_max_chars}")
            )
        if problems:
            _raise(problems)

    @property
    def header_map(self) -> dict[str, str]:
        """The headers, parsed (``headers`` holds the parsed form after validation)."""
        return dict(self.headers) if isinstance(self.headers, dict) else {}
