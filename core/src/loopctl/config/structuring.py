"""Structuring raw config into classes, with cattrs' errors turned into one problem per key path."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError, IterableValidationError

from loopctl.config.convert import converter, field_names
from loopctl.config.errors import (
    InvalidFields,
    KeyPath,
    Mismatch,
    Problem,
    UnknownKeys,
    format_problem,
    unknown_key_message,
)
from loopctl.configfile import ConfigError

T = TypeVar("T")


def flatten_problems(exc: BaseException, path: KeyPath = ()) -> list[Problem]:
    """Flatten cattrs' tree of validation errors into problems with key paths.

    The same walk as :func:`cattrs.transform_error`, but keeping paths as tuples (so they can be
    spelled the user's way and traced to their source) and giving each unknown key its own line.
    """
    if isinstance(exc, IterableValidationError):
        found: list[Problem] = []
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            found += flatten_problems(sub, (*path, note.index))
        for sub in without:
            found += flatten_problems(sub, path)
        return found
    if isinstance(exc, ClassValidationError):
        found = []
        class_notes, class_without = exc.group_exceptions()
        for sub, attribute_note in class_notes:
            found += flatten_problems(sub, (*path, attribute_note.name))
        for sub in class_without:
            found += flatten_problems(sub, path)
        return found
    if isinstance(exc, ForbiddenExtraKeysError):
        exc = UnknownKeys(exc.extra_fields, field_names(exc.cl), tables=_tables_in(exc.cl))
    if isinstance(exc, UnknownKeys):
        ordered = sorted(exc.keys, key=lambda key: (not isinstance(key, str), str(key)))
        return [
            Problem(
                path,
                unknown_key_message(key, exc.allowed, exc.hint, exc.tables),
                subject=(*path, key if isinstance(key, (str, int)) else str(key)),
                retell=functools.partial(
                    unknown_key_message, key, exc.allowed, exc.hint, exc.tables
                ),
            )
            for key in ordered
        ]
    if isinstance(exc, InvalidFields):
        return [Problem((*path, *sub_path), message) for sub_path, message in exc.problems]
    if isinstance(exc, Mismatch):
        return [Problem(path, exc.message)]
    if isinstance(exc, KeyError):
        return [Problem(path, "required, but missing")]
    if isinstance(exc, RecursionError):
        return [Problem(path, "nested too deeply")]
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    return [
        Problem(path, f"invalid value: {text}" if text else f"invalid value ({type(exc).__name__})")
    ]


def _tables_in(cls: type) -> dict[str, list[str]]:
    """The tables (attrs classes) among the fields of ``cls``, each with its keys."""
    try:
        fields = attrs.fields(cls)
    except (TypeError, ValueError):
        return {}
    return {
        field.name: field_names(field.type)
        for field in fields
        if isinstance(field.type, type) and attrs.has(field.type)
    }


def try_structure(data: object, cls: type[T]) -> tuple[T | None, list[Problem]]:
    try:
        return converter.structure(data, cls), []
    except cattrs.StructureHandlerNotFoundError:
        raise  # the class itself is unsupported: a bug in its author's code, not in the input
    except Exception as exc:  # noqa: BLE001 - everything the input can cause becomes a problem
        problems = flatten_problems(exc)
        return None, problems or [Problem((), f"invalid value: {exc}")]


def structure(data: Mapping[str, Any], cls: type[T], *, source: str, prefix: str) -> T:
    """Structure raw config ``data`` into the attrs class ``cls``, strictly.

    ``source`` names where the data came from (a file path, ``command line`` …) and ``prefix`` is
    the key path of ``data`` in that source (``tool.loopctl.plugins.my-plugin``), so every
    problem reads ``SOURCE: PREFIX.KEY: what is wrong``. Unknown keys and wrong types are
    errors. Raises :class:`ConfigError` listing every problem, one per line.
    """
    result, problems = try_structure(data, cls)
    if problems or result is None:
        raise ConfigError([format_problem(source, prefix, problem) for problem in problems])
    return result
