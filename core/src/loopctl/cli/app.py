"""The ``loopctl`` command. typer and rich are imported only here, and only when a command
needs them; ``loopctl --version`` never gets this far (see :mod:`loopctl.__main__`).

Every error meant for the user is one ``loopctl: error: …`` line (or a few) on stderr and exit
code 2; a finished loop exits with its status's code (:data:`loopctl.model.EXIT_CODES`).
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from loopctl._version import __version__
from loopctl.cli import complete
from loopctl.cli import logs as _logging
from loopctl.cli.fast import USER_ERRORS as USER_ERRORS
from loopctl.cli.fast import emit_json, error, forgiving_streams, shown, warn
from loopctl.cli.fast import user_error_types as _user_error_types
from loopctl.cli.lazy import LazyGroup, lazy_group
from loopctl.guard import guard_the_loop, quiet_after
from loopctl.trust import TRUST_HELP

if TYPE_CHECKING:
    from loopctl.engine import Engine
    from loopctl.loop import LoopOutcome

#: :data:`loopctl.model.EXIT_USAGE`, not imported from there: creating the model's classes costs
#: ~8 ms that ``--help`` and most plugin commands do not otherwise spend (a test checks they agree).
EXIT_USAGE = 2

CONTEXT = {"help_option_names": ["-h", "--help"]}


class Session(str, Enum):
    """``--session``: the choices, listed in the help and completed by the shell."""

    fresh = "fresh"
    resume = "resume"


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, kept as written in the plain help."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


app = typer.Typer(
    name="loopctl",
    help="Run a coding agent in a loop until the tests pass, and keep the loop healthy.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings=CONTEXT,
    cls=LazyGroup,
)
plugins_app = typer.Typer(
    help="Installed plugins and their status.", no_args_is_help=True, cls=LazyGroup
)
agents_app = typer.Typer(
    help="Agent adapters: which CLIs loopctl can drive.", no_args_is_help=True, cls=LazyGroup
)
config_app = typer.Typer(
    help="The effective configuration and where each value came from.",
    no_args_is_help=True,
    cls=LazyGroup,
)
app.add_typer(plugins_app, name="plugins")
app.add_typer(agents_app, name="agents")
app.add_typer(config_app, name="config")
events_app = typer.Typer(
    help="The events loopctl and its plugins write to events.jsonl.",
    no_args_is_help=True,
    cls=LazyGroup,
)
app.add_typer(events_app, name="events")

JSON_HELP = "Print machine-readable JSON instead of text."
EVENTS_JSON_HELP = "Print every event as one JSON object per line on stdout."
PLAIN_HELP = "One plain line per event, also on a terminal (no live panel, no colour)."
STATE_DIR_HELP = "The state directory (default: .loopctl in the working directory, or `state_dir`)."
CONFIG_HELP = "Use this config file instead of searching for one."


def _version_callback(value: bool) -> None:
    if value:
        print(f"loopctl {__version__}")
        raise typer.Exit()


#: -1 with ``-q`` (informational lines hidden), 0 by default, 1 with ``-v``, 2 with ``-vv``.
_verbosity = 0


@app.callback(
    epilog=examples(
        "loopctl demo",
        'loopctl run "make the tests pass" --test-cmd "pytest -q"',
        "loopctl -v status",
    )
)
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_version_callback,
            is_eager=True,
            help="Show the version and exit.",
        ),
    ] = False,
    verbose: Annotated[
        int,
        typer.Option(
            "--verbose",
            "-v",
            count=True,
            show_default=False,
            help="Show debug logging on stderr (-vv: every library's too), and a run's whole "
            "agent stream (all it writes, every tool call and result). Anywhere on the line.",
        ),
    ] = 0,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="Hide informational lines (a run shows the loop's lines only, not the agent's "
            "actions). Anywhere on the line.",
        ),
    ] = False,
) -> None:
    """Run a coding agent in a loop until the tests pass, and keep the loop healthy."""
    global _verbosity
    _verbosity = -1 if quiet and not verbose else verbose
    if _verbosity:
        _logging.configure(_verbosity)


def informational(*lines: str) -> None:
    """Print lines a person may like to see but a script need not: not with ``-q``."""
    if _verbosity >= 0:
        _print_lines(*lines)


# --- errors --------------------------------------------------------------------------------------


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Report ``message`` and return the exit to raise: ``raise fail("…")``."""
    error(message)
    return typer.Exit(code)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn the errors meant for users into one clear message and exit code 2 (or the code
    the error names as its ``exit_code``: 18 for a full disk)."""
    try:
        yield
    except Exception as exc:
        if isinstance(exc, _user_error_types()):
            code = getattr(exc, "exit_code", EXIT_USAGE)
            code = code if isinstance(code, int) else EXIT_USAGE
            status = getattr(exc, "status", None)
            if isinstance(status, str):  # a run that could not start: said as a run's end is
                _print_lines(f"\n{status}: {exc}")
                raise typer.Exit(code) from None
            raise fail(str(exc), code) from None
        raise


# --- run / resume --------------------------------------------------------------------------------


def _overrides(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _setting_overrides(
    *,
    test_cmd: Optional[str],
    session: Optional[Session],
    completion_signal: Optional[str],
    max_iterations: Optional[int],
    max_restarts: Optional[int],
    agent_timeout: Optional[float],
    wall_clock: Optional[float],
    max_tokens: Optional[int],
    max_cost: Optional[float],
    model: Optional[str] = None,
) -> dict[str, Any]:
    """The config overrides of the setting flags ``run`` and ``resume`` share."""
    return _overrides(
        test_cmd=test_cmd,
        session=session.value if session is not None else None,
        completion_signal=completion_signal,
        model=model,
        **{
            "limits.max_iterations": max_iterations,
            "limits.max_restarts": max_restarts,
            "limits.agent_timeout_s": agent_timeout,
            "limits.wall_clock_s": wall_clock,
            "limits.max_tokens": max_tokens,
            "limits.max_cost_usd": max_cost,
        },
    )


def _run_loop(
    prepare_kwargs: dict[str, Any],
    *,
    json_output: bool,
    plain: bool = False,
    summary: Callable[[Engine, LoopOutcome], None] | None = None,
) -> None:
    """Prepare the run, check its state directory, run it with a view, exit with its code."""
    from loopctl.launch import prepare
    from loopctl.view import View, choose_mode, make_view, use_event_lines

    mode = choose_mode(json_output=json_output, plain=plain)
    current: list[View] = []

    def on_event(event: Any) -> None:
        for view in current:
            view(event)

    with user_errors():
        prepared = prepare(on_event=on_event, **prepare_kwargs)
        declared = prepared.host.collect_named("register_event_schemas", "event type")
        use_event_lines(
            {name: spec["line"] for name, (spec, _) in declared.items() if "line" in spec}
        )
        engine = prepared.engine
        if prepared.changed and _verbosity >= 0:
            print(f"loopctl: resume: {_describe_changes(prepared.changed)}", file=sys.stderr)
        view = make_view(mode, max_iterations=engine.max_iterations, detail=_detail())
        current.append(view)
        engine.message_listener = view.on_message
        try:
            with quiet_after(lambda: engine.outcome is not None):  # the exit code is the outcome's
                outcome = engine.run()
        finally:
            view.close()
    if engine.closing and _verbosity >= 0:  # said by no event: said here
        warn(
            f"resume: this loop had already ended ({outcome.status}) when its loopctl process "
            "was killed, before loop-state.md said so; resume recorded that and ran nothing"
        )
    if mode != "json":
        (summary or _print_summary)(engine, outcome)
    raise typer.Exit(outcome.exit_code)


def _detail() -> str:
    """How much of the agent's turns a run shows: the loop's lines only with ``-q``, the
    agent's actions by default, its whole stream with ``-v`` (:mod:`loopctl.actions`)."""
    return "loop" if _verbosity < 0 else "stream" if _verbosity > 0 else "actions"


def _describe_changes(changed: Mapping[str, Mapping[str, Any]]) -> str:
    """``changed limits.max_iterations from 3 to 5, agent_cmd from "a" to "b"``."""
    parts = [
        f"{key} from {json.dumps(change['from'], default=str)} to "
        f"{json.dumps(change['to'], default=str)}"
        for key, change in changed.items()
    ]
    return "changed " + ", ".join(parts)


def _print_summary(engine: Engine, outcome: LoopOutcome) -> None:
    from loopctl.terminal import sanitize_line

    report = engine.state_dir / "report.md"
    why = sanitize_line(shown(outcome.message or outcome.reason))  # the agent's words, maybe
    lines = [f"{chr(10) if _verbosity >= 0 else ''}{outcome.status}: {why}"]
    if engine.report_written:  # not on a full disk
        lines.append(f"report: {report}")
    _print_lines(*lines)


def _print_lines(*lines: str) -> None:
    """Print ``lines`` for a person (a path in them may hold terminal control: sanitised)."""
    from loopctl.terminal import sanitize

    try:
        for line in lines:
            print(sanitize(line), flush=True)
    except BrokenPipeError:  # the reader is gone; the exit code still tells how the run ended
        pass


def _read_goal(goal: Optional[str], goal_file: Optional[Path]) -> str:
    if goal is not None and goal_file is not None:
        raise fail("give the goal as an argument or with --goal-file, not both")
    if goal_file is not None:
        try:
            raw = goal_file.read_bytes()  # bytes: CRLF and a final newline stay as written
        except OSError as exc:
            raise fail(f"cannot read --goal-file {goal_file}: {exc.strerror or exc}") from None
        try:
            text = raw.decode("utf-8").removeprefix("\ufeff")
        except UnicodeDecodeError as exc:
            raise fail(
                f"--goal-file {goal_file} is not UTF-8 text (bad byte at offset {exc.start})"
            ) from None
        if not text.strip():
            raise fail(f"--goal-file {goal_file} is empty; write the goal in it")
        return text
    if goal is None or not goal.strip():
        raise fail('no goal: loopctl run "GOAL" --test-cmd "pytest -q" (or --goal-file FILE)')
    return goal


#: Lets `run` and `resume` take the options plugins add (register_run_options).
PLUGIN_OPTIONS = {"allow_extra_args": True, "ignore_unknown_options": True}


RUN_EXAMPLES = examples(
    'loopctl run "make the tests pass" --test-cmd "pytest -q"',
    'loopctl run --goal-file issue.md --test-cmd "npm test" --agent codex --max-iterations 10',
)


@app.command("run", context_settings=PLUGIN_OPTIONS, epilog=RUN_EXAMPLES)
def run_command(
    ctx: typer.Context,
    goal: Annotated[
        Optional[str],
        typer.Argument(help="What the agent should achieve, exactly as you would tell it."),
    ] = None,
    goal_file: Annotated[
        Optional[Path],
        typer.Option("--goal-file", help="Read the goal from this file (e.g. an issue's text)."),
    ] = None,
    test_cmd: Annotated[
        Optional[str],
        typer.Option(
            "--test-cmd", help="The command that says whether the goal is met (exit 0 = done)."
        ),
    ] = None,
    agent: Annotated[
        Optional[str],
        typer.Option(
            "--agent",
            help="Agent adapter name (see `loopctl agents list`).",
            autocompletion=complete.agent_names,
        ),
    ] = None,
    agent_cmd: Annotated[
        Optional[str],
        typer.Option(
            "--agent-cmd", help="Run any command as the agent (prompt on stdin, or `{prompt}`)."
        ),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option(
            "--model", help="The model the agent uses (a command agent gets $LOOPCTL_MODEL)."
        ),
    ] = None,
    session: Annotated[
        Optional[Session],
        typer.Option(
            "--session", help="fresh (new agent session each iteration, the default) or resume."
        ),
    ] = None,
    max_iterations: Annotated[
        Optional[int],
        typer.Option("--max-iterations", help="Stop after this many iterations (default 20)."),
    ] = None,
    max_restarts: Annotated[
        Optional[int],
        typer.Option("--max-restarts", help="Session restarts allowed (default 3, at most 10)."),
    ] = None,
    agent_timeout: Annotated[
        Optional[float], typer.Option("--agent-timeout", help="Seconds one agent turn may take.")
    ] = None,
    wall_clock: Annotated[
        Optional[float], typer.Option("--wall-clock", help="Seconds the whole run may take.")
    ] = None,
    max_tokens: Annotated[
        Optional[int], typer.Option("--max-tokens", help="Token budget for the run.")
    ] = None,
    max_cost: Annotated[
        Optional[float], typer.Option("--max-cost", help="Cost budget for the run, in USD.")
    ] = None,
    completion_signal: Annotated[
        Optional[str],
        typer.Option(
            "--completion-signal", help="Also require this line, alone, in the agent's final reply."
        ),
    ] = None,
    test_first: Annotated[
        Optional[bool],
        typer.Option(
            "--test-first/--no-test-first",
            help="Run the tests before the first agent turn; if they pass, the run is complete "
            "with no turn (default: test_first, on).",
        ),
    ] = None,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help=STATE_DIR_HELP)] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
    no_plugins: Annotated[
        bool, typer.Option("--no-plugins", help="Load no installed plugins (built-ins only).")
    ] = False,
    fresh_state: Annotated[
        bool,
        typer.Option(
            "--fresh-state",
            help="Discard an unfinished (or damaged) loop in the state directory and start over.",
        ),
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help=EVENTS_JSON_HELP)] = False,
    plain: Annotated[bool, typer.Option("--plain", help=PLAIN_HELP)] = False,
) -> None:
    """Run the agent in a loop until the test command passes (or a limit stops it)."""
    guard_the_loop()
    text = _read_goal(goal, goal_file)
    overrides = _setting_overrides(
        test_cmd=test_cmd,
        session=session,
        completion_signal=completion_signal,
        max_iterations=max_iterations,
        max_restarts=max_restarts,
        agent_timeout=agent_timeout,
        wall_clock=wall_clock,
        max_tokens=max_tokens,
        max_cost=max_cost,
        model=model,
    )
    overrides.update(_overrides(test_first=test_first))
    workdir = Path.cwd()
    overrides.update(_plugin_option_overrides(ctx, workdir, config))
    if fresh_state:
        _discard_state(_state_dir(workdir, state_dir, config))
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
        plain=plain,
    )


def _discard_state(target: Path) -> None:
    """Remove loopctl's own files from ``target`` (nothing else: ``--state-dir .`` must never
    cost a project its files), holding the lock so no loop starts meanwhile."""
    import shutil

    from loopctl import state as st

    if not target.is_dir():
        return
    names = [  # loop-state.md last: without it, a journal left by a kill is set aside, not used
        st.PROGRESS_FILE,
        st.ERROR_SUMMARY_FILE,
        st.EVENTS_FILE,
        st.ITERATIONS_FILE,
        st.CONTEXT_SUMMARY_FILE,
        st.REPORT_MD_FILE,
        st.REPORT_JSON_FILE,
        st.LOOP_STATE_FILE,
    ]
    with user_errors(), st.StateLock(target):
        from loopctl.engine import end_left_running

        for line in end_left_running(target):  # its record is about to go
            warn(line)
        for name in names:
            (target / name).unlink(missing_ok=True)
        for sub in [st.LOGS_DIR, *(f"restart-{n}" for n in st.restart_numbers(target))]:
            shutil.rmtree(target / sub, ignore_errors=True)
        st.remove_stale_temp_files(target)


def _state_dir(workdir: Path, state_dir: Optional[Path], config: Optional[Path]) -> Path:
    from loopctl.cli.fast import state_dir_for

    with user_errors():
        return state_dir_for(workdir, state_dir, config)


def _resume_option(flag: str, what: str, **more: Any) -> Any:
    return typer.Option(flag, help=f"Change {what} (default: as the loop was started).", **more)


RESUME_EXAMPLES = examples("loopctl resume", "loopctl resume --max-iterations 30")


@app.command("resume", context_settings=PLUGIN_OPTIONS, epilog=RESUME_EXAMPLES)
def resume_command(
    ctx: typer.Context,
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help=STATE_DIR_HELP)] = None,
    config: Annotated[
        Optional[Path],
        typer.Option(
            "--config",
            help="Take the settings this config file sets (default: the loop's own, recorded "
            "when it started; the file is not read again).",
        ),
    ] = None,
    test_cmd: Annotated[
        Optional[str], _resume_option("--test-cmd", "the command that says the goal is met")
    ] = None,
    agent: Annotated[
        Optional[str],
        _resume_option("--agent", "the agent adapter", autocompletion=complete.agent_names),
    ] = None,
    agent_cmd: Annotated[
        Optional[str], _resume_option("--agent-cmd", "the command run as the agent")
    ] = None,
    model: Annotated[Optional[str], _resume_option("--model", "the model the agent uses")] = None,
    session: Annotated[
        Optional[Session], _resume_option("--session", "the session mode: fresh or resume")
    ] = None,
    max_iterations: Annotated[
        Optional[int], _resume_option("--max-iterations", "the iteration limit")
    ] = None,
    max_restarts: Annotated[
        Optional[int], _resume_option("--max-restarts", "the session restarts allowed")
    ] = None,
    agent_timeout: Annotated[
        Optional[float], _resume_option("--agent-timeout", "the seconds one agent turn may take")
    ] = None,
    wall_clock: Annotated[
        Optional[float],
        _resume_option("--wall-clock", "the seconds the whole run may take, counting its past"),
    ] = None,
    max_tokens: Annotated[
        Optional[int], _resume_option("--max-tokens", "the token budget of the whole run")
    ] = None,
    max_cost: Annotated[
        Optional[float], _resume_option("--max-cost", "the cost budget of the whole run, in USD")
    ] = None,
    completion_signal: Annotated[
        Optional[str], _resume_option("--completion-signal", "the line that must end the work")
    ] = None,
    no_plugins: Annotated[
        bool, typer.Option("--no-plugins", help="Load no installed plugins (built-ins only).")
    ] = False,
    json_output: Annotated[bool, typer.Option("--json", help=EVENTS_JSON_HELP)] = False,
    plain: Annotated[bool, typer.Option("--plain", help=PLAIN_HELP)] = False,
) -> None:
    """Continue a loop that was interrupted or whose process died, under its own settings.

    It keeps the flags, LOOPCTL_* variables and config file the run was started with.

    A flag given here changes that setting, and resume says what it changed."""
    guard_the_loop()
    import attrs

    from loopctl import state as st

    workdir = Path.cwd()
    target = _state_dir(workdir, state_dir, config)
    state_file = target / st.LOOP_STATE_FILE
    if not state_file.exists():
        raise fail(
            f"nothing to resume: no loop in {target} ({st.LOOP_STATE_FILE} does not exist); "
            "start one with `loopctl run`, or point to its state directory with --state-dir"
        )
    with user_errors():
        previous = st.read_loop_state(state_file)
    loop_workdir = Path(previous.workdir) if previous.workdir else workdir
    if not loop_workdir.is_dir():
        raise fail(
            f"cannot resume: the loop's working directory {loop_workdir} no longer exists "
            f"(recorded in {state_file})"
        )
    config_file = (workdir / config).resolve() if config is not None else None
    overrides = _setting_overrides(
        test_cmd=test_cmd,
        session=session,
        completion_signal=completion_signal,
        max_iterations=max_iterations,
        max_restarts=max_restarts,
        agent_timeout=agent_timeout,
        wall_clock=wall_clock,
        max_tokens=max_tokens,
        max_cost=max_cost,
        model=model,
    )
    recorded = previous.settings or st.RunSettings(agent=previous.agent)
    if recorded.config is None:  # loopctl 0.1 recorded only these
        warn(
            f"this loop was started by loopctl {previous.loopctl_version or '0.1'}, which "
            "recorded only its test command, session, iteration limit and agent; its other "
            "settings are read from the config file and the environment as they are now"
        )
        kept = _overrides(
            test_cmd=previous.test_cmd or None,
            session=previous.session_mode or None,
            **{"limits.max_iterations": previous.max_iterations or None},
        )
        overrides = {**kept, **overrides}
        if config_file is None and recorded.config_file:
            config_file = Path(recorded.config_file)
    elif previous.max_iterations:  # the loop's limit now (a plugin may have lowered it)
        limits = {**recorded.config.get("limits", {}), "max_iterations": previous.max_iterations}
        recorded = attrs.evolve(recorded, config={**recorded.config, "limits": limits})
    overrides.update(_plugin_option_overrides(ctx, loop_workdir, config_file, recorded))
    environment = dict(os.environ)
    if recorded.config is not None:
        _restore_environment(recorded.env)
    _run_loop(
        dict(
            workdir=loop_workdir,
            goal=None,
            resume=True,
            recorded=recorded,
            recorded_in=str(state_file),
            config_file=config_file,
            overrides=overrides,
            env=environment,
            agent=agent,
            agent_cmd=agent_cmd,
            no_plugins=no_plugins,
            state_dir=target,
        ),
        json_output=json_output,
        plain=plain,
    )


def _restore_environment(recorded: Mapping[str, str]) -> None:
    """Put back the ``LOOPCTL_*`` variables the run had that are read as they are (plugins
    read some from the environment), and take away those it did not have."""
    from loopctl.launch import recordable_env

    for name in recordable_env(os.environ):
        if name not in recorded:
            del os.environ[name]
    os.environ.update(recorded)


def plugin_run_options(
    workdir: Path, config: Optional[Path], recorded: Any = None
) -> dict[str, Any]:
    """The options enabled plugins add to run/resume, by flag (register_run_options); for
    resume, the plugins of the ``recorded`` settings (a :class:`loopctl.state.RunSettings`)."""
    from loopctl import RunOption
    from loopctl.config import load_config
    from loopctl.pluginhost import PluginError, build_host

    with user_errors():
        if recorded is not None and recorded.config is not None:
            loaded = load_config(
                workdir, config_file=config, env=recorded.env, recorded=recorded.config
            )
        else:
            loaded = load_config(workdir, config_file=config)
        host = build_host(loaded, no_plugins=recorded is not None and recorded.no_plugins)
    options: dict[str, tuple[RunOption, str]] = {}
    for impl in host.hook.register_run_options.get_hookimpls():
        offered: Any = impl.function() or ()
        for option in offered:
            if not isinstance(option, RunOption):
                continue
            if option.flag in options and options[option.flag][1] != impl.plugin_name:
                with user_errors():
                    raise PluginError(
                        f"option {option.flag} is added by both {options[option.flag][1]!r} "
                        f"and {impl.plugin_name!r}; disable one of them"
                    )
            options[option.flag] = (option, impl.plugin_name)
    return {flag: option for flag, (option, _) in options.items()}


def _plugin_option_overrides(
    ctx: typer.Context, workdir: Path, config: Optional[Path], recorded: Any = None
) -> dict[str, Any]:
    """Config overrides from the plugin options among the command's extra arguments
    (``--flag VALUE`` or ``--flag=VALUE``); anything else is a usage error."""
    args: list[str] = ctx.args
    if not args:
        return {}
    own = [name for param in ctx.command.params for name in param.opts]
    options = plugin_run_options(workdir, config, recorded)
    overrides: dict[str, Any] = {}
    rest = list(args)
    while rest:
        word = rest.pop(0)
        flag, has_value, value = word.partition("=")
        option = options.get(flag)
        if option is None:
            raise fail(_no_such_option(flag, options, own))
        if not has_value:
            if not rest:
                raise fail(f"option {flag} needs a value ({option.metavar})")
            value = rest.pop(0)
        if option.choices is not None and value not in option.choices:
            raise fail(f"{flag}: {value!r} is not one of {', '.join(option.choices)}")
        overrides[option.key] = value
    return overrides


def _no_such_option(flag: str, plugins: Mapping[str, Any], own: Sequence[str]) -> str:
    """``no such option: FLAG``, with the command's ``own`` or a plugin's option it misspells."""
    from loopctl.suggest import close_match

    meant = close_match(flag, [*own, *plugins])
    if meant is not None:
        return f"no such option: {flag} (did you mean {meant}?)"
    known = ", ".join(sorted(plugins)) or "none"
    return f"no such option: {flag} (options from plugins: {known}; see --help)"


def _describe_plugin_options() -> None:
    """Add the plugins' run/resume options to those commands' --help."""
    try:
        options = plugin_run_options(Path.cwd(), None)
    except typer.Exit:
        return
    if not options:
        return
    lines = ["Options added by plugins:"] + [
        f"  {flag} {option.metavar}  {option.help}"
        + (f" ({', '.join(option.choices)})" if option.choices else "")
        for flag, option in sorted(options.items())
    ]
    for command in app.registered_commands:
        if command.name in ("run", "resume"):
            own = RUN_EXAMPLES if command.name == "run" else RESUME_EXAMPLES
            command.epilog = "\n\n".join([own, *lines])


@events_app.command("schema", epilog=examples("loopctl events schema > events.schema.json"))
def events_schema(
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
) -> None:
    """Print the JSON Schema of an events.jsonl line (core events and the enabled plugins')."""
    from loopctl.config import load_config
    from loopctl.events import event_schema
    from loopctl.pluginhost import build_host

    with user_errors():
        host = build_host(load_config(Path.cwd(), config_file=config))
        declared = host.collect_named("register_event_schemas", "event type")
    emit_json(event_schema({name: spec for name, (spec, _plugin) in declared.items()}))


# --- status --------------------------------------------------------------------------------------


@app.command("status", epilog=examples("loopctl status", "loopctl status --json"))
def status_command(
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help=STATE_DIR_HELP)] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    trust_config: Annotated[bool, typer.Option("--trust-config", help=TRUST_HELP)] = False,
) -> None:
    """Show a loop's state (works from another terminal while it runs). A state directory the
    project's config file puts outside the project is followed only with --trust-config."""
    from loopctl.cli.fast import status

    raise typer.Exit(
        status(
            state_dir=state_dir, config=config, json_output=json_output, trust_config=trust_config
        )
    )


# --- report --------------------------------------------------------------------------------------


@app.command(
    "report",
    epilog=examples(
        "loopctl report", "loopctl report --path", "loopctl report --json | jq .status"
    ),
)
def report_command(
    state_dir: Annotated[Optional[Path], typer.Option("--state-dir", help=STATE_DIR_HELP)] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
    path: Annotated[
        bool, typer.Option("--path", help="Print the report's path (report.md, or report.json).")
    ] = False,
    json_output: Annotated[
        bool, typer.Option("--json", help="The report as JSON (report.json), for scripts.")
    ] = False,
    pager: Annotated[
        bool,
        typer.Option(
            "--pager/--no-pager", help="On a terminal, show it through $PAGER (less) or not."
        ),
    ] = True,
    trust_config: Annotated[bool, typer.Option("--trust-config", help=TRUST_HELP)] = False,
) -> None:
    """Show the last run's report (report.md, written when a run ends), through a pager on a
    terminal. A state directory the project's config file puts outside the project is
    followed only with --trust-config."""
    from loopctl.cli.fast import report

    raise typer.Exit(
        report(
            state_dir=state_dir,
            config=config,
            json_output=json_output,
            path_only=path,
            pager=pager,
            trust_config=trust_config,
        )
    )


# --- demo ----------------------------------------------------------------------------------------


def _is_previous_demo(directory: Path) -> bool:
    try:
        config = (directory / "loopctl.toml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return config.startswith("# Written by `loopctl demo`")


@app.command("demo", epilog=examples("loopctl demo", "loopctl demo --dir ./loopctl-demo"))
def demo_command(
    directory: Annotated[
        Optional[Path],
        typer.Option(
            "--dir",
            "--keep",
            metavar="DIR",
            help="Put the example project in this new (or empty) directory "
            "(default: a new temporary directory). It is kept either way.",
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help=EVENTS_JSON_HELP)] = False,
    plain: Annotated[bool, typer.Option("--plain", help=PLAIN_HELP)] = False,
) -> None:
    """Run a complete loop offline: a small project with failing tests, fixed by the scripted
    agent. The project and its report are kept; nothing outside it is written."""
    guard_the_loop()
    from loopctl.demo import demo_environment, prepare_demo

    if directory is not None:
        if directory.exists() and not directory.is_dir():
            raise fail(f"--dir {directory}: it is a file; give a new or empty directory")
        if directory.is_dir() and any(directory.iterdir()) and not _is_previous_demo(directory):
            raise fail(
                f"--dir {directory}: the directory is not empty; give a new or empty directory "
                "(the demo would overwrite files in it)"
            )

    def summary(engine: Engine, outcome: LoopOutcome) -> None:
        _print_summary(engine, outcome)
        _print_lines(f"the demo project is kept in {engine.workdir}")

    try:
        project = prepare_demo(directory)
    except OSError as exc:
        raise fail(f"cannot create the demo project: {exc}") from None
    if not json_output:
        informational(f"demo project: {project.workdir}", "")
    with ExitStack() as stack:
        stack.enter_context(demo_environment(project))
        stack.callback(os.chdir, Path.cwd())
        os.chdir(project.workdir)
        _run_loop(
            dict(workdir=project.workdir, goal=project.goal, config_file=project.config_file),
            json_output=json_output,
            plain=plain,
            summary=summary,
        )


# --- completion ----------------------------------------------------------------------------------

#: The variable a shell's completion function sets when it asks loopctl for completions.
COMPLETE_VAR = "_LOOPCTL_COMPLETE"


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"


@app.command(
    "completion",
    epilog=examples(
        'eval "$(loopctl completion bash)"    # in ~/.bashrc',
        "loopctl completion zsh > ~/.zfunc/_loopctl    # with fpath+=~/.zfunc in ~/.zshrc",
        "loopctl completion fish > ~/.config/fish/completions/loopctl.fish",
    ),
)
def completion_command(
    shell: Annotated[Shell, typer.Argument(help="The shell: bash, zsh, fish or powershell.")],
) -> None:
    """Print the shell completion script for loopctl (commands, options, choices)."""
    from typer.completion import get_completion_script  # type: ignore[attr-defined]  # typer imports it there for its own --show-completion

    print(get_completion_script(prog_name="loopctl", complete_var=COMPLETE_VAR, shell=shell.value))


# --- config --------------------------------------------------------------------------------------


@config_app.command("show", epilog=examples("loopctl config show", "loopctl config show --json"))
def config_show(
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Print the effective configuration and where each value came from (secrets hidden).
    The plugins' sections are checked as `loopctl run` checks them."""
    from loopctl.config import config_to_dict, hide_secrets, load_config
    from loopctl.launch import check_agent_name
    from loopctl.pluginhost import build_host, validate_plugin_sections

    with user_errors():
        loaded = load_config(Path.cwd(), config_file=config)
        host = build_host(loaded)
        validate_plugin_sections(loaded, host)
        check_agent_name(loaded, host)
    values = hide_secrets(config_to_dict(loaded))
    if json_output:
        emit_json(
            {
                "file": str(loaded.file) if loaded.file else None,
                "values": values,
                "origins": loaded.origins,
                "warnings": loaded.warnings,
            }
        )
        return
    from loopctl.terminal import sanitize

    # the file's path, a key, or the path in an origin may hold terminal control: sanitised
    print(sanitize(f"# config file: {loaded.file or '(none found; defaults)'}"))
    for key, value in _flatten(values):
        origin = loaded.origins.get(key, "default")
        print(sanitize(f"{key} = {json.dumps(value, default=str)}    # {origin}"))
    for warning in loaded.warnings:
        warn(warning)


def _flatten(data: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict) and data:
        for key, value in data.items():
            yield from _flatten(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, data


# --- plugins -------------------------------------------------------------------------------------


@plugins_app.command("list", epilog=examples("loopctl plugins list", "loopctl plugins list --json"))
def plugins_list(
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
) -> None:
    """Every installed plugin: enabled, disabled or broken, its version and hooks."""
    from loopctl.cli.fast import plugins_list as fast_list

    raise typer.Exit(fast_list(json_output=json_output, config_file=config))


@plugins_app.command(
    "new",
    epilog=examples("loopctl plugins new flaky-db", "loopctl plugins new my-rules --classifier"),
)
def plugins_new(
    name: Annotated[str, typer.Argument(help="The plugin's name, e.g. flaky-db.")],
    classifier: Annotated[
        bool,
        typer.Option("--classifier", help="A custom failure classifier for failure-classifier."),
    ] = False,
    directory: Annotated[
        Path, typer.Option("--dir", help="Where to create loopctl-NAME/.", file_okay=False)
    ] = Path("."),
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Write a new plugin distribution, loopctl-NAME/, that installs and passes its tests."""
    from loopctl.scaffold import write_plugin

    with user_errors():
        written = write_plugin(directory, name, classifier=classifier)
    root = written[0]
    if json_output:
        emit_json({"path": str(root), "files": [str(p.relative_to(root)) for p in written[1:]]})
        return
    from loopctl.terminal import sanitize

    print(sanitize(f"Created {root}/"))  # a path given on the command line: sanitised
    for path in written[1:]:
        print(f"  {path.relative_to(root)}")
    shown = root.as_posix() if root.is_absolute() else f"./{root.as_posix()}"
    print(sanitize(f"Next: pip install -e '{shown}[test]' && pytest {shown}"))


@plugins_app.command("install")
def plugins_install(
    names: Annotated[
        list[str],
        typer.Argument(
            help="Plugins: a name (context-errors = loopctl-context-errors), a requirement "
            "(goal-guard>=0.2), a path or a URL.",
            metavar="NAME...",
        ),
    ],
    upgrade: Annotated[bool, typer.Option("--upgrade", "-U", help="Upgrade if installed.")] = False,
    pre: Annotated[bool, typer.Option("--pre", help="Allow pre-releases.")] = False,
    find_links: Annotated[
        Optional[list[str]],
        typer.Option("--find-links", help="Look for wheels here too (repeatable).", metavar="DIR"),
    ] = None,
    no_index: Annotated[
        bool, typer.Option("--no-index", help="Do not use the package index.")
    ] = False,
    index_url: Annotated[
        Optional[str], typer.Option("--index-url", help="Another package index.", metavar="URL")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Install plugins into loopctl's own environment (with its pip, or uv), whichever tool
    made it.

    Example: loopctl plugins install context-errors goal-guard
    """
    from loopctl.cli import install as inst

    try:
        result = inst.install(
            names, json_output=json_output, upgrade=upgrade, pre=pre,
            find_links=find_links, no_index=no_index, index_url=index_url,
        )  # fmt: skip
    except inst.InstallError as exc:
        raise _install_failed(exc, json_output=json_output) from None
    _show_change(result, "install", json_output=json_output)


@plugins_app.command("uninstall")
def plugins_uninstall(
    names: Annotated[
        list[str],
        typer.Argument(
            help="Plugin or distribution names.",
            metavar="NAME...",
            autocompletion=complete.installed_plugin_names,
        ),
    ],
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
) -> None:
    """Uninstall plugins from loopctl's own environment.

    Example: loopctl plugins uninstall context-errors
    """
    from loopctl.cli import install as inst

    try:
        result = inst.uninstall(names, json_output=json_output)
    except inst.InstallError as exc:
        raise _install_failed(exc, json_output=json_output) from None
    _show_change(result, "uninstall", json_output=json_output)


def _install_failed(exc: Any, *, json_output: bool) -> typer.Exit:
    """A failed ``plugins install|uninstall``: its JSON (with the error) too with --json."""
    if json_output:
        emit_json(exc.result)
    return fail(str(exc), exc.exit_code)


def _show_change(result: dict[str, Any], action: str, *, json_output: bool) -> None:
    """What ``plugins install|uninstall`` did: JSON, or a line per plugin."""
    from loopctl.cli import install as inst

    if json_output:
        emit_json(result)
    else:
        print("\n".join(inst.describe(result, action)))


# --- agents --------------------------------------------------------------------------------------


@agents_app.command("list", epilog=examples("loopctl agents list", "loopctl agents list --json"))
def agents_list(
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
    trust_config: Annotated[bool, typer.Option("--trust-config", help=TRUST_HELP)] = False,
) -> None:
    """The agent adapters, whether each CLI is on PATH, and its version. A CLI the project's
    config file names is run for its version only with --trust-config."""
    from loopctl.config import load_config
    from loopctl.launch import agent_classes
    from loopctl.pluginhost import build_host

    with user_errors():
        loaded = load_config(Path.cwd(), config_file=config)
        host = build_host(loaded)
        classes = agent_classes(host)
        rows = [
            _agent_row(name, cls, plugin, loaded, trust_config=trust_config)
            for name, (cls, plugin) in sorted(classes.items())
        ]
    if json_output:
        emit_json(rows)
        return
    width = max((len(row["name"]) for row in rows), default=8)
    for row in rows:
        if row.get("error"):
            where = f"unusable: {row['error']}"
        elif row["found"] and row["not_run"]:
            where = f"{row['path']} (version not asked: {row['not_run']})"
        elif row["found"]:
            where = f"{row['path']} ({row['version'] or 'version unknown'})"
        elif row["executable"]:
            where = f"`{row['executable']}` not found on PATH"
        else:
            where = "no command configured"
        print(shown(f"{row['name']:<{width}}  {where}\n{'':<{width}}  {row['description']}"))
    if any(row["found"] and row["not_run"] for row in rows):
        print(
            "(a read-only command runs no program a project's config file names: "
            "`loopctl agents list --trust-config` asks those CLIs for their version)"
        )


def _agent_row(
    name: str, cls: Any, plugin: str, loaded: Any, *, trust_config: bool
) -> dict[str, Any]:
    """One adapter as ``agents list`` shows it; a plugin's broken adapter becomes an error row.
    Its CLI is run for its version unless the config file names it (``[agents.NAME]
    command``) and is not trusted (``not_run`` then says where)."""
    from loopctl.config.errors import dotted_path
    from loopctl.trust import config_file_setting

    row: dict[str, Any] = {
        "name": name,
        "description": getattr(cls, "description", ""),
        "plugin": plugin,
        "executable": None,
        "found": False,
        "path": None,
        "version": None,
        "not_run": None,
    }
    try:
        adapter = cls(loaded.agent_settings(name, cls.settings_class))
        row["executable"] = adapter.settings.command or cls.executable
        row["path"] = adapter.resolved_executable()
        row["found"] = row["path"] is not None
        key = dotted_path(("agents", name, "command"))
        where = None if trust_config else config_file_setting(loaded, key)
        row["not_run"] = None if where is None else f"named by {where}"
        row["version"] = adapter.version() if row["found"] and not row["not_run"] else None
    except Exception as exc:  # noqa: BLE001 - list the others; say what is wrong with this one
        from loopctl.config import ConfigError

        if not isinstance(exc, ConfigError):
            exc = RuntimeError(f"{type(exc).__name__}: {exc}")
        row["error"] = str(exc)
    return row


@agents_app.command(
    "parse",
    epilog=examples("loopctl agents parse claude .loopctl/logs/iteration-0001.agent.jsonl"),
)
def agents_parse(
    agent: Annotated[
        str,
        typer.Argument(
            help="The adapter whose output FILE holds.", autocompletion=complete.agent_names
        ),
    ],
    file: Annotated[
        Path, typer.Argument(help="A transcript, e.g. .loopctl/logs/iteration-0001.agent.jsonl.")
    ],
    exit_code: Annotated[
        int, typer.Option("--exit-code", help="The CLI's exit code, when it carries meaning.")
    ] = 0,
    stderr_file: Annotated[
        Optional[Path], typer.Option("--stderr", help="A file with the CLI's stderr.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    config: Annotated[Optional[Path], typer.Option("--config", help=CONFIG_HELP)] = None,
) -> None:
    """Show what loopctl understood of an agent's output: usage and context fill per request,
    tool calls, and the outcome ("why did loopctl restart my agent?")."""
    from loopctl.agents.transcript import parse_transcript, render_summary, summary_to_json
    from loopctl.config import load_config
    from loopctl.launch import agent_classes
    from loopctl.pluginhost import build_host

    with user_errors():
        loaded = load_config(Path.cwd(), config_file=config)
        classes = agent_classes(build_host(loaded))
    if agent not in classes:
        raise fail(f"unknown agent {agent!r}; available agents: {', '.join(sorted(classes))}")
    cls = classes[agent][0]
    try:
        stderr_text = stderr_file.read_text(errors="replace") if stderr_file else ""
        with user_errors():
            adapter = cls(
                loaded.agent_settings(agent, cls.settings_class),
                model_windows=loaded.config.models,
            )
        summary = parse_transcript(adapter, file, exit_code=exit_code, stderr=stderr_text)
    except OSError as exc:
        raise fail(f"cannot read {exc.filename or file}: {exc.strerror or exc}") from None
    if json_output:
        from loopctl.redaction import redact_data

        emit_json(redact_data(summary_to_json(summary)))
    else:
        print(shown(render_summary(summary)), end="")


# --- entry point ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Run the command line; plugins' commands are added only when a non-built-in command
    (or the top-level help) is asked for, and only the command that runs is built
    (:mod:`loopctl.cli.lazy`). Help is typer's rich help in a terminal, plain text otherwise."""
    args = _logging.global_options_first(list(sys.argv[1:] if argv is None else argv))
    forgiving_streams()
    root = _invocation_app()
    builtin = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    first = next((a for a in args if not a.startswith("-")), None)
    if not {"--version", "-V"} & set(args) and (first is None or first not in builtin):
        _add_plugin_commands(root)
    if first in ("run", "resume") and {"--help", "-h"} & set(args):
        _describe_plugin_options()
    command = lazy_group(root)
    try:
        return _invoke(command, args)
    finally:
        _logging.reset()
        pluginhost = sys.modules.get("loopctl.pluginhost")
        if pluginhost is not None:  # offered by _add_plugin_commands for this command only
            pluginhost.offer_host(None)


def _invoke(command: Any, args: list[str]) -> int:
    if os.environ.get(COMPLETE_VAR):  # a shell asks for completions: typer's answer them
        from typer.completion import completion_init  # type: ignore[attr-defined]  # typer imports it there for its own completion

        completion_init()
    try:
        result = command.main(args=args, prog_name="loopctl", standalone_mode=False)
    except typer.Abort as exc:
        interrupted = isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt)
        error("interrupted" if interrupted else "aborted")
        return 130 if interrupted else 1
    except _CLICK_EXCEPTION as exc:
        return _usage_error(exc)
    if isinstance(result, int) and not isinstance(result, bool):
        return result
    return 0


#: click's base exception (typer vendors click in recent versions, so it is found, not imported).
_CLICK_EXCEPTION: type[Exception] = next(
    (c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"), typer.BadParameter
)


def _usage_error(exc: Exception) -> int:
    """Show a click usage error our way: one ``loopctl: error:`` line and where to find help."""
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError":  # `loopctl`, `loopctl plugins`: show the help
        # the help text (typer's rich help prints itself and leaves the message empty)
        text = _message(exc)
        if text.strip():
            print(text)
        return 0
    message = " ".join(_message(exc).split())  # one line: click lists choices one a line
    command = getattr(ctx, "command_path", None) or "loopctl"
    error(f"{message} (see `{command} --help`)")
    code = getattr(exc, "exit_code", EXIT_USAGE)
    return code if isinstance(code, int) else EXIT_USAGE


def _message(exc: Exception) -> str:
    format_message = getattr(exc, "format_message", None)
    return str(format_message() if callable(format_message) else exc)


def _invocation_app() -> typer.Typer:
    """This run's root app: the built-in commands (plugins add theirs to this copy, not to
    :data:`app`), with rich help only when stdout is a terminal (rich costs a plain
    ``--help`` 50-100 ms, and its boxes are noise in a pipe)."""
    root = copy.copy(app)
    root.registered_commands = list(app.registered_commands)
    root.registered_groups = list(app.registered_groups)
    if not _is_terminal(sys.stdout):
        root.rich_markup_mode = None
    return root


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False


def _add_plugin_commands(cli: typer.Typer) -> None:
    from loopctl.cli.fast import command_host, take_host

    try:
        host = take_host() or command_host(Path.cwd())
    except Exception as exc:  # noqa: BLE001 - help must work with a broken setup
        warn(f"plugin commands unavailable: {exc}")
        return
    host.hook.register_commands(cli=cli)
    from loopctl.cli.fast import cli_commands
    from loopctl.cli.typed import add_cli_command

    try:
        commands = cli_commands(host)
    except Exception as exc:  # noqa: BLE001 - help must work with a broken plugin
        warn(f"plugin commands unavailable: {exc}")
        commands = []
    for command in commands:
        add_cli_command(cli, command)
    from loopctl.pluginhost import offer_host

    offer_host(host)  # a plugin command that loads the project takes it: no second load
