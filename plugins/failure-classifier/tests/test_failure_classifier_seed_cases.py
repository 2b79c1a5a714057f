"""The seed plan's 28 test cases, in its order, made real: each classifies a state directory
written the way the engine writes it (or calls one detector), and checks the verdict.

Where the issue changed the plan, the test follows the issue and says so: port signatures
(EADDRINUSE) are supporting evidence of flakiness, never enough alone (case 5).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from failure_classifier_testkit import (
    PYTEST_ASSERT_LOG,
    make_state,
    pytest_import_error_log,
    record,
)

from loopctl_failure_classifier import detectors
from loopctl_failure_classifier.arbitration import FAILURE_MODE_FILE, write_failure_mode
from loopctl_failure_classifier.detectors import Notes, Settings
from loopctl_failure_classifier.evidence import from_state_dir
from loopctl_failure_classifier.locality import Locality
from loopctl_failure_classifier.model import Evidence, Rerun
from loopctl_failure_classifier.offline import classify_offline
from loopctl_failure_classifier.recovery import strategy


def classify(state: Path) -> str:
    return classify_offline(state_dir=state, workdir=state.parent).verdict.mode


# --- group 1: classification ---------------------------------------------------------------------


def test_01_module_not_found_is_a_dependency_issue(tmp_path: Path) -> None:
    lines = ["Module not found: Error: Can't resolve 'react-router-dom' in '/app/src'"]
    state = make_state(tmp_path, [record(1, errors=lines, failing=[])], error_lines=lines)
    assert classify(state) == "dependency_issue"


def test_02_npm_eresolve_is_a_dependency_issue(tmp_path: Path) -> None:
    lines = ["npm ERR! code ERESOLVE", "npm ERR! ERESOLVE unable to resolve dependency tree"]
    state = make_state(tmp_path, [record(1, errors=lines, failing=[])], error_lines=lines)
    assert classify(state) == "dependency_issue"


def test_03_module_not_found_error_is_a_dependency_issue(tmp_path: Path) -> None:
    log = pytest_import_error_log("requests_oauthlib")
    lines = ["E   ModuleNotFoundError: No module named 'requests_oauthlib'"]
    state = make_state(tmp_path, [record(1, errors=lines, failing=[])], error_lines=lines, log=log)
    result = classify_offline(state_dir=state, workdir=tmp_path)
    assert result.verdict.mode == "dependency_issue"
    assert any("requests_oauthlib" in line for line in result.verdict.evidence)


def test_04_alternating_pass_fail_on_the_same_code_is_flakiness(tmp_path: Path) -> None:
    history = [record(1), record(2, passed=True), record(3), record(4, passed=True), record(5)]
    state = make_state(tmp_path, history, error_lines=["AssertionError: 1 != 2"])
    assert classify(state) == "test_flakiness"


def test_05_eaddrinuse_supports_flakiness_but_never_decides_alone() -> None:
    line = "OSError: [Errno 98] Address already in use"
    alone = Evidence(iteration=1, error_lines=(line,), history=(record(1, errors=[line]),))
    assert offline_mode(alone) == "code_error"
    confirmed = Evidence(
        iteration=1,
        error_lines=(line,),
        failing_tests=("tests/test_srv.py::test_listen",),
        history=(record(1, errors=[line]),),
        rerun=Rerun("pytest --lf", passed=True, exit_code=0, ran_tests=True),
    )
    found = detectors.detect_test_flakiness(confirmed, Notes())
    plain = attrs_evolve_without_signature(confirmed)
    assert found is not None
    assert found.mode == "test_flakiness"
    unsupported = detectors.detect_test_flakiness(plain, Notes())
    assert unsupported is not None
    assert found.confidence > unsupported.confidence
    assert any("port in use" in line for line in found.evidence)


def test_06_three_identical_failures_without_progress_are_an_infinite_loop(tmp_path: Path) -> None:
    history = [record(1), record(2), record(3)]
    state = make_state(tmp_path, history, error_lines=["AssertionError: 1 != 2"])
    assert classify(state) == "infinite_loop"


def test_07_the_engines_stuck_status_is_an_infinite_loop(tmp_path: Path) -> None:
    history = [
        record(1, errors=["E1"], failing=["a"], tree="t1"),
        record(2, errors=["E2"], failing=["b"], tree="t2", reason="stuck"),
    ]
    events = [{"type": "loop.stuck", "iteration": 2, "escalation": "stop", "streak": 5}]
    state = make_state(tmp_path, history, error_lines=["E2"], events=events, status="stuck")
    assert classify(state) == "infinite_loop"


def test_08_an_exhausted_status_is_context_exhaustion(tmp_path: Path) -> None:
    history = [record(1, error_kind="context_overflow", message="Prompt is too long")]
    state = make_state(tmp_path, history, error_lines=["AssertionError: 1 != 2"])
    assert classify(state) == "context_exhaustion"
    restarted = make_state(
        tmp_path / "other",
        [record(1, reason="context_exhaustion")],
        error_lines=["AssertionError: 1 != 2"],
        status="restarting",
    )
    assert classify(restarted) == "context_exhaustion"


def test_09_context_error_words_from_the_agent_are_context_exhaustion(tmp_path: Path) -> None:
    message = "API Error: prompt is too long: 210432 tokens > 200000 maximum"
    history = [record(1, error_kind="unknown", message=message)]
    state = make_state(tmp_path, history, error_lines=["AssertionError: 1 != 2"])
    assert classify(state) == "context_exhaustion"


def test_10_assertion_errors_are_a_code_error(tmp_path: Path) -> None:
    lines = ["E       assert 2 == 3", "FAILED tests/test_x.py::test_x - assert 2 == 3"]
    state = make_state(
        tmp_path, [record(1, errors=lines)], error_lines=lines, log=PYTEST_ASSERT_LOG
    )
    result = classify_offline(state_dir=state, workdir=tmp_path)
    assert result.verdict.mode == "code_error"
    assert "E       assert 2 == 3" in result.verdict.evidence


def test_11_a_missing_error_summary_is_a_code_error_that_says_so(tmp_path: Path) -> None:
    state = make_state(tmp_path, [record(1)])
    result = classify_offline(state_dir=state, workdir=tmp_path)
    assert result.verdict.mode == "code_error"
    assert any("error-summary.json is missing" in line for line in result.verdict.evidence)


def test_12_a_malformed_error_summary_is_a_code_error_that_says_so(tmp_path: Path) -> None:
    state = make_state(tmp_path, [record(1)], summary="{ not json")
    result = classify_offline(state_dir=state, workdir=tmp_path)
    assert result.verdict.mode == "code_error"
    assert any("malformed" in line for line in result.verdict.evidence)


# --- group 2: recovery strategies ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("case", "mode", "action"),
    [
        (13, "test_flakiness", "rerun_tests"),
        (14, "dependency_issue", "reinstall_deps"),
        (15, "infinite_loop", "reduce_and_redirect"),
        (16, "context_exhaustion", "restart_compressed"),
        (17, "code_error", "standard_retry"),
    ],
)
def test_13_to_17_each_mode_has_its_recovery(case: int, mode: str, action: str) -> None:
    plan = strategy(mode, max_restarts=3).to_json()
    assert plan["mode"] == mode
    assert plan["action"] == action
    assert set(plan) == {"mode", "action", "args", "description", "max_retries_override"}
    assert plan["description"]
    if mode == "context_exhaustion":
        assert plan["args"] == ["--max-restarts", "5"]
    if mode == "code_error":
        assert plan["args"] == []


def test_18_an_unknown_mode_gets_the_standard_retry_as_valid_json() -> None:
    plan = json.loads(json.dumps(strategy("martian_mode").to_json()))
    assert plan["action"] == "standard_retry"
    assert plan["mode"] == "martian_mode"


# --- group 3: the detectors ----------------------------------------------------------------------


def test_19_flakiness_detector_fires_on_alternating_history() -> None:
    history = (record(1, passed=True), record(2))
    evidence = Evidence(iteration=2, history=history, failing_tests=("tests/test_x.py::test_x",))
    found = detectors.detect_test_flakiness(evidence, Notes())
    assert found is not None
    assert "iteration 1" in found.evidence[0]


def test_20_flakiness_detector_is_silent_on_consistent_failures() -> None:
    history = (record(1), record(2), record(3))
    rerun = Rerun("pytest --lf", passed=False, exit_code=1, ran_tests=True)
    evidence = Evidence(iteration=3, history=history, rerun=rerun)
    assert detectors.detect_test_flakiness(evidence, Notes()) is None
    changed = (record(1, passed=True, tree="t1"), record(2, tree="t2"))
    assert detectors.detect_test_flakiness(Evidence(iteration=2, history=changed), Notes()) is None


def test_21_loop_detector_fires_on_three_identical_failures() -> None:
    evidence = Evidence(iteration=3, history=(record(1), record(2), record(3)))
    found = detectors.detect_infinite_loop(evidence, Settings(loop_window=3))
    assert found is not None
    assert "3 iterations in a row" in found.evidence[0]


def test_22_loop_detector_is_silent_on_varying_errors() -> None:
    history = tuple(
        record(i, errors=[f"Error {i}"], failing=[f"test_{i}"], tree=f"t{i}") for i in (1, 2, 3)
    )
    assert (
        detectors.detect_infinite_loop(Evidence(iteration=3, history=history), Settings()) is None
    )


def test_23_dependency_detector_fires_on_npm_eresolve() -> None:
    evidence = Evidence(iteration=1, error_lines=("npm ERR! code ERESOLVE",))
    found = detectors.detect_dependency_issue(evidence, Locality(None), Notes())
    assert found is not None
    assert found.evidence == ("[npm.error_code] npm ERR! code ERESOLVE",)


def test_24_dependency_detector_is_silent_on_assertion_errors() -> None:
    evidence = Evidence(iteration=1, error_lines=("E   assert 2 == 3",), output=PYTEST_ASSERT_LOG)
    assert detectors.detect_dependency_issue(evidence, Locality(None), Notes()) is None


def test_25_context_detector_fires_on_an_exhausted_status() -> None:
    evidence = Evidence(iteration=1, agent_error_kind="context_overflow", history=(record(1),))
    found = detectors.detect_context_exhaustion(evidence)
    assert found is not None
    assert found.priority == 400


def test_26_context_detector_is_silent_while_running_normally() -> None:
    evidence = Evidence(iteration=1, history=(record(1),), loop_status="running")
    assert detectors.detect_context_exhaustion(evidence) is None


# --- group 4: integration ------------------------------------------------------------------------


def test_27_failure_mode_json_is_well_formed(tmp_path: Path) -> None:
    history = [record(1), record(2), record(3)]
    state = make_state(tmp_path, history, error_lines=["AssertionError: 1 != 2"])
    result = classify_offline(state_dir=state, workdir=tmp_path)
    path = write_failure_mode(state, result.verdict, result.recovery.to_json())
    data = json.loads(path.read_text(encoding="utf-8"))
    assert path.name == FAILURE_MODE_FILE
    assert data["mode"] == "infinite_loop"
    assert isinstance(data["confidence"], float)
    assert 0 < data["confidence"] <= 1
    assert data["evidence"]
    assert all(isinstance(line, str) for line in data["evidence"])
    assert data["detector"] == "builtin.loop"
    assert isinstance(data["timestamp"], float)
    assert data["recovery"]["action"] == "reduce_and_redirect"
    assert not list(state.glob("*.tmp*"))  # written through a temp file and a rename


def test_28_dependency_beats_code_error_flakiness_and_loops_on_mixed_signals(
    tmp_path: Path,
) -> None:
    lines = [
        "E   ModuleNotFoundError: No module named 'httpx'",
        "E       assert 2 == 3",
        "OSError: [Errno 98] Address already in use",
    ]
    history = [record(i, errors=lines) for i in (1, 2, 3)]
    state = make_state(tmp_path, history, error_lines=lines)
    result = classify_offline(state_dir=state, workdir=tmp_path)
    assert result.verdict.mode == "dependency_issue"
    assert [c.mode for c in result.verdict.candidates][:2] == ["dependency_issue", "infinite_loop"]


# --- helpers --------------------------------------------------------------------------------------


def offline_mode(evidence: Evidence) -> str:
    from loopctl_failure_classifier.arbitration import classify as run

    return run(evidence).mode


def attrs_evolve_without_signature(evidence: Evidence) -> Evidence:
    import attrs

    return attrs.evolve(evidence, error_lines=("AssertionError: boom",))


def test_state_dir_reader_survives_a_missing_directory(tmp_path: Path) -> None:
    evidence = from_state_dir(tmp_path / "nope")
    assert evidence.problems
    assert "not a directory" in evidence.problems[0]
