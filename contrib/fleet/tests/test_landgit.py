"""The git steps of landing: a result put on the tip (rebased or merged), a conflict described
and aborted, the base updated only while it still points at the tip the tree was made from."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleet_testkit import run_git

from loopctl_fleet import checkout, landgit
from loopctl_fleet.checkout import GitError


def commit_on(bare: Path, tmp: Path, branch: str, start: str, files: dict[str, str]) -> str:
    """A commit on ``branch`` of ``bare`` from ``start`` that writes ``files``; its sha."""
    work = tmp / f"w-{branch.replace('/', '-')}"
    run_git("clone", "-q", str(bare), str(work), cwd=tmp)
    run_git("checkout", "-q", "-B", branch, start, cwd=work)
    for name, text in files.items():
        (work / name).write_text(text)
    run_git("add", "-A", cwd=work)
    run_git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", branch, cwd=work)
    run_git("push", "-q", "-f", "origin", f"HEAD:refs/heads/{branch}", cwd=work)
    return run_git("rev-parse", "HEAD", cwd=work).strip()


def tree_at(tmp: Path, bare: Path, sha: str) -> tuple[Path, Path]:
    mirror = checkout.update_mirror(tmp / "home", str(bare))
    tree = tmp / "tree"
    checkout.add_worktree(mirror, sha, tree)
    return mirror, tree


def test_a_result_rebased_onto_a_moved_tip_keeps_history_linear(tmp_path: Path, bare: Path) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"r.txt": "r\n"})
    tip = commit_on(bare, tmp_path, "main", base, {"other.txt": "o\n"})
    _, tree = tree_at(tmp_path, bare, result)
    assert landgit.put_on(tree, tip, result, "rebase", "t") is None
    landed = landgit.head(tree)
    assert run_git("rev-parse", f"{landed}~1", cwd=tree).strip() == tip
    assert landgit.push_base(tree, str(bare), "main", tip)
    assert run_git("rev-parse", "main", cwd=bare).strip() == landed


def test_a_merge_makes_a_merge_commit_of_the_tip_and_the_result(tmp_path: Path, bare: Path) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"r.txt": "r\n"})
    _, tree = tree_at(tmp_path, bare, base)
    assert landgit.put_on(tree, base, result, "merge", "Land r") is None
    parents = run_git("rev-list", "--parents", "-1", "HEAD", cwd=tree).split()[1:]
    assert parents == [base, result]


def test_a_conflict_names_its_files_and_hunks_and_leaves_the_tree_clean(
    tmp_path: Path, bare: Path
) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"f.txt": "from the result\n"})
    tip = commit_on(bare, tmp_path, "main", base, {"f.txt": "from the base\n"})
    _, tree = tree_at(tmp_path, bare, result)
    conflict = landgit.put_on(tree, tip, result, "rebase", "t")
    assert conflict is not None
    assert conflict.files == ["f.txt"]
    assert "<<<<<<<" in conflict.hunks
    assert "from the result" in conflict.hunks
    assert "from the base" in conflict.hunks
    assert run_git("status", "--porcelain", cwd=tree) == ""
    assert landgit.head(tree) == result


def test_a_base_that_moved_is_never_overwritten(tmp_path: Path, bare: Path) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"r.txt": "r\n"})
    _, tree = tree_at(tmp_path, bare, result)
    assert landgit.put_on(tree, base, result, "rebase", "t") is None
    moved = commit_on(bare, tmp_path, "main", base, {"other.txt": "o\n"})  # meanwhile
    assert landgit.push_base(tree, str(bare), "main", base) is False
    assert run_git("rev-parse", "main", cwd=bare).strip() == moved


def test_the_base_must_be_a_branch(tmp_path: Path, bare: Path) -> None:
    assert landgit.base_branch(str(bare), "HEAD") == "main"
    assert landgit.base_branch(str(bare), "main") == "main"
    run_git("tag", "v1", "main", cwd=bare)
    with pytest.raises(GitError, match="only a result based on a branch can be landed"):
        landgit.base_branch(str(bare), "v1")


def test_a_branch_is_deleted_only_while_it_is_the_result(tmp_path: Path, bare: Path) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"r.txt": "r\n"})
    landgit.delete_branch(str(bare), "loopctl/r", base)  # moved on since: someone's work now
    assert landgit.remote_tip(str(bare), "loopctl/r") == result
    landgit.delete_branch(str(bare), "loopctl/r", result)
    assert landgit.remote_tip(str(bare), "loopctl/r") is None


@pytest.mark.parametrize("mode", ["rebase", "merge", "fast-forward"])
def test_a_landed_result_is_found_on_the_tip_as_it_landed(
    tmp_path: Path, bare: Path, mode: str
) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"r.txt": "r\n"})
    if mode != "fast-forward":  # else the result lands as itself
        commit_on(bare, tmp_path, "main", base, {"other.txt": "o\n"})
    tip = run_git("rev-parse", "main", cwd=bare).strip()
    mirror, tree = tree_at(tmp_path, bare, result if mode != "merge" else tip)
    assert landgit.landed_as(mirror, tip, result) is None  # not landed yet
    assert landgit.put_on(tree, tip, result, "merge" if mode == "merge" else "rebase", "t") is None
    landed = landgit.head(tree)
    assert landgit.push_base(tree, str(bare), "main", tip)
    (tmp_path / "later").mkdir()
    later = commit_on(bare, tmp_path / "later", "main", landed, {"l.txt": "l\n"})  # moves on
    mirror = checkout.update_mirror(tmp_path / "home", str(bare))
    assert landgit.landed_as(mirror, later, result) == landed
    assert (landed == result) is (mode == "fast-forward")


def test_a_copy_of_the_same_change_is_not_taken_for_the_landed_result(
    tmp_path: Path, bare: Path
) -> None:
    base = run_git("rev-parse", "main", cwd=bare).strip()
    result = commit_on(bare, tmp_path, "loopctl/r", base, {"r.txt": "r\n"})
    tip = commit_on(bare, tmp_path, "main", base, {"r.txt": "r\n"})  # same change, not it
    mirror = checkout.update_mirror(tmp_path / "home", str(bare))
    assert landgit.landed_as(mirror, tip, result) is None
