"""The configuration sources as layers: the file, ``LOOPCTL_*`` variables, command-line overrides;
each checked on its own so a problem names the source that set it."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from loopctl.config.errors import KeyPath, Mismatch, dotted_path, format_problem, show
from loopctl.config.keys import known_paths, parse_key_path, schema_leaves, set_path, type_at
from loopctl.config.schema import LoopctlConfig
from loopctl.config.structuring import try_structure
from loopctl.config.text import from_text, needs_text_conversion
from loopctl.configfile import (
    ENV_DISABLE_AUTOLOAD,
    ENV_PLUGINS,
    ENV_PREFIX,
    PYPROJECT_PREFIX,
    ConfigError,
    settings_table,
)

#: The ``LOOPCTL_*`` variables that are no setting but are read or set by loopctl, its plugins or
#: its tools: never warned about. Any other name is a misspelt setting when close to one (an
#: error, as an unknown key in the config file is), else a warning: another tool may use the
#: prefix too. A test checks that every name the repository's code reads is a setting or here.
KNOWN_ENV_VARS = {
    # set by loopctl for the agent and the test command (a loop run inside a loop sees them)
    "LOOPCTL_ITERATION": "the loop's iteration",
    "LOOPCTL_SESSION_ID": "the agent session",
    "LOOPCTL_RUN_ID": "the run",
    "LOOPCTL_SUPERVISOR": "the supervising loopctl",
    # read by plugins
    "LOOPCTL_FAILURE_MEMORY": "context-errors: the failure memory's location",
    "LOOPCTL_FLEET": "fleet: the fleet's name",
    "LOOPCTL_FLEET_TEMPORAL": "fleet: the temporal CLI",
    "LOOPCTL_FLEET_TASK": "fleet: set for a task's loop",
    "LOOPCTL_FLEET_WORKER": "fleet: set for a task's loop",
    # read by loopctl's own tests, benchmarks and CI
    "LOOPCTL_TEST_POSTGRES_URL": "tests: the Postgres server",
    "LOOPCTL_REQUIRE_POSTGRES": "tests: fail without Postgres",
    "LOOPCTL_REQUIRE_UV": "tests: fail without uv",
    "LOOPCTL_WHEELHOUSE": "tests: built wheels",
    "LOOPCTL_SECRETS_REPORT": "tests: the secrets report",
    "LOOPCTL_E2E_REQUIRE": "end-to-end tests: fail without the CLIs",
    "LOOPCTL_E2E_NPM_PREFIX": "end-to-end tests: the agent CLIs",
    "LOOPCTL_E2E_AIDER": "end-to-end tests: aider",
    "LOOPCTL_E2E_CACHE": "end-to-end tests: their cache",
    "LOOPCTL_FAKE_OPENAI_KEY": "tests: the scripted Responses API server's key for Codex",
    "LOOPCTL_KILL_EVERY_WRITE": "tests: the kill campaign after every write",
    "LOOPCTL_LOAD_RUNS": "tests: how many times the load session runs",
    "LOOPCTL_BENCH_QUICK": "benchmarks",
    "LOOPCTL_BENCH_N": "benchmarks",
    "LOOPCTL_BENCH_LONG": "benchmarks",
    "LOOPCTL_BENCH_TASK": "benchmarks",
    "LOOPCTL_BENCH_ROUNDS": "benchmarks",
    "LOOPCTL_BENCH_RESUMES": "benchmarks",
    "LOOPCTL_BENCH_FLEET_TASKS": "benchmarks",
    "LOOPCTL_BENCH_FLEET_ROUNDS": "benchmarks",
    "LOOPCTL_BENCH_FLEET_AGENT_S": "benchmarks",
}

#: How close a name must be to a setting's variable to be taken for a misspelling of it (an
#: error); less close, the setting is only suggested in the warning.
TYPO_CUTOFF = 0.8


def _env_name(path: KeyPath) -> str:
    return ENV_PREFIX + "__".join(str(part).upper() for part in path)


#: ``LOOPCTL_LIMITS__MAX_ITERATIONS`` → (("limits", "max_iterations"), int), for every setting.
ENV_KEYS: dict[str, tuple[KeyPath, Any]] = {
    _env_name(path): (path, tp) for path, tp in schema_leaves()
}


@attrs.define
class Layer:
    """One source's raw data, in loopctl.toml spelling, with what names it in messages."""

    data: dict[str, Any]
    #: The origin string recorded for every key this layer sets.
    origin: str
    source: str
    prefix: str = ""
    #: Per key path, a more precise origin and source (one environment variable each).
    origin_by_path: dict[KeyPath, str] = attrs.Factory(dict)
    #: Values that could not be read at all (text of the wrong form), as message lines.
    problems: list[str] = attrs.Factory(list)


def file_layer(path: Path, cwd: Path, warnings: list[str]) -> Layer:
    """The config file's settings: all of loopctl.toml, or pyproject.toml's ``[tool.loopctl]``."""
    settings, display, prefix = settings_table(path, cwd)
    if settings is None:
        warnings.append(f"{display} has no [{PYPROJECT_PREFIX}] table; using the defaults")
        settings = {}
    if not isinstance(settings, Mapping):
        raise ConfigError(f"{display}: {prefix}: expected a table, got {show(settings)}")
    return Layer(dict(settings), origin=display, source=display, prefix=prefix)


def env_layer(env: Mapping[str, str], warnings: list[str]) -> tuple[Layer, bool]:
    """``(layer, autoload)`` from the ``LOOPCTL_*`` variables in ``env``; a variable that names
    no setting adds a warning."""
    layer = Layer({}, origin="environment", source="environment")
    autoload = True
    for name in sorted(env):  # LOOPCTL_PLUGINS sorts first: LOOPCTL_PLUGINS__ENABLE wins
        text = env[name]
        if not name.startswith(ENV_PREFIX) or name in KNOWN_ENV_VARS:
            continue
        if name == ENV_DISABLE_AUTOLOAD:
            autoload = text.strip() in ("", "0")
            continue
        if name == ENV_PLUGINS and not text.strip():
            continue  # set but empty: the same as unset
        target: tuple[KeyPath, Any] | None = (
            (("plugins", "enable"), list[str]) if name == ENV_PLUGINS else ENV_KEYS.get(name)
        )
        if target is None:
            message, misspelt = _stray_env_message(name)
            (layer.problems if misspelt else warnings).append(message)
            continue
        path, tp = target
        try:
            value = from_text(text, tp)
        except Mismatch as exc:
            layer.problems.append(
                f"environment variable {name}: {dotted_path(path)}: {exc.message}"
            )
            continue
        set_path(layer.data, [str(part) for part in path], value)
        layer.origin_by_path[path] = f"env {name}"
    return layer, autoload


def _stray_env_message(name: str) -> tuple[str, bool]:
    """What to say of a ``LOOPCTL_*`` variable that names no setting, and whether it is a
    misspelt setting (an error) rather than maybe another tool's variable (a warning)."""
    parts = name[len(ENV_PREFIX) :].lower().split("__")
    if all(parts) and type_at(parts) is not None:
        return (
            f"environment variable {name}: {dotted_path(parts)} cannot be set from the "
            "environment (only top-level settings and the keys of [limits], [stuck], [prompt] "
            "and [plugins] can); ignored"
        ), False
    meant = _meant_variable(name, TYPO_CUTOFF)
    if meant is not None:
        return (
            f"environment variable {name} names no loopctl setting (did you mean {meant}?); "
            "rename it, or unset it"
        ), True
    close = _meant_variable(name, 0.6)
    hint = f" (did you mean {close}?)" if close else ""
    return f"environment variable {name} does not name a loopctl setting; ignored{hint}", False


def _meant_variable(name: str, cutoff: float) -> str | None:
    """The setting's variable ``name`` most likely misspells, compared without the common
    ``LOOPCTL_`` (it makes any two names look alike); a table's key also by itself
    (``LOOPCTL_MAX_ITERATIONS`` for ``LOOPCTL_LIMITS__MAX_ITERATIONS``)."""
    variables = [*ENV_KEYS, f"{ENV_PLUGINS}__ENABLE", ENV_PLUGINS]
    by_spelling: dict[str, str] = {}
    for variable in variables:
        rest = variable[len(ENV_PREFIX) :]
        by_spelling.setdefault(rest, variable)
        by_spelling.setdefault(rest.rpartition("__")[2], variable)
    close = difflib.get_close_matches(name[len(ENV_PREFIX) :], by_spelling, n=1, cutoff=cutoff)
    return by_spelling[close[0]] if close else None


def override_layer(overrides: Mapping[str, Any]) -> Layer:
    """The settings given on the command line: dotted key path → value (text is converted by the
    setting's type)."""
    layer = Layer({}, origin="command line", source="command line")
    for raw_path, value in overrides.items():
        parts = parse_key_path(raw_path) if isinstance(raw_path, str) else None
        tp = type_at(parts) if parts else None
        if parts is None or tp is None:
            close = difflib.get_close_matches(str(raw_path), known_paths(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            layer.problems.append(f"command line: unknown key {str(raw_path)!r}{hint}")
            continue
        if isinstance(value, str) and needs_text_conversion(tp):
            try:
                value = from_text(value, tp)
            except Mismatch as exc:
                layer.problems.append(f"command line: {dotted_path(parts)}: {exc.message}")
                continue
        elif isinstance(value, Mapping):
            value = copy.deepcopy(dict(value))
        set_path(layer.data, parts, value)
    return layer


def check_layer(layer: Layer) -> list[str]:
    """The layer's own problems, then those of structuring it alone, each reported against the
    source that set the key."""
    _, problems = try_structure(layer.data, LoopctlConfig)
    lines = list(layer.problems)
    for problem in problems:
        source = layer.source
        subject = problem.subject or problem.path
        for path, origin in layer.origin_by_path.items():
            if subject[: len(path)] == path or path[: len(subject)] == subject:
                source = "environment variable " + origin.removeprefix("env ")
                break
        lines.append(format_problem(source, layer.prefix, problem))
    return lines
