"""The plugin's events validate against the schema it publishes (``loopctl events schema``)."""

from __future__ import annotations

from typing import Any

import pytest
from failure_classifier_testkit import PLUGIN_NAME

from loopctl.events import event_schema
from loopctl.testing import Project
from loopctl_failure_classifier import plugin
from loopctl_failure_classifier.events import event_schemas


def test_every_event_of_a_loop_validates(loopctl_project: Project, run_loop: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    loopctl_project.write("test_app.py", "import yaml_loopctl_missing\n")
    loopctl_project.commit("tests")
    result = run_loop(
        "fix it",
        turns=[[{"say": "hi"}]],
        plugins={PLUGIN_NAME: plugin},
        config={"limits": {"max_iterations": 3}},
    )
    validator = jsonschema.Draft202012Validator(event_schema(event_schemas()))
    ours = [e for e in result.events if e["type"] in event_schemas()]
    assert {e["type"] for e in ours} >= {
        "loop.failure_classified",
        "loop.recovery_applied",
        "failure_classifier.recovery_limit",
    }
    for event in result.events:
        validator.validate(event)


def test_a_wrong_event_does_not_validate() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(event_schema(event_schemas()))
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"type": "loop.failure_classified", "ts": 1.0, "mode": "x"})
