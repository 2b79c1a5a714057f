"""Converting iteration records to and from the plain JSON of ``iterations.jsonl``."""

from __future__ import annotations

from typing import Any

import cattrs

from loopctl.model import IterationRecord

_converter = cattrs.Converter(omit_if_default=False)


def unstructure_record(record: IterationRecord) -> dict[str, Any]:
    data: dict[str, Any] = _converter.unstructure(record)
    return data


#: Older names of record fields, read as the new ones.
RENAMED_FIELDS = {"generation": "restarts"}


def structure_record(data: Any) -> IterationRecord:
    """Raises ``ValueError`` naming the problem when ``data`` is not an iteration record."""
    if isinstance(data, dict) and any(old in data for old in RENAMED_FIELDS):
        data = {RENAMED_FIELDS.get(key, key): value for key, value in data.items()}
    try:
        return _converter.structure(data, IterationRecord)
    except Exception as exc:
        raise ValueError(
            "not an iteration record: " + "; ".join(cattrs.transform_error(exc))
            if isinstance(exc, (cattrs.BaseValidationError,))
            else f"not an iteration record: {exc}"
        ) from exc
