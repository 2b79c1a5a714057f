"""What the plugin does inside a loop; :mod:`loopctl_github.plugin` calls in here.

One :class:`Session` per running loop, kept in ``loop.stash`` under :data:`SESSION`: the
resolved target and the background :class:`~loopctl_github.poster.Poster`. Everything that
touches the loop (emitting events, ``loop.set_value``) happens here, on the loop's thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from loopctl import StashKey
from loopctl_github.comment import comment_key
from loopctl_github.config import NAME, GitHubConfig, Target, Unusable, resolve
from loopctl_github.events import DISABLED
from loopctl_github.poster import Job, Poster, load_last

if TYPE_CHECKING:
    from loopctl import Loop, LoopOutcome

#: Loop-state key: the comment this run posts to (id, URL, and which issue it is on).
STATE_KEY = "github.comment"
#: loopctl-context-errors' hook that hands over each failed iteration's report.
REPORT_HOOK = "context_errors_report"
#: An interrupted loop (Ctrl-C) waits at most this long for the last update.
INTERRUPTED_FLUSH_S = 3.0


@attrs.define
class Session:
    config: GitHubConfig
    target: Target
    poster: Poster
    saved_id: int | None = None


#: The run's session (absent when the plugin posts nothing this run).
SESSION = StashKey[Session]()


def settings(loop: Loop) -> GitHubConfig:
    try:
        config = loop.plugin_config(NAME)
    except KeyError:  # registered without its config hook (a test harness): the defaults
        return GitHubConfig()
    return config if isinstance(config, GitHubConfig) else GitHubConfig()


def _disable(loop: Loop, reason: str, message: str, missing: list[str]) -> None:
    """Say once, clearly, why nothing will be posted; then stay quiet for the run."""
    loop.emit(DISABLED, reason=reason, message=message, missing=missing)
    loop.emit("loop.warning", message=message)


def _reports_available(loop: Loop) -> bool:
    """Whether loopctl-context-errors is loaded (its hook spec is registered)."""
    caller = getattr(loop.hook, REPORT_HOOK, None)
    return getattr(caller, "spec", None) is not None


def _stored_comment(loop: Loop, target: Target) -> tuple[int | None, str]:
    value = loop.get_value(STATE_KEY)
    if not isinstance(value, dict) or value.get("target") != target.label:
        return None, ""  # none yet, or it is on another issue than the one configured now
    comment_id = value.get("id")
    url = value.get("url")
    if not isinstance(comment_id, int) or isinstance(comment_id, bool) or comment_id <= 0:
        return None, ""
    return comment_id, url if isinstance(url, str) else ""


def start(loop: Loop) -> None:
    config = settings(loop)
    if not _reports_available(loop):
        _disable(
            loop,
            "no_reports",
            "github: loopctl-context-errors is not enabled, so there is no report to post; "
            "enable the context-errors plugin (it is installed with loopctl-github) or disable "
            "github",
            ["context-errors"],
        )
        return
    found = resolve(config)
    if isinstance(found, Unusable):
        _disable(loop, "not_configured", found.message, list(found.missing))
        return
    from loopctl_github.client import GitHubClient

    comment_id, url = _stored_comment(loop, found)
    poster = Poster(
        GitHubClient(found, timeout_s=config.timeout_s),
        key=comment_key(config.comment_key, loop.original_goal),
        comment_id=comment_id,
        comment_url=url,
        update_existing=config.update_existing,
        retries=config.retries,
        max_wait_s=config.max_wait_s,
        state_dir=loop.state_dir,
        last=load_last(loop.state_dir) if loop.resumed else None,
    )
    loop.stash[SESSION] = Session(config=config, target=found, poster=poster, saved_id=comment_id)


def drain(loop: Loop) -> None:
    """Emit what the poster did since last time, and remember the comment in loop state."""
    session = loop.stash.get(SESSION)
    if session is not None:
        _drain(loop, session)


def _drain(loop: Loop, session: Session) -> None:
    for type, data in session.poster.drain():
        loop.emit(type, **data)
    poster = session.poster
    if poster.comment_id is not None and poster.comment_id != session.saved_id:
        loop.set_value(
            STATE_KEY,
            {"id": poster.comment_id, "url": poster.comment_url, "target": session.target.label},
        )
        session.saved_id = poster.comment_id


def on_report(loop: Loop, report: Any) -> None:
    session = loop.stash.get(SESSION)
    if session is None:
        return
    _drain(loop, session)
    session.poster.submit(Job("report", loop.iteration, report=report))


def end(loop: Loop, outcome: LoopOutcome) -> None:
    session = loop.stash.get(SESSION)
    if session is None:
        return
    poster = session.poster
    if outcome.status == "complete":
        poster.submit(Job("resolved", loop.iteration, iterations=outcome.iterations))
    else:
        poster.submit(
            Job(
                "stopped",
                loop.iteration,
                status=outcome.status,
                message=outcome.message or outcome.reason,
                iterations=outcome.iterations,
            )
        )
    wait = session.config.flush_timeout_s
    if outcome.status == "interrupted":
        wait = min(wait, INTERRUPTED_FLUSH_S)
    poster.flush(wait)
    poster.close()
    del loop.stash[SESSION]
    _drain(loop, session)
    if poster.comment_url:
        note = f"The context-error report is on {session.target.label}: {poster.comment_url}"
        if poster.failures:
            note += f" ({poster.failures} update(s) did not go out; see github.* events)"
        loop.add_report_section("GitHub comment", note, source=NAME)


__all__ = [
    "REPORT_HOOK",
    "SESSION",
    "STATE_KEY",
    "Session",
    "drain",
    "end",
    "on_report",
    "settings",
    "start",
]
