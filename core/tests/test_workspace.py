"""Change detection in the working tree, with git and without."""

from __future__ import annotations

import subprocess

import pytest

from loopctl.workspace import Workspace, parse_porcelain_v2


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "no-git"])
def test_a_same_size_edit_right_after_a_snapshot_is_seen(tmp_path, use_git):
    if use_git:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "calc.py").write_text("return a - b\n")
    workspace = Workspace(tmp_path)
    before = workspace.snapshot()
    (tmp_path / "calc.py").write_text("return a + b\n")  # same size, same clock tick
    after = workspace.snapshot()
    assert after.tree_hash != before.tree_hash
    assert workspace.changed_files(before, after) == ["calc.py"]
    assert workspace.changed_files(after, workspace.snapshot()) == []  # nothing changed since


def test_the_ignored_state_dir_never_counts_as_a_change(tmp_path):
    workspace = Workspace(tmp_path, ignore=(".loopctl",))
    before = workspace.snapshot()
    (tmp_path / ".loopctl").mkdir()
    (tmp_path / ".loopctl" / "events.jsonl").write_text("{}\n")
    assert workspace.changed_files(before, workspace.snapshot()) == []


def test_porcelain_v2_parsing_handles_renames_and_spaces():
    output = "\0".join(
        [
            "# branch.oid 0123abcd",
            "1 .M N... 100644 100644 100644 aaa bbb dir/a file.py",
            "2 R. N... 100644 100644 100644 aaa bbb R100 new name.py",
            "old name.py",
            "? untracked.txt",
            "",
        ]
    )
    head, paths = parse_porcelain_v2(output)
    assert head == "0123abcd"
    assert paths == ["dir/a file.py", "new name.py", "untracked.txt"]


def test_a_directory_its_enclosing_repository_ignores_is_not_git(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("scratch/\n")
    project = tmp_path / "scratch" / "project"
    project.mkdir(parents=True)
    (project / "calc.py").write_text("x = 1\n")
    workspace = Workspace(project)
    assert workspace.is_git is False
    before = workspace.snapshot()
    (project / "calc.py").write_text("x = 2\n")
    assert workspace.changed_files(before, workspace.snapshot()) == ["calc.py"]


@pytest.mark.parametrize("use_git", [True, False], ids=["git", "no-git"])
def test_a_started_snapshot_is_the_snapshot_and_git_runs_meanwhile(tmp_path, use_git):
    """``start_snapshot`` starts git at once and collects it in ``result`` (the same snapshot
    as ``snapshot``, the same on every call); without git the scan happens in ``result``."""
    if use_git:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "calc.py").write_text("return a - b\n")
    workspace = Workspace(tmp_path)
    pending = workspace.start_snapshot()
    running = pending._process
    assert (running is not None) is use_git  # started, not yet waited for
    first = pending.result()
    assert first == workspace.snapshot()
    assert dict(first.files) == dict(workspace.snapshot().files)
    assert pending.result() is first
    if running is not None:
        assert running.returncode == 0  # reaped


def test_an_abandoned_snapshot_leaves_no_git_behind(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    pending = Workspace(tmp_path).start_snapshot()
    running = pending._process
    assert running is not None
    pending.abandon()
    assert running.returncode is not None  # ended and reaped


def test_a_snapshot_whose_git_cannot_start_has_no_hash(tmp_path, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    workspace = Workspace(tmp_path)
    monkeypatch.setattr(workspace, "_git_exe", str(tmp_path / "no-such-git"))
    snapshot = workspace.start_snapshot().result()
    assert (snapshot.tree_hash, snapshot.commit) == (None, None)


@pytest.mark.parametrize(
    "cache", [".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis", ".cache"]
)
def test_without_git_tool_caches_are_not_changes(tmp_path, cache):
    """Issue 25: a project without git listed `.pytest_cache/` files as the agent's changes."""
    workspace = Workspace(tmp_path)
    before = workspace.snapshot()
    (tmp_path / cache / "v" / "cache").mkdir(parents=True)
    (tmp_path / cache / "v" / "cache" / "lastfailed").write_text("{}\n")
    (tmp_path / "calc.py").write_text("x = 1\n")
    assert workspace.changed_files(before, workspace.snapshot()) == ["calc.py"]


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_change_diff_gives_the_changed_lines_only_when_they_can_be_told_exactly(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "calc.py").write_text("x = 1\ndef add(a, b):\n    return a - b\n")
    (tmp_path / "gone.py").write_text("old\n")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    workspace = Workspace(tmp_path)
    start = workspace.snapshot()
    (tmp_path / "calc.py").write_text("x = 1\ndef add(a, b):\n    return a * b\n")
    (tmp_path / "gone.py").unlink()
    after = workspace.snapshot()
    changed = workspace.changed_files(start, after)
    assert workspace.change_diff(start, after, changed).splitlines() == [
        "calc.py",
        "-    return a - b",
        "+    return a * b",
        "gone.py (deleted)",
        "-old",
    ]
    # calc.py already differed from HEAD at the start: its start content is not known
    (tmp_path / "calc.py").write_text("x = 1\ndef add(a, b):\n    return a + b\n")
    assert workspace.change_diff(after, workspace.snapshot(), ["calc.py"]) == ""
    # HEAD moved during the iteration
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "d")
    assert workspace.change_diff(start, workspace.snapshot(), ["calc.py"]) == ""
