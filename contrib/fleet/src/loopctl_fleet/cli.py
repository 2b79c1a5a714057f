"""``loopctl fleet …``: the fleet's commands.

temporalio costs a command 0.3 s to import: only the commands that talk to a server import it,
inside their bodies (``loopctl fleet --help`` and ``check`` never do). Errors are one
``loopctl: error: …`` line on stderr: exit 2 for input that was refused (a task file, flags),
exit 1 for a server that cannot be reached or a task that cannot be acted on. Text that reaches
a terminal is redacted and stripped of terminal control (``loopctl.sanitize``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, Optional, TypeVar

import typer

if TYPE_CHECKING:
    from temporalio.client import Client

    from loopctl_fleet.config import FleetConfig
    from loopctl_fleet.connect import ConnectOptions
    from loopctl_fleet.taskfile import TaskSpec

F = TypeVar("F", bound=Callable[..., Any])
EXIT_USAGE = 2
EXIT_FAILED = 1


def examples(*lines: str) -> str:
    """A command's epilog: its example command lines, kept as written in the plain help."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


app = typer.Typer(
    help="Run many loops at once, on one machine or many, on Temporal.",
    no_args_is_help=True,
    epilog=examples(
        "loopctl fleet up",
        "loopctl fleet submit tasks.toml",
        "loopctl fleet status",
        "loopctl fleet worker --address temporal.example.com:7233 --slots 4",
    ),
)

# --- output ------------------------------------------------------------------------------------


def shown(text: str) -> str:
    from loopctl import redact, sanitize

    return sanitize(redact(text))


def say(text: str) -> None:
    for line in str(text).splitlines() or [""]:
        typer.echo(shown(line))


def error(message: str, *, redacted: bool = False) -> None:
    """``loopctl: error: …`` lines on stderr; ``redacted``: the message was redacted already,
    part by part (a task file's problems), and is only sanitised."""
    from loopctl import sanitize

    text = sanitize(str(message)) if redacted else shown(str(message))
    for line in text.strip().splitlines() or ["unknown error"]:
        typer.echo(f"loopctl: error: {line}", err=True)


def fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    """Report ``message``; the exit to raise: ``raise fail("…")``."""
    error(message)
    return typer.Exit(code)


def is_terminal() -> bool:
    try:
        return bool(sys.stdout.isatty())
    except (AttributeError, ValueError):
        return False


# --- flags built from tables -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Flag:
    """One option a table gives to a command; ``key`` is the setting it sets, if any."""

    name: str
    decls: tuple[str, ...]
    type: Any
    help: str
    metavar: Optional[str] = None
    key: Optional[str] = None
    hidden: bool = False

    def parameter(self) -> inspect.Parameter:
        option = typer.Option(*self.decls, help=self.help, metavar=self.metavar, hidden=self.hidden)
        return inspect.Parameter(
            self.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[Optional[self.type], option],
        )


def with_flags(flags: Sequence[Flag], *, into: str) -> Callable[[F], F]:
    """Give a command the options of ``flags``; it receives their values as one dict
    ``into`` (name → value, None when not given)."""

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name != into]

        @functools.wraps(func)
        def command(**kwargs: Any) -> Any:
            values = {flag.name: kwargs.pop(flag.name) for flag in flags}
            return func(**kwargs, **{into: values})

        parameters = own + [flag.parameter() for flag in flags]
        command.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]  # read by typer through inspect.signature
        return command  # type: ignore[return-value]  # same call shape for typer

    return decorate


#: How a command reaches the server (connect.py says where else the settings come from).
CONNECTION = (
    Flag(
        "address", ("--address",), str,
        "The Temporal server (default: $TEMPORAL_ADDRESS, else where `fleet up` started the fleet, else 127.0.0.1:7233).",
        "HOST:PORT",
    ),
    Flag("namespace", ("--namespace",), str, "The Temporal namespace (default: default).", "NS"),
    Flag("tls", ("--tls/--no-tls",), bool, "Use TLS (on by default with an API key)."),
    Flag(
        "api_key_env", ("--api-key-env",), str,
        "The environment variable that holds the API key (never the key itself).", "NAME",
    ),
    Flag("tls_cert", ("--tls-cert",), Path, "Client certificate for mTLS (PEM).", "FILE"),
    Flag("tls_key", ("--tls-key",), Path, "Its private key (PEM).", "FILE"),
    Flag("tls_ca", ("--tls-ca",), Path, "The server's CA certificate (PEM).", "FILE"),
)  # fmt: skip

#: The flags of `loopctl run` that are settings, and the loopctl.toml key each one sets: a task
#: made with `submit --repo … --goal …` takes them (a test checks `loopctl run` has each).
RUN_FLAGS = (
    Flag("test_cmd", ("--test-cmd",), str, "The command that says whether the goal is met (exit 0 = done).", "CMD", "test_cmd"),
    Flag("agent", ("--agent",), str, "Agent adapter name (see `loopctl agents list`).", "NAME", "agent"),
    Flag("agent_cmd", ("--agent-cmd",), str, "Run any command as the agent (prompt on stdin, or `{prompt}`).", "CMD", "agent_cmd"),
    Flag("model", ("--model",), str, "The model the agent uses.", "NAME", "model"),
    Flag("session", ("--session",), str, "fresh (new agent session each iteration, the default) or resume.", "fresh|resume", "session"),
    Flag("max_iterations", ("--max-iterations",), int, "Stop after this many iterations (default 20).", "N", "limits.max_iterations"),
    Flag("max_restarts", ("--max-restarts",), int, "Session restarts allowed (default 3, at most 10).", "N", "limits.max_restarts"),
    Flag("agent_timeout", ("--agent-timeout",), float, "Seconds one agent turn may take.", "SECONDS", "limits.agent_timeout_s"),
    Flag("wall_clock", ("--wall-clock",), float, "Seconds the whole run may take.", "SECONDS", "limits.wall_clock_s"),
    Flag("max_tokens", ("--max-tokens",), int, "Token budget for the run.", "N", "limits.max_tokens"),
    Flag("max_cost", ("--max-cost",), float, "Cost budget for the run, in USD.", "USD", "limits.max_cost_usd"),
    Flag("completion_signal", ("--completion-signal",), str, "Also require this line, alone, in the agent's final reply.", "LINE", "completion_signal"),
)  # fmt: skip

#: The task's own keys, for a task given by flags instead of a file.
TASK_FLAGS = (
    Flag("repo", ("--repo",), str, "The repository: a URL git can clone, or a path.", "URL", "repo"),
    Flag("base", ("--base",), str, "The branch, tag or commit to start from (default: HEAD).", "REF", "base"),
    Flag("goal", ("--goal",), str, "What the agent should achieve.", "TEXT", "goal"),
    Flag("goal_file", ("--goal-file",), Path, "Read the goal from this file (now: the text travels).", "FILE", "goal_file"),
    Flag("id", ("--id",), str, "The task's id (default: from the goal); its branch is loopctl/ID.", "ID", "id"),
    Flag("pr", ("--pr",), bool, "Open a GitHub pull request of the result branch ($GITHUB_TOKEN on the worker).", None, "fleet.pr"),
    Flag("land", ("--land",), bool, "Land the result on its base branch once complete (see `fleet land`).", None, "fleet.land"),
)  # fmt: skip

FleetOption = Annotated[
    Optional[str],
    typer.Option(
        "--fleet", envvar="LOOPCTL_FLEET", metavar="NAME", show_default=False,
        help="The fleet: its task queue is loopctl-NAME (default: [plugins.fleet] fleet, else default).",
    ),
]  # fmt: skip
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


def connect_options(
    values: dict[str, Any], config: Optional[FleetConfig] = None, **more: Any
) -> ConnectOptions:
    from loopctl_fleet.connect import ConnectOptions

    return ConnectOptions(**values, config=config, **more)


def project_config() -> FleetConfig:
    """``[plugins.fleet]`` of the project in the working directory (defaults without one)."""
    from loopctl import ConfigError, load_project
    from loopctl_fleet.config import NAME, FleetConfig

    try:
        return load_project(Path.cwd()).plugin_config(NAME, FleetConfig)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            error(line)
        raise typer.Exit(EXIT_USAGE) from None


def fleet_settings(fleet: Optional[str]) -> tuple[str, FleetConfig]:
    """The fleet's name (the flag's, else the config's, else "default") and the config."""
    config = project_config()
    return fleet or config.fleet or "default", config


class Refused(Exception):
    """A task that cannot be acted on as asked: one line for the user, exit 1."""


def with_client(options: ConnectOptions, body: Callable[[Client], Any]) -> Any:
    """Run ``await body(client)``; a server that cannot be reached is one line and exit 1."""
    from temporalio.service import RPCError

    from loopctl_fleet.connect import ConnectError, connect

    async def main() -> Any:
        return await body(await connect(options))

    try:
        return asyncio.run(main())
    except (ConnectError, Refused) as exc:
        error(str(exc))
    except RPCError as exc:
        error(f"the Temporal server refused: {exc.message}")
    finish(EXIT_FAILED)


def finish(code: int = 0) -> NoReturn:
    """End a command that used a Temporal client with exit ``code``.

    In the ``loopctl`` process itself the interpreter's teardown is skipped (``os._exit`` once
    the output is flushed): temporalio's Rust threads can crash it, ``Fatal Python error:
    PyGILState_Release`` and SIGABRT after the command did its work (temporalio/sdk-python#300,
    seen here on about one exit in three). Called in-process (typer's CliRunner, another
    program), it raises :class:`typer.Exit` as any command does.
    """
    if _is_loopctl_process() and "temporalio.bridge.temporal_sdk_bridge" in sys.modules:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    raise typer.Exit(code)


def _is_loopctl_process() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", "") == "loopctl.__main__" or Path(sys.argv[0]).name == "loopctl"


# --- check / submit ----------------------------------------------------------------------------


@app.command("check", epilog=examples("loopctl fleet check tasks.toml"))
def check(task_file: Annotated[Path, typer.Argument(metavar="TASKS.toml")]) -> None:
    """Check a task file as `submit` would, submitting nothing."""
    for task in read_tasks(task_file):
        say(f"{task.id}: {task.repo} @ {task.base} -> {task.branch}")


def read_tasks(task_file: Path, fleet_defaults: Optional[dict[str, Any]] = None) -> list[TaskSpec]:
    from loopctl_fleet.taskfile import TaskFileError, read_task_file

    try:
        return read_task_file(task_file, fleet_defaults)
    except TaskFileError as exc:
        for line in exc.problems:
            error(line, redacted=True)
        raise typer.Exit(EXIT_USAGE) from None


def tasks_from_flags(
    values: dict[str, Any], fleet_defaults: Optional[dict[str, Any]] = None
) -> list[TaskSpec]:
    """The one task ``submit``'s flags describe, checked as a task file's would be."""
    from loopctl_fleet.taskfile import TaskFileError, tasks_from_data

    task: dict[str, Any] = {}
    for flag in (*TASK_FLAGS, *RUN_FLAGS):
        value = values.get(flag.name)
        if value is None:
            continue
        *tables, key = (flag.key or flag.name).split(".")
        where = task
        for table in tables:
            where = where.setdefault(table, {})
        where[key] = str(value) if isinstance(value, Path) else value
    try:
        return tasks_from_data(
            {"task": [task]}, name="submit", base_dir=Path.cwd(), fleet_defaults=fleet_defaults
        )
    except TaskFileError as exc:
        for line in exc.problems:
            error(line.replace("task[0].", "").replace("task[0]: ", ""), redacted=True)
        raise typer.Exit(EXIT_USAGE) from None


@app.command(
    "submit",
    epilog=examples(
        "loopctl fleet submit tasks.toml",
        'loopctl fleet submit --repo git@github.com:org/app.git --base main --goal "Fix #12" '
        '--test-cmd "pytest -q"',
        "loopctl fleet submit --repo ../app --goal-file issue.md --test-cmd 'make test' "
        "--agent-cmd './my-agent.sh'",
    ),
)
@with_flags((*TASK_FLAGS, *RUN_FLAGS, *CONNECTION), into="flags")
def submit(
    task_file: Annotated[
        Optional[Path], typer.Argument(metavar="[TASKS.toml]", help="A task file; or the flags.")
    ] = None,
    fleet: FleetOption = None,
    heartbeat_timeout: Annotated[
        float,
        typer.Option(
            "--heartbeat-timeout",
            metavar="SECONDS",
            hidden=True,
            help="A worker silent this long is taken for dead.",
        ),
    ] = 30.0,
    flags: Optional[dict[str, Any]] = None,
) -> None:
    """Hand tasks to the fleet: every task of a file (checked whole first), or one from flags."""
    values = flags or {}
    connection = {flag.name: values.pop(flag.name) for flag in CONNECTION}
    given = sorted(f"--{k.replace('_', '-')}" for k, v in values.items() if v is not None)
    if task_file is not None and given:
        raise fail(f"give a task file or task flags, not both ({', '.join(given)})", EXIT_USAGE)
    if task_file is None and not given:
        raise fail("nothing to submit: give a task file, or --repo, --goal and more", EXIT_USAGE)
    name, config = fleet_settings(fleet)
    landing = {"land": True} if config.land else None
    tasks = (
        read_tasks(task_file, landing)
        if task_file is not None
        else tasks_from_flags(values, landing)
    )

    async def body(client: Client) -> int:
        from loopctl_fleet.ledger import ensure_ledger
        from loopctl_fleet.service import task_queue

        ledger = await ensure_ledger(client, name, task_queue(name))
        code = 0
        for spec in tasks:
            line, ok = await submit_task(client, name, spec, heartbeat_timeout, ledger)
            if ok:
                say(line)
            else:
                error(line)
                code = EXIT_USAGE
        return code

    finish(with_client(connect_options(connection, config, fleet=name), body))


async def submit_task(
    client: Client,
    fleet: str,
    spec: TaskSpec,
    heartbeat_timeout: float = 30.0,
    ledger: str | None = None,
) -> tuple[str, bool]:
    """Start ``spec``'s workflow; one line saying what happened, and whether that is fine."""
    from temporalio.common import WorkflowIDReusePolicy
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from loopctl_fleet.service import task_queue
    from loopctl_fleet.status import task_memo, workflow_id
    from loopctl_fleet.workflows import LoopctlTask, TaskInput

    wf_id = workflow_id(fleet, spec.id)
    try:
        await client.start_workflow(
            LoopctlTask.run,
            TaskInput(spec, heartbeat_timeout_s=heartbeat_timeout, ledger_id=ledger),
            id=wf_id,
            task_queue=task_queue(fleet),
            memo=task_memo(spec),
            # a task's id is taken for good: `retry` starts a new run of an ended one
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
        )
    except WorkflowAlreadyStartedError:
        description = await client.get_workflow_handle(wf_id).describe()
        if (await description.memo()).get("digest") == spec.digest():
            return f"{spec.id}: already submitted", True
        return (
            f"{spec.id}: another task with this id is in fleet {fleet!r} already: "
            "give this one another id (or `loopctl fleet retry` the one there)",
            False,
        )
    return f"{spec.id}: submitted ({spec.repo} @ {spec.base} -> {spec.branch})", True


# --- status / logs -----------------------------------------------------------------------------


@app.command(
    "status",
    epilog=examples(
        "loopctl fleet status", "loopctl fleet status issue-12", "loopctl fleet status --json"
    ),
)
@with_flags(CONNECTION, into="connection")
def status(
    task: Annotated[Optional[str], typer.Argument(metavar="[TASK]", help="One task only.")] = None,
    fleet: FleetOption = None,
    json_output: JsonOption = False,
    every_run: Annotated[
        bool, typer.Option("--all", help="Every run of each task (`retry` makes new ones).")
    ] = False,
    connection: Optional[dict[str, Any]] = None,
) -> None:
    """Every task of the fleet: state, iteration, tokens, cost, result branch, reason."""
    fleet_name, config = fleet_settings(fleet)
    from loopctl_fleet.status import list_rows, plain_table, rich_table

    async def body(client: Client) -> Any:
        if task is not None:
            _workflow_id(fleet_name, task)  # a task id, so the query stays one
        rows = await list_rows(client, fleet_name, task=task, every_run=every_run)
        return rows, await ledger_memo(client, fleet_name)

    rows, ledger = with_client(connect_options(connection or {}, config, fleet=fleet_name), body)
    if task is not None and not rows:
        error(f"no task {task!r} in fleet {fleet_name!r}")
        finish(EXIT_FAILED)
    if json_output:
        import json

        from loopctl_fleet.status import fleet_json

        # json.dumps writes control characters as \u escapes: nothing reaches the terminal raw
        listed = {
            "fleet": fleet_json(fleet_name, rows, ledger),
            "tasks": [row.as_json() for row in rows],
        }
        typer.echo(json.dumps(listed, indent=2, default=str))
    elif not rows:
        say(
            f"No tasks in fleet {fleet_name!r} yet: `loopctl fleet submit tasks.toml` hands it some."
        )
    elif is_terminal():
        from rich.console import Console

        Console().print(rich_table(rows))
    else:
        say(plain_table(rows))
    if ledger and not json_output and task is None:
        from loopctl_fleet.status import fleet_summary

        say(f"Fleet {fleet_name!r}: {fleet_summary(rows, ledger)}")
    finish(0)


@app.command(
    "logs", epilog=examples("loopctl fleet logs issue-12", "loopctl fleet logs issue-12 --follow")
)
@with_flags(CONNECTION, into="connection")
def logs(
    task: Annotated[str, typer.Argument(metavar="TASK")],
    fleet: FleetOption = None,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing progress until the task ends.")
    ] = False,
    connection: Optional[dict[str, Any]] = None,
) -> None:
    """A task's progress while it runs; how it ended, and where its logs are, once it has."""
    fleet_name, config = fleet_settings(fleet)

    async def body(client: Client) -> None:
        from temporalio.client import WorkflowExecutionStatus

        from loopctl_fleet.status import row_of

        handle = client.get_workflow_handle(_workflow_id(fleet_name, task))
        shown_last = None
        while True:
            description = await _describe(handle, fleet_name, task)
            row = await row_of(client, fleet_name, description)
            if description.status != WorkflowExecutionStatus.RUNNING:
                for line in await _ending(client, handle, row):
                    say(line)
                return
            line = _progress_line(row)
            if line != shown_last:
                say(line)
                shown_last = line
            if not follow:
                return
            await asyncio.sleep(1.0)  # a poll: heartbeats are read, not pushed

    with_client(connect_options(connection or {}, config, fleet=fleet_name), body)
    finish(0)


def _progress_line(row: Any) -> str:
    parts = [f"{row.task}: {row.state}"]
    if row.iteration:
        parts.append(f"iteration {row.iteration}")
    if row.phase:
        parts.append(f"phase {row.phase}")
    if row.tokens is not None:
        parts.append(f"{row.tokens} tokens")
    if row.cost_usd is not None:
        parts.append(f"${row.cost_usd:.2f}")
    return ", ".join(parts)


async def _ending(client: Client, handle: Any, row: Any) -> list[str]:
    from temporalio.client import WorkflowExecutionStatus

    from loopctl_fleet.workflows import TaskOutcome

    lines = [f"{row.task}: {row.state} after {row.attempts} attempt(s)"]
    outcome = None
    description = await handle.describe()
    if description.status == WorkflowExecutionStatus.COMPLETED:
        typed = client.get_workflow_handle(
            description.id, run_id=description.run_id, result_type=TaskOutcome
        )
        outcome = await typed.result()
    result = outcome.result if outcome is not None else None
    reason = (outcome.reason if outcome is not None else "") or row.reason
    if result is not None and not reason:
        reason = result.reason
    if reason:
        lines.append(f"Reason: {reason.strip()}")
    if result is not None:
        code = "" if result.status.startswith("exit") else f" (exit {result.exit_code})"
        lines.append(f"Status: {result.status}{code}, {result.iterations} iteration(s)")
    if row.branch:
        commit = f" (commit {result.commit[:12]})" if result is not None and result.commit else ""
        lines.append(f"Branch: {row.branch}{commit}")
    if result is not None and (result.pull_request or result.pull_request_error):
        lines.append(f"Pull request: {result.pull_request or result.pull_request_error}")
    if result is not None and result.logs:
        lines.append(f"Logs: on worker {result.worker}, in {result.logs} (loop.stderr, state/)")
    return lines


# --- land --------------------------------------------------------------------------------------


@app.command(
    "land",
    epilog=examples(
        "loopctl fleet land",
        "loopctl fleet land issue-12 issue-14 --delete-branch",
        "loopctl fleet land --mode merge --attempts 0",
    ),
)
@with_flags(CONNECTION, into="connection")
def land(
    tasks: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="[TASK]...",
            help="These tasks (default: every complete result not handed to landing yet).",
        ),
    ] = None,
    fleet: FleetOption = None,
    mode: Annotated[
        Optional[str],
        typer.Option(
            "--mode",
            metavar="rebase|merge",
            help="Rebase onto the base (linear history, the default) or merge.",
        ),
    ] = None,
    attempts: Annotated[
        Optional[int],
        typer.Option(
            "--attempts",
            metavar="N",
            min=0,
            max=10,
            help="Follow-up tasks for a conflict or red tests (default 2).",
        ),
    ] = None,
    delete_branch: Annotated[
        Optional[bool],
        typer.Option(
            "--delete-branch/--keep-branch",
            help="Delete a result's branch once it landed (default: keep).",
        ),
    ] = None,
    connection: Optional[dict[str, Any]] = None,
) -> None:
    """Land complete results on their base branches, one at a time, in the order they completed:
    each is rebased (or merged) onto the base's tip, tested there, and pushed only if green (a
    task with pr = true: to its pull request's head too, which GitHub then shows merged)."""
    from loopctl_fleet.taskfile import land_problems

    fleet_name, config = fleet_settings(fleet)
    for _, message in land_problems(mode or "rebase", 2 if attempts is None else attempts):
        raise fail(message, EXIT_USAGE)
    flags = {"mode": mode, "attempts": attempts, "delete_branch": delete_branch}

    async def body(client: Client) -> tuple[list[str], list[str]]:
        from loopctl_fleet.landing import land_rows

        return await land_rows(client, fleet_name, tasks or [], flags)

    done, refused = with_client(connect_options(connection or {}, config, fleet=fleet_name), body)
    for line in done:
        say(line)
    for line in refused:
        error(line)
    if not done and not refused:
        say(f"Nothing to land in fleet {fleet_name!r}: no complete result waits for it.")
    finish(EXIT_FAILED if refused else 0)


# --- cancel / retry ----------------------------------------------------------------------------


@app.command("cancel", epilog=examples("loopctl fleet cancel issue-12"))
@with_flags(CONNECTION, into="connection")
def cancel(
    task: Annotated[str, typer.Argument(metavar="TASK")],
    fleet: FleetOption = None,
    connection: Optional[dict[str, Any]] = None,
) -> None:
    """Cancel a task; returns once its loop and everything the loop started are gone."""
    fleet_name, config = fleet_settings(fleet)

    async def body(client: Client) -> str:
        from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError

        from loopctl_fleet.status import row_of

        handle = client.get_workflow_handle(_workflow_id(fleet_name, task))
        description = await _describe(handle, fleet_name, task)
        if description.status != WorkflowExecutionStatus.RUNNING:
            row = await row_of(client, fleet_name, description)
            raise Refused(f"{task} has already ended ({row.state}): there is nothing to cancel")
        await handle.cancel()
        try:  # the workflow ends once the loop's activity confirms its tree is gone
            await handle.result()
        except WorkflowFailureError:
            pass
        row = await row_of(client, fleet_name, await handle.describe())
        return f"{task}: {row.state}"

    say(with_client(connect_options(connection or {}, config, fleet=fleet_name), body))
    finish(0)


@app.command(
    "limits",
    epilog=examples(
        "loopctl fleet limits",
        "loopctl fleet limits --max-running 6 --budget-usd 50",
        "loopctl fleet limits --max-running 0      # pause: no new loop starts",
        "loopctl fleet limits --unlimited",
    ),
)
@with_flags(CONNECTION, into="connection")
def limits(
    fleet: FleetOption = None,
    max_running: Annotated[
        Optional[int],
        typer.Option("--max-running", metavar="N", min=0, help="Loops running at once, fleet-wide (0 pauses the fleet)."),
    ] = None,
    budget_usd: Annotated[
        Optional[float],
        typer.Option("--budget-usd", metavar="USD", min=0, help="What the whole fleet may spend."),
    ] = None,
    budget_tokens: Annotated[
        Optional[int],
        typer.Option("--budget-tokens", metavar="TOKENS", min=0, help="Tokens the whole fleet may use."),
    ] = None,
    unlimited: Annotated[bool, typer.Option("--unlimited", help="Remove every limit.")] = False,
    json_output: JsonOption = False,
    connection: Optional[dict[str, Any]] = None,
) -> None:  # fmt: skip
    """Show or change the fleet-wide limits: loops running at once, and the budget.

    Worker slots limit one worker; these limit the fleet. A spent budget stops new loops from
    starting (running ones are capped at what was left when they started); `fleet status` says so.
    """
    import dataclasses

    fleet_name, config = fleet_settings(fleet)
    changes = {"max_running": max_running, "budget_usd": budget_usd, "budget_tokens": budget_tokens}
    given = {key: value for key, value in changes.items() if value is not None}

    async def body(client: Client) -> dict[str, Any]:
        from loopctl_fleet.ledger import FleetLedger, Limits, ensure_ledger
        from loopctl_fleet.service import task_queue

        handle = client.get_workflow_handle(
            await ensure_ledger(client, fleet_name, task_queue(fleet_name))
        )
        memo: dict[str, Any] = dict(await (await handle.describe()).memo())
        if given or unlimited:
            merged: dict[str, Any] = {} if unlimited else {k: memo.get(k) for k in changes}
            merged.update(given)
            wanted = Limits(*(merged.get(key) for key in changes))
            await handle.signal(FleetLedger.set_limits, wanted)
            memo.update(dataclasses.asdict(wanted))
            memo["held"] = ""  # what held tasks, the ledger decides again under the new limits
        return memo

    memo = with_client(connect_options(connection or {}, config, fleet=fleet_name), body)
    if json_output:
        import json

        typer.echo(json.dumps(memo, indent=2, default=str))
    else:
        from loopctl_fleet.ledger import describe_memo

        say(f"Fleet {fleet_name!r}: {describe_memo(memo)}")
    finish(0)


@app.command("retry", epilog=examples("loopctl fleet retry issue-12"))
@with_flags(CONNECTION, into="connection")
def retry(
    task: Annotated[str, typer.Argument(metavar="TASK")],
    fleet: FleetOption = None,
    connection: Optional[dict[str, Any]] = None,
) -> None:
    """Run an ended task again (a new run under the same id, from its first submit's spec)."""
    fleet_name, config = fleet_settings(fleet)

    async def body(client: Client) -> str:
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.common import WorkflowIDReusePolicy

        from loopctl_fleet.service import task_queue
        from loopctl_fleet.status import row_of
        from loopctl_fleet.workflows import LoopctlTask, TaskInput

        handle = client.get_workflow_handle(_workflow_id(fleet_name, task))
        description = await _describe(handle, fleet_name, task)
        row = await row_of(client, fleet_name, description)
        if description.status == WorkflowExecutionStatus.RUNNING:
            raise Refused(f"{task} is still {row.state}: `loopctl fleet cancel {task}` first")
        if row.state == "complete":
            raise Refused(f"{task} is complete already: its result is on {row.branch}")
        history = await handle.fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        [task_input] = await client.data_converter.decode(started.input.payloads, [TaskInput])
        memo = await description.memo()
        await client.start_workflow(
            LoopctlTask.run,
            task_input,
            id=_workflow_id(fleet_name, task),
            task_queue=task_queue(fleet_name),
            memo={**memo, "state": "queued"},
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
        )
        return f"{task}: submitted again (it was {row.state})"

    say(with_client(connect_options(connection or {}, config, fleet=fleet_name), body))
    finish(0)


async def ledger_memo(client: Client, fleet: str) -> dict[str, Any]:
    """The fleet ledger's figures, or {} when it has none yet."""
    from temporalio.service import RPCError

    from loopctl_fleet.ledger import ledger_id

    try:
        return dict(await (await client.get_workflow_handle(ledger_id(fleet)).describe()).memo())
    except RPCError:
        return {}


def _workflow_id(fleet_name: str, task: str) -> str:
    from loopctl_fleet.status import workflow_id
    from loopctl_fleet.taskfile import ID_PATTERN

    if not ID_PATTERN.fullmatch(task):
        raise Refused(f"no task {task!r} in fleet {fleet_name!r} (not a task id)")
    return workflow_id(fleet_name, task)


async def _describe(handle: Any, fleet_name: str, task: str) -> Any:
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return await handle.describe()
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise Refused(f"no task {task!r} in fleet {fleet_name!r}") from None
        raise


# --- up / down / worker ------------------------------------------------------------------------


NameOption = Annotated[
    Optional[str],
    typer.Option(
        "--name", "--fleet", envvar="LOOPCTL_FLEET", metavar="NAME", show_default=False,
        help="The fleet; its state is in $XDG_STATE_HOME/loopctl-fleet/NAME "
        "(default: [plugins.fleet] fleet, else default).",
    ),
]  # fmt: skip


@app.command(
    "up",
    epilog=examples("loopctl fleet up", "loopctl fleet up --port 7300 --ui-port 8300 --slots 2"),
)
def up(
    name: NameOption = None,
    port: Annotated[
        Optional[int],
        typer.Option("--port", metavar="PORT", help="The server's gRPC port (default: the fleet's last, else 7233)."),
    ] = None,
    ui_port: Annotated[
        Optional[int],
        typer.Option("--ui-port", metavar="PORT", help="The Web UI's port (default: the fleet's last, else 8233)."),
    ] = None,
    slots: Annotated[
        Optional[int],
        typer.Option("--slots", metavar="N", min=1, help="Loops the worker runs at once (default 4)."),
    ] = None,
    foreground: Annotated[
        bool, typer.Option("--foreground", help="Stay in the foreground; Ctrl-C stops both.")
    ] = False,
) -> None:  # fmt: skip
    """Start a local Temporal dev server (its database a file) and a worker, in the background."""
    from loopctl_fleet import service
    from loopctl_fleet.server import ServerError

    fleet_name, config = fleet_settings(name)
    if foreground:  # before anything is printed: a SIGTERM after "Web UI:" must stop both
        _stop_on_sigterm()
    try:
        fleet = service.up(fleet_name, port=port, ui_port=ui_port, slots=slots or config.slots)
    except ServerError as exc:
        error(str(exc))
        finish(EXIT_FAILED)
    if not foreground:
        _announce(fleet)
        finish(0)
    _stay_up(fleet, lambda: _announce(fleet))
    finish(0)


def _announce(fleet: Any) -> None:
    again = " (already running)"
    say(
        f"Fleet {fleet.name!r}: Temporal server at {fleet.address}{again if fleet.reused_server else ''}"
    )
    say(f"Database: {fleet.db}")
    say(
        f"Worker: {fleet.identity}, {fleet.slots} slots{again if fleet.reused_worker else ''}"
        f" (log: {fleet.state_dir / 'worker.log'})"
    )
    say(f"Web UI: {fleet.ui}")


def _stop_on_sigterm() -> None:
    import signal

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _stay_up(fleet: Any, announce: Callable[[], None]) -> None:
    """Announce the fleet, then watch it until Ctrl-C or SIGTERM (or one of the two ends) and
    stop both: a signal at any moment after ``up`` started them, the announcement included,
    ends in ``down``."""
    import time

    from loopctl_fleet import service

    home = fleet.state_dir
    try:
        announce()
        while all(service.running(home / f) for f in (service.SERVER_FILE, service.WORKER_FILE)):
            time.sleep(0.5)  # a watch over processes that are not our children
        error("the server or the worker ended; stopping the fleet")
    except KeyboardInterrupt:
        pass
    service.down(fleet.name, say=say)


@app.command("down", epilog=examples("loopctl fleet down"))
def down(name: NameOption = None) -> None:
    """Stop the fleet's worker, then its server (each waited for); the database stays."""
    from loopctl_fleet import service

    fleet_name = fleet_settings(name)[0]
    if not service.down(fleet_name, say=say):
        say(f"Fleet {fleet_name!r} is not running here.")


@app.command(
    "worker",
    epilog=examples(
        "loopctl fleet worker",
        "loopctl fleet worker --address temporal.example.com:7233 --slots 8",
        "loopctl fleet worker --address NS.ACCOUNT.tmprl.cloud:7233 --namespace NS.ACCOUNT "
        "--api-key-env TEMPORAL_CLOUD_KEY",
    ),
)
@with_flags(CONNECTION, into="connection")
def worker(
    fleet: FleetOption = None,
    slots: Annotated[
        Optional[int],
        typer.Option("--slots", metavar="N", min=1, help="Loops run at once (default 4)."),
    ] = None,
    identity: Annotated[
        Optional[str],
        typer.Option("--identity", metavar="NAME", help="How the server names this worker."),
    ] = None,
    home: Annotated[
        Optional[Path],
        typer.Option(
            "--home", metavar="DIR",
            help="Where runs and repository mirrors are kept "
            "(default: $XDG_STATE_HOME/loopctl-fleet/FLEET/worker).",
        ),
    ] = None,
    ready_file: Annotated[Optional[Path], typer.Option("--ready-file", hidden=True)] = None,
    no_env_config: Annotated[bool, typer.Option("--no-env-config", hidden=True)] = False,
    grace: Annotated[float, typer.Option("--grace", metavar="SECONDS", hidden=True)] = 10.0,
    heartbeat: Annotated[float, typer.Option("--heartbeat", metavar="SECONDS", hidden=True)] = 5.0,
    connection: Optional[dict[str, Any]] = None,
) -> None:  # fmt: skip
    """Run the fleet's tasks on this machine until SIGTERM or Ctrl-C (then end gracefully)."""
    from loopctl_fleet import service
    from loopctl_fleet.worker import default_identity, make_worker

    if no_env_config:  # the worker `fleet up` starts: its flags say everything
        fleet_name, config = fleet or "default", None
    else:
        fleet_name, config = fleet_settings(fleet)
    slots = slots or (config.slots if config is not None else 4)
    name = identity or default_identity(fleet_name)
    options = connect_options(
        connection or {}, config, identity=name, use_env=not no_env_config,
        fleet=fleet_name, verify_fleet=False,
    )  # fmt: skip
    where = home or service.fleet_dir(fleet_name) / "worker"

    async def body(client: Client) -> None:
        import signal

        stopping = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        running = make_worker(
            client, task_queue=service.task_queue(fleet_name), home=where, identity=name,
            slots=slots, grace_s=grace, heartbeat_s=heartbeat,
        )  # fmt: skip
        async with running:
            if ready_file is not None:
                service.write_record(
                    ready_file, {"identity": name, "slots": slots, "pid": os.getpid()}
                )
            say(f"Worker {name}: {slots} slots on task queue {service.task_queue(fleet_name)}")
            await stopping.wait()
        say(f"Worker {name} stopped.")

    with_client(options, body)
    finish(0)
