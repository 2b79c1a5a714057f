"""The six built-in detectors. Each looks at the :class:`~.model.Evidence` and returns a
:class:`~.model.Classification` or None; :func:`builtin_classifications` runs them all.

Order of priority (the highest wins arbitration; see :data:`~.model.BUILTIN_PRIORITY`):

1. ``context_exhaustion`` (400): the agent's turn ended with ``context_overflow``. A context
   monitor's restart in the same iteration counts too, at priority 150, since it is a
   precaution rather than the cause of the failing tests.
2. ``dependency_issue`` (300): a signature of a missing or unresolvable third-party package.
3. ``broken_test_command`` (280): the test run shows that the command itself cannot pass
   (:func:`loopctl.broken_test_command`: a path it names is missing, its runner refuses its
   options or finds no test), and the iteration's own changes cannot explain it.
4. ``test_flakiness`` (200): confirmed only: a rerun of the failing tests passed with no code
   change, or the same code both passed and failed. Port, timing and connection signatures
   only add confidence; alone they prove nothing.
5. ``infinite_loop`` (100): the same failure K iterations running with no progress, the tree
   returning to an earlier state, or the engine's own stuck events.
6. ``code_error`` (0): everything else; the safe default.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import attrs

from loopctl import (
    IterationRecord,
    agent_may_have_caused,
    broken_test_command,
    is_infrastructure_failure,
    made_progress,
    same_failure,
)
from loopctl_failure_classifier import rules
from loopctl_failure_classifier.locality import Locality, importer
from loopctl_failure_classifier.model import (
    BROKEN_TEST_COMMAND,
    BUILTIN_PRIORITY,
    CODE_ERROR,
    CONTEXT_EXHAUSTION,
    DEPENDENCY_ISSUE,
    INFINITE_LOOP,
    TEST_FLAKINESS,
    Classification,
    Evidence,
)

#: Annotation key this plugin sets on each iteration record (its verdict, and more).
ANNOTATION = "failure_classifier"


def _monitor_events() -> tuple[str, ...]:
    """The context monitor's events that mean "this session is out of room", by the constants it
    publishes. The classifier does not depend on that plugin: when it is not installed, none of
    its events can appear in a run, so there is nothing to match."""
    try:
        from loopctl_context_monitor import events
    except ImportError:
        return ()
    # an older monitor, from before its events had published names, has none of them
    return tuple(getattr(events, "EXHAUSTION_SIGNALS", ()))


#: Context-monitor events that mean "this session is out of room" (empty without the monitor).
MONITOR_EVENTS = _monitor_events()
#: Words an agent CLI uses when the model's context is full.
_CONTEXT_WORDS = (
    "prompt is too long",
    "context length",
    "context_length_exceeded",
    "maximum context",
    "context window",
    "too many tokens",
    "input is too long",
    "exceeds the context",
)
#: How much of the output's tail is searched for supporting flakiness signatures.
_TAIL_CHARS = 64 * 1024


# Settings and Notes are plain classes, not attrs ones: each attrs class costs the start-up of
# `loopctl classify` about 0.3 ms (its methods are generated and compiled), for nothing here.


class Settings(NamedTuple):
    """The detector knobs that come from config (defaults match the plugin's)."""

    loop_window: int = 3


class Notes:
    """What detectors learned that the final verdict should mention even if they did not win
    (a missing module that is the project's own code, say)."""

    __slots__ = ("flaky_support", "own_code")

    def __init__(self) -> None:
        self.own_code: list[str] = []
        self.flaky_support: list[tuple[str, str]] = []


def _builtin(
    mode: str, confidence: float, evidence: Sequence[str], detector: str
) -> Classification:
    return Classification(
        mode=mode,
        confidence=min(1.0, confidence),
        evidence=tuple(evidence),
        detector=f"builtin.{detector}",
        priority=BUILTIN_PRIORITY[mode],
    )


# --- context exhaustion ---------------------------------------------------------------------------


def _events_of_iteration(evidence: Evidence, types: Sequence[str]) -> list[Mapping[str, Any]]:
    return [
        event
        for event in evidence.events
        if event.get("type") in types and event.get("iteration") == evidence.iteration
    ]


def detect_context_exhaustion(evidence: Evidence) -> Classification | None:
    message = evidence.agent_message.strip()
    restarts = [r for r in evidence.restarts if r[1] == CONTEXT_EXHAUSTION]
    support = (
        [f"{len(restarts)} earlier restart(s) were for context exhaustion"] if restarts else []
    )
    if evidence.agent_error_kind == "context_overflow":
        lines = [
            "the agent's turn ended with context_overflow" + (f": {message}" if message else "")
        ]
        return _builtin(CONTEXT_EXHAUSTION, 0.95, lines + support, "context")
    lowered = message.lower()
    if message and any(word in lowered for word in _CONTEXT_WORDS):
        lines = [f"the agent's error says its context is full: {message}"]
        return _builtin(CONTEXT_EXHAUSTION, 0.85, lines + support, "context")
    monitor = _events_of_iteration(evidence, MONITOR_EVENTS)
    current = evidence.current
    restarted = (current is not None and current.reason == CONTEXT_EXHAUSTION) or (
        evidence.loop_status in ("restarting", CONTEXT_EXHAUSTION)
        and evidence.loop_reason.startswith(CONTEXT_EXHAUSTION)
    )
    if monitor or restarted:
        lines = []
        for event in monitor[:2]:
            percent = event.get("percent")
            detail = f" at {percent}% of the window" if percent is not None else ""
            lines.append(f"the context monitor emitted {event.get('type')}{detail}")
        if not lines:
            lines.append("the iteration ended with a restart for context exhaustion")
        found = _builtin(CONTEXT_EXHAUSTION, 0.8, lines + support, "context")
        return attrs.evolve(found, priority=150)
    return None


# --- dependency issues ----------------------------------------------------------------------------


def detect_dependency_issue(
    evidence: Evidence, locality: Locality, notes: Notes
) -> Classification | None:
    if evidence.tests_passed:
        return None  # a warning in a passing run is not why anything failed
    hits = rules.scan(evidence.output, evidence.error_lines)
    lines: list[str] = []
    confidence = 0.0
    ecosystems: list[str] = []
    for hit in hits:
        if hit.rule.locality and hit.pkg:
            if hit.rule.locality == "importer":
                own, why = importer(evidence.output, hit.line)
                if not own:  # an installed package asked: but is the one asked the project?
                    own, why = locality.is_own("python_module", hit.pkg, hit.line)
            else:
                own, why = locality.is_own(hit.rule.locality, hit.pkg, hit.line)
            if own:
                note = f"{hit.line} ({why})"
                if note not in notes.own_code:
                    notes.own_code.append(note)
                continue
        confidence = max(confidence, hit.rule.confidence)
        if hit.rule.ecosystem not in ecosystems:
            ecosystems.append(hit.rule.ecosystem)
        described = f"[{hit.rule.name}] {hit.line}"
        if described not in lines:
            lines.append(described)
    if not lines:
        return None
    decisive = set(evidence.error_lines)
    if not any(hit.line in decisive or hit.line.strip() in decisive for hit in hits):
        confidence -= 0.1  # found in the log, but not among the lines that explain the failure
    return _builtin(DEPENDENCY_ISSUE, confidence, lines[:12], "dependency")


def ecosystems_of(evidence: Evidence) -> list[str]:
    """The ecosystems whose dependency signatures appear in the evidence (for reinstalling)."""
    found: list[str] = []
    for hit in rules.scan(evidence.output, evidence.error_lines):
        if hit.rule.ecosystem not in found:
            found.append(hit.rule.ecosystem)
    return found


# --- a broken test command -------------------------------------------------------------------


def detect_broken_test_command(evidence: Evidence) -> Classification | None:
    """The core's reading (:func:`loopctl.broken_test_command`): the command cannot pass, and
    the iteration's changes do not explain it (then the core stops the loop, ``usage_error``)."""
    if evidence.tests_passed or evidence.timed_out:
        return None
    broken = broken_test_command(evidence.test_command, evidence.exit_code, evidence.output)
    if broken is None:
        return None
    current = evidence.current
    if current is not None and agent_may_have_caused(broken, current.changed_files):
        return None
    lines = [f"{broken.problem}: {broken.evidence}"]
    if evidence.test_command:
        lines.append(f"the test command: {evidence.test_command}")
    return _builtin(BROKEN_TEST_COMMAND, 0.9, lines, "test_command")


# --- flakiness ------------------------------------------------------------------------------------


def _annotation(record: IterationRecord) -> Mapping[str, Any]:
    value = record.annotations.get(ANNOTATION)
    return value if isinstance(value, Mapping) else {}


def _environment_changed(record: IterationRecord) -> bool:
    return bool(_annotation(record).get("environment_changed"))


def _not_code_related(record: IterationRecord) -> bool:
    """A failure that says nothing about the code: the agent died, a dependency was missing."""
    mode = _annotation(record).get("mode")
    if mode in (DEPENDENCY_ISSUE, CONTEXT_EXHAUSTION):
        return True
    return record.agent.error_kind is not None and record.test_exit_code is None


def history_flips(history: Sequence[IterationRecord]) -> tuple[list[str], int | None]:
    """Tests of the current (last) record whose outcome differs on the very same code: the
    record passed where an earlier one on the same tree failed, or the other way round.

    Returns the flipping tests (the failing side's ids) and the iteration it flipped against.
    Records across an environment change (a reinstall, an ``install`` the agent ran) and failures
    that were not about the code (a missing dependency, a dead agent) are not compared.
    """
    if len(history) < 2:
        return [], None
    current = history[-1]
    if not current.tree_hash or _not_code_related(current):
        return [], None
    for index in range(len(history) - 2, -1, -1):
        if _environment_changed(history[index + 1]):
            break  # an install between the two runs: they did not run in the same environment
        earlier = history[index]
        if earlier.tree_hash != current.tree_hash or _not_code_related(earlier):
            continue
        if earlier.tests_passed and not current.tests_passed and current.test_exit_code is not None:
            return list(current.failing_tests) or ["(the test command)"], earlier.iteration
        if current.tests_passed and not earlier.tests_passed and earlier.test_exit_code is not None:
            return list(earlier.failing_tests) or ["(the test command)"], earlier.iteration
    return [], None


def detect_test_flakiness(evidence: Evidence, notes: Notes) -> Classification | None:
    tail = evidence.output[-_TAIL_CHARS:]
    notes.flaky_support = rules.flaky_signatures([*evidence.error_lines, *tail.splitlines()[-400:]])
    support = [f"supporting signature ({name}): {line}" for name, line in notes.flaky_support[:3]]
    bonus = 0.02 if notes.flaky_support else 0.0
    rerun = evidence.rerun
    if rerun is not None and rerun.passed and rerun.ran_tests and not evidence.tests_passed:
        tests = ", ".join(evidence.failing_tests[:5]) or "the failing tests"
        lines = [
            f"{tests} failed, then passed when re-run with no code change (`{rerun.command}`)",
            *support,
        ]
        return _builtin(TEST_FLAKINESS, 0.95 + bonus, lines, "flakiness")
    if evidence.environment_changed:
        return None
    flipped, against = history_flips(evidence.history)
    if flipped:
        current = evidence.current
        assert current is not None
        verb = "passed" if current.tests_passed else "failed"
        other = "failed" if current.tests_passed else "passed"
        lines = [
            f"{', '.join(flipped[:5])}: iteration {current.iteration} {verb} and iteration "
            f"{against} {other} on the same code (tree {str(current.tree_hash)[:12]})",
            *support,
        ]
        return _builtin(TEST_FLAKINESS, 0.85 + bonus, lines, "flakiness")
    return None


# --- infinite loops -------------------------------------------------------------------------------


def _same_failure(a: IterationRecord, b: IterationRecord) -> bool:
    """The core's stuck rule (:func:`loopctl.same_failure`), except without tree hashes (raw
    logs): then only the fingerprint counts, since the same test failing with different errors
    is the only sign that anything changed at all."""
    if not (a.tree_hash and b.tree_hash):
        return bool(a.error_fingerprint) and a.error_fingerprint == b.error_fingerprint
    return same_failure(a, b)


def _stuck_signal(evidence: Evidence) -> list[str]:
    """The engine's own stuck events since the last restart, or a stuck decision."""
    lines: list[str] = []
    session_start = 0.0
    for event in evidence.events:
        if event.get("type") == "loop.restart":
            session_start = float(event.get("ts") or 0.0)
    for event in evidence.events:
        if event.get("type") == "loop.stuck" and float(event.get("ts") or 0.0) >= session_start:
            lines.append(
                f"the engine reported the loop stuck ({event.get('escalation', 'stuck')}, "
                f"{event.get('streak', '?')} iterations in a row)"
            )
    current = evidence.current
    if current is not None and current.reason == "stuck":
        lines.append(f"iteration {current.iteration} ended with the engine's stuck decision")
    elif evidence.loop_status == "stuck":
        lines.append("the loop's status is stuck (loop-state.md)")
    return lines[-2:]


def failed_run(history: Sequence[IterationRecord]) -> list[IterationRecord]:
    """The trailing run of iterations failing the same way as the last one (oldest first),
    within the current session (since the last restart)."""
    # infrastructure failures (and those a plugin said were not the agent's) neither extend
    # nor break a run, as in the core's stuck detection
    counted = [r for r in history if not is_infrastructure_failure(r)]
    if not counted or counted[-1].tests_passed:
        return []
    run = [counted[-1]]
    for record in reversed(counted[:-1]):
        if record.tests_passed or not _same_failure(record, run[0]):
            break
        if record.restarts != run[0].restarts:
            break  # a restarted session is a new attempt: its streak starts over
        run.insert(0, record)
    return run


def detect_infinite_loop(evidence: Evidence, settings: Settings) -> Classification | None:
    window = max(2, settings.loop_window)
    run = failed_run(evidence.history)
    stuck = _stuck_signal(evidence)
    if not run and not stuck:
        return None
    stagnant = 1
    for previous, current in itertools.pairwise(run):
        stagnant = 1 if made_progress(previous, current) else stagnant + 1
    what = _failure_words(run[-1]) if run else ""
    if len(run) >= window and stagnant >= window:
        known = all(r.tree_hash for r in run[-stagnant:])
        lines = [
            f"the same failure {stagnant} iterations in a row "
            f"({run[-stagnant].iteration}-{run[-1].iteration}) with no new commit, no change to "
            f"the tree and no fewer failures: {what}",
            *stuck,
        ]
        return _builtin(INFINITE_LOOP, 0.9 if known else 0.75, lines, "loop")
    if len(run) >= window:
        trees = [r.tree_hash for r in run]
        last = trees[-1]
        if last and last in trees[:-1]:
            back_to = run[trees.index(last)].iteration
            lines = [
                f"the same failure {len(run)} iterations in a row, and the working tree went back "
                f"to its state of iteration {back_to}: the agent is undoing and redoing: {what}",
                *stuck,
            ]
            return _builtin(INFINITE_LOOP, 0.85, lines, "loop")
    if len(run) >= 2 * window:
        lines = [
            f"the same failure {len(run)} iterations in a row despite changes each time: {what}",
            *stuck,
        ]
        return _builtin(INFINITE_LOOP, 0.7, lines, "loop")
    if stuck and run:
        return _builtin(INFINITE_LOOP, 0.85, [*stuck, f"last failure: {what}"], "loop")
    return None


def _failure_words(record: IterationRecord) -> str:
    if record.failing_tests:
        shown = ", ".join(record.failing_tests[:3])
        more = len(record.failing_tests) - 3
        return shown + (f" and {more} more" if more > 0 else "")
    return (
        f"fingerprint {record.error_fingerprint}" if record.error_fingerprint else "tests failing"
    )


# --- code errors ------------------------------------------------------------------------------------


def default_classification(evidence: Evidence, notes: Notes) -> Classification:
    lines: list[str] = []
    if evidence.tests_passed:
        lines.append(f"the tests passed in iteration {evidence.iteration}: no failure to classify")
    lines.extend(f"missing module is the project's own code: {n}" for n in notes.own_code[:3])
    lines.extend(evidence.error_lines[:5])
    if not evidence.error_lines and evidence.failing_tests:
        lines.append("failing: " + ", ".join(evidence.failing_tests[:5]))
    if notes.flaky_support:
        name, line = notes.flaky_support[0]
        lines.append(f"a {name} signature, but no rerun or history confirms flakiness: {line}")
    lines.extend(evidence.problems)
    if not lines:
        lines.append("no recognised failure signature; treated as a code error")
    confidence = 0.6 if evidence.error_lines or evidence.failing_tests else 0.5
    if evidence.problems and not evidence.error_lines:
        confidence = 0.3
    return _builtin(CODE_ERROR, confidence, lines, "default")


def builtin_classifications(
    evidence: Evidence, settings: Settings | None = None, locality: Locality | None = None
) -> list[Classification]:
    """Every built-in detector's classification for ``evidence`` (the default always last)."""
    settings = settings or Settings()
    locality = locality or Locality(evidence.workdir, evidence.output, evidence.error_lines)
    notes = Notes()
    found: list[Classification | None] = [
        detect_context_exhaustion(evidence),
        detect_dependency_issue(evidence, locality, notes),
        detect_broken_test_command(evidence),
        detect_test_flakiness(evidence, notes),
        detect_infinite_loop(evidence, settings),
    ]
    results = [c for c in found if c is not None]
    results.append(default_classification(evidence, notes))
    return results
