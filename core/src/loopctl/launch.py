"""Putting a run together: load config, load plugins, choose the agent, build the engine.

The CLI and the testing kit both start loops through :func:`prepare`; embedding code can too.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from loopctl.agents.base import AgentAdapter
from loopctl.config import (
    HIDDEN,
    LoadedConfig,
    config_to_dict,
    hide_secrets,
    load_config,
)
from loopctl.configfile import ENV_PLUGINS, ENV_PREFIX, ConfigError
from loopctl.engine import Engine
from loopctl.model import Event
from loopctl.pluginhost import PluginHost, build_host
from loopctl.state import RunSettings
from loopctl.suggest import did_you_mean
from loopctl.testcmd import missing_program
from loopctl.withhold import child_environment


class UsageError(Exception):
    """The run cannot start as asked; the message says what to change."""


def agent_classes(host: PluginHost) -> dict[str, tuple[type[AgentAdapter], str]]:
    """Every registered adapter: name -> (class, plugin that registered it)."""
    return host.collect_named("register_agents", "agent adapter")


def select_agent(
    loaded: LoadedConfig,
    host: PluginHost,
    *,
    agent: str | None = None,
    agent_cmd: str | None = None,
) -> AgentAdapter:
    """The adapter for this run: ``--agent``/``--agent-cmd``, else config, else Claude Code if
    it is on PATH; otherwise a UsageError that says how to choose."""
    return _select_agent(loaded, host, agent=agent, agent_cmd=agent_cmd)[0]


def _select_agent(
    loaded: LoadedConfig, host: PluginHost, *, agent: str | None, agent_cmd: str | None
) -> tuple[AgentAdapter, str | None]:
    """:func:`select_agent`, and the command that replaced the adapter's own (the one to
    record: given again with the adapter's name, it selects the same agent)."""
    config = loaded.config
    classes = agent_classes(host)
    name = agent
    command = agent_cmd
    if name is None and command is None:
        name, command = config.agent, config.agent_cmd
    if name is None and command is not None:
        name = "command"
    if name is None:
        if "claude" in classes and shutil.which("claude"):
            name = "claude"
        else:
            raise UsageError(
                "no agent chosen and Claude Code (`claude`) is not on PATH. Choose one with "
                '--agent NAME (see `loopctl agents list`), --agent-cmd "COMMAND", or '
                '`agent = "NAME"` in loopctl.toml'
            )
    if name not in classes:
        if agent is None and agent_cmd is None:  # the configuration's
            check_agent_name(loaded, host)
        raise UsageError(
            f"unknown agent {name!r}{did_you_mean(name, classes)}; available agents: "
            f"{', '.join(sorted(classes)) or 'none'} (see `loopctl agents list`)"
        )
    cls = classes[name][0]
    settings = loaded.agent_settings(name, cls.settings_class)
    if command is not None:
        settings.command = command
    if config.model is not None:  # `--model`, LOOPCTL_MODEL or `model`: whichever agent runs
        settings.model = config.model
    return cls(settings, model_windows=config.models), command


def check_agent_name(loaded: LoadedConfig, host: PluginHost) -> None:
    """A UsageError naming where it was set when the configuration's ``agent`` names no
    adapter ``host`` has (``loopctl config show`` checks it, as a run does)."""
    name = loaded.config.agent
    classes = agent_classes(host)
    if name is not None and name not in classes:
        raise UsageError(
            f"{loaded.where('agent')}: no agent is named {name!r}{did_you_mean(name, classes)}; "
            f"the agents are: {', '.join(sorted(classes)) or 'none'} (see `loopctl agents list`)"
        )


def _check_test_command(loaded: LoadedConfig, workdir: Path) -> None:
    """A test command whose program does not exist can never pass: say so now, before the
    agent's first turn, instead of after a few wasted ones."""
    command = loaded.config.test_cmd
    if not command:
        return
    env = child_environment(withhold=loaded.config.withhold_env)
    program = missing_program(command, cwd=workdir, env=env)
    if program is not None:
        origin = loaded.origins.get("test_cmd", "")
        where = "--test-cmd" if origin in ("command line", "") else f"test_cmd ({origin})"
        raise UsageError(
            f"the test command cannot run: {program!r} is not found (no such program on PATH, "
            f"shell builtin, or file in {workdir}); check {where}: {command!r}"
        )


@attrs.define
class Prepared:
    loaded: LoadedConfig
    host: PluginHost
    engine: Engine
    #: What ``resume`` was told to change: setting -> ``{"from": …, "to": …}``.
    changed: dict[str, dict[str, Any]] = attrs.Factory(dict)


def prepare(
    workdir: Path,
    *,
    goal: str | None,
    resume: bool = False,
    recorded: RunSettings | None = None,
    recorded_in: str = "recorded settings",
    config_file: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    agent: str | None = None,
    agent_cmd: str | None = None,
    no_plugins: bool = False,
    state_dir: Path | None = None,
    on_event: Callable[[Event], None] | None = None,
    host: PluginHost | None = None,
    supervision: Any = None,
) -> Prepared:
    """Everything up to the first iteration; raises ConfigError, PluginError, UsageError or
    LoopError with a message meant for the user.

    The settings the run starts with (:class:`~loopctl.state.RunSettings`) go into the first
    write of ``loop-state.md``. To resume under the settings a run recorded, pass them as
    ``recorded`` (read from ``recorded_in``): then the config file is read only when
    ``config_file`` is given, ``env`` counts only for the variables that are not settings,
    ``agent``/``agent_cmd`` replace the recorded choice only when given, and whatever the
    arguments change is in :attr:`Prepared.changed`."""
    workdir = workdir.resolve()
    environment = os.environ if env is None else env
    warnings: list[str] = []
    if recorded is not None and recorded.config is not None:
        now = _current_config(workdir, recorded, environment)
        loaded = load_config(
            workdir,
            config_file=config_file,
            env=recorded.env,
            overrides=overrides,
            recorded=_with_hidden_values(recorded.config, now, warnings),
            recorded_in=recorded_in,
        )
        if now is not None and config_file is None:  # --config FILE: its keys are taken
            warnings += _ignored_differences(now, loaded, recorded, overrides or {})
        warnings += _env_differences(recorded.env, recordable_env(environment))
    else:
        loaded = load_config(workdir, config_file=config_file, env=env, overrides=overrides)
    if recorded is not None:
        no_plugins = no_plugins or recorded.no_plugins
        if agent is None and agent_cmd is None:
            agent, agent_cmd = recorded.agent or None, recorded.agent_cmd
    loaded.warnings.extend(warnings)
    if host is None:
        host = build_host(loaded, no_plugins=no_plugins)
    chosen, command = _select_agent(loaded, host, agent=agent, agent_cmd=agent_cmd)
    settings = RunSettings(
        config=hide_secrets(config_to_dict(loaded)),
        config_file=str(loaded.file) if loaded.file else None,
        agent=chosen.name,
        agent_cmd=command,
        no_plugins=no_plugins,
        env=recordable_env(environment if recorded is None else {**recorded.env}),
        origins=_origins(loaded, recorded, recorded_in),
    )
    if recorded is not None and recorded.config is not None:  # --config FILE was a change
        settings.config_file = recorded.config_file
    changed = changed_settings(recorded, settings) if recorded is not None else {}
    if not resume and not loaded.config.test_cmd:
        raise UsageError(
            'no test command: pass --test-cmd "pytest -q" or set `test_cmd` in loopctl.toml '
            "(the loop ends when it passes)"
        )
    _check_test_command(loaded, workdir)
    target = state_dir if state_dir is not None else Path(loaded.config.state_dir)
    if not target.is_absolute():
        target = workdir / target
    warnings = host.check_unknown_hooks()
    loaded.warnings.extend(warnings)
    engine = Engine(
        loaded=loaded,
        host=host,
        agent=chosen,
        workdir=workdir,
        state_dir=target,
        goal=goal,
        resume=resume,
        on_event=on_event,
        supervision=supervision,
        settings=settings,
        settings_changed=changed,
    )
    engine.validate_plugin_configs()
    engine.open()
    return Prepared(loaded=loaded, host=host, engine=engine, changed=changed)


# --- the settings a run records, and resume restores ---------------------------------------------

#: Set by loopctl for the processes it starts: never a run's setting.
_CHILD_ENV = frozenset({"LOOPCTL_ITERATION", "LOOPCTL_SESSION_ID", "LOOPCTL_RUN_ID"})
#: Settings that only feed the choice of agent, which is recorded (and reported) on its own.
_AGENT_KEYS = frozenset({"agent", "agent_cmd"})


def recordable_env(env: Mapping[str, str]) -> dict[str, str]:
    """The ``LOOPCTL_*`` variables of ``env`` a run records: those read as they are (not
    settings, which the recorded configuration holds already), without secret-looking ones."""
    from loopctl.config.sources import ENV_KEYS

    found = {
        name: value
        for name, value in env.items()
        if name.startswith(ENV_PREFIX)
        and name not in ENV_KEYS
        and name != ENV_PLUGINS
        and name not in _CHILD_ENV
    }
    return {name: value for name, value in hide_secrets(found).items() if value == found[name]}


def flat_settings(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A configuration (``loopctl.toml`` layout) as ``{"limits.wall_clock_s": 8.0, …}``."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            flat.update(flat_settings(value, path))
        else:
            flat[path] = value
    return flat


def changed_settings(before: RunSettings, after: RunSettings) -> dict[str, dict[str, Any]]:
    """Each setting that differs, as ``{"from": …, "to": …}`` (secrets stay hidden): the
    configuration's keys by their dotted path, and ``agent``, ``agent_cmd``, ``no_plugins``
    for the choice of agent and plugins. A ``before`` without a recorded configuration (a
    loop of loopctl 0.1) compares only the agent and plugins."""
    old = {} if before.config is None else flat_settings(before.config)
    new = {} if before.config is None else flat_settings(after.config or {})
    changed = {
        key: {"from": old.get(key), "to": new.get(key)}
        for key in sorted(set(old) | set(new))
        if key not in _AGENT_KEYS and old.get(key) != new.get(key)
    }
    for key in ("agent", "agent_cmd", "no_plugins"):
        if getattr(before, key) != getattr(after, key):
            changed[key] = {"from": getattr(before, key), "to": getattr(after, key)}
    return changed


def _current_config(
    workdir: Path, recorded: RunSettings, env: Mapping[str, str]
) -> LoadedConfig | None:
    """The configuration ``run`` would read now (from the recorded file if it is still there),
    to compare with the recorded one and read its secrets again; None when it cannot be read
    (resume does not need it)."""
    config_file = Path(recorded.config_file) if recorded.config_file else None
    if config_file is not None and not config_file.is_file():
        config_file = None
    try:
        return load_config(workdir, config_file=config_file, env=env)
    except ConfigError:
        return None


def _with_hidden_values(
    config: Mapping[str, Any], now: LoadedConfig | None, warnings: list[str]
) -> dict[str, Any]:
    """The recorded configuration with the secrets it does not hold read again from ``now``."""
    current = flat_settings(config_to_dict(now)) if now is not None else {}
    lost: list[str] = []

    def fill(data: Mapping[str, Any], prefix: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in data.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if isinstance(value, Mapping):
                out[key] = fill(value, path)
            elif value == HIDDEN and current.get(path) is not None:
                out[key] = current[path]
            elif value == HIDDEN:
                lost.append(path)
            else:
                out[key] = value
        return out

    filled = fill(config, "")
    if lost:
        warnings.append(
            f"the run's {', '.join(lost)} (secret, so not recorded) cannot be read again from "
            "the config file or the environment; resuming without"
        )
    return filled


def _origins(
    loaded: LoadedConfig, recorded: RunSettings | None, recorded_in: str
) -> dict[str, str]:
    """Where each setting that is not a default came from; a recorded one keeps its first
    origin."""
    before = recorded.origins if recorded is not None else {}
    origins: dict[str, str] = {}
    for key, origin in loaded.origins.items():
        if origin == recorded_in:
            origin = before.get(key, origin)
        if origin != "default":
            origins[key] = origin
    return origins


def _from_the_outside(origin: str | None) -> bool:
    """Set by a config file or an ``LOOPCTL_*`` variable (not a default, not a flag)."""
    return origin not in (None, "default", "command line")


def _ignored_differences(
    now: LoadedConfig, loaded: LoadedConfig, recorded: RunSettings, overrides: Mapping[str, Any]
) -> list[str]:
    """A warning naming each setting the config file or the environment set, then or now, that
    they now set differently from the loop's: resume keeps the loop's (a flag or ``--config``
    changes it)."""
    current = flat_settings(hide_secrets(config_to_dict(now)))
    kept = flat_settings(hide_secrets(config_to_dict(loaded)))
    differences = [
        f"{key} stays {json.dumps(kept.get(key))} "
        f"({now.origins.get(key, 'default')} now: {json.dumps(current.get(key))})"
        for key in sorted(set(current) | set(kept))
        if key not in overrides
        and kept.get(key) != current.get(key)
        and (
            _from_the_outside(now.origins.get(key)) or _from_the_outside(recorded.origins.get(key))
        )
    ]
    if not differences:
        return []
    return [
        "resume keeps the loop's settings, not what the config file and the environment say "
        f"now: {'; '.join(differences)} (change one with its flag, or with --config FILE)"
    ]


def _env_differences(recorded: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """A warning naming the ``LOOPCTL_*`` variables (those read as they are) that differ from
    the loop's: resume puts the loop's back."""
    differences = [
        f"{name}={json.dumps(recorded.get(name))} (now {json.dumps(current.get(name))})"
        for name in sorted(set(recorded) | set(current))
        if recorded.get(name) != current.get(name)
    ]
    if not differences:
        return []
    return [f"resume restores the loop's environment: {'; '.join(differences)}"]
