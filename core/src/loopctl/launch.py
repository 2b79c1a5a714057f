"""Putting a run together: load config, load plugins, choose the agent, build the engine.

The CLI and the testing kit both start loops through :func:`prepare`; embedding code can too.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from loopctl.agents.base import AgentAdapter
from loopctl.config import LoadedConfig, load_config, withheld_environment
from loopctl.engine import Engine
from loopctl.model import Event
from loopctl.pluginhost import CORE_PLUGIN, PluginHost, PluginSelection
from loopctl.testcmd import missing_program


class UsageError(Exception):
    """The run cannot start as asked; the message says what to change."""


def build_host(loaded: LoadedConfig, *, no_plugins: bool = False) -> PluginHost:
    host = PluginHost(PluginSelection.from_config(loaded, no_plugins=no_plugins))
    host.load()
    for name in loaded.config.plugins.disable:
        if name == CORE_PLUGIN:
            raise UsageError(f"plugin {name!r} is part of loopctl and cannot be disabled")
    host.check_required(loaded.config.required_plugins)
    return host


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
        known = ", ".join(sorted(classes)) or "none"
        raise UsageError(
            f"unknown agent {name!r}; available agents: {known} (see `loopctl agents list`)"
        )
    cls = classes[name][0]
    settings = loaded.agent_settings(name, cls.settings_class)
    if command is not None:
        settings.command = command
    return cls(settings, model_windows=config.models)


def _check_test_command(loaded: LoadedConfig, workdir: Path) -> None:
    """A test command whose program does not exist can never pass: say so now, before the
    agent's first turn, instead of after a few wasted ones."""
    command = loaded.config.test_cmd
    if not command:
        return
    env = withheld_environment(loaded.config.withhold_env)
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


def prepare(
    workdir: Path,
    *,
    goal: str | None,
    resume: bool = False,
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
    LoopError with a message meant for the user."""
    workdir = workdir.resolve()
    loaded = load_config(workdir, config_file=config_file, env=env, overrides=overrides)
    if host is None:
        host = build_host(loaded, no_plugins=no_plugins)
    chosen = select_agent(loaded, host, agent=agent, agent_cmd=agent_cmd)
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
    )
    engine.validate_plugin_configs()
    engine.open()
    return Prepared(loaded=loaded, host=host, engine=engine)
