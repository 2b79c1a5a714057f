"""The example classifier: its rules on real linter output, and (when loopctl-failure-classifier
is installed) the whole path: arbitration, ``loopctl classify``, and a loop that recovers."""

from __future__ import annotations

import os
import shutil
import string
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.testing import Project
from loopctl_example_classifier import plugin as example
from loopctl_example_classifier.lint import find_lint_failure

DATA = Path(__file__).parent / "data"
PYTEST_FAILURE = """\
tests/test_calc.py F                                                     [100%]
=================================== FAILURES ===================================
E       assert 2 == 3
FAILED tests/test_calc.py::test_add - assert 2 == 3
"""


@pytest.mark.parametrize("name", ["ruff-concise.txt", "ruff-full.txt", "ruff-format-check.txt"])
def test_real_ruff_output_is_a_lint_failure(name: str) -> None:
    finding = find_lint_failure((DATA / name).read_text(encoding="utf-8"))
    assert finding is not None
    assert finding.linter == "ruff"
    assert finding.confidence == 0.9


def test_the_evidence_names_the_rules() -> None:
    finding = find_lint_failure((DATA / "ruff-concise.txt").read_text(encoding="utf-8"))
    assert finding is not None
    assert finding.lines[0] == "app.py:1:8: F401 [*] `os` imported but unused"
    assert "Found 3 errors." in finding.lines


def test_a_failing_test_is_not_a_lint_failure() -> None:
    assert find_lint_failure(PYTEST_FAILURE) is None
    mixed = (DATA / "ruff-concise.txt").read_text(encoding="utf-8") + PYTEST_FAILURE
    assert find_lint_failure(mixed) is None


def test_the_hook_answers_with_plain_data() -> None:
    class Evidence:
        output = (DATA / "ruff-concise.txt").read_text(encoding="utf-8")
        error_lines = ()
        tests_passed = False

    answer = example.classify_failure(Evidence())
    assert answer is not None
    assert answer["mode"] == "lint_failure"
    assert answer["priority"] == 260
    assert example.classify_failure(type("E", (), {"output": PYTEST_FAILURE})()) is None
    assert example.register_failure_modes()["lint_failure"]["action"] == "autofix_lint"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=string.printable + "✖→", max_size=80), max_size=40))
def test_arbitrary_output_never_raises(lines: list[str]) -> None:
    finding = find_lint_failure("\n".join(lines), lines[:3])
    assert finding is None or 0 < finding.confidence <= 1


# --- with loopctl-failure-classifier -------------------------------------------------------------


def classifier_plugin() -> Any:
    return pytest.importorskip("loopctl_failure_classifier.plugin")


def classifier_events() -> Any:
    """The failure classifier's published event names (never copies of the strings)."""
    return pytest.importorskip("loopctl_failure_classifier.events")


def test_the_classifier_picks_lint_failure_and_its_recovery(tmp_path: Path) -> None:
    fc = classifier_plugin()
    from loopctl.testing import hook_relay
    from loopctl_failure_classifier.offline import classify_offline

    hook = hook_relay({"failure-classifier": fc, "example-classifier": example})
    result = classify_offline(logs=[DATA / "ruff-concise.txt"], hook=hook)
    assert result.verdict.mode == "lint_failure"
    assert result.verdict.detector == "example-classifier.lint"
    assert result.recovery.to_json() == {
        "mode": "lint_failure",
        "action": "autofix_lint",
        "args": ["--max-iterations", "3"],
        "description": "Fix the reported lint rules; the tests themselves are not failing",
        "max_retries_override": 2,
    }


def _ruff() -> str | None:
    found = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    return found if Path(found).exists() else None


@pytest.mark.slow
@pytest.mark.parametrize("live", [False, True])
def test_a_loop_recovers_from_lint_by_running_the_declared_fix(
    loopctl_project: Project, run_loop: Any, monkeypatch: pytest.MonkeyPatch, live: bool
) -> None:
    fc = classifier_plugin()
    ruff = _ruff()
    if live and ruff is None:
        pytest.skip("ruff is not installed")
    loopctl_project.write("app.py", "import os\n\n\ndef double(x):\n    return 2 * x\n")
    loopctl_project.write(".gitignore", ".loopctl/\n__pycache__/\n.ruff_cache/\n")
    if live:
        assert ruff is not None
        monkeypatch.setenv("PATH", f"{Path(ruff).parent}{os.pathsep}{os.environ['PATH']}")
        test_cmd = "ruff check --isolated --no-cache --select F ."
    else:  # replay real ruff output; the "fix" command is then a stand-in for ruff's fixer
        loopctl_project.write("lint.txt", (DATA / "ruff-concise.txt").read_text(encoding="utf-8"))
        test_cmd = (
            f"{sys.executable} -c \"import sys, pathlib; fixed = pathlib.Path('fixed').exists(); "
            "sys.stdout.write('' if fixed else open('lint.txt').read()); sys.exit(0 if fixed else 1)\""
        )
        monkeypatch.setattr(
            example,
            "register_failure_modes",
            _with_command(example.register_failure_modes, "touch fixed"),
        )
    loopctl_project.commit("code")
    result = run_loop(
        "keep the code clean",
        turns=[[{"say": "I only write code, not lint fixes"}]],
        test_cmd=test_cmd,
        plugins={"failure-classifier": fc, "example-classifier": example},
        config={
            "limits": {"max_iterations": 3},
            "plugins": {"failure-classifier": {"run_custom_recovery_commands": True}},
        },
    )
    events = classifier_events()
    classified = result.events_of(events.CLASSIFIED)[0]
    assert (classified["mode"], classified["detector"]) == (
        "lint_failure",
        "example-classifier.lint",
    )
    applied = result.events_of(events.RECOVERY_APPLIED)[0]
    assert applied["action"] == "autofix_lint"
    assert applied["exit_code"] == 0
    assert result.status == "complete"
    if live:
        assert "import os" not in loopctl_project.read("app.py")


def _with_command(original: Any, command: str) -> Any:
    from loopctl import hookimpl

    @hookimpl
    def register_failure_modes() -> dict[str, Any]:
        modes = original()
        modes["lint_failure"] = {**modes["lint_failure"], "command": command}
        return modes

    return register_failure_modes
