"""A loop's cost stays flat as its history grows: what each iteration, ``resume`` and the report
read and write does not depend on how many iterations came before."""

from __future__ import annotations

import pytest
from calc_loop import IDLE, make_calc_project, run

from loopctl import state as st
from loopctl.state.gitignore import GITIGNORE_TEXT
from loopctl.testing import Project, make_project


@pytest.fixture
def project(tmp_path) -> Project:
    """The calc project in a repository whose own ``.gitignore`` does not mention the state
    directory (the testing kit's does)."""
    project = make_project(tmp_path / "project")
    project.write(".gitignore", "__pycache__/\n")
    return make_calc_project(project)


# --- the state directory ignores itself in git ---------------------------------------------------


def test_git_status_lists_none_of_the_state_files_after_a_run(project):
    result = run(project, [IDLE], config={"limits": {"max_iterations": 3}})
    assert result.status == "max_iterations"
    assert (result.state_dir / "logs").is_dir()
    assert (result.state_dir / ".gitignore").read_text().startswith("*\n")
    listed = project.git("status", "--porcelain", "--untracked-files=all").splitlines()
    assert [line for line in listed if ".loopctl/" in line] == []
    assert any("loopctl.toml" in line for line in listed)  # the user's own files still show


def test_an_existing_state_dir_gets_its_gitignore_on_resume(project):
    first = run(project, [IDLE], config={"limits": {"max_iterations": 1}})
    (first.state_dir / ".gitignore").unlink()  # as loopctl 0.2.0 left it
    assert ".loopctl/" in project.git("status", "--porcelain", "--untracked-files=all")
    from loopctl.testing import run_loop

    run_loop(project, "", turns=[IDLE], resume=True, config={"limits": {"max_iterations": 2}})
    assert (first.state_dir / ".gitignore").is_file()
    assert ".loopctl/" not in project.git("status", "--porcelain", "--untracked-files=all")


def test_a_state_dir_elsewhere_ignores_itself_too(project, tmp_path):
    elsewhere = tmp_path / "state"
    result = run(
        project, [IDLE], config={"state_dir": str(elsewhere), "limits": {"max_iterations": 1}}
    )
    assert result.state_dir == elsewhere
    assert (elsewhere / ".gitignore").is_file()


def test_the_gitignore_is_never_written_over_a_project_or_another_file(tmp_path):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    assert not st.ignore_in_git(work, work)  # --state-dir .
    assert not st.ignore_in_git(tmp_path, work)  # a parent of the project
    assert not (work / ".gitignore").exists()
    assert not (tmp_path / ".gitignore").exists()
    own = work / "notes"
    own.mkdir()
    (own / "todo.txt").write_text("mine")
    assert not st.ignore_in_git(own, work)  # the user's directory, none of loopctl's files
    (own / st.LOOP_STATE_FILE).write_text("---\n")
    (own / ".gitignore").write_text("todo.txt\n")
    assert not st.ignore_in_git(own, work)  # a .gitignore of the user's stays as it is
    assert (own / ".gitignore").read_text() == "todo.txt\n"
    fresh = work / ".loopctl"
    fresh.mkdir()
    assert st.ignore_in_git(fresh, work)
    assert (fresh / ".gitignore").read_text() == GITIGNORE_TEXT
    assert not st.ignore_in_git(fresh, work)  # once


def test_without_git_the_snapshot_never_walks_a_state_dir_of_any_name(tmp_path, monkeypatch):
    from loopctl import workspace as ws

    monkeypatch.setattr(ws, "MAX_SCANNED_FILES", 5)
    state = tmp_path / "run-state" / "logs"  # not .loopctl: not among SKIP_DIRS
    state.mkdir(parents=True)
    for number in range(10):
        (state / st.log_name(number, "tests.log")).write_text("x")
    (tmp_path / "zz").mkdir()  # walked after run-state/
    (tmp_path / "zz" / "calc.py").write_text("return a - b\n")
    workspace = ws.Workspace(tmp_path, ignore=("run-state",))
    assert not workspace.is_git
    assert set(workspace.snapshot().files) == {"zz/calc.py"}
