"""Settings written as text (environment variables, command-line flags), converted by type."""

from __future__ import annotations

import types
from typing import Any, Union, get_args, get_origin

from cattrs.cols import is_sequence

from loopctl.config.convert import is_literal, literal_choices
from loopctl.config.errors import Mismatch
from loopctl.configfile import FALSE_WORDS, TRUE_WORDS, split_list


def strip_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` → ``(X, True)``; anything else → ``(tp, False)``."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [arg for arg in get_args(tp) if arg is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0], True
    return tp, False


def needs_text_conversion(tp: Any) -> bool:
    inner, _ = strip_optional(tp)
    return inner in (bool, int, float) or is_literal(inner) or is_sequence(inner)


def from_text(text: str, tp: Any) -> Any:
    """Convert text from the environment or command line by the target type."""
    inner, optional = strip_optional(tp)
    if optional and not text.strip():
        return None
    if inner is bool:
        return _boolean(text)
    if inner in (int, float):
        return _number(text, inner)
    if is_literal(inner):
        return _choice(text, inner)
    if is_sequence(inner):
        args = get_args(inner)
        return [from_text(item, args[0]) if args else item for item in split_list(text)]
    return text


def _boolean(text: str) -> bool:
    word = text.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise Mismatch("a boolean (1/true/yes/on or 0/false/no/off)", text)


def _number(text: str, kind: type[int] | type[float]) -> int | float:
    try:
        return kind(text.strip())
    except ValueError:
        raise Mismatch("an integer" if kind is int else "a number", text) from None


def _choice(text: str, literal: Any) -> Any:
    """The choice of a ``Literal`` type that ``text`` names, ignoring case and spaces around."""
    stripped = text.strip()
    for choice in get_args(literal):
        if isinstance(choice, str) and choice.lower() == stripped.lower():
            return choice
    raise Mismatch(f"one of {literal_choices(literal)}", text)
