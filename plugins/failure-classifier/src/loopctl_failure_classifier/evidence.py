"""Gathering :class:`~.model.Evidence`: from a running loop, from a loop's state directory, or
from raw test logs given in iteration order. Every input is optional and every reader is
forgiving: what is missing or unreadable becomes a line in ``Evidence.problems`` (and so in the
``code_error`` verdict's evidence), never an exception.
"""

from __future__ import annotations

import json
import re
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import loopctl
from loopctl import (
    IterationRecord,
    LazyPattern,
    ParsedTestOutput,
    fingerprint,
    parse_test_output,
)
from loopctl_failure_classifier.detectors import ANNOTATION, MONITOR_EVENTS
from loopctl_failure_classifier.model import Evidence, Rerun

if TYPE_CHECKING:  # a loop's classes: `loopctl classify --log` does not load them
    from loopctl import Loop, TestRun, ToolCall

#: Recent relevant events kept (see :func:`relevant`).
EVENTS_TAIL = 500
#: The iterations the detectors look back over: enough for any streak or flip a person would
#: call one, and a per-iteration cost that stays flat however long the loop runs.
HISTORY_WINDOW = 50
#: At most this much of a log file is read (its tail, where the verdict of a run is printed).
MAX_LOG_BYTES = 16 * 1024 * 1024
#: A shell command that installs something: the environment changes under the same code.
_INSTALL = LazyPattern(
    r"\b(?:pip3?|uv|poetry|pipenv|pdm|conda|npm|npx|yarn|pnpm|bun|cargo|go|apt|apt-get|brew|gem"
    r"|bundle|composer|mvn|gradle)\b[^\n]*\b(?:install|add|get|sync|ci|update|upgrade|fetch"
    r"|download)\b"
)
_RESTART_DIR = LazyPattern(r"restart-(\d+)\Z")
#: A run's files, as the state-directory reference names them (for the words of a problem).
LOOP_STATE_FILE = "loop-state.md"
ITERATIONS_FILE = "iterations.jsonl"
ERROR_SUMMARY_FILE = "error-summary.json"
#: At most this many skipped lines of ``iterations.jsonl`` are named in ``Evidence.problems``.
MAX_SKIPPED_REPORTED = 5


def ran_installs(tool_calls: Iterable[ToolCall]) -> bool:
    """Did the agent run an install command (``pip install``, ``npm ci``, …) this turn?"""
    return any(_INSTALL.search(call.key_input or "") for call in tool_calls)


def _read_tail(path: Path, limit: int = MAX_LOG_BYTES) -> str:
    with open(path, "rb") as stream:
        size = stream.seek(0, 2)
        stream.seek(max(0, size - limit))
        return stream.read().decode("utf-8", errors="replace")


#: The events the detectors read: restarts, the engine's stuck reports, and the context
#: monitor's out-of-room signals (not its per-iteration usage readings).
RELEVANT_EVENTS = frozenset({"loop.restart", "loop.stuck", *MONITOR_EVENTS})
#: What a line of events.jsonl holding a relevant event contains, for a quick look before parsing.
_NEEDLES = tuple(f'"{kind}"'.encode() for kind in sorted(RELEVANT_EVENTS))


def relevant(event: Mapping[str, Any]) -> bool:
    """Whether the detectors read ``event``; keeping only these keeps every scan short."""
    return event.get("type") in RELEVANT_EVENTS


def _events_tail(state_dir: Path) -> tuple[dict[str, Any], ...]:
    return tuple(e for e in loopctl.SavedRun(state_dir).events(last=EVENTS_TAIL) if relevant(e))


class EventTail:
    """The last :func:`relevant` events of a running loop's events.jsonl, read incrementally:
    each call parses only the lines appended since the previous one (and of those only the
    ones that can be relevant), so the cost does not grow with the run."""

    def __init__(self, path: Path, keep: int = EVENTS_TAIL) -> None:
        self.path = path
        self.offset = 0
        self.events: deque[dict[str, Any]] = deque(maxlen=keep)

    def read(self) -> tuple[dict[str, Any], ...]:
        with open(self.path, "rb") as stream:
            size = stream.seek(0, 2)
            if size < self.offset:  # a new file: start over
                self.offset = 0
                self.events.clear()
            stream.seek(self.offset)
            chunk = stream.read()
        end = chunk.rfind(b"\n") + 1  # only whole lines; a line being written waits
        for raw in chunk[:end].splitlines():
            if not any(needle in raw for needle in _NEEDLES):
                continue
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict) and relevant(value):
                self.events.append(value)
        self.offset += end
        return tuple(self.events)


def restart_archives(
    state_dir: Path, events: Sequence[Mapping[str, Any]]
) -> tuple[tuple[int, str, int | None], ...]:
    """``(number, reason, error_count)`` for each ``restart-N/`` archive, oldest first."""
    reasons = {
        event.get("number"): str(event.get("reason", ""))
        for event in events
        if event.get("type") == "loop.restart"
    }
    found: list[tuple[int, str, int | None]] = []
    try:
        entries = list(state_dir.iterdir())
    except OSError:
        return ()
    for entry in entries:
        match = _RESTART_DIR.match(entry.name)
        if not match or not entry.is_dir():
            continue
        number = int(match.group(1))
        reason = reasons.get(number, "")
        archive = loopctl.SavedRun(entry)
        if not reason:
            try:
                reason = str(archive.loop_state().extra.get("restart_reason", ""))
            except (loopctl.StateError, OSError, ValueError):
                reason = ""
        try:
            summary = archive.error_summary()
            count = summary["error_count"] if summary else None
        except (loopctl.StateError, OSError):
            count = None
        found.append((number, reason, count))
    return tuple(sorted(found))


def _rerun_from(annotation: Mapping[str, Any]) -> Rerun | None:
    raw = annotation.get("rerun")
    if not isinstance(raw, Mapping):
        return None
    try:
        return Rerun(
            command=str(raw.get("command", "")),
            passed=bool(raw.get("passed")),
            exit_code=raw.get("exit_code") if isinstance(raw.get("exit_code"), int) else None,
            ran_tests=bool(raw.get("ran_tests")),
            failing_tests=tuple(str(t) for t in raw.get("failing_tests", ()) or ()),
        )
    except (TypeError, ValueError):
        return None


# --- from a running loop ----------------------------------------------------------------------------


def from_loop(
    loop: Loop,
    record: IterationRecord,
    test_run: TestRun | None,
    *,
    rerun: Rerun | None = None,
    environment_changed: bool = False,
    events: EventTail | None = None,
) -> Evidence:
    """The evidence for the iteration that just ended (``record``, not yet in the history).
    ``events`` keeps the event tail between iterations (read from the file otherwise)."""
    history = tuple(loop.history[-HISTORY_WINDOW:])
    if not history or history[-1] is not record:
        history = (*history, record)
    turn = loop.last_turn
    problems: list[str] = []
    if test_run is None:
        problems.append("no test run for this iteration")
    try:
        recent = events.read() if events is not None else _events_tail(loop.state_dir)
        restarts = restart_archives(loop.state_dir, recent) if loop.restarts else ()
    except (OSError, ValueError) as exc:
        recent, restarts = (), ()
        problems.append(f"events unreadable: {exc}")
    return Evidence(
        iteration=record.iteration,
        output=test_run.output if test_run else "",
        error_lines=tuple(test_run.error_lines) if test_run else (),
        failing_tests=tuple(test_run.failing_tests) if test_run else (),
        runner=test_run.runner if test_run else "generic",
        test_command=test_run.command if test_run else "",
        exit_code=test_run.exit_code if test_run else None,
        timed_out=bool(test_run and test_run.timed_out),
        tests_passed=bool(test_run and test_run.passed),
        history=history,
        agent_error_kind=record.agent.error_kind,
        agent_message=(turn.outcome.message if turn is not None else record.agent.message)[:2000],
        events=recent,
        restarts=restarts,
        rerun=rerun,
        workdir=loop.workdir,
        state_dir=loop.state_dir,
        environment_changed=environment_changed,
        problems=tuple(problems),
    )


# --- from a state directory ---------------------------------------------------------------------------


def _find_test_log(state_dir: Path, iteration: int) -> Path | None:
    candidates = [loopctl.SavedRun(state_dir).log_path(iteration, "tests.log")]
    try:
        archives = sorted(
            (p for p in state_dir.iterdir() if _RESTART_DIR.match(p.name)),
            key=lambda p: int(p.name.split("-")[1]),
            reverse=True,
        )
    except OSError:
        archives = []
    candidates += [
        loopctl.SavedRun(archive).log_path(iteration, "tests.log") for archive in archives
    ]
    return next((c for c in candidates if c.is_file()), None)


def from_state_dir(state_dir: Path, *, workdir: Path | None = None) -> Evidence:
    """The evidence for the last iteration recorded in a loop's state directory."""
    state_dir = Path(state_dir)
    problems: list[str] = []
    if not state_dir.is_dir():
        return Evidence(problems=(f"{state_dir} is not a directory (no loop state to read)",))
    run = loopctl.SavedRun(state_dir)
    test_cmd = status = reason = ""
    if not (state_dir / LOOP_STATE_FILE).is_file():
        problems.append(f"{LOOP_STATE_FILE} is missing")
    else:
        try:
            loop_state = run.loop_state()
            test_cmd, status = loop_state.test_cmd, loop_state.status
            reason = str(loop_state.extra.get("restart_reason") or loop_state.reason or "")
            if workdir is None and loop_state.workdir and Path(loop_state.workdir).is_dir():
                workdir = Path(loop_state.workdir)
        except (loopctl.StateError, OSError, ValueError) as exc:
            problems.append(f"{LOOP_STATE_FILE} is unreadable: {exc}")
    skipped: list[str] = []
    history = run.iterations(problems=skipped)
    problems.extend(line[:300] for line in skipped[:MAX_SKIPPED_REPORTED])
    if len(skipped) > MAX_SKIPPED_REPORTED:
        problems.append(
            f"{ITERATIONS_FILE}: {len(skipped) - MAX_SKIPPED_REPORTED} more lines skipped"
        )
    summary: dict[str, Any] | None = None
    try:
        summary = run.error_summary()
        if summary is None:
            problems.append(f"{ERROR_SUMMARY_FILE} is missing")
    except (loopctl.StateError, OSError) as exc:
        problems.append(f"{ERROR_SUMMARY_FILE} is malformed: {exc}")
    if not history:
        problems.append(f"{ITERATIONS_FILE} has no iteration records")
    events = _events_tail(state_dir)
    current = history[-1] if history else None
    iteration = current.iteration if current else int((summary or {}).get("iteration", 0))
    output = ""
    log = _find_test_log(state_dir, iteration) if iteration else None
    if log is not None:
        try:
            output = _read_tail(log)
        except OSError as exc:
            problems.append(f"{log.name} is unreadable: {exc}")
    extraction = parse_test_output(output) if output else None
    if summary is not None and (summary.get("iteration") == iteration or current is None):
        error_lines: Sequence[str] = summary["error_lines"]
    else:
        error_lines = extraction.error_lines if extraction else ()
    annotation = current.annotations.get(ANNOTATION) if current else None
    annotation = annotation if isinstance(annotation, Mapping) else {}
    failing = current.failing_tests if current else (extraction.failing_tests if extraction else [])
    return Evidence(
        iteration=iteration,
        output=output,
        error_lines=tuple(error_lines),
        failing_tests=tuple(failing),
        runner=extraction.runner if extraction else "generic",
        test_command=test_cmd or str((summary or {}).get("test_cmd", "")),
        exit_code=current.test_exit_code if current else None,
        tests_passed=bool(current and current.tests_passed),
        history=tuple(history),
        agent_error_kind=current.agent.error_kind if current else None,
        agent_message=current.agent.message if current else "",
        events=events,
        restarts=restart_archives(state_dir, events),
        rerun=_rerun_from(annotation),
        workdir=workdir,
        state_dir=state_dir,
        environment_changed=bool(annotation.get("environment_changed")),
        loop_status=status,
        loop_reason=reason,
        problems=tuple(problems),
    )


# --- from raw logs -------------------------------------------------------------------------------------

#: The tree hash given to every log's record with ``same_code``: the code did not change.
SAME_CODE = "same-code"


#: Closing lines of a passing run, for runners whose extraction reports no pass count.
_PASS_LINE = LazyPattern(
    r"^(?:ok\s+\S+.*|OK(?: \(.*\))?|test result: ok\..*|# fail 0|.*\b\d+ passed\b.*)\s*$",
    re.MULTILINE,
)


def _log_passed(text: str, extraction: ParsedTestOutput | None = None) -> bool:
    """Did this raw log's run pass? Only when it shows no failure and some sign of passing.
    ``extraction``: ``parse_test_output(text)``, when the caller has it already."""
    extraction = extraction or parse_test_output(text)
    if extraction.error_lines or extraction.failing_tests or extraction.failed_count:
        return False
    if (extraction.passed_count or 0) > 0:
        return True
    return _PASS_LINE.search(text[-4000:]) is not None


def record_from_log(
    iteration: int, text: str, *, same_code: bool, extraction: ParsedTestOutput | None = None
) -> IterationRecord:
    extraction = extraction or parse_test_output(text)
    passed = _log_passed(text, extraction)
    return IterationRecord(
        iteration=iteration,
        tests_passed=passed,
        test_exit_code=0 if passed else 1,
        error_count=0 if passed else len(extraction.error_lines),
        error_fingerprint="" if passed else fingerprint(extraction.error_lines),
        failing_tests=[] if passed else list(extraction.failing_tests),
        tree_hash=SAME_CODE if same_code else None,
    )


def from_logs(
    logs: Sequence[str],
    *,
    same_code: bool = False,
    rerun_log: str | None = None,
    workdir: Path | None = None,
    agent_error_kind: str | None = None,
    agent_message: str = "",
    problems: Sequence[str] = (),
) -> Evidence:
    """The evidence for the last of ``logs``, one test run's output each, in iteration order.

    ``same_code`` says the runs were made on unchanged code (reruns), which is what lets a pass
    after a failure count as flakiness. ``rerun_log`` is the output of re-running the last run's
    failing tests with no change.
    """
    if not logs:
        return Evidence(workdir=workdir, problems=(*problems, "no test log given"))
    extractions = [parse_test_output(text) for text in logs]  # each log is parsed once
    history = tuple(
        record_from_log(index, text, same_code=same_code, extraction=parsed)
        for index, (text, parsed) in enumerate(zip(logs, extractions, strict=True), 1)
    )
    output = logs[-1]
    extraction = extractions[-1]
    current = history[-1]
    rerun = None
    if rerun_log is not None:
        again = parse_test_output(rerun_log)
        passed = _log_passed(rerun_log, again)
        rerun = Rerun(
            command="(rerun log)",
            passed=passed,
            exit_code=0 if passed else 1,
            ran_tests=(again.passed_count or 0) + (again.failed_count or 0) > 0,
            failing_tests=tuple(again.failing_tests),
        )
    return Evidence(
        iteration=current.iteration,
        output=output,
        error_lines=tuple(extraction.error_lines),
        failing_tests=tuple(extraction.failing_tests),
        runner=extraction.runner,
        exit_code=current.test_exit_code,
        tests_passed=current.tests_passed,
        history=history,
        agent_error_kind=agent_error_kind,
        agent_message=agent_message,
        rerun=rerun,
        workdir=workdir,
        problems=tuple(problems),
    )
