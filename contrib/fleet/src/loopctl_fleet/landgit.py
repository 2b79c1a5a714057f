"""The git side of landing a result on its base branch, on a worker.

A result is put on the base's current tip in a fresh worktree of the worker's mirror: rebased
(the result's commits replayed on the tip: the base's history stays linear) or merged (a merge
commit of the tip and the result). A conflict is aborted and described (the files, and the
hunks with their markers) for the follow-up agent. The base is then updated with a lease on the
tip the tree was made from (``--force-with-lease=<ref>:<tip>``): a base that moved meanwhile is
never overwritten; the push fails, and the caller starts again from the new tip.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from loopctl_fleet.checkout import AUTHOR, GitError, git
from loopctl_fleet.classes import FailureClass

MODES = ("rebase", "merge")
#: How much of the conflict hunks a follow-up's goal carries.
MAX_HUNKS_CHARS = 6000


@dataclasses.dataclass
class Conflict:
    """Why a result does not apply on the tip: the conflicting files and their hunks."""

    files: list[str]
    hunks: str


def identity() -> list[str]:
    """git options that make the landing commits the fleet's (never the worker's user's)."""
    name, email = AUTHOR
    return ["-c", f"user.name={name}", "-c", f"user.email={email}", "-c", "commit.gpgsign=false"]


def branch_name(repo: str, base: str) -> str:
    """The branch name a task's ``base`` stands for: the branch ``HEAD`` points at in ``repo``
    (read from it), or ``base`` without ``refs/heads/``; not checked to exist."""
    if base == "HEAD":
        out = git(["ls-remote", "--symref", repo, "HEAD"], what=f"reading {repo}")
        for line in out.splitlines():
            if line.startswith("ref: refs/heads/") and line.endswith("\tHEAD"):
                return line[len("ref: refs/heads/") : -len("\tHEAD")]
        raise GitError(f"{repo} has no default branch to land on", FailureClass.REPOSITORY)
    return base.removeprefix("refs/heads/")


def base_branch(repo: str, base: str) -> str:
    """The branch a task's ``base`` names in ``repo`` (:func:`branch_name`); :class:`GitError`
    if it names no branch (a tag or a commit cannot be landed on)."""
    branch = branch_name(repo, base)
    if remote_tip(repo, branch) is None:
        raise GitError(
            f"{repo} has no branch {branch!r}: only a result based on a branch can be landed",
            FailureClass.REPOSITORY,
        )
    return branch


def remote_tip(repo: str, branch: str) -> str | None:
    """The commit ``branch`` points at in ``repo`` now, or None if there is no such branch."""
    ref = f"refs/heads/{branch}"
    out = git(["ls-remote", "--heads", repo, ref], what=f"reading {repo}")
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if name == ref:
            return sha
    return None


def put_on(tree: Path, tip: str, commit: str, mode: str, title: str) -> Conflict | None:
    """Make ``tree`` (a worktree detached at ``commit`` for a rebase, at ``tip`` for a merge)
    hold the result on ``tip``; the conflict if it does not apply (the tree is left clean)."""
    if mode == "rebase":
        args, abort = ["rebase", "--quiet", tip], ["rebase", "--abort"]
    else:
        args = ["merge", "--no-ff", "--quiet", "-m", title, commit]
        abort = ["merge", "--abort"]
    try:
        git([*identity(), *args], cwd=tree, what=f"{mode} onto {tip[:12]}")
    except GitError:
        conflict = _conflict(tree)
        git(abort, cwd=tree, what=f"aborting the {mode}")
        if not conflict.files:
            raise
        return conflict
    return None


def _conflict(tree: Path) -> Conflict:
    files = git(
        ["diff", "--name-only", "--diff-filter=U"], cwd=tree, what="listing conflicts"
    ).split()
    hunks = git(["diff", "--", *files], cwd=tree, what="reading conflicts") if files else ""
    if len(hunks) > MAX_HUNKS_CHARS:
        hunks = hunks[:MAX_HUNKS_CHARS] + "\n[… more conflict hunks left out]\n"
    return Conflict(files, hunks)


def head(tree: Path) -> str:
    return git(["rev-parse", "HEAD"], cwd=tree, what="reading the landed commit").strip()


def landed_as(mirror: Path, tip: str, commit: str) -> str | None:
    """The commit of ``tip``'s first-parent history that landed ``commit`` — ``commit`` itself
    (a fast-forward), a merge of it, or its rebased copy (the same author, author date and
    message: the message's trailers name the task's run) — or None if ``tip`` does not hold
    it: a landing whose push went through before its worker could say so is recognized, never
    landed twice."""
    what = f"looking for {commit[:12]} on {tip[:12]}"
    fields = "%an%x00%ae%x00%at%x00%B"
    own = git(["log", "-1", f"--format={fields}", commit, "--"], cwd=mirror, what=what).strip()
    out = git(
        ["log", "--first-parent", f"--format=%H %P%x00{fields}%x1e", f"{commit}..{tip}", "--"],
        cwd=mirror,
        what=what,
    )
    for record in out.split("\x1e"):
        shas, _, made = record.strip().partition("\0")
        found, *parents = shas.split() or [""]
        if found and (commit in parents[1:] or made == own):
            return found
    try:
        git(["merge-base", "--is-ancestor", commit, tip], cwd=mirror, what=what)
    except GitError:
        return None
    return commit


def push_base(
    tree: Path, repo: str, branch: str, tip: str, head: tuple[str, str] | None = None
) -> bool:
    """Update ``branch`` in ``repo`` to ``tree``'s HEAD if it still points at ``tip``; False if
    it moved meanwhile (nothing was changed), :class:`GitError` if the push failed otherwise.
    With ``head`` (a pull request's head branch and the commit it must still point at), that
    branch is moved to the same commit in the same atomic push: both move, or neither."""
    moves = [(branch, tip), *([head] if head else [])]
    leases = [f"--force-with-lease=refs/heads/{name}:{was}" for name, was in moves]
    targets = [f"HEAD:refs/heads/{name}" for name, _ in moves]
    try:
        git(
            ["push", "--quiet", "--atomic", *leases, repo, *targets],
            cwd=tree,
            what=f"updating {' and '.join(name for name, _ in moves)} in {repo}",
        )
    except GitError:
        if remote_tip(repo, branch) != tip:
            return False
        if head and (now := remote_tip(repo, head[0])) != head[1]:
            raise HeadMoved(head[0], head[1], now) from None
        raise
    return True


class HeadMoved(GitError):
    """A pull request's head branch is no longer the result that was tested."""

    def __init__(self, head: str, commit: str, now: str | None) -> None:
        super().__init__(
            f"{head} moved from {commit[:12]} to {(now or 'nothing')[:12]}",
            FailureClass.REPOSITORY,
        )
        self.now = now


def delete_branch(repo: str, branch: str, commit: str) -> None:
    """Delete ``branch`` from ``repo`` if it still points at ``commit`` (a branch that moved
    is someone's work now: it is left alone)."""
    ref = f"refs/heads/{branch}"
    try:
        git(
            ["push", "--quiet", f"--force-with-lease={ref}:{commit}", repo, f":{ref}"],
            what=f"deleting {branch} from {repo}",
        )
    except GitError:
        if remote_tip(repo, branch) == commit:
            raise
