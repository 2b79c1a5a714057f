"""The schema's key paths: which exist and of what type; parsing and setting dotted paths."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, get_args

import attrs
from cattrs.cols import is_mapping

from loopctl.config.errors import KeyPath, dotted_path
from loopctl.config.schema import PLUGINS_SETTING_KEYS, LoopctlConfig, PluginsConfig


def _is_table_type(tp: Any) -> bool:
    return attrs.has(tp) or is_mapping(tp)


def type_at(parts: Sequence[str]) -> Any | None:
    """The type a key path of LoopctlConfig holds (``Any`` inside free-form sections), or None
    when no such key exists."""
    tp: Any = LoopctlConfig
    for part in parts:
        if tp is Any:
            continue
        if tp is PluginsConfig and part not in PLUGINS_SETTING_KEYS:
            tp = dict[str, Any]
        elif attrs.has(tp):
            field = attrs.fields_dict(tp).get(part)
            if field is None:
                return None
            tp = field.type
        elif is_mapping(tp):
            args = get_args(tp)
            tp = args[1] if len(args) == 2 else Any
        else:
            return None
    return tp


def schema_leaves(cls: type = LoopctlConfig, prefix: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every setting reachable through attrs classes alone (no named sections)."""
    for field in attrs.fields(cls):
        if cls is PluginsConfig and field.name == "sections":
            continue
        path = (*prefix, field.name)
        if attrs.has(field.type):
            yield from schema_leaves(field.type, path)
        elif not is_mapping(field.type):
            yield path, field.type


def known_paths() -> list[str]:
    names = [dotted_path(path) for path, _ in schema_leaves()]
    names += [f.name for f in attrs.fields(LoopctlConfig) if _is_table_type(f.type)]
    return names


def set_path(data: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        child = data.get(part)
        if not isinstance(child, dict):
            child = data[part] = {}
        data = child
    data[path[-1]] = value


def parse_key_path(text: str) -> list[str] | None:
    """Split a dotted key path from the command line. A model name may hold dots, so everything
    after ``models.`` is one key; elsewhere TOML quoting (``agents."my.agent"``) is understood."""
    text = text.strip()
    if text.startswith("models.") and len(text) > len("models."):
        rest = text[len("models.") :]
        return ["models", _unquote(rest)]
    parts: list[str] = []
    pattern = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+))\s*(\.|$)')
    position = 0
    while position < len(text):
        match = pattern.match(text, position)
        if match is None or match.end() == position:
            return None
        quoted, literal, bare, _ = match.groups()
        parts.append(_unquote(f'"{quoted}"') if quoted is not None else literal or bare or "")
        position = match.end()
        if match.group(4) == "" and position < len(text):
            return None
    return parts or None


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1]
    return text
