"""``loopctl fleet …``: the fleet's commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    help="Run many loops at once, on one machine or many, on Temporal.",
    no_args_is_help=True,
)


@app.command("check")
def check(task_file: Annotated[Path, typer.Argument(metavar="TASKS.toml")]) -> None:
    """Check a task file as `submit` would, submitting nothing.

    Example: loopctl fleet check tasks.toml
    """
    from loopctl_fleet.taskfile import TaskFileError, read_task_file

    try:
        tasks = read_task_file(task_file)
    except TaskFileError as exc:
        for line in exc.problems:
            typer.echo(line, err=True)
        raise typer.Exit(2) from None
    for task in tasks:
        typer.echo(f"{task.id}: {task.repo} @ {task.base} -> {task.branch}")
