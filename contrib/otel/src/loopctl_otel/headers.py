"""OTLP request headers: a TOML table, or the ``k=v,k2=v2`` form of OTEL_EXPORTER_OTLP_HEADERS.

The string form follows the OpenTelemetry spec (W3C baggage style): entries separated by
commas, key and value separated by the first ``=``, both URL-decoded, blanks around them
ignored. Header names are lowercased (HTTP names are case-insensitive; the SDK does the same).
Config input that is not a valid header raises :class:`HeaderError` naming the entry; the
environment variable is outside input, so :func:`parse_env_headers` skips bad entries instead.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote

#: An HTTP field name (RFC 9110 token).
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: What a header value may hold: visible ASCII, spaces and tabs (no CR/LF: header injection).
_VALUE = re.compile(r"[\t\x20-\x7e]*")


class HeaderError(ValueError):
    """A header the config gives cannot be sent; the message names it and says why."""


def _check(name: str, value: str) -> tuple[str, str]:
    name, value = name.strip(), value.strip()
    if not name:
        raise HeaderError("a header has an empty name")
    if not _TOKEN.fullmatch(name):
        raise HeaderError(
            f"{name!r} is not a valid header name (letters, digits and -_.!#$%&'*+^`|~)"
        )
    if not _VALUE.fullmatch(value):
        raise HeaderError(
            f"the value of header {name!r} may only hold printable ASCII (URL-encode the rest)"
        )
    return name.lower(), value


def _entries(text: str) -> list[tuple[str, str]]:
    """``k=v`` entries of the string form, URL-decoded; raises HeaderError on a bad entry."""
    found = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        if "=" not in raw:
            raise HeaderError(f"{raw.strip()[:60]!r} is not of the form key=value")
        key, _, value = raw.partition("=")
        found.append(_check(unquote(key), unquote(value)))
    return found


def parse_headers(value: str | Mapping[str, object]) -> dict[str, str]:
    """The headers ``value`` (a table or the string form) stands for; raises HeaderError."""
    if isinstance(value, str):
        return dict(_entries(value))
    headers: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise HeaderError(f"header {key!r} must have a string value, got {type(item).__name__}")
        name, text = _check(key, item)
        headers[name] = text
    return headers


def parse_env_headers(text: str) -> tuple[dict[str, str], list[str]]:
    """Headers from OTEL_EXPORTER_OTLP_HEADERS: the good entries, and a problem per bad one."""
    headers: dict[str, str] = {}
    problems: list[str] = []
    for raw in text.split(","):
        if not raw.strip():
            continue
        try:
            headers.update(_entries(raw))
        except HeaderError as exc:
            problems.append(str(exc))
    return headers, problems


def format_headers(headers: Mapping[str, str]) -> str:
    """The string form of ``headers`` (for messages and round-trip tests); values encoded."""
    from urllib.parse import quote

    return ",".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in headers.items())
