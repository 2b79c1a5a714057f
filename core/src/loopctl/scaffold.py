"""``loopctl plugins new``: write a new plugin distribution that installs and passes its tests.

The generated plugin is small but whole: a pyproject with the entry point, a plugin module
with a config class and hook implementations, an events declaration, a README, and tests that
run real loops with :mod:`loopctl.testing` and the conformance suite. ``--classifier`` writes a
custom failure classifier for loopctl-failure-classifier instead.
"""

from __future__ import annotations

import re
from pathlib import Path

from loopctl._version import __version__

_NAME = re.compile(r"\A[a-z][a-z0-9]*(?:-[a-z0-9]+)*\Z")


class ScaffoldError(ValueError):
    """The plugin cannot be written (a bad name, a directory in the way)."""


def plugin_name(raw: str) -> str:
    """The entry-point name for ``raw`` (a ``loopctl-`` prefix is dropped), or ScaffoldError."""
    name = raw.strip().lower()
    name = name.removeprefix("loopctl-")
    if not _NAME.match(name):
        raise ScaffoldError(
            f"{raw!r} is not a usable plugin name: use lowercase letters, digits and single "
            "hyphens, starting with a letter (e.g. 'flaky-db')"
        )
    return name


def write_plugin(parent: Path, raw_name: str, *, classifier: bool = False) -> list[Path]:
    """Write ``loopctl-NAME/`` under ``parent``; returns the files written (the directory first).

    Refuses (ScaffoldError) when the directory already exists: nothing is overwritten.
    """
    name = plugin_name(raw_name)
    package = "loopctl_" + name.replace("-", "_")
    root = Path(parent) / f"loopctl-{name}"
    if root.exists():
        raise ScaffoldError(f"{root} already exists; choose another name or directory")
    values = {
        "name": name,
        "package": package,
        "slug": name.replace("-", "_"),
        "title": name.replace("-", " ").capitalize(),
        "core": __version__,
    }
    if classifier:
        templates = _CLASSIFIER
        values["what"] = "a custom failure classifier for loopctl"
        values["depends"] = "loopctl-failure-classifier>=0.1"
    else:
        templates = _PLUGIN
        values["what"] = "a loopctl plugin"
        values["depends"] = "attrs>=23.1"
    files = {**_COMMON, **templates}
    written = [root]
    for relative, template in files.items():
        path = root / relative.format(**values)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_fill(template, values), encoding="utf-8")
        written.append(path)
    return written


def _fill(template: str, values: dict[str, str]) -> str:
    """Replace ``{{key}}`` markers (templates hold Python and TOML braces of their own)."""
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values[m.group(1)], template)


_COMMON = {
    "src/{package}/__init__.py": '''"""loopctl-{{name}}: a loopctl plugin."""

__version__ = "0.1.0"
''',
    "tests/test_{slug}_conformance.py": '''"""loopctl's conformance suite: hooks match their specs, odd input is survived, config
errors name the key."""

from loopctl.testing.conformance import PluginConformance

from {{package}} import plugin


class TestConformance(PluginConformance):
    plugin = plugin
    name = "{{name}}"
''',
}

_PYPROJECT = """[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "loopctl-{{name}}"
version = "0.1.0"
description = "{{title}}: {{what}}."
readme = "README.md"
requires-python = ">=3.10"
dependencies = ["loopctl-core>={{core}}", "{{depends}}"]

[project.optional-dependencies]
test = ["pytest>=7.4"]

[project.entry-points."loopctl.plugins"]
{{name}} = "{{package}}.plugin"

[tool.hatch.build.targets.wheel]
packages = ["src/{{package}}"]
"""

_PLUGIN = {
    "pyproject.toml": _PYPROJECT,
    "README.md": """# loopctl-{{name}}

A [loopctl](https://github.com/loopctl/loopctl) plugin. It adds a reminder to every agent
prompt and emits `{{name}}.failure_seen` (`plugin.FAILURE_SEEN`) after each failed iteration.

    pip install -e .
    loopctl plugins list        # {{name}} is listed as enabled

## Configuration (`[plugins.{{name}}]` in loopctl.toml)

| key | default | meaning |
|---|---|---|
| `reminder` | `"Run the tests before you say you are done."` | Added to every prompt; `""` adds nothing. |

## Tests

    pip install -e '.[test]'
    pytest
""",
    "src/{package}/plugin.py": '''"""The hooks of loopctl-{{name}}. Keep this module cheap to import: `loopctl plugins list`
imports every enabled plugin, so import anything heavy inside the hooks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from loopctl import PromptSection, StashKey, hookimpl

if TYPE_CHECKING:
    from loopctl import IterationRecord, Loop, TestRun

NAME = "{{name}}"
#: Every event of this plugin starts with its name and a dot. Publish the names as constants
#: like this one, so other plugins (and your tests) match on them, never on copies.
FAILURE_SEEN = f"{NAME}.failure_seen"

#: Per-run state lives in ``loop.stash`` under a key of your own, never in module globals:
#: here, how many iterations of this run ended with failing tests.
FAILURES = StashKey[int]()


@attrs.define(frozen=True)
class Config:
    """``[plugins.{{name}}]`` in loopctl.toml."""

    #: Added to every prompt; "" adds nothing.
    reminder: str = "Run the tests before you say you are done."


@hookimpl
def register_config() -> dict[str, type]:
    return {NAME: Config}


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl import EventField, define_event

    return {
        FAILURE_SEEN: define_event(
            "An iteration ended with failing tests.",
            {"failing": EventField.INT, "failures_so_far": EventField.INT},
            line="{{name}}: {failing} failing test(s)",
        )
    }


def _config(loop: Loop) -> Config:
    try:
        config = loop.plugin_config(NAME)
    except KeyError:  # registered without its config (a test harness): the defaults
        return Config()
    return config if isinstance(config, Config) else Config()


@hookimpl
def compose_prompt(loop: Loop) -> PromptSection | None:
    reminder = _config(loop).reminder
    if not reminder:
        return None
    return PromptSection(title="Reminder", body=reminder, priority=40)


@hookimpl
def after_iteration(loop: Loop, record: IterationRecord, test_run: TestRun | None) -> None:
    # Called for every iteration, however it ended (``record.ending``); ``test_run`` is the
    # iteration's own test run, None when the tests did not run (the agent failed first).
    if test_run is None or test_run.passed:
        return
    failures = loop.stash.get(FAILURES, 0) + 1
    loop.stash[FAILURES] = failures
    loop.emit(FAILURE_SEEN, failing=len(test_run.failing_tests), failures_so_far=failures)
''',
    "tests/test_{slug}.py": '''"""loopctl-{{name}} in real loops: a real project, the scripted agent, a real test command."""

from __future__ import annotations

import pytest
from loopctl.testing import Project, RunResult

from {{package}} import plugin

BUGGY = "def add(a, b):\\n    return a - b\\n"
TEST = (
    "import unittest\\nfrom calc import add\\n\\n\\n"
    "class CalcTest(unittest.TestCase):\\n"
    "    def test_add(self):\\n"
    "        self.assertEqual(add(1, 2), 3)\\n"
)
FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}


@pytest.fixture
def project(loopctl_project: Project) -> Project:
    loopctl_project.write("calc.py", BUGGY)
    loopctl_project.write("test_calc.py", TEST)
    loopctl_project.commit("a bug to fix")
    return loopctl_project


def test_the_reminder_reaches_the_prompt(project: Project, run_loop) -> None:
    result: RunResult = run_loop(
        "make add() add",
        turns=[[{"say": "looking"}], [FIX]],
        plugins={"{{name}}": plugin},
        config={"plugins": {"{{name}}": {"reminder": "Keep add() fast."}}},
    )
    assert result.status == "complete"
    prompt = (result.state_dir / "logs" / "iteration-0001.prompt.md").read_text("utf-8")
    assert "Keep add() fast." in prompt
    seen = result.events_of(plugin.FAILURE_SEEN)
    assert [(e["failing"], e["failures_so_far"]) for e in seen] == [(1, 1)]


def test_an_empty_reminder_adds_no_section(project: Project, run_loop) -> None:
    result = run_loop(
        "make add() add",
        turns=[[FIX]],
        plugins={"{{name}}": plugin},
        config={"plugins": {"{{name}}": {"reminder": ""}}},
    )
    prompt = (result.state_dir / "logs" / "iteration-0001.prompt.md").read_text("utf-8")
    assert "Reminder" not in prompt
''',
}

_CLASSIFIER = {
    "pyproject.toml": _PYPROJECT,
    "README.md": """# loopctl-{{name}}

A custom failure classifier for [loopctl](https://github.com/loopctl/loopctl)'s failure
classifier. When the tests fail because a database is locked by another process, it names the
failure mode `{{slug}}` and tells the agent what to do, instead of letting it rewrite correct
code. Edit `PATTERN`, `MODE` and the recovery in `src/{{package}}/plugin.py` for your own case.

    pip install -e .
    loopctl plugins list        # {{name}} is listed as enabled
    loopctl classify            # which mode the last failure was given, and why

## Tests

    pip install -e '.[test]'
    pytest
""",
    "src/{package}/plugin.py": '''"""A custom failure classifier: two hooks of loopctl-failure-classifier.

* ``register_failure_modes`` declares the mode and its recovery;
* ``classify_failure`` proposes the mode when the evidence shows it.

Both take and return plain data, so this module imports nothing from the failure classifier;
``optionalhook=True`` lets it load (and do nothing) where that plugin is not installed.
"""

from __future__ import annotations

import re
from typing import Any

from loopctl import hookimpl

MODE = "{{slug}}"
#: What the failure looks like in the test output.
PATTERN = re.compile(r"database is locked|could not obtain lock", re.IGNORECASE)


@hookimpl(optionalhook=True)
def register_failure_modes() -> dict[str, dict[str, Any]]:
    return {
        MODE: {
            "description": "The tests failed because another process holds the database lock",
            "action": "wait_and_retry",
            "prompt": (
                "The tests failed on a locked database, not on your code. Do not change the "
                "code for it: find what holds the lock (a server left running, an open shell) "
                "and stop it, or make the tests use their own database file."
            ),
            "not_agents_fault": True,
            "max_recoveries": 3,
        }
    }


@hookimpl(optionalhook=True)
def classify_failure(evidence: Any) -> dict[str, Any] | None:
    if getattr(evidence, "tests_passed", False):
        return None
    output = str(getattr(evidence, "output", ""))
    lines = [*getattr(evidence, "error_lines", ()), *output.splitlines()]
    found = [line.strip() for line in lines if PATTERN.search(line)]
    if not found:
        return None
    return {
        "mode": MODE,
        "confidence": 0.9,
        "evidence": ["the test output says the database is locked:", *found[:3]],
        "detector": "{{name}}",
        # above code errors and loops (custom classifiers default to 250), below missing
        # dependencies (300)
        "priority": 260,
    }
''',
    "tests/test_{slug}.py": '''"""The classifier on its own, and through loopctl-failure-classifier in a real loop."""

from __future__ import annotations

import shlex
import sys
from types import SimpleNamespace

from loopctl.testing import Project

from {{package}} import plugin

LOCKED = "sqlite3.OperationalError: database is locked"


def test_a_locked_database_is_named() -> None:
    evidence = SimpleNamespace(tests_passed=False, error_lines=(LOCKED,), output=LOCKED)
    found = plugin.classify_failure(evidence)
    assert found is not None
    assert found["mode"] == plugin.MODE
    assert LOCKED in found["evidence"]


def test_other_failures_are_left_to_the_others() -> None:
    failing = SimpleNamespace(tests_passed=False, error_lines=("1 != 2",), output="")
    assert plugin.classify_failure(failing) is None
    passing = SimpleNamespace(tests_passed=True, output=LOCKED)
    assert plugin.classify_failure(passing) is None


def test_the_classifier_picks_the_mode(loopctl_project: Project, run_loop) -> None:
    import loopctl_failure_classifier.plugin as failure_classifier
    from loopctl_failure_classifier.events import CLASSIFIED

    loopctl_project.write("check.py", f"import sys\\nprint({LOCKED!r})\\nsys.exit(1)\\n")
    loopctl_project.commit("a test run that hits a locked database")
    result = run_loop(
        "make the tests pass",
        turns=[[{"say": "looking"}]],
        test_cmd=f"{shlex.quote(sys.executable)} check.py",
        plugins={"failure-classifier": failure_classifier, "{{name}}": plugin},
        config={"limits": {"max_iterations": 1}},
    )
    classified = result.events_of(CLASSIFIED)
    # classified before the first turn and after it, both times as this plugin's mode
    assert {e["mode"] for e in classified} == {plugin.MODE}
''',
}


__all__ = ["ScaffoldError", "plugin_name", "write_plugin"]
