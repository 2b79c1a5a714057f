"""The signatures, the scanner, the own-code checks, arbitration, the rerun command, and
property tests: nothing fed by outside input may raise."""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import pytest
from failure_classifier_testkit import make_state, record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl import TestRun
from loopctl_failure_classifier import rules
from loopctl_failure_classifier.arbitration import arbitrate, classify, run_custom
from loopctl_failure_classifier.evidence import from_logs, from_state_dir
from loopctl_failure_classifier.locality import Locality
from loopctl_failure_classifier.model import Classification, Evidence, FailureMode
from loopctl_failure_classifier.rerun import confirmation, rerun_command

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize(
    ("line", "rule"),
    [
        ("E   ModuleNotFoundError: No module named 'httpx'", "python.module_not_found"),
        ("ImportError: No module named yaml", "python.module_not_found"),
        ("ERROR: No matching distribution found for nothing==1.0", "pip.no_matching_distribution"),
        (
            "ERROR: Cannot install a==1 and a==2 because these package versions have conflicting dependencies.",
            "pip.conflicting_dependencies",
        ),
        ("  × No solution found when resolving dependencies:", "uv.no_solution"),
        ("SolverProblemError", "poetry.solver"),
        ("Error: Cannot find module 'lodash'", "node.cannot_find_module"),
        (
            "src/a.ts(1,15): error TS2307: Cannot find module 'zod' or its corresponding type declarations.",
            "node.cannot_find_module",
        ),
        (
            "Error [ERR_MODULE_NOT_FOUND]: Cannot find package 'chalk' imported from /a/main.js",
            "node.cannot_find_package",
        ),
        ("npm error code E404", "npm.error_code"),
        ("npm ERR! code ERESOLVE", "npm.error_code"),
        ("npm error code ETARGET", "npm.error_code"),
        ("ERR_PNPM_NO_MATCHING_VERSION  No matching version found for left-pad@99", "pnpm.install"),
        ("error: no matching package named `serde` found", "cargo.no_matching_package"),
        ("  |     ^^^^ use of unresolved module or unlinked crate `rand`", "rust.unlinked_crate"),
        (
            "main.go:5:2: no required module provides package github.com/pkg/errors; to add it:",
            "go.no_required_module",
        ),
        (
            "App.java:1: error: package org.apache.commons.lang3 does not exist",
            "javac.package_missing",
        ),
        (
            "[ERROR] Failed to execute goal on project x: Could not resolve dependencies for project a:b:jar:1",
            "maven.resolve",
        ),
        ("sh: 1: jest: not found", "shell.command_not_found"),
        (
            "\x1b[31mERROR: No matching distribution found for x\x1b[0m",
            "pip.no_matching_distribution",
        ),
    ],
)
def test_each_signature_is_recognised(line: str, rule: str) -> None:
    hits = rules.scan("", [line])
    assert [h.rule.name for h in hits] == [rule]


@pytest.mark.parametrize(
    "line",
    [
        "E       AssertionError: assert \"Cannot find module 'x'\" == ''",
        "+ 'Cannot find module \\'lodash\\''",
        "npm error code 1",
        "npm ERR! code ELIFECYCLE",
        "E   assert 'No module named x' in message",
        "npm warn ERESOLVE overriding peer dependency",
        "FAILED tests/test_x.py::test_resolution - AssertionError",
    ],
)
def test_ordinary_failure_lines_are_not_dependency_signatures(line: str) -> None:
    assert rules.scan(line + "\n", [line]) == []


def test_the_scanner_finds_a_signature_deep_in_a_noisy_log() -> None:
    noise = "tests/test_mod.py::test_module_%d PASSED\n"  # "odule" on every line: a noisy anchor
    text = (
        "".join(noise % i for i in range(50_000))
        + "E   ModuleNotFoundError: No module named 'zz'\n"
    )
    hits = rules.scan(text)
    assert [h.pkg for h in hits] == ["zz"]


def test_locality_tells_the_projects_own_code_from_packages(tmp_path: Path) -> None:
    (tmp_path / "billing").mkdir()
    (tmp_path / "billing" / "__init__.py").write_text("")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "routes.ts").write_text("")
    (tmp_path / "go.mod").write_text("module example.com/shop\n")
    (tmp_path / "node_modules" / "left").mkdir(parents=True)
    (tmp_path / "node_modules" / "left" / "index.py").write_text("")
    where = Locality(tmp_path)
    assert where.is_own("python_module", "billing.rates")[0]
    assert not where.is_own("python_module", "requests")[0]
    assert not where.is_own("python_module", "left")[0]  # vendored directories are skipped
    assert where.is_own("python_module", "biling")[0]  # a typo of the project's module
    assert where.is_own("node_module", "./util")[0]
    assert where.is_own("node_module", "@/x")[0]
    assert where.is_own("node_module", "routes")[0]
    assert not where.is_own("node_module", "lodash")[0]
    assert where.is_own("go_package", "example.com/shop/internal/db")[0]
    assert not where.is_own("go_package", "github.com/pkg/errors")[0]
    assert where.is_own("rust_crate", "crate")[0]
    assert not where.is_own("rust_crate", "rand")[0]
    assert where.is_own("command", "./run.sh")[0]
    assert not where.is_own("command", "jest")[0]
    assert not Locality(None).is_own("python_module", "x")[0]


#: What is missing, in the words of tools the rules name nowhere (issue 27's fifth round):
#: each situation's rule recognises every tool's sentence for it.
SITUATIONS = [
    # a module, library or package
    ("lua5.4: main.lua:1: module 'lpeg' not found:", "module.not_found", "lpeg"),
    ('Error: Library "yojson" not found.', "module.not_found", "yojson"),
    (
        'meson.build:2:0: ERROR: Dependency "libzstd" not found, tried pkgconfig and cmake',
        "module.not_found",
        "libzstd",
    ),
    ("Package 'libzstd', required by 'virtual:world', not found", "module.not_found", "libzstd"),
    (
        "! Installing the dependencies failed: Module 'Text::Table::Tiny' is not installed",
        "module.not_installed",
        "Text::Table::Tiny",
    ),
    (
        "Can't locate YAML/Tiny.pm in @INC (you may need to install the YAML::Tiny module)",
        "module.cannot_locate",
        "YAML/Tiny.pm",
    ),
    (
        "Fatal Error: Cannot open module file \u2018json_module.mod\u2019 for reading at (1)",
        "module.file_missing",
        "json_module",
    ),
    (
        '{"init terminating in do_boot",{undef,[{jsx,encode,[],[]}]}}',
        "module.undefined_at_run_time",
        "jsx",
    ),
    # a package manager that has no such package, or cannot fetch it
    (
        'error Couldn\'t find any versions for "left-pad" that matches "^1.3.0" in our cache',
        "package.none_matching",
        "left-pad",
    ),
    (
        "! Couldn't find module or a distribution Text::Table::Tiny (1.02)",
        "package.none_matching",
        "Text::Table::Tiny",
    ),
    (
        '===> Failed to fetch and copy dep: {git,"/x/jsx.git",{tag,"v3.1.0"}}',
        "package.fetch_failed",
        None,
    ),
    ("Error: No results matching query were found for Lua 5.4.", "package.no_results", None),
    (
        './configure: line 3084: `AX_CHECK_COMPILE_FLAG(-Wall, CFLAGS="$CFLAGS -Wall")\'',
        "build.macro_unexpanded",
        "AX_CHECK_COMPILE_FLAG",
    ),
    # (the held-out check's situations, in other words)
    ("can't find package tdom", "module.cannot_find", "tdom"),
    (
        'Exception in thread "main" java.lang.UnsatisfiedLinkError: no rocksdbjni in '
        "java.library.path: /usr/lib",
        "library.not_on_path",
        "rocksdbjni",
    ),
    (
        "Error: /usr/lib/sqlite3/pcre.so: cannot open shared object file: No such file",
        "library.shared_object_path",
        "/usr/lib/sqlite3/pcre.so",
    ),
    (
        'version conflict for package "http": have 2.9.5, need 3',
        "version.conflict_have_need",
        "http",
    ),
    # a toolchain or runtime too old
    (
        "Perl v5.99.0 required--this is only v5.36.0, stopped at a.pl line 1.",
        "version.required_only",
        "Perl",
    ),
    (
        "meson.build:1:0: ERROR: Meson version is 1.0.1 but project requires >=1.9.0",
        "version.runtime_mismatch",
        "Meson",
    ),
    (
        "Error: Version 3.11 of the dune language is not supported.",
        "version.language_unsupported",
        "dune",
    ),
    # a program or a library at run time
    (
        "./main: error while loading shared libraries: libcalc.so: cannot open shared object file: No such file or directory",
        "system.shared_library",
        "libcalc.so",
    ),
    (
        "check.sh: 2: /opt/tools/bin/fmtcheck: Permission denied",
        "program.not_executable",
        "/opt/tools/bin/fmtcheck",
    ),
    (
        "run.sh: line 4: /opt/tools/bin/lint: Permission denied",
        "program.not_executable",
        "/opt/tools/bin/lint",
    ),
]


@pytest.mark.parametrize(("line", "rule", "pkg"), SITUATIONS)
def test_what_is_missing_is_recognised_in_any_tools_words(
    line: str, rule: str, pkg: str | None
) -> None:
    hits = rules.scan(line + "\n")
    assert [(h.rule.name, h.pkg) for h in hits] == [(rule, pkg)]


@pytest.mark.parametrize(
    "line",
    [
        "not ok 1 - module 'app' not found in the registry fixture",  # a test's own words
        "E   assert 'Package \"x\" not found' == ''",
        "E       AssertionError: Library 'x' not found",
        "cat: /etc/shadow: Permission denied",  # a file a tool reads, not a program run
        "check.sh: 2: ./scripts/lint.sh: Permission denied",  # the project's own script
        "lua5.4: main.lua:2: attempt to index a nil value (field 'cache')",
        '{"init terminating in do_boot",{badarith,[{erlang,\'+\',[3,"0"],[]}]}}',
    ],
)
def test_the_situation_rules_leave_ordinary_failure_lines_alone(line: str) -> None:
    hits = rules.scan(line + "\n")
    assert [h for h in hits if h.rule.locality not in ("module", "path")] == []
    where = Locality(Path("/nonexistent-project"))
    assert all(where.is_own(h.rule.locality or "", h.pkg or "", h.line)[0] for h in hits), hits


def test_whose_module_it_is_comes_from_the_projects_files(tmp_path: Path) -> None:
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "format.lua").write_text("")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "calc.erl").write_text("")
    (tmp_path / "lib" / "MyApp").mkdir(parents=True)
    (tmp_path / "lib" / "MyApp" / "Util.pm").write_text("")
    (tmp_path / "geometry.f90").write_text("")
    where = Locality(tmp_path)
    assert where.is_own("module", "app.formatting")[0]  # under the project's own app/
    assert where.is_own("module", "calc")[0]  # src/calc.erl
    assert where.is_own("module", "MyApp/Util.pm")[0]
    assert where.is_own("module", "MyApp::Util")[0]
    assert where.is_own("module", "geometry")[0]  # geometry.f90
    for library in (
        "lpeg",
        "jsx",
        "YAML/Tiny.pm",
        "Text::Table::Tiny",
        "json_module",
        "yojson",
    ):
        assert not where.is_own("module", library)[0], library
    assert where.is_own("path", "./scripts/lint.sh")[0]
    assert where.is_own("path", str(tmp_path / "bin" / "lint"))[0]
    assert not where.is_own("path", "/opt/tools/bin/lint")[0]


def test_arbitration_orders_by_priority_then_confidence_then_name() -> None:
    candidates = [
        Classification("code_error", 0.6, detector="builtin.default", priority=0),
        Classification("lint_failure", 0.7, detector="zeta", priority=250),
        Classification("lint_failure", 0.9, detector="beta", priority=250),
        Classification("test_flakiness", 0.99, detector="builtin.flakiness", priority=200),
    ]
    verdict = arbitrate(candidates)
    assert (verdict.mode, verdict.detector) == ("lint_failure", "beta")
    tie = [
        Classification("a_mode", 0.8, detector="zeta", priority=250),
        Classification("b_mode", 0.8, detector="alpha", priority=250),
    ]
    assert arbitrate(tie).detector == arbitrate(list(reversed(tie))).detector == "alpha"


def test_custom_answers_are_validated_and_bad_ones_reported() -> None:
    def good(evidence: Evidence) -> Any:
        return {"mode": "lint_failure", "confidence": 0.8, "evidence": ["E501"]}

    def low(evidence: Evidence) -> Any:
        return Classification("lint_failure", 0.2)

    def weird(evidence: Evidence) -> Any:
        return [{"mode": "Bad Mode", "confidence": 1}, {"mode": "x_y", "confidence": 7}, 42]

    def boom(evidence: Evidence) -> Any:
        raise ValueError("nope")

    found, rejected = run_custom(
        [("good", good), ("low", low), ("weird", weird), ("boom", boom)],
        Evidence(),
        min_confidence=0.5,
    )
    assert [(c.mode, c.detector) for c in found] == [("lint_failure", "good")]
    assert len(rejected) == 4
    assert rejected[-1].startswith("boom: raised ValueError")


def test_custom_mode_declarations_are_validated() -> None:
    mode, _why = FailureMode.coerce(
        "lint_failure", {"action": "autofix", "max_recoveries": 2}, source="x"
    )
    assert mode is not None
    assert mode.source == "x"
    assert mode.strategy().action == "autofix"
    assert FailureMode.coerce("lint", {"colour": "red"}, source="x")[0] is None
    assert FailureMode.coerce("Bad", {}, source="x")[0] is None
    assert FailureMode.coerce("lint", "nope", source="x")[0] is None


def test_the_rerun_command_targets_the_failing_tests() -> None:
    assert rerun_command("pytest -q", ["t.py::a"])[0] == "pytest -q --lf"
    assert rerun_command("uv run python -m pytest", ["t.py::a"])[0] == (
        "uv run python -m pytest --lf"
    )
    assert rerun_command("pytest -q --lf", ["t.py::a"])[0] == "pytest -q --lf"
    assert rerun_command("python -m unittest discover -q", ["m.T.a"])[0] == (
        "python -m unittest m.T.a"
    )
    assert rerun_command("pytest", ["a b"], "pytest {tests}")[0] == "pytest 'a b'"
    assert rerun_command("pytest", [], "pytest {tests}") is None
    assert rerun_command("./check.sh", ["x"], "./check.sh --only-failed")[0] == (
        "./check.sh --only-failed"
    )


@pytest.mark.parametrize(
    "command",
    [
        "sh tests.sh",  # a script, whatever its output looks like
        "./run_pytest.sh",
        "echo pytest",
        "cd x && pytest -q",  # --lf would land on the wrong command
        "python -m unittest discover -s tests",  # the ids are relative to tests/
        "npm test",  # no way to narrow it: a whole second run proves little
        "cargo test",
        "",
    ],
)
def test_no_rerun_where_the_command_cannot_be_narrowed(command: str) -> None:
    assert rerun_command(command, ["tests/test_x.py::test_x"]) is None


def test_a_rerun_that_ran_nothing_confirms_nothing() -> None:
    nothing = TestRun("pytest --lf", 5, output="no tests ran in 0.01s\n")
    assert not confirmation(nothing).ran_tests
    ran = TestRun("pytest --lf", 0, output="tests/t.py .\n1 passed in 0.01s\n")
    assert confirmation(ran).ran_tests
    assert confirmation(ran).passed


def test_whether_a_rerun_ran_tests_comes_from_the_test_runs_counts() -> None:
    """For a runner that reports counts, the TestRun's counts decide (the output is not parsed
    again): none counted is no confirmation, whatever the output says."""
    output = "tests/t.py .\n1 passed in 0.01s\n"
    counted = TestRun("pytest --lf", 0, output=output, runner="pytest", passed_count=1)
    assert confirmation(counted).ran_tests
    failed = TestRun("pytest --lf", 1, output=output, runner="pytest", failed_count=2)
    assert confirmation(failed).ran_tests
    uncounted = TestRun("pytest --lf", 0, output=output, runner="pytest")
    assert not confirmation(uncounted).ran_tests
    zero = TestRun("pytest --lf", 0, output=output, runner="pytest", passed_count=0, failed_count=0)
    assert not confirmation(zero).ran_tests


# --- property tests: outside input never raises ------------------------------------------------------

lines = st.text(alphabet=string.printable + "éλ→\x1b", max_size=120)
logs = st.lists(lines, max_size=30).map("\n".join)
keys = st.sampled_from(["mode", "confidence", "evidence", "priority", "detector", "x"])
values = st.one_of(
    st.none(), st.integers(), st.floats(), st.text(max_size=20), st.lists(st.text(max_size=5))
)


@FAST
@given(text=logs, extra=st.lists(lines, max_size=5))
def test_scanning_never_raises(text: str, extra: list[str]) -> None:
    for hit in rules.scan(text, extra):
        assert hit.line


@FAST
@given(
    texts=st.lists(logs, max_size=4),
    same=st.booleans(),
    rerun=st.one_of(st.none(), logs),
    message=lines,
)
def test_classifying_arbitrary_logs_never_raises(
    texts: list[str], same: bool, rerun: str | None, message: str
) -> None:
    evidence = from_logs(texts, same_code=same, rerun_log=rerun, agent_message=message)
    verdict = classify(evidence)
    assert verdict.mode
    assert 0.0 <= verdict.confidence <= 1.0
    assert verdict.evidence


@FAST
@given(answers=st.lists(st.dictionaries(keys, values, max_size=5), max_size=4))
def test_arbitrary_custom_answers_never_raise(answers: list[dict[str, Any]]) -> None:
    found, _ = run_custom([("p", lambda evidence: answers)], Evidence(), min_confidence=0.0)
    for classification in found:
        assert 0.0 <= classification.confidence <= 1.0


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    iterations=st.text(max_size=300),
    summary=st.text(max_size=200),
    events=st.text(max_size=200),
    loop_state=st.text(max_size=200),
)
def test_classifying_a_garbled_state_dir_never_raises(
    tmp_path_factory: pytest.TempPathFactory,
    iterations: str,
    summary: str,
    events: str,
    loop_state: str,
) -> None:
    state = tmp_path_factory.mktemp("state")
    (state / "iterations.jsonl").write_text(iterations, encoding="utf-8")
    (state / "error-summary.json").write_text(summary, encoding="utf-8")
    (state / "events.jsonl").write_text(events, encoding="utf-8")
    (state / "loop-state.md").write_text(loop_state, encoding="utf-8")
    evidence = from_state_dir(state)
    assert classify(evidence).mode


def test_skipped_iteration_lines_are_named_in_the_problems(tmp_path: Path) -> None:
    state = make_state(tmp_path, [record(1), record(2)], error_lines=["AssertionError: 1 != 2"])
    with open(state / "iterations.jsonl", "a", encoding="utf-8") as out:
        out.write('{"iteration": "three"}\n')  # valid JSON, not a record
        out.write('{"iteration": 4, "tests_pa\n')  # a torn write
    evidence = from_state_dir(state)
    assert [r.iteration for r in evidence.history] == [1, 2]
    skipped = [p for p in evidence.problems if p.startswith("iterations.jsonl")]
    assert len(skipped) == 2, evidence.problems
    assert any("line 4" in p for p in skipped), skipped
    assert any("skipped a record" in p for p in skipped), skipped
    assert "iterations.jsonl" in "\n".join(classify(evidence).evidence)


def test_many_skipped_iteration_lines_are_counted_not_listed(tmp_path: Path) -> None:
    state = make_state(tmp_path, [record(1)], error_lines=["AssertionError: 1 != 2"])
    with open(state / "iterations.jsonl", "a", encoding="utf-8") as out:
        out.write("not json\n" * 8)
    problems = [p for p in from_state_dir(state).problems if p.startswith("iterations.jsonl")]
    assert len(problems) == 6
    assert problems[-1] == "iterations.jsonl: 3 more lines skipped"


def test_history_records_with_odd_annotations_are_tolerated() -> None:
    history = (
        record(1, annotations={"failure_classifier": "not a mapping"}),
        record(2, annotations={"failure_classifier": {"rerun": [1, 2]}}),
    )
    assert classify(Evidence(iteration=2, history=history)).mode == "code_error"


def test_the_public_classify_is_the_function_whatever_was_imported_first() -> None:
    """No submodule shares a public name: importing one sets it as an attribute of the
    package, which would make ``from loopctl_failure_classifier import classify`` a module
    in a process that imported that submodule before anyone asked for the function."""
    import pkgutil
    import subprocess
    import sys

    import loopctl_failure_classifier as package

    submodules = {info.name for info in pkgutil.iter_modules(package.__path__)}
    assert not submodules & set(package.__all__)
    code = (
        "import importlib, pkgutil, loopctl_failure_classifier as p\n"
        "for info in pkgutil.iter_modules(p.__path__):\n"
        "    importlib.import_module(f'{p.__name__}.{info.name}')\n"
        "from loopctl_failure_classifier import classify\n"
        "assert callable(classify), classify\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
