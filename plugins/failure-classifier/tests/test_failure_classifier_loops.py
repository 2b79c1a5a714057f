"""Whole loops with the plugin: the real engine, the scripted agent as a subprocess, real test
commands, real git. Each test checks what the loop did because of the classification."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from failure_classifier_testkit import PLUGIN_NAME, events_of

from loopctl import hookimpl
from loopctl.testing import Project
from loopctl_failure_classifier import (
    CLASSIFIED,
    MODE_FORCED,
    RECOVERY_APPLIED,
    RECOVERY_LIMIT,
    RERUN,
    WARNING,
    plugin,
)

CALC = "def add(a, b):\n    return a - b\n"
CALC_TEST = (
    "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
)


def flaky_test(counter: Path) -> str:
    """A test that fails on odd runs and passes on even ones: a real flip on unchanged code
    (the counter lives outside the project, so the working tree never changes)."""
    return (
        "import unittest\nfrom pathlib import Path\n\nC = Path(" + repr(str(counter)) + ")\n\n"
        "class T(unittest.TestCase):\n"
        "    def test_stable(self):\n        self.assertTrue(True)\n\n"
        "    def test_flaky(self):\n"
        "        n = int(C.read_text()) if C.exists() else 0\n"
        "        C.write_text(str(n + 1))\n"
        "        self.assertEqual(n % 2, 1, 'odd runs fail')\n"
    )


def run(run_loop: Any, turns: list[list[dict[str, Any]]], **kwargs: Any) -> Any:
    """A loop with the plugin, without the tests before the first turn: these tests are about
    how it diagnoses the iterations' failures (a flaky failure before the first turn is the
    core's to tell: core/tests/test_tests_first.py)."""
    plugins = {PLUGIN_NAME: plugin, **kwargs.pop("extra_plugins", {})}
    config = {"limits": {"max_iterations": 6}, "test_first": False, **kwargs.pop("config", {})}
    return run_loop("make the tests pass", turns=turns, plugins=plugins, config=config, **kwargs)


def prompt(result: Any, iteration: int) -> str:
    """The prompt of ``iteration``, in logs/ or in the restart archive it was moved to."""
    (path,) = result.state_dir.rglob(f"iteration-{iteration:04d}.prompt.md")
    return path.read_text("utf-8")


def prompts(result: Any) -> str:
    return "\n".join(p.read_text("utf-8") for p in sorted(result.state_dir.rglob("*.prompt.md")))


# --- dependency issues ---------------------------------------------------------------------------


def test_a_missing_package_the_turn_did_not_touch_stops_the_loop_at_once(
    loopctl_project: Project, run_loop: Any
) -> None:
    """The agent's turn changed no file: it did not declare the package, and nothing installs
    it (no reinstall is allowed), so no next turn fixes it: the loop stops after iteration 1,
    saying what is missing and how to install it."""
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n" + CALC_TEST)
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("requirements.txt", "yaml-loopctl-missing\n")
    loopctl_project.commit("tests")
    result = run(run_loop, [[{"say": "hmm"}]])
    assert result.status == "plugin"
    assert result.outcome.reason == "dependency_issue"
    assert len(result.records) == 1
    assert "yaml_loopctl_missing" in result.outcome.message
    assert "changed no file" in result.outcome.message
    assert "python -m pip install -r requirements.txt" in result.outcome.message
    (applied,) = events_of(result, RECOVERY_APPLIED)
    assert applied["action"] == "dependency_stop"
    assert applied["decision"] == "stop"
    assert not events_of(result, RERUN)  # a missing package needs no rerun


def test_a_missing_package_the_turns_do_not_fix_stops_at_its_second_failure(
    loopctl_project: Project, run_loop: Any
) -> None:
    """The agent changes something every turn, but the next run fails on the same missing
    package: the loop stops there, after one "Dependency Problem" note, not after its limit."""
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n" + CALC_TEST)
    loopctl_project.write("calc.py", CALC)
    loopctl_project.commit("tests")
    turns = [[{"write": "notes.txt", "content": f"attempt {n}\n"}] for n in range(1, 7)]
    result = run(run_loop, turns)
    assert result.status == "plugin"
    assert result.outcome.reason == "dependency_issue"
    assert len(result.records) == 2
    assert "iterations 1-2 failed on it alike" in result.outcome.message
    assert "install it into the environment" in result.outcome.message  # no manifest here
    assert [e["action"] for e in events_of(result, RECOVERY_APPLIED)] == [
        "dependency_note",
        "dependency_stop",
    ]
    assert "Dependency Problem" in prompt(result, 2)
    assert "yaml_loopctl_missing" in prompt(result, 2)


@pytest.mark.slow
def test_a_broken_test_command_is_classified_as_such_and_the_loop_stops(
    loopctl_project: Project, run_loop: Any
) -> None:
    """pytest finds no tests/unit: not a code error; the core stops after that run."""
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("tests")
    command = f"{sys.executable} -m pytest -q -p no:cacheprovider tests/unit"
    result = run(run_loop, [[{"say": "hmm"}]], test_cmd=command)
    assert result.status == "usage_error"
    assert result.outcome.reason == "test_command_broken"
    assert len(result.records) == 1
    (classified,) = events_of(result, CLASSIFIED)
    assert classified["mode"] == "broken_test_command"
    assert "tests/unit" in classified["evidence"][0]
    (applied,) = events_of(result, RECOVERY_APPLIED)
    assert applied["action"] == "fix_test_command"


def test_reinstall_runs_only_when_opted_in_and_is_logged(
    loopctl_project: Project, run_loop: Any
) -> None:
    # The "reinstall" creates the missing module, as `pip install -r requirements.txt` would.
    loopctl_project.write("requirements.txt", "yaml-loopctl-missing\n")
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n" + CALC_TEST)
    loopctl_project.write("calc.py", "def add(a, b):\n    return a + b\n")
    loopctl_project.write(".gitignore", ".loopctl/\n__pycache__/\nsite/\n")
    loopctl_project.commit("tests")
    site = loopctl_project.path / "site"
    install = "mkdir -p site && echo 'installed' && touch site/yaml_loopctl_missing.py"
    test_cmd = f"PYTHONPATH=site {sys.executable} -m unittest -q"
    result = run(
        run_loop,
        [[{"say": "waiting for the dependency"}]],
        test_cmd=test_cmd,
        config={"plugins": {PLUGIN_NAME: {"run_reinstall": True, "reinstall_cmd": install}}},
    )
    assert result.status == "complete"
    (applied,) = events_of(result, RECOVERY_APPLIED)
    assert applied["command"] == install
    assert applied["exit_code"] == 0
    assert "installed" in applied["output_tail"]
    assert (site / "yaml_loopctl_missing.py").exists()
    log = result.state_dir / "logs" / "iteration-0001.reinstall.log"
    assert "installed" in log.read_text("utf-8")


def test_a_withheld_variable_never_reaches_the_reinstall_command(
    loopctl_project: Project, run_loop: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reinstall runs the project's own scripts (a ``preinstall`` the agent can edit): it
    starts from the withheld environment, like the agent and the test command."""
    token = "ghp_" + "W1thh3ld" * 4 + "Tk9z"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    seen = tmp_path / "preinstall-saw.txt"
    loopctl_project.write(
        "preinstall.py",
        "import os, pathlib\n"
        f"pathlib.Path({str(seen)!r}).write_text(os.environ.get('GITHUB_TOKEN', '(absent)'))\n"
        "pathlib.Path('site').mkdir(exist_ok=True)\n"
        "pathlib.Path('site/yaml_loopctl_missing.py').touch()\n",
    )
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n" + CALC_TEST)
    loopctl_project.write("calc.py", "def add(a, b):\n    return a + b\n")
    loopctl_project.write(".gitignore", ".loopctl/\n__pycache__/\nsite/\n")
    loopctl_project.commit("tests")
    result = run(
        run_loop,
        [[{"say": "waiting for the dependency"}]],
        test_cmd=f"PYTHONPATH=site {sys.executable} -m unittest -q",
        config={
            "withhold_env": ["GITHUB_TOKEN"],
            "plugins": {
                PLUGIN_NAME: {
                    "run_reinstall": True,
                    "reinstall_cmd": f"{sys.executable} preinstall.py",
                }
            },
        },
    )
    assert result.status == "complete"
    assert events_of(result, RECOVERY_APPLIED)[0]["exit_code"] == 0
    assert seen.read_text() == "(absent)"  # the reinstall ran, without the token
    for path in result.state_dir.rglob("*"):
        assert not path.is_file() or token.encode() not in path.read_bytes(), path


def test_reinstall_command_is_detected_from_the_lock_files(tmp_path: Path) -> None:
    from loopctl_failure_classifier.recovery import detect_reinstall_command

    (tmp_path / "package-lock.json").write_text("{}")
    (tmp_path / "requirements.txt").write_text("attrs\n")
    assert detect_reinstall_command(tmp_path, ["python"])[0] == (
        "python -m pip install -r requirements.txt"
    )
    assert detect_reinstall_command(tmp_path, ["node"])[0] == "npm ci"
    assert detect_reinstall_command(tmp_path, [])[0] == "npm ci"
    (tmp_path / "uv.lock").write_text("")
    assert detect_reinstall_command(tmp_path, ["python"])[0] == "uv sync"
    assert detect_reinstall_command(tmp_path, ["rust"]) is None
    assert detect_reinstall_command(None) is None


def test_reinstall_command_of_the_ecosystems_issue_27_added(tmp_path: Path) -> None:
    from loopctl_failure_classifier.recovery import detect_reinstall_command

    for name in ("Gemfile", "composer.json", "mix.exs"):
        (tmp_path / name).write_text("")
    assert detect_reinstall_command(tmp_path, ["ruby"])[0] == "bundle install"
    assert detect_reinstall_command(tmp_path, ["php"])[0] == "composer install"
    assert detect_reinstall_command(tmp_path, ["elixir"])[0] == "mix deps.get"


# --- flakiness -----------------------------------------------------------------------------------


def test_a_flaky_failure_is_confirmed_by_rerun_and_named_in_the_next_prompt(
    loopctl_project: Project, run_loop: Any, tmp_path: Path
) -> None:
    loopctl_project.write("test_app.py", flaky_test(tmp_path / "counter"))
    loopctl_project.commit("tests")
    result = run(
        run_loop, [[{"say": "nothing to change"}]], config={"limits": {"max_iterations": 2}}
    )
    (rerun, *_) = events_of(result, RERUN)
    assert rerun["passed"]
    assert rerun["ran_tests"]
    assert rerun["command"].endswith("-m unittest test_app.T.test_flaky")
    classified = events_of(result, CLASSIFIED)[0]
    assert classified["mode"] == "test_flakiness"
    assert classified["confidence"] >= 0.95
    assert result.records[0]["annotations"]["not_agents_fault"].startswith(PLUGIN_NAME)
    assert result.status == "max_iterations"  # a pass on rerun is not a success by default
    assert "test_app.T.test_flaky" in prompt(result, 2).split("## Flaky Tests")[1]
    assert "odd runs fail" in prompt(result, 2).split("## Flaky Failure")[1]
    logs = result.state_dir / "logs"
    assert "odd runs fail" in (logs / "iteration-0001.tests.log").read_text("utf-8")
    assert "OK" in (logs / "iteration-0001.rerun.tests.log").read_text("utf-8")


def test_a_pass_on_rerun_completes_only_when_configured(
    loopctl_project: Project, run_loop: Any, tmp_path: Path
) -> None:
    loopctl_project.write("test_app.py", flaky_test(tmp_path / "counter"))
    loopctl_project.commit("tests")
    result = run(
        run_loop,
        [[{"say": "nothing to change"}]],
        config={"plugins": {PLUGIN_NAME: {"flaky_pass_completes": True}}},
    )
    assert result.status == "complete"
    assert result.outcome.message.startswith("the tests pass (flaky: test_app.T.test_flaky")
    assert events_of(result, RECOVERY_APPLIED)[0]["action"] == "accept_flaky_pass"


def test_a_pass_on_the_same_code_after_a_failure_is_a_flaky_pass_not_a_success(
    loopctl_project: Project, run_loop: Any, tmp_path: Path
) -> None:
    loopctl_project.write("test_app.py", flaky_test(tmp_path / "counter"))
    loopctl_project.commit("tests")
    result = run(
        run_loop,
        [[{"say": "nothing to change"}]],
        config={
            "limits": {"max_iterations": 2},
            "plugins": {PLUGIN_NAME: {"rerun_failed_tests": False}},
        },
    )
    modes = [(e["iteration"], e["mode"], e["flaky_pass"]) for e in events_of(result, CLASSIFIED)]
    assert modes == [(1, "code_error", False), (2, "test_flakiness", True)]
    assert events_of(result, "loop.completion_vetoed")
    assert result.status == "max_iterations"


@pytest.mark.slow
def test_flakiness_recoveries_are_limited(
    loopctl_project: Project, run_loop: Any, tmp_path: Path
) -> None:
    loopctl_project.write("test_app.py", flaky_test(tmp_path / "counter"))
    loopctl_project.commit("tests")
    result = run(
        run_loop,
        [[{"say": "nothing"}]],
        config={"plugins": {PLUGIN_NAME: {"max_recoveries": {"test_flakiness": 1}}}},
    )
    assert result.status == "plugin"
    assert result.outcome.reason == "test_flakiness"
    assert events_of(result, RECOVERY_LIMIT)[0]["limit"] == 1
    assert len(result.records) == 2
    report = (result.state_dir / "report.md").read_text("utf-8")
    assert "Failure classification" in report
    assert "test_app.T.test_flaky" in report


# --- infinite loops ------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_infinite_loop_names_the_failed_approach_cuts_the_budget_and_restarts(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "it looks fine"}]],
        config={"limits": {"max_iterations": 30}, "stuck": {"enabled": False}},
    )
    loop_events = [e for e in events_of(result, CLASSIFIED) if e["mode"] == "infinite_loop"]
    assert loop_events[0]["iteration"] == 3
    (restart, *_) = events_of(result, "loop.restart")
    assert restart["reason"] == "infinite_loop"
    assert restart["iteration"] == 3
    budget = events_of(result, "loop.iteration_budget_reduced")[0]
    assert budget["max_iterations"] == 3 + 10
    after = prompt(result, 4)
    assert "## Change Strategy" in after
    # each iteration is credited with what it did: here, nothing (it said "making no code
    # change" before, and credited every change of a run to all of its iterations)
    assert "iterations 1-3 changed nothing; the tests kept failing with: " in after
    # the engine lists the approach (with the agent's words); the plugin does not repeat it
    approaches = events_of(result, "loop.failed_approach")
    assert approaches
    assert {e["source"] for e in approaches} == {"engine"}
    assert "## Approaches That Did Not Work" in after
    assert result.outcome.reason == "infinite_loop"  # the third time: the limit of 2 is spent


@pytest.mark.slow
def test_an_infinite_loop_credits_a_change_only_to_the_iteration_that_made_it(
    loopctl_project: Project, run_loop: Any
) -> None:
    """Iteration 1 changes calc.py, 2 and 3 change nothing: the note said "iterations 1-3:
    changing calc.py" (issue 24, defect 2)."""
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    wrong = {"replace": "calc.py", "old": "a - b", "new": "a * b"}
    result = run(
        run_loop,
        [[wrong], [{"say": "it looks fine"}], [{"say": "it looks fine"}]],
        config={"limits": {"max_iterations": 4}, "stuck": {"enabled": False}},
    )
    after = prompt(result, 4)
    assert "iteration 1 changed calc.py; iterations 2-3 changed nothing; the tests kept" in after


@pytest.mark.slow
def test_an_infinite_loop_with_few_iterations_left_restarts_without_a_budget_cut(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "it looks fine"}]],
        config={"limits": {"max_iterations": 5}, "stuck": {"enabled": False}},
    )
    (restart, *_) = events_of(result, "loop.restart")
    assert (restart["reason"], restart["iteration"]) == ("infinite_loop", 3)
    assert not events_of(result, "loop.iteration_budget_reduced")  # 2 left: less than 10
    recovered = [e for e in events_of(result, RECOVERY_APPLIED) if e["mode"] == "infinite_loop"]
    assert recovered[0]["iterations_cut"] == 0


@pytest.mark.slow
def test_the_stop_line_says_the_classifier_cut_the_iteration_limit(
    loopctl_project: Project, run_loop: Any
) -> None:
    """The user's 24 iterations become 5 (the infinite-loop recovery leaves 2 more): the loop's
    stop line names the classifier and the limit the user set."""
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "it looks fine"}]],
        config={
            "limits": {"max_iterations": 24},
            "stuck": {"enabled": False},
            "plugins": {PLUGIN_NAME: {"loop_max_remaining": 2}},
        },
    )
    assert result.status == "max_iterations"
    assert events_of(result, "loop.iteration_budget_reduced")[0]["max_iterations"] == 5
    assert result.outcome.message == (
        "reached the iteration limit (5) without meeting the goal; failure-classifier lowered "
        "it from 24 (infinite_loop)"
    )


# --- context exhaustion ---------------------------------------------------------------------------


@pytest.mark.slow
def test_context_exhaustion_restarts_with_a_lean_briefing(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    turns = [
        [
            {"say": "reading everything"},
            {"error": "context_overflow", "message": "Prompt is too long"},
        ],
        [{"replace": "calc.py", "old": "a - b", "new": "a + b"}],
    ]
    result = run(run_loop, turns)
    assert result.status == "complete"
    (classified,) = events_of(result, CLASSIFIED)
    assert classified["mode"] == "context_exhaustion"
    assert classified["detector"] == "builtin.context"
    assert events_of(result, "loop.restart")[0]["reason"] == "context_exhaustion"
    assert "## Fresh Session After Context Exhaustion" in prompt(result, 2)
    assert (result.state_dir / "restart-1").is_dir()


# --- the override ----------------------------------------------------------------------------------


def test_failure_mode_override_skips_classification(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "hi"}]],
        config={
            "limits": {"max_iterations": 2},
            "plugins": {PLUGIN_NAME: {"force_mode": "infinite_loop"}},
        },
    )
    assert events_of(result, MODE_FORCED)[0]["mode"] == "infinite_loop"
    classified = events_of(result, CLASSIFIED)
    assert classified[0]["forced"]
    assert classified[0]["detector"] == "override"
    assert events_of(result, "loop.restart")[0]["reason"] == "infinite_loop"
    saved = json.loads((result.state_dir / "failure-mode.json").read_text("utf-8"))
    assert saved["mode"] == "infinite_loop"
    assert saved["forced"] is True


def test_an_unknown_forced_mode_is_reported_and_ignored(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("calc.py", CALC)
    loopctl_project.write("test_calc.py", CALC_TEST)
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "hi"}]],
        config={
            "limits": {"max_iterations": 1},
            "plugins": {PLUGIN_NAME: {"force_mode": "lint_failure"}},
        },
    )
    warning = events_of(result, WARNING)[0]["message"]
    assert "lint_failure" in warning
    assert "not a known failure mode" in warning
    assert events_of(result, CLASSIFIED)[0]["mode"] == "code_error"


# --- custom classifiers ------------------------------------------------------------------------------


class MigrationClassifier:
    """A third-party classifier as a plain object: a custom mode with its own recovery."""

    @hookimpl
    def register_failure_modes(self) -> dict[str, Any]:
        return {
            "migration_pending": {
                "description": "Apply the pending migrations",
                "action": "apply_migrations",
                "prompt": "Run the migrations before changing code.",
                "command": "touch migrated.flag",
                "not_agents_fault": True,
                "max_recoveries": 1,
            }
        }

    @hookimpl
    def classify_failure(self, evidence: Any) -> Any:
        if any("unapplied migration" in line for line in evidence.error_lines):
            return {
                "mode": "migration_pending",
                "confidence": 0.9,
                "evidence": ["unapplied migration"],
            }
        return None


class BrokenClassifier:
    @hookimpl
    def classify_failure(self, evidence: Any) -> Any:
        raise RuntimeError("classifier bug")


MIGRATION_TEST = (
    "import unittest\n\nclass T(unittest.TestCase):\n    def test_db(self):\n"
    "        self.fail('there is 1 unapplied migration')\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("opt_in", [False, True])
def test_a_custom_mode_and_its_declared_recovery(
    loopctl_project: Project, run_loop: Any, opt_in: bool
) -> None:
    loopctl_project.write("test_db.py", MIGRATION_TEST)
    loopctl_project.write(".gitignore", ".loopctl/\n__pycache__/\nmigrated.flag\n")
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "hi"}]],
        extra_plugins={"migrations": MigrationClassifier(), "broken": BrokenClassifier()},
        config={"plugins": {PLUGIN_NAME: {"run_custom_recovery_commands": opt_in}}},
    )
    classified = events_of(result, CLASSIFIED)
    assert classified[0]["mode"] == "migration_pending"
    assert classified[0]["detector"] == "migrations"
    errors = [e for e in events_of(result, "plugin.error") if e["hook"] == "classify_failure"]
    assert errors
    assert errors[0]["plugin"] == "broken"
    applied = events_of(result, RECOVERY_APPLIED)[0]
    assert applied["action"] == "apply_migrations"
    assert applied["declared_by"] == "migrations"
    assert (loopctl_project.path / "migrated.flag").exists() is opt_in
    assert "Run the migrations" in prompt(result, 2)
    assert result.records[0]["annotations"]["not_agents_fault"]
    assert result.outcome.reason == "migration_pending"  # stopped after its one recovery


def test_a_broken_classifier_is_skipped_and_the_built_ins_still_decide(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n")
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "hi"}]],
        extra_plugins={"broken": BrokenClassifier()},
        config={"limits": {"max_iterations": 1}},
    )
    assert events_of(result, CLASSIFIED)[0]["mode"] == "dependency_issue"
    (error,) = [e for e in events_of(result, "plugin.error") if e["hook"] == "classify_failure"]
    assert "classifier bug" in error["error"]


def test_a_higher_priority_custom_classification_overrides_a_built_in(
    loopctl_project: Project, run_loop: Any
) -> None:
    class Vendored:
        @hookimpl
        def classify_failure(self, evidence: Any) -> Any:
            return {
                "mode": "code_error",
                "confidence": 0.8,
                "priority": 350,
                "evidence": ["vendored"],
            }

    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n")
    loopctl_project.commit("code")
    result = run(
        run_loop,
        [[{"say": "hi"}]],
        extra_plugins={"vendored": Vendored()},
        config={"limits": {"max_iterations": 1}},
    )
    classified = events_of(result, CLASSIFIED)[0]
    assert (classified["mode"], classified["detector"]) == ("code_error", "vendored")
    assert [c["mode"] for c in classified["candidates"]][:2] == ["code_error", "dependency_issue"]


class _Observer:
    """A second plugin: what on_failure receives, and what the loop says its test run is."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, bool, str]] = []

    @hookimpl(trylast=True)  # after the classifier's on_failure (and its rerun)
    def on_failure(self, loop: Any, record: Any, test_run: Any) -> None:
        last = loop.last_test_run
        self.seen.append((test_run.passed, last.passed, test_run.label))


@pytest.mark.slow
def test_the_rerun_never_replaces_the_iterations_test_run(
    loopctl_project: Project, run_loop: Any, tmp_path: Path
) -> None:
    loopctl_project.write("test_app.py", flaky_test(tmp_path / "counter"))
    loopctl_project.commit("tests")
    observer = _Observer()
    result = run(
        run_loop,
        [[{"say": "nothing to change"}]],
        config={"limits": {"max_iterations": 1}},
        extra_plugins={"observer": observer},
    )
    (rerun, *_) = events_of(result, RERUN)
    assert rerun["passed"]  # the classifier's rerun passed …
    assert observer.seen == [(False, False, "")]  # … and the others still see the failure
    assert events_of(result, CLASSIFIED)[0]["mode"] == "test_flakiness"


PYTEST_LOOKALIKE = """\
#!/bin/sh
if [ "$1" != "" ]; then echo "unexpected argument: $1" > args.txt; fi
echo "tests/test_x.py F"
echo "FAILED tests/test_x.py::test_x - assert 2 == 3"
echo "1 failed in 0.01s"
exit 1
"""


def test_a_script_whose_output_looks_like_pytest_is_not_rerun(
    loopctl_project: Project, run_loop: Any
) -> None:
    loopctl_project.write("check.sh", PYTEST_LOOKALIKE)
    loopctl_project.commit("tests")
    result = run(
        run_loop,
        [[{"say": "nothing to change"}]],
        test_cmd="sh check.sh",
        config={"limits": {"max_iterations": 1}},
    )
    assert result.records[0]["failing_tests"] == ["tests/test_x.py::test_x"]
    assert not events_of(result, RERUN)  # no rerun at all, so no --lf on a script
    assert not (loopctl_project.path / "args.txt").exists()
    assert events_of(result, CLASSIFIED)[0]["mode"] == "code_error"


def test_the_built_in_detectors_run_once_for_a_failure_nothing_was_rerun_for(
    loopctl_project: Project, run_loop: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deciding whether to re-run needs the built-in classifications; when nothing is re-run
    the verdict is made from those same ones (a re-run's evidence is classified again: the
    flaky tests above)."""
    from loopctl_failure_classifier import arbitration as classify_module
    from loopctl_failure_classifier import detectors

    calls: list[int] = []
    real = detectors.builtin_classifications

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(detectors, "builtin_classifications", counted)
    monkeypatch.setattr(classify_module, "builtin_classifications", counted)
    loopctl_project.write("check.sh", PYTEST_LOOKALIKE)
    loopctl_project.commit("tests")
    result = run(
        run_loop,
        [[{"say": "nothing to change"}]],
        test_cmd="sh check.sh",
        config={"limits": {"max_iterations": 1}},
    )
    assert not events_of(result, RERUN)
    assert events_of(result, CLASSIFIED)[0]["mode"] == "code_error"
    assert len(calls) == 1
