"""The worker's side of a task: Temporal activities that check out, run the loop, and commit.

``run_loop`` runs ``loopctl run --json`` in a fresh tree under the guard
(:mod:`loopctl_fleet.guard`), heartbeats its progress from the loop's events (the iteration,
the phase, tokens and cost), and returns how the loop ended; a completed loop's changes become
one commit on ``loopctl/<task id>``. Heartbeats are sent on a clock, not on events: an agent
turn may say nothing for half an hour, and a missed heartbeat is how the server learns that a
worker died. Cancellation arrives with a heartbeat's answer: the guard then ends the loop and
everything it started, and the activity returns only once they are gone.

Failures that are the worker's (git, a full disk, a worker shutting down) raise an
``ApplicationError`` whose type is the failure class, so Temporal's retry policy sends the task
to another worker; a loop that ran and ended without meeting its goal is a result, and the
workflow decides by its class whether to try again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from loopctl_fleet import checkout
from loopctl_fleet.classes import FailureClass, class_of
from loopctl_fleet.model import LoopInput, LoopResult, Progress
from loopctl_fleet.taskfile import TaskSpec, deep_merge

#: The agent errors the engine counts as crashes (``limits.max_agent_crashes``).
_CRASH_KINDS = ("crashed", "invalid_output", "unknown")
#: The loop must never see the Temporal connection's settings (an API key among them).
WITHHELD = ("TEMPORAL_*",)
#: The worker's own credentials that its loop may need (the failure memory's Postgres password,
#: wherever libpq reads it) or that the worker itself uses (``GITHUB_TOKEN``: pull requests, and
#: with ``land`` the base branch) but the agent and the test command never see: added to every
#: task's ``withhold_env``.
AGENT_WITHHELD = ("PGPASSWORD", "PGPASSFILE", "LOOPCTL_FAILURE_MEMORY", "GITHUB_TOKEN")
CONFIG_FILE = "loopctl.toml"
PYPROJECT = "pyproject.toml"


def fault(message: str, failure_class: FailureClass) -> ApplicationError:
    """An error of the worker's side; only ``infrastructure`` is worth another worker."""
    from loopctl import redact

    return ApplicationError(
        redact(message),
        type=failure_class.value,
        non_retryable=failure_class is not FailureClass.INFRASTRUCTURE,
    )


class FleetActivities:
    """The activities of one worker: where it keeps its files, who it is, how long a loop has
    to end once told to."""

    def __init__(
        self, home: Path, worker: str, *, grace_s: float = 10.0, heartbeat_s: float = 5.0
    ) -> None:
        self.home = home
        self.worker = worker
        self.grace_s = grace_s
        self.heartbeat_s = heartbeat_s

    @activity.defn(name="loopctl-fleet.resolve_base")
    async def resolve_base(self, spec: TaskSpec) -> str:
        """The commit the task's base names now (pinned by the workflow for every attempt).
        Heartbeats while git works: a clone may take minutes, a dead worker must not."""
        beating = asyncio.create_task(heartbeat(None, self.heartbeat_s))
        try:
            mirror = await asyncio.to_thread(checkout.update_mirror, self.home, spec.repo)
            return await asyncio.to_thread(checkout.resolve, mirror, spec.repo, spec.base)
        except checkout.GitError as exc:
            raise fault(str(exc), exc.failure_class) from None
        finally:
            beating.cancel()

    @activity.defn(name="loopctl-fleet.run_loop")
    async def run_loop(self, inp: LoopInput) -> LoopResult:
        spec = inp.spec
        info = activity.info()
        # the server's retries (a dead worker's attempt, a worker's fault) are attempts too
        attempt = inp.attempt + max(info.attempt, 1) - 1
        progress = Progress(attempt=attempt, worker=self.worker)
        # from the start: fetching a mirror and making a tree may take a while too
        beating = asyncio.create_task(heartbeat(progress, self.heartbeat_s))
        try:
            earlier = await self._earlier_result(spec)
            if earlier is not None:  # an attempt that died after its push: the task is done
                return LoopResult("complete", 0, "the result was already pushed",
                                  branch=spec.branch, commit=earlier, worker=self.worker,
                                  attempt=attempt, reused=True)  # fmt: skip
            # the run too: `fleet retry` starts a new run of the same id
            name = f"{info.workflow_run_id}-{inp.attempt}-{info.attempt}"
            return await _Attempt(self, inp, self.home / "runs" / spec.id / name, progress).run()
        finally:
            beating.cancel()

    async def _earlier_result(self, spec: TaskSpec) -> str | None:
        """The commit an earlier attempt of this very run pushed, or None; a fault if the
        branch exists but is not this run's result."""
        try:
            sha = await asyncio.to_thread(checkout.existing_result, spec.repo, spec.id)
            if sha is None:
                return None
            mirror = await asyncio.to_thread(checkout.mirror_with, self.home, spec.repo, sha)
            found = await asyncio.to_thread(checkout.trailers_of, mirror, sha)
        except checkout.GitError as exc:
            raise fault(str(exc), exc.failure_class) from None
        if found == {**found, **_own_trailers(spec)}:
            return sha
        raise fault(
            f"the branch {spec.branch} already exists in {spec.repo} and is not this task's "
            f"result (commit {sha[:12]}, {_made_by(found)}): delete that branch, or give the "
            "task another id",
            FailureClass.REPOSITORY,
        )


def _own_trailers(spec: TaskSpec) -> dict[str, str]:
    """The trailers that make a commit this run's result (the workflow id names the fleet)."""
    info = activity.info()
    return {
        checkout.TASK_TRAILER: spec.id,
        checkout.WORKFLOW_TRAILER: info.workflow_id or "",
        checkout.RUN_TRAILER: info.workflow_run_id or "",
    }


def _made_by(trailers: Mapping[str, str]) -> str:
    workflow = trailers.get(checkout.WORKFLOW_TRAILER)
    if workflow:
        return f"made by {workflow}, run {trailers.get(checkout.RUN_TRAILER, '?')}"
    return (
        "not made by a fleet task"
        if checkout.TASK_TRAILER not in trailers
        else "made by an older fleet"
    )


class _Attempt:
    """One attempt on this worker: its tree, its loop, its heartbeats."""

    def __init__(
        self, acts: FleetActivities, inp: LoopInput, attempt_dir: Path, progress: Progress
    ) -> None:
        self.acts = acts
        self.inp = inp
        self.spec = inp.spec
        self.dir = attempt_dir
        self.tree = attempt_dir / "tree"
        self.state = attempt_dir / "state"
        self.progress = progress
        self.loop_end: dict[str, Any] | None = None
        #: Agent turns, and how many of them crashed (the engine's crash kinds).
        self.turns = 0
        self.crashed = 0

    async def run(self) -> LoopResult:
        self.dir.mkdir(parents=True, exist_ok=True)
        try:
            mirror = await asyncio.to_thread(
                checkout.mirror_with, self.acts.home, self.spec.repo, self.inp.sha
            )
            await asyncio.to_thread(checkout.add_worktree, mirror, self.inp.sha, self.tree)
        except checkout.GitError as exc:
            raise fault(str(exc), exc.failure_class) from None
        try:
            self._write_inputs()
            code = await self._run_guarded()
            return await self._result(code)
        finally:
            await asyncio.to_thread(checkout.remove_worktree, mirror, self.tree)

    def _write_inputs(self) -> None:
        import tomli_w

        settings = _merged_settings(self.tree, self.spec.settings, self.inp)
        (self.dir / CONFIG_FILE).write_text(tomli_w.dumps(settings), encoding="utf-8")
        (self.dir / "goal.md").write_text(self.spec.goal, encoding="utf-8")

    def _argv(self) -> list[str]:
        return [
            sys.executable, "-m", "loopctl", "run", "--json", "--plain",
            "--config", str(self.dir / CONFIG_FILE), "--state-dir", str(self.state),
            "--goal-file", str(self.dir / "goal.md"),
        ]  # fmt: skip

    async def _run_guarded(self) -> int:
        from loopctl import child_environment

        env = child_environment(marks(self.spec.id, self.acts.worker), withhold=WITHHELD)
        with (self.dir / "loop.stderr").open("wb") as stderr:
            guard = await start_guarded(
                self._argv(), self.acts.grace_s, cwd=self.tree, env=env, stderr=stderr
            )
        try:
            await self._follow(guard)
            return await guard.wait()
        except asyncio.CancelledError:
            self.progress.phase = "ending"
            await end_guarded(guard)
            if activity.is_worker_shutdown():
                raise fault(
                    "the worker shut down during the loop", FailureClass.INFRASTRUCTURE
                ) from None
            raise

    async def _follow(self, guard: asyncio.subprocess.Process) -> None:
        assert guard.stdout is not None
        async for line in guard.stdout:
            with contextlib.suppress(ValueError):
                self._on_event(json.loads(line))

    def _on_event(self, event: Mapping[str, Any]) -> None:
        kind = event.get("type")
        if kind == "iteration.start":
            self.progress.iteration = int(event.get("iteration") or 0)
        elif kind in ("agent.start", "tests.start"):
            self.progress.phase = "agent" if kind == "agent.start" else "tests"
        elif kind == "agent.end":
            self.turns += 1
            self.crashed += event.get("error_kind") in _CRASH_KINDS
            self.progress.tokens = _add(self.progress.tokens, event.get("tokens"))
            self.progress.cost_usd = _add(self.progress.cost_usd, event.get("cost_usd"))
        elif kind == "loop.end":
            self.loop_end = dict(event)

    async def _result(self, code: int) -> LoopResult:
        end = self.loop_end or {}
        status = str(end.get("status") or "")
        cls = class_of(status or None, code)
        if cls is FailureClass.GAVE_UP and 0 < self.turns == self.crashed:
            # the iterations ran out before max_agent_crashes did: the agent's crash still
            cls = FailureClass.AGENT_CRASH
        result = LoopResult(
            status=status or f"exit {code}",
            exit_code=code,
            reason=str(end.get("message") or end.get("reason") or self._stderr_tail()),
            failure_class=cls.value if cls else None,
            iterations=int(end.get("iterations") or self.progress.iteration),
            tokens=self.progress.tokens,
            cost_usd=self.progress.cost_usd,
            worker=self.acts.worker,
            attempt=self.progress.attempt,
            logs=str(self.dir),
        )
        if cls is None:
            self.progress.phase = "committing"
            result.commit = await self._commit(result)
            result.branch = self.spec.branch
            if self.spec.pr:
                await self._pull_request(result)
        return result

    async def _pull_request(self, result: LoopResult) -> None:
        from loopctl_fleet.pullrequest import PullRequestError, open_pull_request

        body = (
            f"{self.spec.goal.strip()}\n\n---\nloopctl fleet: task `{self.spec.id}`, "
            f"{result.iterations} iteration(s), attempt {self.progress.attempt} on {self.acts.worker}."
        )
        try:
            opened = await asyncio.to_thread(open_pull_request, self.spec, body)
            result.pull_request, result.pull_request_number = opened.url, opened.number
        except PullRequestError as exc:
            result.pull_request_error = str(exc)

    def _stderr_tail(self) -> str:
        """The last line the loop wrote to stderr: why a loop that never started stopped."""
        from loopctl import redact

        try:
            text = (self.dir / "loop.stderr").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return redact(lines[-1][:2000]) if lines else ""

    async def _commit(self, result: LoopResult) -> str:
        trailers = {
            **_own_trailers(self.spec),
            "Loopctl-Attempt": str(self.progress.attempt),
            "Loopctl-Worker": self.acts.worker,
            "Loopctl-Iterations": str(result.iterations),
        }
        title = self.spec.goal.strip().splitlines()[0][:72]
        try:
            made = await asyncio.to_thread(checkout.commit_result, self.tree, title, trailers)
            await asyncio.to_thread(checkout.push_result, self.tree, self.spec.repo, self.spec.id)
        except checkout.GitError as exc:
            raise fault(str(exc), exc.failure_class) from None
        return made


def withheld_from_agents(own: object) -> list[str]:
    """A task's ``withhold_env`` (the repository's and the task's list; anything but a list
    counts as none) with the worker's own credentials (:data:`AGENT_WITHHELD`) added."""
    return list(dict.fromkeys([*(own if isinstance(own, list) else []), *AGENT_WITHHELD]))


def marks(task: str, worker: str) -> dict[str, str]:
    """The environment that marks every process started for ``task`` on ``worker`` (a loop, a
    landing's tests, and all they start: each inherits it)."""
    return {"LOOPCTL_FLEET_TASK": task, "LOOPCTL_FLEET_WORKER": worker}


async def start_guarded(
    command: Sequence[str], grace_s: float, *, cwd: Path, env: Mapping[str, str], stderr: Any
) -> asyncio.subprocess.Process:
    """``command`` under the guard (:mod:`loopctl_fleet.guard`), in a session of its own, its
    output piped to us: it and all it starts end with this worker, however the worker ends (the
    guard's stdin is the lifeline, never written), or when :func:`end_guarded` tells it to."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "loopctl_fleet.guard", "--grace", f"{grace_s:g}", "--", *command,
        cwd=cwd, env=dict(env), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=stderr, start_new_session=True,
    )  # fmt: skip


async def end_guarded(guard: asyncio.subprocess.Process) -> None:
    """Tell the guard to end its command; wait until it has (it kills after its grace)."""
    with contextlib.suppress(ProcessLookupError):
        guard.send_signal(signal.SIGTERM)
    await asyncio.shield(guard.wait())


async def heartbeat(progress: Progress | None, every_s: float) -> None:
    """Heartbeat ``progress`` (or nothing) every ``every_s`` until cancelled."""
    while True:
        activity.heartbeat(*([progress] if progress is not None else []))
        await asyncio.sleep(every_s)


def _merged_settings(tree: Path, settings: Mapping[str, Any], inp: LoopInput) -> dict[str, Any]:
    """The repository's own loopctl settings, the task's over them, the fleet's caps over both."""
    merged = deep_merge(repository_settings(tree), settings)
    withheld = merged.get("withhold_env", [])
    if isinstance(withheld, list):  # anything else: the loop refuses it, and says why
        merged["withhold_env"] = withheld_from_agents(withheld)
    limits = merged.setdefault("limits", {})
    for key, cap in (("max_cost_usd", inp.cap_usd), ("max_tokens", inp.cap_tokens)):
        if cap is not None:
            limits[key] = min(limits.get(key, cap), cap)
    return merged


def repository_settings(tree: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    if (tree / CONFIG_FILE).is_file():
        return tomllib.loads((tree / CONFIG_FILE).read_text(encoding="utf-8"))
    if (tree / PYPROJECT).is_file():
        data = tomllib.loads((tree / PYPROJECT).read_text(encoding="utf-8"))
        return dict(data.get("tool", {}).get("loopctl", {}))
    return {}


def _add(total: Any, more: Any) -> Any:
    if more is None:
        return total
    return more if total is None else total + more
