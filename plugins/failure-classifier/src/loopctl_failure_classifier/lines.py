"""How this plugin's events read to a person: the ``summary`` each event carries.

loopctl's plain and live views show an event's ``summary`` field (``loopctl.view``), and know
nothing of this plugin; the whole data stays in ``events.jsonl`` and ``--json``. The mode is
named for what the loop does about the failure (its recovery), which is another question than
what kind of error the output shows (context-errors' category): a missing module is a
``dependency_issue`` here and a ``RESOURCE_ERROR`` there, and both lines say "missing".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from loopctl_failure_classifier.model import (
    BROKEN_TEST_COMMAND,
    CODE_ERROR,
    CONTEXT_EXHAUSTION,
    DEPENDENCY_ISSUE,
    INFINITE_LOOP,
    TEST_FLAKINESS,
)

#: The built-in modes in words.
MODE_WORDS = {
    DEPENDENCY_ISSUE: "a dependency issue",
    BROKEN_TEST_COMMAND: "a broken test command (it cannot pass whatever the code says)",
    TEST_FLAKINESS: "a flaky test",
    INFINITE_LOOP: "a loop (the same approach failing again and again)",
    CONTEXT_EXHAUSTION: "context exhaustion",
    CODE_ERROR: "a code error",
}
_SHORT_MODE_WORDS = {
    DEPENDENCY_ISSUE: "dependency issue",
    BROKEN_TEST_COMMAND: "broken test command",
    TEST_FLAKINESS: "flaky test",
    INFINITE_LOOP: "loop",
    CONTEXT_EXHAUSTION: "context exhaustion",
    CODE_ERROR: "code error",
}
#: What each built-in recovery does, in words.
ACTION_WORDS = {
    "standard_retry": "the agent tries again with the test output",
    "accept_flaky_pass": "accepting the flaky pass",
    "rerun_tests": "telling the agent the failure is flaky (a re-run passed)",
    "quarantine_note": "telling the agent the failure is flaky",
    "reinstall_deps": "reinstalled the dependencies",
    "dependency_note": "telling the agent to declare the missing dependency",
    "dependency_stop": "stopping: no agent turn installs the missing dependency",
    "fix_test_command": "the test command must be fixed: no agent turn can",
    "reduce_and_redirect": "telling the agent to change its approach",
    "restart_compressed": "restarting with a compressed briefing",
}
_DECISION_WORDS = {"restart": "restarting the agent session", "stop": "stopping the loop"}
#: ``[detector.rule] `` at the start of an evidence line.
_RULE_PREFIX = re.compile(r"^\[[^\]]{1,80}\]\s*")


def mode_words(mode: str, *, short: bool = False) -> str:
    words = (_SHORT_MODE_WORDS if short else MODE_WORDS).get(mode)
    return words or mode.replace("_", " ")


def evidence_text(lines: Sequence[str]) -> str:
    """The first line of evidence without its ``[rule]``, and the next one after a heading
    (``the linter reported:``)."""
    texts = [_RULE_PREFIX.sub("", str(line)).strip() for line in lines]
    texts = [text for text in texts if text]
    if not texts:
        return ""
    text = texts[0]
    if text.endswith(":") and len(texts) > 1:
        text = f"{text} {texts[1]}"
    return text if len(text) <= 200 else text[:199] + "…"


def classified(
    mode: str, confidence: float, evidence: Sequence[str], *, forced: bool, flaky_pass: bool
) -> str:
    """``failure classified as a dependency issue (…), 90% sure: No module named 'x'``."""
    if flaky_pass:
        head = "the tests passed on the code that just failed: classified as a flaky test"
    elif forced:
        head = f"failure treated as {mode_words(mode)} (--failure-mode)"
    else:
        head = f"failure classified as {mode_words(mode)}, {round(100 * confidence)}% sure"
    why = evidence_text(evidence)
    return f"{head}: {why}" if why else head


def recovery_applied(
    mode: str,
    action: str,
    attempt: int,
    limit: int | None,
    decision: str,
    details: Mapping[str, Any],
) -> str:
    """``dependency issue → telling the agent to declare the missing dependency (recovery 1 of
    2); no reinstall command found (set reinstall_cmd)``."""
    what = ACTION_WORDS.get(action) or f"its declared recovery, {action.replace('_', ' ')}"
    if action == "reinstall_deps" and details.get("command"):
        if details.get("timed_out"):
            outcome = "timed out"
        elif details.get("exit_code") == 0:
            outcome = "succeeded"
        else:
            outcome = f"failed with exit code {details.get('exit_code')}"
        what = f"reinstalled the dependencies with `{details['command']}`: {outcome}"
    line = f"{mode_words(mode, short=True)} → {what}"
    line += f" (attempt {attempt} of {limit})" if limit else f" (attempt {attempt})"
    if decision in _DECISION_WORDS and not what.startswith(_DECISION_WORDS[decision][:9]):
        line += f"; {_DECISION_WORDS[decision]}"
    given = [details.get(key) for key in ("reinstall", "note")]
    notes = [note for note in given if isinstance(note, str) and note]
    if action != "reinstall_deps" and isinstance(details.get("command"), str):
        notes.append(f"command: {details['command']}")
    return line + ("; " + "; ".join(notes) if notes else "")


def recovery_limit(mode: str, applied: int, limit: int) -> str:
    return (
        f"the {mode_words(mode, short=True)} recovery was applied {applied} time(s), its limit "
        f"for one run ({limit}): stopping the loop"
    )


def rerun(passed: bool, ran_tests: bool, failing: Sequence[str], duration_s: float) -> str:
    if not ran_tests:
        result = "it ran no tests"
    elif passed:
        result = "they passed, so the failure is flaky"
    else:
        names = ", ".join(str(t) for t in failing[:3])
        result = "they failed again" + (f" ({names})" if names else "")
    return f"re-ran the failing tests with no code change ({duration_s:.1f} s): {result}"


__all__ = [
    "ACTION_WORDS",
    "MODE_WORDS",
    "classified",
    "mode_words",
    "recovery_applied",
    "recovery_limit",
    "rerun",
]
