"""A pull request for a task's result branch, on GitHub (``[task.fleet] pr = true``).

The worker opens it right after pushing ``loopctl/<task>``, with the token in its own
environment (``GITHUB_TOKEN``; never in the task) against the REST API (``GITHUB_API_URL``, else
https://api.github.com, as GitHub Actions sets it). The repository is read from the task's URL
(``https://github.com/OWNER/NAME(.git)`` or ``git@github.com:OWNER/NAME(.git)``, or the host of
``GITHUB_SERVER_URL`` for GitHub Enterprise). The base is the task's base branch; a task based
on ``HEAD`` or on a commit gets the repository's default branch. A pull request that cannot be
opened does not undo the task: the branch is the result, and the reason is kept beside it.

A task that also lands (``land = true``) lands through its pull request
(:mod:`loopctl_fleet.landing`): the pull request is read here (:func:`landable`: open, against
the branch it lands on, its head still the task's result), and once the tested commit is on
the base, read again until GitHub shows it merged (:func:`merged`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from loopctl_fleet.taskfile import TaskSpec

TOKEN_ENV = "GITHUB_TOKEN"
DEFAULT_API = "https://api.github.com"
TIMEOUT_S = 30.0
_OWNER_NAME = re.compile(
    r"^/?([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))/([A-Za-z0-9._-]{1,100}?)(?:\.git)?/?$"
)
_SCP = re.compile(r"^[A-Za-z0-9._-]+@([A-Za-z0-9.-]+):(.+)$")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


class PullRequestError(RuntimeError):
    """No pull request: the message says why (never the token). ``status``: GitHub's HTTP
    status, if it answered; ``transient``: worth asking again later (no answer, or a 5xx)."""

    def __init__(self, message: str, status: int | None = None, transient: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.transient = transient


class NotLandable(PullRequestError):
    """GitHub answered, and the pull request is not one a result may land through."""


@dataclasses.dataclass(frozen=True)
class GitHub:
    """The REST API of one repository, with the worker's token."""

    api: str
    token: str
    repository: str

    @classmethod
    def of(cls, repo: str, env: Mapping[str, str] | None = None) -> GitHub:
        """The API for the task's repository URL ``repo``; :class:`PullRequestError` without a
        token or for a repository not on GitHub."""
        env = os.environ if env is None else env
        token = env.get(TOKEN_ENV, "")
        if not token:
            raise PullRequestError(f"${TOKEN_ENV} is not set on the worker: no pull request")
        api = env.get("GITHUB_API_URL", DEFAULT_API).rstrip("/")
        return cls(api, token, repository_of(repo, env))

    def call(self, method: str, path: str, payload: object = None) -> Any:
        """``method`` on ``/repos/OWNER/NAME<path>``: the decoded answer."""
        return _call(self.api, self.token, method, f"/repos/{self.repository}{path}", payload)


@dataclasses.dataclass(frozen=True)
class PullRequest:
    """A pull request as GitHub shows it."""

    number: int
    url: str
    #: ``open`` or ``closed`` (a merged one is closed and ``merged``).
    state: str = "open"
    merged: bool = False
    head: str = ""
    head_sha: str = ""
    base: str = ""

    @classmethod
    def of(cls, data: object) -> PullRequest:
        data = data if isinstance(data, dict) else {}
        head, base = data.get("head") or {}, data.get("base") or {}
        return cls(
            int(data.get("number") or 0),
            str(data.get("html_url") or ""),
            str(data.get("state") or ""),
            data.get("merged") is True,
            str(head.get("ref") or ""),
            str(head.get("sha") or ""),
            str(base.get("ref") or ""),
        )


def repository_of(repo: str, env: Mapping[str, str]) -> str:
    """``OWNER/NAME`` of a GitHub repository URL, or :class:`PullRequestError`."""
    hosts = {"github.com"}
    server = env.get("GITHUB_SERVER_URL")
    if server:
        hosts.add((urlsplit(server).hostname or "").lower())
    scp = _SCP.match(repo)
    host, path = (
        (scp.group(1), scp.group(2)) if scp else (urlsplit(repo).hostname, urlsplit(repo).path)
    )
    found = _OWNER_NAME.match(path or "")
    if (host or "").lower() not in hosts or found is None:
        raise PullRequestError(f"{repo} is not a GitHub repository URL: no pull request")
    return f"{found.group(1)}/{found.group(2)}"


def open_pull_request(
    spec: TaskSpec, body: str, env: Mapping[str, str] | None = None
) -> PullRequest:
    """Open a pull request of ``spec``'s result branch."""
    github = GitHub.of(spec.repo, env)
    base = spec.base
    if base == "HEAD" or _SHA.match(base):
        base = str(_mapping(github.call("GET", "")).get("default_branch"))
    title = spec.goal.strip().splitlines()[0][:200] if spec.goal.strip() else spec.id
    made = github.call(
        "POST", "/pulls", {"title": title, "head": spec.branch, "base": base, "body": body}
    )
    return PullRequest.of(made)


def find(github: GitHub, head: str, number: int = 0) -> PullRequest | None:
    """Pull request ``number``, or (``0``) the newest one whose head is branch ``head`` of the
    repository itself; None if there is none."""
    if number:
        return PullRequest.of(github.call("GET", f"/pulls/{number}"))
    owner = github.repository.partition("/")[0]
    found = github.call("GET", f"/pulls?state=all&head={quote(f'{owner}:{head}')}")
    pulls = [PullRequest.of(one) for one in found] if isinstance(found, list) else []
    return max(pulls, key=lambda pull: pull.number, default=None)


def landable(github: GitHub, head: str, commit: str, branch: str, number: int = 0) -> PullRequest:
    """The pull request of ``head`` that a result lands ``branch`` through, read afresh and
    checked: open (or merged already: the landing may have pushed before its worker died),
    against ``branch``, and its head still at ``commit``; :class:`PullRequestError` saying why
    nothing may land through it."""
    pull = find(github, head, number)
    if pull is None:
        raise NotLandable(f"{head} has no pull request to land through: nothing landed")
    name = f"pull request #{pull.number}"
    if pull.head != head or pull.base != branch:
        raise NotLandable(
            f"{name} is {pull.head} into {pull.base}, not {head} into {branch}: nothing landed"
        )
    if not pull.merged and pull.state != "open":
        raise NotLandable(f"{name} is {pull.state}: nothing landed")
    if not pull.merged and pull.head_sha != commit:
        raise NotLandable(head_moved(name, head, commit, pull.head_sha))
    return pull


def head_moved(name: str, head: str, commit: str, now: str | None) -> str:
    """Why nothing lands when someone pushed to a pull request's head."""
    return (
        f"{head} is at {(now or 'nothing')[:12]}, not at the tested result {commit[:12]}: someone "
        f"pushed to {name}; nothing landed (land it again once its head is a result to land)"
    )


#: How long a landing waits for GitHub to show its pull request merged, and how often it asks.
MERGED_WAIT_S = 60.0
MERGED_POLL_S = 1.0


def merged(github: GitHub, number: int, wait_s: float = MERGED_WAIT_S) -> bool:
    """Whether GitHub shows pull request ``number`` merged, within ``wait_s`` (it marks one
    merged once it has taken in the push that put its head on the base)."""
    deadline = time.monotonic() + wait_s
    while True:
        if PullRequest.of(github.call("GET", f"/pulls/{number}")).merged:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(MERGED_POLL_S)  # GitHub's own pace: nothing here to wait on instead


def _mapping(data: object) -> dict[str, Any]:
    return data if isinstance(data, dict) else {}


def _call(api: str, token: str, method: str, path: str, payload: object) -> Any:
    from loopctl import redact

    request = urllib.request.Request(
        api + path,
        data=None if payload is None else json.dumps(payload).encode(),
        method=method,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
            "Content-Type": "application/json",
            "User-Agent": "loopctl-fleet",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            data = json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        said = exc.read(2000).decode("utf-8", "replace").replace(token, "<hidden>")
        raise PullRequestError(
            redact(f"GitHub said {exc.code} to {method} {path}: {said}"),
            exc.code,
            exc.code >= 500 or exc.code == 429,
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PullRequestError(
            redact(f"{method} {api}{path}: {exc}").replace(token, "<hidden>"), transient=True
        ) from None
    return data
