"""The scenario format: every shipped scenario loads, and a malformed one is an error naming
the file and the key."""

from __future__ import annotations

import copy
import string
from pathlib import Path
from typing import Any

import pytest
from efficacy.scenario import load, load_all, parse
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.configfile import ConfigError
from loopctl.testing.behaviours import ApiOutage, Fixer, WithFaults

GOOD: dict[str, Any] = {
    "description": "a bug",
    "pattern": "control",
    "goal": "Make the tests pass.",
    "budget": {"iterations": 3, "tokens": 100_000, "wall_clock_s": 60},
    "agent": {
        "behaviour": "fixer",
        "params": {"ideas": [{"file": "calc.py", "old": "a - b", "new": "a + b"}]},
    },
    "files": {"calc.py": "def add(a, b):\n    return a - b\n"},
}
SOURCE = Path("scenarios/bad.toml")


def with_(path: str, value: Any) -> dict[str, Any]:
    """GOOD with the key at dotted ``path`` set to ``value`` (removed when value is ...)."""
    data = copy.deepcopy(GOOD)
    *tables, key = path.split(".")
    table = data
    for name in tables:
        table = table[name]
    if value is ...:
        del table[key]
    else:
        table[key] = value
    return data


def test_every_shipped_scenario_loads_with_its_behaviour() -> None:
    scenarios = load_all()
    assert len(scenarios) >= 3
    names = [s.name for s in scenarios]
    assert names == sorted(names)
    assert {"control-add", "repeats-first-idea"} <= set(names)
    for scenario in scenarios:
        assert scenario.behaviour() is not scenario.behaviour()  # a new one per server
        assert scenario.spec.files


def test_a_scenario_runs_with_claude_unless_it_names_its_clis() -> None:
    assert parse(GOOD, name="ok", source=SOURCE).spec.clis == ["claude"]
    both = parse(with_("clis", ["claude", "codex"]), name="ok", source=SOURCE)
    assert both.spec.clis == ["claude", "codex"]
    assert {"control-add", "repeats-first-idea"} <= {
        s.name for s in load_all() if "codex" in s.spec.clis
    }


def test_faults_wrap_the_behaviour() -> None:
    data = with_("agent.faults", [{"kind": "api-outage", "status": 401, "seconds": float("inf")}])
    behaviour = parse(data, name="ok", source=SOURCE).behaviour()
    assert isinstance(behaviour, WithFaults)
    assert isinstance(behaviour.behaviour, Fixer)
    assert behaviour.faults == [ApiOutage(status=401, seconds=float("inf"))]


def test_the_behaviours_test_command_defaults_to_the_scenarios(tmp_path: Path) -> None:
    scenario = parse(with_("test_cmd", "python -m unittest"), name="ok", source=SOURCE)
    behaviour = scenario.behaviour()
    assert isinstance(behaviour, Fixer)
    assert behaviour.test_cmd == "python -m unittest"
    scenario.write_project(tmp_path)
    assert (tmp_path / "calc.py").read_text() == GOOD["files"]["calc.py"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (with_("goal", ...), "scenarios/bad.toml: goal: required, but missing"),
        (with_("goal", "  "), "scenarios/bad.toml: goal: must not be empty"),
        (with_("gaol", "x"), "scenarios/bad.toml: unknown key 'gaol' (did you mean 'goal'?)"),
        (with_("budget.iterations", 0), "scenarios/bad.toml: budget.iterations: must be 1 to 50"),
        (with_("budget.tokens", "many"), "scenarios/bad.toml: budget.tokens: "),
        (with_("budget.wall_clock_s", 0), "scenarios/bad.toml: budget.wall_clock_s: must be more"),
        (with_("budget.iters", 1), "scenarios/bad.toml: budget: unknown key 'iters'"),
        (
            with_("agent.behaviour", "fixr"),
            "agent.behaviour: unknown behaviour 'fixr' (known: fixer)",
        ),
        (with_("agent.context_window", 10), "agent.context_window: must be at least 1000"),
        (
            with_("agent.params", {"attempts_per_turn": 0}),
            "bad.toml: agent.params.attempts_per_turn",
        ),
        (with_("agent.params", {"ideas": [], "x": 1}), "agent.params: unknown key 'x'"),
        (with_("agent.faults", [{"kind": "crash", "at": "x"}]), "agent.faults[0].at: expected an"),
        (with_("agent.faults", [{"kind": "flood"}]), "agent.faults[0].kind: must be one of"),
        (with_("agent.faults", {"kind": "crash"}), "scenarios/bad.toml: agent.faults: expected"),
        (with_("agent.compaction", "never"), "agent.compaction: "),
        (with_("expect", "win"), "scenarios/bad.toml: expect: "),
        (with_("files", {}), "scenarios/bad.toml: files: must hold at least one file"),
        (with_("files", {"../x.py": ""}), 'files."../x.py": a file path must stay inside'),
        (with_("files", {"/x.py": ""}), 'files."/x.py": a file path must stay inside'),
        (with_("files", {".git/config": ""}), "must not be inside .git/"),
        (with_("files", {"a.py": 3}), 'files."a.py": '),
        (with_("check_cmd", " "), "scenarios/bad.toml: check_cmd: must not be empty"),
        (with_("earlier", {"files": {}}), "scenarios/bad.toml: earlier.files: must hold at least"),
        (with_("earlier", {"files": {"../a.py": ""}}), 'earlier.files."../a.py": a file path'),
        (with_("earlier", {"fils": {}}), "scenarios/bad.toml: earlier: unknown key 'fils'"),
        (
            with_(
                "agent.params", {"ideas": [{"file": "a", "old": "x", "new": "y", "recalled": 2}]}
            ),
            "agent.params.ideas[0].recalled",
        ),
        (with_("agent.params", {"batch": "yes"}), "bad.toml: agent.params.batch"),
        (with_("clis", ["claude", "cursor"]), "bad.toml: clis: unknown CLI 'cursor' (known: "),
        (with_("clis", []), "scenarios/bad.toml: clis: must name at least one of claude, codex"),
        (with_("clis", "codex"), "scenarios/bad.toml: clis: "),
    ],
)
def test_a_malformed_scenario_names_the_file_and_the_key(
    data: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(data, name="bad", source=SOURCE)
    assert message in str(caught.value)


def test_a_bad_file_name_or_toml_or_unknown_name_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file name must be lower-case"):
        parse(GOOD, name="Bad Name", source=SOURCE)
    broken = tmp_path / "broken.toml"
    broken.write_text("goal = \n")
    with pytest.raises(ConfigError, match=str(broken)):
        load(broken)
    with pytest.raises(ConfigError, match=r"no scenario named 'nope' .*there are: broken"):
        load_all(tmp_path, ["nope"])


KEYS = st.sampled_from(
    [
        "description",
        "pattern",
        "goal",
        "budget",
        "agent",
        "files",
        "test_cmd",
        "behaviour",
        "params",
        "iterations",
        "tokens",
        "wall_clock_s",
        "ideas",
        "file",
        "old",
        "new",
        "x",
    ]
)
VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 10**6)
    | st.floats(allow_nan=True)
    | st.text(string.printable, max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(KEYS | st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(KEYS, VALUES, max_size=7))
def test_any_document_is_a_scenario_or_a_config_error(data: dict[str, Any]) -> None:
    try:
        scenario = parse(data, name="fuzz", source=SOURCE)
    except ConfigError as error:
        problems = error.problems
    else:
        problems = []
        assert scenario.spec.goal.strip()
    assert all(line.startswith(f"{SOURCE}: ") for line in problems)


@settings(max_examples=60, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            key: st.one_of(st.just(GOOD[key]), VALUES)
            for key in ("description", "pattern", "goal", "budget", "agent", "files")
        },
    )
)
def test_a_nearly_good_document_is_a_scenario_or_a_config_error(data: dict[str, Any]) -> None:
    try:
        parse(data, name="fuzz", source=SOURCE)
    except ConfigError as error:
        problems = error.problems
    else:
        problems = []
    assert all(line.startswith(f"{SOURCE}: ") for line in problems)
