"""What travels between the fleet's client, its workflows and its activities: plain dataclasses
(Temporal's default converter encodes them as JSON), none of them holding a secret."""

from __future__ import annotations

import dataclasses

from loopctl_fleet.taskfile import TaskSpec


@dataclasses.dataclass
class LoopInput:
    """One attempt of a task, as the workflow hands it to a worker."""

    spec: TaskSpec
    #: The base commit, pinned once so every attempt starts from the same tree.
    sha: str
    #: The task's attempt number (from 1), counted by the workflow across retries.
    attempt: int = 1
    #: The fleet budget's caps for this attempt (None: the task's own limits only).
    cap_usd: float | None = None
    cap_tokens: int | None = None


@dataclasses.dataclass
class Progress:
    """What a running attempt heartbeats: live in ``fleet status`` and given to the next
    attempt if this one dies."""

    attempt: int
    worker: str
    iteration: int = 0
    #: starting, agent, tests, committing, ending
    phase: str = "starting"
    tokens: int | None = None
    cost_usd: float | None = None


@dataclasses.dataclass
class LoopResult:
    """How an attempt's loop ended. ``failure_class`` is None when the goal was met."""

    status: str
    exit_code: int
    reason: str = ""
    failure_class: str | None = None
    iterations: int = 0
    tokens: int | None = None
    cost_usd: float | None = None
    #: The result branch and its commit (a completed task only).
    branch: str | None = None
    commit: str | None = None
    worker: str = ""
    attempt: int = 1
    #: Where the attempt's state and logs stay, on its worker.
    logs: str = ""
    #: True when an earlier attempt had already pushed the result (nothing ran).
    reused: bool = False
    #: The pull request opened for the branch (``[task.fleet] pr``), or why none was.
    pull_request: str = ""
    #: Its number (a task that also lands, lands through it).
    pull_request_number: int = 0
    pull_request_error: str = ""
