"""The confirmation rerun: run only the failing tests again, with no code change.

A test that fails and then passes on the very same code is flaky; that is the one piece of
evidence for flakiness this plugin trusts on its own. A rerun is made only where it can confirm
that: when the test command itself is one the classifier knows how to narrow to the failing
tests (pytest's ``--lf``, unittest test ids) or the user configured ``rerun_cmd``. Anything else
(a shell script, ``npm test``, a command chained with ``&&``) is not re-run at all: re-running a
whole suite costs a second test run on every failure and proves little, and flags are never
added to a command recognised only by what its output looks like. A rerun that ran no test at
all proves nothing and is not counted as a pass.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from loopctl import TestRun
from loopctl_failure_classifier.model import Rerun

#: Shell syntax that makes appending arguments unsafe (they would land on another command).
_SHELL_OPERATORS = re.compile(r"&&|\|\||[;|&<>`]|\$\(")
#: A launcher that runs the rest of the command in the project's environment.
_LAUNCHER = r"(?:(?:uv|poetry|pdm|hatch|pipenv|rye)\s+run\s+)?"
#: pytest named by the command itself (``pytest``, ``py.test``, ``python -m pytest``, a path,
#: behind ``uv run`` and the like).
_PYTEST = re.compile(
    rf"^{_LAUNCHER}(?:(?:\S*/)?(?:py\.test|pytest)|\S*python\S*\s+-m\s+pytest)(?:\s|$)"
)
_UNITTEST = re.compile(rf"^(?P<python>{_LAUNCHER}\S*python\S*)\s+-m\s+unittest(?P<rest>(?:\s.*)?)$")
_UNITTEST_ID = re.compile(r"[A-Za-z_][\w.]*\Z")
#: Runners whose output states how many tests ran (so a rerun that ran none can be told).
_COUNTED = frozenset({"pytest", "unittest", "jest", "node", "cargo", "go"})


def _simple(command: str) -> bool:
    return not _SHELL_OPERATORS.search(command)


def rerun_command(
    test_cmd: str, failing_tests: Sequence[str], template: str | None = None
) -> tuple[str, str] | None:
    """``(command, how)`` to rerun only the failing tests, or None when the classifier cannot
    narrow ``test_cmd`` to them (then no rerun is made). Only the command is looked at, never
    the output: a script whose output looks like pytest's gets no ``--lf``."""
    command = test_cmd.strip()
    if template:
        if "{tests}" in template:
            if not failing_tests:
                return None
            return template.replace("{tests}", shlex.join(failing_tests)), "configured rerun_cmd"
        return template, "configured rerun_cmd"
    if not command or not _simple(command):
        return None
    if _PYTEST.search(command):
        words = command.split()
        if "--lf" in words or "--last-failed" in words:
            return command, "the pytest command (it already selects the last failures)"
        return f"{command} --lf", "pytest --lf (only the tests that failed)"
    found = _UNITTEST.match(command)
    if found and failing_tests and all(_UNITTEST_ID.match(t) for t in failing_tests):
        rest = found.group("rest").split()
        start_dir = _discover_start(rest)
        if start_dir in (None, "."):
            ids = " ".join(shlex.quote(t) for t in failing_tests)
            return f"{found.group('python')} -m unittest {ids}", "unittest, the failing test ids"
    return None


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
    """What a rerun's result (the :class:`loopctl.TestRun` that ``loop.run_tests`` returned)
    says: did it pass, and did it actually run tests?"""
    ran = True
    if run.runner in _COUNTED:
        ran = (run.passed_count or 0) + (run.failed_count or 0) > 0
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
