"""Which project a failure belongs to: an identity that is stable and true.

A folder's name is neither (two unrelated projects are both called ``toy``; a clone moved
elsewhere is the same project). The identity is the first of:

1. the repository's remote (``origin``, else the first remote by name), normalised so that the
   same repository reached by HTTPS or SSH, with or without credentials, a port or ``.git``,
   is one identity: ``git:github.com/acme/shop``;
2. the repository's root commit (a repository with no remote): ``root:<40 hex>``;
3. the working directory's real path: ``path:/home/me/toy``.

The plugin's ``project_id`` setting overrides it (a monorepo's services, a repository that
moved); its ``project`` setting overrides only the name shown beside a failure.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import attrs

#: Hosts whose paths are case-insensitive: their owner/repository are lowercased.
CASELESS_HOSTS = frozenset({"github.com", "gitlab.com", "bitbucket.org", "codeberg.org"})
_GIT_TIMEOUT_S = 5.0
_SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!/).*)$")
_SHA = re.compile(r"^[0-9a-f]{40,64}$")


@attrs.frozen
class ProjectIdentity:
    """A project's identity in the failure memory and the name shown for it."""

    #: ``git:host/owner/repo``, ``root:<sha>``, ``path:/abs/dir`` or the ``project_id`` setting.
    id: str
    #: The name shown beside a failure (the repository's, else the folder's).
    name: str
    #: What the identity came from: ``remote``, ``root-commit``, ``path`` or ``setting``.
    source: str


def project_identity(workdir: Path, override: str = "", name: str = "") -> ProjectIdentity:
    """The identity of the project in ``workdir`` (``override``: the ``project_id`` setting;
    ``name``: the ``project`` setting). Runs at most two quick git commands; never raises."""
    folder = Path(os.path.realpath(workdir))
    if override.strip():
        return ProjectIdentity(override.strip(), name or folder.name, "setting")
    remote = normalize_remote(_remote_url(folder), folder)
    if remote:
        return ProjectIdentity(f"git:{remote}", name or _last_part(remote), "remote")
    root = _root_commit(folder)
    if root:
        return ProjectIdentity(f"root:{root}", name or folder.name, "root-commit")
    return ProjectIdentity(f"path:{folder}", name or folder.name, "path")


def normalize_remote(url: str, base: Path | None = None) -> str:
    """``host/owner/repo`` for a remote URL (scheme, credentials, port, trailing ``/`` and
    ``.git`` dropped; scp-like ``git@host:owner/repo`` read as ``host/owner/repo``); a local
    remote's real path. "" for an empty URL."""
    url = url.strip()
    if not url:
        return ""
    if "://" not in url:
        scp = _SCP_LIKE.match(url)
        if scp and not _looks_local(url):
            return _join(scp["host"], scp["path"])
        local = Path(url) if base is None or os.path.isabs(url) else base / url
        return _strip(os.path.realpath(local))
    parts = urlsplit(url)
    if parts.scheme.lower() == "file" or not parts.hostname:
        return _strip(os.path.realpath(parts.path or "/"))
    return _join(parts.hostname, parts.path)


def _looks_local(url: str) -> bool:
    """``./x:y`` or ``/a/b:c`` is a path with a colon, not ``host:path``."""
    return url.startswith((".", "/", "~"))


def _join(host: str, path: str) -> str:
    host = host.lower()
    path = _strip(path).lstrip("/")
    if host in CASELESS_HOSTS:
        path = path.lower()
    return f"{host}/{path}" if path else host


def _strip(path: str) -> str:
    path = path.rstrip("/")
    return path[:-4] if path.endswith(".git") else path


def _last_part(remote: str) -> str:
    return remote.rstrip("/").rsplit("/", 1)[-1] or remote


def _git(folder: Path, *args: str) -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def _remote_url(folder: Path) -> str:
    """``origin``'s URL, else the URL of the first remote by name."""
    urls: dict[str, str] = {}
    for line in _git(folder, "config", "--get-regexp", r"^remote\..*\.url$").splitlines():
        key, _, url = line.partition(" ")
        remote = key[len("remote.") : -len(".url")]
        urls.setdefault(remote, url.strip())
    if not urls:
        return ""
    return urls.get("origin") or urls[min(urls)]


def _root_commit(folder: Path) -> str:
    """The smallest root commit of HEAD's history (a merged history has several)."""
    roots = [
        line.strip()
        for line in _git(folder, "rev-list", "--max-parents=0", "HEAD").splitlines()
        if _SHA.match(line.strip())
    ]
    return min(roots) if roots else ""


__all__ = ["ProjectIdentity", "normalize_remote", "project_identity"]
