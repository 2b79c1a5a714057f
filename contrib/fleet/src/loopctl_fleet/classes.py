"""Why a task's attempt ended, as a failure class, and what the fleet does about each class.

A loop's exit code names its stop status (docs/reference/exit-codes.md); the fleet groups the
statuses into classes and decides per class whether a task is tried again, where, and after how
long. Only ``infrastructure`` (the worker died, a clone failed, a disk filled) and
``agent_crash`` are worth another attempt by default: the others would end the same way again
(a bad config, a missing credential, a spent budget) or are a result in their own right (the
loop gave up, or got stuck, which a fresh attempt with the same goal would repeat).
"""

from __future__ import annotations

import dataclasses
import enum

from loopctl import StopStatus


class FailureClass(str, enum.Enum):
    """The classes a task's failed attempt falls into; ``str`` values are what status prints."""

    #: The worker, its disk or its network failed: any other worker may succeed.
    INFRASTRUCTURE = "infrastructure"
    #: The agent CLI crashed, failed its turn, or is not on this worker (``agent_error``):
    #: another attempt, on whichever worker is free, may succeed.
    AGENT_CRASH = "agent_crash"
    #: The config or the command line was refused (exit 2).
    CONFIG = "config"
    #: The agent's credentials were refused.
    AUTH = "auth"
    #: The task's or the fleet's token/cost budget is spent.
    BUDGET = "budget"
    #: The loop's wall-clock limit passed.
    WALL_CLOCK = "wall_clock"
    #: The loop used its iterations or restarts without meeting the goal.
    GAVE_UP = "gave_up"
    #: The loop kept failing the same way and stopped itself.
    STUCK = "stuck"
    #: A plugin stopped the loop with a reason of its own.
    PLUGIN = "plugin"
    #: The repository cannot be cloned or the base ref does not exist.
    REPOSITORY = "repository"


#: Each stop status a loop can end with (but ``complete`` and ``interrupted``, which are not
#: failures of the task) and its class.
STATUS_CLASSES: dict[StopStatus, FailureClass] = {
    StopStatus.MAX_ITERATIONS: FailureClass.GAVE_UP,
    StopStatus.MAX_RESTARTS: FailureClass.GAVE_UP,
    StopStatus.STUCK: FailureClass.STUCK,
    StopStatus.AGENT_ERROR: FailureClass.AGENT_CRASH,
    StopStatus.AUTH: FailureClass.AUTH,
    StopStatus.BUDGET: FailureClass.BUDGET,
    StopStatus.WALL_CLOCK: FailureClass.WALL_CLOCK,
    StopStatus.PLUGIN: FailureClass.PLUGIN,
    StopStatus.DISK_FULL: FailureClass.INFRASTRUCTURE,
    StopStatus.USAGE_ERROR: FailureClass.CONFIG,
}

#: The loop's documented exit codes (docs/reference/exit-codes.md), for an attempt whose loop
#: ended without writing its status (killed before its first state write).
EXIT_STATUSES: dict[int, StopStatus] = {
    0: StopStatus.COMPLETE,
    2: StopStatus.USAGE_ERROR,
    10: StopStatus.MAX_ITERATIONS,
    11: StopStatus.MAX_RESTARTS,
    12: StopStatus.STUCK,
    13: StopStatus.AGENT_ERROR,
    14: StopStatus.AUTH,
    15: StopStatus.BUDGET,
    16: StopStatus.WALL_CLOCK,
    17: StopStatus.PLUGIN,
    18: StopStatus.DISK_FULL,
    130: StopStatus.INTERRUPTED,
}


def class_of(status: str | None, exit_code: int | None) -> FailureClass | None:
    """The class of an attempt that ended with ``status`` (the loop's own word, preferred) or,
    when the loop wrote none, ``exit_code``. ``None`` for a completed loop. A plugin's own
    status, an exit code no loop gives (a signal's), or an interrupted loop the fleet did not
    interrupt: the worker's side failed, so ``infrastructure``."""
    known = _status(status) or EXIT_STATUSES.get(exit_code if exit_code is not None else -1)
    if known is StopStatus.COMPLETE:
        return None
    if known is None and status:
        return FailureClass.PLUGIN
    if known is None or known is StopStatus.INTERRUPTED:
        return FailureClass.INFRASTRUCTURE
    return STATUS_CLASSES[known]


def _status(status: str | None) -> StopStatus | None:
    try:
        return StopStatus(status) if status else None
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon a class is tried again. ``max_attempts`` counts every attempt of
    the task that ended in this class, the first included: 1 means never again. A dataclass:
    it travels in workflow inputs."""

    max_attempts: int = 1
    initial_interval_s: float = 5.0
    backoff: float = 2.0
    max_interval_s: float = 300.0

    def delay_s(self, attempt: int) -> float:
        """Seconds to wait before the attempt after the ``attempt``-th failure (from 1)."""
        return min(
            self.initial_interval_s * self.backoff ** max(attempt - 1, 0), self.max_interval_s
        )

    def allows(self, failures: int) -> bool:
        """Whether a task whose attempts failed ``failures`` times in this class runs again."""
        return failures < self.max_attempts


#: What the fleet does per class unless ``[plugins.fleet.retry.<class>]`` says otherwise.
DEFAULT_POLICIES: dict[FailureClass, RetryPolicy] = {
    FailureClass.INFRASTRUCTURE: RetryPolicy(max_attempts=5, initial_interval_s=5.0),
    FailureClass.AGENT_CRASH: RetryPolicy(max_attempts=3, initial_interval_s=30.0),
}
NEVER = RetryPolicy(max_attempts=1)


def policy_for(cls: FailureClass, overrides: dict[str, RetryPolicy] | None = None) -> RetryPolicy:
    """The policy for ``cls``: an override by the class's name, else the default, else never."""
    if overrides and cls.value in overrides:
        return overrides[cls.value]
    return DEFAULT_POLICIES.get(cls, NEVER)
