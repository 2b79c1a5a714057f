"""``suggestions.jsonl``: which suggestions the loop made, and whether they worked.

The file is append-only. A suggestion set is one ``{"kind": "suggestion", …}`` line; its
resolution is a later ``{"kind": "resolution", "id": …}`` line. Nothing is ever rewritten, so
the cost of resolving stays constant however long the run gets, and a crash can at worst lose
the last line (read back tolerantly by :func:`loopctl.read_jsonl`).

A suggestion set is judged at the next test run after the agent saw it: **effective** only when
the failing tests it was about now pass (all of them, or the whole run when it named none);
otherwise it is resolved as not effective (``still_failing``). On a successful run every
outstanding set is resolved.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from loopctl import JsonlAppender, read_jsonl, redact

FILE_NAME = "suggestions.jsonl"


@attrs.define
class SuggestionSet:
    id: str
    iteration: int | None
    stage: str
    category: str
    rule: str
    actions: list[dict[str, str]]
    failing_tests: list[str]
    failure_id: int | None = None
    #: The failure's signature in the memory (with the run id, it finds the row to fix).
    signature: str = ""
    ts: float = 0.0
    #: The loop that made it (``loop.run_id``; None in a ledger of an earlier version, or for a
    #: loop that has no id): a state directory may hold an earlier loop's sets.
    run: str | None = None
    resolved: bool = False
    effective: bool | None = None
    reason: str = ""

    @property
    def keys(self) -> list[str]:
        return [str(a.get("key", "")) for a in self.actions if a.get("key")]


@attrs.define
class Verdict:
    effective: bool
    reason: str
    passed_tests: list[str] = attrs.Factory(list)
    still_failing: list[str] = attrs.Factory(list)


def judge(suggestion: SuggestionSet, *, tests_passed: bool, failing_now: Sequence[str]) -> Verdict:
    """Did the failing tests this suggestion set was about pass at this test run?"""
    about = list(suggestion.failing_tests)
    if tests_passed:
        return Verdict(True, "tests_pass", passed_tests=about)
    failing = set(failing_now)
    if about and failing and not failing.intersection(about):
        return Verdict(True, "its_tests_pass", passed_tests=about)
    still = [test for test in about if test in failing] if failing else about
    return Verdict(False, "still_failing", still_failing=still)


class Ledger:
    """The ledger in ``state_dir``; every method is safe to call when the file is missing."""

    def __init__(
        self,
        state_dir: Path,
        *,
        keep_open: bool = False,
        submit: Callable[[Callable[[], None]], None] | None = None,
    ) -> None:
        self.path = Path(state_dir) / FILE_NAME
        #: Keep the file open between appends (a loop appends on every failed iteration).
        self.keep_open = keep_open
        #: Where the appends are made, in order (a loop's ``in_background``; None: at once).
        #: The returned entries do not wait for them.
        self.submit = submit
        self._appender: JsonlAppender | None = None

    def _append(self, line: dict[str, Any]) -> None:
        if self.submit is not None:
            self.submit(partial(self._write, line))
        else:
            self._write(line)

    def _write(self, line: dict[str, Any]) -> None:
        if self._appender is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._appender = JsonlAppender(self.path)
        try:
            self._appender.append(line)
        finally:
            if not self.keep_open:
                self.close()

    def close(self) -> None:
        if self._appender is not None:
            self._appender.close()
            self._appender = None

    def record_suggestion(
        self,
        suggestion_id: str,
        *,
        category: str,
        stage: str,
        actions: Sequence[dict[str, str]],
        iteration: int | None = None,
        rule: str = "",
        failing_tests: Sequence[str] = (),
        failure_id: int | None = None,
        signature: str = "",
        run: str | None = None,
    ) -> SuggestionSet:
        """Append one suggestion set (the seed's ``record_suggestion``)."""
        entry = SuggestionSet(
            id=suggestion_id,
            iteration=iteration,
            stage=redact(stage),
            category=category,
            rule=rule,
            actions=[{k: redact(str(v)) for k, v in action.items()} for action in actions],
            failing_tests=[redact(t) for t in failing_tests][:50],
            failure_id=failure_id,
            signature=signature,
            ts=round(time.time(), 3),
            run=run,
        )
        self._append(
            {
                "kind": "suggestion",
                "id": entry.id,
                "ts": entry.ts,
                "iteration": entry.iteration,
                "stage": entry.stage,
                "category": entry.category,
                "rule": entry.rule,
                "actions": entry.actions,
                "failing_tests": entry.failing_tests,
                "failure_id": entry.failure_id,
                "signature": entry.signature,
                **({"run": entry.run} if entry.run is not None else {}),
            }
        )
        return entry

    def mark_resolved(
        self,
        suggestion_id: str,
        verdict: Verdict,
        *,
        iteration: int | None = None,
    ) -> None:
        """Append the resolution of one set (the seed's ``mark_suggestion_resolved``)."""
        self._append(
            {
                "kind": "resolution",
                "id": suggestion_id,
                "ts": round(time.time(), 3),
                "iteration": iteration,
                "resolved": True,
                "effective": verdict.effective,
                "reason": verdict.reason,
                "passed_tests": [redact(t) for t in verdict.passed_tests][:50],
                "still_failing": [redact(t) for t in verdict.still_failing][:50],
            }
        )

    def entries(self) -> list[SuggestionSet]:
        """Every suggestion set, with its resolution folded in, oldest first."""
        sets: dict[str, SuggestionSet] = {}
        for line in read_jsonl(self.path).records if self.path.exists() else []:
            kind = line.get("kind")
            ident = str(line.get("id", ""))
            if kind == "suggestion" and ident and ident not in sets:
                sets[ident] = SuggestionSet(
                    id=ident,
                    iteration=line.get("iteration"),
                    stage=str(line.get("stage", "")),
                    category=str(line.get("category", "")),
                    rule=str(line.get("rule", "")),
                    actions=[a for a in line.get("actions") or [] if isinstance(a, dict)],
                    failing_tests=[str(t) for t in line.get("failing_tests") or []],
                    failure_id=line.get("failure_id"),
                    signature=str(line.get("signature") or ""),
                    ts=float(line.get("ts") or 0.0),
                    run=line.get("run") if isinstance(line.get("run"), str) else None,
                )
            elif kind == "resolution" and ident in sets and not sets[ident].resolved:
                sets[ident].resolved = True
                sets[ident].effective = bool(line.get("effective"))
                sets[ident].reason = str(line.get("reason", ""))
        return list(sets.values())

    def entries_of(self, run: str | None) -> list[SuggestionSet]:
        """The suggestion sets the loop ``run`` made (a loop's ``loop.run_id``), oldest first."""
        return [entry for entry in self.entries() if entry.run == run]

    def outstanding(self) -> list[SuggestionSet]:
        return [entry for entry in self.entries() if not entry.resolved]

    def resolve_outstanding(
        self, *, tests_passed: bool, failing_now: Sequence[str], iteration: int | None = None
    ) -> list[tuple[SuggestionSet, Verdict]]:
        """Judge and resolve every outstanding set (the seed's
        ``resolve_outstanding_suggestions``, with the effectiveness rule above)."""
        done = []
        for entry in self.outstanding():
            verdict = judge(entry, tests_passed=tests_passed, failing_now=failing_now)
            self.mark_resolved(entry.id, verdict, iteration=iteration)
            done.append((entry, verdict))
        return done


__all__ = ["FILE_NAME", "Ledger", "SuggestionSet", "Verdict", "judge"]
