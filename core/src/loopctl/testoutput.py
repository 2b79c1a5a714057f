"""Find the decisive lines in a test run's output.

The agent needs the few lines that say what is wrong (``E   assert 5 == 4``, the exception,
the first compiler error and its location), not the whole log; stuck detection needs the same
lines to fingerprint. :func:`parse_test_output` recognises the output of pytest, unittest, jest,
vitest, ``node --test`` (TAP and spec reporters), cargo test / rustc, go test (its text and its
``-json`` event stream, :mod:`loopctl.gojson`), mypy and tsc, and falls back to Python
tracebacks and generic ``error:`` lines. Reports a runner writes to a file (JUnit XML) are read
by :mod:`loopctl.testreport`, with this reader as the fallback.

Logs can be large, so each runner is detected with cheap substring checks on the whole output,
and each line is prefiltered with literal checks before any regex runs on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import attrs

from loopctl.lazyre import lazy_compile
from loopctl.scan import LINE_CHARS, Scanner, ScanRule, strip_ansi
from loopctl.testparts import (
    DETAIL,
    DETAIL_CAP,
    HEADLINE,
    LOCATION,
    Partial,
    bounded,
    detect_go_json,
    has_word,
    unique,
)

#: Lines longer than this are cut before any pattern looks at them (the decisive part is early).
_SCAN_CHARS = LINE_CHARS


@attrs.define
class ParsedTestOutput:
    """What :func:`parse_test_output` found in one test run's output."""

    #: Which format was recognised: pytest, unittest, jest, vitest, node, cargo, rustc, go,
    #: mypy, tsc, python (a bare traceback) or generic.
    runner: str = "generic"
    #: The decisive error lines, in output order, deduplicated and bounded.
    error_lines: list[str] = attrs.Factory(list)
    #: Failing test ids as the runner names them, in order of first appearance.
    failing_tests: list[str] = attrs.Factory(list)
    passed_count: int | None = None
    failed_count: int | None = None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


_SEPARATOR = lazy_compile(r"[=\-_]{10,}$")

# --- Python tracebacks (shared by unittest and the bare-traceback fallback) --------------------

_LIBRARY_FRAME = ("site-packages", "/lib/python", "<frozen", "\\lib\\")


class _TracebackScanner:
    """Feeds lines one by one; reports each traceback's exception line and its best frame."""

    def __init__(self, partial: Partial, *, details_past_blank: bool) -> None:
        self.partial = partial
        self.details_past_blank = details_past_blank
        self.state = 0  # 0 outside, 1 in the frames, 2 after the exception line
        self.last_frame = ""
        self.last_own_frame = ""
        self.details = 0

    def reset(self) -> None:
        self.state = 0

    def feed(self, line: str) -> None:
        if line.startswith("Traceback (most recent call last)"):
            self.state, self.last_frame, self.last_own_frame = 1, "", ""
            return
        if self.state == 1:
            if line.startswith("  File "):
                self.last_frame = line.strip()
                if not any(marker in line for marker in _LIBRARY_FRAME):
                    self.last_own_frame = self.last_frame
            elif line.strip() and not line[0].isspace():
                frame = self.last_own_frame or self.last_frame
                if frame:
                    self.partial.add(frame, LOCATION)
                self.partial.add(line, HEADLINE)
                self.state, self.details = 2, 0
            return
        if self.state == 2:
            stripped = line.strip()
            if not stripped:
                if not self.details_past_blank:
                    self.state = 0
                return
            if _SEPARATOR.match(stripped) or stripped.startswith(
                ("During handling of", "The above exception")
            ):
                self.state = 0
            elif self.details < DETAIL_CAP and has_word(stripped):
                self.partial.add(stripped, DETAIL)
                self.details += 1


def _python(lines: list[str]) -> Partial:
    partial = Partial("python")
    scanner = _TracebackScanner(partial, details_past_blank=False)
    for line in lines:
        if scanner.state or line.startswith("Traceback"):
            scanner.feed(line)
    return partial


# --- pytest -------------------------------------------------------------------------------------

_PYTEST_SUMMARY = lazy_compile(r"(FAILED|ERROR) (.+?)(?: - (.*))?$")
_PYTEST_PROGRESS = lazy_compile(r"(\S+::\S.*?) (FAILED|ERROR)(?:\s+\[\s*\d+%\])?$")
_PYTEST_XDIST = lazy_compile(r"\[gw\d+\] \[\s*\d+%\] (FAILED|ERROR) (\S+)")
_PYTEST_HEADER = lazy_compile(r"_{3,} (.+?) _{3,}$")
_PYTEST_SECTION = lazy_compile(r"={3,} (.+?) ={3,}$")
_PYTEST_CAPTURED = lazy_compile(r"-{3,} Captured .* -{3,}$")
_PYTEST_LOCATION = lazy_compile(r"(\S+?\.py):(\d+): (?!in )(.+)$")
_PYTEST_FINAL = lazy_compile(
    r"(?:^|=+ )(\d+ (?:failed|passed|errors?|skipped|deselected|xfailed|xpassed|warnings?|rerun)"
    r"(?:, \d+ \w+)*) in [\d.]+s",
    re.MULTILINE,
)
_PYTEST_FINAL_HINTS = tuple(
    f" {word} in "
    for word in ("passed", "failed", "error", "errors", "skipped", "warning", "warnings")
)
_COUNT = lazy_compile(r"(\d+) (\w+)")
_EXCEPTION_NAME = lazy_compile(r"[A-Za-z_][\w.]*$")
_PY_EXCEPTION = lazy_compile(
    r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Warning|Failure|Failed)\b"
)


def _looks_like_exception(content: str) -> bool:
    return content.startswith("assert ") or _PY_EXCEPTION.match(content) is not None


class _PytestReader:
    """Reads pytest's output one line at a time; each kind of line has one small step.

    The lines pytest marks by their first character (``E`` lines, ``===`` sections, ``___``
    test headers, ``---`` captured-output headers) are steps of their own; every other line
    is looked up in :data:`_PYTEST_LINES`, a table of rules whose tag is the step to run.
    """

    def __init__(self) -> None:
        self.partial = Partial("pytest")
        #: The previous line was an ``E`` line: the next one continues its block.
        self.in_e_block = False
        #: Detail lines kept for the current ``E`` block.
        self.details = 0
        #: Inside "warnings summary" or a "Captured ..." block: nothing there is decisive.
        self.skipping = False
        #: The last final-count line ("1 failed, 2 passed in 0.1s"), its counts part.
        self.final: str | None = None

    def feed(self, line: str) -> None:
        if not line:
            self.in_e_block = False
            return
        first = line[0]
        if first == "E" and (len(line) == 1 or line[1] == " "):
            self.error_line(line)
            return
        self.in_e_block = False
        if first == "=":
            self.section_line(line)
        elif first == "_":
            self.test_header(line)
        elif first == "-" and "Captured" in line and _PYTEST_CAPTURED.match(line):
            self.skipping = True
        elif not self.skipping and not first.isspace():  # the table's lines start at column 0
            found = _PYTEST_LINES.first(line)
            if found is not None:
                found.tag(self, found.match)

    def error_line(self, line: str) -> None:
        """``E   assert 5 == 4``: the first of a block is a headline, the rest details."""
        content = line[1:].strip()
        if self.skipping or not has_word(content):
            return
        if not self.in_e_block:
            self.in_e_block, self.details = True, 0
            self.partial.add(line, HEADLINE)
        elif _looks_like_exception(content):
            self.partial.add(line, HEADLINE)
        elif self.details < DETAIL_CAP:
            self.partial.add(line, DETAIL)
            self.details += 1

    def section_line(self, line: str) -> None:
        """``=== FAILURES ===``, ``=== warnings summary ===``, ``=== 1 failed in 0.1s ===``."""
        section = _PYTEST_SECTION.match(line)
        if section:
            self.skipping = section.group(1) == "warnings summary"
        if " in " in line:
            self.final_counts(line)

    def test_header(self, line: str) -> None:
        """``___ test_name ___`` starts a test's report; ``___ ERROR at setup of x ___`` too."""
        header = _PYTEST_HEADER.match(line)
        if header:
            self.skipping = False
            if header.group(1).startswith("ERROR "):
                self.partial.add(header.group(1), HEADLINE)

    def final_counts(self, line: str) -> None:
        match = _PYTEST_FINAL.search(line)
        if match:
            self.final = match.group(1)

    def summary(self, match: re.Match[str]) -> None:
        """``FAILED tests/t.py::test_x - assert 5 == 4`` in the short test summary."""
        if "::" in match.group(2) or ".py" in match.group(2):
            self.partial.fail(match.group(2))
            self.partial.add(match.string, HEADLINE)

    def progress(self, match: re.Match[str]) -> None:
        """``tests/t.py::test_x FAILED [ 50%]`` (-v) or ``[gw0] [ 50%] FAILED tests/t.py::x``."""
        self.partial.fail(match.group("test"))

    def location(self, match: re.Match[str]) -> None:
        """``tests/t.py:12: AssertionError``: the frame a failure was raised in."""
        is_name_only = _EXCEPTION_NAME.match(match.group(3)) is not None
        self.partial.add(match.string, LOCATION if is_name_only else HEADLINE)

    def headline(self, match: re.Match[str]) -> None:
        """``ImportError while loading conftest``, ``INTERNALERROR>``: decisive as they are."""
        self.partial.add(match.string, HEADLINE)

    def final_line(self, match: re.Match[str]) -> None:
        """``1 failed, 2 passed in 0.12s`` without the ``===`` (``pytest -q``)."""
        if match.string[0].isdigit():
            self.final = match.group(1)

    def finish(self) -> Partial:
        if self.final is not None:
            counts: dict[str, int] = {}
            for number, word in _COUNT.findall(self.final):
                key = word.rstrip("s") if word.startswith("error") else word
                counts[key] = counts.get(key, 0) + int(number)
            ran = "passed" in counts or "failed" in counts
            self.partial.passed = counts.get("passed", 0) if ran else None
            self.partial.failed = counts.get("failed", 0) + counts.get("error", 0)
        return self.partial


_PytestStep = Callable[[_PytestReader, re.Match[str]], None]

#: The pytest lines not marked by their first character, first match wins. Every pattern is
#: anchored at a line that starts with a non-blank character (indented lines are code, captured
#: output, other tools: they never get here); the literals keep the patterns off the PASSED
#: lines of a verbose run.
_PYTEST_LINES: Scanner[_PytestStep] = Scanner(
    [
        ScanRule(
            "summary",
            r"^(FAILED|ERROR) (.+?)(?: - (.*))?$",
            ("FAILED", "ERROR"),
            _PytestReader.summary,
        ),
        ScanRule(
            "progress",
            r"^(?P<test>\S+::\S.*?) (FAILED|ERROR)(?:\s+\[\s*\d+%\])?$",
            ("FAILED", "ERROR"),
            _PytestReader.progress,
        ),
        ScanRule(
            "xdist progress",
            r"^(?=.*::)\[gw\d+\] \[\s*\d+%\] (FAILED|ERROR) (?P<test>\S+)",
            ("FAILED", "ERROR"),
            _PytestReader.progress,
        ),
        # ": " and not ".py:", which every test id of a verbose run ("t.py::test_x") holds
        ScanRule("location", r"^(\S+?\.py):(\d+): (?!in )(.+)$", ": ", _PytestReader.location),
        ScanRule(
            "import error",
            r"^(?:ImportError while|INTERNALERROR>)",
            ("ImportError while", "INTERNALERROR>"),
            _PytestReader.headline,
        ),
        ScanRule("final counts", _PYTEST_FINAL, " in ", _PytestReader.final_line),
    ],
    line_chars=_SCAN_CHARS,
)


def _pytest(lines: list[str]) -> Partial:
    reader = _PytestReader()
    for line in lines:
        reader.feed(line)
    return reader.finish()


def pytest_failure_lines(lines: list[str]) -> Partial:
    """The decisive lines of one failure's report as pytest prints it (``E`` lines, the
    location): how :mod:`loopctl.junit` reads the text of a pytest JUnit ``<failure>``."""
    return _pytest([strip_ansi(line)[:_SCAN_CHARS] for line in lines])


def _detect_pytest(text: str) -> bool:
    if "test session starts" in text or "short test summary info" in text:
        return True
    if "while loading conftest" in text:
        return True
    if not any(hint in text for hint in _PYTEST_FINAL_HINTS):
        return False
    return _PYTEST_FINAL.search(text) is not None


# --- unittest -----------------------------------------------------------------------------------

_UNITTEST_HEADER = lazy_compile(r"(FAIL|ERROR|UNEXPECTED SUCCESS): (\S+) \(([\w.]+)\)(.*)$")
_UNITTEST_PROGRESS = lazy_compile(
    r"\s*(\w+) \(([\w.]+)\)(?: \(.*\))? \.\.\. (?:.* )?(FAIL|ERROR|unexpected success)$"
)
_UNITTEST_RAN = lazy_compile(r"Ran (\d+) tests? in ")
_UNITTEST_RESULT = lazy_compile(r"(FAILED|OK)(?: \((.*)\))?$")


def _unittest_id(name: str, qualified: str) -> str:
    if qualified.startswith("unittest.loader._FailedTest"):
        return name  # a module that failed to import: its name is the id
    return qualified if qualified.endswith("." + name) else f"{qualified}.{name}"


def _unittest(lines: list[str]) -> Partial:
    partial = Partial("unittest")
    scanner = _TracebackScanner(partial, details_past_blank=True)
    ran: int | None = None
    result: tuple[str, str] | None = None
    for line in lines:
        if not line:
            continue
        first = line[0]
        if first in "FEU" and ": " in line:
            header = _UNITTEST_HEADER.match(line)
            if header:
                scanner.reset()
                partial.fail(_unittest_id(header.group(2), header.group(3)))
                partial.add(line, HEADLINE)
                continue
        if scanner.state or first == "T":
            scanner.feed(line)
            if scanner.state:
                continue
        if " ... " in line:
            progress = _UNITTEST_PROGRESS.match(line)
            if progress:
                partial.fail(_unittest_id(progress.group(1), progress.group(2)))
            continue
        if first == "R" and line.startswith("Ran "):
            match = _UNITTEST_RAN.match(line)
            if match:
                ran = int(match.group(1))
        elif first in "FO" and line.startswith(("FAILED", "OK")):
            match = _UNITTEST_RESULT.match(line)
            if match:
                result = (match.group(1), match.group(2) or "")
    if ran is not None and result is not None:
        counts = {
            key.strip(): int(value) for key, value in re.findall(r"([\w ]+)=(\d+)", result[1])
        }
        failed = counts.get("failures", 0) + counts.get("errors", 0)
        failed += counts.get("unexpected successes", 0)
        not_passed = failed + counts.get("skipped", 0) + counts.get("expected failures", 0)
        partial.failed = failed
        partial.passed = max(ran - not_passed, 0)
    return partial


def _detect_unittest(text: str) -> bool:
    if text.startswith("Ran ") and _UNITTEST_RAN.match(text):
        return True
    start = text.find("\nRan ")
    while start != -1:
        if _UNITTEST_RAN.match(text, start + 1):
            return True
        start = text.find("\nRan ", start + 1)
    return ("\nFAIL: " in text or "\nERROR: " in text) and "-" * 30 in text


# --- jest ---------------------------------------------------------------------------------------

_JEST_FILE = lazy_compile(r"(FAIL|PASS) (\S+)")
_JEST_BULLET = lazy_compile(r"\s*● (.+)$")
_JEST_CODE_FRAME = lazy_compile(r"\s*>?\s*\d+ \|")
_JEST_COUNTS = lazy_compile(r"(\d+) (failed|passed|total)")


def _jest(lines: list[str]) -> Partial:
    partial = Partial("jest")
    current_file = ""
    state = 0  # 0 outside, 1 reading the message, 2 looking for the location
    message_lines = 0
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if line.startswith(("FAIL ", "PASS ")):
            match = _JEST_FILE.match(line)
            if match:
                current_file = match.group(2).removeprefix("./")
            state = 0
            continue
        if "●" in line:
            bullet = _JEST_BULLET.match(line)
            if bullet:
                name = bullet.group(1).strip()
                if name.startswith("Console"):
                    state = 0
                    continue
                partial.fail(current_file if name == "Test suite failed to run" else name)
                partial.add(f"● {name}", HEADLINE)
                state, message_lines = 1, 0
                continue
        if line.startswith(("Tests:", "Test Suites:", "Snapshots:", "Time:")):
            if line.startswith("Tests:"):
                counts = {word: int(n) for n, word in _JEST_COUNTS.findall(line)}
                partial.failed = counts.get("failed", 0)
                partial.passed = counts.get("passed", 0)
            state = 0
            continue
        if state == 1:
            if stripped.startswith("at ") or _JEST_CODE_FRAME.match(line):
                state = 2
            elif message_lines < DETAIL_CAP:
                partial.add(stripped, HEADLINE if message_lines == 0 else DETAIL)
                message_lines += 1
        if state == 2 and stripped.startswith("at ") and "node_modules" not in line:
            partial.add(stripped, LOCATION)
            state = 0
    return partial


def _detect_jest(text: str) -> bool:
    return "Test Suites:" in text or ("●" in text and ("\nFAIL " in text or "\nTests:" in text))


# --- vitest -------------------------------------------------------------------------------------

_VITEST_FAIL = lazy_compile(r"FAIL\s+(.+?)(?: \[ .+ \])?$")
_VITEST_LOCATION = lazy_compile(r"❯ (\S+:\d+:\d+)$")
_VITEST_CODE = lazy_compile(r"\d*\|")
_VITEST_COUNT = lazy_compile(r"(\d+) (failed|passed)")


def _vitest(lines: list[str]) -> Partial:
    """vitest's default reporter: each failure under ``Failed Tests`` (or ``Failed Suites``)
    starts ``FAIL  file > suite > test``, then the error, a diff, and ``❯ file:line:col``."""
    partial = Partial("vitest")
    reading = False  # inside one failure, before its location
    message_lines = 0
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("FAIL "):
            failure = _VITEST_FAIL.match(stripped)
            if failure:
                partial.fail(failure.group(1))
                partial.add(f"FAIL {failure.group(1)}", HEADLINE)
                reading, message_lines = True, 0
            continue
        if stripped.startswith("⎯"):
            reading = False
            continue
        if stripped.startswith("Tests ") and stripped.endswith(")"):
            counts = {word: int(n) for n, word in _VITEST_COUNT.findall(stripped)}
            partial.failed = counts.get("failed", 0)
            partial.passed = counts.get("passed", 0)
            continue
        if not reading:
            continue
        if stripped.startswith("❯ "):
            location = _VITEST_LOCATION.match(stripped)
            if location:
                partial.add(location.group(1), LOCATION)
                reading = False
        elif not _VITEST_CODE.match(stripped) and message_lines < DETAIL_CAP:
            partial.add(stripped, HEADLINE if message_lines == 0 else DETAIL)
            message_lines += 1
    return partial


def _detect_vitest(text: str) -> bool:
    # the summary line, or the separators around each failure (needles with runs of spaces,
    # such as the " RUN  v" header, are slow to find in logs full of padding)
    return "Test Files  " in text or "⎯⎯" in text


# --- node --test --------------------------------------------------------------------------------

_TAP_SUBTEST = lazy_compile(r"(\s*)# Subtest: (.*)$")
_TAP_NOT_OK = lazy_compile(r"(\s*)not ok \d+ - (.*?)(?: # (?:SKIP|TODO)\b.*)?$")
_TAP_COUNT = lazy_compile(r"# (pass|fail) (\d+)$")
_YAML_KEY = lazy_compile(r"\s*(\w+):(?: (.*))?$")
_SPEC_DURATION = lazy_compile(r"(.*?) \([\d.]+m?s\)$")
_SPEC_COUNT = lazy_compile(r"ℹ (pass|fail) (\d+)$")


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _tap_yaml(lines: list[str], start: int) -> tuple[dict[str, str], int]:
    """Parse the YAML diagnostics block after a TAP ``not ok`` line (just its flat keys)."""
    if start >= len(lines) or lines[start].strip() != "---":
        return {}, start
    base = _indent(lines[start])
    fields: dict[str, str] = {}
    key = ""
    block = False
    index = start + 1
    while index < len(lines) and index - start < 5000:
        line = lines[index]
        stripped = line.strip()
        indent = _indent(line)
        if stripped == "..." and indent == base:
            return fields, index + 1
        if indent == base and stripped:
            match = _YAML_KEY.match(line)
            if match:
                key, value = match.group(1), (match.group(2) or "").strip()
                block = value in ("|", "|-", "|+", ">", ">-", ">+")
                fields[key] = "" if block else _unquote(value)
        elif block and key and (indent > base or not stripped):
            fields[key] += stripped + "\n"
        index += 1
    return fields, index


def _node_tap(lines: list[str], partial: Partial) -> None:
    stack: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if "# Subtest: " in line:
            subtest = _TAP_SUBTEST.match(line)
            if subtest:
                level = len(subtest.group(1)) // 4
                stack = [*stack[:level], subtest.group(2).strip()]
            continue
        if line.startswith("# ") and " " in line[2:]:
            count = _TAP_COUNT.match(line)
            if count:
                setattr(partial, "passed" if count.group(1) == "pass" else "failed", int(count[2]))
            continue
        if "not ok " not in line:
            continue
        not_ok = _TAP_NOT_OK.match(line)
        if not not_ok:
            continue
        level = len(not_ok.group(1)) // 4
        name = not_ok.group(2).strip()
        fields, index = _tap_yaml(lines, index)
        if fields.get("failureType") == "subtestsFailed" or fields.get("type") == "suite":
            continue
        partial.fail(" > ".join([*stack[:level], name]))
        partial.add(line, HEADLINE)
        error_name = fields.get("name", "")
        message = [part.strip() for part in fields.get("error", "").splitlines() if part.strip()]
        if message:
            first = message[0]
            if error_name and not first.startswith(error_name):
                first = f"{error_name}: {first}"
            partial.add(first, HEADLINE)
            for detail in message[1:DETAIL_CAP]:
                if has_word(detail):
                    partial.add(detail, DETAIL)
        frames = [f for f in fields.get("stack", "").splitlines() if f and "node:" not in f]
        if frames:
            partial.add(f"at {frames[0].strip()}", LOCATION)
        elif fields.get("location"):
            partial.add(f"at {fields['location']}", LOCATION)


def _node_spec(lines: list[str], partial: Partial) -> None:
    stack: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        stripped = line.lstrip(" ")
        marker = stripped[:2]
        if marker == "ℹ ":
            count = _SPEC_COUNT.match(stripped)
            if count:
                setattr(partial, "passed" if count.group(1) == "pass" else "failed", int(count[2]))
            continue
        if marker not in ("✖ ", "✔ ", "▶ ", "﹣ "):
            continue
        if stripped.startswith("✖ failing tests:"):
            if partial.failing:
                break  # the summary repeats failures already read, without their suites
            stack = []
            continue
        level = (len(line) - len(stripped)) // 2
        timed = _SPEC_DURATION.match(stripped[2:])
        name = (timed.group(1) if timed else stripped[2:]).strip()
        if marker == "▶ ":
            stack = [*stack[:level], name]
            continue
        is_suite_end = marker == "✖ " and len(stack) > level and stack[level] == name
        parents = stack[:level]
        stack = stack[:level]
        if marker != "✖ " or is_suite_end:
            continue
        partial.fail(" > ".join([*parents, name]))
        partial.add(f"✖ {name}", HEADLINE)
        index = _node_spec_message(lines, index, len(line) - len(stripped), partial)


def _node_spec_message(lines: list[str], index: int, indent: int, partial: Partial) -> int:
    """Read the error under a ``✖`` line: its message, then the first frame in user code."""
    message_lines = 0
    in_stack = located = False
    while index < len(lines):
        line = lines[index]
        stripped = line.strip()
        if stripped and _indent(line) <= indent:
            return index
        index += 1
        if not stripped:
            continue
        if stripped.startswith("at "):
            in_stack = True
            if not located and "node:" not in stripped and ("/" in stripped or "\\" in stripped):
                partial.add(stripped.removesuffix(" {"), LOCATION)
                located = True
            continue
        if in_stack or message_lines >= DETAIL_CAP:
            continue
        if has_word(stripped):
            partial.add(stripped, HEADLINE if message_lines == 0 else DETAIL)
            message_lines += 1
    return index


def _node(lines: list[str]) -> Partial:
    partial = Partial("node")
    if any("# Subtest: " in line or line.startswith("TAP version") for line in lines[:2000]):
        _node_tap(lines, partial)
    else:
        _node_spec(lines, partial)
        if not partial.useful:
            _node_tap(lines, partial)
    return partial


def _detect_node(text: str) -> bool:
    if "TAP version" in text or "# Subtest: " in text:
        return True
    return "ℹ tests " in text or "ℹ pass " in text or "✖ failing tests:" in text


# --- cargo test / rustc -------------------------------------------------------------------------

_CARGO_TEST_FAILED = lazy_compile(r"test (.+?) \.\.\. FAILED$")
_RUST_PANIC = lazy_compile(r"thread '([^']*)'(?: \(\d+\))? panicked at (.*)$")
_RUST_ERROR = lazy_compile(r"error(\[E\d+\])?: (.+)$")
_RUST_ARROW = lazy_compile(r"\s*--> (\S.*)$")
_RUST_PRIMARY_LABEL = lazy_compile(r"\s*(?:\d+\s*)?\|\s*\^+ (.+)$")
_CARGO_RESULT = lazy_compile(r"test result: \w+\. (\d+) passed; (\d+) failed;")
_RUST_NOISE = (
    "could not compile",
    "aborting due to",
    "test failed, to rerun",
    "build failed",
    "test run failed",
)
#: cargo-nextest: ``    FAIL [   0.013s] (2/3) calc tests::adds`` and its closing summary.
_NEXTEST_FAIL = lazy_compile(r"\s+FAIL \[\s*[\d.]+s\] (?:\(\s*\d+/\d+\) )?(\S.*)$")
_NEXTEST_SUMMARY = lazy_compile(r"\s+Summary \[\s*[\d.]+s\] \d+ tests? run: (.*)$")
_NEXTEST_COUNT = lazy_compile(r"(\d+) (passed|failed)")


def _rust(lines: list[str]) -> Partial:
    partial = Partial("rustc")
    passed = failed = 0
    saw_result = False
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        first = line[0]
        if first == "t":
            if line.startswith("test result:"):
                result = _CARGO_RESULT.match(line)
                if result:
                    saw_result = True
                    passed += int(result.group(1))
                    failed += int(result.group(2))
            elif line.endswith("FAILED") and line.startswith("test "):
                test = _CARGO_TEST_FAILED.match(line)
                if test:
                    partial.fail(test.group(1))
            elif "panicked at" in line:
                index = _rust_panic(lines, index, line, partial)
        elif first == "e" and line.startswith("error"):
            error = _RUST_ERROR.match(line)
            if error and not any(noise in line for noise in _RUST_NOISE):
                partial.add(line, HEADLINE)
                index = _rust_error_body(lines, index, partial)
        elif first == " " and ("panicked at" in line or "FAIL [" in line or "Summary [" in line):
            index = _nextest_line(lines, index, line, partial)
    if saw_result and partial.passed is None:
        partial.passed, partial.failed = passed, failed
    return partial


def _nextest_line(lines: list[str], index: int, line: str, partial: Partial) -> int:
    """cargo-nextest's lines: a test's verdict, its indented panic, the run's summary."""
    stripped = line.lstrip()
    if stripped.startswith("thread '"):
        return _rust_panic(lines, index, stripped, partial)
    verdict = _NEXTEST_FAIL.match(line)
    if verdict:
        partial.fail(verdict.group(1))
        return index
    summary = _NEXTEST_SUMMARY.match(line)
    if summary:
        counts = {word: int(number) for number, word in _NEXTEST_COUNT.findall(summary.group(1))}
        partial.passed, partial.failed = counts.get("passed", 0), counts.get("failed", 0)
    return index


def _rust_panic(lines: list[str], index: int, line: str, partial: Partial) -> int:
    panic = _RUST_PANIC.match(line)
    if not panic:
        return index
    partial.add(f"thread '{panic.group(1)}' panicked at {panic.group(2)}", HEADLINE)
    if not panic.group(2).endswith(":"):
        return index  # the old one-line form: the message is on the panic line
    message_lines = 0
    while index < len(lines) and message_lines < DETAIL_CAP:
        stripped = lines[index].strip()
        if not stripped or stripped.startswith(("note:", "stack backtrace:")):
            break
        partial.add(stripped, HEADLINE if message_lines == 0 else DETAIL)
        message_lines += 1
        index += 1
    return index


def _rust_error_body(lines: list[str], index: int, partial: Partial) -> int:
    """Read a compiler error's location (``--> file:line:col``) and its primary labels."""
    labels = 0
    while index < len(lines):
        line = lines[index]
        if not line.strip() or line.startswith(("error", "warning")):
            return index
        index += 1
        if "-->" in line:
            arrow = _RUST_ARROW.match(line)
            if arrow:
                partial.add(f"--> {arrow.group(1)}", LOCATION)
        elif "^" in line and labels < 3:
            label = _RUST_PRIMARY_LABEL.match(line)
            if label:
                partial.add(f"^ {label.group(1)}", DETAIL)
                labels += 1
    return index


def _detect_rust(text: str) -> bool:
    return (
        "error[E" in text
        or "test result:" in text
        or "panicked at" in text
        or "could not compile" in text
        or "aborting due to" in text
    )


def _cargo(lines: list[str]) -> Partial:
    partial = _rust(lines)
    cargo_markers = ("Compiling ", "could not compile", "test result:", "Running ", "Finished ")
    if any(marker in line for line in lines[:5000] for marker in cargo_markers):
        partial.runner = "cargo"
    return partial


# --- go test ------------------------------------------------------------------------------------

_GO_FAIL = lazy_compile(r"(\s*)--- FAIL: (\S+)(?: \([\d.]+s\))?")
_GO_LOG = lazy_compile(r"\s+\S+\.go:\d+: ")
_GO_BUILD = lazy_compile(r"\S+\.go:\d+:\d+: \S")
_GO_FRAME = lazy_compile(r"\s+(\S+\.go:\d+)")


def _go(lines: list[str]) -> Partial:
    partial = Partial("go")
    verbose = False
    passed = failed = 0
    pending: list[str] = []  # logs printed before the test's verdict (go test -v)
    after_fail = False
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line:
            continue
        if (
            ".go:" not in line
            and "--- " not in line
            and not line.startswith(("=== ", "panic: ", "FAIL"))
        ):
            if not line[0].isspace():
                after_fail = False
            continue
        if "--- " in line:
            stripped = line.lstrip()
            if stripped.startswith("--- FAIL: "):
                verdict = _GO_FAIL.match(line)
                if verdict:
                    partial.fail(verdict.group(2))
                    partial.add(f"--- FAIL: {verdict.group(2)}", HEADLINE)
                    failed += not verdict.group(1)
                    for log in pending:
                        partial.add(log, HEADLINE)
                pending, after_fail = [], True
                continue
            if stripped.startswith(("--- PASS: ", "--- SKIP: ")):
                passed += line.startswith("--- PASS: ")
                pending, after_fail = [], False
                continue
        if line.startswith("=== "):
            verbose = verbose or line.startswith("=== RUN")
            pending, after_fail = [], False
            continue
        first = line[0]
        if first.isspace():
            if ".go:" in line and _GO_LOG.match(line):
                if after_fail:
                    partial.add(line, HEADLINE)
                elif len(pending) < DETAIL_CAP:
                    pending.append(line)
            continue
        after_fail = False
        if line.startswith("panic: "):
            partial.add(line, HEADLINE)
            index = _go_panic_frame(lines, index, partial)
        elif ".go:" in line and _GO_BUILD.match(line):
            partial.add(line, HEADLINE)
        elif line.startswith("FAIL") and ("[build failed]" in line or "[setup failed]" in line):
            partial.add(line, DETAIL)
    if failed or passed:
        partial.failed = failed
        partial.passed = passed if verbose else None
    return partial


def _go_panic_frame(lines: list[str], index: int, partial: Partial) -> int:
    for offset, line in enumerate(lines[index : index + 80]):
        if line.startswith(("FAIL", "ok ", "exit status")):
            return index + offset
        if ".go:" in line and "/src/runtime/" not in line and "/src/testing/" not in line:
            frame = _GO_FRAME.match(line)
            if frame:
                partial.add(frame.group(1), LOCATION)
                return index + offset + 1
    return index


def _detect_go(text: str) -> bool:
    found = (
        "--- FAIL:" in text
        or "--- PASS:" in text
        or "=== RUN" in text
        or "[build failed]" in text
        or "[setup failed]" in text
    )
    # an event stream is read by loopctl.gojson; its lines are not go test's text
    return found and not detect_go_json(text)


def read_go_json(lines: list[str]) -> Partial:
    """:func:`loopctl.gojson.read_go_json`, imported (with msgspec) when output holds events."""
    from loopctl.gojson import read_go_json as read

    return read(lines)


# --- mypy and tsc -------------------------------------------------------------------------------

_MYPY_ERROR = lazy_compile(r"[^\s:][^:]*\.pyi?:\d+(?::\d+)?: error: \S")
_MYPY_FOUND = lazy_compile(r"Found (\d+) errors? in \d+ files?")


def _mypy(lines: list[str]) -> Partial:
    partial = Partial("mypy")
    for line in lines:
        if ": error: " in line:
            if _MYPY_ERROR.match(line):
                partial.add(line, HEADLINE)
        elif line.startswith("Found "):
            found = _MYPY_FOUND.match(line)
            if found:
                partial.failed = int(found.group(1))
        elif line.startswith("Success: no issues found"):
            partial.failed = 0
    return partial


def _detect_mypy(text: str) -> bool:
    return (": error: " in text and ".py" in text) or "Success: no issues found" in text


_TSC_ERROR = lazy_compile(r"(?:\S.*?(?:\(\d+,\d+\): | - ))?error TS\d+: ")
_TSC_FOUND = lazy_compile(r"Found (\d+) errors?\b")


def _tsc(lines: list[str]) -> Partial:
    partial = Partial("tsc")
    errors = 0
    found: int | None = None
    continuation = 0
    for line in lines:
        if "error TS" in line and _TSC_ERROR.match(line):
            partial.add(line, HEADLINE)
            errors += 1
            continuation = 4
        elif continuation and line.startswith("  ") and line.strip():
            partial.add(line, DETAIL)
            continuation -= 1
        else:
            continuation = 0
            if line.startswith("Found "):
                match = _TSC_FOUND.match(line)
                if match:
                    found = int(match.group(1))
    if errors or found is not None:
        partial.failed = found if found is not None else errors
    return partial


def _detect_tsc(text: str) -> bool:
    return "error TS" in text


# --- generic fallback ---------------------------------------------------------------------------

_GENERIC_ERROR = lazy_compile(r"\b(?:[Ee]rror|ERROR)\b\s*[:\[!(]")
_GENERIC_FATAL = lazy_compile(r"\b(?:[Ff]atal|FATAL|[Pp]anic|PANIC)\b\s*[:\[!(]")
_GENERIC_FAIL = lazy_compile(r"\bFAIL(?:ED|URE)?\b")
_GENERIC_NEGATIVE = lazy_compile(
    r"\b(?:0|no|zero) (?:errors?|failures?|failed)\b|\b(?:errors?|failures?)=0\b", re.IGNORECASE
)
#: The generic scan stops after this many lines: the bound keeps the first ones anyway.
_GENERIC_CAP = 1000


#: A line any of these match is an error line, unless ``_GENERIC_NEGATIVE`` matches it too
#: ("0 errors"). "First word" means after leading spaces, in any case, then no word character.
_GENERIC_RULES: Scanner[None] = Scanner(
    [
        ScanRule(
            "error",
            r"Error:|^\s*(?i:error)(?!\w)|\b(?:[Ee]rror|ERROR)\b\s*[:\[!(]",
            ("rror", "RROR"),
            None,
        ),
        ScanRule("exception", r"Exception:", "Exception:", None),
        ScanRule("fail", r"\bFAIL(?:ED|URE)?\b", "FAIL", None),
        ScanRule(
            "fatal",
            r"^\s*(?i:fatal)(?!\w)|\b(?:[Ff]atal|FATAL|[Pp]anic|PANIC)\b\s*[:\[!(]",
            ("atal", "ATAL", "anic", "ANIC"),
            None,
        ),
        ScanRule("failed first", r"^\s*(?i:failed|failure)(?!\w)", ("ail", "AIL"), None),
    ],
    line_chars=_SCAN_CHARS,
)


def _generic(lines: list[str]) -> Partial:
    partial = Partial("generic")
    for found in _GENERIC_RULES.search_lines(lines):
        if not _GENERIC_NEGATIVE.search(found.line):
            partial.add(found.line, HEADLINE)
            if len(partial.entries) >= _GENERIC_CAP:
                break
    return partial


# --- putting it together ------------------------------------------------------------------------

_Extractor = Callable[[list[str]], Partial]
#: In priority order: when several runners are found, the first useful one names the run.
_RUNNERS: tuple[tuple[Callable[[str], bool], _Extractor], ...] = (
    (_detect_pytest, _pytest),
    (_detect_unittest, _unittest),
    (_detect_jest, _jest),
    (_detect_vitest, _vitest),
    (_detect_node, _node),
    (_detect_rust, _cargo),
    (detect_go_json, read_go_json),
    (_detect_go, _go),
    (_detect_tsc, _tsc),
    (_detect_mypy, _mypy),
)


def _split_lines(text: str) -> list[str]:
    lines = text.splitlines()
    return [line if len(line) <= _SCAN_CHARS else line[:_SCAN_CHARS] for line in lines]


def _parse(output: str, max_lines: int) -> ParsedTestOutput:
    text = strip_ansi(output)
    lines = _split_lines(text)
    detected = [extractor(lines) for detect, extractor in _RUNNERS if detect(text)]
    useful = [partial for partial in detected if partial.useful]
    # Nothing decisive from a recognised runner (it passed, but a later step failed; or it
    # crashed before reporting): the fallbacks still find what the failing step said.
    if not useful and "Traceback (most recent call last)" in text:
        useful = [p for p in (_python(lines),) if p.useful]
    if not useful:
        useful = [p for p in (_generic(lines),) if p.useful]
    leader = useful[0] if useful else (detected[0] if detected else Partial("generic"))
    if leader.runner == "generic" and detected:  # generic lines, but the format was known
        leader.runner = detected[0].runner
        leader.passed, leader.failed = detected[0].passed, detected[0].failed
    chosen = useful or [leader]
    return ParsedTestOutput(
        runner=leader.runner,
        error_lines=bounded((entry for p in chosen for entry in p.entries), max_lines),
        failing_tests=unique(test for p in chosen for test in p.failing),
        passed_count=leader.passed,
        failed_count=leader.failed,
    )


def parse_test_output(output: str, *, max_lines: int = 40) -> ParsedTestOutput:
    """Pick the decisive error lines, failing test ids and counts out of a test run's output.

    The output is read the same whether the run failed or not; a caller that knows the run
    passed should ignore the error lines (``run_test_command`` does). Never raises: output it
    cannot read gives an empty ``ParsedTestOutput`` with runner "generic".
    """
    try:
        return _parse(output, max_lines)
    except Exception:  # noqa: BLE001 - a bug here must not end the loop; the output is kept
        return ParsedTestOutput()


__all__ = ["ParsedTestOutput", "parse_test_output"]
