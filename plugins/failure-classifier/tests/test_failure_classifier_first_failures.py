"""The failures a user's first loop meets, read from real output: each is a dependency or
environment problem, not a code error. Every line and case here comes from the corpus
(``tests/corpus/cases``), which ``scripts/generate_corpus.py`` made by running the real tools."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_failure_classifier import rules
from loopctl_failure_classifier.locality import Locality, importer

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "accuracy.py"
CASES = Path(__file__).resolve().parent / "corpus" / "cases"


def _accuracy() -> ModuleType:
    spec = importlib.util.spec_from_file_location("failure_classifier_accuracy_ff", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


ACCURACY = _accuracy()


@pytest.mark.parametrize(
    ("case_id", "mode"),
    [
        # the test runner's own module is missing: `python -m pytest` in a venv without pytest
        ("py-dep-runner-module", "dependency_issue"),
        ("py-dep-runner-module-mypy", "dependency_issue"),
        # a build tool that is not on PATH, in bash's words, a bash script's, make's and sh's
        ("bash-command-not-found", "dependency_issue"),
        ("bash-script-command-not-found", "dependency_issue"),
        ("make-tool-missing", "dependency_issue"),
        ("make-tool-missing-shell", "dependency_issue"),
        ("make-compiler-missing", "dependency_issue"),
        ("gradle-missing", "dependency_issue"),
        # a package (or the project) that needs another version of Python
        ("pip-requires-python-project", "dependency_issue"),
        ("pip-requires-python-ignored", "dependency_issue"),
        ("uv-requires-python", "dependency_issue"),
        ("uv-project-python", "dependency_issue"),
        ("tox-missing-interpreter", "dependency_issue"),
        ("nox-missing-interpreter", "dependency_issue"),
        # an ImportError raised inside an installed package: the installed versions disagree
        ("py-dep-installed-mismatch", "dependency_issue"),
        ("py-dep-installed-mismatch-script", "dependency_issue"),
        # ... while the project's own wrong import from an installed package stays a code error
        ("py-installed-name-own-code", "code_error"),
        # an AttributeError raised inside an installed package, in pytest's long traceback
        ("py-installed-attr-mismatch", "dependency_issue"),
    ],
)
def test_a_first_loops_failures_classify_from_real_output(case_id: str, mode: str) -> None:
    row = ACCURACY.classify_case(CASES / case_id)
    assert row["predicted"] == mode, row


@pytest.mark.parametrize(
    ("line", "rule", "pkg"),
    [
        ("{TMP}/env/bin/python: No module named pytest", "python.module_not_found", "pytest"),
        (
            'mypy.ini:2: error: Error importing plugin "pydantic_corpus_xyz.mypy": No module '
            "named 'pydantic_corpus_xyz'  [misc]",
            "python.module_not_found",
            "pydantic_corpus_xyz",
        ),
        (
            "E   ImportError: cannot import name 'render_grid' from 'tablecore' "
            "({TMP}/env/lib/python3.11/site-packages/tablecore/__init__.py)",
            "python.installed_versions_disagree",
            "tablecore",
        ),
        (
            "ERROR: Package 'fastcalc' requires a different Python: 3.11.7 not in '>=3.99'",
            "python.requires_python",
            None,
        ),
        (
            "ERROR: Packages require a different Python. 3.11.7 not in:",
            "python.requires_python",
            None,
        ),
        (
            "error: No interpreter found for Python >=3.99 in managed installations or search path",
            "python.interpreter_missing",
            None,
        ),
        (
            "py399: failed with could not find python interpreter matching any of the specs py399",
            "python.interpreter_missing",
            None,
        ),
        (
            "nox > Session tests failed: Python interpreter 3.99 not found.",
            "python.interpreter_missing",
            None,
        ),
        (
            "__main__.py: error: unrecognized arguments: --cov=calc --cov-report=term",
            "pytest.plugin_option",
            None,
        ),
        (
            "ERROR: Missing required plugins: pytest-timeout>=2",
            "pytest.required_plugins",
            "pytest-timeout",
        ),
        (
            "tests: failed with pytest is not allowed, use allowlist_externals to allow it",
            "tox.command_not_in_env",
            "pytest",
        ),
        (
            "pyproject.toml changed significantly since poetry.lock was last generated. Run "
            "`poetry lock` to fix the lock file.",
            "poetry.lock_stale",
            None,
        ),
        ("Command not found: pytest", "runner.command_not_found", "pytest"),
        ("error: Failed to spawn: `pytest`", "uv.failed_to_spawn", "pytest"),
        ("bash: meson: command not found", "shell.command_not_found", "meson"),
        ("bash: line 1: meson: command not found", "shell.command_not_found", "meson"),
        (
            "./run-tests.sh: line 4: bazel: command not found",
            "shell.command_not_found",
            "bazel",
        ),
        ("./run-tests.sh: 4: bazel: not found", "shell.command_not_found", "bazel"),
        ("make: meson: No such file or directory", "make.command_not_found", "meson"),
        ("make: *** [Makefile:2: test] Error 127", "make.exit_127", None),
        (
            "calc.c:1:10: fatal error: zstd_corpus.h: No such file or directory",
            "c.header_missing",
            "zstd_corpus.h",
        ),
        ("main.c:1:10: fatal error: 'zstd.h' file not found", "c.header_missing", "zstd.h"),
        (
            "/usr/bin/ld: cannot find -lzstdcorpus: No such file or directory",
            "ld.library_missing",
            "zstdcorpus",
        ),
        (
            "= note: rust-lld: error: unable to find library -lzstdcorpus",
            "ld.library_not_found",
            "zstdcorpus",
        ),
        (
            "Package libzstdcorpus was not found in the pkg-config search path.",
            "pkg_config.not_found",
            "libzstdcorpus",
        ),
        (
            "Could NOT find GTest (missing: GTEST_LIBRARY GTEST_INCLUDE_DIR",
            "cmake.not_found",
            "GTest",
        ),
        (
            "E       AttributeError: module 'tablecore' has no attribute 'render_grid'",
            "python.installed_attribute_missing",
            "tablecore",
        ),
        (
            "ERROR: THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE.",
            "pip.hash_mismatch",
            None,
        ),
        (
            "The currently activated Python version 3.11.7 is not supported by the project "
            "(>=3.99).",
            "poetry.python_version",
            None,
        ),
        (
            "async def functions are not natively supported.",
            "pytest.async_plugin",
            None,
        ),
        (
            "Preset ts-jest not found relative to rootDir {WORKDIR}.",
            "jest.preset_missing",
            "ts-jest",
        ),
        (
            "# Error [ERR_UNKNOWN_BUILTIN_MODULE]: No such built-in module: node:sqlite",
            "node.builtin_missing",
            "node:sqlite",
        ),
        (
            "error[E0554]: `#![feature]` may not be used on the stable release channel",
            "rust.nightly_feature",
            None,
        ),
        (
            'cgo: C compiler "clang-corpus" not found: exec: "clang-corpus": executable file not '
            "found in $PATH",
            "go.exec_not_found",
            "clang-corpus",
        ),
        ("npm error code ENOTCACHED", "npm.error_code", None),
        ("npm error code EBADENGINE", "npm.error_code", None),
        ("Error: ERR_PNPM_NO_OFFLINE_META", "pnpm.install", None),
        ("Error: ERR_PNPM_NO_LOCKFILE", "pnpm.install", None),
        (
            "error TS2688: Cannot find type definition file for 'node'.",
            "tsc.missing_type_library",
            "node",
        ),
        (
            "Test environment jest-environment-jsdom cannot be found. Make sure the testEnvironment "
            "configuration option points to an existing node module.",
            "jest.environment_missing",
            "jest-environment-jsdom",
        ),
        (
            "MISSING DEPENDENCY  Cannot find dependency 'jsdom'",
            "vitest.missing_dependency",
            "jsdom",
        ),
        (
            "error: rustc 1.95.0 is not supported by the following packages:",
            "cargo.rust_version",
            None,
        ),
        (
            "error: cannot update the lock file {WORKDIR}/Cargo.lock because --locked was passed "
            "to prevent this",
            "cargo.locked",
            None,
        ),
        (
            "error: The lockfile at `uv.lock` needs to be updated, but `--locked` was provided. "
            "To update the lockfile, run `uv lock`.",
            "uv.locked",
            None,
        ),
        ("note: module requires Go 1.99", "go.toolchain", None),
        (
            'Exception in thread "main" java.lang.NoClassDefFoundError: com/acme/Json',
            "java.class_missing",
            "com/acme",
        ),
        (
            "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-compiler-plugin:3.13.0:"
            "compile (default-compile) on project demo: Fatal error compiling: error: invalid "
            "target release: 99 -> [Help 1]",
            "java.release",
            None,
        ),
        (
            "[ERROR] Failed to execute goal org.apache.maven.plugins:maven-surefire-plugin:3.2.5:"
            "test (default-test) on project demo: Cannot access central ({URL}) in offline mode "
            "and the artifact org.apache.maven.surefire:surefire-junit4:jar:3.2.5 has not been "
            "downloaded from it before.",
            "maven.offline",
            None,
        ),
    ],
)
def test_each_new_signature_is_recognised(line: str, rule: str, pkg: str | None) -> None:
    hits = rules.scan("", [line])
    assert [(h.rule.name, h.pkg) for h in hits][:1] == [(rule, pkg)]


@pytest.mark.parametrize(
    "line",
    [
        # a test's own words, not a tool's
        "E       AssertionError: assert 'bash: x: command not found' == ''",
        "E   assert 'requires a different version' in message",
        "FAILED test_x.py::test_cannot_import_name - AssertionError",
        # the project's own ImportError (its file, not site-packages)
        "E   ImportError: cannot import name 'total' from 'shop.cart' ({WORKDIR}/shop/cart.py)",
        "make: *** [Makefile:7: calc_test] Error 1",
        "java.lang.NoClassDefFoundError: App",
    ],
)
def test_ordinary_lines_are_not_the_new_signatures(line: str) -> None:
    assert rules.scan(line + "\n", [line]) == []


# --- who imports a name: the frame above the ImportError -------------------------------------------

SITE = "/v/lib/python3.11/site-packages"
LINE = f"ImportError: cannot import name 'b' from 'dep' ({SITE}/dep/__init__.py)"


def _traceback(frames: list[str], style: str) -> str:
    if style == "python":
        body = "".join(f'  File "{f}", line 1, in <module>\n    import x\n' for f in frames)
        return f"Traceback (most recent call last):\n{body}{LINE}\n"
    body = "".join(f"{f}:1: in <module>\n    import x\n" for f in frames)
    return f"Traceback:\n{body}E   {LINE}\n"


@pytest.mark.parametrize("style", ["python", "pytest"])
def test_the_importing_frame_decides(style: str) -> None:
    installed = _traceback(["/w/test_a.py", f"{SITE}/pkg/__init__.py"], style)
    own = _traceback([f"{SITE}/pkg/__init__.py", "/w/app.py"], style)
    line = LINE if style == "python" else f"E   {LINE}"
    assert importer(installed, line) == (False, "")
    assert importer(own, line)[0] is True
    assert "app.py" in importer(own, line)[1]
    assert importer(LINE, LINE)[0] is True  # no traceback: not enough to blame the packages


def test_pytests_long_traceback_names_the_raising_frame_after_the_error() -> None:
    error = "E       AttributeError: module 'dep' has no attribute 'b'"
    text = f"    def f():\n>       dep.b()\n{error}\n\n{{}}:4: AttributeError\n"
    assert importer(text.format(f"{SITE}/pkg/__init__.py"), error) == (False, "")
    assert importer(text.format("app.py"), error)[0] is True


_PATHS = st.builds(
    lambda installed, name: f"{SITE if installed else '/w'}/{name}.py",
    st.booleans(),
    st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PATHS, min_size=1, max_size=6), st.sampled_from(["python", "pytest"]))
def test_the_nearest_frame_is_the_importer(frames: list[str], style: str) -> None:
    text = _traceback(frames, style)
    line = LINE if style == "python" else f"E   {LINE}"
    own, _ = importer(text, line)
    assert own is ("site-packages" not in frames[-1])


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400), st.text(max_size=120))
def test_the_importer_check_never_raises(output: str, line: str) -> None:
    own, why = importer(output, line)
    assert isinstance(own, bool)
    assert isinstance(why, str)


# --- C headers: the project's own, or a system library's ---------------------------------------------


def test_a_missing_header_of_the_projects_own_is_code(tmp_path: Path) -> None:
    (tmp_path / "calc.c").write_text("")
    (tmp_path / "net_util.h").write_text("")
    where = Locality(tmp_path)
    assert where.is_own("c_header", "calc.h")[0]  # calc.c's header
    assert where.is_own("c_header", "net_utils.h")[0]  # a near name: renamed
    assert not where.is_own("c_header", "zstd.h")[0]
    assert not where.is_own("c_header", "boost/optional.hpp")[0]
    assert not Locality(None).is_own("c_header", "calc.h")[0]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=80))
def test_the_header_check_never_raises(name: str) -> None:
    own, why = Locality(None).is_own("c_header", name)
    assert own is False
    assert why == ""


def test_an_installed_package_asking_the_projects_own_module_is_code(tmp_path: Path) -> None:
    from loopctl_failure_classifier.arbitration import classify
    from loopctl_failure_classifier.evidence import from_logs

    log = (CASES / "py-dep-installed-mismatch" / "logs" / "1.log").read_text(encoding="utf-8")
    assert classify(from_logs([log], workdir=tmp_path)).mode == "dependency_issue"
    (tmp_path / "tablecore.py").write_text("def render_table():\n    pass\n")
    assert classify(from_logs([log], workdir=tmp_path)).mode == "code_error"


def test_the_new_signatures_are_looked_for_at_a_large_logs_ends() -> None:
    line = "make: meson: No such file or directory"
    noise = "x" * 100 + "\n"
    filler = noise * ((rules.WINDOW_HEAD + rules.WINDOW_TAIL) // len(noise) + 10)
    assert [h.pkg for h in rules.scan(f"{line}\n{filler}")] == ["meson"]  # at the start
    assert [h.pkg for h in rules.scan(f"{filler}{line}\n")] == ["meson"]  # at the end
    middle = f"{filler}{line}\n{filler}"
    assert rules.scan(middle) == []  # a 10 MB log's middle is not searched for these
    assert [h.pkg for h in rules.scan(middle, [line])] == ["meson"]  # unless a decisive line
