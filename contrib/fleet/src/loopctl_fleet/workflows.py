"""The task's workflow: durable, so a task survives its workers, the server's restarts, and
the machine it was submitted from.

``LoopctlTask`` pins the base commit, runs attempts of the loop until one completes or the
failure class's policy says stop, and keeps its state in the workflow's memo (``fleet status``
reads it without a worker). What happens on a failure is decided here, in code the server
replays, with counts it keeps: ``infrastructure`` by the activity's retry policy (any worker,
backoff), every other class by :func:`loopctl_fleet.classes.policy_for` (``agent_crash``: three
attempts by default; a stuck loop, a bad config or credentials, a spent budget: none).
"""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy as TemporalRetry
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from loopctl_fleet.classes import FailureClass, policy_for
    from loopctl_fleet.lander import LandRequest, PullRequestRef
    from loopctl_fleet.ledger import Grant, Request, Usage
    from loopctl_fleet.model import LoopInput, LoopResult
    from loopctl_fleet.taskfile import LandOptions, TaskSpec

WORKFLOW_NAME = "LoopctlTask"
#: A loop with no wall-clock limit of its own may run this long before the server gives up.
DEFAULT_WALL_CLOCK_S = 24 * 3600.0


@dataclasses.dataclass
class TaskInput:
    """A task as submitted: the spec and how closely the server watches its attempts."""

    spec: TaskSpec
    #: A worker that sends no heartbeat for this long is taken for dead: the attempt is retried.
    heartbeat_timeout_s: float = 30.0
    #: The fleet's ledger workflow (fleet-wide running limit and budget), or None for none.
    ledger_id: str | None = None


@dataclasses.dataclass
class TaskOutcome:
    """How a task ended: ``complete`` (its result is ``result.branch``), ``gave up`` or
    ``failed`` (with the class and reason), or ``cancelled``."""

    state: str
    failure_class: str | None = None
    reason: str = ""
    attempts: int = 0
    result: LoopResult | None = None


@workflow.defn(name=WORKFLOW_NAME)
class LoopctlTask:
    def __init__(self) -> None:
        self.attempt = 0
        self.failures: dict[str, int] = {}
        self.grant: Grant | None = None
        self.spent = Usage("")

    @workflow.signal
    def granted(self, grant: Grant) -> None:
        self.grant = grant

    @workflow.signal
    def held(self, reason: str) -> None:
        if self.grant is None:
            self._memo(f"held: {reason}")

    @workflow.run
    async def run(self, task: TaskInput) -> TaskOutcome:
        self.spent.workflow_id = workflow.info().workflow_id
        self._memo("queued")
        if task.ledger_id is None:
            self.grant = Grant()
            return await self._run(task)
        ledger = workflow.get_external_workflow_handle(task.ledger_id)
        limits = task.spec.settings.get("limits", {})
        await ledger.signal(
            "request",
            Request(self.spent.workflow_id, limits.get("max_cost_usd"), limits.get("max_tokens")),
        )
        try:
            await workflow.wait_condition(lambda: self.grant is not None)
            return await self._run(task)
        finally:
            await ledger.signal("release", self.spent)

    async def _run(self, task: TaskInput) -> TaskOutcome:
        spec = task.spec
        try:
            sha = await workflow.execute_activity(
                "loopctl-fleet.resolve_base",
                spec,
                result_type=str,
                start_to_close_timeout=timedelta(minutes=15),  # a clone may take minutes
                heartbeat_timeout=timedelta(seconds=task.heartbeat_timeout_s),  # a dead worker not
                retry_policy=infrastructure_retry(spec),
            )
            while True:
                result = await self._attempt(task, sha)
                if result.failure_class is None:
                    if spec.land is not None and result.commit:
                        await self._enqueue_landing(task, result)
                    return self._end(
                        TaskOutcome("complete", None, result.reason, self.attempt, result)
                    )
                if not await self._again(spec, result):
                    state = "gave up" if result.failure_class in _GAVE_UP else "failed"
                    return self._end(
                        TaskOutcome(
                            state, result.failure_class, result.reason, self.attempt, result
                        )
                    )
        except (ActivityError, asyncio.CancelledError) as exc:
            if is_cancelled_exception(exc) or not isinstance(exc, ActivityError):
                self._memo("cancelled")  # `fleet cancel`: the loop's tree is gone by now
                raise
            cls, reason = fault_of(exc)
            return self._end(TaskOutcome("failed", cls, reason, self.attempt))

    async def _enqueue_landing(self, task: TaskInput, result: LoopResult) -> None:
        """Hand the result to its landing queue (``[task.fleet] land``), through its pull
        request with ``pr = true``."""
        spec, commit = task.spec, result.commit or ""
        info = workflow.info()
        through = PullRequestRef(spec.branch, commit, result.pull_request_number)
        request = LandRequest(
            spec.id, info.workflow_id, spec.goal, spec, commit,
            spec.land or LandOptions(), task.ledger_id, task.heartbeat_timeout_s,
            root_run_id=info.run_id, pull_request=through if spec.pr else None,
        )  # fmt: skip
        await workflow.execute_activity(
            "loopctl-fleet.enqueue_landing",
            request,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=infrastructure_retry(spec),
        )

    async def _attempt(self, task: TaskInput, sha: str) -> LoopResult:
        self.attempt += 1
        self._memo("running", attempt=self.attempt)
        wall_clock = (
            task.spec.settings.get("limits", {}).get("wall_clock_s") or DEFAULT_WALL_CLOCK_S
        )
        grant = self.grant or Grant()
        result: LoopResult = await workflow.execute_activity(
            "loopctl-fleet.run_loop",
            LoopInput(task.spec, sha, self.attempt, grant.cap_usd, grant.cap_tokens),
            result_type=LoopResult,
            start_to_close_timeout=timedelta(seconds=float(wall_clock) + 900),
            heartbeat_timeout=timedelta(seconds=task.heartbeat_timeout_s),
            retry_policy=infrastructure_retry(task.spec),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
        self.attempt = max(self.attempt, result.attempt)  # with the server's retries in it
        if result.cost_usd is not None:
            self.spent.cost_usd = (self.spent.cost_usd or 0.0) + result.cost_usd
        if result.tokens is not None:
            self.spent.tokens = (self.spent.tokens or 0) + result.tokens
        return result

    async def _again(self, spec: TaskSpec, result: LoopResult) -> bool:
        """Whether the class's policy allows another attempt; waits out its backoff if so."""
        cls = result.failure_class or FailureClass.INFRASTRUCTURE.value
        self.failures[cls] = failures = self.failures.get(cls, 0) + 1
        policy = policy_for(FailureClass(cls), spec.retry)
        if not policy.allows(failures):
            return False
        self._memo(f"retrying: {cls}", reason=result.reason)
        await workflow.sleep(timedelta(seconds=policy.delay_s(failures)))
        return True

    def _end(self, outcome: TaskOutcome) -> TaskOutcome:
        result = outcome.result
        self._memo(
            outcome.state,
            failure_class=outcome.failure_class,
            reason=outcome.reason,
            branch=result.branch if result else None,
            commit=result.commit if result else None,
            pull_request=(result.pull_request or result.pull_request_error) if result else None,
            iterations=result.iterations if result else None,
            tokens=result.tokens if result else None,
            cost_usd=result.cost_usd if result else None,
        )
        return outcome

    def _memo(self, state: str, **more: object) -> None:
        workflow.upsert_memo({"state": state, "attempts": self.attempt, **more})


_GAVE_UP = {FailureClass.GAVE_UP.value, FailureClass.STUCK.value}


def infrastructure_retry(spec: TaskSpec) -> TemporalRetry:
    """Only ``infrastructure`` faults are retried by the server (on any worker); every other
    class an activity raises is final."""
    policy = policy_for(FailureClass.INFRASTRUCTURE, spec.retry)
    return TemporalRetry(
        initial_interval=timedelta(seconds=policy.initial_interval_s),
        backoff_coefficient=policy.backoff,
        maximum_interval=timedelta(seconds=policy.max_interval_s),
        maximum_attempts=policy.max_attempts,
        non_retryable_error_types=[
            c.value for c in FailureClass if c is not FailureClass.INFRASTRUCTURE
        ],
    )


def fault_of(exc: ActivityError) -> tuple[str, str]:
    cause = exc.cause
    if isinstance(cause, ApplicationError):
        return cause.type or FailureClass.INFRASTRUCTURE.value, cause.message
    return FailureClass.INFRASTRUCTURE.value, str(cause or exc)
