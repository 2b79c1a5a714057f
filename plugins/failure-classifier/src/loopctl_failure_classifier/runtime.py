"""The plugin at work inside a loop: diagnose each failed iteration (``on_failure``), apply the
mode's recovery (``after_iteration``), and tell the agent what changed (``compose_prompt``).

Per-run memory (how often each recovery was applied, the flaky tests found, notes for the next
prompt) lives in ``loop-state.md`` through ``loop.set_value``, so it survives ``loopctl resume``;
what only this process needs (the config, the custom modes, the diagnosis waiting for
``after_iteration``) lives in ``loop.stash``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs

from loopctl import (
    CompletionVeto,
    Decision,
    IterationEnd,
    NotAgentsFault,
    PromptSection,
    SavedRun,
    StashKey,
)
from loopctl_failure_classifier import detectors
from loopctl_failure_classifier import events as ev
from loopctl_failure_classifier import lines as say
from loopctl_failure_classifier.arbitration import (
    FAILURE_MODE_FILE,
    Classifier,
    arbitrate,
    classify,
    failure_mode_text,
    forced_verdict,
    hook_classifiers,
    hook_modes,
)
from loopctl_failure_classifier.config import PLUGIN_NAME, FailureClassifierConfig
from loopctl_failure_classifier.detectors import ANNOTATION, Notes, Settings
from loopctl_failure_classifier.evidence import EventTail, from_loop, ran_installs
from loopctl_failure_classifier.model import (
    BROKEN_TEST_COMMAND,
    BUILTIN_MODES,
    BUILTIN_PRIORITY,
    CODE_ERROR,
    CONTEXT_EXHAUSTION,
    DEPENDENCY_ISSUE,
    INFINITE_LOOP,
    TEST_FLAKINESS,
    Classification,
    Evidence,
    FailureMode,
    Rerun,
    Verdict,
)
from loopctl_failure_classifier.recovery import (
    detect_reinstall_command,
    run_command,
    strategy,
)
from loopctl_failure_classifier.rerun import confirmation, rerun_command

if TYPE_CHECKING:
    from loopctl import IterationRecord, Loop, LoopOutcome, TestRun

#: The ``loop.set_value`` key of this plugin's memory.
MEMORY = "failure_classifier"
#: Exit codes of a shell that could not run the command at all: no point in a rerun.
_CANNOT_RUN = (126, 127)


@attrs.define
class Pending:
    """The diagnosis of the iteration in flight, waiting for ``after_iteration``."""

    iteration: int
    verdict: Verdict
    evidence: Evidence
    annotation: dict[str, Any]
    flaky_pass: bool = False


@attrs.define
class RunState:
    config: FailureClassifierConfig
    modes: dict[str, FailureMode]
    classifiers: list[Classifier]
    force_mode: str | None = None
    pending: Pending | None = None
    started: bool = False
    events: EventTail | None = None


_RUN = StashKey[RunState]()


def _config(loop: Loop) -> FailureClassifierConfig:
    try:
        config = loop.plugin_config(PLUGIN_NAME)
    except KeyError:  # registered without its config hook (an embedding test, say)
        return FailureClassifierConfig()
    return config if isinstance(config, FailureClassifierConfig) else FailureClassifierConfig()


def _state(loop: Loop) -> RunState:
    state = loop.stash.get(_RUN)
    if state is None:
        modes, _ = hook_modes(loop.hook)
        config = _config(loop)
        state = RunState(
            config=config,
            modes=modes,
            classifiers=hook_classifiers(loop.hook),
            force_mode=config.force_mode,
        )
        loop.stash[_RUN] = state
    return state


def _memory(loop: Loop) -> dict[str, Any]:
    value = loop.get_value(MEMORY)
    memory = dict(value) if isinstance(value, Mapping) else {}
    recoveries = memory.get("recoveries")
    memory["recoveries"] = dict(recoveries) if isinstance(recoveries, Mapping) else {}
    for key in ("flaky_tests", "notes"):
        if not isinstance(memory.get(key), list):
            memory[key] = []
    return memory


def _save(loop: Loop, memory: dict[str, Any]) -> None:
    loop.set_value(MEMORY, memory)


# --- on_loop_start ---------------------------------------------------------------------------------


def start(loop: Loop) -> None:
    state = _state(loop)
    if state.started:
        return
    state.started = True
    _, problems = hook_modes(loop.hook)
    for problem in problems:
        loop.emit(ev.WARNING, message=f"custom failure mode refused: {problem}")
    forced = state.config.force_mode
    if forced is not None:
        known = (*BUILTIN_MODES, *state.modes)
        if forced not in known:
            state.force_mode = None
            loop.emit(
                ev.WARNING,
                message=f"force_mode {forced!r} is not a known failure mode "
                f"({', '.join(known)}); classifying normally",
            )
        else:
            loop.emit(
                ev.MODE_FORCED,
                mode=forced,
                message="--failure-mode is for testing recoveries: every failure is treated as "
                f"{forced} without classification",
            )


# --- on_failure / on_success ------------------------------------------------------------------------


def _settings(config: FailureClassifierConfig) -> Settings:
    return Settings(loop_window=config.loop_window)


def _should_rerun(
    config: FailureClassifierConfig,
    test_run: TestRun | None,
    evidence: Evidence,
    preliminary: list[Classification],
) -> bool:
    """Whether to re-run the failing tests; the built-in classifications it had to make for
    that are left in ``preliminary`` (the verdict reuses them when nothing was re-run)."""
    if not config.rerun_failed_tests or test_run is None or test_run.passed:
        return False
    if test_run.timed_out or test_run.exit_code is None or test_run.exit_code in _CANNOT_RUN:
        return False
    if not test_run.failing_tests:  # a build or collection error: not where flakiness lives
        return False
    if _already_confirmed(evidence):
        return False
    preliminary[:] = detectors.builtin_classifications(evidence, _settings(config))
    best = min(preliminary, key=lambda c: (-c.priority, -c.confidence))
    # a missing package or a dead agent will not pass on a rerun: do not spend one
    return not (best.mode in (DEPENDENCY_ISSUE, CONTEXT_EXHAUSTION) and best.priority >= 200)


def _already_confirmed(evidence: Evidence) -> bool:
    """An earlier iteration failed the same way on the same code and its rerun failed too:
    another rerun would most likely only repeat that (and a stuck loop would pay for it)."""
    current = evidence.current
    if current is None or not current.tree_hash:
        return False
    for previous in reversed(evidence.history[:-1]):
        if (
            previous.tree_hash != current.tree_hash
            or previous.error_fingerprint != current.error_fingerprint
        ):
            return False
        annotation = previous.annotations.get(ANNOTATION)
        rerun = annotation.get("rerun") if isinstance(annotation, Mapping) else None
        if isinstance(rerun, Mapping) and rerun.get("passed") is False:
            return True
    return False


def _rerun(loop: Loop, config: FailureClassifierConfig, test_run: TestRun) -> Rerun | None:
    """Re-run the failing tests of ``test_run`` (the iteration's own run) where the command can be
    narrowed to them; the re-run's result is its own and is compared with ``test_run``."""
    planned = rerun_command(test_run.command, test_run.failing_tests, config.rerun_cmd)
    if planned is None:
        return None
    command, how = planned
    rerun = confirmation(loop.run_tests(command, label="rerun"))
    loop.emit(
        ev.RERUN,
        command=command,
        how=how,
        passed=rerun.passed,
        ran_tests=rerun.ran_tests,
        exit_code=rerun.exit_code,
        failing_tests=list(rerun.failing_tests[:20]),
        duration_s=rerun.duration_s,
        summary=say.rerun(rerun.passed, rerun.ran_tests, rerun.failing_tests, rerun.duration_s),
    )
    return rerun


def diagnose(
    loop: Loop, record: IterationRecord, test_run: TestRun | None, *, passed: bool
) -> Verdict | None:
    """Classify the iteration that just ended from ``record`` and ``test_run`` (its own test
    run, never a re-run); the verdict waits in the stash for ``after_iteration``. None on a
    pass that is not a flaky one."""
    state = _state(loop)
    config = state.config
    turn = loop.last_turn
    installs = bool(turn is not None and ran_installs(turn.tool_calls))
    annotation: dict[str, Any] = {"environment_changed": True} if installs else {}
    if installs:
        loop.annotate(ANNOTATION, annotation)
    if state.events is None:
        state.events = EventTail(SavedRun(loop.state_dir).events_path)
    evidence = from_loop(loop, record, test_run, environment_changed=installs, events=state.events)
    if passed:
        return _diagnose_pass(loop, state, evidence, annotation)
    if state.force_mode is not None:
        verdict = forced_verdict(state.force_mode, evidence, source="--failure-mode")
    else:
        preliminary: list[Classification] = []
        if test_run is not None and _should_rerun(config, test_run, evidence, preliminary):
            rerun = _rerun(loop, config, test_run)
            if rerun is not None:
                evidence = attrs.evolve(evidence, rerun=rerun)
                annotation["rerun"] = attrs.asdict(rerun)
                preliminary = []  # new evidence: classified again
        verdict = classify(
            evidence,
            classifiers=state.classifiers,
            settings=_settings(config),
            min_confidence=config.min_confidence,
            builtin=preliminary or None,
        )
        for problem in verdict.rejected:
            loop.emit(ev.WARNING, message=f"classification skipped: {problem}")
    _record_verdict(loop, state, verdict, evidence, annotation)
    return verdict


def on_failure(
    loop: Loop, record: IterationRecord, test_run: TestRun | None
) -> NotAgentsFault | None:
    """Diagnose a failed iteration; a flaky failure, or a custom mode declared as not the
    agent's fault, is reported as such, so the core's stuck detection skips it."""
    verdict = diagnose(loop, record, test_run, passed=False)
    if verdict is None:
        return None
    if verdict.mode == TEST_FLAKINESS:
        tests = ", ".join(list(test_run.failing_tests)[:5]) if test_run is not None else ""
        return NotAgentsFault(f"flaky test(s): {tests or 'the test command'}")
    declared = _state(loop).modes.get(verdict.mode)
    if declared is not None and declared.not_agents_fault:
        return NotAgentsFault(f"{declared.name} (declared by {declared.source})")
    return None


def on_success(loop: Loop, record: IterationRecord, test_run: TestRun) -> CompletionVeto | None:
    """A pass on the very code that just failed is a flaky pass: unless ``flaky_pass_completes``
    it does not count as completion."""
    verdict = diagnose(loop, record, test_run, passed=True)
    if verdict is None or _state(loop).config.flaky_pass_completes:
        return None
    return CompletionVeto("the tests passed on the same code that failed before (flaky)")


def _diagnose_pass(
    loop: Loop, state: RunState, evidence: Evidence, annotation: dict[str, Any]
) -> Verdict | None:
    """A pass on the very code that just failed is a flaky pass, not a success."""
    if evidence.environment_changed:
        return None
    found = detectors.detect_test_flakiness(evidence, Notes())
    if found is None:
        return None
    verdict = arbitrate([found], iteration=evidence.iteration)
    _record_verdict(loop, state, verdict, evidence, annotation, flaky_pass=True)
    return verdict


def _record_verdict(
    loop: Loop,
    state: RunState,
    verdict: Verdict,
    evidence: Evidence,
    annotation: dict[str, Any],
    *,
    flaky_pass: bool = False,
) -> None:
    annotation.update(
        mode=verdict.mode,
        confidence=round(verdict.confidence, 3),
        detector=verdict.detector,
    )
    if flaky_pass:
        annotation["flaky_pass"] = True
    loop.annotate(ANNOTATION, annotation)
    plan = strategy(verdict.mode, state.modes, max_restarts=loop.max_restarts)
    recovery = plan.to_json()
    loop.write_file(  # the latest verdict, rewritten every failure: no fsync
        FAILURE_MODE_FILE, lambda: failure_mode_text(verdict, recovery), durable=False
    )
    loop.emit(
        ev.CLASSIFIED,
        mode=verdict.mode,
        confidence=round(verdict.confidence, 3),
        detector=verdict.detector,
        evidence=list(verdict.evidence[:5]),
        forced=verdict.forced,
        flaky_pass=flaky_pass,
        candidates=[
            {"mode": c.mode, "detector": c.detector, "confidence": round(c.confidence, 3)}
            for c in verdict.candidates[:6]
        ],
        summary=say.classified(
            verdict.mode,
            verdict.confidence,
            verdict.evidence,
            forced=verdict.forced,
            flaky_pass=flaky_pass,
        ),
    )
    state.pending = Pending(evidence.iteration, verdict, evidence, annotation, flaky_pass)


# --- after_iteration: recovery ---------------------------------------------------------------------


#: Endings whose ``after_iteration`` result is ignored: the iteration is tried again (a rate
#: limit) or the run is ending (an interruption), so no recovery is spent on them.
_NOT_RECOVERED = frozenset({IterationEnd.RATE_LIMITED.value, IterationEnd.INTERRUPTED.value})


def recover(loop: Loop, record: IterationRecord) -> Decision | None:
    """Apply the recovery of the verdict ``diagnose`` left for this iteration, if any: every
    iteration ends here, also one where the agent failed before the tests (then classified
    from the agent's error), was rate-limited or was interrupted (no recovery)."""
    state = _state(loop)
    pending, state.pending = state.pending, None
    if pending is None or pending.iteration != record.iteration:
        return None
    if str(getattr(record.ending, "value", record.ending)) in _NOT_RECOVERED:
        return None
    verdict = pending.verdict
    mode = verdict.mode
    memory = _memory(loop)
    declared = state.modes.get(mode)
    limit = state.config.recovery_limit(mode, declared.max_recoveries if declared else None)
    count = int(memory["recoveries"].get(mode, 0))
    if limit > 0 and count >= limit:
        message = (
            f"the {mode} recovery was already applied {count} time(s), the limit for one run; "
            f"last evidence: {verdict.evidence[0] if verdict.evidence else 'none'}"
        )
        loop.emit(
            ev.RECOVERY_LIMIT,
            mode=mode,
            applied=count,
            limit=limit,
            summary=say.recovery_limit(mode, count, limit),
        )
        pending.annotation["recovery"] = "stop"
        return Decision.stop(mode, message[:1000])
    memory["recoveries"][mode] = count + 1
    handler = _HANDLERS.get(mode, _recover_custom)
    decision, action, details = handler(loop, state, pending, memory)
    pending.annotation["recovery"] = action
    _save(loop, memory)
    decided = decision.action.value if decision else "continue"
    loop.emit(
        ev.RECOVERY_APPLIED,
        mode=mode,
        action=action,
        attempt=count + 1,
        limit=limit or None,
        decision=decided,
        **details,
        summary=say.recovery_applied(mode, action, count + 1, limit or None, decided, details),
    )
    return decision


Handled = tuple[Decision | None, str, dict[str, Any]]


def _note(memory: dict[str, Any], iteration: int, title: str, body: str, priority: int) -> None:
    notes = [n for n in memory["notes"] if isinstance(n, Mapping) and n.get("title") != title]
    notes.append({"for": iteration + 1, "title": title, "body": body[:4000], "priority": priority})
    memory["notes"] = notes[-8:]


def _recover_code_error(
    loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]
) -> Handled:
    return None, "standard_retry", {}


def _recover_flakiness(
    loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]
) -> Handled:
    evidence = pending.evidence
    if pending.flaky_pass:
        flipped, _ = detectors.history_flips(evidence.history)
        tests = flipped
    else:
        tests = list(evidence.failing_tests)
    known = [t for t in memory["flaky_tests"] if isinstance(t, str)]
    for test in tests[:20]:
        if test not in known:
            known.append(test)
    memory["flaky_tests"] = known[-50:]
    details: dict[str, Any] = {"flaky_tests": tests[:20]}
    # a flaky failure (on_failure told the core it was not the agent's fault): tell the agent
    # too, so it does not chase the failure the prompt's test section shows
    if not pending.flaky_pass and evidence.error_lines:
        body = (
            "The tests failed as below, then passed when re-run with no code change: "
            "a flaky failure, not caused by your change.\n\n"
            + "\n".join(f"    {line}" for line in evidence.error_lines[:10])
        )
        _note(memory, pending.iteration, "Flaky Failure", body, 70)
    rerun = evidence.rerun
    passed_now = pending.flaky_pass or bool(rerun and rerun.passed and rerun.ran_tests)
    if passed_now and state.config.flaky_pass_completes:
        message = f"the tests pass (flaky: {', '.join(tests[:5]) or 'the test command'})"
        return Decision.complete(message), "accept_flaky_pass", details
    return None, "rerun_tests" if rerun else "quarantine_note", details


def _recover_dependency(
    loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]
) -> Handled:
    config = state.config
    evidence = pending.evidence
    ecosystems = detectors.ecosystems_of(evidence)
    if config.reinstall_cmd:
        planned: tuple[str, str] | None = (config.reinstall_cmd, "configured reinstall_cmd")
    else:
        planned = detect_reinstall_command(loop.workdir, ecosystems)
    details: dict[str, Any] = {"ecosystems": ecosystems}
    lines = list(pending.verdict.evidence[:5])
    body = [
        "The tests fail because a dependency is missing or cannot be resolved, not because of "
        "the logic. The signatures:",
        *[f"    {line}" for line in lines],
        "",
        "Declare the package in the project's manifest (requirements, pyproject.toml, "
        "package.json, Cargo.toml, go.mod, …) with a version that exists, or fix the version "
        "constraint; do not work around the import in the code.",
    ]
    action = "reinstall_deps"
    if planned is None or not config.run_reinstall:
        details["reinstall"] = (
            "no reinstall command found (set reinstall_cmd)"
            if planned is None
            else f"not run: set run_reinstall = true to run `{planned[0]}`"
        )
        why = _dependency_stays(pending)
        if why:
            details["stopped"] = why
            return _dependency_stop(pending, planned, why), "dependency_stop", details
        action = "dependency_note"
    else:
        command, because = planned
        result = run_command(command, loop.workdir, config.recovery_timeout_s)
        _write_recovery_log(loop, "reinstall", result.output or result.error)
        pending.annotation["environment_changed"] = True
        details.update(
            command=command,
            because=because,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            duration_s=result.duration_s,
            output_tail=result.tail(1500),
        )
        verdict_word = "succeeded" if result.ok else f"failed (exit code {result.exit_code})"
        body.append(f"\nloopctl ran `{command}` ({because}); it {verdict_word}.")
    _note(memory, pending.iteration, "Dependency Problem", "\n".join(body), 88)
    return None, action, details


def _dependency_stays(pending: Pending) -> str:
    """Why no agent turn will fix this missing dependency ("" when one may): the turn changed no
    file (it did not declare it, and nothing installs it), or the iteration before failed on the
    very same missing dependency."""
    history = pending.evidence.history
    current = history[-1] if history else None
    if current is None:
        return ""
    if not current.changed_files:
        return f"iteration {current.iteration} changed no file"
    if len(history) >= 2:
        before = history[-2]
        annotation = before.annotations.get(ANNOTATION)
        mode = annotation.get("mode") if isinstance(annotation, Mapping) else None
        same = before.error_fingerprint and before.error_fingerprint == current.error_fingerprint
        if mode == DEPENDENCY_ISSUE and same:
            return f"iterations {before.iteration}-{current.iteration} failed on it alike"
    return ""


def _dependency_stop(pending: Pending, planned: tuple[str, str] | None, why: str) -> Decision:
    """Stop with what is missing and how to install it."""
    missing = say.evidence_text(pending.verdict.evidence) or "a dependency"
    if planned is None:
        hint = "install it into the environment the test command runs in"
    else:
        hint = f"install it (`{planned[0]}`: {planned[1]}, or set run_reinstall = true)"
    message = (
        f"a dependency is missing, which no code change fixes ({why}): {missing}; {hint}, "
        "then `loopctl resume`"
    )
    return Decision.stop(DEPENDENCY_ISSUE, message[:1000])


def _write_recovery_log(loop: Loop, kind: str, text: str) -> None:
    """The output of a recovery command, beside the iteration's own logs (written atomically in
    the background; a failed write is reported by the core as ``state.write_error``)."""
    loop.write_file(SavedRun(loop.state_dir).log_path(loop.iteration, f"{kind}.log"), text)


def _approach(pending: Pending) -> str:
    run = detectors.failed_run(pending.evidence.history)
    if not run:
        return f"the approach of iteration {pending.iteration}: {pending.verdict.evidence[0]}"
    # Each iteration is credited with its own change only; those that changed nothing say so.
    parts = [
        f"iteration {record.iteration} changed {', '.join(record.changed_files[:5])}"
        for record in run
        if record.changed_files
    ]
    idle = [record.iteration for record in run if not record.changed_files]
    if idle:
        parts.append(f"{_iterations(idle)} changed nothing")
    failure = pending.evidence.error_lines[0] if pending.evidence.error_lines else ""
    failure = failure or detectors._failure_words(run[-1])
    return f"{'; '.join(parts)}; the tests kept failing with: {failure[:300]}"


def _iterations(numbers: list[int]) -> str:
    """``iteration 3``, ``iterations 2-4``, or ``iterations 2, 4`` when they do not follow
    each other."""
    if len(numbers) == 1:
        return f"iteration {numbers[0]}"
    if numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"iterations {numbers[0]}-{numbers[-1]}"
    return "iterations " + ", ".join(map(str, numbers))


def _recover_loop(loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]) -> Handled:
    # The loop's failed approaches already list each of these iterations, with its change:
    # the approach is named in this plugin's note, not added there a second time.
    approach = _approach(pending)
    cut = loop.remaining_iterations - state.config.loop_max_remaining
    body = (
        "The last iterations repeated one approach and failed the same way each time:\n\n"
        f"    {approach}\n\n"
        "That approach does not work; repeating it will not either. Step back: re-read the "
        "failing test and the code it exercises, state a different hypothesis for the cause, "
        "and try a substantially different fix."
    )
    _note(memory, pending.iteration, "Change Strategy", body, 92)
    details = {"approach": approach[:500], "iterations_cut": max(0, cut)}
    message = f"infinite loop: {approach[:300]}"
    # The restart also cuts the budget to loop_max_remaining more iterations (when that is less).
    decision = Decision.restart(
        INFINITE_LOOP,
        message,
        remaining_iterations=state.config.loop_max_remaining if cut > 0 else None,
    )
    return decision, "reduce_and_redirect", details


def _monitor_present(loop: Loop, evidence: Evidence) -> bool:
    if any(e.get("type") in detectors.MONITOR_EVENTS for e in evidence.events):
        return True
    try:
        loop.plugin_config("context-monitor")
    except Exception:  # noqa: BLE001 - any failure means "not there"
        return False
    return True


def _recover_context(
    loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]
) -> Handled:
    monitor = _monitor_present(loop, pending.evidence)
    if not monitor:
        body = (
            f"The previous session ran out of context in iteration {pending.iteration} and was "
            "restarted. Keep this session lean: read only the files and line ranges you need, "
            "do not print long outputs or whole large files, and make small, focused changes. "
            "The goal, the failing tests and the approaches that did not work are in this prompt."
        )
        _note(memory, pending.iteration, "Fresh Session After Context Exhaustion", body, 75)
    details = {"briefing": "context monitor" if monitor else "failure classifier note"}
    message = pending.verdict.evidence[0] if pending.verdict.evidence else "context exhausted"
    return Decision.restart(CONTEXT_EXHAUSTION, message[:500]), "restart_compressed", details


def _recover_custom(
    loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]
) -> Handled:
    mode = state.modes.get(pending.verdict.mode)
    if mode is None:  # a classifier named a mode nobody declared: the standard retry
        return None, "standard_retry", {"note": "the mode has no declared recovery"}
    details: dict[str, Any] = {"declared_by": mode.source}
    if mode.prompt:
        evidence = "\n".join(f"    {line}" for line in pending.verdict.evidence[:5])
        _note(
            memory,
            pending.iteration,
            f"Failure Mode: {mode.name}",
            f"{mode.prompt}\n\nEvidence:\n{evidence}" if evidence else mode.prompt,
            86,
        )
    if mode.command:
        if state.config.run_custom_recovery_commands:
            result = run_command(mode.command, loop.workdir, state.config.recovery_timeout_s)
            _write_recovery_log(loop, mode.name, result.output or result.error)
            details.update(
                command=mode.command,
                exit_code=result.exit_code,
                timed_out=result.timed_out,
                output_tail=result.tail(1500),
            )
        else:
            details["command"] = (
                f"not run: set run_custom_recovery_commands = true to run `{mode.command}`"
            )
    decision = Decision.restart(mode.name, mode.description) if mode.restart else None
    return decision, mode.action, details


def _recover_broken_test_command(
    loop: Loop, state: RunState, pending: Pending, memory: dict[str, Any]
) -> Handled:
    """Nothing to do in the loop: the core stops it after this run (status ``usage_error``),
    from the same reading of the test run; the strategy says what a scheduler should fix."""
    return None, "fix_test_command", {}


_HANDLERS = {
    CODE_ERROR: _recover_code_error,
    BROKEN_TEST_COMMAND: _recover_broken_test_command,
    TEST_FLAKINESS: _recover_flakiness,
    DEPENDENCY_ISSUE: _recover_dependency,
    INFINITE_LOOP: _recover_loop,
    CONTEXT_EXHAUSTION: _recover_context,
}


# --- compose_prompt ---------------------------------------------------------------------------------


def prompt_sections(loop: Loop) -> list[PromptSection]:
    memory = _memory(loop)
    sections: list[PromptSection] = []
    for note in memory["notes"]:
        if isinstance(note, Mapping) and note.get("for") == loop.iteration:
            sections.append(
                PromptSection(
                    str(note.get("title", "Failure Classifier")),
                    str(note.get("body", "")),
                    priority=int(note.get("priority", 80)),
                )
            )
    flaky = [t for t in memory["flaky_tests"] if isinstance(t, str)]
    if flaky:
        sections.append(
            PromptSection(
                "Flaky Tests",
                "These tests failed and then passed with no code change, so they are flaky:\n"
                + "\n".join(f"- {t}" for t in flaky[:20])
                + "\n\nA failure of one of them is not caused by your change. If the goal needs "
                "them reliably green, make them deterministic (fixed seeds, no real clocks, "
                "ports or shared state); do not change the code under test to chase a flake.",
                priority=80,
            )
        )
    stale = [
        n for n in memory["notes"] if isinstance(n, Mapping) and n.get("for", 0) > loop.iteration
    ]
    if len(stale) != len(memory["notes"]):
        memory["notes"] = stale
        _save(loop, memory)
    return sections


# --- on_loop_end ------------------------------------------------------------------------------------


#: The report lists the last this many classified iterations ...
REPORT_ROWS = 30
#: ... among the last this many iterations (the ones loopctl holds in memory): the loop's end
#: never reads a long history back from the journal.
REPORT_SCAN = 100


def report(loop: Loop, outcome: LoopOutcome) -> None:
    rows = []
    for record in loop.history[-REPORT_SCAN:]:
        value = record.annotations.get(ANNOTATION)
        if isinstance(value, Mapping) and value.get("mode"):
            rows.append((record.iteration, value))
    if not rows:
        return
    memory = _memory(loop)
    lines = ["| iteration | mode | confidence | detector | recovery |", "|---|---|---|---|---|"]
    for iteration, value in rows[-REPORT_ROWS:]:
        lines.append(
            f"| {iteration} | {value.get('mode')} | {value.get('confidence')} | "
            f"{value.get('detector')} | {value.get('recovery', '')} |"
        )
    applied = ", ".join(f"{k}: {v}" for k, v in sorted(memory["recoveries"].items())) or "none"
    lines += ["", f"Recoveries applied: {applied}."]
    if memory["flaky_tests"]:
        lines.append("Flaky tests: " + ", ".join(map(str, memory["flaky_tests"][:20])) + ".")
    if outcome.reason in memory["recoveries"] and outcome.reason not in ("complete",):
        lines.append(f"The loop stopped because the {outcome.reason} recovery reached its limit.")
    loop.add_report_section("Failure classification", "\n".join(lines), source=PLUGIN_NAME)


__all__ = [
    "BUILTIN_PRIORITY",
    "diagnose",
    "on_failure",
    "on_success",
    "prompt_sections",
    "recover",
    "report",
    "start",
]
