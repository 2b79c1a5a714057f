"""The typer command made from a plugin's :class:`~loopctl.CliCommand`: it serves the forms
:meth:`~loopctl.CliCommand.parse` leaves to typer (``--help``, mistakes), with the help and the
errors a command written with typer would have, and calls the same function."""

from __future__ import annotations

import copy
import inspect
from typing import Annotated, Any, Optional

import typer

from loopctl.clicommand import CliArgument, CliCommand, CliOption


def add_cli_command(cli: typer.Typer, command: CliCommand) -> None:
    """Register ``command`` on ``cli`` (this run's root app), in its group if it has one: the
    group a plugin's ``register_commands`` added (copied, so the plugin's app is not changed),
    or a new one. In a group, the described commands come first."""
    *group_path, name = command.path
    if not group_path:
        cli.command(name, help=command.help, epilog=command.epilog or None)(typed_function(command))
        return
    group = _group(cli, group_path[0])
    group.command(name, help=command.help, epilog=command.epilog or None)(typed_function(command))
    # a group lists its described commands first, in the order they were registered
    described = getattr(group, "_loopctl_described", 0)
    group.registered_commands.insert(described, group.registered_commands.pop())
    group._loopctl_described = described + 1  # type: ignore[attr-defined]


def _group(cli: typer.Typer, name: str) -> typer.Typer:
    for index, info in enumerate(cli.registered_groups):
        if typer.main.solve_typer_info_defaults(info).name == name:
            mine = copy.copy(info)
            sub = copy.copy(info.typer_instance)
            assert sub is not None, "a registered group has its app"
            sub.registered_commands = list(sub.registered_commands)
            mine.typer_instance = sub
            cli.registered_groups[index] = mine
            return sub
    sub = typer.Typer(no_args_is_help=True)
    cli.add_typer(sub, name=name)
    return sub


def typed_function(command: CliCommand) -> Any:
    """A function whose signature says to typer what ``command``'s parameters say, and which
    calls the command's function with them."""
    parameters = []
    annotations: dict[str, Any] = {}
    for param in command.params:
        kind: Any
        if isinstance(param, CliOption):
            info: Any = typer.Option(
                *param.flags,
                help=param.help or None,
                show_default=param.show_default,
                metavar=param.metavar,
            )
            kind = bool if param.flag else list[param.type] if param.multiple else param.type  # type: ignore[name-defined]
            if param.default is None:
                kind = Optional[kind]
            default = param.default
        else:
            assert isinstance(param, CliArgument)
            info = typer.Argument(help=param.help or None, show_default=param.show_default)
            kind = param.type if param.default is not None else Optional[param.type]
            default = inspect.Parameter.empty if param.required else param.default
        annotations[param.name] = Annotated[kind, info]
        parameters.append(
            inspect.Parameter(
                param.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=annotations[param.name],
            )
        )

    def function(**arguments: Any) -> int:
        return command.run(arguments)

    function.__signature__ = inspect.Signature(parameters, return_annotation=int)  # type: ignore[attr-defined]
    function.__annotations__ = {**annotations, "return": int}
    function.__name__ = function.__qualname__ = command.path[-1].replace("-", "_")
    function.__doc__ = command.help
    return function
