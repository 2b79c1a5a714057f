"""Finding and reading the config file, and the plugin switches, without the typed layer.

:mod:`loopctl.config` builds the full, typed configuration on top of this module. ``loopctl
plugins list`` needs only which plugins are switched on and must start fast, so it reads them
here: no attrs classes, no cattrs, and tomllib only when there is a file to parse. A test checks
that both paths agree on every input. :class:`RawSettings` does the same for the few settings
a plugin's command reads through :func:`loopctl.load_project`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CONFIG_FILE_NAME = "loopctl.toml"
PYPROJECT_FILE_NAME = "pyproject.toml"
#: Where the settings live inside ``pyproject.toml``.
PYPROJECT_PREFIX = "tool.loopctl"
ENV_PREFIX = "LOOPCTL_"
#: Comma-separated plugin allow-list, a short spelling of ``LOOPCTL_PLUGINS__ENABLE``.
ENV_PLUGINS = "LOOPCTL_PLUGINS"
#: When set (non-empty, not "0"), only plugins named in the allow-list are loaded.
ENV_DISABLE_AUTOLOAD = "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD"
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})


class ConfigError(Exception):
    """A configuration problem the user has to fix; ``str()`` is the full message.

    Each problem is one line naming its source, the key path and what was wrong;
    ``problems`` holds the lines one by one.
    """

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


def display_path(path: Path, cwd: Path) -> str:
    try:
        return str(path.relative_to(cwd))
    except ValueError:
        return str(path)


def read_toml(path: Path, display: str) -> dict[str, Any]:
    """Parse a TOML file; every problem is a ConfigError naming the file (and line, column)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on Python 3.10 only
        import tomli as tomllib

    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{display}: cannot read the file: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display}: not UTF-8 text (bad byte at offset {exc.start})") from None
    try:
        return tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{display}: invalid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{display}: invalid TOML: nested too deeply") from None
    except Exception as exc:  # noqa: BLE001 - no input may crash the CLI
        raise ConfigError(f"{display}: invalid TOML: {exc}") from None


def pyproject_section(document: Mapping[str, Any]) -> tuple[bool, object]:
    """``(found, value)`` of ``[tool.loopctl]`` in a parsed pyproject.toml."""
    tool = document.get("tool")
    if isinstance(tool, Mapping) and "loopctl" in tool:
        return True, tool["loopctl"]
    return False, None


def find_config_file(start: Path) -> Path | None:
    """The config file for a project directory, or None.

    Walks up from ``start`` to the filesystem root, stopping after the directory that holds
    ``.git``. In each directory ``loopctl.toml`` wins, else a ``pyproject.toml`` that has a
    ``[tool.loopctl]`` table. A pyproject.toml that mentions loopctl but is not valid TOML raises
    :class:`ConfigError` (its settings would otherwise be silently skipped).
    """
    here = Path(os.path.abspath(start))
    if here.is_file():
        here = here.parent
    for directory in (here, *here.parents):
        candidate = directory / CONFIG_FILE_NAME
        if candidate.is_file():
            return candidate
        pyproject = directory / PYPROJECT_FILE_NAME
        if pyproject.is_file():
            try:
                mentions = b"loopctl" in pyproject.read_bytes()
            except OSError:
                mentions = False
            if mentions:
                found, _ = pyproject_section(read_toml(pyproject, str(pyproject)))
                if found:
                    return pyproject
        if (directory / ".git").exists():
            break
    return None


def locate(cwd: Path, config_file: Path | None) -> Path | None:
    """The file to read: ``config_file`` (relative to ``cwd``; must exist) or the one found."""
    if config_file is None:
        return find_config_file(cwd)
    path = cwd / config_file
    if not path.exists():
        raise ConfigError(f"{config_file}: config file not found (given with --config)")
    return path


def settings_table(path: Path, cwd: Path) -> tuple[object, str, str]:
    """``(settings, display name, key prefix)`` of a config file: the whole of loopctl.toml, or
    pyproject.toml's ``[tool.loopctl]`` (None when it has none; it may not be a table)."""
    display = display_path(path, cwd)
    document = read_toml(path, display)
    if path.name != PYPROJECT_FILE_NAME:
        return document, display, ""
    found, section = pyproject_section(document)
    return (section if found else None), display, PYPROJECT_PREFIX


class RawSettings:
    """The config file's settings and the ``LOOPCTL_*`` variables as written, not checked: for
    a command that needs a few settings (:class:`loopctl.Project`), which takes a setting's
    default when no source sets it, and the typed configuration (which checks everything)
    when one does. Raises ConfigError for a file that cannot be read or is not TOML, as
    :func:`loopctl.config.load_config` does."""

    def __init__(
        self,
        cwd: Path,
        *,
        config_file: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        cwd = Path(os.path.abspath(cwd))
        self.env = os.environ if env is None else env
        #: The config file, if any.
        self.path = locate(cwd, config_file)
        #: Its settings (anything but a table is reported by the typed configuration).
        self.settings: object = {}
        if self.path is not None:
            settings, _, _ = settings_table(self.path, cwd)
            self.settings = {} if settings is None else settings

    def sets(self, *key: str) -> bool:
        """Whether a source sets the setting ``key`` (``"limits", "max_restarts"``) or a key
        inside it; True as well when the file has something else than a table on the way
        (the typed configuration then says what is wrong)."""
        return self.set_in_file(*key) or self.set_in_env(*key)

    def set_in_file(self, *key: str) -> bool:
        """Whether the config file sets ``key`` (or a key inside it; see :meth:`sets`)."""
        table = self.settings
        for part in key:
            if not isinstance(table, Mapping):
                return True
            if part not in table:
                return False
            table = table[part]
        return True

    def set_in_env(self, *key: str) -> bool:
        """Whether a ``LOOPCTL_*`` variable sets ``key`` (or a key inside it)."""
        # LOOPCTL_PLUGINS is plugins.enable; a variable that names a table sets nothing
        name = ENV_PREFIX + "__".join(part.upper() for part in key)
        if name == f"{ENV_PLUGINS}__ENABLE" and ENV_PLUGINS in self.env:
            return True
        return any(var == name or var.startswith(name + "__") for var in self.env)


def plugin_switches(
    cwd: Path,
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    sources: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``{"enable", "disable", "strict", "autoload"}`` from the file and ``LOOPCTL_*``, the way
    :func:`loopctl.config.load_config` reads them (checked only as far as these keys go).
    ``sources``, when given, gets where ``enable`` and ``disable`` were set, for messages
    (``loopctl.toml: plugins.disable``, ``environment variable LOOPCTL_PLUGINS``)."""
    sources = {} if sources is None else sources
    env = os.environ if env is None else env
    cwd = Path(os.path.abspath(cwd))
    switches: dict[str, Any] = {"enable": None, "disable": [], "strict": False, "autoload": True}
    path = locate(cwd, config_file)
    if path is not None:
        settings, display, prefix = settings_table(path, cwd)
        plugins = settings.get("plugins") if isinstance(settings, Mapping) else None
        if isinstance(plugins, Mapping):
            where = f"{display}: {prefix + '.' if prefix else ''}plugins"
            for key in ("enable", "disable"):
                if key in plugins:
                    switches[key] = _names(plugins[key], f"{where}.{key}")
                    sources[key] = f"{where}.{key}"
            if "strict" in plugins:
                if not isinstance(plugins["strict"], bool):
                    raise ConfigError(f"{where}.strict: expected true or false")
                switches["strict"] = plugins["strict"]
    for name in sorted(env):  # the same order as the typed loader: __ENABLE beats LOOPCTL_PLUGINS
        text = env[name]
        if name == ENV_DISABLE_AUTOLOAD:
            switches["autoload"] = text.strip() in ("", "0")
        elif name == ENV_PLUGINS and text.strip():
            switches["enable"] = split_list(text)
            sources["enable"] = f"environment variable {name}"
        elif name == f"{ENV_PLUGINS}__ENABLE":
            switches["enable"] = split_list(text) if text.strip() else None
            sources["enable"] = f"environment variable {name}"
        elif name == f"{ENV_PLUGINS}__DISABLE":
            switches["disable"] = split_list(text)
            sources["disable"] = f"environment variable {name}"
        elif name == f"{ENV_PLUGINS}__STRICT":
            word = text.strip().lower()
            if word not in TRUE_WORDS | FALSE_WORDS:
                raise ConfigError(f"environment variable {name}: expected true or false")
            switches["strict"] = word in TRUE_WORDS
    return switches


def _names(value: object, where: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of plugin names")
    return list(value)


def split_list(text: str) -> list[str]:
    """A list written in one environment variable or flag: items separated by commas.

    A piece that starts with a version operator continues the item before it, so that a
    requirement with a specifier set (``context-monitor>=0.1,<0.3``) stays one item.
    """
    items: list[str] = []
    for piece in text.split(","):
        part = piece.strip()
        if not part:
            continue
        if items and part[0] in "<>=!~":
            items[-1] += "," + part
        else:
            items.append(part)
    return items
