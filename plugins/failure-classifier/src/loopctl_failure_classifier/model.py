"""The data the classifier passes around: what it looked at (:class:`Evidence`), what a detector
concluded (:class:`Classification`), what a mode's recovery is (:class:`FailureMode`,
:class:`RecoveryStrategy`), and the final word (:class:`Verdict`).

These are public API: custom classifiers receive an :class:`Evidence` through the
``classify_failure`` hook and return a :class:`Classification` (or a plain mapping with the same
keys, so a plugin can add a classifier without importing this package).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from loopctl import IterationRecord, LazyPattern

# --- the built-in modes -------------------------------------------------------------------------

DEPENDENCY_ISSUE = "dependency_issue"
BROKEN_TEST_COMMAND = "broken_test_command"
TEST_FLAKINESS = "test_flakiness"
INFINITE_LOOP = "infinite_loop"
CONTEXT_EXHAUSTION = "context_exhaustion"
CODE_ERROR = "code_error"

#: The six built-in modes, in the order of their detectors' priority (highest first).
BUILTIN_MODES: tuple[str, ...] = (
    CONTEXT_EXHAUSTION,
    DEPENDENCY_ISSUE,
    BROKEN_TEST_COMMAND,
    TEST_FLAKINESS,
    INFINITE_LOOP,
    CODE_ERROR,
)

#: Arbitration priority of each built-in detector: the highest-priority classification wins,
#: then the most confident, then the detector name (alphabetically), so the result never depends
#: on the order plugins were loaded in.
BUILTIN_PRIORITY: dict[str, int] = {
    CONTEXT_EXHAUSTION: 400,
    DEPENDENCY_ISSUE: 300,
    BROKEN_TEST_COMMAND: 280,
    TEST_FLAKINESS: 200,
    INFINITE_LOOP: 100,
    CODE_ERROR: 0,
}
#: The priority a custom classification gets when it names none: above flakiness, loops and
#: code errors (a custom classifier knows its domain), below dependency and context problems.
DEFAULT_CUSTOM_PRIORITY = 250

_MODE_NAME = LazyPattern(r"[a-z][a-z0-9_]{0,63}\Z")
_MAX_EVIDENCE_LINES = 20
_MAX_EVIDENCE_CHARS = 500


def valid_mode_name(name: object) -> bool:
    """Mode names are short snake_case identifiers (they become stop reasons and CLI choices)."""
    return isinstance(name, str) and _MODE_NAME.match(name) is not None


def _evidence_lines(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Sequence):
        return ()
    lines = [str(item)[:_MAX_EVIDENCE_CHARS] for item in value if item is not None]
    return tuple(lines[:_MAX_EVIDENCE_LINES])


# --- what a detector concludes ------------------------------------------------------------------


@attrs.frozen
class Classification:
    """One detector's conclusion: the failure is ``mode``, this sure, because of ``evidence``.

    ``priority`` places the classification in arbitration (see :data:`BUILTIN_PRIORITY`);
    ``detector`` names who decided (filled in with the plugin's name when left empty).
    """

    mode: str
    confidence: float
    evidence: tuple[str, ...] = attrs.field(default=(), converter=_evidence_lines)
    detector: str = ""
    priority: int = DEFAULT_CUSTOM_PRIORITY

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "confidence": round(self.confidence, 3),
            "evidence": list(self.evidence),
            "detector": self.detector,
            "priority": self.priority,
        }

    @classmethod
    def coerce(cls, value: object, *, detector: str) -> tuple[Classification | None, str]:
        """A Classification from what a classifier returned (an instance or a mapping), or
        ``(None, why)`` when it is not one. Never raises."""
        if value is None:
            return None, ""
        if isinstance(value, Classification):
            data: Mapping[str, Any] = attrs.asdict(value, recurse=False)
        elif isinstance(value, Mapping):
            data = value
        else:
            return None, f"returned a {type(value).__name__}, not a Classification or a mapping"
        mode = data.get("mode")
        if not valid_mode_name(mode):
            return None, f"mode {mode!r} is not a snake_case name"
        try:
            confidence = float(data.get("confidence", 0.0))
        except (TypeError, ValueError, OverflowError):
            return None, f"confidence {data.get('confidence')!r} is not a number"
        if not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
            return None, f"confidence {confidence!r} is not between 0 and 1"
        priority = data.get("priority", DEFAULT_CUSTOM_PRIORITY)
        if isinstance(priority, bool) or not isinstance(priority, int):
            return None, f"priority {priority!r} is not a whole number"
        name = data.get("detector") or detector
        return (
            cls(
                mode=str(mode),
                confidence=confidence,
                evidence=data.get("evidence", ()),
                detector=str(name)[:200],
                priority=priority,
            ),
            "",
        )


# --- recovery -----------------------------------------------------------------------------------


@attrs.frozen
class RecoveryStrategy:
    """What to do about a mode, in the shape a scheduler that re-runs failed loops can use:
    ``args`` are ``loopctl run`` arguments for the next attempt."""

    mode: str
    action: str
    args: tuple[str, ...] = ()
    description: str = ""
    max_retries_override: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "action": self.action,
            "args": list(self.args),
            "description": self.description,
            "max_retries_override": self.max_retries_override,
        }


def _tuple_of_str(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(str(item) for item in value)
    return ()


@attrs.frozen
class FailureMode:
    """A mode and how the loop recovers from it; custom modes are declared with the
    ``register_failure_modes`` hook (built-in recoveries are implemented in code)."""

    name: str
    description: str = ""
    #: The recovery's name, as ``loopctl classify`` reports it (``autofix_lint``, …).
    action: str = "standard_retry"
    #: ``loopctl run`` arguments a scheduler should add to the next attempt.
    args: tuple[str, ...] = attrs.field(default=(), converter=_tuple_of_str)
    max_retries_override: int | None = None
    #: A note for the agent's next prompt (what to do differently).
    prompt: str = ""
    #: A shell command to run in the working directory as recovery; only run when the user
    #: opts in with ``run_custom_recovery_commands = true``.
    command: str | None = None
    #: Restart the agent session after the iteration.
    restart: bool = False
    #: The agent cannot fix this one: stuck detection does not count the iteration.
    not_agents_fault: bool = False
    #: How many times per run the recovery may be applied before the loop stops with this mode.
    max_recoveries: int = 3
    #: Which plugin declared the mode (filled in by the classifier).
    source: str = ""

    def strategy(self) -> RecoveryStrategy:
        return RecoveryStrategy(
            mode=self.name,
            action=self.action,
            args=self.args,
            description=self.description,
            max_retries_override=self.max_retries_override,
        )

    @classmethod
    def coerce(cls, name: object, value: object, *, source: str) -> tuple[FailureMode | None, str]:
        """A FailureMode from a declaration (an instance or a mapping); never raises."""
        if isinstance(value, FailureMode):
            mode = value if value.source else attrs.evolve(value, source=source)
            return (mode, "") if valid_mode_name(mode.name) else (None, "bad mode name")
        if not valid_mode_name(name):
            return None, f"mode {name!r} is not a snake_case name"
        if not isinstance(value, Mapping):
            return None, f"mode {name!r}: declared as a {type(value).__name__}, not a mapping"
        known = {field.name for field in attrs.fields(cls)} - {"name", "source"}
        unknown = sorted(set(value) - known)
        if unknown:
            return None, f"mode {name!r}: unknown keys {', '.join(map(str, unknown))}"
        try:
            mode = cls(name=str(name), source=source, **dict(value))
        except (TypeError, ValueError) as exc:
            return None, f"mode {name!r}: {exc}"
        problems = []
        if not isinstance(mode.max_recoveries, int) or isinstance(mode.max_recoveries, bool):
            problems.append("max_recoveries must be a whole number")
        if mode.command is not None and not isinstance(mode.command, str):
            problems.append("command must be a string")
        if not isinstance(mode.prompt, str):
            problems.append("prompt must be a string")
        if problems:
            return None, f"mode {name!r}: " + "; ".join(problems)
        return mode, ""


# --- what the classifier looks at -----------------------------------------------------------------


@attrs.frozen
class Rerun:
    """A confirmation run of the failing tests, made with no code change."""

    command: str
    passed: bool
    exit_code: int | None
    #: True when the rerun is known to have executed the tests it was asked to (a pytest run
    #: that collected nothing, or ``Ran 0 tests``, is not a confirmation of anything).
    ran_tests: bool
    failing_tests: tuple[str, ...] = ()
    duration_s: float = 0.0


@attrs.frozen
class Evidence:
    """Everything a classifier may look at for one failed (or suspiciously passed) iteration.

    Built from a running loop, from a state directory, or from raw logs; every field has a safe
    default, and ``problems`` says which inputs were missing or unreadable.
    """

    iteration: int = 0
    #: The test command's output (the kept tail of it in a loop).
    output: str = ""
    error_lines: tuple[str, ...] = ()
    failing_tests: tuple[str, ...] = ()
    runner: str = "generic"
    test_command: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    tests_passed: bool = False
    #: The loop's iteration records, oldest first; the current iteration is the last one.
    history: tuple[IterationRecord, ...] = ()
    #: The agent's error kind this iteration (``context_overflow``, …) or None.
    agent_error_kind: str | None = None
    agent_message: str = ""
    #: Recent events (``events.jsonl``), oldest first.
    events: tuple[Mapping[str, Any], ...] = ()
    #: Restart archives: ``(number, reason, error_count)`` per ``restart-N/``.
    restarts: tuple[tuple[int, str, int | None], ...] = ()
    rerun: Rerun | None = None
    workdir: Path | None = None
    state_dir: Path | None = None
    #: The agent ran an install command this iteration (pip install, npm ci, …): the
    #: environment changed, so a pass after a failure on the same code proves nothing.
    environment_changed: bool = False
    #: The loop's status and restart reason from ``loop-state.md`` (offline classification):
    #: ``stuck``, ``restarting`` with reason ``context_exhaustion``, …
    loop_status: str = ""
    loop_reason: str = ""
    problems: tuple[str, ...] = ()

    @property
    def current(self) -> IterationRecord | None:
        return self.history[-1] if self.history else None


@attrs.frozen
class Verdict:
    """The classification that won arbitration, and every candidate it was weighed against."""

    mode: str
    confidence: float
    evidence: tuple[str, ...]
    detector: str
    timestamp: float
    iteration: int = 0
    priority: int = 0
    candidates: tuple[Classification, ...] = ()
    forced: bool = False
    #: Custom classifiers that returned something unusable (they are skipped).
    rejected: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The ``failure-mode.json`` contract: mode, confidence, evidence, detector, timestamp
        (plus the iteration, the candidates and whether the mode was forced)."""
        return {
            "mode": self.mode,
            "confidence": round(self.confidence, 3),
            "evidence": list(self.evidence),
            "detector": self.detector,
            "timestamp": self.timestamp,
            "iteration": self.iteration,
            "forced": self.forced,
            "candidates": [c.to_json() for c in self.candidates],
        }
