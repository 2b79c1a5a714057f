"""JSON the way the state files write it: one line per record for JSONL and front matter,
indented for whole files, and plain data from attrs instances."""

from __future__ import annotations

import enum
import json
import math
import re
import unicodedata
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import attrs

# --- JSON that stays on one line -----------------------------------------------------------------

_NON_ASCII_RUN = re.compile("[^\x00-\x7e]+")


def _escape_char(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # JSON spells astral characters as a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _escape_run(match: re.Match[str]) -> str:
    return "".join(
        _escape_char(char)
        if not char.isprintable() and unicodedata.category(char) != "Zs"
        else char
        for char in match.group()
    )


def json_one_line(value: Any, **dumps_kwargs: Any) -> str:
    """``json.dumps(ensure_ascii=False)`` that also escapes what it leaves raw but would break
    a line-based reader or a UTF-8 encoder: U+2028/U+2029/U+0085, DEL, other non-printable
    characters and lone surrogates. Non-ASCII characters only occur inside JSON strings, so
    escaping them there keeps the JSON valid and equal in value.

    Limitation of JSON itself: a high surrogate directly followed by a low surrogate reads back
    as the one astral character the pair encodes.
    """
    kind = type(value)  # scalars (most of a state file's values) spelled as json spells them
    if kind is str:
        return _escaped(_encode_string(value))
    if kind is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is float and math.isfinite(value):
        return float.__repr__(value)
    encoder = _encoder(dumps_kwargs)
    text = (
        encoder.encode(value)
        if encoder is not None
        else json.dumps(value, ensure_ascii=False, **dumps_kwargs)
    )
    return _escaped(text)


def _escaped(text: str) -> str:
    """``text`` with the runs :data:`_NON_ASCII_RUN` finds escaped; plain ASCII (the usual
    case) is checked at C speed, not scanned by the regex."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _NON_ASCII_RUN.sub(_escape_run, text)


#: What ``json.dumps(ensure_ascii=False)`` writes for a string (its C function when there is one).
_encode_string = json.encoder.encode_basestring


def _encoder(dumps_kwargs: dict[str, Any]) -> json.JSONEncoder | None:
    """A ready encoder for these ``json.dumps`` arguments, if one was built."""
    if dumps_kwargs.keys() - {"default", "separators"}:
        return None
    try:
        return _ENCODERS.get((dumps_kwargs.get("default"), dumps_kwargs.get("separators")))
    except TypeError:  # unhashable separators (a list): json.dumps takes them
        return None


#: The encoders of the state files' usual calls, built once: ``json.dumps`` with any keyword
#: argument builds a new one each time (a quarter of encoding a small value).
_ENCODERS = {
    (default, separators): json.JSONEncoder(
        ensure_ascii=False, default=default, separators=separators
    )
    for default in (None, str)
    for separators in (None, (",", ":"))
}


def to_jsonable(value: Any) -> Any:
    """Plain JSON data for attrs instances (the :mod:`loopctl.model` classes), enums, paths,
    mappings and sequences, ready to write; read it back with cattrs."""
    if attrs.has(type(value)):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(key): to_jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(item) for item in value]
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


def json_text(data: Any) -> str:
    """``data`` as the state files write JSON: indented, UTF-8 kept, a trailing newline; the
    characters :func:`json_one_line` escapes (DEL, C1 controls …) escaped too, so printing the
    file cannot drive a terminal.

    The text is exactly ``json_one_line(data, indent=2)``'s, made faster: ``json`` indents in
    pure Python, so the C encoder writes it compact and msgspec indents that (it copies
    numbers and strings as they are). What msgspec cannot take (``NaN``, lone surrogates)
    goes the slow way."""
    import msgspec  # not at import time: only writers pay for it

    try:
        compact = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        text = msgspec.json.format(compact, indent=2)
    except (ValueError, UnicodeError, msgspec.MsgspecError):
        return json_one_line(data, indent=2) + "\n"
    return _NON_ASCII_RUN.sub(_escape_run, text) + "\n"
