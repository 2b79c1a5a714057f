"""The conformance suite catches what it promises to catch."""

from __future__ import annotations

import sys
from pathlib import Path

import attrs
import pytest

from loopctl import hookimpl
from loopctl.testing.conformance import (
    SCENARIOS,
    config_problems,
    event_problems,
    heavy_imports,
    hook_problems,
    survival_problems,
)


@attrs.define
class GoodConfig:
    threshold: int = 3


class Good:
    @hookimpl
    def register_config(self):
        return {"good": GoodConfig}

    @hookimpl
    def after_iteration(self, loop, record):
        return None


@pytest.mark.slow
def test_a_well_behaved_plugin_has_no_problems(tmp_path: Path) -> None:
    assert hook_problems(Good(), "good") == []
    assert survival_problems(Good(), "good", tmp_path) == []
    assert config_problems(Good(), "good", tmp_path) == []
    assert event_problems(Good(), "good") == []


def test_events_outside_the_plugins_namespace_are_caught(tmp_path: Path) -> None:
    from loopctl import define_event

    class Squatter:
        @hookimpl
        def register_event_schemas(self):
            return {
                "squatter.seen": define_event("fine", {}),
                "loop.context_usage": define_event("in loopctl's namespace", {}),
            }

        @hookimpl
        def after_iteration(self, loop):
            loop.emit("squatter.ok")
            loop.emit("flaky_found")

    assert event_problems(Squatter(), "squatter") == [
        "declared event 'loop.context_usage' is not namespaced: it must start with 'squatter.'"
    ]
    written = survival_problems(Squatter(), "squatter", tmp_path, scenarios=SCENARIOS[:1])
    assert written == [
        "agent crashes: event 'flaky_found' is not namespaced: it must start with 'squatter.'"
    ]


def test_a_misspelled_hook_and_an_argument_no_hook_passes_are_caught() -> None:
    class Misspelled:
        @hookimpl
        def after_iteraton(self, loop, record):
            return None

    class ExtraArgument:
        @hookimpl
        def on_failure(self, loop, record, verdict):
            return None

    assert "after_iteraton" in " ".join(hook_problems(Misspelled(), "misspelled"))
    assert "verdict" in " ".join(hook_problems(ExtraArgument(), "extra"))


@pytest.mark.slow
def test_a_plugin_that_trips_over_odd_input_is_caught(tmp_path: Path) -> None:
    class Fragile:
        @hookimpl
        def on_failure(self, loop, record):
            return record.failing_tests[0].upper()  # no test names when the command is missing

    problems = survival_problems(Fragile(), "fragile", tmp_path)
    assert any("test command missing" in p and "IndexError" in p for p in problems)


def test_a_plugin_importing_the_cli_stack_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "loopctl_heavy_plugin.py").write_text("import typer\n", encoding="utf-8")
    (tmp_path / "loopctl_light_plugin.py").write_text("import json\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert heavy_imports("loopctl_heavy_plugin") == ["typer"]
    assert heavy_imports("loopctl_light_plugin") == []
    assert sys.modules.get("loopctl_heavy_plugin") is None
