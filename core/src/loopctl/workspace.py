"""What the agent changed: cheap snapshots of the working tree, with git or without.

With git, a snapshot is one ``git status --porcelain=v2`` call (HEAD plus every path that
differs from it, untracked files included, ``.gitignore`` respected) and a content hash of each
such path. Nothing in the user's repository changes: ``GIT_OPTIONAL_LOCKS=0`` keeps git from
refreshing the index behind the agent's back. Without git, a snapshot is a bounded map of file
paths to size and modification time.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import attrs

from loopctl.withhold import child_environment

#: Directories never scanned without git (with git, .gitignore decides): tools' own, which
#: the tests and the linters rewrite on every run (not changes the agent made).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".loopctl",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".pytest_cache",
        ".mypy_cache",
        ".ruff_cache",
        ".hypothesis",
        ".cache",
    }
)
MAX_SCANNED_FILES = 20_000
#: Files larger than this are fingerprinted by size and mtime instead of their content.
MAX_HASHED_BYTES = 2 * 1024 * 1024
#: Without git, files modified this recently are compared by content, not by their times.
RACY_WINDOW_NS = 5_000_000_000
_GIT_ENV = {"GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}


@attrs.define(frozen=True)
class Snapshot:
    """The state of the working tree at one moment."""

    #: Changes whenever any file's content (or HEAD) changes; None if it could not be taken.
    tree_hash: str | None
    commit: str | None
    #: Paths that differ from HEAD (git) or every file (no git) -> a fingerprint of the content.
    files: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)


def _git(workdir: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=60,
            env=child_environment(_GIT_ENV),
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


#: What a snapshot asks git (HEAD and every path that differs from it).
_STATUS_ARGS = ("status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")


def _fingerprint(path: Path) -> str:
    try:
        st = path.stat()
        if st.st_size > MAX_HASHED_BYTES:
            return f"size:{st.st_size}:mtime:{st.st_mtime_ns}"
        return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()
    except FileNotFoundError:
        return "deleted"
    except OSError as exc:
        return f"unreadable:{exc.errno}"


def parse_porcelain_v2(output: str) -> tuple[str | None, list[str]]:
    """HEAD and the changed paths from ``git status --porcelain=v2 -z --branch`` output."""
    head: str | None = None
    paths: list[str] = []
    entries = output.split("\0")
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid ") :]
            head = None if oid == "(initial)" else oid
        elif entry.startswith("1 "):
            paths.append(entry.split(" ", 8)[-1])
        elif entry.startswith("2 "):
            paths.append(entry.split(" ", 9)[-1])
            index += 1  # the original path of a rename follows
        elif entry.startswith("u "):
            paths.append(entry.split(" ", 10)[-1])
        elif entry.startswith("? "):
            paths.append(entry[2:])
    return head, paths


@attrs.define
class Workspace:
    """The agent's working directory, and how to tell what changed in it."""

    root: Path
    #: Paths (relative to root) never reported as changes: the state directory, typically.
    ignore: tuple[str, ...] = ()
    is_git: bool = attrs.field(init=False)
    #: Without git: path -> ((size, mtime_ns), content hash) from earlier snapshots.
    _hashes: dict[str, tuple[tuple[int, int], str]] = attrs.field(init=False, factory=dict)
    #: The git executable found on PATH when the workspace was made.
    _git_exe: str = attrs.field(init=False, default="git")

    def __attrs_post_init__(self) -> None:
        found = shutil.which("git")
        self._git_exe = found or "git"
        self.is_git = bool(found) and _git(self.root, "rev-parse", "--git-dir") is not None
        if self.is_git:
            # A directory that an enclosing repository ignores (a scratch dir under .nox/, say)
            # is not tracked by it: git status would never show its changes.
            prefix = (_git(self.root, "rev-parse", "--show-prefix") or "").strip()
            top = (_git(self.root, "rev-parse", "--show-toplevel") or "").strip()
            if prefix and top and _git(Path(top), "check-ignore", "-q", prefix) is not None:
                self.is_git = False

    def head(self) -> str | None:
        if not self.is_git:
            return None
        out = _git(self.root, "rev-parse", "--verify", "-q", "HEAD")
        return out.strip() if out else None

    def snapshot(self) -> Snapshot:
        if self.is_git:
            return self.start_snapshot().result()
        return self._snapshot_of(self._scan())

    def start_snapshot(self) -> PendingSnapshot:
        """A snapshot whose ``git status`` runs while the caller goes on: its
        :meth:`PendingSnapshot.result` is what :meth:`snapshot` would have returned when this
        was called. No thread: the loop starts it before the test command and collects it
        after (without git, the working tree is scanned by ``result``)."""
        if not self.is_git:
            return PendingSnapshot(self, None)
        try:
            process = subprocess.Popen(
                [self._git_exe, *_STATUS_ARGS],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=child_environment(_GIT_ENV),
            )
        except (OSError, subprocess.SubprocessError):
            process = None
        return PendingSnapshot(self, process, started=True)

    def _snapshot_of(self, files: tuple[str | None, dict[str, str]] | None) -> Snapshot:
        if files is None:
            return Snapshot(tree_hash=None, commit=None)
        commit, changes = files
        digest = hashlib.blake2b(digest_size=20)
        digest.update((commit or "").encode())
        for path in sorted(changes):
            digest.update(f"\0{path}\0{changes[path]}".encode(errors="surrogateescape"))
        return Snapshot(tree_hash=digest.hexdigest(), commit=commit, files=changes)

    def changed_files(self, before: Snapshot | None, after: Snapshot) -> list[str]:
        """Files whose content differs between two snapshots."""
        if before is None or before.tree_hash is None or after.tree_hash is None:
            return []
        if before.tree_hash == after.tree_hash:
            return []
        changed = {
            path
            for path in set(before.files) | set(after.files)
            if before.files.get(path) != after.files.get(path)
        }
        if self.is_git and before.commit and after.commit and before.commit != after.commit:
            out = _git(self.root, "diff", "--name-only", "-z", before.commit, after.commit)
            changed.update(p for p in (out or "").split("\0") if p)
        return self._filter(sorted(changed))

    def diff_stat(self, base: str | None) -> str:
        """``git diff --stat`` of the working tree against ``base`` (a commit), or ""."""
        if not self.is_git or not base:
            return ""
        return (_git(self.root, "diff", "--stat", base) or "").rstrip()

    def change_diff(self, before: Snapshot | None, after: Snapshot, paths: list[str]) -> str:
        """The changed lines (``git diff -U0``, without headers) of what happened to ``paths``
        between two snapshots, or "" when that cannot be told exactly: without git, when HEAD
        moved, or when a path already differed from HEAD at ``before`` (its content then is not
        kept). A path new and untracked has no lines here."""
        if not self.is_git or before is None or not before.commit:
            return ""
        if after.commit != before.commit or any(p in before.files for p in paths) or not paths:
            return ""
        out = _git(
            self.root, "diff", "-U0", "--no-color", "--no-ext-diff", before.commit, "--", *paths
        )
        return _changed_lines(out or "")

    def _filter(self, paths: list[str]) -> list[str]:
        return [p for p in paths if not any(p == i or p.startswith(i + "/") for i in self.ignore)]

    def _git_changes(self, out: str | None) -> tuple[str | None, dict[str, str]] | None:
        if out is None:
            return None
        head, paths = parse_porcelain_v2(out)
        changes = {p: _fingerprint(self.root / p) for p in self._filter(paths)}
        return head, changes

    def _scan(self) -> tuple[None, dict[str, str]]:
        files: dict[str, str] = {}
        # Files are compared by content, hashed once and reused while their size and mtime stay
        # put. File times tick coarsely (a few ms), so a same-size edit right after a snapshot can
        # keep its mtime: recently modified files are always hashed again (git's "racy" rule).
        racy_since = time.time_ns() - RACY_WINDOW_NS
        ignored = {os.path.normpath(path) for path in self.ignore}
        for dirpath, dirnames, filenames in os.walk(self.root):
            # The state directory (any name) is never walked: it grows by a few files an
            # iteration, which would slow every snapshot and use up MAX_SCANNED_FILES.
            relative_dir = os.path.relpath(dirpath, self.root)
            dirnames[:] = sorted(
                d
                for d in dirnames
                if d not in SKIP_DIRS
                and os.path.normpath(os.path.join(relative_dir, d)) not in ignored
            )
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                relative = os.path.relpath(path, self.root)
                if st.st_size > MAX_HASHED_BYTES:
                    files[relative] = f"size:{st.st_size}:mtime:{st.st_mtime_ns}"
                    continue
                stamp = (st.st_size, st.st_mtime_ns)
                cached = self._hashes.get(relative)
                if cached is None or cached[0] != stamp or st.st_mtime_ns >= racy_since:
                    cached = (stamp, _fingerprint(Path(path)))
                    self._hashes[relative] = cached
                files[relative] = cached[1]
                if len(files) >= MAX_SCANNED_FILES:
                    return None, files
        return None, self._filter_dict(files)

    def _filter_dict(self, files: dict[str, str]) -> dict[str, str]:
        kept = set(self._filter(list(files)))
        return {p: v for p, v in files.items() if p in kept}


def _changed_lines(diff: str) -> str:
    """A ``git diff -U0`` reduced to each file's name and its ``-``/``+`` lines."""
    lines: list[str] = []
    old = ""
    for line in diff.splitlines():
        if line.startswith("--- "):
            old = line[6:] if line.startswith("--- a/") else ""
        elif line.startswith("+++ "):
            lines.append(line[6:] if line.startswith("+++ b/") else f"{old} (deleted)")
        elif line.startswith(("-", "+")):
            lines.append(line)
    return "\n".join(lines)


class PendingSnapshot:
    """A snapshot being taken (:meth:`Workspace.start_snapshot`)."""

    def __init__(
        self,
        workspace: Workspace,
        process: subprocess.Popen[str] | None,
        *,
        started: bool = False,
    ) -> None:
        self._workspace = workspace
        self._process = process
        #: A git snapshot was asked for (``process`` is None if git could not start).
        self._git = started
        self._result: Snapshot | None = None

    def result(self) -> Snapshot:
        """The snapshot (waiting for git, at most a minute); the same on every call."""
        if self._result is None:
            workspace = self._workspace
            if not self._git:
                self._result = workspace._snapshot_of(workspace._scan())
            else:
                self._result = workspace._snapshot_of(workspace._git_changes(self._output()))
        return self._result

    def abandon(self) -> None:
        """Stop waiting for it: git is ended and reaped (an interrupt while the tests ran)."""
        process, self._process = self._process, None
        if process is not None and self._result is None:
            process.kill()
            process.communicate()

    def _output(self) -> str | None:
        process = self._process
        if process is None:
            return None
        try:
            out, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            return None
        except BaseException:  # an interrupt: the git process is not left behind
            process.kill()
            process.wait()
            raise
        return out if process.returncode == 0 else None
