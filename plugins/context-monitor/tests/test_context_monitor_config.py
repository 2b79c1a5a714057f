"""Config validation (errors name the key), the plugin's registration, and its event schemas."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from context_monitor_testkit import PLUGIN, usage

import loopctl_context_monitor.monitor
from loopctl.config import ConfigError, structure
from loopctl.pluginhost import PluginHost, PluginSelection
from loopctl.testing import Project, RunResult
from loopctl_context_monitor import plugin
from loopctl_context_monitor.config import ContextMonitorConfig
from loopctl_context_monitor.events import event_schemas

PREFIX = "tool.loopctl.plugins.context-monitor"


def load(data: dict[str, Any]) -> ContextMonitorConfig:
    return structure(data, ContextMonitorConfig, source="pyproject.toml", prefix=PREFIX)


def test_defaults() -> None:
    config = load({})
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
def test_bad_values_name_the_key(data: dict[str, Any], key: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(data)
    message = str(caught.value)
    assert f"{PREFIX}.{key}" in message
    assert words in message


def test_unknown_keys_are_named() -> None:
    with pytest.raises(ConfigError, match=re.escape(f"{PREFIX}: unknown key 'warn'")):
        load({"warn": 0.7})


def test_exactly_one_hard_threshold_of_one_is_fine() -> None:
    assert load({"warn_threshold": 0.5, "hard_threshold": 1}).hard_threshold == 1.0


def test_plugin_module_is_cheap_to_import() -> None:
    code = (
        "import sys, loopctl_context_monitor.plugin as p; "
        "heavy = [m for m in ('loopctl.engine', 'loopctl.config', 'loopctl_context_monitor.monitor',"
        " 'loopctl_context_monitor.briefing', 'subprocess') if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


def test_registration_adds_the_briefing_hook() -> None:
    host = PluginHost(PluginSelection(no_plugins=True))
    host.register(plugin, "context-monitor")
    assert hasattr(host.hook, "context_monitor_briefing")
    spec = host.hook.context_monitor_briefing.spec
    assert spec is not None
    assert spec.opts.get("firstresult") is True
    assert set(host.hooks_of("context-monitor")) >= {
        "on_agent_message",
        "after_iteration",
        "on_restart",
        "compose_prompt",
        "before_iteration",
        "register_config",
        "register_event_schemas",
    }


def test_every_emitted_event_is_declared() -> None:
    source = Path(loopctl_context_monitor.monitor.__file__).read_text(encoding="utf-8")
    emitted = set(re.findall(r'"(loop\.context_[a-z_]+)"', source))
    assert "loop.context_exhaustion_warning" in emitted
    assert emitted == set(event_schemas()), sorted(emitted ^ set(event_schemas()))


def test_real_runs_validate_against_the_published_schema(buggy: Project, run_loop: Any) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from loopctl.events import event_schema

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
    ours = [e for e in result.events if e["type"].startswith("loop.context_")]
    assert {e["type"] for e in ours} >= {
        "loop.context_usage",
        "loop.context_exhaustion_warning",
        "loop.context_exhaustion_restart",
    }
    for line in result.events:
        validator.validate(line)
