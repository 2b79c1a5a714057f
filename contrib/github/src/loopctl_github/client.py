"""A small GitHub REST client on the standard library: the three calls this plugin makes.

Safety first, because it carries a token:

* redirects are never followed (a redirect could carry the ``Authorization`` header to
  another host), and pagination links are followed only on the API's own origin;
* nothing this module returns or raises contains the token: every message built from a
  response passes through :func:`scrub` (a server may echo the token back in a 401 body);
* no exception escapes except :class:`ApiError`, whose message is already scrubbed.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import re
import urllib.error
import urllib.request
from collections.abc import Mapping
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import attrs

import loopctl
from loopctl_github import __version__
from loopctl_github.config import Target, _is_loopback

API_VERSION = "2022-11-28"
ACCEPT = "application/vnd.github+json"
USER_AGENT = f"loopctl-github/{__version__} (+https://github.com/loopctl)"
#: The biggest response read (a page of 100 comments of up to 65,536 characters each).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: Pages of comments searched for the marker at most (100 per page).
MAX_PAGES = 50
MESSAGE_LIMIT = 300

_LINK_PART = re.compile(r"<([^<>]*)>((?:\s*;\s*[^;,]*)*)")
_REL = re.compile(r"""\brel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)


def scrub(text: str, token: str | None, limit: int = MESSAGE_LIMIT) -> str:
    """``text`` fit for an event or a log: the token (also URL-quoted or JSON-escaped) and every
    secret loopctl's redactor knows replaced by ``[REDACTED]`` (:class:`loopctl.Redactor`),
    control characters flattened, at most ``limit`` characters."""
    redactor = loopctl.Redactor([token] if token else [])
    text = " ".join(loopctl.sanitize(redactor.redact(str(text))).split())
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    if token and token in text:  # a replacement that happened to rebuild it: say nothing
        return "" if token in "(withheld)" else "(withheld)"
    return text


def parse_link_header(value: str | None) -> dict[str, str]:
    """``rel -> URL`` from an RFC 8288 ``Link`` header (``<url>; rel="next", ...``). Never
    raises; anything it cannot read is left out."""
    links: dict[str, str] = {}
    if not value:
        return links
    for match in _LINK_PART.finditer(str(value)[:20_000]):
        url, params = match.group(1).strip(), match.group(2) or ""
        rel = _REL.search(params)
        if not url or rel is None:
            continue
        for name in (rel.group(1) or rel.group(2) or "").split():
            links.setdefault(name.lower(), url)
    return links


def retry_after_seconds(headers: Mapping[str, str], now: float) -> float | None:
    """How long GitHub asks us to wait: ``Retry-After`` (seconds or an HTTP date), else
    ``x-ratelimit-reset`` (epoch seconds) when the remaining quota is 0. None: not said."""
    retry = headers.get("retry-after", "").strip()
    if retry:
        try:
            return max(0.0, float(retry))
        except ValueError:
            pass
        try:
            return max(0.0, parsedate_to_datetime(retry).timestamp() - now)
        except (TypeError, ValueError, IndexError, OverflowError):
            pass
    if headers.get("x-ratelimit-remaining", "").strip() == "0":
        try:
            return max(0.0, float(headers.get("x-ratelimit-reset", "").strip()) - now)
        except ValueError:
            return None
    return None


@attrs.frozen
class Response:
    status: int
    headers: Mapping[str, str]  # lower-case names
    data: Any  # parsed JSON, or None
    text: str  # the raw body, for messages (scrub before showing)


class ApiError(Exception):
    """A call that did not get an answer: ``kind`` is ``timeout``, ``network``, ``redirect``
    or ``invalid``. The message never holds the token."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # urllib then raises HTTPError with the 3xx status


def same_origin(url: str, base: str) -> bool:
    try:
        a, b = urlsplit(url), urlsplit(base)
        return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)
    except ValueError:
        return False


class GitHubClient:
    """Talks to one repository's issue comments with one token."""

    def __init__(self, target: Target, *, timeout_s: float) -> None:
        self.target = target
        self.timeout_s = timeout_s
        host = urlsplit(target.api_url).hostname or ""
        # A proxy from the environment is fine for github.com, never for this machine.
        proxies = urllib.request.ProxyHandler({} if _is_loopback(host) else None)
        self._opener = urllib.request.build_opener(proxies, _NoRedirect())

    # --- URLs ------------------------------------------------------------------------------

    def _repo_path(self) -> str:
        t = self.target
        return f"{t.api_url}/repos/{quote(t.owner, safe='')}/{quote(t.repo, safe='')}"

    def issue_comments_url(self) -> str:
        return f"{self._repo_path()}/issues/{self.target.issue}/comments"

    def comment_url(self, comment_id: int) -> str:
        return f"{self._repo_path()}/issues/comments/{comment_id}"

    # --- calls -----------------------------------------------------------------------------

    def request(self, method: str, url: str, payload: Mapping[str, Any] | None = None) -> Response:
        """One HTTP request; every status comes back as a :class:`Response`. Raises only
        :class:`ApiError` (no answer at all)."""
        headers = {
            "Authorization": f"Bearer {self.target.token}",
            "Accept": ACCEPT,
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": USER_AGENT,
        }
        data = None
        if payload is not None:
            data = json.dumps(payload).encode("utf-8")
            headers["Content-Type"] = "application/json; charset=utf-8"
        try:
            request = urllib.request.Request(url, data=data, headers=headers, method=method)
            with self._opener.open(request, timeout=self.timeout_s) as answer:
                return self._response(answer.status, answer.headers, answer)
        except urllib.error.HTTPError as error:
            with contextlib.closing(error):
                status = int(error.code)
                if 300 <= status < 400:
                    raise ApiError(
                        "redirect",
                        f"the API answered {status} (a redirect, not followed: check api_url "
                        "and whether the repository was renamed)",
                    ) from None
                return self._response(status, error.headers, error)
        except ApiError:
            raise
        except TimeoutError as error:
            raise ApiError("timeout", f"no answer within {self.timeout_s:g} s") from error
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise ApiError("timeout", f"no answer within {self.timeout_s:g} s") from None
            reason = scrub(str(error.reason), self.target.token)
            raise ApiError("network", f"cannot reach {self._where()}: {reason}") from None
        except (OSError, http.client.HTTPException, ValueError) as error:
            reason = scrub(f"{type(error).__name__}: {error}", self.target.token)
            raise ApiError("network", f"cannot talk to {self._where()}: {reason}") from None

    def _where(self) -> str:
        parts = urlsplit(self.target.api_url)
        return f"{parts.scheme}://{parts.netloc}"

    def _response(self, status: int, headers: Any, body: Any) -> Response:
        names = {str(k).lower(): str(v) for k, v in (headers.items() if headers else [])}
        try:
            raw = body.read(MAX_RESPONSE_BYTES + 1) if body is not None else b""
        except (OSError, http.client.HTTPException, ValueError) as error:
            if isinstance(error, TimeoutError):
                raise ApiError("timeout", f"no answer within {self.timeout_s:g} s") from None
            raise ApiError("network", "the connection broke while reading the answer") from None
        raw = raw or b""
        text = raw[:MAX_RESPONSE_BYTES].decode("utf-8", errors="replace")
        data: Any = None
        if text.strip() and len(raw) <= MAX_RESPONSE_BYTES:
            try:
                data = json.loads(text)
            except (ValueError, RecursionError):
                data = None
        return Response(status=status, headers=names, data=data, text=text)

    def first_comments_page(self) -> str:
        return f"{self.issue_comments_url()}?per_page=100"

    def next_page(self, response: Response) -> str | None:
        """The ``Link: rel="next"`` page, only on the API's own origin (the token goes along)."""
        following = parse_link_header(response.headers.get("link")).get("next")
        return following if following and same_origin(following, self.target.api_url) else None

    def create_comment(self, body: str) -> Response:
        return self.request("POST", self.issue_comments_url(), {"body": body})

    def update_comment(self, comment_id: int, body: str) -> Response:
        return self.request("PATCH", self.comment_url(comment_id), {"body": body})


def server_message(response: Response, token: str | None) -> str:
    """GitHub's own explanation (``message``, plus the first validation error), scrubbed."""
    data = response.data
    parts: list[str] = []
    if isinstance(data, dict):
        if isinstance(data.get("message"), str):
            parts.append(data["message"])
        errors = data.get("errors")
        if isinstance(errors, list) and errors:
            first = errors[0]
            if isinstance(first, dict):
                detail = first.get("message") or first.get("code")
                if isinstance(detail, str):
                    parts.append(detail)
            elif isinstance(first, str):
                parts.append(first)
    elif response.text.strip() and not response.text.lstrip().startswith("<"):
        parts.append(response.text)
    return scrub(": ".join(parts), token, limit=200)


__all__ = [
    "ACCEPT",
    "API_VERSION",
    "USER_AGENT",
    "ApiError",
    "GitHubClient",
    "Response",
    "parse_link_header",
    "retry_after_seconds",
    "same_origin",
    "scrub",
    "server_message",
]
