"""Event data as OpenTelemetry attribute values.

Attributes may only be strings, booleans, integers, floats, or homogeneous sequences of them;
the SDK drops anything else with a log line. Event data comes from the engine and from any
plugin, so every value is made one of those here (long text cut, nested data as JSON), and
every text is redacted (:func:`loopctl.redact`) before it is exported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Union

from loopctl import redact

AttributeValue = Union[
    str, bool, int, float, Sequence[str], Sequence[bool], Sequence[int], Sequence[float]
]

#: Longest string attribute kept (characters); longer text is cut with an ellipsis.
MAX_TEXT = 500
#: Most items kept of a list.
MAX_ITEMS = 20
#: OpenTelemetry integers are 64-bit signed.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def cut(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` no longer than ``limit`` characters (an ellipsis marks a cut)."""
    if limit <= 0:
        return ""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def _json(value: object) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return cut(redact(text))


def _scalar(value: object) -> str | bool | int | float | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if _INT_MIN <= value <= _INT_MAX else str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return cut(redact(value))  # the one redactor: no secret leaves in a span either
    return None


def attribute_value(value: object) -> AttributeValue | None:
    """``value`` as an attribute value, or None when there is nothing to record (None)."""
    if value is None:
        return None
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    if isinstance(value, (list, tuple)):
        items = [_scalar(item) for item in value[:MAX_ITEMS]]
        kinds = {type(item) for item in items}
        if items and type(None) not in kinds:
            if kinds <= {str} or kinds <= {bool} or kinds <= {float}:
                return tuple(items)  # type: ignore[return-value]
            if kinds <= {int}:
                return tuple(items)  # type: ignore[return-value]
            if kinds <= {int, float}:
                return tuple(float(item) for item in items)  # type: ignore[arg-type]
        if not value:
            return ()
        return _json(list(value))
    return _json(value)


def attributes(data: Mapping[Any, object], prefix: str = "") -> dict[str, AttributeValue]:
    """Every key of ``data`` with a recordable value, as ``prefix + key``."""
    found: dict[str, AttributeValue] = {}
    for key, value in data.items():
        converted = attribute_value(value)
        if converted is not None:
            found[f"{prefix}{key}"] = converted
    return found
