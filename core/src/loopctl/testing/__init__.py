"""The testing kit for plugin authors (and loopctl's own tests).

Everything here runs real loops: a real temporary project (a git repository), the real engine,
the ``scripted`` agent as a real subprocess, a real test command. The pytest fixtures in
:mod:`loopctl.pytest_plugin` wrap these helpers; they are available in any pytest run
where loopctl is installed.

Typical use::

    def test_my_plugin(loopctl_project, run_loop):
        loopctl_project.write("calc.py", "def add(a, b):\\n    return a - b\\n")
        loopctl_project.write("test_calc.py", "from calc import add\\ndef test_add():\\n    assert add(1, 2) == 3\\n")
        result = run_loop(
            "make the tests pass",
            turns=[[{"replace": "calc.py", "old": "a - b", "new": "a + b"}]],
            plugins={"my-plugin": my_plugin_module},
        )
        assert result.status == "complete"
        assert result.events_of("my-plugin.did_something")
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pluggy

from loopctl import state as st
from loopctl.agents.scripted import ScriptedAgent, ScriptedParser, write_scenario
from loopctl.events import event_schema
from loopctl.loop import LoopOutcome
from loopctl.model import Event
from loopctl.pluginhost import PluginHost, PluginSelection
from loopctl.testing._lifeline import Lifeline, lifeline, running


@attrs.define
class Project:
    """A throwaway project directory, a git repository with one commit when git is present."""

    path: Path

    def write(self, relative: str, text: str) -> Path:
        target = self.path / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return target

    def read(self, relative: str) -> str:
        return (self.path / relative).read_text(encoding="utf-8")

    def git(self, *args: str) -> str:
        done = subprocess.run(
            ["git", *args],
            cwd=self.path,
            capture_output=True,
            text=True,
            check=True,
            env=_git_env(),
        )
        return done.stdout.strip()

    def commit(self, message: str = "snapshot") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")


def _git_env() -> dict[str, str]:
    return {
        **os.environ,
        "GIT_AUTHOR_NAME": "loopctl test",
        "GIT_AUTHOR_EMAIL": "test@loopctl.invalid",
        "GIT_COMMITTER_NAME": "loopctl test",
        "GIT_COMMITTER_EMAIL": "test@loopctl.invalid",
    }


def make_project(path: Path, *, git: bool = True) -> Project:
    path.mkdir(parents=True, exist_ok=True)
    project = Project(path)
    if git:
        project.git("init", "-q")
        project.write(".gitignore", ".loopctl/\n__pycache__/\n")
        project.commit("initial")
    return project


def python_test_cmd(test_file: str = "") -> str:
    """A test command that works without pytest installed: this interpreter's unittest."""
    target = f" {test_file}" if test_file else " discover -q"
    return f"{sys.executable} -m unittest{target}"


@attrs.define
class RunResult:
    """What a finished loop left behind, read back from its state directory."""

    outcome: LoopOutcome
    state_dir: Path
    events: list[dict[str, Any]]
    records: list[dict[str, Any]]
    #: Events as the engine emitted them, in memory (includes any the file may have missed).
    live_events: list[Event]

    @property
    def status(self) -> str:
        return self.outcome.status

    def events_of(self, type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == type]

    def report(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.state_dir / "report.json").read_text("utf-8"))
        return data

    def loop_state(self) -> st.LoopState:
        return st.read_loop_state(self.state_dir / "loop-state.md")


def run_loop(
    project: Project,
    goal: str,
    *,
    turns: Sequence[Sequence[Mapping[str, Any]]] | None = None,
    test_cmd: str | None = None,
    config: Mapping[str, Any] | None = None,
    plugins: Mapping[str, object] | None = None,
    load_installed_plugins: bool = False,
    agent: str | None = None,
    resume: bool = False,
    env: Mapping[str, str] | None = None,
    supervision: Any = None,
) -> RunResult:
    """Run a whole loop in ``project`` with the scripted agent following ``turns``.

    ``plugins`` are registered by name in addition to (or, by default, instead of) the installed
    ones, so a plugin under test runs exactly as it would when installed. ``config`` is written
    to ``loopctl.toml`` (nested dicts become tables).
    """
    from loopctl.agents.scripted import write_scenario
    from loopctl.config import load_config
    from loopctl.launch import prepare
    from loopctl.pluginhost import PluginHost, PluginSelection

    settings: dict[str, Any] = {
        "agent": agent or "scripted",
        "test_cmd": test_cmd or python_test_cmd(),
    }
    settings.update(config or {})
    if turns is not None:
        scenario = project.path / ".loopctl-scenario.json"
        write_scenario(scenario, [list(t) for t in turns])
        settings.setdefault("agents", {}).setdefault("scripted", {})["scenario"] = str(scenario)
    project.write("loopctl.toml", _to_toml(settings))
    environment = {
        k: v
        for k, v in (env if env is not None else os.environ).items()
        if not k.startswith("LOOPCTL_")
    }
    loaded = load_config(project.path, env=environment)
    host = PluginHost(PluginSelection.from_config(loaded, no_plugins=not load_installed_plugins))
    for name, plugin in (plugins or {}).items():
        host.register(plugin, name)
    host.load()
    emitted: list[Event] = []
    prepared = prepare(
        project.path,
        goal=None if resume else goal,
        resume=resume,
        env=environment,
        host=host,
        on_event=emitted.append,
        supervision=supervision,
    )
    outcome = prepared.engine.run()
    state_dir = prepared.engine.state_dir
    return RunResult(
        outcome=outcome,
        state_dir=state_dir,
        events=st.read_jsonl(state_dir / "events.jsonl").records,
        records=st.read_jsonl(state_dir / "iterations.jsonl").records,
        live_events=emitted,
    )


#: The signals that stop a loop gracefully; a test sends them to a child loopctl.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def _ignored_stop_signals() -> list[signal.Signals]:
    return [s for s in _STOP_SIGNALS if signal.getsignal(s) is signal.SIG_IGN]


def _default_stop_signals() -> None:  # pragma: no cover - runs in the child between fork and exec
    for signum in _STOP_SIGNALS:
        signal.signal(signum, signal.SIG_DFL)


def sigint_as_in_a_terminal() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a child loopctl that a test will stop with a signal: Ctrl-C
    (SIGINT), or SIGTERM, SIGHUP, SIGQUIT.

    A test run started in the background by a script (``pytest &``) ignores SIGINT, one started
    under ``nohup`` ignores SIGHUP, and every child inherits that: loopctl keeps a signal its
    caller ignores ignored (as a shell's background job must), so the loop would never see it.
    This puts the stop signals back to their defaults in the child, as in a terminal; it is None
    (the fast spawn path) when none of them is ignored.
    """
    return _default_stop_signals if _ignored_stop_signals() else None


def hook_relay(plugins: Mapping[str, object], *, strict: bool = True) -> pluggy.HookRelay:
    """loopctl's hooks with ``plugins`` registered under their names (and the hooks they add
    with ``add_hookspecs``), with no loop: for a test that calls a plugin's registration hooks
    or hooks a plugin declares (``hook_relay({"mine": plugin}).classify_failure(...)``). Only
    loopctl's built-in plugins are loaded besides; ``strict`` lets exceptions through."""
    host = PluginHost(PluginSelection(strict=strict))
    host.load([])
    for name, plugin in plugins.items():
        host.register(plugin, name)
    return host.hook


def _to_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """Enough TOML for test configs: scalars, lists of scalars, nested tables."""
    scalars = {k: v for k, v in data.items() if not isinstance(v, Mapping)}
    tables = {k: v for k, v in data.items() if isinstance(v, Mapping)}
    lines = [f"{_key(k)} = {_value(v)}" for k, v in scalars.items() if v is not None]
    text = "\n".join(lines) + ("\n" if lines else "")
    for key, table in tables.items():
        name = f"{prefix}.{_key(key)}" if prefix else _key(key)
        body = _to_toml(table, name)
        if any(not isinstance(v, Mapping) for v in table.values()) or not table:
            text += f"\n[{name}]\n"
        text += body
    return text


def _key(key: str) -> str:
    return key if key.replace("-", "").replace("_", "").isalnum() else json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def event_line(
    event: Mapping[str, Any] | Event, schemas: Mapping[str, Mapping[str, Any]] | None = None
) -> str:
    """The line loopctl's plain and live views show for ``event`` (an ``events.jsonl`` object,
    as :attr:`RunResult.events` holds, or an :class:`~loopctl.Event`), without the clock time;
    ``""`` when the event is kept off the terminal. ``schemas`` are the declared events
    (``register_event_schemas``' result), whose ``line`` templates come first; then the event's
    ``summary``; then its name and fields in words. For a test that your events read well."""
    from loopctl.view import describe

    if not isinstance(event, Event):
        data = {k: v for k, v in event.items() if k not in ("type", "ts", "iteration")}
        event = Event(
            type=str(event.get("type", "")),
            ts=float(event.get("ts") or 0.0),
            data=data,
            iteration=event.get("iteration"),
        )
    templates = {
        name: spec["line"]
        for name, spec in (schemas or {}).items()
        if isinstance(spec.get("line"), str)
    }
    return describe(event, templates)


__all__ = [
    "Lifeline",
    "Project",
    "RunResult",
    "ScriptedAgent",
    "ScriptedParser",
    "event_line",
    "event_schema",
    "hook_relay",
    "lifeline",
    "make_project",
    "python_test_cmd",
    "run_loop",
    "running",
    "sigint_as_in_a_terminal",
    "write_scenario",
]
