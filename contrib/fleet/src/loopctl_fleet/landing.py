"""The worker's side of landing: the activities the landing queue (:mod:`loopctl_fleet.lander`)
and a completed task call.

``land_result`` puts a result on its base's current tip in a fresh worktree
(:mod:`loopctl_fleet.landgit`), runs the task's test command on exactly that tree, and only if
it passes updates the base, with a lease on the tip: a base that moved meanwhile is tried again
from its new tip, never overwritten. What lands is the commit the tests passed on.

A result with a pull request (``pr = true``) lands through it: the pull request is checked
first (open, against the base, its head still the result: :func:`pullrequest.landable`), and
the tested commit is pushed to the base and to the pull request's head in one atomic push with
a lease on each; GitHub marks a pull request merged once its head is on its base, which is read
back (:func:`pullrequest.merged`). GitHub's merge API is not used: every merge method it has
makes a new commit, on whatever the base is by then, so what it lands is not what was tested.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from temporalio import activity

from loopctl_fleet import checkout, landgit, pullrequest
from loopctl_fleet.activities import (
    WITHHELD,
    end_guarded,
    fault,
    heartbeat,
    marks,
    repository_settings,
    start_guarded,
    withheld_from_agents,
)
from loopctl_fleet.classes import FailureClass
from loopctl_fleet.lander import (
    CONFLICT,
    LANDED,
    LANDING,
    RED,
    LandOutcome,
    LandRequest,
    PullRequestRef,
    lander_id,
)
from loopctl_fleet.pullrequest import GitHub, NotLandable, PullRequest, PullRequestError
from loopctl_fleet.taskfile import LandOptions, deep_merge

if TYPE_CHECKING:
    from temporalio.client import Client

    from loopctl_fleet.workflows import TaskInput

#: A base that moves this many times in a row while one result is tested on it is given up on
#: for now (an infrastructure fault: the server tries again later).
MAX_ROUNDS = 10
DEFAULT_TEST_TIMEOUT_S = 900.0
#: How much of the test command's output a ``red`` result keeps.
OUTPUT_TAIL_CHARS = 4000


class FleetLanding:
    """The landing activities of one worker."""

    def __init__(
        self, home: Path, worker: str, *, grace_s: float = 10.0, heartbeat_s: float = 5.0
    ) -> None:
        self.home = home
        self.worker = worker
        self.grace_s = grace_s
        self.heartbeat_s = heartbeat_s

    @activity.defn(name="loopctl-fleet.enqueue_landing")
    async def enqueue_landing(self, request: LandRequest) -> None:
        """Hand a completed result to its landing queue."""
        try:
            await enqueue(activity.client(), activity.info().task_queue, request)
        except checkout.GitError as exc:
            raise fault(str(exc), exc.failure_class) from None

    @activity.defn(name="loopctl-fleet.land_result")
    async def land_result(self, request: LandRequest) -> LandOutcome:
        beating = asyncio.create_task(heartbeat(None, self.heartbeat_s))
        try:
            return await self._land(request)
        except checkout.GitError as exc:
            raise fault(str(exc), exc.failure_class) from None
        except PullRequestError as exc:
            raise fault(str(exc), github_class(exc)) from None
        finally:
            beating.cancel()

    async def _land(self, request: LandRequest) -> LandOutcome:
        spec = request.spec
        branch = await asyncio.to_thread(
            landgit.base_branch, spec.repo, request.branch or spec.base
        )
        pull = await self._pull_request(request, branch)
        for _ in range(MAX_ROUNDS):
            mirror = await asyncio.to_thread(checkout.update_mirror, self.home, spec.repo)
            tip = await asyncio.to_thread(
                checkout.resolve, mirror, spec.repo, f"refs/heads/{branch}"
            )
            done = await asyncio.to_thread(landgit.landed_as, mirror, tip, request.commit)
            if done is not None:  # an earlier attempt pushed it and died before saying so
                return await self._landed(
                    request, branch, tip, done, "already on", " (landed earlier)"
                )
            if pull is not None and pull.merged:
                raise NotLandable(
                    f"pull request #{pull.number} was merged outside the fleet, not as the "
                    f"commit tested: {spec.branch} is not landed by the fleet"
                )
            tree = self.home / "land" / f"{spec.id}-{uuid.uuid4().hex[:8]}"
            start = request.commit if request.options.mode == "rebase" else tip
            await asyncio.to_thread(checkout.add_worktree, mirror, start, tree)
            try:
                outcome = await self._try(request, branch, tip, tree)
            finally:
                await asyncio.to_thread(checkout.remove_worktree, mirror, tree)
            if outcome is not None:
                return outcome
        raise fault(
            f"{branch} moved {MAX_ROUNDS} times while {spec.branch} was tested on it",
            FailureClass.INFRASTRUCTURE,
        )

    async def _try(
        self, request: LandRequest, branch: str, tip: str, tree: Path
    ) -> LandOutcome | None:
        """One try on ``tip``: the outcome, or None when the base moved before the push."""
        spec, mode = request.spec, request.options.mode
        title = f"Land {spec.branch}: {spec.goal.strip().splitlines()[0][:60]}"
        conflict = await asyncio.to_thread(landgit.put_on, tree, tip, request.commit, mode, title)
        if conflict is not None:
            from loopctl import redact  # the hunks travel in the server's history

            reason = f"conflict with {branch} at {tip[:12]} in {', '.join(conflict.files)}"
            hunks = redact(conflict.hunks)
            return LandOutcome(CONFLICT, reason, branch, tip, None, conflict.files, hunks)
        landed = await asyncio.to_thread(landgit.head, tree)
        passed, output = await run_tests(
            tree, spec.settings, task=spec.id, worker=self.worker, grace_s=self.grace_s
        )
        if not passed:
            last = output.strip().splitlines()[-1] if output.strip() else "no output"
            reason = f"tests failed on {spec.branch} put on {branch} at {tip[:12]}: {last}"
            return LandOutcome(RED, reason[:500], branch, tip, None, [], output)
        through = request.pull_request
        head = None if through is None else (through.head, through.commit)
        try:
            if not await asyncio.to_thread(landgit.push_base, tree, spec.repo, branch, tip, head):
                return None
        except landgit.HeadMoved as exc:
            assert through is not None
            said = pullrequest.head_moved(
                f"pull request #{through.number}", through.head, through.commit, exc.now
            )
            raise NotLandable(said) from None
        said = "already on" if landed == tip else f"{mode}d onto"
        return await self._landed(request, branch, tip, landed, f"{said}", ", tests passed")

    async def _landed(
        self, request: LandRequest, branch: str, tip: str, landed: str, said: str, more: str = ""
    ) -> LandOutcome:
        """``request``'s result is on ``branch`` as ``landed`` (its pull request, if any, read
        back as merged): its branch deleted if asked."""
        spec, through = request.spec, request.pull_request
        if through is not None:
            more += await asyncio.to_thread(pull_request_merged, spec.repo, through)
        if request.options.delete_branch:
            doomed = {spec.branch: request.commit}
            if through is not None:  # its head is the landed commit now
                doomed[through.head] = landed
            for name, commit in doomed.items():
                await asyncio.to_thread(landgit.delete_branch, spec.repo, name, commit)
        return LandOutcome(LANDED, f"{said} {branch} as {landed[:12]}{more}", branch, tip, landed)

    async def _pull_request(self, request: LandRequest, branch: str) -> PullRequest | None:
        """The pull request ``request`` lands through, checked (:func:`pullrequest.landable`);
        its number kept in the request."""
        through = request.pull_request
        if through is None:
            return None
        github = GitHub.of(request.spec.repo)
        pull = await asyncio.to_thread(
            pullrequest.landable, github, through.head, through.commit, branch, through.number
        )
        request.pull_request = dataclasses.replace(through, number=pull.number)
        return pull


def pull_request_merged(repo: str, through: PullRequestRef) -> str:
    """What a landing says of its pull request once its commit is on the base: merged, or
    why GitHub does not show it so (the landing stands: the base holds the tested commit)."""
    name = f"pull request #{through.number}"
    try:
        if pullrequest.merged(GitHub.of(repo), through.number):
            return f"; {name} merged"
    except PullRequestError as exc:
        return f"; {name} could not be read back: {exc}"
    return f"; GitHub does not show {name} merged yet"


def github_class(exc: PullRequestError) -> FailureClass:
    """The failure class of a GitHub refusal: no answer or a 5xx is worth another try later,
    a refused token is ``auth``, no token (or no GitHub repository) ``config``, the rest
    ``repository``."""
    if exc.transient:
        return FailureClass.INFRASTRUCTURE
    if exc.status in (401, 403):
        return FailureClass.AUTH
    if exc.status is None and not isinstance(exc, NotLandable):
        return FailureClass.CONFIG
    return FailureClass.REPOSITORY


async def enqueue(client: Client, task_queue: str, request: LandRequest) -> None:
    """Signal ``request`` to its landing queue (its base branch's, ``HEAD`` resolved here once),
    starting the queue if it is not running; :class:`checkout.GitError` if ``HEAD`` cannot be
    read."""
    from loopctl_fleet.lander import LANDER_NAME, LanderState

    spec = request.spec
    if not request.branch:
        branch = await asyncio.to_thread(landgit.branch_name, spec.repo, spec.base)
        request = dataclasses.replace(request, branch=branch)
    await client.start_workflow(
        LANDER_NAME,
        LanderState(),
        id=lander_id(task_queue, spec.repo, request.branch),
        task_queue=task_queue,
        start_signal="enqueue",
        start_signal_args=[request],
    )


async def run_tests(
    tree: Path, settings: dict[str, object], *, task: str, worker: str, grace_s: float
) -> tuple[bool, str]:
    """Run the task's test command (the repository's settings under the task's) in ``tree``,
    under the guard as a loop runs (it and all it starts end with this worker, or after
    ``grace_s`` once told to); whether it passed, and the end of its output (redacted)."""
    from loopctl import child_environment, redact

    merged = deep_merge(repository_settings(tree), settings)
    command = merged.get("test_cmd")
    if not isinstance(command, str) or not command.strip():
        raise fault("the task has no test command: nothing lands untested", FailureClass.CONFIG)
    limits = merged.get("limits", {})
    timeout = float(limits.get("test_timeout_s") or DEFAULT_TEST_TIMEOUT_S)
    withheld = [*WITHHELD, *withheld_from_agents(merged.get("withhold_env", []))]
    env = child_environment(marks(task, worker), withhold=withheld)
    guard = await start_guarded(
        ["sh", "-c", command], grace_s, cwd=tree, env=env, stderr=asyncio.subprocess.STDOUT
    )
    assert guard.stdout is not None
    try:  # never communicate(): it would close the guard's stdin, its lifeline
        out = await asyncio.wait_for(guard.stdout.read(), timeout)
        await guard.wait()
    except asyncio.TimeoutError:
        return False, f"the test command took over {timeout:g} s"
    finally:  # whatever the tests left running ends with them (the guard ends it all)
        await end_guarded(guard)
    text = out.decode("utf-8", "replace")[-OUTPUT_TAIL_CHARS:]
    return guard.returncode == 0, redact(text)


#: A follow-up task's id (``<task>.land<N>-<run>``, :func:`loopctl_fleet.lander.follow_up_id`;
#: without ``-<run>`` if queued by an older worker): it lands for its task, never on its own.
FOLLOW_UP_ID = re.compile(r"\.land\d+(-[0-9a-f]+)?$")


async def land_rows(
    client: Client, fleet: str, named: list[str], flags: dict[str, Any]
) -> tuple[list[str], list[str]]:
    """Hand ``named`` tasks' results (or every complete result not handed yet) to their landing
    queues, in the order they completed; what was queued and what was refused, a line each."""
    from loopctl_fleet.service import task_queue
    from loopctl_fleet.status import list_rows

    rows = {row.task: row for row in await list_rows(client, fleet)}
    refused = [f"no task {task!r} in fleet {fleet!r}" for task in named if task not in rows]
    chosen = [rows[t] for t in named if t in rows] if named else [
        row for row in rows.values() if row.state == "complete" and not FOLLOW_UP_ID.search(row.task)
    ]  # fmt: skip
    queued = []
    for row in sorted(chosen, key=lambda r: r.closed or ""):
        if (
            not row.commit
            or row.state in (LANDED, LANDING)
            or (row.land is None and row.state != "complete")
        ):
            refused.append(
                f"{row.task} is {row.state}: only a complete result not landed yet lands"
            )
            continue
        if FOLLOW_UP_ID.search(row.task):
            refused.append(f"{row.task} is a follow-up task: it lands for its task, not alone")
            continue
        started = await task_input(client, row.workflow_id, row.run_id)
        spec = started.spec
        given = {key: value for key, value in flags.items() if value is not None}
        options = dataclasses.replace(spec.land or LandOptions(), **given)
        request = LandRequest(
            spec.id, row.workflow_id, spec.goal, spec, row.commit, options,
            started.ledger_id, started.heartbeat_timeout_s, root_run_id=row.run_id,
            pull_request=PullRequestRef(spec.branch, row.commit) if spec.pr else None,
        )  # fmt: skip
        try:
            await enqueue(client, task_queue(fleet), request)
        except checkout.GitError as exc:
            refused.append(f"{row.task}: {exc}")
            continue
        queued.append(f"{row.task}: queued to land {spec.branch} on {spec.base}")
    return queued, refused


async def task_input(client: Client, workflow_id: str, run_id: str) -> TaskInput:
    """What a task's workflow was started with (its first event)."""
    from loopctl_fleet.workflows import TaskInput

    handle = client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in handle.fetch_history_events():
        payloads = event.workflow_execution_started_event_attributes.input.payloads
        [started] = await client.data_converter.decode(payloads, [TaskInput])
        return started  # type: ignore[no-any-return]
    raise RuntimeError(f"{workflow_id} has no history")
