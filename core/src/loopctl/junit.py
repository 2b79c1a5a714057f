"""Read JUnit XML test reports: ``pytest --junitxml``, jest-junit, vitest's junit reporter,
cargo-nextest, gotestsum, Maven Surefire, Gradle and the many tools that write the same shape.

A report is outside input (the agent can write any file the test command reads or writes), so
it is parsed with expat directly and refuses what a test report never needs: a DOCTYPE, and
with it every entity declaration (no "billion laughs", no external entities). Only the five
predefined entities and character references are read. The text kept of each failure and the
number of failures kept are bounded; the counts count every test case.

:func:`read_junit` returns the same :class:`~loopctl.testparts.Partial` the text readers fill:
failing test ids (in the form the runner itself prints where the report says which runner
wrote it), a headline per failure (``FAILED id - message``), the decisive lines of its
text, and the passed and failed counts (failures and errors together, as for pytest's text).
"""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

import attrs

from loopctl.lazyre import lazy_compile
from loopctl.testoutput import pytest_failure_lines
from loopctl.testparts import DETAIL, DETAIL_CAP, HEADLINE, LOCATION, Partial

#: Characters kept of one failure's text (a long captured log is cut; its start decides).
_BODY_CHARS = 20_000
#: Failures kept at most; the counts still count them all.
_MAX_FAILURES = 1000
#: Nesting deeper than this is not a test report.
_MAX_DEPTH = 64
#: Characters kept of an id, a message or a name.
_NAME_CHARS = 1000

_ENDS_WITH_LOCATION = lazy_compile(r"\.\w+:\d+(?::\d+)?:?$")
#: Lines that are advice, not the failure.
_NOISE = ("note: run with `RUST_BACKTRACE", "Serialized Error:")
#: ``file.ext:12`` in a line that is nothing but a location.
_FILE_LINE = lazy_compile(r"\.\w+:\d+")
_LIBRARY_FRAME = (
    "node_modules",
    "node:",
    "(<anonymous>)",
    "internal/",
    "/site-packages/",
    "/lib/python",
    "org.junit.",
    "java.",
    "jdk.",
    "sun.",
    "/src/runtime/",
    "/src/testing/",
)


class ReportError(ValueError):
    """The data is not a JUnit report loopctl reads; the message says why."""


@attrs.define
class _Case:
    classname: str
    name: str
    file: str
    #: passed, failed (a ``<failure>``), error (an ``<error>``) or skipped.
    outcome: str = "passed"
    message: str = ""
    body: list[str] = attrs.Factory(list)
    body_chars: int = 0


@attrs.define
class _Reader:
    """expat handlers: keeps the test cases that failed and counts them all."""

    #: Names that say which tool wrote the report.
    suites_name: str = ""
    suite_name: str = ""
    go_version: bool = False
    root: str = ""
    depth: int = 0
    case: _Case | None = None
    #: Inside the ``<failure>``/``<error>`` whose text is kept.
    in_body: bool = False
    failures: list[_Case] = attrs.Factory(list)
    counts: dict[str, int] = attrs.Factory(
        lambda: {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    )

    def start(self, name: str, attributes: dict[str, str]) -> None:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise ReportError(f"elements nested more than {_MAX_DEPTH} deep")
        if not self.root:
            self.root = name
            if name not in ("testsuites", "testsuite"):
                raise ReportError(f"the root element is <{name[:50]}>, not <testsuites>")
        if name == "testcase":
            self.case = _Case(
                classname=_attr(attributes, "classname"),
                name=_attr(attributes, "name"),
                file=_attr(attributes, "file"),
            )
        elif name in ("failure", "error") and self.case is not None:
            if self.case.outcome in ("passed", "skipped"):
                self.case.outcome = "failed" if name == "failure" else "error"
                self.case.message = _attr(attributes, "message")
                self.in_body = True
        elif name == "skipped" and self.case is not None and self.case.outcome == "passed":
            self.case.outcome = "skipped"
        elif name == "testsuites" and not self.suites_name:
            self.suites_name = _attr(attributes, "name")
        elif name == "testsuite" and not self.suite_name:
            self.suite_name = _attr(attributes, "name")
        elif name == "property" and attributes.get("name") == "go.version":
            self.go_version = True

    def end(self, name: str) -> None:
        self.depth -= 1
        if name in ("failure", "error"):
            self.in_body = False
        elif name == "testcase" and self.case is not None:
            case, self.case = self.case, None
            self.counts[case.outcome] += 1
            if case.outcome in ("failed", "error") and len(self.failures) < _MAX_FAILURES:
                self.failures.append(case)

    def text(self, data: str) -> None:
        case = self.case
        if self.in_body and case is not None and case.body_chars < _BODY_CHARS:
            piece = data[: _BODY_CHARS - case.body_chars]
            case.body.append(piece)
            case.body_chars += len(piece)


def _attr(attributes: dict[str, str], key: str) -> str:
    return attributes.get(key, "")[:_NAME_CHARS]


def _refuse_doctype(*_: object) -> NoReturn:
    raise ReportError("it has a DOCTYPE (a test report needs none; entities are not read)")


def _refuse_entity(*_: object) -> NoReturn:
    raise ReportError("it declares entities (a test report needs none)")


def _parse(data: bytes) -> _Reader:
    reader = _Reader()
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_entity
    parser.ExternalEntityRefHandler = _refuse_entity
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.text
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        problem = f"not well-formed XML: {expat.ErrorString(exc.code)}, {_where(exc)}"
        raise ReportError(problem) from None
    except RecursionError:  # not expected from expat; a report this odd is not read
        raise ReportError("nested too deeply") from None
    if not reader.root:
        raise ReportError("it holds no element")
    return reader


def _where(exc: expat.ExpatError) -> str:
    return f"line {exc.lineno}, column {exc.offset + 1}"


# --- who wrote it, and how that tool names a test ----------------------------------------------


def _runner(reader: _Reader) -> str:
    if reader.suite_name == "pytest" or reader.suites_name == "pytest tests":
        return "pytest"
    if reader.suites_name == "jest tests":
        return "jest"
    if reader.suites_name == "vitest tests":
        return "vitest"
    if reader.suites_name == "nextest-run":
        return "cargo"
    if reader.go_version:
        return "go"
    return "junit"


def _pytest_id(case: _Case, root: Path | None) -> str:
    """pytest's node id (``tests/test_x.py::TestY::test_z[1]``) from the report's dotted
    ``classname``: exact with ``junit_family=xunit1`` (it has ``file``), else by finding the
    module's file under ``root``."""
    classname, name = case.classname, case.name
    if case.file:
        path = case.file.replace("\\", "/")
        module = path.removesuffix(".py").replace("/", ".")
        if name == module and not classname:
            return path  # a module that failed to collect
        if classname == module:
            return f"{path}::{name}"
        if classname.startswith(module + "."):
            return "::".join([path, *classname[len(module) + 1 :].split("."), name])
        return f"{path}::{name}"
    dotted, tail = (classname, [name]) if classname else (name, [])
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        candidate = "/".join(parts[:cut]) + ".py"
        if root is not None and _is_file(root / candidate):
            return "::".join([candidate, *parts[cut:], *tail])
    # Not on disk here: guess that the module ends before the first class name.
    cut = next((i for i, part in enumerate(parts) if part[:1].isupper()), len(parts))
    return "::".join(["/".join(parts[:cut]) + ".py", *parts[cut:], *tail])


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def _case_id(runner: str, case: _Case, root: Path | None) -> str:
    classname, name = case.classname.strip(), case.name.strip()
    if runner == "pytest":
        return _pytest_id(case, root)
    if not classname or not name or name == classname:
        return name or classname
    if runner == "vitest":
        return f"{classname} > {name}"  # as vitest prints it: file > suite > test
    if runner == "cargo":
        return f"{classname} {name}"  # as nextest prints it: binary test::path
    if runner == "go":
        return f"{classname}/{name}"  # import path / TestName
    if name.startswith(classname):
        return name
    return f"{classname}.{name}"  # the JUnit convention: Class.method


# --- the lines of one failure -------------------------------------------------------------------


def _failure_lines(runner: str, case: _Case, test_id: str, partial: Partial) -> None:
    body = "".join(case.body)
    lines = body.splitlines()
    message = case.message.strip().splitlines()[0] if case.message.strip() else ""
    if not message:
        message = next((line.strip() for line in lines if line.strip()), "")
    verdict = "ERROR" if case.outcome == "error" else "FAILED"
    partial.add(f"{verdict} {test_id} - {message}" if message else f"{verdict} {test_id}")
    if runner == "pytest":
        for rank, text in pytest_failure_lines(lines).entries:
            partial.add(text, rank)
        return
    _generic_body(lines, message, partial)


def _is_frame(line: str) -> bool:
    if line.startswith(("at ", "❯ ")):
        return True
    return " " not in line and _FILE_LINE.search(line) is not None


def _generic_body(lines: list[str], message: str, partial: Partial) -> None:
    """The text of a failure from any tool: its message lines, then its first stack frame that
    is in the project (not in a library or the runtime)."""
    kept = 0
    located = False
    # "panicked at src/lib.rs:11:9" (nextest) names where, not what: the next line says what
    message_is_where = _ENDS_WITH_LOCATION.search(message) is not None
    for line in lines:
        stripped = line.strip()
        if not stripped or set(stripped) <= set("⎯-=_~^ "):
            continue
        if _is_frame(stripped):
            if not located and not any(marker in stripped for marker in _LIBRARY_FRAME):
                partial.add(stripped, LOCATION)
                located = True
            continue
        if kept >= DETAIL_CAP:
            continue
        if (message and message in stripped) or stripped.startswith(_NOISE):
            continue  # "Error: the message" repeats the headline
        first = kept == 0 and (not message or message_is_where)
        partial.add(stripped, HEADLINE if first else DETAIL)
        kept += 1


def read_junit(data: bytes, *, root: Path | None = None) -> Partial:
    """What a JUnit XML report says: failing test ids, a headline and the decisive lines of
    each failure, and the counts. ``root`` is the directory the tests ran in (used to find
    pytest's test files when the report does not name them). Raises :class:`ReportError` when
    ``data`` is not a well-formed JUnit report."""
    reader = _parse(data)
    runner = _runner(reader)
    partial = Partial(runner)
    for case in reader.failures:
        test_id = _case_id(runner, case, root)[:_NAME_CHARS]
        partial.fail(test_id)
        _failure_lines(runner, case, test_id, partial)
    counts = reader.counts
    partial.passed = counts["passed"]
    partial.failed = counts["failed"] + counts["error"]
    return partial


__all__ = ["ReportError", "read_junit"]
