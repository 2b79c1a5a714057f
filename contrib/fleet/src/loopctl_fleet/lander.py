"""The landing queue: one workflow per repository and base, landing results one at a time.

A completed result is signalled to its queue (``enqueue``; signal-with-start, so the queue
exists as soon as something is to land, and a second ``fleet land`` of the same base joins the
same queue instead of racing it). The queue lands its results in the order they arrived, each
with the ``land_result`` activity (:mod:`loopctl_fleet.landing`): put on the base's tip, tested
there, pushed with a lease. A conflict, or tests that fail on the tip, becomes a follow-up task
(a child ``LoopctlTask`` ``<task>.land<N>-<run>``, :func:`follow_up_id`, based on the base branch, the conflict or the
failure in its goal); its result joins the queue when it completes. After ``land_attempts``
follow-ups the result ends ``conflict`` or ``red``.

Each result's landing state is a key of the queue's memo (the task's id → state, reason,
commit, follow-up), so ``fleet status`` reads it from the server without a worker.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.exceptions import (
    ActivityError,
    ChildWorkflowError,
    WorkflowAlreadyStartedError,
)

with workflow.unsafe.imports_passed_through():
    from loopctl_fleet.taskfile import LandOptions, TaskSpec

LANDER_NAME = "LoopctlLander"
LANDED, LANDING, CONFLICT, RED, NOT_LANDED = "landed", "landing", "conflict", "red", "not landed"
#: How long one landing may take, beyond the test command's own limit.
LAND_SLACK_S = 1800.0


@dataclasses.dataclass
class PullRequestRef:
    """The pull request a result lands through (``pr = true``): its head branch (the root
    task's result branch, which its follow-ups land through too), the commit that head had when
    the result was queued (the lease: a head someone pushed to is not landed), and its number
    (``0``: found by its head branch)."""

    head: str
    commit: str
    number: int = 0


@dataclasses.dataclass
class LandRequest:
    """A result to land: ``spec``'s commit, landed for task ``root`` (the task itself, or the
    task a follow-up works for)."""

    root: str
    #: The root task's workflow id (a follow-up's is ``<it>.land<N>-<run>``).
    root_workflow_id: str
    #: The root task's goal: every follow-up's goal starts from it.
    root_goal: str
    spec: TaskSpec
    commit: str
    options: LandOptions = dataclasses.field(default_factory=LandOptions)
    ledger_id: str | None = None
    heartbeat_timeout_s: float = 30.0
    #: Follow-up tasks run so far for the root.
    follow_ups: int = 0
    #: The branch it lands on (``spec.base``, with ``HEAD`` resolved to the repository's default
    #: branch once, when it is queued): the queue's key, so one branch has one queue.
    branch: str = ""
    #: The root task's run (``fleet retry`` makes another of the same id): its follow-ups'
    #: ids name it (:func:`follow_up_id`).
    root_run_id: str = ""
    #: The pull request it lands through, or None: it is pushed to the base.
    pull_request: PullRequestRef | None = None


@dataclasses.dataclass
class LandOutcome:
    """How one try to land ended: ``landed`` (``commit`` is on ``branch``), ``conflict`` or
    ``red`` (``detail``: the conflict hunks or the test output, for a follow-up's goal)."""

    state: str
    reason: str
    branch: str
    tip: str = ""
    commit: str | None = None
    files: list[str] = dataclasses.field(default_factory=list)
    detail: str = ""


@dataclasses.dataclass
class LanderState:
    queue: list[LandRequest] = dataclasses.field(default_factory=list)
    #: Each root task's landing state, as in the memo.
    results: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)


def lander_id(task_queue: str, repo: str, branch: str) -> str:
    """The queue's workflow id: one per fleet (task queue), repository and base branch (never a
    name for it such as ``HEAD`` or ``refs/heads/main``: one branch, one queue)."""
    digest = hashlib.sha256(f"{repo}\0{branch}".encode()).hexdigest()[:16]
    return f"loopctl-land-{task_queue}-{digest}"


@workflow.defn(name=LANDER_NAME)
class LoopctlLander:
    # the input in __init__ (workflow.init): the start signal is handled before run begins
    @workflow.init
    def __init__(self, state: LanderState) -> None:
        self.state = state
        self.following: set[asyncio.Task[None]] = set()

    @workflow.signal
    def enqueue(self, request: LandRequest) -> None:
        self.state.queue.append(request)
        self._note(request.root, LANDING, f"queued to land {request.spec.branch}")

    @workflow.query
    def results(self) -> dict[str, dict[str, Any]]:
        return self.state.results

    @workflow.run
    async def run(self, state: LanderState) -> None:
        if self.state.results:
            workflow.upsert_memo(self.state.results)
        while True:
            await workflow.wait_condition(lambda: bool(self.state.queue) or self._may_rest())
            if self.state.queue:
                await self._land(self.state.queue[0])
                self.state.queue.pop(0)
                continue
            await workflow.wait_condition(workflow.all_handlers_finished)
            if not self.state.queue:
                workflow.continue_as_new(self.state, memo=self.state.results)

    def _may_rest(self) -> bool:
        return not self.following and workflow.info().is_continue_as_new_suggested()

    async def _land(self, request: LandRequest) -> None:
        with workflow.unsafe.imports_passed_through():
            from loopctl_fleet.workflows import fault_of, infrastructure_retry

        self._note(request.root, LANDING, f"landing {request.spec.branch}")
        limits = request.spec.settings.get("limits", {})
        try:
            outcome: LandOutcome = await workflow.execute_activity(
                "loopctl-fleet.land_result",
                request,
                result_type=LandOutcome,
                start_to_close_timeout=timedelta(
                    seconds=float(limits.get("test_timeout_s") or 900.0) + LAND_SLACK_S
                ),
                heartbeat_timeout=timedelta(seconds=request.heartbeat_timeout_s),
                retry_policy=infrastructure_retry(request.spec),
            )
        except ActivityError as exc:
            self._note(request.root, NOT_LANDED, fault_of(exc)[1])
            return
        if outcome.state == LANDED:
            self._note(request.root, LANDED, outcome.reason, commit=outcome.commit)
        elif request.follow_ups < request.options.attempts:
            await self._follow_up(request, outcome)
        else:
            tried = f" (after {request.follow_ups} follow-up task(s))" if request.follow_ups else ""
            self._note(request.root, outcome.state, outcome.reason + tried)

    async def _follow_up(self, request: LandRequest, outcome: LandOutcome) -> None:
        with workflow.unsafe.imports_passed_through():
            from loopctl_fleet.status import task_memo
            from loopctl_fleet.workflows import WORKFLOW_NAME, TaskInput, TaskOutcome

        n = request.follow_ups + 1
        spec = dataclasses.replace(
            request.spec,
            id=follow_up_id(request.root, n, request.root_run_id),
            base=outcome.branch,
            goal=follow_up_goal(request, outcome),
            land=None,
            pr=False,
        )
        try:
            handle = await workflow.start_child_workflow(
                WORKFLOW_NAME,
                TaskInput(spec, request.heartbeat_timeout_s, request.ledger_id),
                id=follow_up_id(request.root_workflow_id, n, request.root_run_id),
                memo=task_memo(spec),
                result_type=TaskOutcome,
                parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            )
        except WorkflowAlreadyStartedError:
            said = f"{outcome.reason}; its follow-up task {spec.id} is running already"
            self._note(request.root, outcome.state, said)
            return
        self._note(
            request.root, LANDING, f"{outcome.reason}: follow-up task {spec.id}", follow_up=spec.id
        )
        following = asyncio.create_task(self._await_follow_up(handle, request, outcome, spec, n))
        self.following.add(following)
        following.add_done_callback(self.following.discard)

    async def _await_follow_up(
        self, handle: Any, request: LandRequest, why: LandOutcome, spec: TaskSpec, n: int
    ) -> None:
        try:
            done = await handle
            state, reason, commit = done.state, done.reason, done.result and done.result.commit
        except ChildWorkflowError as exc:
            state, reason, commit = "failed", str(exc.cause or exc), None
        if state == "complete" and commit:
            again = dataclasses.replace(request, spec=spec, commit=commit, follow_ups=n)
            self.enqueue(again)
            return
        self._note(
            request.root,
            why.state,
            f"{why.reason}; follow-up task {spec.id} ended {state}: {reason}",
            follow_up=spec.id,
        )

    def _note(self, root: str, state: str, reason: str, **more: Any) -> None:
        entry = {**self.state.results.get(root, {}), "state": state, "reason": reason[:2000]}
        entry.update(more)
        self.state.results[root] = entry
        workflow.upsert_memo({root: entry})


#: How much of the root task's run id a follow-up's id carries.
RUN_CHARS = 8


def follow_up_id(root: str, n: int, root_run_id: str) -> str:
    """The id of the ``n``-th follow-up task of ``root`` (a task id, or its workflow id) in the
    root's run ``root_run_id``: ``<root>.land<n>-<run>``. A task run again (``fleet retry``)
    gets follow-ups of its own, never one of an earlier run (whose result branch may exist)."""
    run = root_run_id.replace("-", "")[:RUN_CHARS]
    return f"{root}.land{n}" + (f"-{run}" if run else "")


def follow_up_goal(request: LandRequest, outcome: LandOutcome) -> str:
    """A follow-up agent's goal: the task's goal, and what kept its result from landing."""
    if outcome.state == CONFLICT:
        problem = (
            f"The result of this task conflicts with `{outcome.branch}` as it is now "
            f"(commit {outcome.tip[:12]}), in: {', '.join(outcome.files)}.\n"
            "Your tree is that branch now. Make the task's change again on it, keeping what "
            "the branch has. The conflicting hunks were:\n\n```diff\n"
            f"{outcome.detail.rstrip()}\n```\n"
        )
    else:
        problem = (
            f"The result of this task was put on `{outcome.branch}` as it is now "
            f"(commit {outcome.tip[:12]}), and the tests failed there.\n"
            "Your tree is that branch now. Make the task's change again on it so that the "
            "tests pass. The tests said:\n\n```\n"
            f"{outcome.detail.rstrip()}\n```\n"
        )
    return (
        f"{request.root_goal.rstrip()}\n\n## Landing this task's result (follow-up "
        f"{request.follow_ups + 1} of {request.options.attempts})\n\n{problem}"
    )
