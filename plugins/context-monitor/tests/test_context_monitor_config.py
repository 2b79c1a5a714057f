"""Config validation (errors name the key), the plugin's registration, and its event schemas."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from context_monitor_testkit import PLUGIN, usage

import loopctl_context_monitor
import loopctl_context_monitor.monitor
from loopctl import ConfigError, load_project
from loopctl.testing import Project, RunResult, event_schema, hook_relay
from loopctl_context_monitor import events as ev
from loopctl_context_monitor import plugin
from loopctl_context_monitor.config import ContextMonitorConfig
from loopctl_context_monitor.events import event_schemas

PREFIX = "tool.loopctl.plugins.context-monitor"


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


def load(data: dict[str, Any], tmp_path: Path) -> ContextMonitorConfig:
    """The section as ``loopctl run`` reads it from pyproject.toml (through the public
    ``loopctl.load_project``)."""
    lines = ["[tool.loopctl.plugins.context-monitor]"]
    lines += [f"{key} = {_toml(value)}" for key, value in data.items()]
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config: ContextMonitorConfig = load_project(tmp_path).plugin_config(
        "context-monitor", ContextMonitorConfig
    )
    return config


def test_defaults(tmp_path: Path) -> None:
    config = load({}, tmp_path)
    assert (config.warn_threshold, config.hard_threshold) == (0.70, 0.90)
    assert config.window is None
    assert config.summary_budget_chars == 2000
    assert config.on_interrupted_turn == "flag"
    assert config.graceful_handoff is False


@pytest.mark.parametrize(
    ("data", "key", "words"),
    [
        ({"warn_threshold": 0}, "warn_threshold", "between 0 and 1"),
        ({"warn_threshold": 1.0}, "warn_threshold", "between 0 and 1"),
        ({"warn_threshold": float("nan")}, "warn_threshold", "between 0 and 1"),
        ({"hard_threshold": 1.5}, "hard_threshold", "at most 1"),
        ({"warn_threshold": 0.9, "hard_threshold": 0.9}, "hard_threshold", "above warn_threshold"),
        ({"window": 0}, "window", "1 or more"),
        ({"models": {"tiny": 0}}, "models.tiny", "1 or more"),
        ({"summary_budget_chars": 10}, "summary_budget_chars", "at least 300"),
        ({"recent_tool_calls": -1}, "recent_tool_calls", "0 or more"),
        ({"on_interrupted_turn": "undo"}, "on_interrupted_turn", "'flag', 'rollback'"),
        ({"graceful_handoff": "yes"}, "graceful_handoff", "a boolean"),
        ({"briefing_hook_timeout_s": 0}, "briefing_hook_timeout_s", "positive"),
    ],
)
def test_bad_values_name_the_key(
    data: dict[str, Any], key: str, words: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as caught:
        load(data, tmp_path)
    message = str(caught.value)
    assert f"{PREFIX}.{key}" in message
    assert words in message


def test_unknown_keys_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{PREFIX}: unknown key 'warn'")):
        load({"warn": 0.7}, tmp_path)


def test_exactly_one_hard_threshold_of_one_is_fine(tmp_path: Path) -> None:
    assert load({"warn_threshold": 0.5, "hard_threshold": 1}, tmp_path).hard_threshold == 1.0


def _imported_by_the_plugin_module(modules: tuple[str, ...]) -> list[str]:
    code = (
        "import sys, loopctl_context_monitor.plugin as p; "
        f"import json; print(json.dumps([m for m in {modules!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return list(json.loads(done.stdout))


def test_plugin_module_is_cheap_to_import() -> None:
    heavy = (
        "loopctl.engine",
        "loopctl.config",
        "loopctl_context_monitor.monitor",
        "loopctl_context_monitor.briefing",
    )
    assert _imported_by_the_plugin_module(heavy) == []


def test_plugin_module_does_not_import_subprocess() -> None:
    """Nor the loop or the hookspecs: ``hookimpl`` and ``StashKey`` come from light modules."""
    heavy = ("subprocess", "loopctl.loop", "loopctl.hookspecs", "loopctl.workspace")
    assert _imported_by_the_plugin_module(heavy) == []


def test_registration_adds_the_briefing_hook() -> None:
    hook = hook_relay({"context-monitor": plugin})
    assert hasattr(hook, "context_monitor_briefing")
    spec = hook.context_monitor_briefing.spec
    assert spec is not None
    assert spec.opts.get("firstresult") is True
    implemented = {
        name
        for name, caller in vars(hook).items()
        if any(impl.plugin_name == "context-monitor" for impl in caller.get_hookimpls())
    }
    assert implemented >= {
        "on_agent_message",
        "after_iteration",
        "on_restart",
        "compose_prompt",
        "before_iteration",
        "register_config",
        "register_event_schemas",
    }


def test_event_names_are_namespaced_and_published() -> None:
    assert len(ev.ALL_EVENTS) == len(set(ev.ALL_EVENTS)) == 16
    assert all(name.startswith("context-monitor.") for name in ev.ALL_EVENTS)
    assert set(ev.ALL_EVENTS) == set(event_schemas())
    # the names other plugins subscribe to, spelled out once, and exported from the package
    assert loopctl_context_monitor.USAGE == "context-monitor.usage"
    assert loopctl_context_monitor.EXHAUSTION_WARNING == "context-monitor.exhaustion_warning"
    assert loopctl_context_monitor.EXHAUSTION_RESTART == "context-monitor.exhaustion_restart"
    assert set(loopctl_context_monitor.EXHAUSTION_SIGNALS) == {
        "context-monitor.exhaustion_warning",
        "context-monitor.exhaustion_restart",
        "context-monitor.hard_limit",
        "context-monitor.overflow",
    }
    assert set(loopctl_context_monitor.__all__) >= {"USAGE", "EXHAUSTION_SIGNALS", "events"}


def test_every_emitted_event_is_declared() -> None:
    source = Path(loopctl_context_monitor.monitor.__file__).read_text(encoding="utf-8")
    assert not re.search(r'"loop\.context_', source)  # no event under the old names
    emitted = {getattr(ev, name) for name in re.findall(r"\bev\.([A-Z_]+)\b", source)}
    assert ev.EXHAUSTION_WARNING in emitted
    assert emitted == set(event_schemas()), sorted(emitted ^ set(event_schemas()))


def test_usage_events_carry_the_line_the_views_show() -> None:
    from loopctl_context_monitor.gauge import Reading
    from loopctl_context_monitor.monitor import _usage_line

    assert "line" not in event_schemas()[ev.USAGE]  # the summary field says it
    assert "summary" in event_schemas()[ev.USAGE]["properties"]
    known = Reading(141_000, 200_000)
    assert _usage_line("stream", known, None) == "context 70.5% full (141,000 of 200,000 tokens)"
    assert _usage_line("iteration", known, None) == ""  # the stream said it: hidden
    unknown = Reading(None, 200_000)
    reason = "the agent reported no token usage"
    # said once per session and reason by usage_unknown, not again by every iteration's reading
    assert _usage_line("iteration", unknown, reason) == ""
    assert "?" not in _usage_line("stream", Reading(5_000, None), None)


@pytest.mark.slow
def test_real_runs_validate_against_the_published_schema(buggy: Project, run_loop: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    turns = [
        [{"read": "calc.py"}, usage(150_000)],
        [{"read": "calc.py"}, {"usage": {"input_tokens": 0}}],
        [{"replace": "calc.py", "old": "a - b", "new": "a + b"}, usage(1_000), {"done": True}],
    ]
    result: RunResult = run_loop(
        "make test_add pass",
        turns=turns,
        plugins=PLUGIN,
        config={"session": "resume", "stuck": {"enabled": False}},
    )
    assert result.status == "complete"
    validator = jsonschema.Draft202012Validator(event_schema(event_schemas()))
    assert not [e for e in result.events if e["type"].startswith("loop.context_")]
    ours = [e for e in result.events if e["type"].startswith(ev.PREFIX)]
    assert {e["type"] for e in ours} >= {ev.USAGE, ev.EXHAUSTION_WARNING, ev.EXHAUSTION_RESTART}
    for line in result.events:
        validator.validate(line)
