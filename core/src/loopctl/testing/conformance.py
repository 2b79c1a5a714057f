"""A conformance suite for loopctl plugins: what every plugin must do, checked on real loops.

Subclass :class:`PluginConformance` in your plugin's tests and name the plugin; pytest collects
the inherited tests::

    from loopctl.testing.conformance import PluginConformance
    from loopctl_my_plugin import plugin


    class TestConformance(PluginConformance):
        plugin = plugin
        name = "my-plugin"

The checks:

* every hook implementation names a hook that exists (loopctl's, the plugin's own from
  ``add_hookspecs``, or an installed plugin's) and takes only arguments that hook passes;
* importing the plugin module does not import the CLI libraries (``loopctl plugins list``
  imports every enabled plugin, so plugin modules must stay cheap to import);
* the plugin survives the inputs real loops produce: an agent that crashes, an agent that runs
  out of context, a test command that is missing, test output that is binary junk, a loop that
  passes at once, none of them ending in a ``plugin.error`` of this plugin;
* a config section with an unknown key or a wrong type is refused with an error that names the
  key path (when the plugin registers a config class);
* every event it declares (``register_event_schemas``) or writes during those loops is
  namespaced: its type starts with the plugin's name and a dot (``my-plugin.flaky_test``), so
  two plugins' events never collide and a reader can tell whose an event is.

The functions behind the tests (:func:`hook_problems`, :func:`heavy_imports`,
:func:`survival_problems`, :func:`config_problems`, :func:`event_problems`) return lists of
problems, for use outside pytest.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from loopctl.testing import make_project, run_loop

#: Modules a plugin module must not import at import time: the CLI stack.
HEAVY_MODULES = ("typer", "rich", "click")
_SCALARS = {
    "str",
    "int",
    "float",
    "bool",
    "<class 'str'>",
    "<class 'int'>",
    "<class 'float'>",
    "<class 'bool'>",
}

_FAILING_TEST = "import unittest\n\nclass T(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(1, 2)\n"


@attrs.frozen
class Scenario:
    """One kind of bad or unusual input a plugin must take in its stride."""

    name: str
    turns: Sequence[Sequence[Mapping[str, Any]]]
    test_cmd: str | None = None
    passing: bool = False


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("agent crashes", [[{"say": "about to crash"}, {"exit": 3}]]),
    Scenario(
        "agent runs out of context",
        [[{"error": "context_overflow", "message": "Prompt is too long"}]],
    ),
    Scenario(
        "agent reports odd usage",
        [[{"usage": {"input_tokens": 0, "output_tokens": 0}, "context_window": 1}, {"say": ""}]],
    ),
    # a program missing from the test command's own script: the shell says "not found", exit
    # 127 (a command whose first program is missing is refused before the loop starts)
    Scenario(
        "test command missing",
        [[{"say": "x"}]],
        test_cmd="true && loopctl-no-such-command-xyz",
    ),
    Scenario(
        "test output is binary junk",
        [[{"say": "x"}]],
        test_cmd="head -c 3000 /dev/urandom; echo; exit 1",
    ),
    Scenario("tests pass at once", [[{"say": "nothing to do"}]], passing=True),
)


def _plugin_manager(plugin: object, name: str) -> Any:
    import pluggy

    from loopctl import hookspecs
    from loopctl.pluginhost import discover_entry_points

    manager = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    manager.add_hookspecs(hookspecs)
    others: list[object] = [plugin]
    for entry_point in discover_entry_points():
        if entry_point.name == name:
            continue
        try:
            others.append(entry_point.load())
        except Exception:  # noqa: BLE001 - another plugin's import error is not ours to judge
            continue
    for candidate in others:
        add = getattr(candidate, "add_hookspecs", None)
        if callable(add):
            try:
                add(manager)
            except Exception:  # noqa: BLE001 - see above
                continue
    return manager


def hook_problems(plugin: object, name: str) -> list[str]:
    """What is wrong with ``plugin``'s hook implementations ([] when nothing)."""
    import pluggy

    manager = _plugin_manager(plugin, name)
    try:
        manager.register(plugin, name)
    except pluggy.PluginValidationError as exc:
        return [str(exc)]
    except ValueError as exc:
        return [f"cannot register {name!r}: {exc}"]
    try:
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        return [f"{exc} (is the plugin that defines it installed? else mark it optionalhook=True)"]
    return []


def heavy_imports(module_name: str, heavy: Sequence[str] = HEAVY_MODULES) -> list[str]:
    """The ``heavy`` modules that importing ``module_name`` (in a fresh interpreter) imports."""
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({module_name!r})\n"
        f"print(' '.join(m for m in {tuple(heavy)!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        return [f"importing {module_name} failed: {done.stderr.strip()[-500:]}"]
    return done.stdout.split()


def survival_problems(
    plugin: object,
    name: str,
    workdir: Path,
    *,
    scenarios: Sequence[Scenario] = SCENARIOS,
    config: Mapping[str, Any] | None = None,
) -> list[str]:
    """Run each scenario in a fresh project under ``workdir`` with ``plugin`` registered; the
    problems: a loop that did not end normally, or a ``plugin.error`` of this plugin."""
    problems: list[str] = []
    for number, scenario in enumerate(scenarios, 1):
        project = make_project(workdir / f"scenario-{number}")
        project.write(
            "test_x.py",
            _FAILING_TEST.replace("1, 2", "2, 2") if scenario.passing else _FAILING_TEST,
        )
        project.commit("scenario")
        settings: dict[str, Any] = {
            "limits": {"max_iterations": 2, "max_agent_crashes": 1, "agent_timeout_s": 30}
        }
        settings.update(config or {})
        try:
            result = run_loop(
                project,
                f"conformance: {scenario.name}",
                turns=scenario.turns,
                test_cmd=scenario.test_cmd,
                plugins={name: plugin},
                config=settings,
            )
        except Exception as exc:  # noqa: BLE001 - the loop itself must not raise
            problems.append(f"{scenario.name}: the loop raised {type(exc).__name__}: {exc}")
            continue
        for event in result.events_of("plugin.error"):
            if event.get("plugin") == name:
                problems.append(f"{scenario.name}: {event.get('hook')} raised {event.get('error')}")
        problems += [
            f"{scenario.name}: {problem}"
            for problem in _namespace_problems({str(e.get("type")) for e in result.events}, name)
        ]
        if scenario.passing and result.status != "complete":
            problems.append(f"{scenario.name}: expected status complete, got {result.status}")
    return problems


def config_problems(plugin: object, name: str, workdir: Path) -> list[str]:
    """An unknown key and a wrong type in ``[plugins.NAME]`` must each be refused with an
    error naming the key path. [] also when the plugin registers no config."""
    from loopctl.config import ConfigError

    register = getattr(plugin, "register_config", None)
    classes = register() if callable(register) else None
    if not isinstance(classes, Mapping) or name not in classes:
        return []
    scalars = [
        field.name
        for field in (attrs.fields(classes[name]) if attrs.has(classes[name]) else ())
        if str(field.type).replace("builtins.", "") in _SCALARS
    ]
    cases: list[tuple[str, Any]] = [("loopctl_conformance_no_such_key", 1)]
    if scalars:
        cases.append((scalars[0], {"a": "a table where a plain value belongs"}))
    problems = []
    for number, (key, value) in enumerate(cases, 1):
        project = make_project(workdir / f"config-{number}")
        try:
            run_loop(
                project,
                "conformance: config",
                turns=[[{"say": "x"}]],
                plugins={name: plugin},
                config={"plugins": {name: {key: value}}, "limits": {"max_iterations": 1}},
            )
        except ConfigError as exc:
            text = str(exc)
            if f"plugins.{name}.{key}" not in text and (
                f"plugins.{name}" not in text or repr(key) not in text
            ):
                problems.append(f"the error for plugins.{name}.{key} does not name it: {exc}")
        else:
            problems.append(f"plugins.{name}.{key} = {value!r} was accepted")
    return problems


def event_problems(plugin: object, name: str) -> list[str]:
    """The event types the plugin declares (``register_event_schemas``) that do not start with
    ``NAME.``. (The survival loops check the events it actually writes the same way.)"""
    register = getattr(plugin, "register_event_schemas", None)
    declared = register() if callable(register) else None
    if not isinstance(declared, Mapping):
        return []
    return [f"declared {p}" for p in _namespace_problems(set(declared), name)]


def _namespace_problems(types_: set[str], name: str) -> list[str]:
    from loopctl.events import CORE_EVENTS

    return [
        f"event {kind!r} is not namespaced: it must start with {name + '.'!r}"
        for kind in sorted(types_)
        if kind not in CORE_EVENTS and not kind.startswith(f"{name}.")
    ]


class PluginConformance:
    """Inherit from this in a ``Test…`` class and set :attr:`plugin` and :attr:`name`."""

    #: The plugin object (usually its module), as its entry point loads it.
    plugin: ClassVar[object]
    #: Its entry-point name (the distribution name without ``loopctl-``).
    name: ClassVar[str]
    #: Config for the survival scenarios (e.g. to point a service at a local address).
    config: ClassVar[Mapping[str, Any]] = {}

    def test_hookimpls_match_their_specs(self) -> None:
        assert hook_problems(self.plugin, self.name) == []

    def test_importing_the_plugin_is_cheap(self) -> None:
        if not isinstance(self.plugin, types.ModuleType):
            return
        assert heavy_imports(self.plugin.__name__) == []

    def test_survives_missing_and_malformed_inputs(self, tmp_path: Path) -> None:
        assert survival_problems(self.plugin, self.name, tmp_path, config=self.config) == []

    def test_config_errors_name_the_key(self, tmp_path: Path) -> None:
        assert config_problems(self.plugin, self.name, tmp_path) == []

    def test_events_are_namespaced(self) -> None:
        assert event_problems(self.plugin, self.name) == []


__all__ = [
    "HEAVY_MODULES",
    "SCENARIOS",
    "PluginConformance",
    "Scenario",
    "config_problems",
    "event_problems",
    "heavy_imports",
    "hook_problems",
    "survival_problems",
]
