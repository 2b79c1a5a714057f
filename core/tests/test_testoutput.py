from __future__ import annotations

import json
import random
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.testoutput import _parse, parse_test_output

DATA = Path(__file__).parent / "data" / "test-output"
CAPTURES = sorted(path.name.removesuffix(".txt") for path in DATA.glob("*.txt"))


def _sample(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def test_captures_exist() -> None:
    # generate.py wrote these from real tool runs; losing them silently would void the tests below
    assert {"pytest_default", "unittest_verbose", "node_tap", "cargo_test_failure", "mypy"} <= set(
        CAPTURES
    )


@pytest.mark.parametrize("case", CAPTURES)
def test_real_captured_output(case: str) -> None:
    expected = json.loads((DATA / f"{case}.expected.json").read_text())
    found = parse_test_output((DATA / f"{case}.txt").read_text())
    assert found.runner == expected["runner"]
    for substring in expected["error_substrings"]:
        assert any(substring in line for line in found.error_lines), (substring, found.error_lines)
    assert found.failing_tests == expected["failing_tests"]
    assert found.passed_count == expected["passed_count"]
    assert found.failed_count == expected["failed_count"]


def test_pytest_output_keeps_decisive_lines_in_order() -> None:
    found = parse_test_output((DATA / "pytest_default.txt").read_text())
    lines = found.error_lines
    assert lines.index("E       assert 5 == 4") < lines.index(
        "tests/test_calc.py:7: AssertionError"
    )
    assert lines[-1].startswith("FAILED tests/test_strings.py::TestWords::test_split")
    # source lines, the session header and the final tally are not error lines
    assert not any("def test_add" in line or "test session starts" in line for line in lines)
    assert not any("passed in" in line for line in lines)


# --- hand-written go samples (go_test.txt and go_test_json*.txt are real captures) ------------

GO_PLAIN = _sample(
    """
    --- FAIL: TestAdd (0.00s)
        calc_test.go:7: Add(2, 2) = 5, want 4
    --- FAIL: TestTable (0.00s)
        --- FAIL: TestTable/two (0.00s)
            calc_test.go:21: Add(2, 1) = 4, want 3
    FAIL
    FAIL\texample.com/calc\t0.002s
    FAIL
    """
)

GO_VERBOSE = _sample(
    """
    === RUN   TestAdd
        calc_test.go:7: Add(2, 2) = 5, want 4
    --- FAIL: TestAdd (0.00s)
    === RUN   TestOk
    --- PASS: TestOk (0.00s)
    === RUN   TestTable
    === RUN   TestTable/one
    === RUN   TestTable/two
        calc_test.go:21: Add(2, 1) = 4, want 3
    --- FAIL: TestTable (0.00s)
        --- PASS: TestTable/one (0.00s)
        --- FAIL: TestTable/two (0.00s)
    FAIL
    exit status 1
    FAIL\texample.com/calc\t0.002s
    """
)

GO_BUILD = _sample(
    """
    # example.com/calc [example.com/calc.test]
    ./calc.go:3:9: cannot use "x" (untyped string constant) as int value in return statement
    FAIL\texample.com/calc [build failed]
    FAIL
    """
)

GO_PANIC = _sample(
    """
    --- FAIL: TestDiv (0.00s)
    panic: runtime error: integer divide by zero [recovered]
    \tpanic: runtime error: integer divide by zero

    goroutine 7 [running]:
    testing.tRunner.func1.2({0x5176a0, 0x5e0ae0})
    \t/usr/local/go/src/testing/testing.go:1545 +0x238
    panic({0x5176a0?, 0x5e0ae0?})
    \t/usr/local/go/src/runtime/panic.go:914 +0x21f
    example.com/calc.Div(...)
    \t/home/u/calc/calc.go:12
    example.com/calc.TestDiv(0x0?)
    \t/home/u/calc/calc_test.go:30 +0x1d
    FAIL\texample.com/calc\t0.003s
    """
)


def test_go_plain() -> None:
    found = parse_test_output(GO_PLAIN)
    assert found.runner == "go"
    assert found.failing_tests == ["TestAdd", "TestTable", "TestTable/two"]
    assert "calc_test.go:7: Add(2, 2) = 5, want 4" in found.error_lines
    assert "calc_test.go:21: Add(2, 1) = 4, want 3" in found.error_lines
    assert "--- FAIL: TestAdd" in found.error_lines
    assert (found.passed_count, found.failed_count) == (None, 2)


def test_go_verbose_attributes_early_logs_and_counts_passes() -> None:
    found = parse_test_output(GO_VERBOSE)
    assert found.failing_tests == ["TestAdd", "TestTable", "TestTable/two"]
    assert found.error_lines[:2] == ["--- FAIL: TestAdd", "calc_test.go:7: Add(2, 2) = 5, want 4"]
    assert (found.passed_count, found.failed_count) == (1, 2)


def test_go_build_failure_and_panic() -> None:
    build = parse_test_output(GO_BUILD)
    assert build.runner == "go"
    assert build.error_lines[0].startswith("./calc.go:3:9: cannot use")
    panic = parse_test_output(GO_PANIC)
    assert panic.failing_tests == ["TestDiv"]
    assert "panic: runtime error: integer divide by zero [recovered]" in panic.error_lines
    assert "/home/u/calc/calc.go:12" in panic.error_lines
    assert not any("testing.go" in line for line in panic.error_lines)


def test_unittest_before_python_3_11_and_import_failures() -> None:
    output = _sample(
        """
        ======================================================================
        ERROR: test_other (unittest.loader._FailedTest)
        ----------------------------------------------------------------------
        ImportError: Failed to import test module: test_other
        Traceback (most recent call last):
          File "/x/test_other.py", line 1, in <module>
            import nope
        ModuleNotFoundError: No module named 'nope'


        ======================================================================
        FAIL: test_add (test_calc.CalcTest)
        ----------------------------------------------------------------------
        Traceback (most recent call last):
          File "/x/test_calc.py", line 8, in test_add
            self.assertEqual(add(2, 2), 4)
        AssertionError: 5 != 4

        ----------------------------------------------------------------------
        Ran 2 tests in 0.001s

        FAILED (failures=1, errors=1)
        """
    )
    found = parse_test_output(output)
    assert found.runner == "unittest"
    assert found.failing_tests == ["test_other", "test_calc.CalcTest.test_add"]
    assert "ModuleNotFoundError: No module named 'nope'" in found.error_lines
    assert 'File "/x/test_calc.py", line 8, in test_add' in found.error_lines
    assert (found.passed_count, found.failed_count) == (0, 2)


def test_pytest_xdist_and_verbose_ids_without_summary() -> None:
    output = _sample(
        """
        ============================= test session starts ==============================
        [gw1] [ 50%] FAILED tests/test_a.py::test_b
        [gw0] [100%] PASSED tests/test_a.py::test_c
        ============================== 1 failed, 1 passed in 1.20s ===============
        """
    )
    found = parse_test_output(output)
    assert found.failing_tests == ["tests/test_a.py::test_b"]
    assert (found.passed_count, found.failed_count) == (1, 1)


def test_passing_runner_then_a_failing_step_falls_back_to_generic_lines() -> None:
    output = _sample(
        """
        ============================= test session starts ==============================
        tests/test_log.py ..                                                     [100%]
        ============================== 2 passed in 0.01s ===============================
        FAIL Required test coverage of 90% not reached. Total coverage: 85.00%
        """
    )
    found = parse_test_output(output)
    assert found.runner == "pytest"
    assert found.error_lines == [
        "FAIL Required test coverage of 90% not reached. Total coverage: 85.00%"
    ]
    assert (found.passed_count, found.failed_count) == (2, 0)


def test_pytest_captured_output_and_warnings_are_not_errors() -> None:
    output = _sample(
        """
        =================================== FAILURES ===================================
        ___________________________________ test_a ____________________________________
        >       assert f() == 2
        E       assert 1 == 2
        tests/test_a.py:3: AssertionError
        ----------------------------- Captured log call ------------------------------
        ERROR    root:app.py:9 harmless noise
        E   not an error line either
        =============================== warnings summary ===============================
        tests/test_a.py::test_a
        tests/test_a.py:1: DeprecationWarning: old
        =========================== short test summary info ============================
        FAILED tests/test_a.py::test_a - assert 1 == 2
        ============================== 1 failed in 0.01s ===============================
        """
    )
    found = parse_test_output(output)
    assert found.error_lines == [
        "E       assert 1 == 2",
        "tests/test_a.py:3: AssertionError",
        "FAILED tests/test_a.py::test_a - assert 1 == 2",
    ]


def test_old_rust_panic_format() -> None:
    output = _sample(
        """
        running 1 test
        test tests::it_works ... FAILED

        thread 'tests::it_works' panicked at 'called `Option::unwrap()` on a `None` value', src/lib.rs:4:37

        test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out
        """
    )
    found = parse_test_output(output)
    assert found.runner == "cargo"
    assert found.failing_tests == ["tests::it_works"]
    assert found.error_lines == [
        "thread 'tests::it_works' panicked at 'called `Option::unwrap()` on a `None` value', "
        "src/lib.rs:4:37"
    ]
    assert (found.passed_count, found.failed_count) == (0, 1)


def test_mypy_success_and_tsc_without_location() -> None:
    ok = parse_test_output("Success: no issues found in 3 source files\n")
    assert (ok.runner, ok.failed_count, ok.error_lines) == ("mypy", 0, [])
    tsc = parse_test_output("error TS5023: Unknown compiler option 'strictest'.\n")
    assert tsc.runner == "tsc"
    assert tsc.error_lines == ["error TS5023: Unknown compiler option 'strictest'."]


def test_python_traceback_fallback() -> None:
    output = _sample(
        """
        starting
        Traceback (most recent call last):
          File "/app/site-packages/lib.py", line 3, in helper
            raise KeyError("k")
        KeyError: 'k'

        During handling of the above exception, another exception occurred:

        Traceback (most recent call last):
          File "/app/main.py", line 9, in <module>
            main()
          File "/usr/lib/python3.12/site-packages/lib.py", line 5, in helper
            raise ValueError("bad value")
        ValueError: bad value
        """
    )
    found = parse_test_output(output)
    assert found.runner == "python"
    assert found.error_lines == [
        'File "/app/site-packages/lib.py", line 3, in helper',
        "KeyError: 'k'",
        'File "/app/main.py", line 9, in <module>',  # the last frame outside libraries
        "ValueError: bad value",
    ]


def test_generic_fallback() -> None:
    output = _sample(
        """
        building...
        ld: fatal: symbol `foo` not found
        Done with 0 errors in the parser
        npm ERR! code ELIFECYCLE
        make: *** [Makefile:3: test] Error 2
        RuntimeException: the widget broke
        """
    )
    found = parse_test_output(output)
    assert found.runner == "generic"
    assert found.error_lines == [
        "ld: fatal: symbol `foo` not found",
        "RuntimeException: the widget broke",
    ]
    assert (found.failing_tests, found.passed_count, found.failed_count) == ([], None, None)


def test_colours_and_crlf_are_handled() -> None:
    raw = (DATA / "pytest_quiet_short.txt").read_text()
    coloured = raw.replace("FAILED", "\x1b[31mFAILED\x1b[0m").replace("E   ", "\x1b[31mE   ")
    found = parse_test_output(coloured.replace("\n", "\r\n"))
    assert found.failing_tests == parse_test_output(raw).failing_tests
    assert found.error_lines == parse_test_output(raw).error_lines


def test_empty_output() -> None:
    assert parse_test_output("") == parse_test_output("\n\n") == parse_test_output("all good\n")
    assert parse_test_output("").runner == "generic"
    assert parse_test_output("").error_lines == []


# --- bounds -------------------------------------------------------------------------------------


def _many_failures(count: int, diff_lines: int) -> str:
    blocks = ["=================================== FAILURES ==================================="]
    for i in range(count):
        blocks.append(
            f"_________________________________ test_{i} _________________________________"
        )
        blocks.append(f">       assert make({i}) == expected")
        blocks.append(f"E       AssertionError: assert 'value {i}' == 'other'")
        blocks.extend(f"E         diff line {i}.{j}" for j in range(diff_lines))
        blocks.append(f"tests/test_many.py:{i + 10}: AssertionError")
    blocks.append(
        "=========================== short test summary info ============================"
    )
    blocks.extend(f"FAILED tests/test_many.py::test_{i} - AssertionError" for i in range(count))
    blocks.append(
        f"============================== {count} failed in 0.50s ==========================="
    )
    return "\n".join(blocks) + "\n"


def test_bound_keeps_headlines_then_locations_in_output_order() -> None:
    output = _many_failures(10, 10)
    everything = parse_test_output(output, max_lines=10_000).error_lines
    bounded = parse_test_output(output, max_lines=40).error_lines
    assert len(everything) == 10 * 13
    assert len(bounded) == 40
    assert bounded == [line for line in everything if line in bounded]  # order kept
    kept = set(bounded)
    assert all(f"FAILED tests/test_many.py::test_{i} - AssertionError" in kept for i in range(10))
    assert all(f"tests/test_many.py:{i + 10}: AssertionError" in kept for i in range(10))
    assert sum("diff line" in line for line in bounded) == 10
    assert parse_test_output(output, max_lines=0).error_lines == []


def test_lines_are_truncated_and_deduplicated() -> None:
    long_message = "x" * 2000
    output = f"error: {long_message}\nerror: {long_message}\nerror: short\n"
    found = parse_test_output(output)
    assert [len(line) for line in found.error_lines] == [500, len("error: short")]


def test_detail_lines_are_capped_per_failure() -> None:
    found = parse_test_output(_many_failures(1, 50), max_lines=1000)
    assert sum("diff line" in line for line in found.error_lines) == 10


# --- size (the speed is measured by benchmarks/bench_testoutput.py) ---------------------------


@pytest.mark.slow
def test_the_failures_at_the_end_of_ten_megabytes_of_pytest_output_are_found() -> None:
    block = "".join(
        f"tests/test_mod_{i % 97}.py::test_case_{i} PASSED{' ' * 30}[ {i % 100:2d}%]\n"
        for i in range(1000)
    )
    passing = block * 135
    output = passing + _many_failures(30, 3)
    assert len(output) > 10_000_000
    found = parse_test_output(output)
    assert found.runner == "pytest"
    assert len(found.failing_tests) == 30
    assert found.failing_tests[-1] == "tests/test_many.py::test_29"


@pytest.mark.slow
def test_ten_megabytes_of_noise_and_a_huge_line_are_read_without_a_failure() -> None:
    rng = random.Random(7)
    vocabulary = ["info", "debug", "GET", "/api/x", "200", "ok", "ms", "user=42", "error:", "fail"]
    distinct = [" ".join(rng.choice(vocabulary) for _ in range(12)) for _ in range(500)]
    noise = "\n".join(distinct * 240)
    # markers of every runner, so that every extractor scans the whole log
    markers = "test session starts\nRan 1 test in 0.1s\nTest Suites:\nTAP version 13\n"
    markers += "test result: ok.\n--- FAIL: TestX (0.00s)\nerror TS1: x\nx.py:1: error: y\n"
    output = markers + noise + "\n" + "E" * 3_000_000 + "\n"
    assert len(output) > 10_000_000
    found = parse_test_output(output)
    assert found.failing_tests == ["TestX"]  # the one failure among the markers
    assert all(len(line) <= 500 for line in found.error_lines)  # the huge line is cut


# --- never raises -------------------------------------------------------------------------------

_REAL_LINES = (
    [line for case in CAPTURES for line in (DATA / f"{case}.txt").read_text().splitlines()]
    + GO_VERBOSE.splitlines()
    + GO_PANIC.splitlines()
)

garbage_lines = st.one_of(
    st.sampled_from(_REAL_LINES),
    st.text(max_size=80),
    st.text(alphabet="\x00\x1b[]m:()-_=E>|^● ✖▶ℹ\t 0123456789", max_size=40),
)
shuffled_logs = st.lists(garbage_lines, max_size=60).map("\n".join)


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), shuffled_logs), st.integers(-1, 60))
def test_extract_never_raises_and_respects_bounds(output: str, max_lines: int) -> None:
    found = _parse(output, max_lines)  # the unguarded core: a bug must show up here
    assert len(found.error_lines) <= max(max_lines, 0)
    assert all(len(line) <= 500 for line in found.error_lines)
    assert len(set(found.error_lines)) == len(found.error_lines)
    assert len(set(found.failing_tests)) == len(found.failing_tests)
    assert parse_test_output(output, max_lines=max_lines) == found


def test_extract_survives_nul_bytes_and_huge_lines() -> None:
    output = "\x00" * 1000 + "\n" + "FAILED " + "a::" * 500_000 + "\nerror: \x00 boom\n"
    found = parse_test_output(output)
    assert "error: \x00 boom" in found.error_lines
