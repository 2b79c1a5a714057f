"""Read the event stream of ``go test -json`` (test2json).

Each line is one JSON event: ``{"Action": "fail", "Package": "example.com/calc", "Test":
"TestAdd"}``; ``output`` events carry the test's own output line by line. The failing tests
(``example.com/calc/TestAdd``, subtests ``example.com/calc/TestTable/two``) come from the
``fail`` events, their messages from the ``output`` events of the same test, and build
failures from Go 1.24's ``build-output`` events (``FailedBuild`` on the package's ``fail``) or,
from older Go, from the compiler's plain lines that ``go test`` prints beside the stream.

Lines that are not events (a build error on stderr, the ``... [N bytes omitted] ...`` marker of
a cut log) are read as plain text. Nothing here raises on bad input: a line that is not a JSON
object with a known ``Action`` and string fields is plain text, and every kept list is
bounded. Events are decoded by msgspec into a typed struct (three times ``json.loads``' speed).
"""

from __future__ import annotations

import attrs
import msgspec

from loopctl.lazyre import lazy_compile
from loopctl.testparts import DETAIL, DETAIL_CAP, HEADLINE, LOCATION, Partial
from loopctl.testparts import detect_go_json as detect_go_json

#: Output lines kept per test or package: enough for a message and a panic's first frames.
_LINES_PER_TEST = 200
#: Tests and packages remembered at most (a stream of millions of events stays bounded).
_MAX_KEYS = 100_000
#: Failures reported at most; the counts still count them all.
_MAX_FAILURES = 1000
_ACTIONS = frozenset(
    {"start", "run", "pause", "cont", "pass", "bench", "fail", "output", "skip"}
    | {"build-output", "build-fail"}
)
_GO_BUILD_ERROR = lazy_compile(r"\S+\.go:\d+(?::\d+)?: \S")
_GO_LOG = lazy_compile(r"\s+\S+\.go:\d+: ")
_GO_FRAME = lazy_compile(r"\s+(\S+\.go:\d+)")
_BUILD_FAILED = lazy_compile(r"FAIL\s+(\S+) \[(?:build|setup) failed\]")
#: test2json's framing lines, not the test's own output.
_FRAMES = ("=== RUN", "=== PAUSE", "=== CONT", "=== NAME", "--- FAIL", "--- PASS", "--- SKIP")


class _Event(msgspec.Struct, gc=False):
    """One test2json event: the fields loopctl reads (the others, Time and Elapsed, are not)."""

    Action: str
    Package: str = ""
    Test: str = ""
    Output: str = ""
    OutputType: str = ""
    FailedBuild: str = ""
    ImportPath: str = ""


_decode_event = msgspec.json.Decoder(_Event).decode


@attrs.define
class _Test:
    """One test (or a package's own output when ``test`` is empty)."""

    package: str
    test: str
    lines: list[str] = attrs.Factory(list)
    #: Output that has not ended with a newline yet (test2json splits long lines).
    pending: str = ""
    #: True when a line of its own output was not a frame (``=== RUN``, ``--- FAIL``).
    own_output: bool = False
    failed_subtest: bool = False

    def output(self, text: str, frame: bool) -> None:
        text = self.pending + text
        parts = text.split("\n")
        self.pending = parts.pop()[:4096]
        for line in parts:
            self.keep(line.rstrip("\r"), frame)

    def keep(self, line: str, frame: bool = False) -> None:
        if not frame and line.strip() and not line.lstrip().startswith(_FRAMES):
            self.own_output = True
        if len(self.lines) < _LINES_PER_TEST:
            self.lines.append(line)

    def flush(self) -> None:
        if self.pending:
            self.keep(self.pending)
            self.pending = ""


@attrs.define
class _Stream:
    """Everything read from the events, in the order it came."""

    tests: dict[tuple[str, str], _Test] = attrs.Factory(dict)
    #: (package, test) of each ``fail`` event of a test, in order.
    failed: list[tuple[str, str]] = attrs.Factory(list)
    #: package -> its final action (pass, fail, skip) and the FailedBuild it named.
    packages: dict[str, tuple[str, str]] = attrs.Factory(dict)
    #: import path -> the compiler's lines (``build-output``), and which builds failed.
    builds: dict[str, list[str]] = attrs.Factory(dict)
    failed_builds: list[str] = attrs.Factory(list)
    #: Lines that were not events.
    text: list[str] = attrs.Factory(list)
    passed: int = 0
    failed_top: int = 0
    saw_result: bool = False

    def test(self, package: str, test: str) -> _Test | None:
        key = (package, test)
        found = self.tests.get(key)
        if found is None and len(self.tests) < _MAX_KEYS:
            found = self.tests[key] = _Test(package, test)
        return found

    def event(self, event: _Event) -> None:
        action = event.Action
        if action == "output":
            record = self.test(event.Package, event.Test)
            if record is not None:
                record.output(event.Output, event.OutputType == "frame")
        elif action in ("pass", "fail", "skip"):
            self.result(action, event.Package, event.Test, event.FailedBuild)
        elif action == "build-output":
            path = event.ImportPath
            lines = self.builds.setdefault(path, []) if len(self.builds) < _MAX_KEYS else []
            for line in event.Output.splitlines():
                if len(lines) < _LINES_PER_TEST:
                    lines.append(line)
        elif action == "build-fail" and len(self.failed_builds) < _MAX_FAILURES:
            self.failed_builds.append(event.ImportPath)

    def result(self, action: str, package: str, test: str, failed_build: str) -> None:
        if not test:
            if len(self.packages) < _MAX_KEYS:
                self.packages[package] = (action, failed_build)
            self.saw_result = self.saw_result or action != "skip"
            return
        self.saw_result = True
        top = "/" not in test
        if action == "pass":
            self.passed += top
        elif action == "fail":
            self.failed_top += top
            if len(self.failed) < _MAX_FAILURES:
                self.failed.append((package, test))
            if not top:
                parent = self.tests.get((package, test.rsplit("/", 1)[0]))
                if parent is not None:
                    parent.failed_subtest = True


def _event(line: str) -> _Event | None:
    """The event on ``line``, or None when it is not one (then it is plain text)."""
    if not line.startswith("{") or '"Action"' not in line:
        return None
    try:
        event = _decode_event(line)
    except msgspec.MsgspecError:  # not JSON, or not an event's shape
        return None
    return event if event.Action in _ACTIONS else None


def read_go_json(lines: list[str]) -> Partial:
    """The failing tests, their messages and the counts of a ``go test -json`` stream."""
    stream = _Stream()
    for line in lines:
        event = _event(line)
        if event is not None:
            stream.event(event)
        elif len(stream.text) < _MAX_KEYS:
            stream.text.append(line)
    partial = Partial("go")
    _report_tests(stream, partial)
    failed_packages = _report_packages(stream, partial)
    if stream.saw_result or failed_packages:
        partial.passed = stream.passed
        partial.failed = stream.failed_top + len(failed_packages)
    return partial


def _report_tests(stream: _Stream, partial: Partial) -> None:
    """Each failing test: its id, a headline and its own messages."""
    for package, test in stream.failed:
        record = stream.tests.get((package, test))
        if record is not None:
            record.flush()
            if record.failed_subtest and not record.own_output:
                continue  # failed because a subtest failed: the subtest says why
        partial.fail(f"{package}/{test}" if package else test)
        partial.add(f"--- FAIL: {test} ({package})" if package else f"--- FAIL: {test}")
        if record is not None:
            _test_lines(record.lines, partial)


def _test_lines(lines: list[str], partial: Partial) -> None:
    """A test's own output: its log lines (``calc_test.go:7: ...``) and panics."""
    kept = 0
    index = 0
    while index < len(lines) and kept < DETAIL_CAP:
        line = lines[index]
        index += 1
        stripped = line.strip()
        if not stripped or stripped.startswith(_FRAMES):
            continue
        if stripped.startswith("panic: "):
            partial.add(stripped, HEADLINE)
            _panic_frame(lines[index:], partial)
            return
        if stripped in ("FAIL", "PASS") or stripped.startswith(("FAIL\t", "ok \t", "ok\t")):
            continue
        if _GO_LOG.match(line):
            partial.add(stripped, HEADLINE)
        else:
            partial.add(stripped, DETAIL)
        kept += 1


def _panic_frame(lines: list[str], partial: Partial) -> None:
    """The first stack frame of a panic that is in the project, not in Go's runtime."""
    for line in lines[:120]:
        if ".go:" in line and "/src/runtime/" not in line and "/src/testing/" not in line:
            frame = _GO_FRAME.match(line)
            if frame:
                partial.add(frame.group(1), LOCATION)
                return


def _report_packages(stream: _Stream, partial: Partial) -> list[str]:
    """Packages that failed with no failing test: build failures, a panic in TestMain, a
    setup failure. Each is one failure, named by its import path."""
    failing_tests = {package for package, _ in stream.failed}
    failed: list[str] = []
    builds_used: set[str] = set()
    for package, (action, failed_build) in stream.packages.items():
        if action != "fail" or package in failing_tests:
            continue
        failed.append(package)
        partial.fail(package)
        if failed_build:
            builds_used.add(failed_build)
            _build_lines(stream.builds.get(failed_build, []), partial)
            partial.add(f"FAIL {package} [build failed]", DETAIL)
            continue
        record = stream.tests.get((package, ""))
        if record is not None:
            record.flush()
            _test_lines(record.lines, partial)
    for path in stream.failed_builds:
        if path not in builds_used:
            _build_lines(stream.builds.get(path, []), partial)
    failed += _text_lines(stream, partial, failed + list(failing_tests))
    return failed


def _build_lines(lines: list[str], partial: Partial) -> None:
    for line in lines[:DETAIL_CAP]:
        if line.startswith("# "):
            continue  # the package the errors belong to
        partial.add(line, HEADLINE if _GO_BUILD_ERROR.match(line) else DETAIL)


def _text_lines(stream: _Stream, partial: Partial, known: list[str]) -> list[str]:
    """Plain lines beside the events: older Go prints build errors and ``FAIL pkg [build
    failed]`` on stderr, outside the stream. Returns the packages they name as failed."""
    failed: list[str] = []
    errors = 0
    for line in stream.text:
        if ".go:" in line and _GO_BUILD_ERROR.match(line) and errors < DETAIL_CAP:
            partial.add(line, HEADLINE)
            errors += 1
        elif line.startswith("FAIL") and "failed]" in line:
            found = _BUILD_FAILED.match(line)
            if found and found.group(1) not in known and found.group(1) not in failed:
                failed.append(found.group(1))
                partial.fail(found.group(1))
                partial.add(line, DETAIL)
    return failed


__all__ = ["detect_go_json", "read_go_json"]
