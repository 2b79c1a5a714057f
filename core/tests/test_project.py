"""load_project and SavedRun: what a plugin's own command sees of a project and its runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopctl
from loopctl import hookimpl
from loopctl.config import LoopctlConfig, load_config
from loopctl.configfile import RawSettings
from loopctl.project import DEFAULTS, Project


@attrs.define
class MineConfig:
    level: int = 1


class Mine:
    @hookimpl
    def register_config(self):
        return {"mine": MineConfig}


def test_load_project_reads_the_config_and_names_bad_keys(tmp_path):
    (tmp_path / "loopctl.toml").write_text(
        'state_dir = "state"\n[limits]\nmax_restarts = 5\ntest_output_bytes = 2000\n'
        "[plugins.mine]\nlevel = 3\n"
    )
    project = loopctl.load_project(tmp_path)
    assert project.state_dir == tmp_path.resolve() / "state"
    assert project.max_restarts == 5
    assert project.test_output_bytes == 2000
    assert project.plugin_config("mine", MineConfig) == MineConfig(level=3)
    (tmp_path / "loopctl.toml").write_text('[plugins.mine]\nlevel = "high"\n')
    with pytest.raises(loopctl.ConfigError, match=r"plugins\.mine\.level"):
        loopctl.load_project(tmp_path).plugin_config("mine", MineConfig)


@attrs.define
class NeedsName:
    name: str
    level: int = 1


def test_a_plugin_config_with_a_missing_required_field_is_checked_once(tmp_path, monkeypatch):
    """The retry that adds a class's own checks structures the good fields once; it used to
    go back through the same hook, which failed the same way on the missing field and retried
    again, until Python's recursion limit (swallowed): ~0.1 s per section, not milliseconds."""
    from loopctl.config import convert

    calls = []
    original = convert._with_range_problems

    def counted(*args):
        calls.append(args[2])
        return original(*args)

    monkeypatch.setattr(convert, "_with_range_problems", counted)
    (tmp_path / "loopctl.toml").write_text('[plugins.mine]\nlevel = "high"\n')
    with pytest.raises(loopctl.ConfigError) as caught:
        loopctl.load_project(tmp_path).plugin_config("mine", NeedsName)
    assert "plugins.mine.level" in str(caught.value)
    assert "plugins.mine.name" in str(caught.value)
    assert calls == [NeedsName]


@pytest.mark.slow
def test_a_saved_run_is_read_back_and_says_what_it_skipped(loopctl_project, run_loop):
    loopctl_project.write(
        "test_x.py",
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_x(self):\n"
        "        self.assertEqual(1, 2)\n",
    )
    loopctl_project.commit("failing")
    result = run_loop("goal", turns=[[{"say": "x"}]], config={"limits": {"max_iterations": 2}})
    run = loopctl.SavedRun(result.state_dir)
    assert run.loop_state().original_goal == "goal"
    assert [r.iteration for r in run.iterations()] == [1, 2]
    assert run.events(last=1)[0]["type"] == "loop.end"
    assert run.events()[0]["type"] == "loop.start"
    assert run.error_summary()["iteration"] == 2
    assert run.log_path(2, "tests.log").exists()
    with (result.state_dir / "iterations.jsonl").open("a") as journal:
        journal.write('{"torn": \n' + json.dumps({"iteration": "three"}) + "\n")
    problems: list[str] = []
    assert len(run.iterations(problems)) == 2
    assert len(problems) == 2
    assert "not valid JSON" in problems[0]
    assert "skipped a record" in problems[1]


def test_a_missing_run_is_a_state_error_naming_the_file(tmp_path):
    with pytest.raises(loopctl.StateError, match=r"loop-state\.md does not exist"):
        loopctl.SavedRun(tmp_path).loop_state()
    assert loopctl.SavedRun(tmp_path).iterations() == []


def test_the_defaults_read_without_the_typed_configuration_are_its_defaults():
    defaults = LoopctlConfig()
    for key, value in DEFAULTS.items():
        typed = defaults
        for part in key:
            typed = getattr(typed, part)
        assert (list(value) if isinstance(value, tuple) else value) == typed, key


#: Reads every setting a Project offers, then prints the modules of the typed configuration
#: (and cattrs) that were imported: none, when no source sets those settings.
PROBE = """
import json, sys
import attrs, loopctl

@attrs.define
class Mine:
    level: int = 1

project = loopctl.load_project()
values = [str(project.state_dir), project.max_restarts, project.test_output_bytes,
          attrs.asdict(project.plugin_config("mine", Mine)), project.plugin_failures,
          project.hook is not None]
heavy = [m for m in sys.modules if m.split(".")[0] == "cattrs" or m in
         ("loopctl.config.load", "loopctl.config.schema", "loopctl.config.convert")]
print(json.dumps([values, heavy]))
"""


def probe(cwd: Path, **env: str) -> list:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=cwd, env={**clean, **env}, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    return json.loads(done.stdout)


@pytest.mark.slow
def test_settings_no_source_sets_are_read_without_the_typed_configuration(tmp_path):
    (tmp_path / "loopctl.toml").write_text('test_cmd = "true"\n[plugins.other]\nx = 1\n')
    values, heavy = probe(tmp_path, LOOPCTL_PLUGINS="core")
    assert values == [str(tmp_path.resolve() / ".loopctl"), 3, 1_000_000, {"level": 1}, [], True]
    assert heavy == []
    # a setting a source sets is read through the typed configuration, checked
    (tmp_path / "loopctl.toml").write_text("[limits]\nmax_restarts = 5\n")
    values, heavy = probe(tmp_path, LOOPCTL_PLUGINS="core")
    assert values[1] == 5
    assert "loopctl.config.schema" in heavy


def test_a_set_setting_that_is_wrong_is_the_typed_configurations_error(tmp_path):
    (tmp_path / "loopctl.toml").write_text(
        '[limits]\nmax_restarts = 11\n[plugins.mine]\nlevel = "x"\n'
    )
    project = Project(tmp_path)
    assert project.state_dir == tmp_path / ".loopctl"  # not set: the rest is not read
    with pytest.raises(loopctl.ConfigError) as raised:
        project.max_restarts  # noqa: B018 - the property is what is tested
    assert str(raised.value) == str(attempt(lambda: load_config(tmp_path)))
    with pytest.raises(loopctl.ConfigError, match=r"max_restarts"):
        Project(tmp_path).plugin_config("mine", MineConfig)
    (tmp_path / "loopctl.toml").write_text('[plugins.mine]\nlevel = "x"\n')
    with pytest.raises(loopctl.ConfigError) as raised:
        Project(tmp_path).plugin_config("mine", MineConfig)
    assert str(raised.value) == str(
        attempt(lambda: load_config(tmp_path).plugin_section("mine", MineConfig))
    )
    assert "loopctl.toml: plugins.mine.level: expected an integer" in str(raised.value)


def attempt(call):
    try:
        return call()
    except loopctl.ConfigError as exc:
        return exc


_VALUES = st.sampled_from([None, 0, 4, 11, -1, 2000, "x", ".state", "/abs/state", ["A_*"], [1]])
_ENV_VALUES = st.sampled_from(["", "4", "11", "x", ".env-state", "A_*,B", "[1"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    top=st.dictionaries(
        st.sampled_from(["state_dir", "withhold_env", "required_plugins", "agent"]), _VALUES
    ),
    limits=st.one_of(
        st.none(),
        st.dictionaries(
            st.sampled_from(["max_restarts", "test_output_bytes", "max_iterations"]), _VALUES
        ),
    ),
    section=st.one_of(st.none(), st.dictionaries(st.sampled_from(["level", "levle"]), _VALUES)),
    env=st.dictionaries(
        st.sampled_from(
            [
                "LOOPCTL_STATE_DIR",
                "LOOPCTL_LIMITS__MAX_RESTARTS",
                "LOOPCTL_LIMITS__TEST_OUTPUT_BYTES",
                "LOOPCTL_WITHHOLD_ENV",
                "LOOPCTL_LIMITS",
            ]
        ),
        _ENV_VALUES,
        max_size=3,
    ),
)
def test_a_project_reads_what_the_typed_configuration_reads(top, limits, section, env):
    """Each setting is the typed configuration's value; when that does not load, a setting
    some source sets is its error, and one none sets is its default."""
    lines = [f"{k} = {json.dumps(v)}" for k, v in top.items() if v is not None]
    for name, table in (("limits", limits), ("plugins.mine", section)):
        if table is not None:
            lines.append(f"[{name}]")
            lines += [f"{k} = {json.dumps(v)}" for k, v in table.items() if v is not None]
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / ".git").mkdir()
        (root / "loopctl.toml").write_text("\n".join(lines) + "\n")
        typed = attempt(lambda: load_config(root, env=env))
        raw = RawSettings(root, env=env)
        project = Project(root, trust_config=True)  # values as read (trust: tested below)
        project._raw = raw  # the same environment as the typed load
        reads = {
            ("state_dir",): lambda: project.state_dir,
            ("limits", "max_restarts"): lambda: project.max_restarts,
            ("limits", "test_output_bytes"): lambda: project.test_output_bytes,
            ("withhold_env",): lambda: list(project._setting("withhold_env")),
            ("required_plugins",): lambda: list(project._setting("required_plugins")),
            ("plugins", "mine"): lambda: project.plugin_config("mine", MineConfig),
        }
        for key, read in reads.items():
            project._raw = raw
            project.__dict__.pop("_loaded", None)
            got = attempt(read)
            if isinstance(typed, loopctl.ConfigError):
                if raw.sets(*key):
                    assert isinstance(got, loopctl.ConfigError), key
                    assert str(got) == str(typed), key
                else:
                    assert not isinstance(got, loopctl.ConfigError), key
                continue
            if key == ("plugins", "mine"):
                want = attempt(lambda: typed.plugin_section("mine", MineConfig))
                assert str(got) == str(want) if isinstance(want, Exception) else got == want
                continue
            want = typed.config
            for part in key:
                want = getattr(want, part)
            if key == ("state_dir",):
                want = Path(want) if Path(want).is_absolute() else root / want
            assert got == want, key


def test_loopctl_model_offers_the_classes_it_defines_on_first_use():
    """The classes of a running loop live in loopctl.runmodel, loaded when first used; every
    name is still loopctl.model's (and loopctl's)."""
    import loopctl.model
    import loopctl.runmodel

    for name in loopctl.model._RUN_MODEL:
        assert getattr(loopctl.model, name) is getattr(loopctl.runmodel, name)
    assert loopctl.Decision is loopctl.model.Decision
    assert repr(loopctl.model.PromptSection("t", "x")).startswith("PromptSection(")
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        loopctl.model.Nope  # noqa: B018 - the lookup is what is tested


def test_check_settings_checks_as_run_does_and_reads_nothing_else(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loopctl.toml").write_text("[limits]\nmax_iterations = 'not read'\n")
    monkeypatch.setenv("LOOPCTL_MAX_ITERATIONS", "not read either")
    loopctl.check_settings({"test_cmd": "pytest -q", "limits": {"max_iterations": 4}}, where="t")
    with pytest.raises(loopctl.ConfigError) as caught:
        loopctl.check_settings(
            {"limits": {"max_iteration": 4, "max_restarts": "x"}, "max_cost_usd": 1},
            where="tasks.toml: task[2]",
        )
    lines = str(caught.value).splitlines()
    assert all(line.startswith("tasks.toml: task[2]: ") for line in lines), lines
    assert any("max_iteration" in line and "did you mean" in line for line in lines)
    assert any("max_restarts" in line for line in lines)
    assert any("it belongs in [limits]" in line for line in lines)


def test_check_settings_checks_a_plugin_section_against_its_class(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(loopctl.ConfigError, match=r"^w: plugins\.goal-guard: unknown key 'bogus'"):
        loopctl.check_settings({"plugins": {"goal-guard": {"bogus": 1}}}, where="w")


def test_a_state_dir_the_config_file_leads_out_of_the_project_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOPCTL_STATE_DIR", raising=False)
    work, outside = tmp_path / "work", tmp_path / "elsewhere"
    (work / "sub").mkdir(parents=True)
    for setting in (str(outside), "../elsewhere", "state/../../elsewhere"):
        (work / "loopctl.toml").write_text(f"state_dir = {json.dumps(setting)}\n")
        with pytest.raises(loopctl.UntrustedConfig) as caught:
            _ = loopctl.load_project(work).state_dir
        assert str(caught.value).startswith(
            f"loopctl.toml: state_dir leads outside the project (to {outside.resolve()})"
        )
        assert caught.value.instead == "--state-dir DIR"
        assert "--trust-config" in str(caught.value)
        assert isinstance(caught.value, loopctl.ConfigError)  # every command reports those
        trusted = loopctl.load_project(work, trust_config=True).state_dir
        assert trusted.resolve() == outside.resolve()
    # inside the project (or the config file's directory, for a command run below it): kept
    (work / "loopctl.toml").write_text('state_dir = "../.runs"\n')
    assert loopctl.load_project(work / "sub").state_dir == work.resolve() / "sub" / "../.runs"
    (work / "loopctl.toml").write_text(f"state_dir = {json.dumps(str(work / 'runs'))}\n")
    assert loopctl.load_project(work).state_dir == work / "runs"
    # the default, led out by a symbolic link the repository holds
    (work / "loopctl.toml").write_text("")
    (work / ".loopctl").symlink_to(outside, target_is_directory=True)
    with pytest.raises(
        loopctl.UntrustedConfig, match=r"^the default state_dir .*\.loopctl leads outside"
    ):
        _ = loopctl.load_project(work).state_dir
    # what the user sets is trusted: a LOOPCTL_* variable
    (work / "loopctl.toml").write_text('state_dir = "/nowhere"\n')
    monkeypatch.setenv("LOOPCTL_STATE_DIR", str(outside))
    assert loopctl.load_project(work).state_dir == outside


def test_untrusted_setting_names_what_the_config_file_sets(tmp_path, monkeypatch):
    monkeypatch.delenv("LOOPCTL_TEST_CMD", raising=False)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.loopctl]\ntest_cmd = "./check.sh"\n[tool.loopctl.plugins.mine]\nlevel = 2\n'
    )
    project = loopctl.load_project(tmp_path)
    where = "pyproject.toml: tool.loopctl.plugins.mine.level"
    assert project.untrusted_setting("plugins", "mine", "level") == where
    assert project.untrusted_setting("plugins", "mine") == where  # a table: any key in it
    assert project.untrusted_setting("test_cmd") == "pyproject.toml: tool.loopctl.test_cmd"
    assert project.untrusted_setting("limits", "max_restarts") is None  # the default
    assert project.untrusted_setting("plugins", "other", "url") is None
    trusted = loopctl.load_project(tmp_path, trust_config=True)
    assert trusted.trust_config
    assert trusted.untrusted_setting("plugins", "mine", "level") is None
    monkeypatch.setenv("LOOPCTL_TEST_CMD", "pytest -q")  # the user's own value wins: trusted
    assert loopctl.load_project(tmp_path).untrusted_setting("test_cmd") is None
