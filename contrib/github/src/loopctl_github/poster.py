"""The background poster: the loop hands it reports; a thread of its own talks to GitHub.

The loop never waits on the network. ``submit`` only stores the job (the newest report wins:
one still waiting is replaced, so a slow API skips intermediate reports instead of falling
behind); ``flush`` waits, bounded, at the end of the loop. The thread never touches the loop:
what happened is queued as events that the loop's own hooks ``drain`` and emit.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from loopctl_github.client import (
    MAX_PAGES,
    ApiError,
    GitHubClient,
    Response,
    retry_after_seconds,
    scrub,
    server_message,
)
from loopctl_github.comment import (
    LastReport,
    failing_body,
    has_marker,
    passed_body,
    render_report,
    resolved_body,
    stopped_body,
)
from loopctl_github.events import FAILED, POSTED

#: First pause before a retry, doubled each time (bounded by MAX_BACKOFF_S).
BACKOFF_S = 0.25
MAX_BACKOFF_S = 4.0
#: Rate-limit waits tried per update at most.
MAX_RATE_LIMIT_WAITS = 2
#: Assumed wait when GitHub says "secondary rate limit" without saying for how long.
SECONDARY_LIMIT_WAIT_S = 60.0
LAST_REPORT_FILE = "github-last-report.json"


@attrs.define
class Job:
    """One update: ``report`` (a new failure), ``resolved`` or ``stopped`` (the loop ended)."""

    kind: str
    iteration: int
    report: Any = None
    status: str = ""
    message: str = ""
    iterations: int = 0


class _Failure(Exception):
    def __init__(self, reason: str, message: str, *, status: int | None = None, stop: bool = False):
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.status = status
        self.stop = stop


@attrs.define
class _Attempts:
    count: int = 0
    rate_limit_waits: int = 0


class Poster:
    """Posts and updates one comment for one loop, from its own daemon thread."""

    def __init__(
        self,
        client: GitHubClient,
        *,
        key: str,
        comment_id: int | None = None,
        comment_url: str = "",
        update_existing: bool = True,
        retries: int = 2,
        max_wait_s: float = 30.0,
        state_dir: Path | None = None,
        last: LastReport | None = None,
        backoff_s: float = BACKOFF_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.key = key
        self.comment_id = comment_id
        self.comment_url = comment_url
        self.update_existing = update_existing
        self.retries = retries
        self.max_wait_s = max_wait_s
        self.state_dir = state_dir
        self.last = last
        self.backoff_s = backoff_s
        self.clock = clock
        #: Set when posting cannot work for the rest of the run (bad token, no permission).
        self.stopped = False
        self.searched = False
        self.blocked_until = 0.0
        self.posted = 0
        self.failures = 0
        self._id_origin = "state" if comment_id is not None else ""
        self._last_failure: str | None = None
        self._repeated_failures = 0
        self._cond = threading.Condition()
        self._pending: Job | None = None
        self._superseded = 0
        self._busy = False
        self._closed = False
        self._deadline: float | None = None
        self._abort = threading.Event()
        self._outbox: list[tuple[str, dict[str, Any]]] = []
        self._thread: threading.Thread | None = None

    # --- the loop's side -------------------------------------------------------------------

    def submit(self, job: Job) -> None:
        """Queue ``job``, replacing one that has not started yet. Never blocks on the network."""
        with self._cond:
            if self._closed:
                return
            if self._pending is not None:
                self._superseded += 1
                if job.report is None:  # an end-of-loop update still needs the newest report
                    job.report = self._pending.report
            self._pending = job
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="loopctl-github-poster", daemon=True
                )
                self._thread.start()
            self._cond.notify_all()

    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the queued update to go out; False when it did not."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            self._deadline = deadline
            done = self._cond.wait_for(lambda: self._pending is None and not self._busy, timeout_s)
            if not done:
                self._abort.set()
                self._emit(
                    FAILED,
                    {
                        "status": None,
                        "reason": "unfinished",
                        "message": (
                            f"the last update was still going out after flush_timeout_s = "
                            f"{timeout_s:g} s; the loop did not wait longer"
                        ),
                        "for_iteration": None,
                        "stopped": False,
                    },
                )
            return done

    def close(self) -> None:
        """No more jobs; the thread ends once it is idle (an unfinished request is abandoned)."""
        with self._cond:
            self._closed = True
            self._pending = None
            self._abort.set()
            self._cond.notify_all()

    def drain(self) -> list[tuple[str, dict[str, Any]]]:
        """The events produced since the last call, for the loop's thread to emit."""
        with self._cond:
            out, self._outbox = self._outbox, []
        return out

    def join(self, timeout_s: float) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)

    # --- the thread ------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                if self._pending is None:
                    return
                job, self._pending = self._pending, None
                superseded, self._superseded = self._superseded, 0
                self._busy = True
            try:
                self._handle(job, superseded)
            except _Failure as failure:
                self._failed(job, failure)
            except Exception as error:  # noqa: BLE001 - the thread must never die loudly
                message = scrub(f"{type(error).__name__}: {error}", self.client.target.token)
                self._failed(job, _Failure("internal", f"unexpected error: {message}"))
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _emit(self, type: str, data: dict[str, Any]) -> None:
        with self._cond:
            self._outbox.append((type, data))

    def _sleep(self, seconds: float) -> bool:
        """Pause the thread (never the loop); False when the pause would outlast the end of
        the loop's wait or the poster is closing."""
        deadline = self._deadline
        if deadline is not None and time.monotonic() + seconds > deadline:
            return False
        return not self._abort.wait(max(0.0, seconds))

    def _handle(self, job: Job, superseded: int) -> None:
        if self.stopped:
            return
        if job.report is not None:
            self.last = render_report(job.report)
            self._save_last(self.last)
        if job.kind == "report" and self.last is None:
            return
        if self.last is None and self.comment_id is None and job.kind == "stopped":
            return  # nothing of ours to finish
        if (
            job.kind != "report"
            and self.last is None
            and self.comment_id is None
            and not self.update_existing
        ):
            return
        now = self.clock()
        if now < self.blocked_until:
            raise _Failure(
                "rate_limited",
                f"GitHub's rate limit lifts in {self.blocked_until - now:.0f} s; update skipped",
            )
        attempts = _Attempts()
        if self.comment_id is None and self.update_existing and not self.searched:
            self._find_existing(attempts)
        if self.comment_id is None and self.last is None:
            return  # a clean run and no earlier comment: nothing to say
        body, state = self._body(job)
        body = without_token(body, self.client.target.token)
        recreated = False
        if self.comment_id is not None:
            response = self._call(
                lambda: self.client.update_comment(self.comment_id or 0, body), attempts
            )
            if response.status == 200:
                self._posted("updated", state, job, response, superseded, attempts, False)
                return
            if response.status in (404, 410):
                recreated = True  # deleted on GitHub: start a new one
            elif response.status == 403 and self._id_origin == "found":
                recreated = True  # someone else's comment carrying our marker: ours is new
            else:
                raise self._failure(response, "update")
            self.comment_id = None
        response = self._call(lambda: self.client.create_comment(body), attempts)
        if response.status in (200, 201):
            self._posted("created", state, job, response, superseded, attempts, recreated)
            return
        raise self._failure(response, "create")

    def _body(self, job: Job) -> tuple[str, str]:
        if job.kind == "report" and self.last is not None:
            return failing_body(self.key, self.last), "failing"
        if job.kind == "resolved":
            if self.last is None and self._id_origin == "found":
                return passed_body(self.key, job.iteration), "passed"
            return resolved_body(self.key, self.last, job.iteration, job.iterations), "resolved"
        return (
            stopped_body(self.key, self.last, job.status, job.message, job.iteration),
            "stopped",
        )

    def _find_existing(self, attempts: _Attempts) -> None:
        """The newest comment on the issue whose body opens with our marker."""
        url: str | None = self.client.first_comments_page()
        found: dict[str, Any] | None = None
        for _ in range(MAX_PAGES):
            if url is None:
                break
            response = self._call(partial(self.client.request, "GET", url), attempts)
            if response.status != 200:
                raise self._failure(response, "search")
            if not isinstance(response.data, list):
                raise _Failure(
                    "invalid_response", "the comments list was not a JSON array", status=200
                )
            for item in response.data:
                if (
                    isinstance(item, dict)
                    and isinstance(item.get("id"), int)
                    and has_marker(item.get("body"), self.key)
                ):
                    found = item
            url = self.client.next_page(response)
        self.searched = True
        if found is not None:
            self.comment_id = int(found["id"])
            url_text = found.get("html_url")
            self.comment_url = (
                scrub(url_text, self.client.target.token, 500) if isinstance(url_text, str) else ""
            )
            self._id_origin = "found"

    def _call(self, send: Callable[[], Response], attempts: _Attempts) -> Response:
        """``send`` with bounded retries: timeouts, network errors and 5xx are retried after a
        growing pause; a rate limit is waited out when GitHub's wait fits ``max_wait_s``."""
        retries = 0
        while True:
            attempts.count += 1
            try:
                response = send()
            except ApiError as error:
                if error.kind in ("timeout", "network") and retries < self.retries:
                    retries += 1
                    if self._sleep(min(MAX_BACKOFF_S, self.backoff_s * 2 ** (retries - 1))):
                        continue
                stop = error.kind == "redirect"
                raise _Failure(error.kind, error.message, stop=stop) from None
            if response.status >= 500 and retries < self.retries:
                retries += 1
                if self._sleep(min(MAX_BACKOFF_S, self.backoff_s * 2 ** (retries - 1))):
                    continue
                return response
            wait = self._rate_limit_wait(response)
            if wait is None:
                return response
            if wait <= self.max_wait_s and attempts.rate_limit_waits < MAX_RATE_LIMIT_WAITS:
                attempts.rate_limit_waits += 1
                if self._sleep(wait):
                    continue
            self.blocked_until = self.clock() + wait
            raise _Failure(
                "rate_limited",
                f"GitHub's rate limit: retry after {wait:.0f} s (more than max_wait_s = "
                f"{self.max_wait_s:g} s, or the loop is ending); this update was skipped",
                status=response.status,
            )

    def _rate_limit_wait(self, response: Response) -> float | None:
        if response.status not in (403, 429):
            return None
        headers = response.headers
        wait = retry_after_seconds(headers, self.clock())
        if wait is not None:
            return wait
        if response.status == 429 or "rate limit" in response.text.lower():
            return SECONDARY_LIMIT_WAIT_S
        return None

    def _failure(self, response: Response, action: str) -> _Failure:
        target = self.client.target
        said = server_message(response, target.token)
        status = response.status
        detail = f"{status}{': ' + said if said else ''}"
        if status == 401:
            return _Failure(
                "unauthorized",
                f"GitHub rejected the token in ${target.token_env} ({detail}); set a valid "
                "token that may write issue comments. No more comments this run.",
                status=status,
                stop=True,
            )
        if status == 403:
            return _Failure(
                "forbidden",
                f"the token in ${target.token_env} may not {action} comments on {target.label} "
                f"({detail}); in GitHub Actions grant `permissions: issues: write` and "
                "`pull-requests: write`, or give a personal token Issues: write. No more "
                "comments this run.",
                status=status,
                stop=True,
            )
        if status == 404:
            return _Failure(
                "not_found",
                f"{target.label} was not found ({detail}); check repository and issue, and that "
                "the token can see the repository. No more comments this run.",
                status=status,
                stop=True,
            )
        if status == 410:
            return _Failure(
                "gone",
                f"{target.label} is gone or its comments are off ({detail}). No more comments "
                "this run.",
                status=status,
                stop=True,
            )
        if status == 422:
            return _Failure("rejected", f"GitHub rejected the comment ({detail})", status=status)
        if status >= 500:
            return _Failure(
                "server_error",
                f"GitHub answered {detail} after {self.retries} retr"
                f"{'y' if self.retries == 1 else 'ies'}; the next update will try again",
                status=status,
            )
        return _Failure("http_error", f"unexpected answer {detail}", status=status)

    def _posted(
        self,
        action: str,
        state: str,
        job: Job,
        response: Response,
        superseded: int,
        attempts: _Attempts,
        recreated: bool,
    ) -> None:
        data = response.data if isinstance(response.data, dict) else {}
        comment_id = data.get("id")
        if isinstance(comment_id, int) and not isinstance(comment_id, bool):
            if action == "created":
                self._id_origin = "state"
            self.comment_id = comment_id
        url = data.get("html_url")
        if isinstance(url, str):
            self.comment_url = scrub(url, self.client.target.token, 500)
        self.posted += 1
        self._last_failure = None
        self._repeated_failures = 0
        self._emit(
            POSTED,
            {
                "action": action,
                "comment_id": self.comment_id,
                "url": self.comment_url,
                "state": state,
                "for_iteration": job.iteration,
                "superseded": superseded,
                "attempts": attempts.count,
                "recreated": recreated,
            },
        )

    def _failed(self, job: Job, failure: _Failure) -> None:
        self.failures += 1
        if failure.stop:
            self.stopped = True
        message = scrub(failure.message, self.client.target.token, 500)
        if failure.reason == self._last_failure and not failure.stop:
            self._repeated_failures += 1  # said once already; say it again only when it changes
            return
        self._last_failure = failure.reason
        self._emit(
            FAILED,
            {
                "status": failure.status,
                "reason": failure.reason,
                "message": message,
                "for_iteration": job.iteration,
                "stopped": failure.stop,
            },
        )

    def _save_last(self, last: LastReport) -> None:
        if self.state_dir is None:
            return
        import json

        from loopctl import atomic_write_text

        with contextlib.suppress(OSError, ValueError):
            text = json.dumps(last.to_json(), indent=2, ensure_ascii=False) + "\n"
            atomic_write_text(self.state_dir / LAST_REPORT_FILE, text)


def without_token(body: str, token: str) -> str:
    """The comment body redacted (:class:`loopctl.Redactor`): the token and every secret the
    redactor knows are masked, so a log or a loop message that happened to print one cannot
    publish it on GitHub. The one place every comment passes before it is posted. The marker
    line that opens the body (``<!-- loopctl:context-errors key=… -->``) is ours and kept as
    it is: a later run finds the comment by it."""
    from loopctl import Redactor

    marker, newline, rest = body.partition("\n")
    if not (marker.startswith("<!-- loopctl:") and marker.endswith("-->")):
        marker, newline, rest = "", "", body
    redacted = marker + newline + Redactor([token] if token else []).redact(rest)
    return redacted.replace(token, "") if token and token in redacted else redacted


def load_last(state_dir: Path) -> LastReport | None:
    """The last report a previous process of this run rendered (for a resumed run)."""
    import json

    try:
        text = (state_dir / LAST_REPORT_FILE).read_text(encoding="utf-8")
        return LastReport.from_json(json.loads(text))
    except (OSError, ValueError, RecursionError):
        return None


__all__ = ["LAST_REPORT_FILE", "Job", "Poster", "load_last"]
