"""``loopctl classify`` and ``--failure-mode``, through the real command line (a subprocess)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from failure_classifier_testkit import (
    PYTEST_ASSERT_LOG,
    make_state,
    pytest_import_error_log,
    record,
)


def loopctl(
    *args: str, cwd: Path, plugins: str = "failure-classifier", path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = plugins
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "loopctl", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.slow
def test_classify_a_state_dir_as_text_and_json(tmp_path: Path) -> None:
    state = make_state(
        tmp_path,
        [record(1), record(2), record(3)],
        error_lines=["AssertionError: 1 != 2"],
        log=PYTEST_ASSERT_LOG,
    )
    text = loopctl("classify", str(state), cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "mode:        infinite_loop" in text.stdout
    assert "detector:    builtin.loop" in text.stdout
    assert "action:      reduce_and_redirect" in text.stdout
    assert "args:        --max-iterations 10" in text.stdout
    data = json.loads(loopctl("classify", str(state), "--json", cwd=tmp_path).stdout)
    assert data["mode"] == "infinite_loop"
    assert data["recovery"] == {
        "mode": "infinite_loop",
        "action": "reduce_and_redirect",
        "args": ["--max-iterations", "10"],
        "description": data["recovery"]["description"],
        "max_retries_override": 1,
    }
    assert not (state / "failure-mode.json").exists()
    assert loopctl("classify", str(state), "--write", cwd=tmp_path).returncode == 0
    assert json.loads((state / "failure-mode.json").read_text("utf-8"))["mode"] == "infinite_loop"


def test_classify_raw_logs_in_iteration_order(tmp_path: Path) -> None:
    first = tmp_path / "1.log"
    first.write_text(pytest_import_error_log("httpx_missing"), encoding="utf-8")
    data = json.loads(loopctl("classify", "--log", str(first), "--json", cwd=tmp_path).stdout)
    assert data["mode"] == "dependency_issue"
    assert data["recovery"]["action"] == "reinstall_deps"
    (tmp_path / "httpx_missing").mkdir()
    (tmp_path / "httpx_missing" / "__init__.py").write_text("")
    own = json.loads(loopctl("classify", "--log", str(first), "--json", cwd=tmp_path).stdout)
    assert own["mode"] == "code_error"
    assert "project's own code" in own["evidence"][0]


@pytest.mark.slow
def test_classify_logs_from_the_same_code_finds_the_flip(tmp_path: Path) -> None:
    failed, passed = tmp_path / "a.log", tmp_path / "b.log"
    failed.write_text(PYTEST_ASSERT_LOG, encoding="utf-8")
    passed.write_text("tests/test_x.py .\n1 passed in 0.01s\n", encoding="utf-8")
    args = ["classify", "--log", str(passed), "--log", str(failed), "--json"]
    assert json.loads(loopctl(*args, cwd=tmp_path).stdout)["mode"] == "code_error"
    data = json.loads(loopctl(*args, "--same-code", cwd=tmp_path).stdout)
    assert data["mode"] == "test_flakiness"
    rerun = json.loads(
        loopctl(
            "classify", "--log", str(failed), "--rerun-log", str(passed), "--json", cwd=tmp_path
        ).stdout
    )
    assert rerun["mode"] == "test_flakiness"
    assert rerun["confidence"] >= 0.95


def test_classify_usage_errors(tmp_path: Path) -> None:
    missing_dir = loopctl("classify", str(tmp_path / "nope"), cwd=tmp_path)
    assert missing_dir.returncode == 2
    assert "not a loop state directory" in missing_dir.stderr
    missing_log = loopctl("classify", "--log", str(tmp_path / "x.log"), cwd=tmp_path)
    assert missing_log.returncode == 2
    assert "no such log file" in missing_log.stderr


@pytest.mark.slow
def test_failure_mode_option_is_validated_against_the_known_modes(tmp_path: Path) -> None:
    (tmp_path / "loopctl.toml").write_text('agent = "scripted"\ntest_cmd = "false"\n')
    bad = loopctl("run", "goal", "--failure-mode", "sideways", cwd=tmp_path)
    assert bad.returncode == 2
    assert "--failure-mode: 'sideways' is not one of" in bad.stderr
    assert "dependency_issue" in bad.stderr
    help_text = loopctl("run", "--help", cwd=tmp_path).stdout
    assert "--failure-mode MODE" in help_text


BROKEN_PLUGIN = """\
from loopctl import hookimpl


@hookimpl
def classify_failure(evidence):
    raise RuntimeError("classifier bug")
"""


def install_broken_classifier(site: Path) -> None:
    """An installed plugin (a distribution with a ``loopctl.plugins`` entry point) whose
    classifier raises."""
    site.mkdir()
    (site / "broken_classifier.py").write_text(BROKEN_PLUGIN, encoding="utf-8")
    dist = site / "broken_classifier-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-classifier\nVersion: 0.1\n", encoding="utf-8"
    )
    (dist / "entry_points.txt").write_text(
        "[loopctl.plugins]\nbroken = broken_classifier\n", encoding="utf-8"
    )


@pytest.mark.slow
def test_classify_lists_a_crashed_classifier_and_still_decides(tmp_path: Path) -> None:
    site = tmp_path / "site"
    install_broken_classifier(site)
    state = make_state(
        tmp_path,
        [record(1), record(2), record(3)],
        error_lines=["AssertionError: 1 != 2"],
        log=PYTEST_ASSERT_LOG,
    )
    both = "failure-classifier,broken"
    done = loopctl("classify", str(state), "--json", cwd=tmp_path, plugins=both, path=site)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["mode"] == "infinite_loop"  # the built-in detectors still decided
    crashed = [p for p in data["problems"] if "classifier bug" in p]
    assert crashed == [
        "skipped after an error: broken in classify_failure: RuntimeError: classifier bug"
    ]
    text = loopctl("classify", str(state), cwd=tmp_path, plugins=both, path=site)
    assert (
        "  - skipped after an error: broken in classify_failure: RuntimeError: classifier bug"
        in text.stdout
    )
    alone = loopctl("classify", str(state), "--json", cwd=tmp_path)  # not enabled: no problem
    assert not [p for p in json.loads(alone.stdout)["problems"] if "classifier bug" in p]


@pytest.mark.slow
def test_a_log_is_read_as_a_loop_keeps_test_output(tmp_path: Path) -> None:
    """A log longer than limits.test_output_bytes is classified from its first fifth and its
    end, as the loop would have seen the run: a missing module in the middle is not seen."""
    filler = "tests/test_calc.py::test_case PASSED                               [ 50%]\n" * 30_000
    big = tmp_path / "big.log"
    big.write_text(
        "collected 60001 items\n"
        + filler
        + pytest_import_error_log("httpx_missing")
        + filler
        + PYTEST_ASSERT_LOG,
        encoding="utf-8",
    )
    assert big.stat().st_size > 4_000_000
    seen = json.loads(loopctl("classify", "--log", str(big), "--json", cwd=tmp_path).stdout)
    assert seen["mode"] == "code_error"  # the assertion at the end; the middle was left out
    (tmp_path / "loopctl.toml").write_text("[limits]\ntest_output_bytes = 10000000\n")
    whole = json.loads(loopctl("classify", "--log", str(big), "--json", cwd=tmp_path).stdout)
    assert whole["mode"] == "dependency_issue"
    assert "httpx_missing" in " ".join(whole["evidence"])


def test_read_log_keeps_the_first_fifth_and_the_end(tmp_path: Path) -> None:
    from loopctl_failure_classifier.offline import read_log

    log = tmp_path / "x.log"
    log.write_bytes(b"".join(b"%04d\n" % n for n in range(1000)))  # 5000 bytes
    assert read_log(log, 5000) == (log.read_text(), None)
    text, why = read_log(log, 1000)
    assert why is None
    head, marker, tail = text.partition("\n... [4000 bytes omitted] ...\n")
    assert marker
    assert head == "".join(f"{n:04d}\n" for n in range(40))
    assert tail == "".join(f"{n:04d}\n" for n in range(840, 1000))
    assert read_log(tmp_path / "missing.log")[0] == ""


def test_each_log_is_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from loopctl_failure_classifier import evidence

    calls: list[str] = []
    real = evidence.parse_test_output

    def counting(text: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(evidence, "parse_test_output", counting)
    logs = [PYTEST_ASSERT_LOG, pytest_import_error_log("httpx_missing")]
    found = evidence.from_logs(logs, rerun_log=PYTEST_ASSERT_LOG)
    assert found.runner == "pytest"
    assert sorted(calls) == sorted([*logs, PYTEST_ASSERT_LOG])


def test_the_command_names_the_file_the_classifier_writes() -> None:
    from loopctl_failure_classifier import arbitration, cli

    assert cli.FAILURE_MODE_FILE == arbitration.FAILURE_MODE_FILE


#: Runs loopctl as its console script does and writes the modules it imported to argv[1].
DRIVER = """
import json, sys
from loopctl.__main__ import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""


def test_classify_imports_neither_the_engine_nor_the_state_files_for_a_log(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(PYTEST_ASSERT_LOG, encoding="utf-8")
    modules = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = "failure-classifier"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(modules), "classify", "--log", str(log)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "mode:        code_error" in done.stdout
    imported = set(json.loads(modules.read_text()))
    heavy = {
        "loopctl.engine",
        "loopctl.launch",
        "loopctl.state",
        "rich",
        "importlib_metadata",
        "importlib.metadata",
        # typer, and the typed configuration: no setting is set, so none is loaded
        "typer",
        "cattrs",
        "loopctl.config.load",
        "loopctl.config.schema",
        # nothing is run (recovery commands), nothing needs OpenSSL (the fingerprints' sha1)
        "subprocess",
        "signal",
        "_hashlib",
        # what only an error (a plugin's traceback, a near-miss module name) needs
        "traceback",
        "difflib",
        # a loop's classes (turns, test runs, hook results): reading records needs none
        "loopctl.runmodel",
    }
    if sys.version_info < (
        3,
        11,
    ):  # 3.10's platform module, which attrs imports, imports subprocess
        heavy -= {"subprocess", "signal"}
    assert not heavy & imported


#: Runs loopctl ARGS, then prints the attrs classes of loopctl and its plugins that exist.
CLASSES_DRIVER = """
import gc, io, json, sys, contextlib
from loopctl.__main__ import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[1:])
print(json.dumps([code, sorted(
    f"{o.__module__}.{o.__qualname__}" for o in gc.get_objects()
    if isinstance(o, type) and "__attrs_attrs__" in o.__dict__
    and o.__module__.startswith("loopctl"))]))
"""

#: The attrs classes ``classify --log`` may define: each costs its start-up about 0.3 ms (attrs
#: generates and compiles its methods), so one more on this path must be worth it.
CLASSIFY_CLASSES = {
    *(f"loopctl.model.{n}" for n in ("AgentSummary", "IterationRecord", "Usage")),
    *(f"loopctl.pluginhost.{n}" for n in ("HookFailure", "PluginInfo", "PluginSelection")),
    *(f"loopctl.scan.{n}" for n in ("ScanMatch", "ScanRule", "_Limits")),
    "loopctl.stuck.StuckDetector",
    "loopctl.testoutput.ParsedTestOutput",
    "loopctl.testparts.Partial",
    "loopctl_failure_classifier.config.FailureClassifierConfig",
    "loopctl_failure_classifier.rules.Rule",
    *(
        f"loopctl_failure_classifier.model.{n}"
        for n in ("Classification", "Evidence", "FailureMode", "RecoveryStrategy", "Rerun")
    ),
    "loopctl_failure_classifier.model.Verdict",
}


def test_classify_a_log_defines_only_the_attrs_classes_it_needs(tmp_path: Path) -> None:
    log = tmp_path / "run.log"
    log.write_text(PYTEST_ASSERT_LOG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = "failure-classifier"
    done = subprocess.run(
        [sys.executable, "-c", CLASSES_DRIVER, "classify", "--log", str(log)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    code, defined = json.loads(done.stdout)
    assert code == 0
    assert "loopctl_failure_classifier.model.Verdict" in defined  # the probe sees them
    assert set(defined) <= CLASSIFY_CLASSES


def test_a_wrong_value_in_the_plugins_section_is_named_as_the_typed_configuration_names_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "run.log"
    log.write_text(PYTEST_ASSERT_LOG, encoding="utf-8")
    (tmp_path / "loopctl.toml").write_text('[plugins.failure-classifier]\nloop_window = "x"\n')
    done = loopctl("classify", "--log", str(log), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        "loopctl: warning: [plugins.failure-classifier] ignored: loopctl.toml: "
        "plugins.failure-classifier.loop_window: expected an integer, got 'x'\n"
    )
    assert "mode:        code_error" in done.stdout


@pytest.mark.slow
def test_classify_a_loop_whose_tests_passed_says_there_is_no_failure(tmp_path: Path) -> None:
    """A real loop: iteration 1 fails an assertion, iteration 2 fixes it and completes. There is
    no failure to classify, in words and in JSON (it said ``code_error``, 0.50)."""
    from loopctl.testing import make_project, run_loop

    project = make_project(tmp_path / "project")
    project.write("calc.py", "def add(a, b):\n    return a - b\n")
    project.write(
        "test_calc.py",
        "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
    )
    project.commit("tests")
    fix = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
    result = run_loop(project, "make the tests pass", turns=[[{"say": "looking"}], [fix]])
    assert result.status == "complete"
    state = str(result.state_dir)
    text = loopctl("classify", state, cwd=project.path)
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith(
        "no failure: the tests passed in iteration 2 (the loop's status: complete)"
    ), text.stdout
    assert "code_error" not in text.stdout
    data = json.loads(loopctl("classify", state, "--json", cwd=project.path).stdout)
    assert data["failure"] is False
    assert data["mode"] is None
    assert data["recovery"] is None
    assert data["iteration"] == 2
    assert loopctl("classify", state, "--write", cwd=project.path).returncode == 0
    assert not (result.state_dir / "failure-mode.json").exists()
    # a passing raw log is no failure either; a failing one still is
    passed = tmp_path / "pass.log"
    passed.write_text("tests/test_x.py .\n1 passed in 0.01s\n", encoding="utf-8")
    log = json.loads(loopctl("classify", "--log", str(passed), "--json", cwd=tmp_path).stdout)
    assert log["failure"] is False
    assert log["mode"] is None
    failed = tmp_path / "fail.log"
    failed.write_text(PYTEST_ASSERT_LOG, encoding="utf-8")
    log = json.loads(loopctl("classify", "--log", str(failed), "--json", cwd=tmp_path).stdout)
    assert log["failure"] is True
    assert log["mode"] == "code_error"
