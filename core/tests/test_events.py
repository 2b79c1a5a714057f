"""Every event the engine writes is declared in the published schema, and real runs validate."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest

import loopctl.engine
from loopctl import hookimpl
from loopctl.events import CORE_EVENTS, define_event, event_schema
from loopctl.model import Decision
from loopctl.testing import run_loop

FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}


def test_every_event_the_engine_emits_is_declared():
    source = Path(loopctl.engine.__file__).read_text()
    emitted = set(re.findall(r'emit\(\s*"([a-z_.]+)"', source))
    emitted |= set(re.findall(r'"(loop\.(?:start|resume))"', source))
    assert emitted, "the pattern found no emit() calls"
    assert emitted <= set(CORE_EVENTS), sorted(emitted - set(CORE_EVENTS))


@pytest.fixture
def calc(loopctl_project):
    loopctl_project.write("calc.py", "def add(a, b):\n    return a - b\n")
    loopctl_project.write(
        "test_calc.py",
        "import unittest\nfrom calc import add\n\nclass T(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n",
    )
    loopctl_project.commit("calc")
    return loopctl_project


class Noisy:
    """A plugin that declares one event, writes it, and fails in one hook."""

    @hookimpl
    def register_event_schemas(self):
        return {"noisy.seen": define_event("A test event.", {"count": {"type": "integer"}})}

    @hookimpl
    def after_iteration(self, loop, record):
        loop.emit("noisy.seen", count=loop.iteration)
        if loop.iteration == 1:
            return Decision.restart("test", "once")
        return None

    @hookimpl
    def before_iteration(self, loop):
        raise RuntimeError("noisy bug")


@pytest.mark.slow
def test_a_real_run_validates_line_by_line(calc):
    result = run_loop(
        calc,
        "make add add",
        turns=[[{"say": "x"}, {"usage": {"input_tokens": 10}}], [FIX]],
        plugins={"noisy": Noisy()},
        config={"stuck": {"window": 2}},
    )
    assert result.status == "complete"
    schema = event_schema({"noisy.seen": Noisy().register_event_schemas()["noisy.seen"]})
    validator = jsonschema.Draft202012Validator(schema)
    types = set()
    for line in result.events:
        validator.validate(line)
        types.add(line["type"])
    assert {"plugin.error", "loop.restart", "noisy.seen", "agent.end", "tests.end"} <= types


def test_a_wrong_field_type_fails_validation():
    validator = jsonschema.Draft202012Validator(event_schema())
    good = {"type": "tests.start", "ts": 1.0, "iteration": 1, "command": "pytest"}
    validator.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**good, "command": 5})
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({"type": "tests.start", "iteration": 1, "command": "x"})  # no ts
    validator.validate({"type": "someone.elses", "ts": 2.0, "anything": [1]})  # undeclared: fine
