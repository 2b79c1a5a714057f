"""The lines loopctl's views show for this plugin's events (their ``summary`` field)."""

from __future__ import annotations

from typing import Any

from failure_classifier_testkit import PLUGIN_NAME

from loopctl import Event
from loopctl.testing import Project, event_line
from loopctl_failure_classifier import lines, plugin
from loopctl_failure_classifier.events import (
    CLASSIFIED,
    PREFIX,
    RECOVERY_APPLIED,
    RECOVERY_LIMIT,
    event_schemas,
)


def test_a_classification_reads_in_words() -> None:
    line = lines.classified(
        "dependency_issue",
        0.9,
        ["[python.module_not_found] ModuleNotFoundError: No module named 'pytest'"],
        forced=False,
        flaky_pass=False,
    )
    assert line == (
        "failure classified as a dependency issue, 90% sure: "
        "ModuleNotFoundError: No module named 'pytest'"
    )
    assert lines.classified("my_mode", 0.5, [], forced=True, flaky_pass=False) == (
        "failure treated as my mode (--failure-mode)"
    )
    flaky = lines.classified("test_flakiness", 0.8, [], forced=False, flaky_pass=True)
    assert flaky.startswith("the tests passed on the code that just failed")


def test_a_recovery_says_what_the_loop_does() -> None:
    line = lines.recovery_applied(
        "dependency_issue",
        "dependency_note",
        1,
        2,
        "continue",
        {"reinstall": "no reinstall command found (set reinstall_cmd)", "ecosystems": ["python"]},
    )
    assert line == (
        "dependency issue → telling the agent to declare the missing dependency "
        "(attempt 1 of 2); no reinstall command found (set reinstall_cmd)"
    )
    # the issue's `limit=, decision=continue`: no limit and the default decision say nothing
    line = lines.recovery_applied("code_error", "standard_retry", 3, None, "continue", {})
    assert line == "code error → the agent tries again with the test output (attempt 3)"
    line = lines.recovery_applied(
        "dependency_issue",
        "reinstall_deps",
        1,
        2,
        "continue",
        {"command": "pip install -e .", "exit_code": 1, "timed_out": False},
    )
    assert "reinstalled the dependencies with `pip install -e .`: failed with exit code 1" in line
    restart = lines.recovery_applied(
        "context_exhaustion", "restart_compressed", 1, 3, "restart", {}
    )
    assert restart == "context exhaustion → restarting with a compressed briefing (attempt 1 of 3)"
    redirect = lines.recovery_applied("infinite_loop", "reduce_and_redirect", 1, 2, "restart", {})
    assert redirect.endswith("(attempt 1 of 2); restarting the agent session")
    custom = lines.recovery_applied("db_down", "start_db", 1, None, "continue", {})
    assert custom == "db down → its declared recovery, start db (attempt 1)"
    heading = ["the linter reported:", "app.py:1:8: F401 `os` imported but unused"]
    line = lines.classified("lint_failure", 0.9, heading, forced=False, flaky_pass=False)
    assert line.endswith("90% sure: the linter reported: app.py:1:8: F401 `os` imported but unused")


def test_the_views_show_the_summary_of_the_emitted_event() -> None:
    summary = lines.rerun(True, True, [], 1.25)
    event = Event(
        type="failure-classifier.rerun",
        ts=0.0,
        iteration=2,
        data={"command": "pytest", "passed": True, "summary": summary},
    )
    assert event_line(event) == (
        "re-ran the failing tests with no code change (1.2 s): they passed, so the failure is flaky"
    )
    assert lines.rerun(False, True, ["t::a", "t::b"], 2.0).endswith(
        "they failed again (t::a, t::b)"
    )


def test_every_event_of_a_real_loop_reads_in_words(loopctl_project: Project, run_loop: Any) -> None:
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n")
    loopctl_project.commit("tests")
    result = run_loop(
        "fix it",
        # a turn that changes a file each time: the recovery is applied, then its limit stops
        turns=[[{"write": "notes.txt", "content": f"try {n}\n"}] for n in range(3)],
        plugins={PLUGIN_NAME: plugin},
        config={
            "limits": {"max_iterations": 3},
            "plugins": {PLUGIN_NAME: {"max_recoveries": {"dependency_issue": 1}}},
        },
    )
    shown = {
        event["type"]: event_line(event, event_schemas())
        for event in result.events
        if event["type"].startswith(PREFIX)
    }
    assert shown[CLASSIFIED].startswith("failure classified as a dependency issue, ")
    assert "yaml_loopctl_missing" in shown[CLASSIFIED]
    assert shown[RECOVERY_APPLIED].startswith("dependency issue → ")
    assert shown[RECOVERY_LIMIT].endswith(": stopping the loop")
    for line in shown.values():
        assert not line.startswith(PREFIX), line  # none falls back to the generic line
