"""Loading: the layers merged weakest first, with the origin of every value."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import attrs

from loopctl.config.convert import converter
from loopctl.config.errors import (
    KeyPath,
    Mismatch,
    Problem,
    dotted_path,
    format_problem,
    join_path,
)
from loopctl.config.keys import schema_leaves
from loopctl.config.schema import LoopctlConfig
from loopctl.config.sources import Layer, check_layer, env_layer, file_layer, override_layer
from loopctl.config.structuring import structure, try_structure
from loopctl.config.text import from_text, needs_text_conversion
from loopctl.configfile import PYPROJECT_FILE_NAME, PYPROJECT_PREFIX, ConfigError, locate
from loopctl.debuglog import debug

T = TypeVar("T")


def _leaves(data: Mapping[Any, Any]) -> Iterator[tuple[KeyPath, Any]]:
    """Every leaf value of nested tables (an empty table counts as a leaf). Iterative, so deep
    input cannot overflow the stack."""
    stack: list[tuple[KeyPath, Mapping[Any, Any]]] = [((), data)]
    while stack:
        prefix, table = stack.pop()
        for key, value in table.items():
            path = (*prefix, key)
            if isinstance(value, Mapping) and value:
                stack.append((path, value))
            else:
                yield path, value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _merge(dict(below), value)
        else:
            merged[key] = value
    return merged


def _record_origins(origins: dict[str, str], layer: Layer) -> None:
    for path, _ in _leaves(layer.data):
        key = dotted_path(path)
        for existing in list(origins):
            # a key set here replaces whatever an earlier layer had above or below it
            if existing.startswith((key + ".", key + "[")) or key.startswith(
                (existing + ".", existing + "[")
            ):
                del origins[existing]
        origin = layer.origin
        for env_path, env_origin in layer.origin_by_path.items():
            if path[: len(env_path)] == env_path:
                origin = env_origin
                break
        origins[key] = origin


@attrs.define
class LoadedConfig:
    """The effective configuration and where each of its values came from."""

    config: LoopctlConfig
    #: The config file that was read, if any.
    file: Path | None = None
    #: Dotted key path (loopctl.toml spelling) → ``default``, the file's path (relative to
    #: ``cwd`` when inside it, as in messages),
    #: ``env LOOPCTL_X`` or ``command line``; one entry per leaf key.
    origins: dict[str, str] = attrs.Factory(dict)
    #: False when LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set: only allow-listed plugins load.
    autoload: bool = True
    #: Things worth telling the user that are not errors (stray LOOPCTL_ variables …).
    warnings: list[str] = attrs.Factory(list)

    def plugin_section(self, name: str, cls: type[T]) -> T:
        """Structure ``[plugins.NAME]`` (empty when absent) into the plugin's class ``cls``.

        Raises :class:`ConfigError` naming ``plugins.NAME.KEY`` as the source spells it.
        """
        return self._section(("plugins", name), self.config.plugins.sections.get(name, {}), cls)

    def agent_settings(self, name: str, cls: type[T]) -> T:
        """Structure ``[agents.NAME]`` (empty when absent) into the adapter's settings class."""
        return self._section(("agents", name), self.config.agents.get(name, {}), cls)

    def where(self, key: str) -> str:
        """Where the dotted ``key`` was set, for a message: ``loopctl.toml: plugins.disable``,
        ``environment variable LOOPCTL_PLUGINS``, ``command line: limits.max_iterations``."""
        source, prefix = self._source_of(self.origins.get(key))
        if source.startswith("environment variable "):
            return source
        return f"{source}: {join_path(prefix, key)}"

    def _section(self, where: KeyPath, data: Mapping[str, Any], cls: type[T]) -> T:
        data = self._typed_command_line_values(where, data, cls)
        result, problems = try_structure(data, cls)
        if result is not None and not problems:
            return result
        raise ConfigError([self._format(where, problem) for problem in problems])

    def _typed_command_line_values(
        self, where: KeyPath, data: Mapping[str, Any], cls: type[Any]
    ) -> Mapping[str, Any]:
        """A plugin's keys set on the command line (``register_run_options``) arrive as text:
        convert them by the field's type, as the core's own flags are converted."""
        if not attrs.has(cls):
            return data
        try:
            attrs.resolve_types(cls)  # plugins' classes may use string annotations
        except Exception:  # noqa: BLE001 - unresolvable: leave the values to structuring
            return data
        converted = dict(data)
        for field in attrs.fields(cls):
            value = data.get(field.name)
            origin = self.origins.get(dotted_path((*where, field.name)))
            if (
                isinstance(value, str)
                and origin == "command line"
                and needs_text_conversion(field.type)
            ):
                try:
                    converted[field.name] = from_text(value, field.type)
                except Mismatch:
                    pass  # structuring reports it, naming the key
        return converted

    def _format(self, where: KeyPath, problem: Problem) -> str:
        """Name the problem after the source that set the offending key (its origin)."""
        subject = dotted_path((*where, *(problem.subject or problem.path)))
        origin = self.origins.get(subject)
        if origin is None:
            # an unset key inside a section: blame whoever set the section's other keys
            near = [
                value
                for key, value in self.origins.items()
                if key.startswith((subject + ".", subject + "["))
                or subject.startswith((key + ".", key + "["))
            ]
            origin = near[0] if near else None
        source, prefix = self._source_of(origin)
        return format_problem(source, prefix, attrs.evolve(problem, path=(*where, *problem.path)))

    def _source_of(self, origin: str | None) -> tuple[str, str]:
        """``(source, key prefix)`` for messages about a key with this origin."""
        if origin is not None and origin.startswith("env "):
            return "environment variable " + origin.removeprefix("env "), ""
        if origin == "command line":
            return origin, ""
        if self.file is None:  # settings recorded by a run, or handed over whole
            return (origin if origin not in (None, "default") else "configuration"), ""
        prefix = PYPROJECT_PREFIX if self.file.name == PYPROJECT_FILE_NAME else ""
        if origin is not None and origin != "default":
            return origin, prefix
        file_origins = {
            value
            for value in self.origins.values()
            if value not in ("default", "command line") and not value.startswith("env ")
        }
        return (next(iter(file_origins)) if len(file_origins) == 1 else str(self.file)), prefix


def load_config(
    cwd: Path,
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    recorded: Mapping[str, Any] | None = None,
    recorded_in: str = "recorded settings",
) -> LoadedConfig:
    """Read the configuration for a run in ``cwd``: defaults < file < environment < overrides.

    ``config_file`` (relative to ``cwd``) replaces discovery and must exist. ``env`` defaults to
    ``os.environ``. ``overrides`` maps dotted key paths (``limits.max_iterations``) to values
    from the command line; strings are converted by the target field's type. Raises
    :class:`ConfigError` listing every problem found in any source.

    ``recorded`` is the configuration a run recorded (:func:`config_to_dict`'s layout; null
    values mean unset), for ``loopctl resume``: it takes the place of the defaults and of the
    discovered file, so only a ``config_file`` given explicitly, ``env`` and ``overrides`` change
    it. Its keys have the origin ``recorded_in`` (where it was read, named in messages).
    """
    cwd = Path(os.path.abspath(cwd))
    env = os.environ if env is None else env
    try:
        if recorded is not None:
            return _load_recorded(cwd, recorded, recorded_in, config_file, env, overrides or {})
        return _load(cwd, config_file, env, overrides or {})
    except RecursionError:
        raise ConfigError("configuration: nested too deeply") from None


def _load_recorded(
    cwd: Path,
    recorded: Mapping[str, Any],
    recorded_in: str,
    config_file: Path | None,
    env: Mapping[str, str],
    overrides: Mapping[str, Any],
) -> LoadedConfig:
    base = Layer(_without_nulls(recorded), origin=recorded_in, source=recorded_in)
    return _load(cwd, config_file, env, overrides, base=base, discover=False)


def _without_nulls(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        str(key): _without_nulls(value) if isinstance(value, Mapping) else value
        for key, value in data.items()
        if value is not None
    }


def _load(
    cwd: Path,
    config_file: Path | None,
    env: Mapping[str, str],
    overrides: Mapping[str, Any],
    *,
    base: Layer | None = None,
    discover: bool = True,
) -> LoadedConfig:
    warnings: list[str] = []
    path = locate(cwd, config_file) if discover or config_file is not None else None
    debug("loopctl.config", "config file: %s", path or "none (defaults)")
    layers = [] if base is None else [base]
    layers += [] if path is None else [file_layer(path, cwd, warnings)]
    env_settings, autoload = env_layer(env, warnings)
    layers += [env_settings, override_layer(overrides)]
    problems = [line for layer in layers for line in check_layer(layer)]
    if problems:
        raise ConfigError(problems)
    merged: dict[str, Any] = {}
    origins = {dotted_path(key_path): "default" for key_path, _ in schema_leaves()}
    for layer in layers:
        merged = _merge(merged, layer.data)
        _record_origins(origins, layer)
    config = structure(merged, LoopctlConfig, source="configuration", prefix="")
    return LoadedConfig(
        config=config, file=path, origins=origins, autoload=autoload, warnings=warnings
    )


def config_to_dict(loaded: LoadedConfig) -> dict[str, Any]:
    """The effective configuration as plain data, laid out like ``loopctl.toml`` (plugin
    sections sit directly under ``plugins``); unset values are None."""
    data: dict[str, Any] = converter.unstructure(loaded.config)
    return data
