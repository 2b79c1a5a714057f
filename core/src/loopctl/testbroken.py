"""Whether a test run shows that the test command itself is broken: it cannot pass, whatever
the code says, so calling the agent again only spends its turns.

Read from facts only: the exit status by the convention of the runner the command names, and
the runner's or the shell's own words for a path that does not exist, a command line it does
not accept, no test selected, or a program that is not there. A failure to *collect* the
project's tests (pytest's exit 2 for a test file's ``SyntaxError`` or ``ImportError``, exit 4
for a ``conftest.py`` that does not import) is the code's, not the command's, and is not
matched here.

Whether the agent's turn could have caused the problem (it deleted the folder the command
names, edited the runner's configuration, or the run found no test after it changed files) is
:func:`agent_may_have_caused`: the engine stops only when it could not.
"""

from __future__ import annotations

import itertools
import os
import shlex
from collections.abc import Iterable
from typing import NamedTuple

from loopctl.lazyre import lazy_compile

#: The reason of the engine's stop for a broken test command (status ``usage_error``, exit 2).
TEST_COMMAND_BROKEN = "test_command_broken"
#: What kind of problem: a path the command names is missing; the runner refused its command
#: line; it selected no test; a program or module the command names is not there.
PATH, USAGE, NO_TESTS, PROGRAM = "path", "usage", "no_tests", "program"

#: pytest's exit statuses for a usage error (a missing path, an option it does not know) and
#: for a run that collected no test; Python's unittest uses 5 for the latter too (3.12+).
_PYTEST_USAGE, _NO_TESTS_RAN = 4, 5
_NOT_FOUND, _CANNOT_EXECUTE = 127, 126
#: Lines of output looked at, from the end (where runners say why they stopped).
_LINES = 200

_PYTEST_PATH = lazy_compile(r"^ERROR: (?:file or directory )?not found: (\S.*?)\s*$")
_PYTEST_USAGE_ERROR = lazy_compile(r"^\S.*?: error: \S")
_PYTEST_NO_TESTS = lazy_compile(r"^(?:no tests ran|\d+ deselected)\b.* in [\d.]+s\b")
_UNITTEST_NO_TESTS = lazy_compile(r"^NO TESTS RAN\b")
#: ``sh: 1: cd: can't cd to tests`` (dash), ``bash: cd: tests: No such file or directory``.
_CD_FAILED = lazy_compile(r"\bcd: (?:can't cd to (\S.*?)|(\S.*?): No such file or directory)\s*$")
#: ``sh: 1: pytestx: not found``, ``bash: line 1: pytestx: command not found``,
#: ``sh: 1: ./run.sh: Permission denied``.
_SHELL_PROGRAM = lazy_compile(
    r"^(?:/bin/)?\w*sh: (?:\d+: |line \d+: )?(\S+): "
    r"(?:(?:command )?not found|Permission denied)\s*$"
)
#: ``/usr/bin/python3: No module named pytest``.
_NO_MODULE = lazy_compile(r"^\S*python[\d.]*: No module named (\S+)\s*$")
#: Files of pytest's own configuration: a usage error after the agent changed one may be its.
_RUNNER_CONFIGS = frozenset(
    {"pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg", "conftest.py"}
)


class BrokenTestCommand(NamedTuple):
    """A test run that says its command cannot pass: what is wrong and what to fix. (A
    NamedTuple, not an attrs class: ``loopctl classify --log`` reads a log with it, and defines
    no class it does not need.)"""

    #: :data:`PATH`, :data:`USAGE`, :data:`NO_TESTS` or :data:`PROGRAM`.
    kind: str
    #: The runner's or the shell's own line that says so.
    evidence: str
    #: What is wrong and what to fix, in a sentence for the user.
    problem: str
    #: The missing path or program the output names (None: none named).
    name: str | None = None

    def message(self, command: str) -> str:
        """The stop message: the command, the problem, where to fix it."""
        return (
            f"the test command cannot pass, whatever the code says: `{command}`: {self.problem} "
            f"({self.evidence}); fix the test command (`loopctl resume --test-cmd ...`) or "
            "the environment it runs in"
        )


def broken_test_command(
    command: str, exit_code: int | None, output: str
) -> BrokenTestCommand | None:
    """The problem when the output (and the exit status, where known) shows that ``command``
    itself is broken; None when it does not, or when the code may be at fault. Never raises."""
    if exit_code == 0:
        return None
    lines = [line.strip() for line in output.splitlines()[-_LINES:] if line.strip()]
    words = _words(command)
    if command and _is_pytest(command):
        found = _pytest(exit_code, lines)
        if found is not None:
            return found
    if exit_code in (None, _NO_TESTS_RAN) and any(_UNITTEST_NO_TESTS.match(x) for x in lines):
        return BrokenTestCommand(NO_TESTS, "NO TESTS RAN", "it ran no test")
    return _shell(exit_code, lines, words)


def _pytest(exit_code: int | None, lines: list[str]) -> BrokenTestCommand | None:
    if exit_code in (None, _PYTEST_USAGE):
        for line in lines:
            path = _PYTEST_PATH.match(line)
            if path:
                missing = path.group(1).split("::")[0]
                what = "test" if "::" in path.group(1) else "file or folder"
                return BrokenTestCommand(
                    PATH, line, f"pytest finds no {what} {path.group(1)}", name=missing
                )
        if any(line.startswith("ERROR: usage:") for line in lines):
            error = next((x for x in lines if _PYTEST_USAGE_ERROR.match(x)), "ERROR: usage")
            return BrokenTestCommand(USAGE, error, "pytest refuses its command line")
    if exit_code in (None, _NO_TESTS_RAN):
        ran = next((x for x in lines if _PYTEST_NO_TESTS.match(x)), None)
        if ran is not None and (exit_code == _NO_TESTS_RAN or "no tests ran" in ran):
            return BrokenTestCommand(NO_TESTS, ran, "pytest collected no test to run")
    return None


def _shell(exit_code: int | None, lines: list[str], words: list[str]) -> BrokenTestCommand | None:
    pairs = set(itertools.pairwise(words))  # ("-m", "pytest") for `python -m pytest`
    for line in lines:
        cd = _CD_FAILED.search(line)
        if cd:
            missing = cd.group(1) or cd.group(2)
            return BrokenTestCommand(PATH, line, f"there is no folder {missing}", name=missing)
        if exit_code in (None, _NOT_FOUND, _CANNOT_EXECUTE):
            program = _SHELL_PROGRAM.match(line)
            if program and program.group(1) in words:
                name = program.group(1)
                return BrokenTestCommand(
                    PROGRAM, line, f"the program {name} it runs cannot be run", name=name
                )
        module = _NO_MODULE.match(line)
        if module and ("-m", module.group(1)) in pairs:
            name = module.group(1)
            return BrokenTestCommand(
                PROGRAM, line, f"the module {name} it runs is not installed", name=name
            )
    return None


def _is_pytest(command: str) -> bool:
    from loopctl.testreport import pytest_arguments  # here: a log alone needs no report code

    return pytest_arguments(command) is not None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:
        return command.split()


def agent_may_have_caused(broken: BrokenTestCommand, changed_files: Iterable[str]) -> bool:
    """Whether the iteration's own changes could explain ``broken``: a change at or under the
    missing path, to the runner's configuration (a usage error), or any change at all when no
    test was found (the agent may have moved or renamed them)."""
    changed = [os.path.normpath(path) for path in changed_files]
    if not changed:
        return False
    if broken.kind == NO_TESTS:
        return True
    if broken.kind == USAGE:
        return any(os.path.basename(path) in _RUNNER_CONFIGS for path in changed)
    if broken.kind == PATH and broken.name:
        missing = os.path.normpath(broken.name)
        return any(
            path == missing or path.startswith(missing + os.sep) or missing.endswith(os.sep + path)
            for path in changed
        )
    return False


__all__ = [
    "NO_TESTS",
    "PATH",
    "PROGRAM",
    "TEST_COMMAND_BROKEN",
    "USAGE",
    "BrokenTestCommand",
    "agent_may_have_caused",
    "broken_test_command",
]
