"""Test results from the runner's own report: JUnit XML files, ``go test -json`` streams, and
how a test run picks between a report and its output (``loopctl.testreport``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl import testreport
from loopctl.gojson import read_go_json
from loopctl.junit import ReportError, read_junit
from loopctl.testcmd import run_test_command
from loopctl.testing import Project
from loopctl.testoutput import parse_test_output
from loopctl.testreport import plan_report, pytest_arguments, read_results

DATA = Path(__file__).parent / "data" / "test-output"
REPORTS = sorted(path.name.removesuffix(".report.xml") for path in DATA.glob("*.report.xml"))
PY = sys.executable
PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONPATH": ".", "PYTEST_ADDOPTS": ""}


def test_report_captures_exist() -> None:
    # generate.py wrote these from real tool runs; losing them silently would void the tests
    assert {"pytest_junit", "pytest_junit_xunit1", "jest_junit", "vitest_junit"} <= set(REPORTS)
    assert {"nextest_junit", "pytest_junit_collect_error"} <= set(REPORTS)
    assert (DATA / "go_test_json.txt").exists()
    assert (DATA / "go_test_json_go119.txt").exists()
    assert (DATA / "vitest.txt").exists()


@pytest.mark.parametrize("case", REPORTS)
def test_real_reports(case: str) -> None:
    expected = json.loads((DATA / f"{case}.expected.json").read_text())["report"]
    found = read_junit((DATA / f"{case}.report.xml").read_bytes(), root=None)
    lines = [text for _, text in found.entries]
    assert found.runner == expected["runner"]
    for substring in expected["error_substrings"]:
        assert any(substring in line for line in lines), (substring, lines)
    assert found.failing == expected["failing_tests"]
    assert (found.passed, found.failed) == (expected["passed_count"], expected["failed_count"])


def test_pytest_report_ids_match_the_text_output_ids() -> None:
    # the same run read from its report or from its output names the same failing tests, so
    # stuck detection sees one failing-test set whichever was read
    for case in ("pytest_junit", "pytest_junit_xunit1", "pytest_junit_collect_error"):
        report = read_junit((DATA / f"{case}.report.xml").read_bytes())
        text = parse_test_output((DATA / f"{case}.txt").read_text())
        assert sorted(report.failing) == sorted(text.failing_tests), case


def test_pytest_xunit2_ids_found_on_disk(tmp_path: Path) -> None:
    # without junit_family=xunit1 the report has no file: the module is found under the root
    (tmp_path / "Checks").mkdir()
    (tmp_path / "Checks" / "test_x.py").write_text("")
    report = (
        b'<testsuites><testsuite name="pytest"><testcase classname="Checks.test_x.TestA"'
        b' name="test_b[1]"><failure message="boom">E   boom</failure></testcase>'
        b"</testsuite></testsuites>"
    )
    assert read_junit(report, root=tmp_path).failing == ["Checks/test_x.py::TestA::test_b[1]"]
    # not on disk: the module is guessed to end before the first class name
    guessed = report.replace(b"Checks.", b"checks.")
    assert read_junit(guessed, root=tmp_path).failing == ["checks/test_x.py::TestA::test_b[1]"]


def test_generic_junit_ids_and_counts() -> None:
    report = textwrap.dedent(
        """\
        <?xml version="1.0" encoding="UTF-8"?>
        <testsuite name="com.example.CalcTest" tests="4" failures="1" errors="1" skipped="1">
          <testcase classname="com.example.CalcTest" name="adds" time="0.01">
            <failure message="expected:&lt;4&gt; but was:&lt;5&gt;" type="java.lang.AssertionError">
        java.lang.AssertionError: expected:&lt;4&gt; but was:&lt;5&gt;
        \tat org.junit.Assert.fail(Assert.java:89)
        \tat com.example.CalcTest.adds(CalcTest.java:12)
            </failure>
          </testcase>
          <testcase classname="com.example.CalcTest" name="divides"><error message="boom"/></testcase>
          <testcase classname="com.example.CalcTest" name="skips"><skipped/></testcase>
          <testcase classname="com.example.CalcTest" name="passes"/>
        </testsuite>
        """
    ).encode()
    found = read_junit(report)
    assert found.runner == "junit"
    assert found.failing == ["com.example.CalcTest.adds", "com.example.CalcTest.divides"]
    lines = [text for _, text in found.entries]
    assert "FAILED com.example.CalcTest.adds - expected:<4> but was:<5>" in lines
    assert "at com.example.CalcTest.adds(CalcTest.java:12)" in lines  # not the junit frame
    assert "ERROR com.example.CalcTest.divides - boom" in lines
    assert (found.passed, found.failed) == (1, 2)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        pytest.param(
            b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
            b'<!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">]>'
            b"<testsuites><testcase name='&lol2;'/></testsuites>",
            "DOCTYPE",
            id="billion-laughs",
        ),
        pytest.param(
            b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><testsuites>&e;</testsuites>',
            "DOCTYPE",
            id="external-entity",
        ),
        pytest.param(b"<testsuites><testsuite><testcase", "not well-formed", id="truncated"),
        pytest.param(b"", "not well-formed", id="empty"),
        pytest.param(b"<html><body>502</body></html>", "root element is <html>", id="not-junit"),
        pytest.param(b"<testsuites>&nbsp;</testsuites>", "undefined entity", id="html-entity"),
        pytest.param(
            b"<testsuites>" + b"<a>" * 100 + b"</a>" * 100 + b"</testsuites>",
            "nested more than",
            id="deep",
        ),
    ],
)
def test_reports_that_are_refused(data: bytes, why: str) -> None:
    with pytest.raises(ReportError, match=why):
        read_junit(data)


def test_a_huge_failure_text_is_cut() -> None:
    body = b"x" * 5_000_000
    report = b'<testsuites><testcase name="t"><failure message="m">' + body + b"</failure>"
    found = read_junit(report + b"</testcase></testsuites>")
    assert found.failing == ["t"]
    assert all(len(text) <= 500 for _, text in found.entries)


xml_pieces = st.sampled_from(
    [
        "<testsuites>",
        "</testsuites>",
        '<testsuite name="pytest">',
        "</testsuite>",
        '<testcase classname="a.b" name="t">',
        '<testcase name="">',
        "</testcase>",
        '<failure message="m">',
        "</failure>",
        "<error>",
        "</error>",
        "<skipped/>",
        '<property name="go.version" value="1"/>',
        "E   assert 1 == 2\n",
        "at x (y.js:1:2)\n",
        "&amp;",
        "&#x0;",
        "<![CDATA[ ]]>",
        "<!DOCTYPE x>",
        '<?xml version="1.0"?>',
    ]
)
garbled_xml = st.one_of(
    st.binary(max_size=300),
    st.lists(st.one_of(xml_pieces, st.text(max_size=20)), max_size=40).map(
        lambda parts: "".join(parts).encode("utf-8", "surrogatepass")
    ),
)


@settings(max_examples=300, deadline=None)
@given(garbled_xml)
def test_garbled_reports_raise_only_report_error(data: bytes) -> None:
    try:
        found = read_junit(data)
    except ReportError:
        return
    assert len(found.failing) <= 1000
    assert all(len(text) <= 500 for _, text in found.entries)
    assert (found.passed or 0) >= 0
    assert (found.failed or 0) >= 0


# --- go test -json ----------------------------------------------------------------------------


def _events(*events: dict[str, object]) -> str:
    return "\n".join(json.dumps(event) for event in events) + "\n"


def test_go_json_real_stream_gives_no_raw_json_lines() -> None:
    for case in ("go_test_json", "go_test_json_go119"):
        found = parse_test_output((DATA / f"{case}.txt").read_text())
        assert found.runner == "go"
        assert not any(line.startswith("{") for line in found.error_lines), case
        # a parent that failed only through its subtests is not listed; its subtests are
        assert "example.com/calcproj/calc/TestTable" not in found.failing_tests


def test_msgspec_is_imported_only_for_output_that_holds_go_events() -> None:
    """Reading a pytest log (``loopctl classify``, ``errors report``) does not import msgspec;
    go test's event stream still reads with it."""
    probe = textwrap.dedent(
        f"""\
        import sys
        from pathlib import Path
        from loopctl.testoutput import parse_test_output
        parse_test_output("FAILED tests/test_a.py::test_x - assert 1 == 2\\n")
        print("msgspec" in sys.modules)
        found = parse_test_output(Path({str(DATA / "go_test_json.txt")!r}).read_text())
        print("msgspec" in sys.modules, found.runner)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout == "False\nTrue go\n"


def test_go_json_parent_with_its_own_message_is_listed() -> None:
    package = "example.com/p"
    stream = _events(
        {"Action": "run", "Package": package, "Test": "TestX"},
        {"Action": "output", "Package": package, "Test": "TestX", "Output": "=== RUN   TestX\n"},
        {"Action": "output", "Package": package, "Test": "TestX", "Output": "    x_test.go:9: "},
        {"Action": "output", "Package": package, "Test": "TestX", "Output": "setup broke\n"},
        {"Action": "fail", "Package": package, "Test": "TestX/sub"},
        {"Action": "fail", "Package": package, "Test": "TestX"},
        {"Action": "pass", "Package": package, "Test": "TestY"},
        {"Action": "fail", "Package": package},
    )
    found = parse_test_output(stream)
    assert found.failing_tests == ["example.com/p/TestX/sub", "example.com/p/TestX"]
    # test2json split the line in two events: it is read as one
    assert "x_test.go:9: setup broke" in found.error_lines
    assert (found.passed_count, found.failed_count) == (1, 1)


def test_go_json_passing_stream_counts_and_cut_logs() -> None:
    events = [{"Action": "pass", "Package": "p", "Test": f"Test{i}"} for i in range(5)]
    stream = _events(*events, {"Action": "pass", "Package": "p"})
    found = parse_test_output(stream)
    assert (found.runner, found.passed_count, found.failed_count) == ("go", 5, 0)
    assert found.failing_tests == []
    # the middle of a long log was cut (bounded capture): the rest is still read
    cut = (
        stream[:40]
        + "\n... [1000 bytes omitted] ...\n"
        + _events({"Action": "fail", "Package": "p", "Test": "TestLast"})
    )
    assert parse_test_output(cut).failing_tests == ["p/TestLast"]


def test_go_json_build_failure_of_go_1_24_and_later() -> None:
    # the documented shape (cmd/test2json, Go 1.24): the captured fixture holds the real one
    found = parse_test_output((DATA / "go_test_json.txt").read_text())
    assert "example.com/calcproj/broken" in found.failing_tests
    assert any(line.startswith("broken/broken_test.go:6:18:") for line in found.error_lines)


json_lines = st.one_of(
    st.fixed_dictionaries(
        {
            "Action": st.sampled_from(["run", "output", "pass", "fail", "skip", "build-output"]),
        },
        optional={
            "Package": st.one_of(st.text(max_size=10), st.integers(), st.none()),
            "Test": st.one_of(st.sampled_from(["T", "T/a", "T/a/b", ""]), st.integers()),
            "Output": st.one_of(st.text(max_size=30), st.lists(st.integers(), max_size=2)),
            "FailedBuild": st.text(max_size=10),
            "ImportPath": st.text(max_size=10),
            "OutputType": st.sampled_from(["frame", "error"]),
        },
    ).map(json.dumps),
    st.text(max_size=40),
    st.just('{"Action":"output"'),
    st.just('{"Action": ["fail"]}'),
    st.just("[" * 2000),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(json_lines, max_size=50))
def test_garbled_go_json_never_raises_and_stays_bounded(lines: list[str]) -> None:
    found = read_go_json(lines)
    assert all(len(text) <= 500 for _, text in found.entries)
    assert (found.passed or 0) >= 0
    assert (found.failed or 0) >= 0
    parsed = parse_test_output("\n".join(lines), max_lines=20)
    assert len(parsed.error_lines) <= 20


# --- where the results come from ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "arguments"),
    [
        ("pytest", []),
        ("pytest -q tests", ["-q", "tests"]),
        ("python -m pytest -x", ["-x"]),
        ("/venv/bin/python3.12 -m pytest", []),
        ("uv run pytest -q", ["-q"]),
        ("CI=1 py.test", []),
        ("pytest -q && mypy .", None),
        ("pytest | tee log", None),
        ("make test", None),
        ("npm test", None),
        ("python -m unittest", None),
        ("pytest 'unclosed", None),
        ("echo pytest", None),
    ],
)
def test_pytest_is_known_by_the_command_itself(command: str, arguments: list[str] | None) -> None:
    assert pytest_arguments(command) == arguments


def test_plan_adds_junitxml_only_where_it_is_safe(tmp_path: Path) -> None:
    plan = plan_report("pytest -q", cwd=tmp_path, ask_pytest=True)
    assert plan.own_dir is not None
    assert plan.command == (f"pytest -q --junitxml={plan.own_dir}/junit.xml -o junit_family=xunit1")
    assert plan.pattern == f"{plan.own_dir}/junit.xml"
    # a private directory (the report holds the tests' output unmasked), removed after reading
    assert os.stat(plan.own_dir).st_mode & 0o077 == 0
    testreport.discard_report(plan)
    assert not os.path.exists(plan.own_dir)
    for command in ("pytest -q -p no:junitxml", "pytest -- tests", "pytest -q; true", "tox"):
        assert plan_report(command, cwd=tmp_path, ask_pytest=True).command == command
    # not asked to: never an added argument
    assert plan_report("pytest -q", cwd=tmp_path).command == "pytest -q"
    # off: the output only
    assert plan_report("pytest", cwd=tmp_path, report="off", ask_pytest=True).pattern is None


def test_plan_reads_the_report_pytest_is_asked_for_already(tmp_path: Path) -> None:
    named = plan_report("pytest --junitxml=out/r.xml", cwd=tmp_path, ask_pytest=True)
    assert (named.command, named.pattern) == ("pytest --junitxml=out/r.xml", "out/r.xml")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.pytest.ini_options]\naddopts = ["-q", "--junit-xml=build/junit.xml"]\n'
    )
    configured = plan_report("pytest", cwd=tmp_path, ask_pytest=True)
    assert (configured.command, configured.pattern) == ("pytest", "build/junit.xml")
    env = {"PYTEST_ADDOPTS": "--junitxml r.xml"}
    (tmp_path / "pyproject.toml").unlink()
    assert plan_report("pytest", cwd=tmp_path, ask_pytest=True, env=env).pattern == "r.xml"


def _write_project(root: Path) -> None:
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "__init__.py").write_text("")
    (root / "calc.py").write_text("def add(a, b):\n    return a + b + 1\n")
    (root / "tests" / "test_calc.py").write_text(
        "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n\n\n"
        "def test_sub():\n    assert add(1, -1) == 1\n\n\ndef test_mul():\n    assert add(0, 0) == 1\n"
    )


@pytest.mark.slow
def test_pytest_run_is_read_from_the_report_loopctl_asks_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_project(tmp_path / "p")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # -rN --tb=no: the output names no failing test, only the report does
    command = f"{PY} -m pytest -p no:cacheprovider -q -rN --tb=no"
    run = run_test_command(
        command, cwd=tmp_path / "p", timeout_s=60, env=PYTEST_ENV, ask_pytest=True
    )
    assert run.command == command  # the user's command, not the one with --junitxml
    assert list(scratch.iterdir()) == []  # the report was read, then removed
    assert run.runner == "pytest"
    assert run.failing_tests == ["tests/test_calc.py::test_add"]
    assert (run.passed_count, run.failed_count) == (2, 1)
    assert "FAILED tests/test_calc.py::test_add - assert 5 == 4" in run.error_lines
    assert "loopctl:" not in run.output
    # the same run without a report: no failing test can be named
    plain = run_test_command(command, cwd=tmp_path / "p", timeout_s=60, env=PYTEST_ENV)
    assert plain.failing_tests == []


def _sh_report_run(tmp_path: Path, script: str, report: str = "r.xml") -> str:
    run = run_test_command(script, cwd=tmp_path, timeout_s=60, report=report)
    assert run.exit_code == 1
    return run.output


GOOD_REPORT = (
    '<testsuites><testsuite name="s"><testcase classname="c" name="t">'
    '<failure message="broke"/></testcase></testsuite></testsuites>'
)


def test_configured_report_is_read(tmp_path: Path) -> None:
    (tmp_path / "report.xml").write_text("<testsuites/>")  # an older one: replaced by the run
    script = f"printf '%s' '{GOOD_REPORT}' > report.xml; echo 'something failed'; exit 1"
    run = run_test_command(script, cwd=tmp_path, timeout_s=60, report="report.xml")
    assert (run.failing_tests, run.runner) == (["c.t"], "junit")
    assert run.error_lines == ["FAILED c.t - broke"]
    assert "loopctl:" not in run.output


@pytest.mark.parametrize(
    ("script", "note"),
    [
        pytest.param(
            "echo FAILED x; exit 1", "no test report at r.xml after the run", id="missing"
        ),
        pytest.param(
            "printf '<testsuites><testcase' > r.xml; echo FAILED x; exit 1",
            "the test report r.xml is not a JUnit report loopctl reads: not well-formed XML",
            id="truncated",
        ),
        pytest.param(
            "printf '<!DOCTYPE a [<!ENTITY b \"c\">]><testsuites/>' > r.xml; exit 1",
            "it has a DOCTYPE",
            id="entities",
        ),
    ],
)
def test_unusable_reports_fall_back_to_the_output(tmp_path: Path, script: str, note: str) -> None:
    output = _sh_report_run(tmp_path, script)
    last = output.rstrip("\n").splitlines()[-1]
    assert last.startswith("loopctl: ")
    assert note in last
    assert last.endswith(": the results come from the output")


def test_a_report_older_than_the_run_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "r.xml").write_text(GOOD_REPORT)
    past = time.time() - 3600
    os.utime(tmp_path / "r.xml", (past, past))
    output = _sh_report_run(tmp_path, "echo 'FAILED other'; exit 1")
    assert "the test report r.xml was not written by this run" in output
    # written before the run started, even a moment before: not this run's either
    (tmp_path / "r.xml").write_text(GOOD_REPORT)
    run = run_test_command("exit 1", cwd=tmp_path, timeout_s=60, report="r.xml")
    assert run.failing_tests == []
    assert "was not written by this run" in run.output


def test_a_huge_report_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testreport, "MAX_REPORT_BYTES", 100)
    script = f"printf '%s' '{GOOD_REPORT}' > r.xml; exit 1"
    output = _sh_report_run(tmp_path, script)
    assert "bytes, over the 100 bytes loopctl reads" in output


def test_a_glob_reads_every_report_this_run_wrote(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "TEST-old.xml").write_text(GOOD_REPORT.replace('"t"', '"old"'))
    past = time.time() - 3600
    os.utime(tmp_path / "out" / "TEST-old.xml", (past, past))
    other = GOOD_REPORT.replace('"t"', '"u"')
    script = (
        f"printf '%s' '{GOOD_REPORT}' > out/TEST-a.xml; "
        f"printf '%s' '{other}' > out/TEST-b.xml; exit 1"
    )
    run = run_test_command(script, cwd=tmp_path, timeout_s=60, report="out/TEST-*.xml")
    assert run.failing_tests == ["c.t", "c.u"]
    assert (run.passed_count, run.failed_count) == (0, 2)
    assert "loopctl:" not in run.output  # the old file is another run's: nothing to say


def test_a_report_without_failures_leaves_the_reason_to_the_output(tmp_path: Path) -> None:
    # the tests passed, a later step failed: the report says nothing about why
    passing = '<testsuites><testcase classname="c" name="t"/></testsuites>'
    script = f"printf '%s' '{passing}' > r.xml; echo 'error: lint found 3 problems'; exit 1"
    run = run_test_command(script, cwd=tmp_path, timeout_s=60, report="r.xml")
    assert run.error_lines == ["error: lint found 3 problems"]
    assert (run.passed_count, run.failed_count) == (1, 0)


def test_read_results_never_raises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(testreport, "read_junit", broken)
    (tmp_path / "r.xml").write_text(GOOD_REPORT)
    plan = testreport.ReportPlan(command="x", pattern="r.xml", cwd=tmp_path)
    found, note = read_results("FAILED t.py::x - boom\n1 failed in 0.1s\n", plan)
    assert found.failing_tests == ["t.py::x"]
    assert "not read (RuntimeError)" in note


# --- through the engine -------------------------------------------------------------------------

CALC_TEST = (
    "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n\n\n"
    "def test_zero():\n    assert add(0, 0) == 0\n"
)


@pytest.mark.slow
@pytest.mark.parametrize(("setting", "failing"), [(None, ["test_calc.py::test_add"]), ("off", [])])
def test_a_loop_reads_the_report_it_asks_pytest_for(
    loopctl_project: Project, setting: str | None, failing: list[str]
) -> None:
    from calc_loop import FIX, IDLE, run

    loopctl_project.write("calc.py", "def add(a, b):\n    return a - b\n")
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("buggy calc")
    config = {} if setting is None else {"test_report": setting}
    result = run(
        loopctl_project,
        [IDLE, [FIX]],
        # the output names no failing test (-rN --tb=no): only the report does
        test_cmd=f"{PY} -m pytest -p no:cacheprovider -q -rN --tb=no",
        config=config,
        env=PYTEST_ENV,
    )
    assert result.status == "complete"
    assert result.records[0]["failing_tests"] == failing
    assert not list(result.state_dir.rglob("*.xml"))  # never kept: it holds unmasked output
    assert result.events_of("tests.start")[0]["command"].endswith("-rN --tb=no")


def test_test_report_must_not_be_empty() -> None:
    from loopctl.config.errors import InvalidFields
    from loopctl.config.schema import LoopctlConfig

    with pytest.raises(InvalidFields, match="test_report"):
        LoopctlConfig(test_report=" ")


def test_a_pytest_run_that_writes_no_report_says_so(tmp_path: Path) -> None:
    # a usage error: pytest stops before writing the report loopctl asked for
    command = f"{PY} -m pytest -p no:cacheprovider --no-such-option"
    run = run_test_command(command, cwd=tmp_path, timeout_s=60, env=PYTEST_ENV, ask_pytest=True)
    assert run.exit_code == 4
    assert run.output.rstrip("\n").splitlines()[-1] == (
        "loopctl: no test report at the --junitxml path loopctl added after the run: "
        "the results come from the output"
    )
