"""``[plugins.github]`` in loopctl.toml, and where each setting comes from when it is left out.

The token is deliberately not a key: it is read from the environment variable ``token_env``
names, so it never sits in a file that gets committed. ``token = ...`` in the config is an
unknown key (the error names the key, never its value).
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import attrs

NAME = "github"
DEFAULT_API_URL = "https://api.github.com"
#: The comment key's alphabet: it goes inside an HTML comment, so no ``-->`` can sneak in.
KEY_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: GitHub owner and repository names (owners: letters, digits, hyphens).
REPOSITORY_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
#: A usable token: printable ASCII without spaces (anything else cannot go in a header).
TOKEN_PATTERN = re.compile(r"[\x21-\x7e]{1,1024}")
PULL_REF_PATTERN = re.compile(r"refs/pull/([0-9]{1,9})/(?:merge|head)")
MAX_EVENT_FILE_BYTES = 25 * 1024 * 1024


def _invalid(problems: list[tuple[tuple[str, ...], str]]) -> Exception:
    """The core's "these fields are wrong" error, so the loader names each key."""
    from loopctl import InvalidFields

    return InvalidFields(problems)


@attrs.define(kw_only=True)
class GitHubConfig:
    """Every field has a default; in GitHub Actions most of them come from the environment."""

    #: "owner/name"; "" means $GITHUB_REPOSITORY (set by GitHub Actions).
    repository: str = ""
    #: The issue or pull request number (they share the comments API); 0 means the pull request
    #: of a GitHub Actions ``pull_request`` run ($GITHUB_REF or the event payload).
    issue: int = 0
    #: The REST API root; "" means $GITHUB_API_URL (GitHub Enterprise) or https://api.github.com.
    api_url: str = ""
    #: The environment variable that holds the token (the token is never read from this file).
    token_env: str = "GITHUB_TOKEN"
    #: Seconds one HTTP request may take.
    timeout_s: float = 10.0
    #: On a fresh run, update the comment an earlier run left (found by its marker) instead of
    #: adding a new one. A resumed run always updates its own comment.
    update_existing: bool = True
    #: Which comment is "ours": "" means one per goal (a hash of it); set it to tell apart loops
    #: with the same goal (a CI matrix) or to share one comment between goals.
    comment_key: str = ""
    #: Retries after a timeout, a network error or a 5xx answer.
    retries: int = 2
    #: The longest wait for a rate limit to lift; a longer one skips that update.
    max_wait_s: float = 30.0
    #: How long the end of the loop waits for the last update to go out.
    flush_timeout_s: float = 15.0

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[tuple[str, ...], str]] = []
        if self.repository and not REPOSITORY_PATTERN.fullmatch(self.repository):
            problems.append((("repository",), f'must be "owner/name", got {self.repository!r}'))
        if self.issue < 0:
            problems.append((("issue",), "must be an issue or pull request number (1 or more)"))
        if self.api_url:
            problem = api_url_problem(self.api_url)
            if problem:
                problems.append((("api_url",), problem))
        if not ENV_NAME_PATTERN.fullmatch(self.token_env):
            problems.append((("token_env",), "must be the name of an environment variable"))
        if not 0 < self.timeout_s <= 300:
            problems.append((("timeout_s",), "must be more than 0 and at most 300 seconds"))
        if self.comment_key and not KEY_PATTERN.fullmatch(self.comment_key):
            problems.append(
                (("comment_key",), "must be 1-64 letters, digits, dots, hyphens or underscores")
            )
        if not 0 <= self.retries <= 10:
            problems.append((("retries",), "must be between 0 and 10"))
        if not 0 <= self.max_wait_s <= 3600:
            problems.append((("max_wait_s",), "must be between 0 and 3600 seconds"))
        if not 0 < self.flush_timeout_s <= 600:
            problems.append((("flush_timeout_s",), "must be more than 0 and at most 600 seconds"))
        if problems:
            raise _invalid(problems)


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def api_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be the API root, or None. Plain http is for this machine only: the
    token must not cross a network in clear text."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        return f"must be an http(s) URL, got {url!r}"
    if parts.scheme not in ("http", "https") or not host:
        return f"must be an http(s) URL, got {url!r}"
    if parts.username is not None or parts.password is not None:
        return "must not hold credentials (the token comes from token_env)"
    if parts.query or parts.fragment:
        return "must not have a query or a fragment"
    if parts.scheme == "http" and not _is_loopback(host):
        return "must use https (plain http is allowed for 127.0.0.1 and localhost only)"
    return None


@attrs.frozen
class Target:
    """Everything needed to post: resolved from the config and the environment."""

    repository: str
    issue: int
    api_url: str
    token: str = attrs.field(repr=False)
    token_env: str

    @property
    def owner(self) -> str:
        return self.repository.split("/", 1)[0]

    @property
    def repo(self) -> str:
        return self.repository.split("/", 1)[1]

    @property
    def label(self) -> str:
        return f"{self.repository}#{self.issue}"


@attrs.frozen
class Unusable:
    """Why nothing can be posted: what is missing or wrong, and what to set."""

    missing: tuple[str, ...]
    message: str


def issue_from_actions(env: Mapping[str, str]) -> int | None:
    """The pull request (or issue) a GitHub Actions run is about: ``refs/pull/N/merge`` in
    $GITHUB_REF, else ``pull_request.number`` / ``issue.number`` in $GITHUB_EVENT_PATH. Never
    raises: anything unreadable is simply no answer."""
    match = PULL_REF_PATTERN.fullmatch(env.get("GITHUB_REF", "").strip())
    if match:
        number = int(match.group(1))
        return number if number > 0 else None
    return _issue_from_event_file(env.get("GITHUB_EVENT_PATH", "").strip())


def issue_from_event(payload: object) -> int | None:
    """``pull_request.number`` or ``issue.number`` of a webhook payload, or None."""
    if not isinstance(payload, dict):
        return None
    for key in ("pull_request", "issue"):
        section = payload.get(key)
        if isinstance(section, dict):
            number = section.get("number")
            if isinstance(number, int) and not isinstance(number, bool) and 0 < number < 10**9:
                return number
    return None


def _issue_from_event_file(path: str) -> int | None:
    if not path:
        return None
    try:
        file = Path(path)
        if not file.is_file() or file.stat().st_size > MAX_EVENT_FILE_BYTES:
            return None
        payload = json.loads(file.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError, RecursionError):
        return None
    return issue_from_event(payload)


def resolve(config: GitHubConfig, env: Mapping[str, str] | None = None) -> Target | Unusable:
    """The target to post to, or what the user must set. Never raises, and never puts the
    token in the message."""
    env = os.environ if env is None else env
    missing: list[str] = []
    hints: list[str] = []

    repository = config.repository or env.get("GITHUB_REPOSITORY", "").strip()
    if not repository:
        missing.append("repository")
        hints.append(
            'repository (`repository = "owner/name"` in [plugins.github], or $GITHUB_REPOSITORY)'
        )
    elif not REPOSITORY_PATTERN.fullmatch(repository):
        missing.append("repository")
        hints.append(f'repository ($GITHUB_REPOSITORY is {repository[:100]!r}, not "owner/name")')

    issue = config.issue or issue_from_actions(env) or 0
    if not issue:
        missing.append("issue")
        hints.append(
            "issue (`issue = N` in [plugins.github] or `--github-issue N`; in GitHub Actions it "
            "is found for pull_request and issue events)"
        )

    api_url = config.api_url or env.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL
    problem = api_url_problem(api_url)
    if problem:
        missing.append("api_url")
        hints.append(f"api_url ($GITHUB_API_URL {problem})")

    token = env.get(config.token_env, "").strip()
    if not token:
        missing.append("token")
        hints.append(f"the token (export it as ${config.token_env}, or point token_env elsewhere)")
    elif not TOKEN_PATTERN.fullmatch(token):
        missing.append("token")
        hints.append(
            f"the token (${config.token_env} holds characters no token has: spaces, line "
            "breaks or non-ASCII)"
        )

    if missing:
        message = "github: not posting the context-error report; set " + "; ".join(hints)
        if token:
            message = message.replace(token, "***")
        return Unusable(tuple(missing), message)
    return Target(
        repository=repository,
        issue=issue,
        api_url=api_url.rstrip("/"),
        token=token,
        token_env=config.token_env,
    )


__all__ = [
    "DEFAULT_API_URL",
    "NAME",
    "GitHubConfig",
    "Target",
    "Unusable",
    "api_url_problem",
    "issue_from_actions",
    "issue_from_event",
    "resolve",
]
