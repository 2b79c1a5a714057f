"""Helpers for the failure classifier's tests: state directories written the way the engine
writes them (iterations.jsonl, error-summary.json, events.jsonl, loop-state.md, test logs)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from loopctl import IterationRecord, fingerprint

PLUGIN_NAME = "failure-classifier"


def record(
    iteration: int,
    *,
    passed: bool = False,
    errors: Sequence[str] = ("AssertionError: 1 != 2",),
    failing: Sequence[str] = ("tests/test_x.py::test_x",),
    tree: str | None = "tree-a",
    commit: str | None = "c0",
    restarts: int = 0,
    error_kind: str | None = None,
    message: str = "",
    reason: str = "",
    annotations: Mapping[str, Any] | None = None,
) -> IterationRecord:
    """An iteration record; a passing one has no errors and no failing tests."""
    agent = attrs.evolve(
        IterationRecord(iteration=0).agent,
        outcome="ok" if error_kind is None else "error",
        error_kind=error_kind,
        message=message,
    )
    return IterationRecord(
        iteration=iteration,
        restarts=restarts,
        tests_passed=passed,
        test_exit_code=0 if passed else 1,
        error_count=0 if passed else len(errors),
        error_fingerprint="" if passed else fingerprint(errors),
        failing_tests=[] if passed else list(failing),
        tree_hash=tree,
        commit=commit,
        agent=agent,
        reason=reason,
        annotations=dict(annotations or {}),
    )


def _json_record(rec: IterationRecord) -> dict[str, Any]:
    """The record as iterations.jsonl holds it."""
    return attrs.asdict(rec, value_serializer=lambda _i, _a, v: getattr(v, "value", v))


def make_state(
    root: Path,
    records: Sequence[IterationRecord],
    *,
    error_lines: Sequence[str] | None = None,
    log: str | None = None,
    events: Sequence[Mapping[str, Any]] = (),
    status: str = "running",
    workdir: Path | None = None,
    summary: str | None = None,
) -> Path:
    """Write a state directory for ``records``; the last record is the current iteration."""
    state = root / ".loopctl"
    (state / "logs").mkdir(parents=True, exist_ok=True)
    with open(state / "iterations.jsonl", "w", encoding="utf-8") as out:
        for rec in records:
            out.write(json.dumps(_json_record(rec)) + "\n")
    last = records[-1].iteration if records else 0
    if summary is not None:
        (state / "error-summary.json").write_text(summary, encoding="utf-8")
    elif error_lines is not None:
        summary_data = {
            "iteration": last,
            "error_count": len(error_lines),
            "error_lines": list(error_lines),
            "test_cmd": "pytest -q",
        }
        (state / "error-summary.json").write_text(json.dumps(summary_data), encoding="utf-8")
    if log is not None:
        (state / "logs" / f"iteration-{last:04d}.tests.log").write_text(log, encoding="utf-8")
    with open(state / "events.jsonl", "w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps({"ts": 1.0, **event}) + "\n")
    front = {
        "goal": "g",
        "original_goal": "g",
        "status": status,
        "iteration": last,
        "test_cmd": "pytest -q",
        "workdir": str(workdir or root),
    }
    lines = [f"{key}: {json.dumps(value)}" for key, value in front.items()]
    (state / "loop-state.md").write_text("---\n" + "\n".join(lines) + "\n---\n", "utf-8")
    return state


PYTEST_ASSERT_LOG = """\
============================= test session starts ==============================
collected 1 item

tests/test_x.py F                                                        [100%]

=================================== FAILURES ===================================
___________________________________ test_x ____________________________________

    def test_x():
>       assert add(1, 1) == 3
E       assert 2 == 3

tests/test_x.py:4: AssertionError
=========================== short test summary info ============================
FAILED tests/test_x.py::test_x - assert 2 == 3
============================== 1 failed in 0.02s ===============================
"""


def pytest_import_error_log(module: str) -> str:
    return f"""\
============================= test session starts ==============================
collected 0 items / 1 error

==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_x.py _______________________
ImportError while importing test module 'tests/test_x.py'.
tests/test_x.py:1: in <module>
    import {module}
E   ModuleNotFoundError: No module named '{module}'
=========================== short test summary info ============================
ERROR tests/test_x.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.05s ===============================
"""


def unittest_project(project: Any, test_body: str, module: str = "test_app.py") -> None:
    """A project whose unittest suite is ``test_body`` (one TestCase method body per test)."""
    project.write(module, test_body)
    project.commit("tests")


def events_of(result: Any, kind: str) -> list[dict[str, Any]]:
    return [e for e in result.events if e.get("type") == kind]
