"""loopctl's typed configuration, read from layered sources with origin tracking.

Sources, weakest first: built-in defaults, a config file (``loopctl.toml``, or ``[tool.loopctl]``
in ``pyproject.toml``), ``LOOPCTL_*`` environment variables, then overrides from the command line.
Every layer is checked on its own before the layers are merged, so each problem is reported with
the source it came from and the key path as the user spelled it there::

    pyproject.toml: tool.loopctl.limits: unknown key 'max_iteration' (did you mean 'max_iterations'?)

Structuring goes through one cattrs converter that is strict on purpose: TOML gives real types,
so a string is never silently turned into an integer or a boolean (``"false"`` is not true).
Text from the environment or the command line is converted by the target field's type first.

Plugins and agent adapters own free-form sections (``[plugins.NAME]``, ``[agents.NAME]``) that
are kept raw here and structured later into their own classes with :func:`structure`
(see :meth:`LoadedConfig.plugin_section` and :meth:`LoadedConfig.agent_settings`).

One module per concern; import the names from here (each is loaded on first use):

- :mod:`~loopctl.configfile` (outside this package, so ``loopctl plugins list`` can read the
  plugin switches without importing attrs and cattrs): finding and parsing the file,
  :class:`ConfigError`
- :mod:`~loopctl.config.errors`: key paths, :class:`InvalidFields`, how problems are worded
- :mod:`~loopctl.config.schema`: the attrs classes and their range checks
- :mod:`~loopctl.config.convert`: the strict cattrs converter
- :mod:`~loopctl.config.structuring`: :func:`structure`, cattrs errors as key-path problems
- :mod:`~loopctl.config.keys`: which key paths exist and of what type; parsing dotted paths
- :mod:`~loopctl.config.text`: text from the environment or command line, converted by type
- :mod:`~loopctl.config.sources`: the file, environment and command-line layers
- :mod:`~loopctl.config.load`: :func:`load_config`, :class:`LoadedConfig`, origins
- :mod:`~loopctl.config.secrets`: :func:`hide_secrets`
- :mod:`~loopctl.config.docs`: :func:`describe_fields` for the generated reference
- :mod:`~loopctl.config.models`: model context windows
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl.configfile import ENV_PREFIX, ConfigError, find_config_file

if TYPE_CHECKING:
    from loopctl.config.docs import FieldDoc, describe_fields
    from loopctl.config.errors import InvalidFields, KeyPath, dotted_path
    from loopctl.config.load import LoadedConfig, config_to_dict, load_config
    from loopctl.config.models import (
        DEFAULT_MODEL_WINDOWS,
        ONE_MILLION_SUFFIX,
        context_window_for,
        model_windows,
    )
    from loopctl.config.schema import (
        MAX_RESTARTS_CAP,
        PLUGINS_SETTING_KEYS,
        Limits,
        LoopctlConfig,
        PluginsConfig,
        PromptConfig,
        Stuck,
    )
    from loopctl.config.secrets import HIDDEN, hide_secrets
    from loopctl.config.sources import KNOWN_ENV_VARS
    from loopctl.config.structuring import structure

#: Where each name lives, imported on first use: a module that needs only the error types
#: (a plugin's config class raising :class:`InvalidFields`) or the model windows does not load
#: cattrs and the schema with them.
_LAZY = {
    "FieldDoc": "docs",
    "describe_fields": "docs",
    "InvalidFields": "errors",
    "KeyPath": "errors",
    "dotted_path": "errors",
    "LoadedConfig": "load",
    "config_to_dict": "load",
    "load_config": "load",
    "DEFAULT_MODEL_WINDOWS": "models",
    "ONE_MILLION_SUFFIX": "models",
    "context_window_for": "models",
    "model_windows": "models",
    "MAX_RESTARTS_CAP": "schema",
    "PLUGINS_SETTING_KEYS": "schema",
    "Limits": "schema",
    "LoopctlConfig": "schema",
    "PluginsConfig": "schema",
    "PromptConfig": "schema",
    "Stuck": "schema",
    "HIDDEN": "secrets",
    "hide_secrets": "secrets",
    "KNOWN_ENV_VARS": "sources",
    "structure": "structuring",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'loopctl.config' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"loopctl.config.{module_name}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_MODEL_WINDOWS",
    "ENV_PREFIX",
    "HIDDEN",
    "KNOWN_ENV_VARS",
    "MAX_RESTARTS_CAP",
    "ONE_MILLION_SUFFIX",
    "PLUGINS_SETTING_KEYS",
    "ConfigError",
    "FieldDoc",
    "InvalidFields",
    "KeyPath",
    "Limits",
    "LoadedConfig",
    "LoopctlConfig",
    "PluginsConfig",
    "PromptConfig",
    "Stuck",
    "config_to_dict",
    "context_window_for",
    "describe_fields",
    "dotted_path",
    "find_config_file",
    "hide_secrets",
    "load_config",
    "model_windows",
    "structure",
]
