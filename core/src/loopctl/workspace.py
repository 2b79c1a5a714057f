"""What the agent changed: cheap snapshots of the working tree, with git or without.

With git, a snapshot is the tree hash of the whole working tree (tracked and untracked files,
``.gitignore`` respected) written through a temporary index, plus HEAD: nothing in the user's
repository changes (no ref moves, the real index is untouched). Without git, it is a map of
file paths to size and modification time, bounded in size.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import attrs

#: Directories never scanned without git (with git, .gitignore decides).
SKIP_DIRS = frozenset({".git", ".loopctl", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox"})
MAX_SCANNED_FILES = 20_000


@attrs.define(frozen=True)
class Snapshot:
    tree_hash: str | None
    commit: str | None
    #: Without git only: path -> (size, mtime_ns).
    files: Mapping[str, tuple[int, int]] = attrs.field(factory=dict, eq=False, repr=False)


def _git(workdir: Path, *args: str, env: Mapping[str, str] | None = None) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=60,
            env=None if env is None else {**os.environ, **env},
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


@attrs.define
class Workspace:
    """The agent's working directory, and how to tell what changed in it."""

    root: Path
    #: Paths (relative to root) never reported as changes: the state directory, typically.
    ignore: tuple[str, ...] = ()
    is_git: bool = attrs.field(init=False)
    _git_dir: Path | None = attrs.field(init=False, default=None)
    _exclude: tuple[str, ...] = attrs.field(init=False, default=())

    def __attrs_post_init__(self) -> None:
        git_dir = _git(self.root, "rev-parse", "--absolute-git-dir") if shutil.which("git") else None
        self.is_git = git_dir is not None
        self._git_dir = Path(git_dir) if git_dir else None
        # git refuses an exclusion pathspec for a path .gitignore already ignores, so only
        # paths that are not ignored need one.
        self._exclude = tuple(
            f":(exclude){path}"
            for path in self.ignore
            if self.is_git and _git(self.root, "check-ignore", "-q", path + "/") is None
        )

    def head(self) -> str | None:
        return _git(self.root, "rev-parse", "--verify", "-q", "HEAD") if self.is_git else None

    def snapshot(self) -> Snapshot:
        if self.is_git:
            return Snapshot(tree_hash=self._git_tree(), commit=self.head())
        files = self._scan()
        digest = hashlib.sha1(repr(sorted(files.items())).encode()).hexdigest()
        return Snapshot(tree_hash=digest, commit=None, files=files)

    def changed_files(self, before: Snapshot | None, after: Snapshot) -> list[str]:
        """Files that differ between two snapshots (``before`` None: since the loop began, as
        far as git knows: against HEAD at the time of ``after``)."""
        if self.is_git:
            if before is None or before.tree_hash is None or after.tree_hash is None:
                return []
            if before.tree_hash == after.tree_hash:
                return []
            out = _git(self.root, "diff-tree", "-r", "--name-only", before.tree_hash, after.tree_hash)
            return self._filter(out.splitlines() if out else [])
        if before is None:
            return []
        old, new = before.files, after.files
        changed = [p for p in new if old.get(p) != new[p]] + [p for p in old if p not in new]
        return self._filter(sorted(changed))

    def diff_stat(self, base: str | None) -> str:
        """``git diff --stat`` of the working tree against ``base`` (a commit), or ""."""
        if not self.is_git or not base:
            return ""
        return _git(self.root, "diff", "--stat", base) or ""

    def _filter(self, paths: list[str]) -> list[str]:
        return [p for p in paths if not any(p == i or p.startswith(i + "/") for i in self.ignore)]

    def _git_tree(self) -> str | None:
        assert self._git_dir is not None
        with tempfile.TemporaryDirectory(prefix="loopctl-index-") as tmp:
            index = Path(tmp) / "index"
            real_index = self._git_dir / "index"
            if real_index.exists():
                shutil.copyfile(real_index, index)  # keeps git's stat cache: add -A stays fast
            env = {"GIT_INDEX_FILE": str(index)}
            if _git(self.root, "add", "-A", "--", ".", *self._exclude, env=env) is None:
                return None
            return _git(self.root, "write-tree", env=env)

    def _scan(self) -> dict[str, tuple[int, int]]:
        files: dict[str, tuple[int, int]] = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                files[os.path.relpath(path, self.root)] = (st.st_size, st.st_mtime_ns)
                if len(files) >= MAX_SCANNED_FILES:
                    return files
        return files
