"""Tests first: what the engine makes of the test run before the first agent turn.

A fresh ``loopctl run`` with a test command runs it once before the agent's first turn
(``test_first``, on by default), as ``until pytest; do …; done`` does. Its failure goes into the
first prompt, so the agent need not look for it; a failure that passes on one immediate re-run,
with nothing changed in between, is a flaky one and counts as a pass; and tests that already
pass leave the agent nothing to do (unless a completion signal asks for its word). The engine
runs the commands and calls the hooks; this module holds the rules and the words.
"""

from __future__ import annotations

from loopctl.model import TestRun
from loopctl.testbroken import broken_test_command

#: The reason of the outcome of a run whose tests passed before any agent turn.
ALREADY_PASSING = "tests_already_pass"
#: The label of the engine's re-run of a failure seen before the first turn.
FLAKY_CHECK = "flaky-check"
#: Failing tests named in the ``tests.flaky`` event and the report, at most.
MAX_FLAKY_NAMED = 20


def worth_a_rerun(run: TestRun) -> bool:
    """Whether a failed run may be a flaky one worth one re-run: it names failing tests (a
    collection or build error is not where flakiness lives), did not time out, and its command
    is not one that cannot pass at all (:mod:`loopctl.testbroken`)."""
    if run.passed or run.timed_out or not run.failing_tests:
        return False
    return broken_test_command(run.command, run.exit_code, run.output) is None


def flaky_text(failed: TestRun) -> str:
    """One line for the report: which tests were flaky, and how that was told."""
    tests = ", ".join(failed.failing_tests[:MAX_FLAKY_NAMED])
    more = len(failed.failing_tests) - MAX_FLAKY_NAMED
    if more > 0:
        tests += f" and {more} more"
    return (
        f"flaky: {tests} failed before the first agent turn, then passed on an immediate "
        "re-run with nothing changed; taken as passing"
    )


def already_passing_message(flaky: TestRun | None) -> str:
    """The words of the outcome of a run that needed no agent turn."""
    after = " (after a flaky failure that passed on a re-run)" if flaky is not None else ""
    return (
        f"the tests already pass before any agent turn{after}; nothing for the agent to do "
        "(set test_first = false, or pass --no-test-first, to have the agent work anyway)"
    )
