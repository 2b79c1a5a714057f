"""``loopctl errors report``, a :class:`loopctl.CliCommand` (:data:`REPORT`) run without typer,
and the helpers every ``errors``/``memory`` command shares (:mod:`loopctl_context_errors.cli`
has the others, written with typer).

Importing this module imports nothing but ``loopctl``'s public names; the rules, the report and
the memory are imported by the commands that use them.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import loopctl
from loopctl import CliArgument, CliCommand, CliOption

if TYPE_CHECKING:
    from loopctl_context_errors.memory import FailureMemory

EXIT_USAGE = 2
#: The failure memory could not be used (unreachable, newer, locked, damaged …).
EXIT_STORE = 1
FORMATS = ("terminal", "github", "json")
MEMORY_HELP = (
    "The failure memory: a SQLite file or a postgresql:// URL (default: LOOPCTL_FAILURE_MEMORY, "
    "the project's memory_url or memory_path setting, or $XDG_DATA_HOME/loopctl/failures.sqlite3)."
)
SOURCE_HELP = "The error output: a file, or - for standard input."


class InputError(Exception):
    """A problem with what the user gave a command; ``str()`` is the message."""


def print_error(message: str, *, kind: str = "error") -> None:
    """``loopctl: error: …`` (or another ``kind``) on stderr, one line per line of
    ``message``: redacted, no terminal control (it may name a path or a URL)."""
    for line in shown(message).strip().splitlines() or ["unknown error"]:
        print(f"loopctl: {kind}: {line}", file=sys.stderr)


def shown(text: str) -> str:
    """``text`` fit for the terminal: redacted, no terminal control."""
    return loopctl.sanitize(loopctl.redact(text))


def say(line: str) -> None:
    """Print a line built from stored or logged text, or naming a path: :func:`shown`."""
    print(shown(line))


def print_json(data: Any) -> None:
    """JSON for the terminal: C0 controls are escaped by JSON; the C1 ones and DEL, which JSON
    leaves raw, are removed."""
    print(loopctl.sanitize(json.dumps(data, indent=2, default=str, ensure_ascii=False)))


def read_input(source: str) -> str:
    """The text of ``source`` (a file, or ``-`` for stdin); InputError when it cannot be read."""
    if source == "-":
        data = sys.stdin.buffer.read()
    else:
        path = Path(source)
        if not path.exists():
            raise InputError(f"{source}: no such file (give a log file, or - to read stdin)")
        if path.is_dir():
            raise InputError(f"{source}: is a directory, not a log file")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(f"{source}: cannot read it: {exc.strerror or exc}") from None
    return data.decode("utf-8", "replace")


def load_project(*, trust_config: bool = False) -> Any:
    """The project in the working directory, or None when it cannot be loaded: a broken
    project config must not break these commands. A command loads it once and passes it on.
    Its config file is trusted only with ``trust_config`` (``--trust-config``)."""
    try:
        return loopctl.load_project(trust_config=trust_config)
    except Exception:  # noqa: BLE001 - see above
        return None


def plugin_settings(project: Any) -> Any:
    """The plugin's settings in ``project`` (the defaults when there are none, or they are
    broken: a broken project config must not break these commands)."""
    from loopctl_context_errors.config import ContextErrorsConfig

    if project is not None:
        try:
            return project.plugin_config("context-errors", ContextErrorsConfig)
        except Exception:  # noqa: BLE001 - see above
            pass
    return ContextErrorsConfig()


def configured_memory_path(project: Any) -> str:
    """The ``memory_path`` setting of ``project``, if any ("off" when the memory is off)."""
    config = plugin_settings(project)
    return "off" if not config.memory else config.memory_path


def open_memory(
    value: str | None,
    *,
    timeout_s: float = 5.0,
    project: Any = None,
    trust_config: bool = False,
    read_only: bool = False,
) -> FailureMemory | None:
    """The failure memory ``value`` names (a file or a URL, from ``--memory``), else the one
    the environment and the project (loaded if not given) name; None when it is off. Raises
    InputError for a URL that is not one, and :class:`loopctl.UntrustedConfig` for a memory
    the project's config file names when it is not trusted. A ``read_only`` memory writes
    nothing (a SQLite file is opened read-only)."""
    from loopctl_context_errors.memory import FailureMemory, resolve_memory_location
    from loopctl_context_errors.store import StoreError

    try:
        if value:
            location = resolve_memory_location(value, env={})
        else:
            if project is None:
                project = load_project(trust_config=trust_config)
            config = plugin_settings(project)
            if not config.memory:
                return None
            location = resolve_memory_location(config.memory_path, config.memory_url)
            where = _untrusted_memory(project, config)
            if where is not None and location is not None:
                raise loopctl.UntrustedConfig(
                    where,
                    f"names the failure memory {location.display}",
                    instead="--memory FILE|URL",
                )
    except StoreError as exc:
        from loopctl_context_errors.memory import one_line

        raise InputError(one_line(str(exc))) from None
    if location is None:
        return None
    return FailureMemory(location, timeout_s=timeout_s, read_only=read_only)


def _untrusted_memory(project: Any, config: Any) -> str | None:
    """Where the project's config file names the memory (``memory_url``, else
    ``memory_path``) when it is that file that chooses it and it is not trusted."""
    from loopctl_context_errors.memory import ENV_MEMORY

    if project is None or os.environ.get(ENV_MEMORY, "").strip():
        return None  # the defaults, or the user's variable: trusted
    key = next((k for k in ("memory_url", "memory_path") if getattr(config, k).strip()), None)
    if key is None:
        return None
    try:
        where: str | None = project.untrusted_setting("plugins", "context-errors", key)
    except Exception:  # noqa: BLE001 - a broken config: plugin_settings gave the defaults
        return None
    return where


def project_id_of(project: Any) -> str:
    """The identity of the project in the working directory (its ``project_id`` setting, else
    its remote, root commit or path)."""
    from loopctl_context_errors.project_id import project_identity

    config = plugin_settings(project)
    return project_identity(Path.cwd(), config.project_id, config.project).id


def rules(project: Any = None) -> Any:
    """Built-in rules plus those of the project's enabled plugins (best effort)."""
    from loopctl_context_errors.categories import BUILTIN_RULES, Rule, RuleSet

    try:
        project = project if project is not None else load_project()
        hook = getattr(project.hook, "context_errors_rules", None) if project else None
        results = hook() if hook is not None else []
    except Exception:  # noqa: BLE001
        results = []
    taken = {rule.name for rule in BUILTIN_RULES}
    extra = []
    for result in results or []:
        for rule in result if isinstance(result, (list, tuple)) else [result]:
            if isinstance(rule, Rule) and rule.name not in taken:
                taken.add(rule.name)
                extra.append(rule)
    return RuleSet.with_extra(extra)


REPORT = CliCommand(
    "errors report",
    "loopctl_context_errors.reportcmd:errors_report",
    help="Categorize error output and print the four-section report.",
    params=[
        CliArgument("source", default="-", help=SOURCE_HELP),
        CliOption(
            "output_format",
            "--format",
            "-f",
            default="terminal",
            metavar="terminal|github|json",
            help="terminal, github or json.",
        ),
        CliOption("stage", "--stage", default="tests", help="The stage that failed."),
        CliOption("iteration", "--iteration", type=int, help="The iteration number."),
        CliOption("goal", "--goal", default="", help="The goal, shown in the report."),
        CliOption("issue", "--issue", default="", help="The issue (#42 or a URL)."),
        CliOption("memory_path", "--memory", metavar="FILE|URL", help=MEMORY_HELP),
        CliOption("no_memory", "--no-memory", flag=True, help="Do not consult the failure memory."),
        CliOption(
            "trust_config",
            loopctl.UntrustedConfig.FLAG,
            flag=True,
            help=loopctl.UntrustedConfig.FLAG_HELP,
        ),
    ],
    epilog=(
        "\b\nExamples:\n  pytest -q 2>&1 | loopctl errors report\n"
        "  loopctl errors report test.log -f github"
    ),
)


def errors_report(
    *,
    source: str,
    output_format: str,
    stage: str,
    iteration: int | None,
    goal: str,
    issue: str,
    memory_path: str | None,
    no_memory: bool,
    trust_config: bool = False,
) -> int:
    """``loopctl errors report`` (:data:`REPORT`). A failure memory the project's config file
    names is consulted only with ``--trust-config`` (the report says so, and goes on without
    it)."""
    if output_format not in FORMATS:
        print_error(f"--format: must be one of {', '.join(FORMATS)}, got {output_format!r}")
        return EXIT_USAGE
    from loopctl_context_errors.report import (
        build_report,
        render_github,
        render_json,
        render_terminal,
    )

    try:
        text = read_input(source)
    except InputError as exc:
        print_error(str(exc))
        return EXIT_USAGE
    project = load_project(trust_config=trust_config)
    try:
        memory = None
        if not no_memory:
            memory = open_memory(memory_path, project=project, read_only=True)
    except InputError as exc:
        print_error(f"--memory: {exc}" if memory_path else str(exc))
        return EXIT_USAGE
    except loopctl.UntrustedConfig as exc:
        print_error(f"{exc}; the report goes on without the memory", kind="warning")
    report = build_report(
        text,
        stage=stage,
        iteration=iteration,
        goal=goal,
        issue=issue,
        memory=memory,
        rules=rules(project),
        project_id=project_id_of(project) if memory is not None else "",
    )
    if output_format == "json":
        print_json(render_json(report))
    elif output_format == "github":
        sys.stdout.write(loopctl.sanitize(render_github(report)))
    else:
        sys.stdout.write(render_terminal(report))  # sanitised inside, before the colours
    return 0
