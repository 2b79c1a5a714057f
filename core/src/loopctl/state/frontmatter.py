"""Front matter: the ``key: value`` lines between ``---`` fences at the top of a markdown file,
read tolerantly (JSON, YAML-style quoted strings or plain text) with errors naming the line."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from loopctl.state.layout import StateError

_FIX = "edit that line, or move the file away to start a fresh loop"


@attrs.frozen
class Entry:
    key: str
    value: Any
    raw: str
    quoted: bool
    line: int


_KEY_LINE = re.compile(r"\A([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(.*)\Z", re.DOTALL)
_LENIENT_JSON = json.JSONDecoder(strict=False)  # the bash tool may have left raw tabs in quotes


def short_repr(text: str) -> str:
    return repr(text if len(text) <= 60 else text[:60] + "…")


def _is_fence(line: str) -> bool:
    return line.rstrip(" \t\r") == "---"


def _unquote_single(raw: str) -> tuple[str, str] | None:
    """A YAML single-quoted scalar (``''`` is a quote) and the text after it, or None."""
    out: list[str] = []
    index = 1
    while index < len(raw):
        char = raw[index]
        if char == "'":
            if raw[index + 1 : index + 2] == "'":
                out.append("'")
                index += 2
                continue
            return "".join(out), raw[index + 1 :]
        out.append(char)
        index += 1
    return None


def _decode_value(raw: str, key: str, line: int, source: str) -> tuple[Any, bool]:
    """A front-matter value and whether it was quoted. JSON first (what loopctl writes, and
    the bash tool's double-quoted strings); unquoted text that is not JSON is a plain string."""
    if raw in ("", "~"):
        return None, False
    if raw[0] in "\"'":
        if raw[0] == '"':
            try:
                value, end = _LENIENT_JSON.raw_decode(raw)
            except ValueError as exc:
                raise StateError(
                    f"{source}: line {line}: the value of `{key}` is a malformed quoted string "
                    f"({exc.msg if isinstance(exc, json.JSONDecodeError) else exc}); {_FIX}"
                ) from None
            rest = raw[end:]
        else:
            unquoted = _unquote_single(raw)
            if unquoted is None:
                raise StateError(
                    f"{source}: line {line}: the value of `{key}` has no closing quote; {_FIX}"
                )
            value, rest = unquoted
        rest = rest.strip(" \t")
        if rest and not rest.startswith("#"):
            raise StateError(
                f"{source}: line {line}: unexpected text {short_repr(rest)} after the quoted value "
                f"of `{key}`; {_FIX}"
            )
        return value, True
    try:
        return json.loads(raw), False
    except (ValueError, RecursionError):
        return raw, False


def read_entries(text: str, source: str) -> tuple[list[Entry], str]:
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not _is_fence(lines[0]):
        raise StateError(
            f"{source}: line 1: expected '---' to open the front matter, found "
            f"{short_repr(lines[0])}; this is not a loop-state file: move it away or use --state-dir"
        )
    entries: list[Entry] = []
    for index in range(1, len(lines)):
        line = lines[index].rstrip("\r")
        number = index + 1
        if _is_fence(line):
            return entries, "\n".join(lines[index + 1 :])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            raise StateError(
                f"{source}: line {number}: indented line {short_repr(line)}: multi-line YAML values "
                f"are not supported, write the value as one JSON string; {_FIX}"
            )
        match = _KEY_LINE.match(line)
        if match is None:
            raise StateError(
                f"{source}: line {number}: expected `key: value`, found {short_repr(line)}; {_FIX}"
            )
        key, raw = match.group(1), match.group(2).strip(" \t")
        value, quoted = _decode_value(raw, key, number, source)
        entries.append(Entry(key, value, raw, quoted, number))
    raise StateError(
        f"{source}: the front matter opened on line 1 has no closing '---' line (the file may "
        f"be truncated); add the '---' line, or move the file away to start a fresh loop"
    )


def parse_front_matter(text: str, *, source: str = "front matter") -> tuple[dict[str, Any], str]:
    """The ``key: value`` pairs between the opening and closing ``---`` lines, and the body after.

    Values are JSON, or YAML-style quoted strings, or plain unquoted text. Raises
    :class:`StateError` (naming ``source`` and the line) and nothing else on malformed text."""
    entries, body = read_entries(text, source)
    return {entry.key: entry.value for entry in entries}, body
