"""The git side of a task on a worker: a fresh tree at the base commit, the result as a commit.

Each worker keeps one mirror per repository (``<cache>/mirrors/<hash>.git``: cloned once,
fetched before each task under a lock, so two slots never fetch into it at once) and gives every
attempt its own worktree of it, detached at the task's base commit: tens of milliseconds instead
of a clone. The result is one commit on ``loopctl/<task id>``, pushed to the task's repository
with a lease that the branch must not exist yet: however many attempts a task takes and
whichever worker ran them, exactly one result branch exists, and an attempt that finds the branch
already made by an earlier attempt of the same task (its trailers name the task, the fleet's
workflow and its run) returns that one. Any other branch of that name (made by hand, by another
fleet, before a fleet's state was wiped) is never taken for the result.

Git never asks for credentials here (``GIT_TERMINAL_PROMPT=0``): a worker's git uses its own
credential helper or SSH key, or fails with a message that says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from loopctl_fleet.classes import FailureClass

AUTHOR = ("loopctl fleet", "fleet@loopctl.invalid")
#: The trailer that marks a result commit as a task's (and which task's).
TASK_TRAILER = "Loopctl-Task"
#: The trailers that say which fleet's workflow (its id names the fleet and the task) and which
#: run of it made the commit: only a commit with all three of the task's is its result.
WORKFLOW_TRAILER = "Loopctl-Workflow"
RUN_TRAILER = "Loopctl-Run"
GIT_TIMEOUT_S = 600.0

#: git's words for a repository that is not there or not ours to read: trying again elsewhere
#: will not help. Anything else (a host that does not answer, a full disk) might.
_NOT_THERE = re.compile(
    r"repository .* not found|does not appear to be a git repository|not a git repository|"
    r"could not read from remote repository|authentication failed|permission denied|"
    r"access denied|does not exist|could not find remote branch|invalid username or password|"
    r"terminal prompts disabled",
    re.IGNORECASE,
)


class GitError(RuntimeError):
    """A git step failed; ``failure_class`` says whether another attempt could succeed."""

    def __init__(self, message: str, failure_class: FailureClass) -> None:
        super().__init__(message)
        self.failure_class = failure_class


def git(args: Sequence[str], *, cwd: Path | None = None, what: str) -> str:
    """Run git; its standard output, or :class:`GitError` saying ``what`` failed and why."""
    from loopctl import child_environment, redact

    env = child_environment()
    env.update(GIT_TERMINAL_PROMPT="0", GIT_ASKPASS="", SSH_ASKPASS="", LC_ALL="C")
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=GIT_TIMEOUT_S,
        )
    except FileNotFoundError:
        raise GitError("git is not installed on this worker", FailureClass.INFRASTRUCTURE) from None
    except subprocess.TimeoutExpired:
        raise GitError(
            f"{what}: git took over {GIT_TIMEOUT_S:.0f} s", FailureClass.INFRASTRUCTURE
        ) from None
    if done.returncode != 0:
        said = redact(
            done.stderr.strip().splitlines()[-1]
            if done.stderr.strip()
            else f"exit {done.returncode}"
        )
        cls = (
            FailureClass.REPOSITORY
            if _NOT_THERE.search(done.stderr)
            else FailureClass.INFRASTRUCTURE
        )
        raise GitError(f"{what}: {said}", cls)
    return done.stdout


def mirror_path(cache: Path, repo: str) -> Path:
    return cache / "mirrors" / (hashlib.sha256(repo.encode()).hexdigest()[:20] + ".git")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def update_mirror(cache: Path, repo: str) -> Path:
    """The worker's mirror of ``repo``, cloned or fetched now."""
    mirror = mirror_path(cache, repo)
    with _locked(mirror):
        if not (mirror / "HEAD").exists():
            tmp = mirror.with_name(mirror.name + ".new")
            _rmtree(tmp)  # what an interrupted clone left
            git(["clone", "--mirror", "--quiet", repo, str(tmp)], what=f"cloning {repo}")
            tmp.rename(mirror)
        else:
            git(["fetch", "--prune", "--quiet", "origin"], cwd=mirror, what=f"fetching {repo}")
    return mirror


def mirror_with(cache: Path, repo: str, sha: str) -> Path:
    """The worker's mirror of ``repo``, fetched only if it lacks commit ``sha`` (the base an
    earlier step pinned: usually fetched moments ago by this worker)."""
    mirror = mirror_path(cache, repo)
    if (mirror / "HEAD").exists():
        try:
            git(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=mirror, what="")
            return mirror
        except GitError:
            pass
    return update_mirror(cache, repo)


def resolve(mirror: Path, repo: str, base: str) -> str:
    """The commit ``base`` (a branch, tag or commit) names in the mirror of ``repo``."""
    try:
        return git(
            ["rev-parse", "--verify", "--quiet", f"{base}^{{commit}}"], cwd=mirror, what=""
        ).strip()
    except GitError:
        raise GitError(
            f"{repo} has no branch, tag or commit {base!r}", FailureClass.REPOSITORY
        ) from None


def add_worktree(mirror: Path, sha: str, tree: Path) -> None:
    """A fresh tree of the mirror at ``sha``, detached, at ``tree``; locked in the mirror's
    bookkeeping with this process as its owner (:func:`prune_dead_trees`)."""
    with _locked(mirror):  # worktree bookkeeping lives in the mirror
        git(["worktree", "prune"], cwd=mirror, what="pruning old trees")
        git(
            ["worktree", "add", "--detach", "--quiet", "--lock", "--reason", _owner(),
             str(tree), sha],
            cwd=mirror,
            what="making the task's tree",
        )  # fmt: skip


def remove_worktree(mirror: Path, tree: Path) -> None:
    with _locked(mirror), contextlib.suppress(GitError):
        _remove(mirror, tree)


def _remove(mirror: Path, tree: Path) -> None:
    # twice --force: a locked tree (every tree is, by its owner) is removed too
    git(
        ["worktree", "remove", "--force", "--force", str(tree)],
        cwd=mirror,
        what="removing the task's tree",
    )


#: Who owns a tree: the process that made it (pid, and start time: a pid the system gave to
#: another process since is not the owner).
_OWNER = re.compile(r"^loopctl-fleet worker pid=(\d+) started=(.+)$")


def _owner() -> str:
    from loopctl_fleet.service import start_time

    pid = os.getpid()
    return f"loopctl-fleet worker pid={pid} started={start_time(pid)}"


def prune_dead_trees(cache: Path) -> list[Path]:
    """Remove the trees in the worker's mirrors under ``cache`` whose owner is no longer alive
    (a worker that was killed, or died, with tasks or landings in them; the trees of a live
    worker sharing the directory are left alone); the trees removed. A worker calls it as it
    starts: nothing else would ever remove them."""
    from loopctl_fleet.service import alive

    removed = []
    for mirror in sorted((cache / "mirrors").glob("*.git")):
        # a mirror git cannot read is left as it is: the next fetch into it says why
        with _locked(mirror), contextlib.suppress(GitError):
            listed = git(["worktree", "list", "--porcelain"], cwd=mirror, what="listing trees")
            for tree, reason in _locked_trees(listed):
                owner = _OWNER.match(reason)
                if owner and not alive({"pid": owner[1], "started": owner[2]}):
                    with contextlib.suppress(GitError):  # a tree gone from the disk too
                        git(["worktree", "unlock", str(tree)], cwd=mirror, what="")
                        _remove(mirror, tree)
                    removed.append(tree)
            git(["worktree", "prune"], cwd=mirror, what="pruning old trees")
    return removed


def _locked_trees(porcelain: str) -> Iterator[tuple[Path, str]]:
    """Each locked tree of ``git worktree list --porcelain`` and the reason it is locked."""
    for block in porcelain.split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in block.splitlines())
        if "worktree" in fields and "locked" in fields:
            yield Path(fields["worktree"]), fields["locked"]


def existing_result(repo: str, task_id: str) -> str | None:
    """The commit an earlier attempt of ``task_id`` pushed to its branch, or None."""
    out = git(
        ["ls-remote", "--heads", repo, f"refs/heads/loopctl/{task_id}"], what=f"reading {repo}"
    )
    for line in out.splitlines():
        sha, _, ref = line.partition("\t")
        if ref == f"refs/heads/loopctl/{task_id}":
            return sha
    return None


def trailers_of(mirror: Path, sha: str) -> dict[str, str]:
    """The trailers of commit ``sha`` in ``mirror`` (the last value of each key)."""
    out = git(
        ["log", "-1", "--format=%(trailers:only,unfold)", sha, "--"],
        cwd=mirror,
        what=f"reading commit {sha[:12]}",
    )
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            found[key.strip()] = value.strip()
    return found


def commit_result(tree: Path, message: str, trailers: dict[str, str]) -> str:
    """Commit everything the agent changed in ``tree`` (an empty commit if nothing: the goal
    needed no change, and the result is still a commit); its sha."""
    git(["add", "-A"], cwd=tree, what="staging the agent's changes")
    body = (
        message.rstrip() + "\n\n" + "".join(f"{key}: {value}\n" for key, value in trailers.items())
    )
    # the message goes through a file in the tree's git dir (never staged, never on a command line)
    git_dir = Path(
        git(
            ["rev-parse", "--absolute-git-dir"], cwd=tree, what="finding the tree's git dir"
        ).strip()
    )
    message_file = git_dir / "LOOPCTL_MESSAGE"
    message_file.write_text(body, encoding="utf-8")
    name, email = AUTHOR
    identity = [
        "-c",
        f"user.name={name}",
        "-c",
        f"user.email={email}",
        "-c",
        "commit.gpgsign=false",
    ]
    git(
        [*identity, "commit", "--quiet", "--allow-empty", "--no-verify", "-F", str(message_file)],
        cwd=tree,
        what="committing the agent's changes",
    )
    return git(["rev-parse", "HEAD"], cwd=tree, what="reading the commit").strip()


def push_result(tree: Path, repo: str, task_id: str) -> None:
    """Push ``tree``'s HEAD to ``loopctl/<task_id>`` in ``repo``, only if that branch does not
    exist yet (another attempt's push loses, and says so)."""
    ref = f"refs/heads/loopctl/{task_id}"
    git(
        ["push", "--quiet", f"--force-with-lease={ref}:", repo, f"HEAD:{ref}"],
        cwd=tree,
        what=f"pushing the result to {repo} {ref}",
    )


def _rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)
