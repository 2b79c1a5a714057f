"""Plugin commands that start fast: :class:`CliCommand`, with its :class:`CliOption` and
:class:`CliArgument` parameters, returned from the ``register_cli_commands`` hook.

A command added with ``register_commands`` is a typer command: running it imports typer, about
40 ms before the command does anything. A :class:`CliCommand` is a description instead, of
plain data: loopctl reads its plain forms (known options, each at most once, and the arguments)
itself and calls the command's function, without typer; anything else (``--help``, a mistake,
``--``) goes to a typer command made from the same description, which parses, helps and
reports usage errors as any other command does, and calls the same function. Loading the
description must stay cheap too: the function is named by ``"module:function"`` and imported
only when the command runs.

This module imports nothing beyond the standard library's ``pathlib``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: The types a parameter's value may have; the command's function receives that type.
VALUE_TYPES: tuple[type, ...] = (str, int, float, Path)

_REQUIRED: Any = ...


class CliOption:
    """An option: ``CliOption("log", "--log", type=Path, multiple=True, help=...)``.

    :param name: the keyword the function receives it as.
    :param flags: its spellings, a long one (``--log``) and maybe a short one (``-f``).
    :param type: ``str``, ``int``, ``float`` or :class:`pathlib.Path`.
    :param default: its value when not given (a ``multiple`` option's is None).
    :param flag: an on/off switch (``--json``): False, or True when given.
    :param multiple: may be repeated; the function receives a list, or None when not given.
    :param help: the text ``--help`` shows.
    :param show_default: whether ``--help`` shows the default.
    :param metavar: what ``--help`` shows for the value (``FILE``, ``terminal|github|json``);
        by default a word for its type.
    """

    def __init__(
        self,
        name: str,
        *flags: str,
        type: type = str,
        default: Any = None,
        flag: bool = False,
        multiple: bool = False,
        help: str = "",
        show_default: bool = True,
        metavar: str | None = None,
    ) -> None:
        if not name.isidentifier():
            raise ValueError(f"CliOption name {name!r}: not a Python identifier")
        if not flags or not all(_is_flag(f) for f in flags):
            raise ValueError(f"CliOption {name!r}: give its flags, like '--name' or '-n'")
        if type not in VALUE_TYPES:
            raise ValueError(f"CliOption {name!r}: type must be str, int, float or Path")
        if flag and multiple:
            raise ValueError(f"CliOption {name!r}: a flag cannot be multiple")
        self.name = name
        self.flags = tuple(flags)
        self.type = type
        self.default = False if flag else default
        self.flag = flag
        self.multiple = multiple
        self.help = help
        self.show_default = show_default
        self.metavar = metavar


class CliArgument:
    """A positional argument: ``CliArgument("source", default="-", help=...)``; without a
    default it is required. ``type``, ``help`` and ``show_default`` as for :class:`CliOption`."""

    def __init__(
        self,
        name: str,
        *,
        type: type = str,
        default: Any = _REQUIRED,
        help: str = "",
        show_default: bool = True,
    ) -> None:
        if not name.isidentifier():
            raise ValueError(f"CliArgument name {name!r}: not a Python identifier")
        if type not in VALUE_TYPES:
            raise ValueError(f"CliArgument {name!r}: type must be str, int, float or Path")
        self.name = name
        self.type = type
        self.default = default
        self.required = default is _REQUIRED
        self.help = help
        self.show_default = show_default


class CliCommand:
    """A command of the ``loopctl`` command line, from a plugin's ``register_cli_commands``.

    :param path: its words: ``"classify"``, or ``"errors report"`` for a command of a group
        (the group is made if no plugin's ``register_commands`` made it).
    :param function: ``"module:function"``; called with every parameter as a keyword
        argument, it returns the exit code (None means 0).
    :param help: what ``--help`` says (its first sentence is the line in ``loopctl --help``).
    :param params: its options and arguments, in the order ``--help`` lists them.
    :param epilog: what ``--help`` shows after the options: examples, as loopctl's own
        commands show them (a line ``\\b`` keeps the lines that follow as they are written).
    """

    def __init__(
        self,
        path: str,
        function: str,
        *,
        help: str,
        params: Sequence[CliOption | CliArgument] = (),
        epilog: str = "",
    ) -> None:
        words = tuple(path.split())
        if not 1 <= len(words) <= 2 or any(w.startswith("-") for w in words):
            raise ValueError(
                f"CliCommand {path!r}: one or two words, like 'report' or 'errors report'"
            )
        module, colon, attribute = function.partition(":")
        if not (module and colon and attribute):
            raise ValueError(f"CliCommand {path!r}: function must be 'module:function'")
        names = [p.name for p in params]
        if len(set(names)) != len(names):
            raise ValueError(f"CliCommand {path!r}: two parameters have the same name")
        spellings = [f for p in params if isinstance(p, CliOption) for f in p.flags]
        if len(set(spellings)) != len(spellings):
            raise ValueError(f"CliCommand {path!r}: two options have the same flag")
        self.path = words
        self.function = function
        self.help = help
        self.params = tuple(params)
        self.epilog = epilog

    def load(self) -> Callable[..., Any]:
        """The command's function (imported now)."""
        module, _, attribute = self.function.partition(":")
        found: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
        return found

    def parse(self, args: Sequence[str]) -> dict[str, Any] | None:
        """The keyword arguments of ``loopctl <path> ARGS`` when ARGS is a plain form (read as
        click reads it): known options, each at most once unless ``multiple``, values that do
        not start with ``-`` (but ``-`` itself), and the arguments. None for anything else
        (help, a mistake, ``--``): the typer command then parses ARGS and says what is wrong."""
        options = {f: p for p in self.params if isinstance(p, CliOption) for f in p.flags}
        positional = [p for p in self.params if isinstance(p, CliArgument)]
        found: dict[str, Any] = {}
        given: list[Any] = []
        rest = list(args)
        while rest:
            word = rest.pop(0)
            if word == "-" or not word.startswith("-"):
                given.append(word)
                continue
            spelled, equals, text = word.partition("=") if word.startswith("--") else (word, "", "")
            option = options.get(spelled)
            if option is None or (option.name in found and not option.multiple):
                return None
            if option.flag:
                if equals:
                    return None
                found[option.name] = True
                continue
            if not equals:
                if not rest or (rest[0].startswith("-") and rest[0] != "-"):
                    return None
                text = rest.pop(0)
            value = _convert(option.type, text)
            if value is None:
                return None
            if option.multiple:
                found.setdefault(option.name, []).append(value)
            else:
                found[option.name] = value
        if len(given) > len(positional):
            return None
        for argument, text in zip(positional, given, strict=False):
            value = _convert(argument.type, text)
            if value is None:
                return None
            found[argument.name] = value
        for argument in positional[len(given) :]:
            if argument.required:
                return None
            found[argument.name] = argument.default
        for param in self.params:
            if isinstance(param, CliOption) and param.name not in found:
                found[param.name] = param.default
        return found

    def run(self, arguments: dict[str, Any]) -> int:
        """Call the function with ``arguments`` (from :meth:`parse`); its exit code."""
        code = self.load()(**arguments)
        return 0 if code is None else int(code)


def _is_flag(text: str) -> bool:
    if text.startswith("--"):
        return len(text) > 2 and "=" not in text
    return len(text) == 2 and text[0] == "-" and text[1] != "-"


def _convert(kind: type, text: str) -> Any:
    """``text`` as ``kind`` the way click converts it, or None when click might disagree (it
    then gives the error)."""
    if kind is str:
        return text
    if kind is Path:
        return Path(text) if text else None
    try:
        value = kind(text.strip()) if kind is int else kind(text)
    except ValueError:
        return None
    return value if str(text).strip() == text else None


__all__ = ["CliArgument", "CliCommand", "CliOption"]
