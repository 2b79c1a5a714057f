"""Commands that must start fast, written without typer or rich, the plugin host that offers
the plugins' commands, and the output helpers every command shares.

``loopctl plugins list`` and ``loopctl status`` are typed often and read by scripts; importing
typer alone costs about 40 ms on a small machine, a third of what ``status`` costs with it, so
their plain forms are dispatched here straight from :mod:`loopctl.__main__` (anything else,
``--help`` or a mistake, goes to the typer app, which calls the same functions). ``plugins
list`` reads only the plugin switches of the config (:func:`loopctl.configfile.plugin_switches`),
not the whole typed configuration; :func:`command_host` does the same for the plugins' commands.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loopctl.clicommand import CliCommand
    from loopctl.pluginhost import PluginHost

#: Exit code for usage errors (:data:`loopctl.model.EXIT_USAGE`).
EXIT_USAGE = 2

#: The built-in commands and groups of :mod:`loopctl.cli.app` (a test checks they agree): a
#: plugin's command never takes one of these names.
BUILTIN_COMMANDS = frozenset(
    {
        "agents",
        "completion",
        "config",
        "demo",
        "events",
        "plugins",
        "report",
        "resume",
        "run",
        "status",
    }
)

# --- output --------------------------------------------------------------------------------------


def forgiving_streams() -> None:
    """Never crash on a character the terminal's encoding cannot show (arrows, names)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            try:
                stream.reconfigure(errors="replace")
            except (ValueError, OSError):
                pass


def shown(text: str) -> str:
    """``text`` fit for the terminal: secrets redacted, terminal control removed."""
    from loopctl.redaction import redact
    from loopctl.terminal import sanitize

    return sanitize(redact(text))


def error(message: str) -> None:
    """Print ``loopctl: error: …`` on stderr, every line of a multi-line message prefixed."""
    for line in shown(str(message)).strip().splitlines() or ["unknown error"]:
        print(f"loopctl: error: {line}", file=sys.stderr)


def warn(message: str) -> None:
    for line in shown(str(message)).strip().splitlines():
        print(f"loopctl: warning: {line}", file=sys.stderr)


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON; control characters in it are ``\\u`` escapes."""
    from loopctl.terminal import json_for_terminal

    print(json_for_terminal(data, indent=2, default=str))


#: The exceptions whose message is meant for the user, by module (looked up only in modules
#: already imported: an error class nobody imported cannot have been raised, and ``status``
#: need not import the engine just to name one).
USER_ERRORS = (
    ("loopctl.configfile", "ConfigError"),
    ("loopctl.engine", "LoopError"),
    ("loopctl.pluginhost", "PluginError"),
    ("loopctl.launch", "UsageError"),
    ("loopctl.scaffold", "ScaffoldError"),
    ("loopctl.state", "StateError"),
)


def user_error_types() -> tuple[type[BaseException], ...]:
    found = (getattr(sys.modules.get(module), name, None) for module, name in USER_ERRORS)
    return tuple(cls for cls in found if isinstance(cls, type))


def report_user_error(exc: BaseException) -> int:
    """Say what a user error (:data:`USER_ERRORS`) says, as the typer app does; its exit code."""
    code = getattr(exc, "exit_code", EXIT_USAGE)
    error(str(exc))
    return code if isinstance(code, int) else EXIT_USAGE


# --- status --------------------------------------------------------------------------------------


def state_dir_for(
    workdir: Path, state_dir: Path | None, config: Path | None, *, trust_config: bool = True
) -> Path:
    """The state directory: ``--state-dir`` (relative to ``workdir``), else the config's
    ``state_dir``. Raises ConfigError for a config file that cannot be read, or (when a
    source sets ``state_dir``) a configuration that does not load; without ``trust_config``
    (a read-only command), UntrustedConfig for a config's state directory that leads out of
    the project (:attr:`loopctl.Project.state_dir`)."""
    if state_dir is not None:
        return state_dir if state_dir.is_absolute() else workdir / state_dir
    from loopctl.project import Project  # the setting alone, unless a source sets it

    return Project(workdir, config_file=config, trust_config=trust_config).state_dir


def status_options(args: Sequence[str]) -> dict[str, Any] | None:
    """The options of ``loopctl status ARGS`` when they are the plain ones (``--json``,
    ``--trust-config``, ``--state-dir DIR``, ``--config FILE``, ``--flag=value``, each at most
    once), read as click reads them; None for anything else (help, a mistake), which the typer
    app then parses."""
    found: dict[str, Any] = {}
    rest = list(args)
    flags = {"--json": "json_output", "--trust-config": "trust_config"}
    while rest:
        word = rest.pop(0)
        value: Any = True
        if word in flags:
            key = flags[word]
        else:
            flag, equals, text = word.partition("=")
            key = {"--state-dir": "state_dir", "--config": "config"}.get(flag, "")
            if not key:
                return None
            if not equals:
                if not rest or rest[0].startswith("-"):
                    return None
                text = rest.pop(0)
            value = Path(text)
        if key in found:
            return None
        found[key] = value
    return {
        "state_dir": found.get("state_dir"),
        "config": found.get("config"),
        "json_output": found.get("json_output", False),
        "trust_config": found.get("trust_config", False),
    }


def status(
    *, state_dir: Path | None, config: Path | None, json_output: bool, trust_config: bool = False
) -> int:
    """``loopctl status``: print a loop's state; the exit code. The configuration is read only
    as far as ``state_dir`` goes (a mistake elsewhere does not hide the loop); when there is
    no loop to show, a configuration that does not load is the error reported, as ``run``
    reports it. A config's state directory that leads out of the project is not followed
    unless ``trust_config`` (:mod:`loopctl.trust`)."""
    from loopctl.redaction import redact_data
    from loopctl.status import collect_status, render_status

    try:
        target = state_dir_for(Path.cwd(), state_dir, config, trust_config=trust_config)
        data = collect_status(target)
    except Exception as exc:
        if isinstance(exc, user_error_types()):
            if state_dir is None:
                from loopctl.config import load_config

                try:
                    load_config(Path.cwd(), config_file=config)
                except Exception as bad:  # noqa: BLE001 - reported if a user error, else not
                    if isinstance(bad, user_error_types()):
                        return report_user_error(bad)
            return report_user_error(exc)
        raise
    if json_output:
        emit_json(redact_data(data))
    else:
        print(shown(render_status(data)))
    return 0


def report(
    *,
    state_dir: Path | None,
    config: Path | None,
    json_output: bool,
    path_only: bool,
    pager: bool,
    trust_config: bool = False,
) -> int:
    """``loopctl report``: print the last run's report (``report.md``; ``report.json`` with
    ``json_output``; its path with ``path_only``), through a pager on a terminal; the exit
    code (1 when no run has written one)."""
    try:
        target = state_dir_for(Path.cwd(), state_dir, config, trust_config=trust_config)
    except Exception as exc:
        if isinstance(exc, user_error_types()):
            return report_user_error(exc)
        raise
    path = target / ("report.json" if json_output else "report.md")
    if not path.is_file():
        error(_no_report(target))
        return 1
    if path_only:
        print(shown(str(path)))
        return 0
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        error(f"cannot read {path}: {exc.strerror or exc}")
        return 1
    if json_output:
        try:
            emit_json(json.loads(text))
        except ValueError:
            error(f"{path} is not valid JSON; `loopctl report` prints the report.md beside it")
            return 1
        return 0
    text = shown(text)
    if not (pager and sys.stdout.isatty() and _page(text)):
        print(text, end="" if text.endswith("\n") else "\n")
    return 0


def _page(text: str) -> bool:
    """Show ``text`` through ``$PAGER`` (``less``, which quits when it fits a screen); False
    when there is no pager to run."""
    import os
    import shlex
    import shutil
    import subprocess

    try:
        command = shlex.split(os.environ.get("PAGER") or "less")
    except ValueError:
        return False
    if not command or shutil.which(command[0]) is None:
        return False
    env = {**os.environ, "LESS": os.environ.get("LESS", "FRX")}
    try:
        subprocess.run(command, input=text.encode("utf-8", "replace"), env=env, check=False)
    except OSError:
        return False
    return True


def _no_report(state_dir: Path) -> str:
    """Why there is no report to show, and what to do."""
    if not (state_dir / "loop-state.md").exists():
        return (
            f"no report in {state_dir}: no loop ran here; start one with `loopctl run`, or "
            "point to another state directory with --state-dir"
        )
    return (
        f"no report in {state_dir} yet: a run writes it when it ends (`loopctl status` shows "
        "a loop that is running or was stopped before its end)"
    )


# --- plugins -------------------------------------------------------------------------------------


def command_host(workdir: Path) -> PluginHost:
    """The enabled plugins, loaded, for their ``register_commands``: chosen by the config's
    plugin switches alone, so offering a plugin's command costs neither the typed configuration
    nor the engine. ``required_plugins`` is not checked here: it is a run's precondition (the
    command, if it loads the project, checks it). Raises ConfigError for a config file whose
    plugin switches are wrong, PluginError when the core plugin is disabled, and a plugin's
    import error with ``plugins.strict``."""
    from loopctl.pluginhost import switches_host

    return switches_host(workdir)


def cli_commands(host: PluginHost) -> list[CliCommand]:
    """The :class:`~loopctl.CliCommand` s the enabled plugins offer (``register_cli_commands``),
    a later one replacing an earlier one of the same path; none with a built-in name."""
    from loopctl.clicommand import CliCommand

    found: dict[tuple[str, ...], CliCommand] = {}
    for result in reversed(host.hook.register_cli_commands()):  # registration order
        for command in result or []:
            if not isinstance(command, CliCommand):
                raise TypeError(f"register_cli_commands returned {command!r}, not a CliCommand")
            if command.path[0] not in BUILTIN_COMMANDS:
                found[command.path] = command
    return list(found.values())


#: The host :func:`plugin_command` loaded and did not use, for :func:`take_host`.
_handed: list[PluginHost] = []


def take_host() -> PluginHost | None:
    """The plugin host :func:`plugin_command` loaded for a command it left to the typer app
    (a plugin's typer command, or a form it does not read), once; else None."""
    return _handed.pop() if _handed else None


def plugin_command(args: Sequence[str]) -> int | None:
    """Run ``loopctl ARGS`` when it is the plain form of a plugin's :class:`~loopctl.CliCommand`,
    without typer; its exit code. None when it is not (or the plugins cannot be loaded): the
    typer app then runs it, and says what is wrong."""
    try:
        host = command_host(Path.cwd())
        commands = cli_commands(host)
    except Exception:  # noqa: BLE001 - the typer app reports it (plugin commands unavailable)
        return None
    _handed[:] = [host]  # for the typer app, if it runs the command: no second load
    for command in sorted(commands, key=lambda c: -len(c.path)):
        if tuple(args[: len(command.path)]) != command.path:
            continue
        arguments = command.parse(args[len(command.path) :])
        if arguments is None:
            return None
        _handed.clear()
        from loopctl.pluginhost import offer_host

        forgiving_streams()
        offer_host(host)  # a command that loads the project takes it: no second load
        try:
            return command.run(arguments)
        except KeyboardInterrupt:
            error("interrupted")
            return 130
        except EOFError:  # what click makes of it: an abort
            error("aborted")
            return 1
        finally:
            offer_host(None)
    return None


def plugins_list(*, json_output: bool, config_file: Path | None = None) -> int:
    """Print every installed plugin; disabled plugins are listed but never imported."""
    from loopctl.configfile import ConfigError, plugin_switches
    from loopctl.pluginhost import PluginHost, PluginSelection, unknown_plugin_names

    sources: dict[str, str] = {}
    try:
        switches = plugin_switches(Path.cwd(), config_file=config_file, sources=sources)
    except ConfigError as exc:
        for line in str(exc).strip().splitlines():
            print(f"loopctl: error: {line}", file=sys.stderr)
        return 2
    # Listing must show a broken plugin, not die of it, even with plugins.strict = true.
    selection = PluginSelection(
        enable=switches["enable"], disable=switches["disable"], autoload=switches["autoload"]
    )
    host = PluginHost(selection)
    host.load()
    for problem in unknown_plugin_names(host, sources):  # listed all the same: see the names
        warn(problem)
    rows: list[dict[str, Any]] = [
        {
            "name": info.name,
            "distribution": info.distribution,
            "version": info.version,
            "status": info.status,
            "detail": info.detail,
            "hooks": info.hooks,
            "source": info.source,
            "origin": info.origin,
        }
        for info in host.infos.values()
    ]
    if json_output:
        print(json.dumps(rows, indent=2))
        return 0
    from loopctl.terminal import sanitize

    lines: list[str] = []
    width = max((len(r["name"]) for r in rows), default=8)
    for row in rows:
        version = row["version"] or "?"
        origin = " (builtin)" if row["origin"] == "builtin" else ""
        lines.append(
            f"{row['name']:<{width}}  {row['status']:<8}  {row['distribution']} {version}{origin}"
        )
        if row["detail"]:
            lines.append(f"{'':<{width}}  {row['detail']}")
        if row["hooks"]:
            lines.append(f"{'':<{width}}  hooks: {', '.join(row['hooks'])}")
        lines.append(f"{'':<{width}}  from: {row['source']}")  # a path: sanitised with the rest
    if not selection.autoload:  # the loader's own reading of the variable ("0" is not set)
        lines.append("(LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set: only allow-listed plugins load)")
    sys.stdout.write("".join(sanitize(line) + "\n" for line in lines))
    return 0
