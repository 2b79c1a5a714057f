"""Config error types and their messages: key paths spelled the TOML way, values shown short."""

from __future__ import annotations

import difflib
import json
import re
import reprlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Union

import attrs

#: A key path inside a config document: table keys (str) and array indices (int).
KeyPath = tuple[Union[str, int], ...]


class InvalidFields(ValueError):
    """Raised by a config class whose field values are out of range.

    Each problem is ``(key path relative to the class, message)``, so the loader can name the
    offending key; constructing the classes directly in Python gets the same checks.
    """

    def __init__(self, problems: Sequence[tuple[KeyPath, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{dotted_path(path)}: {msg}" for path, msg in self.problems))


class Mismatch(ValueError):
    """A value of the wrong type or form: ``expected X, got Y``."""

    def __init__(self, expected: str, found: object) -> None:
        self.message = f"expected {expected}, got {show(found)}"
        super().__init__(self.message)


class UnknownKeys(ValueError):
    """Keys a table does not allow; ``allowed`` feeds the "did you mean" suggestion."""

    def __init__(
        self,
        keys: Iterable[object],
        allowed: Iterable[str],
        hint: str = "",
        tables: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        self.keys = list(keys)
        self.allowed = sorted(allowed)
        self.hint = hint
        #: The tables inside this one, each with its keys: a key of one of them, written
        #: here, was meant to go in it (``max_iterations`` at the top, for ``[limits]``).
        self.tables = {name: list(keys) for name, keys in (tables or {}).items()}
        super().__init__(f"unknown keys {self.keys!r}")


@attrs.frozen
class Problem:
    """One problem found while structuring, relative to the structured root."""

    path: KeyPath
    message: str
    #: Where the offending key or value is (for finding its source); defaults to ``path``.
    subject: KeyPath | None = None
    #: The message told from the source's root, given the dotted path of ``path`` there (a
    #: key that belongs in another table names it as the source spells it:
    #: ``[tool.loopctl.limits]`` in pyproject.toml); None: ``message`` says it all.
    retell: Callable[[str], str] | None = attrs.field(default=None, eq=False)

    def told_at(self, where: str) -> str:
        """The message for a problem at ``where`` (``path`` as its source spells it)."""
        return self.retell(where) if self.retell is not None else self.message


_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlong = 40
_repr.maxlist = 5
_repr.maxtuple = 5
_repr.maxdict = 4
_repr.maxlevel = 2


def show(value: object) -> str:
    """A short rendering of a value found in the config, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a table"
    try:
        if isinstance(value, (list, tuple)):
            return f"an array {_repr.repr(list(value))}"
        if isinstance(value, (str, int, float)):
            return _repr.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not hide the real problem
        pass
    return f"a value of type {type(value).__name__}"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dotted_path(parts: Iterable[str | int]) -> str:
    """Render a key path the way TOML spells it: ``limits.max_iterations``, ``stuck.exempt[1]``,
    ``models."gemini-2.5-pro"`` (keys that are not bare TOML keys are quoted)."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
            continue
        if isinstance(part, str):
            text = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
        else:
            text = show(part)
        out = f"{out}.{text}" if out else text
    return out


def join_path(prefix: str, rest: str) -> str:
    if not prefix:
        return rest
    if not rest:
        return prefix
    return prefix + rest if rest.startswith("[") else f"{prefix}.{rest}"


def unknown_key_message(
    key: object,
    allowed: Sequence[str],
    hint: str = "",
    tables: Mapping[str, Sequence[str]] | None = None,
    at: str = "",
) -> str:
    """``unknown key 'KEY'`` and how to mend it: the table inside this one that has the key
    (``(it belongs in [limits]: limits.max_iterations)``), else the closest key of this table,
    else the closest key of a table inside it (``(did you mean 'max_iterations'? it belongs in
    [limits]: …)``). ``at`` is this table's path from the source's root, for naming the tables
    inside it as the source spells them (``tool.loopctl`` in pyproject.toml)."""
    message = f"unknown key {show(key) if not isinstance(key, str) else repr(key)}"
    if not isinstance(key, str):
        return f"{message}{hint}"
    tables = tables or {}
    homes = [name for name, keys in tables.items() if key in keys]
    if homes:
        return f"{message} ({_belongs(key, homes, at)})"
    close = difflib.get_close_matches(key, allowed, n=1)
    if close:
        return f"{message} (did you mean {close[0]!r}?)"
    inner = difflib.get_close_matches(key, [k for keys in tables.values() for k in keys], n=1)
    if inner:
        homes = [name for name, keys in tables.items() if inner[0] in keys]
        return f"{message} (did you mean {inner[0]!r}? {_belongs(inner[0], homes, at)})"
    return f"{message}{hint}"


def _belongs(key: str, homes: Sequence[str], at: str) -> str:
    """``it belongs in [limits]: limits.max_iterations``, the tables named from ``at``."""
    tables = [join_path(at, dotted_path((name,))) for name in homes]
    places = " or ".join(f"[{table}]" for table in tables)
    paths = " or ".join(join_path(table, dotted_path((key,))) for table in tables)
    return f"it belongs in {places}: {paths}"


def format_problem(source: str, prefix: str, problem: Problem) -> str:
    where = join_path(prefix, dotted_path(problem.path))
    message = " ".join(problem.told_at(where).split("\n"))  # one problem, one line
    return f"{source}: {where}: {message}" if where else f"{source}: {message}"
