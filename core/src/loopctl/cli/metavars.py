"""Readable placeholders in ``--help``: ``--test-cmd COMMAND``, ``--max-iterations N``, not the
type names typer prints (``<str>``, ``<int>``, and in newer versions ``<bool>`` or
``<list[Path]>``).

Applied to every command when it is built (:mod:`loopctl.cli.lazy`), the plugins' included: a
parameter with its own ``metavar`` keeps it; an argument is named in capitals (``GOAL``);
loopctl's own options are named by what they hold (:data:`BY_FLAG`), any other option by its
type (:data:`BY_TYPE`). Choices are left to typer, which lists them (``--session
<fresh|resume>``).
"""

from __future__ import annotations

from typing import Any

#: What loopctl's own options hold.
BY_FLAG = {
    "--goal-file": "FILE",
    "--test-cmd": "COMMAND",
    "--agent": "NAME",
    "--agent-cmd": "COMMAND",
    "--model": "NAME",
    "--max-iterations": "N",
    "--max-restarts": "N",
    "--agent-timeout": "SECONDS",
    "--wall-clock": "SECONDS",
    "--max-tokens": "TOKENS",
    "--max-cost": "USD",
    "--completion-signal": "LINE",
    "--state-dir": "DIR",
    "--config": "FILE",
    "--exit-code": "CODE",
    "--stderr": "FILE",
}

#: By the name of the option's type (as click and typer name them).
BY_TYPE = {
    "text": "TEXT",
    "str": "TEXT",
    "string": "TEXT",
    "integer": "N",
    "int": "N",
    "integer range": "N",
    "int range": "N",
    "float": "NUMBER",
    "float range": "NUMBER",
    "path": "PATH",
    "directory": "DIR",
    "file": "FILE",
    "filename": "FILE",
}


def readable(command: Any) -> Any:
    """Give every option of ``command`` (and of its subcommands, if built) that has none a
    readable metavar; returns ``command``."""
    for param in getattr(command, "params", ()):
        kind = getattr(param, "param_type_name", "")
        if param.metavar is not None or kind not in ("option", "argument"):
            continue
        if kind == "argument":  # GOAL, not goal: a placeholder, as in every usage line
            param.metavar = (param.name or "value").upper()
            continue
        if getattr(param, "is_flag", False) or getattr(param, "count", False):
            continue
        name = getattr(param.type, "name", "")
        if name == "choice":
            continue
        by_flag = next((BY_FLAG[opt] for opt in param.opts if opt in BY_FLAG), None)
        param.metavar = by_flag or BY_TYPE.get(str(name).lower(), "VALUE")
        if getattr(param, "nargs", 1) not in (1, None):
            param.metavar += "..."
    commands = getattr(command, "commands", None)
    if isinstance(commands, dict):  # a sub-app's commands, built with it
        for sub in commands.values():
            readable(sub)
    return command
