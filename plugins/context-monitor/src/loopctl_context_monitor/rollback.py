"""Undo the edits of a turn that was cut off (``on_interrupted_turn = "rollback"``).

Before each turn, :func:`snapshot_tree` records the working tree as a git tree object without
touching anything the user sees: it stages into a *temporary* index (a copy of the real one, so
git only hashes files that changed) and writes a tree. Unlike ``git stash create`` this also
captures untracked files, so a file the agent had created in an earlier turn can be restored too.
After a cut-off turn, :func:`restore` puts the files that turn changed back to that tree's content
(``git restore --worktree``, which leaves the index alone) and deletes the ones the turn created.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import attrs

import loopctl

_GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


@attrs.define
class RestoreResult:
    restored: list[str] = attrs.Factory(list)
    deleted: list[str] = attrs.Factory(list)
    #: "path: why" for every file that could not be put back.
    failed: list[str] = attrs.Factory(list)


def _git(
    workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", *args],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=loopctl.child_environment({**_GIT_ENV, **(env or {})}),  # no withheld secret
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None


def snapshot_tree(workdir: Path, exclude: tuple[str, ...] = ()) -> str | None:
    """A tree object holding the working tree as it is now (tracked and untracked files that
    ``.gitignore`` does not exclude, minus ``exclude``), or None when git cannot make one."""
    found = _git(workdir, "rev-parse", "--git-path", "index")
    if found is None or found.returncode != 0:
        return None
    real_index = Path(workdir, found.stdout.strip())
    with tempfile.TemporaryDirectory(prefix="loopctl-rollback-") as tmp:
        index = Path(tmp) / "index"
        if real_index.is_file():
            try:
                shutil.copyfile(real_index, index)  # keeps git's stat cache: only changes hash
            except OSError:
                pass
        env = {"GIT_INDEX_FILE": str(index)}
        # git refuses an exclude pathspec that names an ignored path: exclude only the others
        pathspec = ["."] + [
            f":(exclude,literal){path}"
            for path in exclude
            if path and not _is_ignored(workdir, path)
        ]
        added = _git(workdir, "add", "-A", "--", *pathspec, env=env)
        if added is None or added.returncode != 0:
            return None
        tree = _git(workdir, "write-tree", env=env)
    if tree is None or tree.returncode != 0:
        return None
    return tree.stdout.strip() or None


def _is_ignored(workdir: Path, path: str) -> bool:
    done = _git(workdir, "check-ignore", "-q", "--", path)
    return done is not None and done.returncode == 0


def restore(workdir: Path, tree: str, paths: list[str]) -> RestoreResult:
    """Put ``paths`` back to their content in ``tree``; delete those ``tree`` does not hold."""
    result = RestoreResult()
    root = workdir.resolve()
    safe = []
    for path in dict.fromkeys(paths):
        target = (root / path).resolve()
        if target == root or root not in target.parents:
            result.failed.append(f"{path}: outside the working directory")
        else:
            safe.append(path)
    if not safe:
        return result
    listed = _git(workdir, "ls-tree", "-r", "-z", "--name-only", tree, "--", *safe)
    if listed is None or listed.returncode != 0:
        result.failed += [f"{p}: cannot read the pre-turn snapshot" for p in safe]
        return result
    present = {p for p in listed.stdout.split("\0") if p}
    in_tree = [p for p in safe if p in present]
    if in_tree:
        done = _git(
            workdir,
            "restore",
            f"--source={tree}",
            "--worktree",
            "--",
            *[f":(literal){p}" for p in in_tree],
        )
        if done is not None and done.returncode == 0:
            result.restored += in_tree
        else:
            why = (done.stderr.strip().splitlines() or ["git restore failed"])[-1] if done else ""
            result.failed += [f"{p}: {why or 'git restore failed'}" for p in in_tree]
    for path in safe:
        if path in present:
            continue
        target = root / path
        try:
            if target.is_file() or target.is_symlink():
                target.unlink()
                result.deleted.append(path)
        except OSError as exc:
            result.failed.append(f"{path}: {exc.strerror or exc}")
    return result
