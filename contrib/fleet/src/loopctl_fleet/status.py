"""``loopctl fleet status`` and ``logs``: the fleet's tasks as rows, read from the server alone.

Every task is one workflow ``loopctl-task-<fleet>-<id>`` on the task queue ``loopctl-<fleet>``.
The server lists them with their memo (the state, figures, branch and reason the workflow keeps
there as it goes), so no worker has to answer; a running task's live progress (iteration, phase,
tokens, cost, worker) is the last heartbeat of its loop's activity, read with ``describe()``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client, WorkflowExecution, WorkflowHandle

    from loopctl_fleet.taskfile import TaskSpec

WORKFLOW_PREFIX = "loopctl-task-"
COLUMNS = ("task", "state", "iteration", "tokens", "cost", "branch", "reason")
#: Memo states that mean the workflow still runs; a closed workflow's own status wins over them.
_OPEN_STATES = ("queued", "running")


def workflow_id(fleet: str, task: str) -> str:
    return f"{WORKFLOW_PREFIX}{fleet}-{task}"


def task_query(fleet: str) -> str:
    from loopctl_fleet.service import task_queue

    return f"WorkflowType = 'LoopctlTask' AND TaskQueue = '{task_queue(fleet)}'"


def task_memo(spec: TaskSpec) -> dict[str, Any]:
    """A task's memo as submitted (the workflow adds to it as it goes)."""
    goal = spec.goal.strip().splitlines()[0][:200] if spec.goal.strip() else ""
    return {"state": "queued", "goal": goal, "repo": spec.repo, "digest": spec.digest()}


@dataclasses.dataclass
class TaskRow:
    """One task (one run of its workflow) as ``fleet status`` shows it."""

    task: str
    state: str
    iteration: int | None = None
    tokens: int | None = None
    cost_usd: float | None = None
    branch: str | None = None
    reason: str = ""
    attempts: int = 0
    #: The result commit (a complete task).
    commit: str | None = None
    worker: str | None = None
    phase: str | None = None
    failure_class: str | None = None
    goal: str = ""
    repo: str = ""
    workflow_id: str = ""
    run_id: str = ""
    started: str | None = None
    closed: str | None = None
    #: A complete result's landing (``[task.fleet] land``, ``fleet land``): its state, reason,
    #: landed commit and follow-up task; None if it was never handed to a landing queue.
    land: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


async def list_rows(
    client: Client, fleet: str, *, task: str | None = None, every_run: bool = False
) -> list[TaskRow]:
    """The fleet's tasks, oldest first: each task's latest run, or ``every_run``."""
    query = task_query(fleet)
    if task is not None:
        query += f" AND WorkflowId = '{workflow_id(fleet, task)}'"
    executions = [execution async for execution in client.list_workflows(query)]
    executions.sort(key=lambda e: (e.start_time, e.id))
    if not every_run:
        latest = {e.id: e for e in executions}  # sorted by start: the last one wins
        executions = sorted(latest.values(), key=lambda e: (e.start_time, e.id))
    rows = []
    for execution in executions:
        row = await row_of(client, fleet, execution)
        rows.append(row)
    landings = await landing_states(client, fleet)
    for row in rows:
        add_landing(row, landings.get(row.task))
    return rows


async def landing_states(client: Client, fleet: str) -> dict[str, dict[str, Any]]:
    """Each result's landing, as the fleet's landing queues keep it in their memos."""
    from loopctl_fleet.lander import LANDER_NAME
    from loopctl_fleet.service import task_queue

    query = (
        f"WorkflowType = '{LANDER_NAME}' AND TaskQueue = '{task_queue(fleet)}' "
        "AND ExecutionStatus = 'Running'"
    )
    found: dict[str, dict[str, Any]] = {}
    async for execution in client.list_workflows(query):
        found.update(await execution.memo())
    return found


def add_landing(row: TaskRow, landing: Mapping[str, Any] | None) -> None:
    """A complete row's state becomes its landing's (landed, landing, conflict, red)."""
    if not isinstance(landing, Mapping) or row.state != "complete":
        return
    row.land = dict(landing)
    row.state = str(landing.get("state") or "landing")
    row.reason = str(landing.get("reason") or row.reason)


async def row_of(client: Client, fleet: str, execution: WorkflowExecution) -> TaskRow:
    from temporalio.client import WorkflowExecutionStatus as Status

    memo = await execution.memo()
    prefix = workflow_id(fleet, "")
    row = TaskRow(
        task=execution.id.removeprefix(prefix),
        state=str(memo.get("state") or "queued"),
        iteration=memo.get("iterations"),
        tokens=memo.get("tokens"),
        cost_usd=memo.get("cost_usd"),
        branch=memo.get("branch"),
        commit=memo.get("commit"),
        reason=str(memo.get("reason") or ""),
        attempts=int(memo.get("attempts") or 0),
        failure_class=memo.get("failure_class"),
        goal=str(memo.get("goal") or ""),
        repo=str(memo.get("repo") or ""),
        workflow_id=execution.id,
        run_id=execution.run_id,
        started=_iso(execution.start_time),
        closed=_iso(execution.close_time),
    )
    if execution.status == Status.RUNNING:
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        await _add_progress(client, handle, row)
    elif row.state in _OPEN_STATES or row.state.startswith("retrying"):
        name = execution.status.name if execution.status is not None else ""
        row.state = _CLOSED_NAMES.get(name, "ended")  # the workflow ended without saying how
    if row.state in ("gave up", "failed") and row.failure_class:
        row.state = f"{row.state}: {row.failure_class}"
    return row


_CLOSED_NAMES = {
    "COMPLETED": "complete",
    "FAILED": "failed",
    "CANCELED": "cancelled",
    "TERMINATED": "terminated",
    "TIMED_OUT": "timed out",
    "CONTINUED_AS_NEW": "continued",
}


async def _add_progress(client: Client, handle: WorkflowHandle[Any, Any], row: TaskRow) -> None:
    """The live figures of a running task: its loop activity's last heartbeat."""
    description = await handle.describe()
    for pending in description.raw_description.pending_activities:
        dead = _dead_worker(pending)
        if not pending.activity_type.name.endswith("run_loop"):
            if dead is not None:
                row.state = f"{row.state} (resolving the base: {dead})"
            continue
        details: list[Any] = []
        if pending.heartbeat_details.payloads:
            details = await client.data_converter.decode(pending.heartbeat_details.payloads)
        progress = details[0] if details and isinstance(details[0], dict) else {}
        row.worker = progress.get("worker") or pending.last_worker_identity or None
        row.iteration = progress.get("iteration", row.iteration)
        row.tokens = progress.get("tokens", row.tokens)
        row.cost_usd = progress.get("cost_usd", row.cost_usd)
        row.phase = progress.get("phase")
        if row.state == "running":
            row.state = _running_state(pending, progress, row, dead)
        return


def _running_state(pending: Any, progress: dict[str, Any], row: TaskRow, dead: str | None) -> str:
    """A started task's state: running on a worker, or queued until a worker takes its loop
    (every slot busy, a backoff, a dead worker): only loops on a worker count as running."""
    from temporalio.api.enums.v1 import PendingActivityState

    attempt = progress.get("attempt") or row.attempts or 1
    if dead:
        return f"queued (attempt {attempt}: {dead})"
    if pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED:
        row.worker = None
        return f"queued (attempt {attempt}: waiting for a free worker slot)"
    return f"running (attempt {attempt} on {row.worker or 'a worker'})"


def _dead_worker(pending: Any) -> str | None:
    """What a pending activity waits for when its last worker stopped heartbeating (the server
    took it for dead, and waits for another worker to take the activity), else None."""
    from temporalio.api.enums.v1 import PendingActivityState, TimeoutType

    failure = pending.last_failure
    if (
        pending.state != PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
        or not failure.HasField("timeout_failure_info")
        or failure.timeout_failure_info.timeout_type != TimeoutType.TIMEOUT_TYPE_HEARTBEAT
    ):
        return None
    who = pending.last_worker_identity or "its worker"
    return f"{who} stopped answering, taken for dead; waiting for another worker"


def _iso(when: Any) -> str | None:
    return when.isoformat() if when is not None else None


# --- rendering -------------------------------------------------------------------------------


def cells(row: TaskRow) -> list[str]:
    """The row's columns as text (``-`` for what is not known)."""
    from loopctl import redact, sanitize

    def text(value: Any) -> str:
        return "-" if value in (None, "") else sanitize(redact(str(value)))

    cost = None if row.cost_usd is None else f"${row.cost_usd:.2f}"
    reason = (
        row.reason.strip().splitlines()[0] if row.reason.strip() else ""
    )  # whole: rich folds it
    return [
        text(row.task),
        text(row.state),
        text(row.iteration),
        text(row.tokens),
        text(cost),
        text(row.branch),
        text(reason),
    ]


def plain_table(rows: list[TaskRow]) -> str:
    """The rows as aligned plain text, a header first (for pipes and files)."""
    table = [[c.upper() for c in COLUMNS], *(cells(row) for row in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in table
    )


def rich_table(rows: list[TaskRow]) -> Any:
    from rich.table import Table

    table = Table(box=None, header_style="bold")
    for column in COLUMNS:
        table.add_column(column, overflow="fold", justify="right" if column in _NUMBERS else "left")
    for row in rows:
        table.add_row(*cells(row), style=_STYLES.get(row.state.split(":")[0].split(" (")[0]))
    return table


_NUMBERS = ("iteration", "tokens", "cost")
_STYLES = {
    "complete": "green", "landed": "green", "failed": "red", "conflict": "red", "red": "red",
    "not landed": "red", "gave up": "yellow", "cancelled": "dim",
}  # fmt: skip


def fleet_summary(rows: list[TaskRow], ledger: Mapping[str, Any]) -> str:
    """The ledger's line, with running counted from ``rows`` (loops on a worker now): the
    ledger counts the tasks it let start, some of which may wait for a free worker slot."""
    from loopctl_fleet.ledger import describe_memo

    return describe_memo(_counted(rows, ledger))


def fleet_json(name: str, rows: list[TaskRow], ledger: Mapping[str, Any]) -> dict[str, Any]:
    """``status --json``'s fleet: the ledger's figures (running counted as in the line) and the
    line itself (``summary``; null before the fleet has a ledger)."""
    from loopctl import redact

    figures = _counted(rows, ledger) if ledger else {}
    summary = redact(fleet_summary(rows, ledger)) if ledger else None
    return {"name": name, **figures, "summary": summary}


def _counted(rows: list[TaskRow], ledger: Mapping[str, Any]) -> dict[str, Any]:
    return {**ledger, "running": sum(row.state.startswith("running") for row in rows)}
