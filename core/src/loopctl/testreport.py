"""Where a test run's results are read from: the runner's own report first, its output second.

A JUnit XML report names every failing test exactly and counts every test; the output is read
by :func:`loopctl.testoutput.parse_test_output` when there is no report, and whenever the
report cannot be trusted: missing after the run, not written by this run (unchanged since
before it, or older than its start), larger than :data:`MAX_REPORT_BYTES`, cut short or not a
JUnit report. Each of those falls back with a note, never an exception.

Which report: the one configured (``test_report``, a path or a glob relative to the project),
else the one a pytest command names itself (``--junitxml=PATH``, or in ``addopts``), else, for
a command that *is* pytest by its own words (not by what its output looks like),
loopctl adds ``--junitxml`` to it, into a private temporary directory removed once the report
is read (it holds the tests' output unmasked, so it never goes into the state directory).
``test_report = "off"`` reads the output only.
"""

from __future__ import annotations

import glob
import os
import shlex
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

import attrs

from loopctl.junit import ReportError, read_junit
from loopctl.lazyre import lazy_compile
from loopctl.testoutput import ParsedTestOutput, parse_test_output
from loopctl.testparts import Partial, bounded, unique

#: Reports larger than this are not read (the output is): 50 MB.
MAX_REPORT_BYTES = 50_000_000
#: Files a ``test_report`` glob may match; more are not read.
MAX_REPORT_FILES = 1000
#: ``test_report`` value that turns reports off.
REPORT_OFF = "off"
#: The name of the report loopctl asks pytest for, in a private temporary directory.
OWN_REPORT = "junit.xml"
#: A report's modification time may be this much before the run's start (file systems that
#: keep whole seconds).
_CLOCK_SLACK_NS = 2_000_000_000

#: Shell syntax after which appended arguments would land on another command.
_SHELL_OPERATORS = lazy_compile(r"&&|\|\||[;|&<>`]|\$\(|\n")
_LAUNCHERS = frozenset({"uv", "poetry", "pdm", "hatch", "pipenv", "rye"})
_ASSIGNMENT = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: ``--junitxml=PATH``, ``--junit-xml PATH`` in a command line or an ``addopts`` value.
_JUNITXML_OPTION = lazy_compile(r"--junit-?xml(?:=|\s+)([^\s\"',\]]+)")
#: pytest's config files, read (as text) only to see whether they ask for a report already.
_PYTEST_CONFIGS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")

_Signature = tuple[int, int, int]


@attrs.frozen
class ReportPlan:
    """How one run of the test command gets its report, decided before it starts."""

    #: The command to run: the user's, or with ``--junitxml=...`` added.
    command: str
    #: The report's path or glob (absolute, or relative to ``cwd``); None: no report.
    pattern: str | None = None
    cwd: Path = Path()
    #: Where the pattern came from, for notes: "test_report", "the pytest command", "loopctl".
    source: str = ""
    #: Each matching file's (mtime, size, inode) before the run: a file that did not change
    #: was not written by this run.
    before: Mapping[str, _Signature] = attrs.field(factory=dict)
    #: When the run started (``time.time_ns()``).
    started_ns: int = 0
    #: The private temporary directory of the report loopctl asked pytest for.
    own_dir: str | None = None


def pytest_arguments(command: str) -> list[str] | None:
    """The arguments of a command that runs pytest by its own words (``pytest -q``,
    ``python -m pytest``, ``uv run pytest``, ``CI=1 py.test``), or None for anything else:
    another program, or shell syntax (``pytest && mypy``) after which added arguments would
    land on another command."""
    if _SHELL_OPERATORS.search(command):
        return None
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    index = 0
    while index < len(words) and _ASSIGNMENT.match(words[index]):
        index += 1
    if index + 1 < len(words) and words[index] in _LAUNCHERS and words[index + 1] == "run":
        index += 2
    if index >= len(words):
        return None
    program = os.path.basename(words[index])
    if program in ("pytest", "py.test"):
        return words[index + 1 :]
    if program.startswith("python") and words[index + 1 : index + 3] == ["-m", "pytest"]:
        return words[index + 3 :]
    return None


def _configured_junitxml(cwd: Path, env: Mapping[str, str]) -> str | None:
    """The report path pytest's own configuration asks for (``addopts`` in a config file in
    ``cwd``, or ``PYTEST_ADDOPTS``): "" when it asks for one at a path loopctl cannot tell,
    None when it asks for none."""
    texts = [env.get("PYTEST_ADDOPTS", "")]
    for name in _PYTEST_CONFIGS:
        try:
            with open(cwd / name, encoding="utf-8", errors="replace") as file:
                texts.append(file.read(1_000_000))
        except OSError:
            continue
    for text in texts:
        if "junitxml" in text or "junit-xml" in text:
            found = _JUNITXML_OPTION.search(text)
            return found.group(1) if found else ""
    return None


def plan_report(
    command: str,
    *,
    cwd: Path,
    report: str | None = None,
    ask_pytest: bool = False,
    env: Mapping[str, str] | None = None,
) -> ReportPlan:
    """Decide where this run's report will be. ``report`` is the ``test_report`` setting;
    ``ask_pytest`` lets loopctl add ``--junitxml`` to a pytest command (into a private
    temporary directory: the report holds the test's output unmasked, so it never goes into the
    state directory; :func:`discard_report` removes it). Never raises: whatever goes wrong
    leaves the command as it is, with no report."""
    try:
        return _plan(command, Path(cwd), report, ask_pytest, env or {})
    except Exception:  # noqa: BLE001 - a bug here must not keep the tests from running
        return ReportPlan(command=command, cwd=Path(cwd))


def discard_report(plan: ReportPlan) -> None:
    """Remove the report loopctl asked for, once read (nothing else is ever removed)."""
    if plan.own_dir is not None:
        shutil.rmtree(plan.own_dir, ignore_errors=True)


def _plan(
    command: str, cwd: Path, report: str | None, ask_pytest: bool, env: Mapping[str, str]
) -> ReportPlan:
    pattern: str | None = None
    source = "test_report"
    run = command
    if report is not None:
        pattern = None if report.strip() == REPORT_OFF else report
    else:
        arguments = pytest_arguments(command)
        if arguments is not None:
            pattern, source = _pytest_report(arguments, cwd, ask_pytest, env)
    own_dir: str | None = None
    if source == "loopctl":
        own_dir = tempfile.mkdtemp(prefix="loopctl-junit-")
        pattern = os.path.join(own_dir, OWN_REPORT)
        run = f"{command} --junitxml={shlex.quote(pattern)} -o junit_family=xunit1"
    started_ns = time.time_ns()
    if pattern is None:
        return ReportPlan(command=run, cwd=cwd, started_ns=started_ns)
    return ReportPlan(
        command=run,
        pattern=pattern,
        cwd=cwd,
        source=source,
        before=_signatures(_matches(pattern, cwd)),
        started_ns=started_ns,
        own_dir=own_dir,
    )


def _pytest_report(
    arguments: list[str], cwd: Path, ask_pytest: bool, env: Mapping[str, str]
) -> tuple[str | None, str]:
    """(pattern, source) for a pytest command; source "loopctl" when loopctl is to ask."""
    joined = " ".join(arguments)
    named = _JUNITXML_OPTION.search(joined)
    if named:
        return named.group(1), "the pytest command"
    configured = _configured_junitxml(cwd, env)
    if configured is not None:  # pytest writes one already: read it, add nothing
        return (configured or None), "pytest's addopts"
    if not ask_pytest or "--" in arguments or "no:junitxml" in joined:
        return None, ""
    return None, "loopctl"


def _has_glob(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")


def _matches(pattern: str, cwd: Path) -> list[str]:
    full = os.path.join(cwd, os.path.expanduser(pattern))
    if not _has_glob(pattern):
        return [full]
    found: list[str] = []
    for path in glob.iglob(full, recursive=True):
        found.append(path)
        if len(found) > MAX_REPORT_FILES:
            break
    return sorted(found)


def _signature(path: str) -> _Signature | None:
    try:
        stat = os.stat(path)
    except (OSError, ValueError):
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


def _signatures(paths: list[str]) -> dict[str, _Signature]:
    found = {path: _signature(path) for path in paths}
    return {path: signature for path, signature in found.items() if signature is not None}


def _shown(path: str, plan: ReportPlan) -> str:
    if plan.own_dir is not None and path.startswith(plan.own_dir):
        return "the --junitxml path loopctl added"
    try:
        return os.path.relpath(path, plan.cwd)
    except ValueError:
        return path


def _read_one(path: str, plan: ReportPlan) -> tuple[Partial | None, str]:
    """One report file: what it says, or why it was not read."""
    shown = _shown(path, plan)
    signature = _signature(path)
    if signature is None:
        return None, f"no test report at {shown} after the run"
    mtime_ns, size, _ = signature
    if plan.before.get(path) == signature or mtime_ns < plan.started_ns - _CLOCK_SLACK_NS:
        return None, f"the test report {shown} was not written by this run"
    if size > MAX_REPORT_BYTES:
        limit = f"{MAX_REPORT_BYTES:,} bytes loopctl reads"
        return None, f"the test report {shown} is {size:,} bytes, over the {limit}"
    try:
        with open(path, "rb") as file:
            data = file.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        return None, f"the test report {shown} cannot be read ({exc.strerror or exc})"
    if len(data) > MAX_REPORT_BYTES:
        return (
            None,
            f"the test report {shown} grew over the {MAX_REPORT_BYTES:,} bytes loopctl reads",
        )
    try:
        return read_junit(data, root=plan.cwd), ""
    except ReportError as exc:
        return None, f"the test report {shown} is not a JUnit report loopctl reads: {exc}"


def _read_reports(plan: ReportPlan) -> tuple[list[Partial], list[str]]:
    assert plan.pattern is not None
    paths = _matches(plan.pattern, plan.cwd)
    if not paths:
        return [], [f"no test report matches {plan.pattern} after the run"]
    if len(paths) > MAX_REPORT_FILES:
        return [], [f"more than {MAX_REPORT_FILES} files match {plan.pattern}"]
    read: list[Partial] = []
    notes: list[str] = []
    for path in paths:
        partial, note = _read_one(path, plan)
        if partial is not None:
            read.append(partial)
        elif note:
            notes.append(note)
    if _has_glob(plan.pattern) and read:
        notes = []  # the files this run did not write are other runs' reports: nothing to say
    return read, notes


def _merged(reports: list[Partial]) -> Partial:
    runners = [p.runner for p in reports if p.runner != "junit"]
    merged = Partial(runners[0] if runners else "junit")
    merged.passed = sum(p.passed or 0 for p in reports)
    merged.failed = sum(p.failed or 0 for p in reports)
    for partial in reports:
        merged.entries += partial.entries
        merged.failing += partial.failing
    return merged


def read_results(
    output: str, plan: ReportPlan | None, *, max_lines: int = 40
) -> tuple[ParsedTestOutput, str]:
    """This run's results and a note ("" when there is nothing to say): from the report when
    it can be trusted and names a failure (or nothing failed), else from the output.

    A report that lists no failure while the run failed (a later step of the command, a test
    file that did not load, which jest-junit leaves out) has nothing to say about why: then the
    output is read, and the report's counts are kept. Never raises.
    """
    text = parse_test_output(output, max_lines=max_lines)
    if plan is None or plan.pattern is None:
        return text, ""
    try:
        reports, notes = _read_reports(plan)
    except Exception as exc:  # noqa: BLE001 - a bug here must not end the loop; output is read
        reports, notes = [], [f"the test report was not read ({type(exc).__name__})"]
    if not reports:
        return text, _note(notes)
    report = _merged(reports)
    runner = report.runner if report.runner != "junit" or text.runner == "generic" else text.runner
    if not report.failing:
        counted = attrs.evolve(text, passed_count=report.passed, failed_count=report.failed)
        return attrs.evolve(counted, runner=runner), _note(notes)
    lines = bounded(report.entries, max_lines) or text.error_lines
    found = ParsedTestOutput(
        runner=runner,
        error_lines=lines,
        failing_tests=unique(report.failing),
        passed_count=report.passed,
        failed_count=report.failed,
    )
    return found, _note(notes)


def _note(notes: list[str]) -> str:
    if not notes:
        return ""
    shown = "; ".join(notes[:3]) + (f"; and {len(notes) - 3} more" if len(notes) > 3 else "")
    return f"loopctl: {shown}: the results come from the output"


__all__ = [
    "MAX_REPORT_BYTES",
    "REPORT_OFF",
    "ReportPlan",
    "discard_report",
    "plan_report",
    "pytest_arguments",
    "read_results",
]
