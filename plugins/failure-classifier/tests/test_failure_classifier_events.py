"""The plugin's events validate against the schema it publishes (``loopctl events schema``)."""

from __future__ import annotations

from typing import Any

import pytest
from failure_classifier_testkit import PLUGIN_NAME

from loopctl.testing import Project
from loopctl_failure_classifier import plugin
from loopctl_failure_classifier.events import (
    CLASSIFIED,
    PREFIX,
    RECOVERY_APPLIED,
    RECOVERY_LIMIT,
    event_schemas,
)


def _validator(jsonschema: Any) -> Any:
    """A validator of this plugin's events, each by the schema it publishes."""
    branches = [
        {
            "if": {"properties": {"type": {"const": kind}}},
            "then": {
                "type": "object",
                "properties": spec["properties"],
                "required": spec["required"],
            },
        }
        for kind, spec in event_schemas().items()
    ]
    return jsonschema.Draft202012Validator({"allOf": branches})


def test_every_event_of_a_loop_validates(loopctl_project: Project, run_loop: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
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
    validator = _validator(jsonschema)
    ours = [e for e in result.events if e["type"] in event_schemas()]
    assert {e["type"] for e in ours} >= {
        CLASSIFIED,
        RECOVERY_APPLIED,
        RECOVERY_LIMIT,
    }
    for event in result.events:
        validator.validate(event)


def test_a_wrong_event_does_not_validate() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    validator = _validator(jsonschema)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"type": CLASSIFIED, "ts": 1.0, "mode": "x"})


def test_every_event_is_namespaced_and_published_as_a_constant() -> None:
    import loopctl_failure_classifier as fc

    names = set(event_schemas())
    assert all(name.startswith(PREFIX) for name in names)
    assert names == {getattr(fc, constant) for constant in fc._EVENT_NAMES}
