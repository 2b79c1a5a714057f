"""A pull request for a task's result branch, on GitHub (``[task.fleet] pr = true``).

The worker opens it right after pushing ``loopctl/<task>``, with the token in its own
environment (``GITHUB_TOKEN``; never in the task) against the REST API (``GITHUB_API_URL``, else
https://api.github.com, as GitHub Actions sets it). The repository is read from the task's URL
(``https://github.com/OWNER/NAME(.git)`` or ``git@github.com:OWNER/NAME(.git)``, or the host of
``GITHUB_SERVER_URL`` for GitHub Enterprise). The base is the task's base branch; a task based
on ``HEAD`` or on a commit gets the repository's default branch. A pull request that cannot be
opened does not undo the task: the branch is the result, and the reason is kept beside it.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from urllib.parse import urlsplit

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
    """No pull request: the message says why (never the token)."""


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


def open_pull_request(spec: TaskSpec, body: str, env: Mapping[str, str] | None = None) -> str:
    """Open a pull request of ``spec``'s result branch; its web address."""
    env = os.environ if env is None else env
    token = env.get(TOKEN_ENV, "")
    if not token:
        raise PullRequestError(f"${TOKEN_ENV} is not set on the worker: no pull request")
    api = env.get("GITHUB_API_URL", DEFAULT_API).rstrip("/")
    repository = repository_of(spec.repo, env)
    base = spec.base
    if base == "HEAD" or _SHA.match(base):
        base = str(_call(api, token, "GET", f"/repos/{repository}", None).get("default_branch"))
    title = spec.goal.strip().splitlines()[0][:200] if spec.goal.strip() else spec.id
    made = _call(
        api,
        token,
        "POST",
        f"/repos/{repository}/pulls",
        {"title": title, "head": spec.branch, "base": base, "body": body},
    )
    return str(made.get("html_url", ""))


def _call(api: str, token: str, method: str, path: str, payload: object) -> dict[str, object]:
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
            redact(f"GitHub said {exc.code} to {method} {path}: {said}")
        ) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise PullRequestError(
            redact(f"{method} {api}{path}: {exc}").replace(token, "<hidden>")
        ) from None
    return data if isinstance(data, dict) else {}
