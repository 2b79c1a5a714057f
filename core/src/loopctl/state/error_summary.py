"""``error-summary.json``: the decisive error lines of the latest test run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from loopctl.state.files import atomic_write_json
from loopctl.state.layout import StateError

# --- error-summary.json --------------------------------------------------------------------------


def write_error_summary(
    path: Path, *, iteration: int, error_lines: list[str], test_cmd: str
) -> None:
    """Write ``error-summary.json``: the decisive error lines of the latest test run."""
    atomic_write_json(
        path,
        {
            "iteration": iteration,
            "error_count": len(error_lines),
            "error_lines": list(error_lines),
            "test_cmd": test_cmd,
        },
    )


def read_error_summary(path: Path) -> dict[str, Any] | None:
    """``error-summary.json`` with all four keys present, or None if there is none.

    Raises :class:`StateError` naming the file when it is not a valid summary."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    fix = "delete it; the next test run writes a new one"
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = f"line {exc.lineno}: " if isinstance(exc, json.JSONDecodeError) else ""
        raise StateError(f"{path}: {where}not valid JSON (torn write?); {fix}") from None
    if not isinstance(data, dict):
        raise StateError(f"{path}: expected a JSON object, found {type(data).__name__}; {fix}")
    lines = data.get("error_lines", [])
    if not isinstance(lines, list) or not all(isinstance(line, str) for line in lines):
        raise StateError(f"{path}: `error_lines` should be a list of strings; {fix}")
    data["error_lines"] = lines
    for key, default in (("iteration", 0), ("error_count", len(lines))):
        value = data.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool):
            raise StateError(f"{path}: `{key}` should be a whole number; {fix}")
        data[key] = value
    test_cmd = data.get("test_cmd", "")
    if not isinstance(test_cmd, str):
        raise StateError(f"{path}: `test_cmd` should be a string; {fix}")
    data["test_cmd"] = test_cmd
    return data
