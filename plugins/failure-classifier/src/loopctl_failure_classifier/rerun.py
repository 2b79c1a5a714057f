"""The confirmation rerun: run only the failing tests again, with no code change.

A test that fails and then passes on the very same code is flaky; that is the one piece of
evidence for flakiness this plugin trusts on its own. The rerun command is chosen so that it
really runs the failing tests: pytest's ``--lf`` (last failed), unittest test ids, or the whole
test command when the runner offers nothing narrower. A rerun that ran no test at all proves
nothing and is not counted as a pass.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from loopctl.model import TestRun
from loopctl import parse_test_output
from loopctl_failure_classifier.model import Rerun

#: Shell syntax that makes appending arguments unsafe (they would land on another command).
_SHELL_OPERATORS = re.compile(r"&&|\|\||[;|&<>`]|\$\(")
_PYTEST = re.compile(r"(?:^|[\s/])(?:py\.test|pytest)(?:\s|$)|-m\s+pytest(?:\s|$)")
_UNITTEST = re.compile(r"^(?P<python>.*?)\s-m\s+unittest(?P<rest>(?:\s.*)?)$")
_UNITTEST_ID = re.compile(r"[A-Za-z_][\w.]*\Z")


def _simple(command: str) -> bool:
    return not _SHELL_OPERATORS.search(command)


def rerun_command(
    test_cmd: str, failing_tests: Sequence[str], runner: str, template: str | None = None
) -> tuple[str, str] | None:
    """``(command, how)`` to rerun the failing tests, or None when there is nothing to run."""
    command = test_cmd.strip()
    if template:
        if "{tests}" in template:
            if not failing_tests:
                return None
            return template.replace("{tests}", shlex.join(failing_tests)), "configured rerun_cmd"
        return template, "configured rerun_cmd"
    if not command:
        return None
    if _simple(command) and (runner == "pytest" or _PYTEST.search(command)):
        if "--lf" in command.split() or "--last-failed" in command.split():
            return command, "the pytest command (it already selects the last failures)"
        return f"{command} --lf", "pytest --lf (only the tests that failed)"
    found = _UNITTEST.match(command) if _simple(command) else None
    if found and failing_tests and all(_UNITTEST_ID.match(t) for t in failing_tests):
        rest = found.group("rest").split()
        start_dir = _discover_start(rest)
        if start_dir in (None, "."):
            ids = " ".join(shlex.quote(t) for t in failing_tests)
            return f"{found.group('python')} -m unittest {ids}", "unittest, the failing test ids"
    return command, "the whole test command (the runner has no narrower rerun)"


def _discover_start(args: list[str]) -> str | None:
    """The start directory of ``unittest discover`` (None: no discover or the default)."""
    if not args or args[0] != "discover":
        return None
    rest = args[1:]
    for index, arg in enumerate(rest):
        if arg in ("-s", "--start-directory", "-t", "--top-level-directory"):
            return rest[index + 1] if index + 1 < len(rest) else "?"
    positional = [a for a in rest if not a.startswith("-")]
    return positional[0] if positional else None


def confirmation(run: TestRun) -> Rerun:
    """What a rerun's result says: did it pass, and did it actually run tests?"""
    extraction = parse_test_output(run.output)
    ran = True
    if extraction.runner in ("pytest", "unittest", "jest", "node", "cargo", "go"):
        ran = (extraction.passed_count or 0) + (extraction.failed_count or 0) > 0
    if "no tests ran" in run.output[-2000:] or "Ran 0 tests" in run.output[-2000:]:
        ran = False
    return Rerun(
        command=run.command,
        passed=run.passed,
        exit_code=run.exit_code,
        ran_tests=ran,
        failing_tests=tuple(run.failing_tests[:50]),
        duration_s=round(run.duration_s, 3),
    )
