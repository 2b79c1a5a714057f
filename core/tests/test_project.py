"""load_project and SavedRun: what a plugin's own command sees of a project and its runs."""

from __future__ import annotations

import json

import attrs
import pytest

import loopctl
from loopctl import hookimpl


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
