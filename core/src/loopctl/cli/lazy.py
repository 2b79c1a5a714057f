"""The ``loopctl`` click group, built lazily from its typer registrations.

typer turns a whole app into click commands before it parses a word: every option of every
command (``run`` has twenty) is read from its function's annotations, about 15 ms for loopctl's
own commands before a plugin adds any. :func:`lazy_group` builds the root group with only its
own options; each subcommand is built when it is looked up, which running a command does for
that one command only. The top-level help lists every command with its one-line help, taken
from the registration (the function's docstring, or ``help=``) without building its options.
Typo suggestions see every name.

Commands are still written with typer and plugins still receive the typer app: this only
changes when typer's conversion to click happens.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, TyperInfo

#: The one-line help of a command in a group's plain help: its first sentence, whole (click
#: would cut it at about 45 characters, mid-sentence).
SHORT_HELP_CHARS = 300


class LazyGroup(TyperGroup):
    """A typer group whose ``commands`` may be :class:`LazyCommands`: listing them (help,
    suggestions) builds none, looking one up builds that one."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The plain help's list of commands, each with the first sentence of its help."""
        commands = self.commands
        summaries = (
            commands.summaries() if isinstance(commands, LazyCommands) else contextlib.nullcontext()
        )
        rows = []
        with summaries:
            for name in self.list_commands(ctx):
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(limit=SHORT_HELP_CHARS)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


class LazyCommands(MutableMapping[str, Any]):
    """Subcommands by name, each built from its typer registration (a ``CommandInfo`` or, for a
    sub-app, a ``TyperInfo``) the first time it is looked up. Inside :meth:`summaries`, a
    command not built yet is answered by a stand-in that has only its name and help texts."""

    def __init__(self, app: typer.Typer) -> None:
        self._app = app
        self._sources: dict[str, CommandInfo | TyperInfo] = {}
        self._built: dict[str, Any] = {}
        self._summarizing = False
        # Registration order, a later name replacing an earlier one: what typer itself does.
        for info in app.registered_commands:
            self._sources[_command_name(info)] = info
        for group in app.registered_groups:
            name = typer.main.solve_typer_info_defaults(group).name
            if name:
                self._sources[name] = group
            else:  # a sub-app added without a name: typer merges its commands into this group
                for sub_name, command in self._build(group).commands.items():
                    self._built[sub_name] = command
                    self._sources.pop(sub_name, None)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            source = self._sources[name]  # KeyError: no such command
            if self._summarizing:
                return _summary(source)
            from loopctl.cli.metavars import readable

            self._built[name] = readable(self._build(source))
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command
        self._sources.pop(name, None)

    def __delitem__(self, name: str) -> None:
        found = self._sources.pop(name, None) is not None
        found = self._built.pop(name, None) is not None or found
        if not found:
            raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self._sources), **dict.fromkeys(self._built)})

    def __len__(self) -> int:
        return len(set(self._sources) | set(self._built))

    @contextlib.contextmanager
    def summaries(self) -> Iterator[None]:
        """Look-ups answer with stand-ins for the commands not built yet (for the help)."""
        self._summarizing = True
        try:
            yield
        finally:
            self._summarizing = False

    def _build(self, source: CommandInfo | TyperInfo) -> Any:
        app = self._app
        if isinstance(source, CommandInfo):
            return typer.main.get_command_from_info(
                source,
                pretty_exceptions_short=app.pretty_exceptions_short,
                rich_markup_mode=app.rich_markup_mode,
            )
        return typer.main.get_group_from_info(
            source,
            pretty_exceptions_short=app.pretty_exceptions_short,
            rich_markup_mode=app.rich_markup_mode,
            **_group_options(app),
        )


def lazy_group(app: typer.Typer) -> Any:
    """The click group of ``app`` (a typer app made with ``cls=LazyGroup``), with its
    subcommands built on demand."""
    shell = copy.copy(app)  # the root's own settings and callback, without its subcommands
    shell.registered_commands = []
    shell.registered_groups = []
    group = typer.main.get_command(shell)
    if not isinstance(group, LazyGroup):
        raise TypeError(f"{app!r} is not a typer app made with cls=LazyGroup")
    group.commands = LazyCommands(app)
    return group


def _command_name(info: CommandInfo) -> str:
    if info.name:
        return info.name
    assert info.callback is not None, "a typer command has a callback"
    return typer.main.get_command_name(info.callback.__name__)


def _summary(source: CommandInfo | TyperInfo) -> Any:
    """A stand-in for the help's list of commands: the name and help texts typer would give
    the built command, no parameters."""
    if isinstance(source, CommandInfo):
        text = source.help
        help_text = inspect.getdoc(source.callback) if text is None else inspect.cleandoc(text)
        return TyperCommand(
            name=_command_name(source),
            help=help_text,
            short_help=source.short_help,
            hidden=source.hidden,
            deprecated=source.deprecated,
        )
    solved = typer.main.solve_typer_info_defaults(source)
    return TyperGroup(
        name=solved.name,
        help=solved.help,
        short_help=solved.short_help,
        hidden=solved.hidden,
        deprecated=solved.deprecated,
    )


@functools.lru_cache(maxsize=1)
def _accepts_suggest_commands() -> bool:
    parameters = inspect.signature(typer.main.get_group_from_info).parameters
    return "suggest_commands" in parameters


def _group_options(app: typer.Typer) -> dict[str, Any]:
    """The options of ``get_group_from_info`` that not every supported typer has."""
    if _accepts_suggest_commands():
        return {"suggest_commands": getattr(app, "suggest_commands", True)}
    return {}
