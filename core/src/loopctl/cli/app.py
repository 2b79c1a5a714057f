"""The ``loopctl`` command. typer and rich are imported only here, and only when a command
needs them; ``loopctl --version`` never gets this far (see :mod:`loopctl.__main__`)."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import typer

from loopctl._version import __version__
from loopctl.model import EXIT_USAGE

app = typer.Typer(
    name="loopctl",
    help="Run a coding agent in a loop until the tests pass, and keep the loop healthy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
plugins_app = typer.Typer(help="Installed plugins: list them, or start a new one.", no_args_is_help=True)
agents_app = typer.Typer(help="Agent adapters: which CLIs loopctl can drive.", no_args_is_help=True)
config_app = typer.Typer(help="The effective configuration and where each value came from.", no_args_is_help=True)
app.add_typer(plugins_app, name="plugins")
app.add_typer(agents_app, name="agents")
app.add_typer(config_app, name="config")

JSON_HELP = "Print machine-readable JSON instead of text."
STATE_DIR_HELP = "The state directory (default: .loopctl in the working directory, or `state_dir`)."


def _version_callback(value: bool) -> None:
    if value:
        print(f"loopctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", callback=_version_callback, is_eager=True, help="Show the version and exit."),
) -> None:
    """Run a coding agent in a loop until the tests pass, and keep the loop healthy."""


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    print(f"loopctl: error: {message}", file=sys.stderr)
    return typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors meant for users into one clear message and exit code 2."""
    from loopctl.config import ConfigError
    from loopctl.engine import LoopError
    from loopctl.pluginhost import PluginError
    from loopctl.runner import UsageError
    from loopctl.state import StateError

    try:
        yield
    except (ConfigError, PluginError, UsageError, LoopError, StateError) as exc:
        raise fail(str(exc)) from None


def emit_json(data: Any) -> None:
    print(json.dumps(data, indent=2, default=str, ensure_ascii=False))


# --- run / resume ------------------------------------------------------------------------------


def _overrides(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _run_loop(prepare_kwargs: dict[str, Any], *, json_output: bool) -> None:
    from loopctl.runner import prepare
    from loopctl.view import choose_mode, make_view

    mode = choose_mode(json_output=json_output)
    holder: dict[str, Callable[[Any], None]] = {}

    def on_event(event: Any) -> None:
        sink = holder.get("view")
        if sink is not None:
            sink(event)

    with user_errors():
        prepared = prepare(on_event=on_event, **prepare_kwargs)
        view = make_view(mode, max_iterations=prepared.engine.max_iterations)
        holder["view"] = view
        try:
            outcome = prepared.engine.run()
        finally:
            view.close()
    if mode != "json":
        report = prepared.engine.state_dir / "report.md"
        print(f"\n{outcome.status}: {outcome.message or outcome.reason}\nreport: {report}")
    raise typer.Exit(outcome.exit_code)


def _read_goal(goal: Optional[str], goal_file: Optional[Path]) -> str:
    if goal is not None and goal_file is not None:
        raise fail("give the goal as an argument or with --goal-file, not both")
    if goal_file is not None:
        try:
            return goal_file.read_text(encoding="utf-8")
        except OSError as exc:
            raise fail(f"cannot read --goal-file {goal_file}: {exc.strerror or exc}") from None
    if goal is None:
        raise fail('no goal: loopctl run "GOAL" --test-cmd "pytest -q" (or --goal-file FILE)')
    return goal


@app.command("run")
def run_command(
    goal: Optional[str] = typer.Argument(None, help="What the agent should achieve, exactly as you would tell it."),
    goal_file: Optional[Path] = typer.Option(None, "--goal-file", help="Read the goal from this file (e.g. an issue's text)."),
    test_cmd: Optional[str] = typer.Option(None, "--test-cmd", help="The command that says whether the goal is met (exit 0 = done)."),
    agent: Optional[str] = typer.Option(None, "--agent", help="Agent adapter name (see `loopctl agents list`)."),
    agent_cmd: Optional[str] = typer.Option(None, "--agent-cmd", help="Run any command as the agent (prompt on stdin, or `{prompt}`)."),
    session: Optional[str] = typer.Option(None, "--session", help="fresh (new agent session each iteration, the default) or resume."),
    max_iterations: Optional[int] = typer.Option(None, "--max-iterations", help="Stop after this many iterations (default 20)."),
    max_restarts: Optional[int] = typer.Option(None, "--max-restarts", help="Session restarts allowed (default 3, at most 10)."),
    agent_timeout: Optional[float] = typer.Option(None, "--agent-timeout", help="Seconds one agent turn may take."),
    wall_clock: Optional[float] = typer.Option(None, "--wall-clock", help="Seconds the whole run may take."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="Token budget for the run."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="Cost budget for the run, in USD."),
    completion_signal: Optional[str] = typer.Option(None, "--completion-signal", help="Also require this line, alone, in the agent's final reply."),
    state_dir: Optional[Path] = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Use this config file instead of searching for one."),
    no_plugins: bool = typer.Option(False, "--no-plugins", help="Load no installed plugins (built-ins only)."),
    fresh_state: bool = typer.Option(False, "--fresh-state", help="Discard an unfinished loop in the state directory and start over."),
    json_output: bool = typer.Option(False, "--json", help="Print every event as a JSON line on stdout."),
) -> None:
    """Run the agent in a loop until the test command passes (or a limit stops it)."""
    text = _read_goal(goal, goal_file)
    overrides = _overrides(
        test_cmd=test_cmd,
        session=session,
        completion_signal=completion_signal,
        **{
            "limits.max_iterations": max_iterations,
            "limits.max_restarts": max_restarts,
            "limits.agent_timeout_s": agent_timeout,
            "limits.wall_clock_s": wall_clock,
            "limits.max_tokens": max_tokens,
            "limits.max_cost_usd": max_cost,
        },
    )
    workdir = Path.cwd()
    if fresh_state:
        _discard_state(workdir, state_dir, config)
    _run_loop(
        dict(
            workdir=workdir,
            goal=text,
            config_file=config,
            overrides=overrides,
            agent=agent,
            agent_cmd=agent_cmd,
            no_plugins=no_plugins,
            state_dir=state_dir,
        ),
        json_output=json_output,
    )


def _discard_state(workdir: Path, state_dir: Optional[Path], config: Optional[Path]) -> None:
    import shutil

    target = _state_dir(workdir, state_dir, config)
    with user_errors():
        from loopctl.state import StateLock

        holder = StateLock(target).holder() if target.exists() else None
        if holder is not None:
            raise fail(f"a loop (pid {holder.get('pid')}) is running in {target}; stop it first")
    shutil.rmtree(target, ignore_errors=True)


def _state_dir(workdir: Path, state_dir: Optional[Path], config: Optional[Path]) -> Path:
    if state_dir is not None:
        return state_dir if state_dir.is_absolute() else workdir / state_dir
    with user_errors():
        from loopctl.config import load_config

        configured = Path(load_config(workdir, config_file=config).config.state_dir)
    return configured if configured.is_absolute() else workdir / configured


@app.command("resume")
def resume_command(
    state_dir: Optional[Path] = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Use this config file instead of searching for one."),
    max_iterations: Optional[int] = typer.Option(None, "--max-iterations", help="Raise (or lower) the iteration limit."),
    no_plugins: bool = typer.Option(False, "--no-plugins", help="Load no installed plugins (built-ins only)."),
    json_output: bool = typer.Option(False, "--json", help="Print every event as a JSON line on stdout."),
) -> None:
    """Continue a loop that was interrupted or whose process died, from its state files."""
    from loopctl.state import read_loop_state

    workdir = Path.cwd()
    target = _state_dir(workdir, state_dir, config)
    state_file = target / "loop-state.md"
    if not state_file.exists():
        raise fail(f"nothing to resume: {state_file} does not exist (start a loop with `loopctl run`)")
    with user_errors():
        previous = read_loop_state(state_file)
    overrides = _overrides(
        test_cmd=previous.test_cmd or None,
        session=previous.session_mode or None,
        **{"limits.max_iterations": max_iterations},
    )
    _run_loop(
        dict(
            workdir=Path(previous.workdir) if previous.workdir else workdir,
            goal=None,
            resume=True,
            config_file=config,
            overrides=overrides,
            agent=previous.agent or None,
            no_plugins=no_plugins,
            state_dir=target,
        ),
        json_output=json_output,
    )


# --- status ------------------------------------------------------------------------------------


@app.command("status")
def status_command(
    state_dir: Optional[Path] = typer.Option(None, "--state-dir", help=STATE_DIR_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Use this config file instead of searching for one."),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Show a loop's state (works from another terminal while it runs)."""
    from loopctl.status import collect_status, render_status

    target = _state_dir(Path.cwd(), state_dir, config)
    with user_errors():
        data = collect_status(target)
    if json_output:
        emit_json(data)
    else:
        print(render_status(data))


# --- demo --------------------------------------------------------------------------------------


@app.command("demo")
def demo_command(
    keep: Optional[Path] = typer.Option(None, "--keep", help="Put the example project here and keep it (default: a temp dir, removed after)."),
    json_output: bool = typer.Option(False, "--json", help="Print every event as a JSON line on stdout."),
) -> None:
    """Run a complete loop offline: a small project with failing tests, fixed by the scripted agent."""
    from loopctl.demo import prepare_demo

    with prepare_demo(keep) as project:
        if not json_output:
            print(f"demo project: {project.workdir}\n")
        previous = Path.cwd()
        os.chdir(project.workdir)
        try:
            _run_loop(
                dict(workdir=project.workdir, goal=project.goal, config_file=project.config_file),
                json_output=json_output,
            )
        finally:
            os.chdir(previous)


# --- config ------------------------------------------------------------------------------------


@config_app.command("show")
def config_show(
    config: Optional[Path] = typer.Option(None, "--config", help="Use this config file instead of searching for one."),
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
) -> None:
    """Print the effective configuration and where each value came from."""
    from loopctl.config import config_to_dict, load_config

    with user_errors():
        loaded = load_config(Path.cwd(), config_file=config)
    values = config_to_dict(loaded)
    if json_output:
        emit_json({"file": str(loaded.file) if loaded.file else None, "values": values, "origins": loaded.origins, "warnings": loaded.warnings})
        return
    print(f"# config file: {loaded.file or '(none found; defaults)'}")
    for key, value in _flatten(values):
        origin = loaded.origins.get(key, "default")
        print(f"{key} = {json.dumps(value, default=str)}    # {origin}")
    for warning in loaded.warnings:
        print(f"# warning: {warning}")


def _flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


# --- plugins -----------------------------------------------------------------------------------


@plugins_app.command("list")
def plugins_list(
    json_output: bool = typer.Option(False, "--json", help=JSON_HELP),
    config: Optional[Path] = typer.Option(None, "--config", help="Use this config file instead of searching for one."),
) -> None:
    """Every installed plugin: enabled, disabled or broken, its version and hooks."""
    from loopctl.cli.fast import plugins_list as fast_list

    raise typer.Exit(fast_list(json_output=json_output, config_file=config))


# --- agents ------------------------------------------------------------------------------------


@agents_app.command("list")
def agents_list(json_output: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """The agent adapters, whether each CLI is on PATH, and its version."""
    from loopctl.config import load_config
    from loopctl.runner import agent_classes, build_host

    with user_errors():
        loaded = load_config(Path.cwd())
        host = build_host(loaded)
    rows = []
    for name, (cls, plugin) in sorted(agent_classes(host).items()):
        adapter = cls(loaded.agent_settings(name, cls.settings_class))
        path = adapter.resolved_executable()
        rows.append(
            {
                "name": name,
                "description": cls.description,
                "plugin": plugin,
                "executable": adapter.settings.command or cls.executable,
                "found": path is not None if (adapter.settings.command or cls.executable) else True,
                "path": path,
                "version": adapter.version() if path else None,
            }
        )
    if json_output:
        emit_json(rows)
        return
    for row in rows:
        where = "built in (no executable)" if row["executable"] is None else (
            f"{row['path']} ({row['version'] or 'version unknown'})" if row["found"] else f"`{row['executable']}` not found on PATH"
        )
        print(f"{row['name']:<10} {where}\n{'':<10} {row['description']}")


def main(argv: list[str] | None = None) -> int:
    """Run the typer app; plugins' commands are added only when a non-built-in command is asked."""
    args = sys.argv[1:] if argv is None else argv
    builtin = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    if args and (args[0] not in builtin or args[0] in ("--help", "-h")):
        _add_plugin_commands()
    try:
        app(args=args, prog_name="loopctl", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def _add_plugin_commands() -> None:
    from loopctl.config import ConfigError, load_config
    from loopctl.runner import build_host

    try:
        host = build_host(load_config(Path.cwd()))
    except (ConfigError, Exception) as exc:  # noqa: BLE001 - help must work with a broken setup
        print(f"loopctl: warning: plugin commands unavailable: {exc}", file=sys.stderr)
        return
    host.hook.register_commands(cli=app)
