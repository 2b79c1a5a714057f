"""The OTLP/HTTP endpoint: checked in config, resolved per signal like the SDK resolves it."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from typing import Literal
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "http://localhost:4318"
#: The SDK's default export timeout in seconds.
DEFAULT_TIMEOUT_S = 10.0
#: The longest timeout accepted (config and environment alike).
MAX_TIMEOUT_S = 600.0

Signal = Literal["traces", "metrics"]


class EndpointError(ValueError):
    """The configured endpoint is not an http(s) URL; the message says what to write."""


def check_endpoint(text: str) -> str:
    """``text`` as a base URL (no trailing slash); raises EndpointError when it is not one."""
    url = text.strip()
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as exc:
        raise EndpointError(f"{text!r} is not a URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointError(
            f"{text!r} is not an http(s) URL; write e.g. 'http://localhost:4318' "
            "(the /v1/traces and /v1/metrics paths are added)"
        )
    if port == 0 or parts.query or parts.fragment or any(c.isspace() for c in url):
        raise EndpointError(f"{text!r} is not a usable endpoint (a port, query or blank in it)")
    base = url.rstrip("/")
    if base.endswith(("/v1/traces", "/v1/metrics", "/v1/logs")):
        raise EndpointError(
            f"{text!r} names one signal's path; write the base URL "
            f"({base.rsplit('/v1/', 1)[0]!r}): /v1/traces and /v1/metrics are added"
        )
    return base


def signal_endpoint(
    signal: Signal, configured: str | None, env: Mapping[str, str] | None = None
) -> str:
    """The URL ``signal`` is posted to: the config's base URL, else the standard variables
    (``OTEL_EXPORTER_OTLP_<SIGNAL>_ENDPOINT`` as is, ``OTEL_EXPORTER_OTLP_ENDPOINT`` as a
    base), else localhost:4318 — the order the SDK's own exporters use."""
    env = os.environ if env is None else env
    if configured:
        return f"{configured.rstrip('/')}/v1/{signal}"
    specific = env.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    if specific:
        return specific
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    return f"{base.rstrip('/')}/v1/{signal}"


def env_timeout_s(signal: Signal, env: Mapping[str, str] | None = None) -> float:
    """The export timeout the standard variables ask for (seconds, as the Python SDK reads
    them), or the SDK's default; a value that is not a positive number is ignored, and a
    larger one than :data:`MAX_TIMEOUT_S` is capped (the end of a loop must not hang on it)."""
    env = os.environ if env is None else env
    for name in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = env.get(name, "").strip()
        if not raw:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if math.isfinite(value) and value > 0:
            return min(value, MAX_TIMEOUT_S)
    return DEFAULT_TIMEOUT_S
