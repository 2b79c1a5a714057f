"""The published event schema, and the small validator the plugin ships for it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

import loopctl_context_errors
from loopctl_context_errors.events import (
    CONTEXT_GENERATED,
    EVENT_TYPES,
    MEMORY_SPOOL,
    MEMORY_UNAVAILABLE,
    SUGGESTION_RECORDED,
    SUGGESTION_RESOLVED,
    load_schema,
    validate,
)

GOOD = {
    CONTEXT_GENERATED: {
        "type": CONTEXT_GENERATED, "ts": 1.5, "iteration": 2, "stage": "tests",
        "category": "TYPE_ERROR", "rule": "type.checker", "signature": "0123456789abcdef",
        "runner": "mypy", "decisive_lines": ["app.py:2: error: x  [assignment]"], "failing": 0,
        "similar_count": 1, "fixed_similar_count": 0, "actions_count": 3,
        "memory_status": "ok", "memory_ms": 1.2, "report_path": "/s/x.md",
        "duration_ms": 3.0,
    },
    SUGGESTION_RECORDED: {
        "type": SUGGESTION_RECORDED, "ts": 2.0, "iteration": 2, "suggestion_id": "ab-0002-tests",
        "stage": "tests", "category": "TYPE_ERROR", "rule": "type.checker",
        "actions": ["one", "two"], "action_keys": ["a", "b"], "failing_tests": [],
        "signature": "0123456789abcdef",
    },
    SUGGESTION_RESOLVED: {
        "type": SUGGESTION_RESOLVED, "ts": 3.0, "iteration": 3, "suggestion_id": "ab-0002-tests",
        "resolved": True, "effective": False, "reason": "still_failing", "stage": "tests",
        "category": "TYPE_ERROR", "suggested_at_iteration": 2, "passed_tests": [],
        "still_failing": ["t"],
    },
    MEMORY_UNAVAILABLE: {
        "type": MEMORY_UNAVAILABLE, "ts": 4.0, "iteration": 1, "memory_status": "unavailable",
        "memory_reason": "auth", "location": "postgresql://loop@db:5432/mem",
        "summary": "warning: failure memory postgresql://loop@db:5432/mem: wrong password "
        "(going on without memory)",
    },
    MEMORY_SPOOL: {
        "type": MEMORY_SPOOL, "ts": 5.0, "iteration": 3, "state": "written", "records": 2,
        "location": "postgresql://loop@db:5432/mem", "spool": "/h/.local/share/loopctl/spool/a.jsonl",
        "summary": "failure memory postgresql://loop@db:5432/mem: wrote the 2 record(s) kept in "
        "/h/.local/share/loopctl/spool/a.jsonl while it could not be reached",
    },
}  # fmt: skip


def test_schema_registers_exactly_the_plugins_namespaced_event_names() -> None:
    schema = load_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert tuple(schema["properties"]["type"]["enum"]) == EVENT_TYPES
    assert set(EVENT_TYPES) <= set(schema["$defs"])
    assert EVENT_TYPES == (
        "context-errors.context_generated",
        "context-errors.suggestion_recorded",
        "context-errors.suggestion_resolved",
        "context-errors.memory_unavailable",
        "context-errors.memory_spool",
    )
    # published from the package, for other plugins to subscribe through
    assert loopctl_context_errors.CONTEXT_GENERATED == CONTEXT_GENERATED
    assert loopctl_context_errors.SUGGESTION_RECORDED == SUGGESTION_RECORDED
    assert loopctl_context_errors.SUGGESTION_RESOLVED == SUGGESTION_RESOLVED
    assert loopctl_context_errors.MEMORY_UNAVAILABLE == MEMORY_UNAVAILABLE
    assert loopctl_context_errors.MEMORY_SPOOL == MEMORY_SPOOL
    assert loopctl_context_errors.EVENT_TYPES == EVENT_TYPES
    # shipped as package data next to the module
    path = Path(loopctl_context_errors.__file__).parent / "events.schema.json"
    assert json.loads(path.read_text(encoding="utf-8")) == schema


@pytest.mark.parametrize("event_type", EVENT_TYPES)
def test_valid_events_pass(event_type: str) -> None:
    assert validate(GOOD[event_type]) == []


@pytest.mark.parametrize(
    ("event_type", "change", "problem"),
    [
        (CONTEXT_GENERATED, {"category": "OOPS"}, "is not one of"),
        (CONTEXT_GENERATED, {"actions_count": 7}, "maximum"),
        (CONTEXT_GENERATED, {"similar_count": "1"}, "expected integer"),
        (CONTEXT_GENERATED, {"surprise": 1}, "unexpected key"),
        (CONTEXT_GENERATED, {"decisive_lines": ["x"] * 9}, "more than 8"),
        (SUGGESTION_RECORDED, {"actions": ["only one"]}, "fewer than 2"),
        (SUGGESTION_RECORDED, {"signature": 7}, "expected string"),
        (SUGGESTION_RESOLVED, {"resolved": False}, "must be True"),
        (SUGGESTION_RESOLVED, {"reason": "guess"}, "is not one of"),
        (SUGGESTION_RESOLVED, {"effective": None}, "expected boolean"),
        (CONTEXT_GENERATED, {"memory_status": "fine"}, "is not one of"),
        (MEMORY_SPOOL, {"state": "gone"}, "is not one of"),
        (MEMORY_SPOOL, {"records": 0}, "minimum"),
    ],
)
def test_invalid_events_are_named(event_type: str, change: dict, problem: str) -> None:  # type: ignore[type-arg]
    event = {**copy.deepcopy(GOOD[event_type]), **change}
    errors = validate(event)
    assert errors
    assert any(problem in error for error in errors), errors


def test_missing_required_keys_and_unsupported_keywords() -> None:
    event = dict(GOOD[SUGGESTION_RESOLVED])
    del event["effective"]
    assert any("missing required key 'effective'" in e for e in validate(event))
    with pytest.raises(ValueError, match="unsupported"):
        validate({"type": "x"}, {"type": "object", "patternProperties": {}})


def test_schema_agrees_with_jsonschema_when_installed() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for event in GOOD.values():
        assert list(validator.iter_errors(event)) == []
    bad = {**GOOD[SUGGESTION_RESOLVED], "reason": "guess"}
    assert list(validator.iter_errors(bad))
    assert validate(bad)


@pytest.mark.slow
def test_declared_to_loopctl_and_every_written_event_validates(
    loopctl_project,
    run_loop,  # type: ignore[no-untyped-def]
) -> None:
    """A real loop: every line this plugin writes validates against the published schema and
    against loopctl's combined events.jsonl schema (the register_event_schemas hook)."""
    import loopctl_context_errors.plugin as plugin
    from loopctl.testing import event_schema
    from loopctl_context_errors.events import core_event_schemas

    loopctl_project.write("calc.py", "def add(a, b):\n    return a - b\n")
    loopctl_project.write(
        "test_calc.py",
        "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    )
    loopctl_project.commit("calc")
    result = run_loop(
        "fix add",
        turns=[[{"say": "x"}], [{"say": "still"}], [{"replace": "calc.py", "old": "a - b",
                                                     "new": "a + b"}]],
        plugins={"context-errors": plugin},
    )  # fmt: skip
    assert result.status == "complete"
    declared = plugin.register_event_schemas()
    assert set(declared) == set(EVENT_TYPES) == set(core_event_schemas())
    combined = event_schema(declared)
    mine = [event for event in result.events if event["type"] in EVENT_TYPES]
    # all but the warning that the memory cannot be used and the spool's lines
    # (test_context_errors_loop has them)
    assert {event["type"] for event in mine} == set(EVENT_TYPES) - {
        MEMORY_UNAVAILABLE,
        MEMORY_SPOOL,
    }
    # the sets of the failure before the first turn, of iteration 1's and of iteration 2's
    assert len([e for e in mine if e["type"] == SUGGESTION_RESOLVED]) == 3
    for event in mine:
        assert validate(event) == [], event
        assert validate(event, combined) == [], event
    jsonschema = pytest.importorskip("jsonschema")
    for schema, events in ((load_schema(), mine), (combined, result.events)):
        validator = jsonschema.Draft202012Validator(schema)
        for event in events:
            assert list(validator.iter_errors(event)) == [], event
