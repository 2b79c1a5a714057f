"""The events this plugin writes, and the JSON Schema they are published under.

``events.schema.json`` (next to this module) registers the five event names —
``context-errors.context_generated``, ``context-errors.suggestion_recorded``,
``context-errors.suggestion_resolved``, ``context-errors.memory_unavailable``,
``context-errors.memory_spool`` — with their required and optional keys. The names are
published as the constants below (re-exported from :mod:`loopctl_context_errors`): other
plugins subscribe through them, never through copies of the strings. :func:`validate` checks an ``events.jsonl`` line against it with a
small validator for the part of JSON Schema (draft 2020-12) the schema uses, so the plugin and
its tests need no extra package: ``type``, ``enum``, ``const``, ``required``, ``properties``,
``additionalProperties: false``, ``items``, ``minItems``/``maxItems``, ``maxLength``,
``minimum``/``maximum``, local ``$ref``, ``allOf`` and ``if``/``then``. Anything else in a
schema is reported as unsupported rather than silently ignored.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

#: The plugin's name: every event it writes starts with it and a dot.
PREFIX = "context-errors."
#: A failure was categorized and its report written (it was ``error.context_generated``).
CONTEXT_GENERATED = PREFIX + "context_generated"
#: Suggested actions were shown to the agent and written to the ledger (was
#: ``suggestion.recorded``).
SUGGESTION_RECORDED = PREFIX + "suggestion_recorded"
#: A suggestion set was judged at the next test run (was ``suggestion.resolved``).
SUGGESTION_RESOLVED = PREFIX + "suggestion_resolved"
#: The failure memory cannot be used (unreachable, wrong password, a newer schema …): once a
#: run, with a warning line; the loop goes on without it.
MEMORY_UNAVAILABLE = PREFIX + "memory_unavailable"
#: Records kept in the local spool while the store could not be reached were written to it
#: (``state`` "written"), or records could not be kept (``full``, ``lost``): a line each.
MEMORY_SPOOL = PREFIX + "memory_spool"
EVENT_TYPES = (
    CONTEXT_GENERATED,
    SUGGESTION_RECORDED,
    SUGGESTION_RESOLVED,
    MEMORY_UNAVAILABLE,
    MEMORY_SPOOL,
)
SCHEMA_FILE = "events.schema.json"

_KNOWN = frozenset(
    {
        "$schema", "$id", "$defs", "title", "description", "type", "enum", "const", "required",
        "properties", "additionalProperties", "items", "minItems", "maxItems", "maxLength",
        "minimum", "maximum", "$ref", "allOf", "if", "then", "minLength",
    }
)  # fmt: skip


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The published schema (package data)."""
    text = resources.files("loopctl_context_errors").joinpath(SCHEMA_FILE).read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def _type_ok(value: Any, expected: str) -> bool:
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "string":
        return isinstance(value, str)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected == "null":
        return value is None
    raise ValueError(f"unsupported type {expected!r}")


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise ValueError(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    if not isinstance(node, dict):
        raise ValueError(f"$ref {ref!r} does not point at a schema")
    return node


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str) -> list[str]:
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError(f"unsupported schema keywords at {path or '/'}: {sorted(unknown)}")
    errors: list[str] = []
    where = path or "/"
    if "$ref" in schema:
        errors += _check(value, _resolve(root, schema["$ref"]), root, path)
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(value, t) for t in types):
            return [*errors, f"{where}: expected {' or '.join(types)}, got {value!r:.80}"]
    if "const" in schema and (value != schema["const"] or type(value) is not type(schema["const"])):
        errors.append(f"{where}: must be {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r:.80} is not one of {schema['enum']}")
    if isinstance(value, str) and "maxLength" in schema and len(value) > schema["maxLength"]:
        errors.append(f"{where}: longer than {schema['maxLength']} characters")
    if isinstance(value, str) and "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: shorter than {schema['minLength']} characters")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where}: below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where}: above the maximum {schema['maximum']}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        if "items" in schema:
            for index, item in enumerate(value):
                errors += _check(item, schema["items"], root, f"{path}/{index}")
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{where}: missing required key {key!r}")
        for key, item in value.items():
            if key in properties:
                errors += _check(item, properties[key], root, f"{path}/{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected key {key!r}")
    for part in schema.get("allOf", []):
        errors += _check(value, part, root, path)
    if "if" in schema and not _check(value, schema["if"], root, path):
        errors += _check(value, schema.get("then", {}), root, path)
    return errors


#: How the plain and live views show each event (``loopctl.define_event``'s ``line``).
#: The other two carry their line in their ``summary`` field (:mod:`loopctl_context_errors.lines`).
VIEW_LINES: dict[str, str] = {SUGGESTION_RECORDED: ""}
_ENVELOPE = ("type", "ts", "iteration")


def _inline(node: Any, root: dict[str, Any]) -> Any:
    """``node`` with every local ``$ref`` replaced by what it points at."""
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(_resolve(root, node["$ref"]), root)
        return {key: _inline(value, root) for key, value in node.items()}
    if isinstance(node, list):
        return [_inline(item, root) for item in node]
    return node


def core_event_schemas() -> dict[str, dict[str, Any]]:
    """The events, in the form of loopctl's ``register_event_schemas`` hook (derived from the
    published schema, so the two cannot drift)."""
    from loopctl import define_event

    root = load_schema()
    declared: dict[str, dict[str, Any]] = {}
    for name in EVENT_TYPES:
        spec = _inline(root["$defs"][name], root)
        properties = {k: v for k, v in spec["properties"].items() if k not in _ENVELOPE}
        required = {k: properties[k] for k in spec["required"] if k in properties}
        optional = {k: v for k, v in properties.items() if k not in required}
        declared[name] = define_event(
            spec["description"], required, optional, line=VIEW_LINES.get(name)
        )
    return declared


def validate(event: dict[str, Any], schema: dict[str, Any] | None = None) -> list[str]:
    """Problems with one ``events.jsonl`` line ([] when it is valid)."""
    root = schema if schema is not None else load_schema()
    return _check(event, root, root, "")


__all__ = [
    "CONTEXT_GENERATED",
    "EVENT_TYPES",
    "MEMORY_SPOOL",
    "MEMORY_UNAVAILABLE",
    "PREFIX",
    "SUGGESTION_RECORDED",
    "SUGGESTION_RESOLVED",
    "VIEW_LINES",
    "core_event_schemas",
    "load_schema",
    "validate",
]
