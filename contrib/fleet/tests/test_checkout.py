"""The git side of a task: mirror, a tree at the base commit, one result branch, fenced."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fleet_testkit import run_git

from loopctl_fleet.checkout import (
    GitError,
    add_worktree,
    commit_result,
    existing_result,
    mirror_with,
    prune_dead_trees,
    push_result,
    remove_worktree,
    resolve,
    update_mirror,
)
from loopctl_fleet.classes import FailureClass


def test_a_task_tree_is_at_its_base_and_its_result_is_one_fenced_branch(
    tmp_path: Path, bare: Path
) -> None:
    cache = tmp_path / "cache"
    mirror = update_mirror(cache, str(bare))
    sha = resolve(mirror, str(bare), "main")
    assert sha == run_git("rev-parse", "main", cwd=bare).strip()
    tree = tmp_path / "attempt-1"
    add_worktree(mirror, sha, tree)
    assert (tree / "f.txt").read_text() == "broken\n"
    (tree / "f.txt").write_text("fixed\n")
    (tree / "new.py").write_text("y = 1\n")

    made = commit_result(tree, "Fix the parser", {"Loopctl-Task": "t1", "Loopctl-Attempt": "1"})
    push_result(tree, str(bare), "t1")

    assert existing_result(str(bare), "t1") == made
    assert run_git("rev-list", "--count", "main..loopctl/t1", cwd=bare).strip() == "1"
    message = run_git("log", "-1", "--format=%B%n%an <%ae>", "loopctl/t1", cwd=bare)
    assert "Loopctl-Task: t1\nLoopctl-Attempt: 1\n" in message
    assert "loopctl fleet <fleet@loopctl.invalid>" in message
    assert run_git("show", "--stat", "--format=", "loopctl/t1", cwd=bare).count("|") == 2

    # a second attempt (another worker) cannot replace it
    other = tmp_path / "attempt-2"
    add_worktree(update_mirror(tmp_path / "cache2", str(bare)), sha, other)
    commit_result(other, "Fix the parser again", {"Loopctl-Task": "t1"})
    with pytest.raises(GitError, match="pushing the result"):
        push_result(other, str(bare), "t1")
    assert existing_result(str(bare), "t1") == made
    remove_worktree(mirror, tree)
    assert not tree.exists()


def test_a_goal_that_needed_no_change_is_still_a_commit(tmp_path: Path, bare: Path) -> None:
    mirror = update_mirror(tmp_path / "cache", str(bare))
    tree = tmp_path / "t"
    add_worktree(mirror, resolve(mirror, str(bare), "main"), tree)
    commit_result(tree, "Nothing to do", {"Loopctl-Task": "t2"})
    push_result(tree, str(bare), "t2")
    assert run_git("rev-list", "--count", "main..loopctl/t2", cwd=bare).strip() == "1"


def test_the_mirror_is_fetched_again_for_the_next_task(tmp_path: Path, bare: Path) -> None:
    cache = tmp_path / "cache"
    update_mirror(cache, str(bare))
    first = tmp_path / "first"
    add_worktree(
        update_mirror(cache, str(bare)),
        resolve(update_mirror(cache, str(bare)), str(bare), "main"),
        first,
    )
    commit_result(first, "a new base", {})
    run_git("push", "-q", str(bare), "HEAD:refs/heads/next", cwd=first)
    mirror = update_mirror(cache, str(bare))
    assert resolve(mirror, str(bare), "next") == run_git("rev-parse", "HEAD", cwd=first).strip()


def test_a_missing_base_ref_is_a_repository_failure(tmp_path: Path, bare: Path) -> None:
    mirror = update_mirror(tmp_path / "cache", str(bare))
    with pytest.raises(GitError, match="has no branch, tag or commit 'nope'") as caught:
        resolve(mirror, str(bare), "nope")
    assert caught.value.failure_class is FailureClass.REPOSITORY


def test_a_repository_that_is_not_there_is_a_repository_failure(tmp_path: Path) -> None:
    with pytest.raises(GitError, match="cloning") as caught:
        update_mirror(tmp_path / "cache", str(tmp_path / "missing.git"))
    assert caught.value.failure_class is FailureClass.REPOSITORY
    assert not list((tmp_path / "cache" / "mirrors").glob("*.git"))  # nothing half-made kept


def test_a_mirror_that_has_the_commit_is_not_fetched_again(tmp_path: Path, bare: Path) -> None:
    cache = tmp_path / "cache"
    mirror = update_mirror(cache, str(bare))
    sha = resolve(mirror, str(bare), "main")
    fetched = mirror / "FETCH_HEAD"
    before = fetched.stat().st_mtime_ns if fetched.exists() else None
    assert mirror_with(cache, str(bare), sha) == mirror
    assert (fetched.stat().st_mtime_ns if fetched.exists() else None) == before
    # a commit it lacks (pushed since, from elsewhere) is fetched
    elsewhere = tmp_path / "elsewhere"
    run_git("clone", "-q", str(bare), str(elsewhere), cwd=tmp_path)
    newer = commit_result(elsewhere, "newer", {})
    run_git("push", "-q", "origin", "HEAD:refs/heads/newer", cwd=elsewhere)
    assert mirror_with(cache, str(bare), newer) == mirror
    assert resolve(mirror, str(bare), "newer") == newer


def test_a_dead_worker_s_trees_are_pruned_and_a_live_one_s_kept(tmp_path: Path, bare: Path) -> None:
    cache = tmp_path / "cache"
    mirror = update_mirror(cache, str(bare))
    sha = resolve(mirror, str(bare), "main")
    dead, live = tmp_path / "dead-tree", tmp_path / "live-tree"
    # a worker that made a tree and was killed in it
    made_then_killed = (
        "import os, signal, sys; from pathlib import Path; "
        "from loopctl_fleet.checkout import add_worktree; "
        "add_worktree(Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    done = subprocess.run([sys.executable, "-c", made_then_killed, str(mirror), sha, str(dead)])
    assert done.returncode == -9
    add_worktree(mirror, sha, live)  # this process's: alive
    assert (dead / "f.txt").exists()

    assert prune_dead_trees(cache) == [dead]
    assert not dead.exists()
    assert (live / "f.txt").exists()
    listed = run_git("worktree", "list", "--porcelain", cwd=mirror)
    assert f"worktree {live}" in listed
    assert str(dead) not in listed
    assert prune_dead_trees(cache) == []
