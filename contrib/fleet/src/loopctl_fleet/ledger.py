"""The fleet's ledger: how many loops may run at once across every worker, and what the whole
fleet may spend. Temporal has no fleet-wide concurrency limit (a worker's slots limit only that
worker), so one long-running workflow per fleet keeps the count and the budget, durably.

A task asks the ledger before its first attempt (signal ``request``) and waits for a grant
(signal back ``grant``); the grant carries the task's caps: its own ``max_cost_usd`` and
``max_tokens``, cut to what the fleet has left, so a running loop cannot spend past the budget by
more than its last iteration. When the task ends it signals ``release`` with what it spent. A
request the ledger cannot grant waits, and the task's memo says why (``held: fleet budget spent
($10.00 of $10.00)``); raising the limits (signal ``set_limits``) grants it. A task that is
terminated never releases: every minute the ledger asks an activity which holders have closed,
and frees their slots.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from temporalio import activity, workflow

if TYPE_CHECKING:
    from temporalio.client import Client

LEDGER_NAME = "LoopctlFleetLedger"
SWEEP_EVERY = timedelta(seconds=60)


@dataclasses.dataclass
class Limits:
    """The fleet's limits; None means no limit."""

    max_running: int | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None


@dataclasses.dataclass
class Request:
    workflow_id: str
    #: The task's own caps (its limits.max_cost_usd / max_tokens), None if it has none.
    max_cost_usd: float | None = None
    max_tokens: int | None = None


@dataclasses.dataclass
class Grant:
    cap_usd: float | None = None
    cap_tokens: int | None = None


@dataclasses.dataclass
class Usage:
    workflow_id: str
    cost_usd: float | None = None
    tokens: int | None = None


@dataclasses.dataclass
class LedgerState:
    limits: Limits = dataclasses.field(default_factory=Limits)
    spent_usd: float = 0.0
    spent_tokens: int = 0
    #: Tasks that used no cost or token figure (command agents): their spending is unknown.
    unknown_usage: int = 0
    #: Running tasks and the grant each holds.
    holders: dict[str, Grant] = dataclasses.field(default_factory=dict)
    #: Tasks waiting for a grant, first come first served.
    waiting: list[Request] = dataclasses.field(default_factory=list)


@workflow.defn(name=LEDGER_NAME)
class FleetLedger:
    # The input is taken in __init__ (workflow.init), not in run: a signal that arrives with the
    # start (the first tasks' requests) is handled before run begins, and must meet the limits
    # it was started with, not a default state that run would then overwrite.
    @workflow.init
    def __init__(self, state: LedgerState) -> None:
        self.state = state
        self._signals: set[asyncio.Task[None]] = set()
        #: What each waiting task was last told holds it (told again only when that changes).
        self._told: dict[str, str] = {}

    @workflow.run
    async def run(self, state: LedgerState) -> None:
        self._grant_waiting()
        while True:
            try:
                await workflow.wait_condition(self._suggest_new_run, timeout=SWEEP_EVERY)
            except asyncio.TimeoutError:
                await self._sweep()
                continue
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(self.state)

    def _suggest_new_run(self) -> bool:
        return workflow.info().is_continue_as_new_suggested()

    @workflow.signal
    def request(self, request: Request) -> None:
        if request.workflow_id not in self.state.holders and all(
            w.workflow_id != request.workflow_id for w in self.state.waiting
        ):
            self.state.waiting.append(request)
        self._grant_waiting()

    @workflow.signal
    def release(self, usage: Usage) -> None:
        self.state.holders.pop(usage.workflow_id, None)
        self.state.waiting = [w for w in self.state.waiting if w.workflow_id != usage.workflow_id]
        self._told.pop(usage.workflow_id, None)
        if usage.cost_usd is None and usage.tokens is None:
            self.state.unknown_usage += 1
        self.state.spent_usd += usage.cost_usd or 0.0
        self.state.spent_tokens += usage.tokens or 0
        self._grant_waiting()

    @workflow.signal
    def set_limits(self, limits: Limits) -> None:
        """New limits (a signal: kept by the server until a worker runs the ledger)."""
        self.state.limits = limits
        self._grant_waiting()

    @workflow.query
    def current(self) -> LedgerState:
        return self.state

    def _grant_waiting(self) -> None:
        self._grant_what_can_start()
        workflow.upsert_memo(memo_of(self.state, self.held_because()))

    def _grant_what_can_start(self) -> None:
        while self.state.waiting:
            reason = self.held_because()
            first = self.state.waiting[0]
            if reason:  # every waiting task says why it waits, not only the first
                for waiting in self.state.waiting:
                    if self._told.get(waiting.workflow_id) != reason:
                        self._told[waiting.workflow_id] = reason
                        self._tell(waiting.workflow_id, "held", reason)
                return
            self.state.waiting.pop(0)
            self._told.pop(first.workflow_id, None)
            grant = self._grant_for(first)
            self.state.holders[first.workflow_id] = grant
            self._tell(first.workflow_id, "granted", grant)

    def held_because(self) -> str:
        """Why no task may start now, or ""."""
        limits, state = self.state.limits, self.state
        if limits.max_running is not None and len(state.holders) >= limits.max_running:
            return f"the fleet runs {len(state.holders)} of at most {limits.max_running} loops"
        if limits.budget_usd is not None and self._left_usd() <= 0:
            return f"fleet budget spent (${state.spent_usd:.2f} of ${limits.budget_usd:.2f})"
        if limits.budget_tokens is not None and self._left_tokens() <= 0:
            return f"fleet token budget spent ({state.spent_tokens:,} of {limits.budget_tokens:,})"
        return ""

    def _left_usd(self) -> float:
        reserved = sum(g.cap_usd or 0.0 for g in self.state.holders.values())
        return (self.state.limits.budget_usd or 0.0) - self.state.spent_usd - reserved

    def _left_tokens(self) -> int:
        reserved = sum(g.cap_tokens or 0 for g in self.state.holders.values())
        return (self.state.limits.budget_tokens or 0) - self.state.spent_tokens - reserved

    def _grant_for(self, request: Request) -> Grant:
        limits = self.state.limits
        cap_usd = request.max_cost_usd
        if limits.budget_usd is not None:
            left = self._left_usd()
            cap_usd = left if cap_usd is None else min(cap_usd, left)
        cap_tokens = request.max_tokens
        if limits.budget_tokens is not None:
            left_tokens = self._left_tokens()
            cap_tokens = left_tokens if cap_tokens is None else min(cap_tokens, left_tokens)
        return Grant(cap_usd, cap_tokens)

    def _tell(self, workflow_id: str, signal: str, arg: object) -> None:
        handle = workflow.get_external_workflow_handle(workflow_id)
        sending = asyncio.create_task(_signal(handle, signal, arg))
        self._signals.add(sending)
        sending.add_done_callback(self._signals.discard)

    async def _sweep(self) -> None:
        holders = list(self.state.holders)
        if not holders:
            return
        closed = await workflow.execute_activity(
            "loopctl-fleet.closed_workflows",
            holders,
            result_type=list[str],
            start_to_close_timeout=timedelta(seconds=30),
        )
        for workflow_id in closed:
            self.release(Usage(workflow_id))


def ledger_id(fleet: str) -> str:
    """The ledger workflow's id for ``fleet``."""
    return f"loopctl-fleet-{fleet}-ledger"


def memo_of(state: LedgerState, held: str) -> dict[str, object]:
    """The ledger's figures as its memo (``fleet status`` reads it with no worker running)."""
    limits = state.limits
    return {
        "running": len(state.holders),
        "waiting": len(state.waiting),
        "max_running": limits.max_running,
        "budget_usd": limits.budget_usd,
        "budget_tokens": limits.budget_tokens,
        "spent_usd": round(state.spent_usd, 6),
        "spent_tokens": state.spent_tokens,
        "unknown_usage": state.unknown_usage,
        "held": held,
    }


def describe_memo(memo: Mapping[str, Any]) -> str:
    """The ledger's memo in one line for people."""
    running, most = memo.get("running", 0), memo.get("max_running")
    parts = [f"{running} running" + (f" of at most {most}" if most is not None else "")]
    waiting = memo.get("waiting", 0)
    if waiting:
        parts.append(f"{waiting} waiting")
    spent, budget = float(memo.get("spent_usd") or 0), memo.get("budget_usd")
    if budget is not None:
        parts.append(f"${spent:.2f} of ${float(budget):.2f} spent")
    elif spent:
        parts.append(f"${spent:.2f} spent")
    tokens, token_budget = memo.get("spent_tokens") or 0, memo.get("budget_tokens")
    if token_budget is not None:
        parts.append(f"{tokens:,} of {token_budget:,} tokens")
    elif tokens:
        parts.append(f"{tokens:,} tokens")
    if memo.get("unknown_usage"):
        parts.append(f"usage unknown for {memo['unknown_usage']} task(s)")
    held = memo.get("held")
    return "; ".join(parts) + (f" — no new loop starts: {held}" if held and waiting else "")


async def ensure_ledger(client: Client, fleet: str, task_queue: str) -> str:
    """Start ``fleet``'s ledger unless it runs; its id."""
    from temporalio.common import WorkflowIDConflictPolicy

    await client.start_workflow(
        FleetLedger.run,
        LedgerState(),
        id=ledger_id(fleet),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return ledger_id(fleet)


async def _signal(
    handle: workflow.ExternalWorkflowHandle[object], signal: str, arg: object
) -> None:
    try:
        await handle.signal(signal, arg)
    except Exception:  # noqa: BLE001 - a task that ended meanwhile; the sweep frees its slot
        workflow.logger.info("could not signal %s", handle.id)


@activity.defn(name="loopctl-fleet.closed_workflows")
async def closed_workflows(workflow_ids: list[str]) -> list[str]:
    """Which of these workflows have closed (completed, failed, cancelled, terminated)."""
    from temporalio.client import WorkflowExecutionStatus

    client = activity.client()
    closed = []
    for workflow_id in workflow_ids:
        try:
            description = await client.get_workflow_handle(workflow_id).describe()
        except Exception:  # noqa: BLE001 - gone from the server altogether
            closed.append(workflow_id)
            continue
        if description.status != WorkflowExecutionStatus.RUNNING:
            closed.append(workflow_id)
    return closed
