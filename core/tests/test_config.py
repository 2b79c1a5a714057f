"""Tests for loopctl.config: sources, precedence, origins, and the error messages users see."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl.agents.base import AgentSettings
from loopctl.config import (
    DEFAULT_MODEL_WINDOWS,
    ConfigError,
    InvalidFields,
    Limits,
    LoadedConfig,
    LoopctlConfig,
    PluginsConfig,
    PromptConfig,
    Stuck,
    config_to_dict,
    context_window_for,
    describe_fields,
    find_config_file,
    hide_secrets,
    load_config,
    model_windows,
    structure,
)
from loopctl.configfile import split_list

T = TypeVar("T")

# --- helpers ------------------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project directory that is its own repository root, so discovery stops here."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    return root


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(cwd: Path, **kwargs: Any) -> LoadedConfig:
    kwargs.setdefault("env", {})
    return load_config(cwd, **kwargs)


def error_of(cwd: Path, **kwargs: Any) -> str:
    with pytest.raises(ConfigError) as info:
        load(cwd, **kwargs)
    return str(info.value)


@attrs.define
class MonitorSettings:
    """A plugin's config class, as a plugin would declare it through ``register_config``."""

    threshold: float = 0.8
    notify: bool = False
    paths: list[str] = attrs.Factory(list)


# --- defaults and precedence --------------------------------------------------------------------


def test_without_any_source_every_value_is_the_default(project: Path) -> None:
    loaded = load(project)
    assert loaded.config == LoopctlConfig()
    assert loaded.file is None
    assert loaded.autoload is True
    assert loaded.warnings == []
    assert loaded.origins["limits.max_iterations"] == "default"
    assert set(loaded.origins.values()) == {"default"}
    # every documented setting (named tables aside) has an origin
    documented = {doc.path for doc in describe_fields(LoopctlConfig) if "<" not in doc.path}
    assert documented == set(loaded.origins)


def test_file_then_env_then_command_line_each_win_and_origins_say_who(project: Path) -> None:
    write(
        project / "loopctl.toml",
        'test_cmd = "pytest -q"\nagent = "claude"\n'
        "[limits]\nmax_iterations = 5\nmax_restarts = 2\n"
        "[stuck]\nwindow = 4\n",
    )
    loaded = load(
        project,
        env={"LOOPCTL_LIMITS__MAX_ITERATIONS": "6", "LOOPCTL_AGENT": "codex"},
        overrides={"limits.max_iterations": 7, "stuck.window": "5"},
    )
    config = loaded.config
    assert config.test_cmd == "pytest -q"
    assert config.agent == "codex"
    assert config.limits.max_iterations == 7
    assert config.limits.max_restarts == 2
    assert config.stuck.window == 5  # the string from the command line converted to int
    assert loaded.origins["test_cmd"] == "loopctl.toml"
    assert loaded.origins["limits.max_restarts"] == "loopctl.toml"
    assert loaded.origins["agent"] == "env LOOPCTL_AGENT"
    assert loaded.origins["limits.max_iterations"] == "command line"
    assert loaded.origins["stuck.window"] == "command line"
    assert loaded.origins["limits.idle_timeout_s"] == "default"
    assert loaded.file == project / "loopctl.toml"


def test_env_beats_file_when_no_override(project: Path) -> None:
    write(project / "loopctl.toml", "[limits]\nmax_iterations = 5\n")
    loaded = load(project, env={"LOOPCTL_LIMITS__MAX_ITERATIONS": "6"})
    assert loaded.config.limits.max_iterations == 6
    assert loaded.origins["limits.max_iterations"] == "env LOOPCTL_LIMITS__MAX_ITERATIONS"


def test_named_sections_merge_key_by_key_across_sources(project: Path) -> None:
    write(
        project / "loopctl.toml",
        '[agents.claude]\nmodel = "sonnet"\nextra_args = ["--verbose"]\n'
        "[plugins.context-monitor]\nthreshold = 0.7\n",
    )
    loaded = load(
        project,
        overrides={"agents.claude.model": "opus", "plugins.context-monitor.notify": True},
    )
    assert loaded.config.agents == {"claude": {"model": "opus", "extra_args": ["--verbose"]}}
    assert loaded.config.plugins.sections == {"context-monitor": {"threshold": 0.7, "notify": True}}
    assert loaded.origins["agents.claude.model"] == "command line"
    assert loaded.origins["agents.claude.extra_args"] == "loopctl.toml"
    assert loaded.origins["plugins.context-monitor.threshold"] == "loopctl.toml"
    assert loaded.origins["plugins.context-monitor.notify"] == "command line"


# --- discovery ----------------------------------------------------------------------------------


def test_discovery_walks_up_from_a_subdirectory(project: Path) -> None:
    config = write(project / "loopctl.toml", 'test_cmd = "make test"\n')
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_config_file(deep) == config
    assert load(deep).config.test_cmd == "make test"


def test_discovery_stops_at_the_repository_root(tmp_path: Path) -> None:
    write(tmp_path / "loopctl.toml", 'test_cmd = "outside"\n')
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "sub").mkdir()
    assert find_config_file(repo / "sub") is None
    assert load(repo / "sub").config.test_cmd is None


def test_loopctl_toml_wins_over_pyproject_in_the_same_directory(project: Path) -> None:
    write(project / "pyproject.toml", '[tool.loopctl]\ntest_cmd = "from pyproject"\n')
    write(project / "loopctl.toml", 'test_cmd = "from loopctl.toml"\n')
    assert find_config_file(project) == project / "loopctl.toml"
    assert load(project).config.test_cmd == "from loopctl.toml"


def test_pyproject_without_a_loopctl_table_is_passed_over(project: Path) -> None:
    write(project / "loopctl.toml", 'test_cmd = "root"\n')
    write(project / "sub" / "pyproject.toml", '[project]\nname = "sub"\n[tool.ruff]\nx = 1\n')
    assert find_config_file(project / "sub") == project / "loopctl.toml"


def test_the_nearest_directory_wins(project: Path) -> None:
    write(project / "loopctl.toml", 'test_cmd = "root"\n')
    nested = write(project / "sub" / "pyproject.toml", '[tool.loopctl]\ntest_cmd = "sub"\n')
    assert find_config_file(project / "sub") == nested
    loaded = load(project / "sub")
    assert loaded.config.test_cmd == "sub"
    assert loaded.origins["test_cmd"] == "pyproject.toml"


def test_pyproject_keys_live_under_tool_loopctl(project: Path) -> None:
    write(
        project / "pyproject.toml",
        '[project]\nname = "demo"\n'
        '[tool.loopctl]\ntest_cmd = "pytest"\nsession = "resume"\n'
        "[tool.loopctl.limits]\nmax_iterations = 9\n"
        "[tool.loopctl.plugins]\ndisable = ['noisy']\n",
    )
    loaded = load(project)
    assert loaded.file == project / "pyproject.toml"
    assert loaded.config.session == "resume"
    assert loaded.config.limits.max_iterations == 9
    assert loaded.config.plugins.disable == ["noisy"]
    assert loaded.origins["limits.max_iterations"] == "pyproject.toml"


def test_explicit_config_file_replaces_discovery(project: Path) -> None:
    write(project / "loopctl.toml", 'test_cmd = "discovered"\n')
    write(project / "ci" / "strict.toml", 'test_cmd = "explicit"\n')
    loaded = load(project, config_file=Path("ci/strict.toml"))
    assert loaded.config.test_cmd == "explicit"
    assert loaded.file == project / "ci" / "strict.toml"


def test_explicit_config_file_that_does_not_exist_is_an_error(project: Path) -> None:
    message = error_of(project, config_file=Path("missing.toml"))
    assert "missing.toml" in message
    assert "not found" in message


def test_explicit_pyproject_without_table_warns_and_uses_defaults(project: Path) -> None:
    write(project / "other" / "pyproject.toml", '[project]\nname = "x"\n')
    loaded = load(project, config_file=Path("other/pyproject.toml"))
    assert loaded.config == LoopctlConfig()
    assert any("[tool.loopctl]" in warning for warning in loaded.warnings)


# --- error messages -----------------------------------------------------------------------------


def test_wrong_type_names_file_key_expectation_and_value(project: Path) -> None:
    write(project / "loopctl.toml", '[limits]\nmax_iterations = "many"\n')
    assert (
        error_of(project) == "loopctl.toml: limits.max_iterations: expected an integer, got 'many'"
    )


def test_wrong_type_in_pyproject_uses_the_pyproject_spelling(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.loopctl.limits]\nmax_iterations = 2.5\n")
    message = error_of(project)
    assert message == (
        "pyproject.toml: tool.loopctl.limits.max_iterations: expected an integer, got 2.5"
    )


def test_unknown_key_suggests_the_close_one(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.loopctl.limits]\nmax_iteration = 3\n")
    assert error_of(project) == (
        "pyproject.toml: tool.loopctl.limits: unknown key 'max_iteration' "
        "(did you mean 'max_iterations'?)"
    )


def test_unknown_top_level_key_without_close_match(project: Path) -> None:
    write(project / "loopctl.toml", "zzz = 1\n")
    message = error_of(project)
    assert message == "loopctl.toml: unknown key 'zzz'"


def test_a_misplaced_key_in_pyproject_is_sent_to_its_tool_loopctl_table(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.loopctl]\nmax_iterations = 3\n")
    assert error_of(project) == (
        "pyproject.toml: tool.loopctl: unknown key 'max_iterations' "
        "(it belongs in [tool.loopctl.limits]: tool.loopctl.limits.max_iterations)"
    )


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        (
            "loopctl.toml",
            "max_iteration = 3\n",
            "loopctl.toml: unknown key 'max_iteration' "
            "(did you mean 'max_iterations'? it belongs in [limits]: limits.max_iterations)",
        ),
        (
            "pyproject.toml",
            "[tool.loopctl]\nmax_restart = 3\n",
            "pyproject.toml: tool.loopctl: unknown key 'max_restart' (did you mean "
            "'max_restarts'? it belongs in [tool.loopctl.limits]: tool.loopctl.limits.max_restarts)",
        ),
        (  # a close key of the table itself comes first
            "loopctl.toml",
            "test_cm = 'pytest'\n",
            "loopctl.toml: unknown key 'test_cm' (did you mean 'test_cmd'?)",
        ),
    ],
)
def test_a_misspelt_key_of_an_inner_table_written_at_the_top_is_suggested_there(
    project: Path, name: str, text: str, expected: str
) -> None:
    write(project / name, text)
    assert error_of(project) == expected


def test_non_table_under_plugins_is_an_unknown_key(project: Path) -> None:
    write(project / "loopctl.toml", '[plugins]\nenabel = ["a"]\ncontext-monitor = 5\n')
    lines = error_of(project).splitlines()
    assert "loopctl.toml: plugins: unknown key 'enabel' (did you mean 'enable'?)" in lines
    assert any("'context-monitor'" in line and "must be a table" in line for line in lines)


def test_every_problem_is_listed_one_per_line(project: Path) -> None:
    write(
        project / "loopctl.toml",
        'session = "sometimes"\n[limits]\nmax_iterations = "many"\nmax_restarts = 50\n'
        "[stuck]\nwindow = 1\nenabled = 1\n",
    )
    lines = error_of(
        project,
        env={"LOOPCTL_PROMPT__BUDGET_CHARS": "lots"},
        overrides={"limits.wall_clok_s": 5},
    ).splitlines()
    assert lines == [
        "loopctl.toml: session: expected one of 'fresh', 'resume', got 'sometimes'",
        "loopctl.toml: limits.max_iterations: expected an integer, got 'many'",
        "loopctl.toml: limits.max_restarts: must be at most 10 (10 is a hard cap on restarts), "
        "got 50",
        "loopctl.toml: stuck.enabled: expected a boolean (true or false), got 1",
        "loopctl.toml: stuck.window: must be at least 2, got 1",
        "environment variable LOOPCTL_PROMPT__BUDGET_CHARS: prompt.budget_chars: "
        "expected an integer, got 'lots'",
        "command line: unknown key 'limits.wall_clok_s' (did you mean 'limits.wall_clock_s'?)",
    ]


def test_toml_bools_must_be_real_booleans(project: Path) -> None:
    write(project / "loopctl.toml", '[stuck]\nenabled = "false"\n')
    assert error_of(project) == (
        "loopctl.toml: stuck.enabled: expected a boolean (true or false), got 'false'"
    )


def test_strings_are_not_lists(project: Path) -> None:
    write(project / "loopctl.toml", '[plugins]\ndisable = "noisy"\n')
    assert error_of(project) == ("loopctl.toml: plugins.disable: expected an array, got 'noisy'")


def test_toml_syntax_error_names_file_line_and_column(project: Path) -> None:
    write(project / "loopctl.toml", 'test_cmd = "ok"\n\n[limits\nmax_iterations = 3\n')
    message = error_of(project)
    assert message.startswith("loopctl.toml: invalid TOML:")
    assert "line 3" in message
    assert "column" in message


def test_broken_pyproject_that_mentions_loopctl_is_reported(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.loopctl\ntest_cmd = 1\n")
    message = error_of(project)
    assert "pyproject.toml" in message
    assert "line 1" in message


def test_broken_pyproject_of_someone_else_is_not_our_business(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.ruff\n")
    assert load(project).file is None


def test_file_that_is_not_utf8_is_a_config_error(project: Path) -> None:
    (project / "loopctl.toml").write_bytes(b'test_cmd = "\xff\xfe"\n')
    assert "not UTF-8" in error_of(project)


def test_max_restarts_hard_cap(project: Path) -> None:
    assert load(project, overrides={"limits.max_restarts": 10}).config.limits.max_restarts == 10
    message = error_of(project, overrides={"limits.max_restarts": 11})
    assert message == (
        "command line: limits.max_restarts: must be at most 10 (10 is a hard cap on restarts), "
        "got 11"
    )
    with pytest.raises(InvalidFields, match="hard cap"):
        Limits(max_restarts=11)
    assert "0 or more" in error_of(project, overrides={"limits.max_restarts": -1})


def test_range_checks_also_apply_when_building_classes_in_python() -> None:
    with pytest.raises(InvalidFields) as info:
        Limits(max_iterations=0, agent_timeout_s=-1)
    assert info.value.problems == [
        (("max_iterations",), "must be at least 1, got 0"),
        (("agent_timeout_s",), "must be a number of seconds greater than 0, got -1"),
    ]


def test_stuck_exempt_patterns_must_compile_and_errors_name_the_index(project: Path) -> None:
    write(project / "loopctl.toml", "[stuck]\nexempt = ['^WARN', '(unclosed', '[ok]']\n")
    message = error_of(project)
    assert message.startswith(
        "loopctl.toml: stuck.exempt[1]: invalid regular expression '(unclosed': missing )"
    )
    assert "\n" not in message  # only the broken one is reported
    good = Stuck(exempt=["^WARN", r"\d+ skipped"])
    assert [pattern.pattern for pattern in good.exempt_patterns()] == ["^WARN", r"\d+ skipped"]


def test_required_plugins_must_be_requirement_strings(project: Path) -> None:
    write(project / "loopctl.toml", "required_plugins = ['context-monitor>=0.1', '>=oops']\n")
    message = error_of(project)
    assert message.startswith("loopctl.toml: required_plugins[1]: invalid requirement '>=oops'")
    assert "\n" not in message
    (project / "loopctl.toml").unlink()
    loaded = load(project, overrides={"required_plugins": "context-monitor>=0.1, stuck"})
    assert loaded.config.required_plugins == ["context-monitor>=0.1", "stuck"]


def test_withhold_env_takes_names_and_patterns_from_the_file_and_the_environment(
    project: Path,
) -> None:
    write(project / "loopctl.toml", "withhold_env = ['GITHUB_TOKEN', '', 'A=B']\n")
    message = error_of(project)
    assert (
        "withhold_env[1]: must be a variable name or a pattern such as 'AWS_*', got ''" in message
    )
    assert "withhold_env[2]:" in message
    assert "withhold_env[0]" not in message
    (project / "loopctl.toml").unlink()
    loaded = load(project, env={"LOOPCTL_WITHHOLD_ENV": "GITHUB_TOKEN, AWS_*"})
    assert loaded.config.withhold_env == ["GITHUB_TOKEN", "AWS_*"]


def test_a_specifier_set_in_the_environment_stays_one_requirement(project: Path) -> None:
    env = {"LOOPCTL_REQUIRED_PLUGINS": "context-monitor>=0.1,<0.3, goal-guard ,x~=1.2 , !=1.2.5"}
    loaded = load(project, env=env)
    assert loaded.config.required_plugins == [
        "context-monitor>=0.1,<0.3",
        "goal-guard",
        "x~=1.2,!=1.2.5",
    ]


_names = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)
_specifier = st.tuples(
    st.sampled_from(["<", ">", "<=", ">=", "==", "!=", "~="]),
    st.from_regex(r"[0-9]{1,2}(\.[0-9]{1,2}){0,2}", fullmatch=True),
).map("".join)
_requirements = st.tuples(_names, st.lists(_specifier, max_size=3)).map(
    lambda pair: pair[0] + ",".join(pair[1])
)


@given(st.lists(_requirements, max_size=5), st.sampled_from([",", ", ", " , "]))
@settings(max_examples=200, deadline=None)
def test_any_list_of_requirements_survives_being_joined_by_commas(
    requirements: list[str], separator: str
) -> None:
    assert split_list(separator.join(requirements)) == requirements


def test_model_windows_must_be_positive_and_dotted_names_are_quoted(project: Path) -> None:
    write(project / "loopctl.toml", '[models]\n"gemini-2.5-pro" = 0\nmy-model = 8000\n')
    assert error_of(project) == (
        'loopctl.toml: models."gemini-2.5-pro": must be a context window in tokens '
        "(1 to 100,000,000), got 0"
    )


# --- environment --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1", "true", "TRUE", "Yes", "on", " on "])
def test_env_bool_truthy_words(project: Path, text: str) -> None:
    loaded = load(project, env={"LOOPCTL_PLUGINS__STRICT": text})
    assert loaded.config.plugins.strict is True


@pytest.mark.parametrize("text", ["0", "false", "False", "NO", "off"])
def test_env_bool_falsy_words(project: Path, text: str) -> None:
    write(project / "loopctl.toml", "[stuck]\nenabled = true\n")
    loaded = load(project, env={"LOOPCTL_STUCK__ENABLED": text})
    assert loaded.config.stuck.enabled is False
    assert loaded.origins["stuck.enabled"] == "env LOOPCTL_STUCK__ENABLED"


@pytest.mark.parametrize("text", ["", "2", "maybe", "enabled", "truee"])
def test_env_bool_anything_else_is_an_error(project: Path, text: str) -> None:
    message = error_of(project, env={"LOOPCTL_STUCK__ENABLED": text})
    assert message == (
        "environment variable LOOPCTL_STUCK__ENABLED: stuck.enabled: "
        f"expected a boolean (1/true/yes/on or 0/false/no/off), got {text!r}"
    )


def test_env_values_convert_by_field_type(project: Path) -> None:
    loaded = load(
        project,
        env={
            "LOOPCTL_TEST_CMD": "cargo test",
            "LOOPCTL_SESSION": "Resume",
            "LOOPCTL_STATE_DIR": ".state",
            "LOOPCTL_COMPLETION_SIGNAL": "LOOPCTL_DONE",
            "LOOPCTL_LIMITS__WALL_CLOCK_S": "60.5",
            "LOOPCTL_LIMITS__MAX_TOKENS": "100000",
            "LOOPCTL_STUCK__EXEMPT": r"^WARN, \d+ flaky ,",
            "LOOPCTL_PLUGINS__DISABLE": "a,b",
        },
    )
    config = loaded.config
    assert config.test_cmd == "cargo test"
    assert config.session == "resume"
    assert config.state_dir == ".state"
    assert config.completion_signal == "LOOPCTL_DONE"
    assert config.limits.wall_clock_s == 60.5
    assert config.limits.max_tokens == 100000
    assert config.stuck.exempt == ["^WARN", r"\d+ flaky"]
    assert config.plugins.disable == ["a", "b"]


def test_env_empty_value_unsets_an_optional_setting(project: Path) -> None:
    write(project / "loopctl.toml", "[limits]\nmax_tokens = 5000\n")
    loaded = load(project, env={"LOOPCTL_LIMITS__MAX_TOKENS": ""})
    assert loaded.config.limits.max_tokens is None


def test_env_plugins_allow_list_and_autoload_switch(project: Path) -> None:
    loaded = load(
        project,
        env={"LOOPCTL_PLUGINS": "context-monitor, stuck", "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )
    assert loaded.config.plugins.enable == ["context-monitor", "stuck"]
    assert loaded.origins["plugins.enable"] == "env LOOPCTL_PLUGINS"
    assert loaded.autoload is False
    assert load(project, env={"LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": "0"}).autoload is True
    assert load(project, env={"LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": ""}).autoload is True
    assert load(project, env={"LOOPCTL_PLUGINS": ""}).config.plugins.enable is None


def test_env_stray_variables_warn_and_loopctl_own_variables_are_silent(project: Path) -> None:
    loaded = load(
        project,
        env={
            "LOOPCTL_ITERATION": "3",
            "LOOPCTL_SESSION_ID": "abc",
            "LOOPCTL_RUN_ID": "r1",
            "LOOPCTL_SUPERVISOR": "123.456",  # a loop run by a loop's agent or test command
            "LOOPCTL_TESTS": "pytest",  # not close enough to be taken for a misspelling
            "LOOPCTL_MODELS__X": "5",
            "PATH": "/usr/bin",
        },
    )
    assert loaded.config == LoopctlConfig()
    assert len(loaded.warnings) == 2
    assert "LOOPCTL_TESTS" in loaded.warnings[1]
    assert "did you mean LOOPCTL_TEST_FIRST?" in loaded.warnings[1]  # the closest spelling
    assert loaded.warnings[0].startswith("environment variable LOOPCTL_MODELS__X: models.x cannot")


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("LOOPCTL_LIMITS__MAX_ITERATION", "LOOPCTL_LIMITS__MAX_ITERATIONS"),
        ("LOOPCTL_MAX_ITERATIONS", "LOOPCTL_LIMITS__MAX_ITERATIONS"),  # the table left out
        ("LOOPCTL_MAX_ITERATION", "LOOPCTL_LIMITS__MAX_ITERATIONS"),
        ("LOOPCTL_TEST_CDM", "LOOPCTL_TEST_CMD"),
        ("LOOPCTL_TEST_COMMAND", "LOOPCTL_TEST_CMD"),
        ("LOOPCTL_PLUGIN__DISABLE", "LOOPCTL_PLUGINS__DISABLE"),
    ],
)
def test_env_a_misspelt_setting_is_an_error_as_in_the_file(
    project: Path, name: str, meant: str
) -> None:
    assert error_of(project, env={name: "3"}) == (
        f"environment variable {name} names no loopctl setting (did you mean {meant}?); "
        "rename it, or unset it"
    )


def test_env_variables_of_loopctls_own_tools_are_silent_and_others_warn(project: Path) -> None:
    from loopctl.config.sources import KNOWN_ENV_VARS

    own = dict.fromkeys(KNOWN_ENV_VARS, "1")
    assert load(project, env=own).warnings == []
    loaded = load(project, env={"LOOPCTL_SOMEONE_ELSES_THING": "1"})  # another tool's, maybe
    assert loaded.warnings == [
        "environment variable LOOPCTL_SOMEONE_ELSES_THING does not name a loopctl setting; ignored"
    ]


def test_every_loopctl_variable_the_repository_reads_is_a_setting_or_known() -> None:
    """The known list is complete: every ``LOOPCTL_*`` name in the code of loopctl, its plugins
    and its tools (not their tests, which make up names) is a setting or on it."""
    import re

    from loopctl.config.sources import ENV_KEYS, KNOWN_ENV_VARS
    from loopctl.configfile import ENV_DISABLE_AUTOLOAD, ENV_PLUGINS

    root = Path(__file__).resolve().parents[2]
    if not (root / "noxfile.py").is_file():
        pytest.skip("not in a checkout of the repository")
    places = ["core/src", "plugins/*/src", "contrib/*/src", "benchmarks", "noxfile.py", ".ci"]
    files = [p for place in places for p in root.glob(place) if p.is_file()]
    files += [f for place in places for d in root.glob(place) if d.is_dir() for f in d.rglob("*")]
    names = set()
    for path in files:
        if path.is_file() and path.suffix in ("", ".py", ".sh", ".toml", ".yml"):
            text = path.read_text(encoding="utf-8", errors="replace")
            names |= set(re.findall(r"(?<![A-Za-z0-9_])LOOPCTL_[A-Z0-9_]*[A-Z0-9]", text))
    assert len(names) > 20
    known = {*ENV_KEYS, *KNOWN_ENV_VARS, ENV_PLUGINS, ENV_DISABLE_AUTOLOAD}
    # not variables: in docstrings, a variable, a misspelt one, a completion signal; a file name
    examples = {"LOOPCTL_X", "LOOPCTL_MAX_ITERATIONS", "LOOPCTL_DONE", "LOOPCTL_MESSAGE"}
    assert sorted(names - known - examples) == []


def test_env_range_errors_name_the_variable(project: Path) -> None:
    message = error_of(project, env={"LOOPCTL_LIMITS__MAX_RESTARTS": "12"})
    assert message.startswith("environment variable LOOPCTL_LIMITS__MAX_RESTARTS: ")
    assert "hard cap" in message


# --- command-line overrides ---------------------------------------------------------------------


def test_override_of_unknown_path_is_an_error(project: Path) -> None:
    assert error_of(project, overrides={"limits.max_iteration": 3}) == (
        "command line: unknown key 'limits.max_iteration' (did you mean 'limits.max_iterations'?)"
    )
    assert "unknown key 'test_cmd.x'" in error_of(project, overrides={"test_cmd.x": "a"})


def test_override_strings_convert_and_wrong_values_are_named(project: Path) -> None:
    loaded = load(
        project,
        overrides={
            "limits.max_iterations": "4",
            "plugins.strict": "yes",
            "models.gemini-2.5-pro": "500000",
            "test_cmd": "pytest -x",
        },
    )
    assert loaded.config.limits.max_iterations == 4
    assert loaded.config.plugins.strict is True
    assert loaded.config.models == {"gemini-2.5-pro": 500000}
    assert loaded.origins['models."gemini-2.5-pro"'] == "command line"
    assert error_of(project, overrides={"limits.test_timeout_s": "soon"}) == (
        "command line: limits.test_timeout_s: expected a number, got 'soon'"
    )
    assert error_of(project, overrides={"session": 3}) == (
        "command line: session: expected one of 'fresh', 'resume', got 3"
    )


# --- plugin sections and agent settings ---------------------------------------------------------


def test_plugin_section_is_structured_into_the_plugin_class(project: Path) -> None:
    write(project / "loopctl.toml", "[plugins.context-monitor]\nthreshold = 0.6\n")
    loaded = load(project)
    assert loaded.plugin_section("context-monitor", MonitorSettings) == MonitorSettings(0.6)
    assert loaded.plugin_section("absent", MonitorSettings) == MonitorSettings()


def test_plugin_section_errors_name_plugins_name_key(project: Path) -> None:
    write(
        project / "loopctl.toml",
        '[plugins.context-monitor]\nthreshold = "high"\nnotfy = true\n',
    )
    loaded = load(project)  # sections are raw until the plugin asks for them
    with pytest.raises(ConfigError) as info:
        loaded.plugin_section("context-monitor", MonitorSettings)
    assert info.value.problems == [
        "loopctl.toml: plugins.context-monitor.threshold: expected a number, got 'high'",
        "loopctl.toml: plugins.context-monitor: unknown key 'notfy' (did you mean 'notify'?)",
    ]


def test_plugin_section_errors_in_pyproject_spelling(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.loopctl.plugins.context-monitor]\npaths = 3\n")
    loaded = load(project)
    with pytest.raises(ConfigError) as info:
        loaded.plugin_section("context-monitor", MonitorSettings)
    assert str(info.value) == (
        "pyproject.toml: tool.loopctl.plugins.context-monitor.paths: expected an array, got 3"
    )


def test_plugin_section_errors_name_the_command_line_when_it_set_the_key(project: Path) -> None:
    write(project / "pyproject.toml", "[tool.loopctl.plugins.context-monitor]\nthreshold = 0.5\n")
    loaded = load(project, overrides={"plugins.context-monitor.notify": "sometimes"})
    with pytest.raises(ConfigError) as info:
        loaded.plugin_section("context-monitor", MonitorSettings)
    assert str(info.value) == (
        "command line: plugins.context-monitor.notify: expected a boolean (true or false), "
        "got 'sometimes'"
    )


def test_agent_settings_are_checked_by_the_adapter_class(project: Path) -> None:
    write(
        project / "loopctl.toml",
        '[agents.claude]\nmodel = "opus"\nextra_args = ["--verbose"]\nenv = { A = "1" }\n',
    )
    settings_ = load(project).agent_settings("claude", AgentSettings)
    assert settings_ == AgentSettings(model="opus", extra_args=["--verbose"], env={"A": "1"})
    write(project / "loopctl.toml", "[agents.claude]\nenv = { A = 1 }\n")
    with pytest.raises(ConfigError, match=r"^loopctl.toml: agents.claude.env.A: expected a string"):
        load(project).agent_settings("claude", AgentSettings)


def test_structure_helper_names_source_and_prefix() -> None:
    with pytest.raises(ConfigError) as info:
        structure({"threshold": [1]}, MonitorSettings, source="my.toml", prefix="x.y")
    assert str(info.value) == "my.toml: x.y.threshold: expected a number, got an array [1]"
    assert structure({}, MonitorSettings, source="s", prefix="") == MonitorSettings()


# --- plain data, docs, model windows ------------------------------------------------------------


def test_config_to_dict_round_trips_in_loopctl_toml_layout(project: Path) -> None:
    write(
        project / "loopctl.toml",
        'test_cmd = "pytest"\n[limits]\nmax_cost_usd = 2.5\n'
        "[plugins]\nenable = ['a']\n[plugins.a]\nx = 1\n"
        '[agents.codex]\nmodel = "gpt-5-codex"\n[models]\nmine = 1000\n',
    )
    loaded = load(project)
    data = config_to_dict(loaded)
    assert data["plugins"] == {"enable": ["a"], "disable": [], "strict": False, "a": {"x": 1}}
    assert data["limits"]["max_cost_usd"] == 2.5
    assert json.loads(json.dumps(data)) == data  # plain data only
    assert structure(data, LoopctlConfig, source="dump", prefix="") == loaded.config


def test_describe_fields_documents_every_field() -> None:
    docs = describe_fields(LoopctlConfig)
    by_path = {doc.path: doc for doc in docs}
    assert all(doc.doc for doc in docs)
    assert by_path["limits.max_iterations"].type == "int"
    assert by_path["limits.max_iterations"].default == 20
    assert by_path["limits.max_tokens"].type == "int | None"
    assert by_path["session"].type == '"fresh" | "resume"'
    assert by_path["stuck.exempt"].type == "list[str]"
    assert by_path["stuck.exempt"].default == []
    assert {"agents.<agent>", "plugins.<plugin>", "models.<model>"} <= set(by_path)
    # nested classes are flattened: each of their fields appears under the section's key
    assert "limits" not in by_path
    for section, cls in [("limits", Limits), ("stuck", Stuck), ("prompt", PromptConfig)]:
        for field in attrs.fields(cls):
            assert f"{section}.{field.name}" in by_path


def test_describe_fields_of_a_plugin_class() -> None:
    docs = describe_fields(MonitorSettings, "plugins.context-monitor")
    assert [(doc.path, doc.type, doc.default) for doc in docs] == [
        ("plugins.context-monitor.threshold", "float", 0.8),
        ("plugins.context-monitor.notify", "bool", False),
        ("plugins.context-monitor.paths", "list[str]", []),
    ]


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("claude-sonnet-4-5", 200_000),
        ("claude-sonnet-4-5-20250929", 200_000),
        ("claude-sonnet-4-5-20250929[1m]", 1_000_000),
        ("claude-opus-4-1-20250805", 200_000),
        ("gpt-5", 400_000),
        ("gpt-5-codex", 272_000),
        ("gpt-5-codex-2025", 272_000),
        ("gemini-2.5-pro", 1_048_576),
        ("gemini-2.5-flash", 1_048_576),
        ("openrouter/google/gemini-2.5-pro", 1_048_576),
        ("unheard-of-model", None),
        (None, None),
        ("", None),
    ],
)
def test_context_window_for(model: str | None, window: int | None) -> None:
    assert context_window_for(model, {}) == window
    assert context_window_for(model, DEFAULT_MODEL_WINDOWS) == window


def test_configured_models_extend_and_override_the_built_in_table() -> None:
    config = LoopctlConfig(models={"gpt-5": 272_000, "local-llm": 32_768})
    for table in (config.models, model_windows(config)):
        assert context_window_for("gpt-5-2025-08-07", table) == 272_000
        assert context_window_for("local-llm", table) == 32_768
        assert context_window_for("LOCAL-LLM-q4", table) == 32_768
        assert context_window_for("claude-sonnet-4-5", table) == 200_000
    assert context_window_for("gpt-5", {}) == 400_000


# --- properties: nothing but ConfigError, whatever the input ------------------------------------

KNOWN_KEYS = [
    *[doc.path.split(".")[-1] for doc in describe_fields(LoopctlConfig)],
    "limits",
    "stuck",
    "prompt",
    "plugins",
    "agents",
    "models",
    "enable",
    "context-monitor",
    "claude",
]
keys = st.one_of(st.sampled_from(KNOWN_KEYS), st.text(max_size=8))
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(),
    st.text(max_size=12),
    st.sampled_from(["fresh", "resume", "(", "pytest", "a>=1", "[1m]", "\n"]),
)
nested = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(keys, children, max_size=5),
    ),
    max_leaves=12,
)


def attempt(load: Callable[[], T]) -> T | ConfigError:
    """The result, or the ConfigError raised; any other exception fails the test."""
    try:
        return load()
    except ConfigError as exc:
        return exc


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(keys, nested, max_size=6))
def test_structure_raises_only_config_error(data: dict[str, Any]) -> None:
    result = attempt(lambda: structure(data, LoopctlConfig, source="fuzz", prefix=""))
    if isinstance(result, ConfigError):
        assert result.problems
        assert all(line.startswith("fuzz: ") and "\n" not in line for line in result.problems)
    else:
        assert isinstance(result, LoopctlConfig)


@settings(max_examples=100, deadline=None)
@given(nested)
def test_structure_of_any_top_level_value_raises_only_config_error(data: Any) -> None:
    result = attempt(lambda: structure(data, PluginsConfig, source="fuzz", prefix="plugins"))
    if isinstance(result, ConfigError):
        assert str(result).startswith("fuzz: ")
    else:
        assert isinstance(result, PluginsConfig)


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)) and value == value and abs(value) != float("inf"):
        return repr(value)
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value if item is not None) + "]"
    if isinstance(value, dict):
        items = (f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items() if v is not None)
        return "{" + ", ".join(items) + "}"
    return json.dumps(str(value), ensure_ascii=False)


def toml_document(data: dict[str, Any]) -> str:
    lines = []
    tables = []
    for key, value in data.items():
        if isinstance(value, dict):
            tables.append((key, value))
        elif value is not None:
            lines.append(f"{json.dumps(key)} = {toml_value(value)}")
    for key, table in tables:
        lines.append(f"[{json.dumps(key)}]")
        lines += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items() if v is not None]
    return "\n".join(lines) + "\n"


toml_ish = st.one_of(
    st.dictionaries(keys, nested, max_size=6).map(toml_document),
    st.text(alphabet="[]{}=.\"'#\n tfalsemx0123456789,-_", max_size=80),
    st.text(max_size=80),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=toml_ish, env_value=st.text(max_size=10))
def test_load_config_on_any_text_raises_only_config_error(text: str, env_value: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / ".git").mkdir()
        (root / "loopctl.toml").write_text(text, encoding="utf-8", errors="surrogatepass")
        env = {"LOOPCTL_LIMITS__MAX_ITERATIONS": env_value, "LOOPCTL_STUCK__EXEMPT": env_value}
        result = attempt(lambda: load_config(root, env=env))
    if isinstance(result, ConfigError):
        assert str(result)
    else:
        assert isinstance(result.config, LoopctlConfig)
        assert result.file == root / "loopctl.toml"


# --- the fast path of `plugins list` reads the plugin switches the same way ----------------------

_NAMES = st.lists(st.sampled_from(["alpha", "beta", "gamma-x"]), max_size=3, unique=True)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    file_enable=st.one_of(st.none(), _NAMES),
    file_disable=_NAMES,
    file_strict=st.booleans(),
    env=st.dictionaries(
        st.sampled_from(
            [
                "LOOPCTL_PLUGINS",
                "LOOPCTL_PLUGINS__ENABLE",
                "LOOPCTL_PLUGINS__DISABLE",
                "LOOPCTL_PLUGINS__STRICT",
                "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD",
            ]
        ),
        st.sampled_from(["", "0", "1", "alpha", "alpha,beta", " beta , gamma-x ", "true", "no"]),
        max_size=4,
    ),
    pyproject=st.booleans(),
)
def test_plugin_switches_agree_with_the_typed_config(
    tmp_path, file_enable, file_disable, file_strict, env, pyproject
):
    from loopctl.configfile import plugin_switches

    project = tmp_path / f"p{abs(hash((str(file_enable), str(env), pyproject)))}"
    project.mkdir(exist_ok=True)
    lines = ["[tool.loopctl.plugins]" if pyproject else "[plugins]"]
    if file_enable is not None:
        lines.append(f"enable = {json.dumps(file_enable)}")
    lines.append(f"disable = {json.dumps(file_disable)}")
    lines.append(f"strict = {'true' if file_strict else 'false'}")
    (project / ("pyproject.toml" if pyproject else "loopctl.toml")).write_text(
        "\n".join(lines) + "\n"
    )
    try:
        loaded = load_config(project, env=env)
    except ConfigError:
        with pytest.raises(ConfigError):
            plugin_switches(project, env=env)
        return
    fast = plugin_switches(project, env=env)
    plugins = loaded.config.plugins
    assert fast == {
        "enable": plugins.enable,
        "disable": plugins.disable,
        "strict": plugins.strict,
        "autoload": loaded.autoload,
    }


@attrs.define
class _PluginSettings:
    strict_mode: bool = False
    retries: int = 1
    label: str = "x"


def test_plugin_keys_set_on_the_command_line_are_converted_by_their_type(tmp_path):
    loaded = load_config(
        tmp_path,
        env={},
        overrides={
            "plugins.demo.strict_mode": "true",
            "plugins.demo.retries": "4",
            "plugins.demo.label": "7",
        },
    )
    assert loaded.plugin_section("demo", _PluginSettings) == _PluginSettings(True, 4, "7")
    bad = load_config(tmp_path, env={}, overrides={"plugins.demo.retries": "many"})
    with pytest.raises(ConfigError, match=r"plugins\.demo\.retries"):
        bad.plugin_section("demo", _PluginSettings)


def test_hide_secrets_goes_by_the_setting_name_and_keeps_names_of_variables() -> None:
    shown = hide_secrets(
        {
            "limits": {"max_tokens": 5000},
            "agents": {"x": {"env": {"SERVICE_KEY": "k1", "HOME_DIR": "/h"}, "model": "m"}},
            "plugins": {
                "github": {"token_env": "GITHUB_TOKEN", "comment_key": "py3", "token": "ghp_x"},
                "other": {"secrets": ["a", "b"], "api_key": "", "password": None},
            },
        }
    )
    assert shown == {
        "limits": {"max_tokens": 5000},  # a number, not a secret
        "agents": {"x": {"env": {"SERVICE_KEY": "<hidden>", "HOME_DIR": "/h"}, "model": "m"}},
        "plugins": {
            "github": {"token_env": "GITHUB_TOKEN", "comment_key": "py3", "token": "<hidden>"},
            "other": {"secrets": ["<hidden>", "<hidden>"], "api_key": "", "password": None},
        },
    }
