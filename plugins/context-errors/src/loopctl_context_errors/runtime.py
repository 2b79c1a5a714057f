"""What the plugin does inside a loop; :mod:`loopctl_context_errors.plugin` calls in here.

On a failed iteration: judge the suggestions made after the previous failure (did the tests
they were about pass?), categorize the failure, ask the failure memory for similar ones, write
``context-error-<stage>.md``, store the failure, record the new suggestions, and keep a small
summary for the next prompt's "Historical Context" section. On a passing iteration: resolve
what is outstanding and teach the memory what fixed it.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Sequence
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import Snapshot, StashKey, redact
from loopctl_context_errors import events, outage
from loopctl_context_errors import lines as say
from loopctl_context_errors.categories import Categorization, Rule, RuleSet, categorize
from loopctl_context_errors.config import ContextErrorsConfig
from loopctl_context_errors.ledger import Ledger, SuggestionSet, judge
from loopctl_context_errors.memory import (
    ENV_MEMORY,
    FailureMemory,
    QueryOutcome,
    resolve_memory_location,
    signature_of,
)
from loopctl_context_errors.project_id import ProjectIdentity, project_identity
from loopctl_context_errors.report import ErrorReport, build_report, render_markdown
from loopctl_context_errors.store import StoreError

if TYPE_CHECKING:
    from loopctl import IterationRecord, Loop, LoopOutcome, PromptSection, TestRun

NAME = "context-errors"
RUN_ID_KEY = "context_errors.run_id"
LAST_KEY = "context_errors.last"
OUTSTANDING_KEY = "context_errors.outstanding"
#: What the report section counts, kept up to date as sets are recorded and judged, so the loop's
#: end never reads the whole ledger back (it grows by a line or two every failing iteration).
TALLY_KEY = "context_errors.tally"
PROMPT_TITLE = "Historical Context"

_STAGE_CHARS = re.compile(r"[^A-Za-z0-9._-]+")


def sanitize_stage(stage: str) -> str:
    """A stage name safe as part of a file name: ``context-error-<this>.md``."""
    cleaned = _STAGE_CHARS.sub("-", str(stage)).strip(".-_")[:64]
    return cleaned or "stage"


def report_path(state_dir: Path, stage: str) -> Path:
    return Path(state_dir) / f"context-error-{sanitize_stage(stage)}.md"


def settings(loop: Loop) -> ContextErrorsConfig:
    try:
        config = loop.plugin_config(NAME)
    except KeyError:  # registered without its config hook (a test harness): the defaults
        return ContextErrorsConfig()
    return config if isinstance(config, ContextErrorsConfig) else ContextErrorsConfig()


def start(loop: Loop) -> None:
    """At the loop's start: its run id, and the tally of a resumed loop that an earlier version
    ran (counted from its ledger, once)."""
    run_id(loop)
    if loop.resumed and _tally(loop) is None:
        loop.set_value(TALLY_KEY, _ledger_tally(loop))
    memory = _memory(loop, settings(loop))
    spool = memory.spool() if memory is not None else None
    if memory is not None and spool is not None and spool.pending():
        loop.in_background(memory.drain)  # what earlier runs kept, while the store is up


def run_id(loop: Loop) -> str:
    """This run's id in the memory (kept in loop-state.md, so a resume keeps it)."""
    value = loop.get_value(RUN_ID_KEY)
    if not isinstance(value, str) or not value:
        value = uuid.uuid4().hex[:16]
        loop.set_value(RUN_ID_KEY, value)
    return value


def memory_for(config: ContextErrorsConfig) -> FailureMemory | None:
    """The memory ``config`` and the environment name (None: off). A malformed URL gives a
    memory that answers ``unavailable``: the loop goes on without it."""
    if not config.memory:
        return None
    try:
        location = resolve_memory_location(config.memory_path, config.memory_url)
    except StoreError as exc:
        return FailureMemory.unusable(exc, timeout_s=config.memory_timeout_s)
    if location is None:
        return None
    return FailureMemory(location, timeout_s=config.memory_timeout_s)


#: The run's memory, with what it was made from (config and environment).
MEMORY = StashKey[tuple[tuple[object, ...], FailureMemory | None]]()


def _memory(loop: Loop, config: ContextErrorsConfig) -> FailureMemory | None:
    """:func:`memory_for` ``config``, made once per run (again only if the config or the
    variables that choose the memory's path change): a failure does not resolve the path anew."""
    key = (
        config.memory,
        config.memory_path,
        config.memory_url,
        config.memory_timeout_s,
        *(os.environ.get(name) for name in (ENV_MEMORY, "XDG_DATA_HOME", "HOME")),
    )
    kept = loop.stash.get(MEMORY)
    if kept is None or kept[0] != key:
        kept = (key, memory_for(config))
        loop.stash[MEMORY] = kept
    return kept[1]


def rules_for(loop: Loop) -> RuleSet:
    """The built-in rules plus those other plugins return from ``context_errors_rules``."""
    hook = getattr(loop.hook, "context_errors_rules", None)
    extra: list[Rule] = []
    if hook is not None:
        taken = set(_builtin_names())
        for result in hook() or []:
            for rule in result if isinstance(result, (list, tuple)) else [result]:
                if isinstance(rule, Rule) and rule.name not in taken:
                    taken.add(rule.name)
                    extra.append(rule)
    return _ruleset(tuple(extra))


@lru_cache(maxsize=1)
def _builtin_names() -> frozenset[str]:
    from loopctl_context_errors.categories import BUILTIN_RULES

    return frozenset(rule.name for rule in BUILTIN_RULES)


@lru_cache(maxsize=16)
def _ruleset(extra: tuple[Rule, ...]) -> RuleSet:
    """Compiled once per distinct set of plugin rules, not once per failure."""
    return RuleSet.with_extra(extra)


#: The run's project identity, with the settings it was made from.
PROJECT = StashKey[tuple[tuple[str, str], ProjectIdentity]]()


def _project(loop: Loop, config: ContextErrorsConfig) -> ProjectIdentity:
    """The project's identity in the memory and its display name, computed once per run."""
    key = (config.project_id, config.project)
    kept = loop.stash.get(PROJECT)
    if kept is None or kept[0] != key:
        kept = (key, project_identity(Path(loop.workdir), config.project_id, config.project))
        loop.stash[PROJECT] = kept
    return kept[1]


def _changed_since(loop: Loop, iteration: int | None, record: IterationRecord) -> list[str]:
    """The files changed after ``iteration`` (None: since the start) up to ``record``, oldest
    first (at most 50). Reads only the records after ``iteration``: the cost does not grow
    with the run."""
    history = loop.history
    since = len(history)
    while since > 0 and history[since - 1].iteration > (iteration or 0):
        since -= 1
    files: dict[str, None] = {}
    for past in (*history[since:], record):
        files.update(dict.fromkeys(past.changed_files))
    return list(files)[:50]


def _outstanding(loop: Loop) -> list[SuggestionSet]:
    """The suggestion sets not judged yet, kept in loop-state.md (so a resume keeps them and
    judging never has to read the growing ledger)."""
    value = loop.get_value(OUTSTANDING_KEY)
    if not isinstance(value, list):
        return []
    sets = []
    for item in value:
        if isinstance(item, dict) and item.get("id"):
            sets.append(
                SuggestionSet(
                    id=str(item["id"]),
                    iteration=item.get("iteration"),
                    stage=str(item.get("stage", "")),
                    category=str(item.get("category", "")),
                    rule=str(item.get("rule", "")),
                    actions=[a for a in item.get("actions") or [] if isinstance(a, dict)],
                    failing_tests=[str(t) for t in item.get("failing_tests") or []],
                    failure_id=item.get("failure_id"),
                    signature=str(item.get("signature") or ""),
                )
            )
    return sets


def _judge(
    loop: Loop,
    record: IterationRecord,
    memory: FailureMemory | None,
    *,
    tests_passed: bool,
    failing_now: list[str],
) -> None:
    """Resolve every outstanding suggestion set against this iteration's test run (its
    failing tests are ``failing_now``)."""
    pending = _outstanding(loop)
    if not pending:
        return
    ledger = _ledger(loop)
    for entry in pending:
        verdict = judge(entry, tests_passed=tests_passed, failing_now=failing_now)
        ledger.mark_resolved(entry.id, verdict, iteration=loop.iteration)
        _count(loop, judged=1, effective=int(verdict.effective))
        loop.emit(
            events.SUGGESTION_RESOLVED,
            suggestion_id=entry.id,
            resolved=True,
            effective=verdict.effective,
            reason=verdict.reason,
            stage=entry.stage,
            category=entry.category,
            suggested_at_iteration=entry.iteration,
            passed_tests=[redact(t)[:500] for t in verdict.passed_tests][:20],
            still_failing=[redact(t)[:500] for t in verdict.still_failing][:20],
            summary=say.suggestion_resolved(
                entry.iteration, verdict.effective, verdict.reason, len(verdict.still_failing)
            ),
        )
        if memory is None:
            continue
        loop.in_background(
            partial(memory.record_suggestion_outcome, entry.keys, effective=verdict.effective)
        )
        if verdict.effective and entry.signature:
            own = [a for a in entry.actions if a.get("source") != "memory"] or entry.actions
            first = own[0].get("text", "") if own else ""
            files = _changed_since(loop, entry.iteration, record)
            took = (loop.iteration - entry.iteration) if entry.iteration else None
            summary = (
                f"resolved at iteration {loop.iteration}"
                + (f", {took} iteration(s) after it was reported" if took else "")
                + f" ({verdict.reason})"
            )
            loop.in_background(
                partial(
                    memory.record_fix_for,
                    entry.signature,
                    run_id(loop),
                    files=files,
                    suggestion=first,
                    summary=summary,
                    change=_fix_change(loop, files),
                )
            )
    loop.set_value(OUTSTANDING_KEY, [])
    if FAILED_TREE in loop.stash:
        del loop.stash[FAILED_TREE]


#: The working tree as it was when the outstanding failure was reported: the change from it to
#: the tree that passes is the fix the memory keeps (this process only: a resumed loop has none).
FAILED_TREE = StashKey[Snapshot]()


def _fix_change(loop: Loop, files: list[str]) -> str:
    """The diff of ``files`` from the tree of the failure to the tree that passes now ("" when
    it cannot be told: see :meth:`loopctl.Workspace.change_diff`)."""
    before, after = loop.stash.get(FAILED_TREE), loop.last_snapshot
    if before is None or after is None or not files:
        return ""
    return loop.workspace.change_diff(before, after, files)


#: The run's ledger, kept open between appends (closed when the loop ends).
LEDGER = StashKey[Ledger]()


def _ledger(loop: Loop) -> Ledger:
    ledger = loop.stash.get(LEDGER)
    if ledger is None:
        # appended while the loop waits, in order with the memory's writes
        ledger = Ledger(loop.state_dir, keep_open=True, submit=loop.in_background)
        loop.stash[LEDGER] = ledger
    return ledger


#: Lines of the test output the in-loop report carries (the whole log is in logs/ anyway).
REPORT_EXCERPT_LINES = 80
#: The memory's answers already fetched in this run, by the failure's signature.
SIMILAR = StashKey[dict[str, QueryOutcome]]()
#: Answers kept at most per run (a long run of ever-new failures starts over past this).
SIMILAR_CACHE_SIZE = 256


def _similar(
    loop: Loop, memory: FailureMemory | None, found: Categorization, rid: str, limit: int
) -> QueryOutcome:
    """The memory's answer for this failure; a failure repeated within the run reuses it."""
    if memory is None:
        return QueryOutcome(status="disabled")
    signature, _ = signature_of(found.decisive_lines)
    answers = loop.stash.setdefault(SIMILAR, {})
    cached = answers.get(signature)
    if cached is not None and signature:
        return memory.answered_again(cached)
    outcome = memory.query_similar(
        found.decisive_lines,
        limit=limit,
        category=found.category.value,
        exclude_run=rid,
        project_id=_project(loop, settings(loop)).id,
    )
    if outcome.status in ("ok", "missing"):
        if len(answers) >= SIMILAR_CACHE_SIZE:
            answers.clear()
        answers[signature] = outcome
    return outcome


def _failure_input(
    loop: Loop, test_run: TestRun | None
) -> tuple[str, str, list[str] | None, list[str], str | None]:
    """(stage, text, decisive lines, failing tests, runner) of what failed this iteration.

    A failed test run comes as the core parsed it: its error lines are the decisive lines
    (none found is an answer too, so the output is never parsed a second time), with its
    failing tests and runner."""
    if test_run is not None and not test_run.passed:
        return (
            "tests",
            test_run.output,
            list(test_run.error_lines),
            list(test_run.failing_tests),
            test_run.runner,
        )
    turn = loop.last_turn
    if turn is None:
        return "agent", "", None, [], None
    text = "\n".join(
        part for part in (turn.outcome.message, turn.stderr_tail, turn.final_text[-2000:]) if part
    )
    return "agent", text, None, [], None


def handle_failure(loop: Loop, record: IterationRecord, test_run: TestRun | None) -> ErrorReport:
    """Report the failure of ``record``; ``test_run`` is the iteration's own (None when the
    agent failed before the tests ran)."""
    started = time.perf_counter()
    config = settings(loop)
    memory = _memory(loop, config)
    rid = run_id(loop)
    passed = test_run is not None and test_run.passed
    failing_now = list(test_run.failing_tests) if test_run is not None else []
    _judge(loop, record, memory, tests_passed=passed, failing_now=failing_now)
    if loop.last_snapshot is not None:  # the tree of this failure, which a fix starts from
        loop.stash[FAILED_TREE] = loop.last_snapshot

    stage, text, decisive, failing, runner = _failure_input(loop, test_run)
    found: Categorization = categorize(
        text, decisive_lines=decisive, rules=rules_for(loop), runner=runner
    )
    signature, _ = signature_of(found.decisive_lines)
    similar = _similar(loop, memory, found, rid, config.max_similar)
    report = build_report(
        text,
        stage=stage,
        iteration=loop.iteration,
        goal=loop.original_goal,
        issue=config.issue,
        failing_tests=failing,
        memory=memory,
        max_similar=config.max_similar,
        exclude_run=rid,
        categorization=found,
        similar=similar,
        excerpt_lines=REPORT_EXCERPT_LINES,
    )
    path: Path | None = None
    if config.save_reports:  # rendered and written off the loop's path; flushed at the end
        path = report_path(loop.state_dir, stage)
        loop.write_file(path, partial(render_markdown, report), durable=False)  # a view
    if memory is not None and signature:
        decisive_lines, category, rule = found.decisive_lines, found.category.value, found.rule_name
        project, project_path = _project(loop, config), str(loop.workdir)
        loop.in_background(
            partial(
                memory.record_failure,
                decisive=decisive_lines,
                category=category,
                rule=rule,
                stage=stage,
                project=project.name,
                project_id=project.id,
                project_path=project_path,
                run_id=rid,
                occurrence=_seen_again(loop, signature),
            )
        )
    outage.tell(loop, memory, similar)
    loop.emit(
        events.CONTEXT_GENERATED,
        stage=report.stage[:100],
        category=report.category.value,
        rule=report.rule,
        signature=report.signature,
        runner=report.runner[:50],
        decisive_lines=[line[:500] for line in report.decisive_lines[:8]],
        failing=len(failing),
        similar_count=len(report.similar),
        fixed_similar_count=sum(1 for s in report.similar if s.record.fixed),
        actions_count=len(report.suggestions),
        memory_status=report.memory_status,
        **({"memory_reason": report.memory_reason[:40]} if report.memory_reason else {}),
        memory_ms=report.memory_ms,
        report_path=str(path) if path is not None else None,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        summary=say.context_generated(
            report.stage[:100],
            report.category.value,
            report.rule,
            len(report.similar),
            sum(1 for s in report.similar if s.record.fixed),
        ),
    )
    loop.hook.context_errors_report(loop=loop, report=report)
    suggestion_id = f"{rid[:8]}-{loop.iteration:04d}-{sanitize_stage(stage)}"
    actions = [s.to_json() for s in report.suggestions]
    entry = _ledger(loop).record_suggestion(
        suggestion_id,
        category=report.category.value,
        stage=report.stage,
        actions=actions,
        iteration=loop.iteration,
        rule=report.rule,
        failing_tests=failing,
        signature=signature,
        run=loop.run_id,
    )
    _count(loop, category=entry.category, stage=entry.stage)
    loop.set_value(
        OUTSTANDING_KEY,
        [
            {
                "id": entry.id,
                "iteration": entry.iteration,
                "stage": entry.stage,
                "category": entry.category,
                "rule": entry.rule,
                "actions": entry.actions,
                "failing_tests": entry.failing_tests,
                "signature": entry.signature,
            }
        ],
    )
    loop.emit(
        events.SUGGESTION_RECORDED,
        suggestion_id=suggestion_id,
        stage=report.stage[:100],
        category=report.category.value,
        rule=report.rule,
        actions=[s.text[:1000] for s in report.suggestions],
        action_keys=[s.key[:200] for s in report.suggestions],
        failing_tests=[t[:500] for t in report.failing_tests[:20]],
        signature=signature,
    )
    loop.annotate(
        "context_errors",
        {
            "category": report.category.value,
            "rule": report.rule,
            "signature": report.signature,
            "suggestion_id": suggestion_id,
        },
    )
    loop.set_value(LAST_KEY, _prompt_summary(report, suggestion_id, path))
    return report


def _prompt_summary(report: ErrorReport, suggestion_id: str, path: Path | None) -> dict[str, Any]:
    similar = []
    for item in report.similar:
        record = item.record
        head = record.decisive[-1] if record.decisive else ""
        fix = (
            f"fixed by changing {', '.join(record.fix_files[:4]) or 'the code'}"
            + (f" after: {record.fix_suggestion}" if record.fix_suggestion else "")
            if record.fixed
            else "not fixed yet"
        )
        where = f" {item.place()}" if record.project or not item.same_project else ""
        change = "".join(f"\n    {line}" for line in record.fix_change) if record.fixed else ""
        if change:
            fix += "; the change that fixed it:"
        similar.append(redact(f"{item.match}{where}: {head[:160]} — {fix}")[:400] + redact(change))
    return {
        "iteration": report.iteration,
        "stage": report.stage,
        "category": report.category.value,
        "rule": report.rule,
        "matched_line": report.matched_line[:300],
        "similar": similar,
        "actions": [s.text for s in report.suggestions],
        "suggestion_id": suggestion_id,
        "report_path": str(path) if path is not None else "",
    }


def historical_context(loop: Loop) -> PromptSection | None:
    """The "Historical Context" section, on iterations after a failure, within its budget."""
    last = loop.get_value(LAST_KEY)
    if not isinstance(last, dict) or not last.get("category"):
        return None
    from loopctl import PromptSection

    config = settings(loop)
    when = (
        f"iteration {last.get('iteration')}" if last.get("iteration") else "before the first turn"
    )
    lines = [
        f"The last failure ({last.get('stage', 'tests')}, {when}) "
        f"was categorized {last['category']} by rule {last.get('rule', 'none')}.",
    ]
    if last.get("matched_line"):
        lines.append(f"Decisive line: {last['matched_line']}")
    if last.get("similar"):
        lines += ["", "Similar past failures and their fixes:"]
        for text in last["similar"]:  # a fix's change follows on lines of its own
            lines += f"- {text}".split("\n")
    if last.get("actions"):
        lines += ["", "Suggested actions:"]
        lines += [f"{i}. {text}" for i, text in enumerate(last["actions"], 1)]
    if last.get("report_path"):
        lines += ["", f"Full report: {last['report_path']}"]
    body = _fit(lines, config.prompt_budget_chars)
    return PromptSection(PROMPT_TITLE, redact(body), priority=config.prompt_priority, source=NAME)


def _fit(lines: list[str], budget: int) -> str:
    """Whole lines, in order, within ``budget`` characters (a long line is cut with …)."""
    kept: list[str] = []
    used = 0
    for line in lines:
        room = budget - used - 1
        if room <= 0:
            break
        if len(line) > room:
            if room > 40:
                kept.append(line[: room - 1] + "…")
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept).strip()


#: How many times the run met each failure (by signature), kept in loop-state.md so that a
#: resume counts on: a failure written from the local spool brings its row to this count.
SEEN_KEY = "context_errors.seen"
#: Failures counted at most (a run of ever-new failures forgets the oldest: counted from 1 again).
SEEN_MAX = 256


def _seen_again(loop: Loop, signature: str) -> int:
    """Count one more meeting of the failure ``signature``; how many there were in the run."""
    value = loop.get_value(SEEN_KEY)
    seen = {k: v for k, v in value.items() if isinstance(v, int)} if isinstance(value, dict) else {}
    count = seen.pop(signature, 0) + 1
    seen[signature] = count  # the latest last: the oldest go first
    loop.set_value(SEEN_KEY, dict(list(seen.items())[-SEEN_MAX:]))
    return count


def handle_success(loop: Loop, record: IterationRecord) -> None:
    config = settings(loop)
    memory = _memory(loop, config)
    _judge(loop, record, memory, tests_passed=True, failing_now=[])
    loop.set_value(LAST_KEY, None)
    outage.tell(loop, memory)


def handle_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    config = settings(loop)
    loop.wait_for_background(
        config.memory_timeout_s
    )  # the last report and memory writes land first
    outage.tell(loop, _memory(loop, config))
    ledger = loop.stash.get(LEDGER)
    if ledger is not None:
        ledger.close()
        del loop.stash[LEDGER]
    tally = _tally(loop)
    if tally is None:  # none counted yet (none made, or a loop an earlier version ran)
        tally = _ledger_tally(loop)
    reported = sum(tally["reported"].values())
    if reported:
        judged, effective = tally["judged"], tally["effective"]
        lines = [
            f"Failures reported: {reported} ("
            + ", ".join(f"{k} {v}" for k, v in sorted(tally["reported"].items()))
            + ")",
            f"Suggestion sets judged: {judged}, effective: {effective}"
            f"{'' if judged == reported else f', outstanding: {reported - judged}'}",
            f"Latest report: {report_path(loop.state_dir, tally['stage']).name}",
        ]
        loop.add_report_section("Context Errors", "\n".join(lines), source=NAME)
    memory = memory_for(config)
    if memory is not None:
        memory.enforce_cap(config.memory_max_records)


def _tally(loop: Loop) -> dict[str, Any] | None:
    """The running counts (:data:`TALLY_KEY`), None when there are none or they are damaged."""
    value = loop.get_value(TALLY_KEY)
    if not isinstance(value, dict):
        return None
    reported, judged, effective = value.get("reported"), value.get("judged"), value.get("effective")
    if not (
        isinstance(reported, dict)
        and all(isinstance(k, str) and isinstance(v, int) for k, v in reported.items())
        and isinstance(judged, int)
        and isinstance(effective, int)
        and isinstance(value.get("stage"), str)
    ):
        return None
    return {**value, "reported": dict(reported)}


def _ledger_tally(loop: Loop) -> dict[str, Any]:
    """The tally counted from the ledger, once: of this loop's sets only (the state directory
    may hold an earlier loop's)."""
    return _tally_of(Ledger(loop.state_dir).entries_of(loop.run_id))


def _tally_of(entries: Sequence[SuggestionSet]) -> dict[str, Any]:
    reported: dict[str, int] = {}
    for entry in entries:
        reported[entry.category] = reported.get(entry.category, 0) + 1
    judged = [e for e in entries if e.resolved]
    return {
        "reported": reported,
        "judged": len(judged),
        "effective": sum(1 for e in judged if e.effective),
        "stage": entries[-1].stage if entries else "",
    }


def _count(
    loop: Loop, *, category: str = "", stage: str = "", judged: int = 0, effective: int = 0
) -> None:
    """Add a recorded set (of ``category``, at ``stage``) or a judged one to the tally."""
    tally = _tally(loop) or _tally_of([])
    if category:
        tally["reported"][category] = tally["reported"].get(category, 0) + 1
        tally["stage"] = stage
    tally["judged"] += judged
    tally["effective"] += effective
    loop.set_value(TALLY_KEY, tally)


__all__ = [
    "handle_failure",
    "handle_loop_end",
    "handle_success",
    "historical_context",
    "report_path",
    "rules_for",
    "run_id",
    "sanitize_stage",
    "start",
]
