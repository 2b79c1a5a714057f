"""What a project's own config file may make a read-only command do: nothing of its choosing.

A cloned repository's ``loopctl.toml`` (or ``[tool.loopctl]``) is not trusted until the user
runs a loop in it. The read-only commands (``status``, ``plugins list``, ``config show``,
``agents list``, and the plugins' ``memory``, ``goal``, ``classify`` and ``errors`` commands)
run no program the file names, connect to no database it names, and follow no path it names
out of the project; where a command needs one, it says which setting, and asks for the value on
the command line or for ``--trust-config``. What the user sets is trusted: ``LOOPCTL_*``
variables, the command line, and the defaults.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from loopctl.configfile import ConfigError

if TYPE_CHECKING:
    from loopctl.config import LoadedConfig

#: The flag of every read-only command that would otherwise refuse what the config names.
TRUST_FLAG = "--trust-config"
#: Its help text, the same in every command.
TRUST_HELP = (
    "Trust the project's config file: use the programs, paths and databases it names "
    "(a cloned repository's config is not trusted until `loopctl run`)."
)


class UntrustedConfig(ConfigError):
    """A read-only command was asked to use what the project's config file names (a program,
    a path outside the project, a database) without ``--trust-config``. The message names the
    setting and what to give instead.

    A command that accepts the flag spells and explains it as ``UntrustedConfig.FLAG`` and
    ``UntrustedConfig.FLAG_HELP`` say, as loopctl's own commands do.

    .. versionadded:: 0.3
    """

    #: The flag that trusts the config: ``--trust-config``.
    FLAG = TRUST_FLAG
    #: Its help text.
    FLAG_HELP = TRUST_HELP

    def __init__(self, where: str, what: str, *, instead: str = "") -> None:
        #: Where the setting is written: ``loopctl.toml: state_dir``.
        self.where = where
        #: The command-line option that gives the value instead (``--state-dir DIR``).
        self.instead = instead
        ask = f"give {instead}, or {TRUST_FLAG}" if instead else f"give {TRUST_FLAG}"
        super().__init__(
            f"{where} {what}, and a read-only command does not trust a project's config file: "
            f"{ask} if you trust this project"
        )


def _from_config_file(origin: str) -> bool:
    """Whether a value of this origin (:attr:`loopctl.config.LoadedConfig.origins`) was set
    by a config file: not a default, a ``LOOPCTL_*`` variable or the command line."""
    return origin not in ("default", "command line") and not origin.startswith("env ")


def config_file_setting(loaded: LoadedConfig, key: str) -> str | None:
    """Where the config file sets the dotted ``key`` (or a key inside it, for a table), as
    messages name it (``loopctl.toml: agents.claude.command``); None when it is not the config
    file that gives it its value."""
    for name, origin in loaded.origins.items():
        inside = name == key or name.startswith((key + ".", key + "["))
        if inside and _from_config_file(origin):
            return loaded.where(name)
    return None


def project_roots(workdir: Path, config_file: Path | None) -> tuple[Path, ...]:
    """The directories a project's paths may lead into: the working directory and the config
    file's, each with its symbolic links resolved."""
    roots = [workdir, *([config_file.parent] if config_file is not None else [])]
    return tuple(dict.fromkeys(Path(os.path.realpath(root)) for root in roots))


def outside(path: Path, roots: Iterable[Path]) -> Path | None:
    """Where ``path`` really leads (symbolic links resolved) when that is inside none of
    ``roots``; None when it stays inside one."""
    real = Path(os.path.realpath(path))
    if any(real == root or root in real.parents for root in roots):
        return None
    return real


__all__ = [
    "TRUST_FLAG",
    "TRUST_HELP",
    "UntrustedConfig",
    "config_file_setting",
    "outside",
    "project_roots",
]
