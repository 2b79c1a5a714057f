"""The background poster against the fake GitHub API: latest report wins, rate limits, timeouts,
4xx answers, redirects and foreign pagination links, and the token never leaking."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from github_testkit import ISSUE, OWNER, REPO, FakeGitHub, Fault
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl_context_errors import build_report
from loopctl_github.client import GitHubClient
from loopctl_github.comment import marker
from loopctl_github.config import Target
from loopctl_github.poster import Job, Poster

KEY = "test-key"


def report(word: str, iteration: int = 1) -> Any:
    log = (
        "Traceback (most recent call last):\n"
        '  File "test_calc.py", line 6, in test_add\n'
        f"AssertionError: {word} != 5\n"
    )
    return build_report(log, iteration=iteration, goal="make the tests pass")


def make_poster(api_url: str, token: str, **kw: Any) -> Poster:
    timeout_s = kw.pop("timeout_s", 2.0)
    target = Target(
        repository=f"{OWNER}/{REPO}",
        issue=ISSUE,
        api_url=api_url,
        token=token,
        token_env="GITHUB_TOKEN",
    )
    kw.setdefault("backoff_s", 0.05)
    return Poster(GitHubClient(target, timeout_s=timeout_s), key=KEY, **kw)


def run_jobs(poster: Poster, *jobs: Job, flush_s: float = 10.0) -> list[tuple[str, dict[str, Any]]]:
    for job in jobs:
        poster.submit(job)
        assert poster.flush(flush_s)
    poster.close()
    poster.join(5)
    events: list[tuple[str, dict[str, Any]]] = poster.drain()
    return events


def of(events: list[tuple[str, dict[str, Any]]], kind: str) -> list[dict[str, Any]]:
    return [data for type, data in events if type == f"github.comment_{kind}"]


@pytest.fixture
def fake(token: str) -> Iterator[FakeGitHub]:
    server = FakeGitHub(token).start()
    try:
        yield server
    finally:
        server.stop()


def test_the_latest_report_wins_while_one_is_in_flight(fake: FakeGitHub, token: str) -> None:
    poster = make_poster(fake.api_url, token)
    fake.hold = threading.Event()
    poster.submit(Job("report", 1, report=report("first-report", 1)))
    deadline = time.monotonic() + 5
    while fake.arrived == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fake.arrived == 1  # the search is in flight, held by the server
    poster.submit(Job("report", 2, report=report("second-report", 2)))
    poster.submit(Job("report", 3, report=report("third-report", 3)))
    fake.hold.set()
    assert poster.flush(10)
    poster.close()
    events = poster.drain()

    assert fake.violations == []
    assert fake.methods() == ["GET", "POST", "PATCH"]
    assert "first-report" in fake.of("POST")[0].body["body"]
    assert "third-report" in fake.of("PATCH")[0].body["body"]
    assert not any("second-report" in r.raw for r in fake.requests)
    done = of(events, "posted")
    assert [(e["action"], e["for_iteration"], e["superseded"]) for e in done] == [
        ("created", 1, 0),
        ("updated", 3, 1),
    ]


def test_the_end_of_the_loop_carries_a_report_it_overtakes(fake: FakeGitHub, token: str) -> None:
    poster = make_poster(fake.api_url, token)
    fake.hold = threading.Event()
    poster.submit(Job("report", 1, report=report("first-report", 1)))
    deadline = time.monotonic() + 5
    while fake.arrived == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    poster.submit(Job("report", 2, report=report("second-report", 2)))
    poster.submit(Job("resolved", 3, iterations=3))  # overtakes report 2 before it went out
    fake.hold.set()
    assert poster.flush(10)
    poster.close()
    assert fake.methods() == ["GET", "POST", "PATCH"]
    final = fake.of("PATCH")[0].body["body"]
    assert "resolved" in final
    assert "Last failure report (iteration 2, " in final
    assert "second-report" in final


@pytest.mark.slow
def test_a_rate_limit_within_max_wait_is_waited_out(fake: FakeGitHub, token: str) -> None:
    fake.faults.append(Fault("POST", 429, {"message": "slow down"}, {"Retry-After": "1"}))
    poster = make_poster(fake.api_url, token, max_wait_s=5)
    events = run_jobs(poster, Job("report", 1, report=report("x")))
    posts = fake.of("POST")
    assert len(posts) == 2
    assert posts[1].at - posts[0].at >= 0.9
    assert of(events, "posted")[0]["action"] == "created"


def test_a_long_rate_limit_skips_updates_until_it_lifts(fake: FakeGitHub, token: str) -> None:
    reset = str(int(time.time()) + 3600)
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": reset}
    fake.faults.append(Fault("GET", 403, {"message": "API rate limit exceeded"}, headers))
    poster = make_poster(fake.api_url, token, max_wait_s=600)
    started = time.monotonic()
    events = run_jobs(
        poster, Job("report", 1, report=report("a")), Job("report", 2, report=report("b"))
    )
    assert time.monotonic() - started < 60  # neither the hour nor max_wait_s was waited out
    assert fake.methods() == ["GET"]  # the second update did not even try
    (failed,) = of(events, "failed")  # said once
    assert failed["reason"] == "rate_limited"
    assert failed["stopped"] is False
    assert "retry after 3600 s" in failed["message"] or "retry after 3599 s" in failed["message"]


def test_a_secondary_rate_limit_without_headers_is_skipped(fake: FakeGitHub, token: str) -> None:
    body = {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."}
    fake.faults.append(Fault("GET", 403, body))
    events = run_jobs(
        make_poster(fake.api_url, token, max_wait_s=5), Job("report", 1, report=report("a"))
    )
    (failed,) = of(events, "failed")
    assert failed["reason"] == "rate_limited"
    assert "retry after 60 s" in failed["message"]


@pytest.mark.timing  # an HTTP timeout
def test_timeouts_are_retried_a_bounded_number_of_times(fake: FakeGitHub, token: str) -> None:
    fake.faults.append(Fault("GET", delay_s=1.0, times=2))
    poster = make_poster(fake.api_url, token, timeout_s=0.3, retries=1)
    # without the 0.3 s timeout both slow answers would arrive and the update would succeed
    events = run_jobs(poster, Job("report", 1, report=report("a")))
    assert fake.methods()[:2] == ["GET", "GET"]
    (failed,) = of(events, "failed")
    assert failed["reason"] == "timeout"
    assert "0.3 s" in failed["message"]


@pytest.mark.parametrize(
    ("method", "status", "reason", "stopped", "words"),
    [
        ("POST", 403, "forbidden", True, "permissions: issues: write"),
        ("POST", 404, "not_found", True, "check repository and issue"),
        ("POST", 410, "gone", True, "gone"),
        ("POST", 422, "rejected", False, "Validation Failed"),
        ("POST", 418, "http_error", False, "418"),
        ("GET", 500, "server_error", False, "next update will try again"),
    ],
)
def test_answers_that_are_not_success(
    fake: FakeGitHub, token: str, method: str, status: int, reason: str, stopped: bool, words: str
) -> None:
    fake.faults.append(Fault(method, status, {"message": "Validation Failed"}, times=10))
    poster = make_poster(fake.api_url, token, retries=1)
    events = run_jobs(
        poster, Job("report", 1, report=report("a")), Job("report", 2, report=report("b"))
    )
    failed = of(events, "failed")
    assert failed[0]["reason"] == reason
    assert failed[0]["status"] == status
    assert failed[0]["stopped"] is stopped
    assert words in failed[0]["message"]
    assert len(failed) == 1  # the same failure again is not repeated
    if stopped:  # no second try this run
        assert fake.methods().count(method) == 1


def test_someone_elses_marker_comment_is_left_alone(fake: FakeGitHub, token: str) -> None:
    theirs = fake.seed(marker(KEY) + "\ncopied by a human", user="octocat")
    fake.faults.append(Fault("PATCH", 403, {"message": "You cannot edit this comment"}))
    events = run_jobs(make_poster(fake.api_url, token), Job("report", 1, report=report("a")))
    assert fake.methods() == ["GET", "PATCH", "POST"]
    (done,) = of(events, "posted")
    assert done["action"] == "created"
    assert done["recreated"] is True
    assert done["comment_id"] != theirs
    assert fake.comments[theirs]["body"].endswith("copied by a human")


def test_redirects_are_not_followed(fake: FakeGitHub, token: str) -> None:
    other = FakeGitHub(token).start()
    try:
        fake.faults.append(
            Fault("GET", 301, {"message": "Moved"}, {"Location": f"{other.api_url}/elsewhere"})
        )
        events = run_jobs(make_poster(fake.api_url, token), Job("report", 1, report=report("a")))
        assert other.arrived == 0
        (failed,) = of(events, "failed")
        assert failed["reason"] == "redirect"
        assert failed["stopped"] is True
    finally:
        other.stop()


def test_pagination_links_to_another_host_are_not_followed(fake: FakeGitHub, token: str) -> None:
    other = FakeGitHub(token).start()
    try:
        link = f'<{other.api_url}/repos/{OWNER}/{REPO}/issues/{ISSUE}/comments?page=2>; rel="next"'
        fake.faults.append(Fault("GET", 200, [], {"Link": link}))
        events = run_jobs(make_poster(fake.api_url, token), Job("report", 1, report=report("a")))
        assert other.arrived == 0
        assert fake.methods() == ["GET", "POST"]
        assert of(events, "posted")[0]["action"] == "created"
    finally:
        other.stop()


def test_a_resolved_update_without_any_report_posts_nothing(fake: FakeGitHub, token: str) -> None:
    events = run_jobs(make_poster(fake.api_url, token), Job("resolved", 3, iterations=3))
    assert fake.methods() == ["GET"]  # looked for an earlier comment, found none
    assert events == []
    events = run_jobs(
        make_poster(fake.api_url, token), Job("stopped", 3, status="max_iterations", message="")
    )
    assert fake.methods() == ["GET"]  # nothing of ours to finish: not even a search


TOKENS = st.from_regex(r"(ghp_|github_pat_|gho_|)[A-Za-z0-9_\-.~+/=]{20,60}", fullmatch=True)
ECHOES = st.sampled_from(["message", "errors", "raw", "header", "html_url"])
STATUSES = st.sampled_from([401, 403, 404, 410, 422, 418, 500, 201])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(token=TOKENS, status=STATUSES, echo=ECHOES)
def test_the_token_never_leaks_whatever_the_server_answers(
    token: str, status: int, echo: str
) -> None:
    server = FakeGitHub(token).start()
    try:
        body: Any = {"message": "Bad credentials"}
        headers: dict[str, str] = {}
        if echo == "message":
            body = {"message": f"Bad credentials: Bearer {token} is not valid ({token})"}
        elif echo == "errors":
            body = {"message": "Validation Failed", "errors": [{"message": f"token {token}"}]}
        elif echo == "raw":
            body = f"plain text error with {token} inside"
        elif echo == "header":
            headers = {"X-Echo": token, "Retry-After": token}
        elif echo == "html_url":
            body = {"id": 5, "html_url": f"https://github.com/x?t={token}"}
        server.faults.append(
            Fault("POST" if status == 201 else "*", status, body, headers, times=10)
        )
        poster = make_poster(server.api_url, token, retries=0, max_wait_s=0)
        events = run_jobs(
            poster,
            Job("report", 1, report=report("a")),
            Job("stopped", 2, status="error", message=f"oops {token}"),
        )
        assert events  # something was said about it
        assert token not in json.dumps(events)
        assert token not in repr(poster.client.target)
        assert token not in poster.comment_url
        for request in server.requests:
            assert token not in request.raw  # and never sent in a body either
    finally:
        server.stop()
