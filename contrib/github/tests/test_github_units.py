"""The parts fed by outside input, on their own: Link headers, Retry-After, GitHub Actions
variables and event payloads, the marker, the body size limit, token scrubbing, config."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_context_errors import build_report
from loopctl_github.client import parse_link_header, retry_after_seconds, same_origin, scrub
from loopctl_github.comment import (
    GITHUB_COMMENT_LIMIT,
    LastReport,
    comment_key,
    default_key,
    failing_body,
    has_marker,
    marker,
    passed_body,
    render_report,
    resolved_body,
    stopped_body,
)
from loopctl_github.config import (
    GitHubConfig,
    Target,
    Unusable,
    api_url_problem,
    issue_from_actions,
    issue_from_event,
    resolve,
)
from loopctl_github.poster import without_token

FAST = settings(max_examples=100, deadline=None)


# --- Link headers ---------------------------------------------------------------------------


def test_link_header_as_github_sends_it() -> None:
    header = (
        '<https://api.github.com/repositories/1/issues/7/comments?per_page=100&page=2>; rel="next", '
        '<https://api.github.com/repositories/1/issues/7/comments?per_page=100&page=5>; rel="last"'
    )
    links = parse_link_header(header)
    assert links["next"].endswith("page=2")
    assert links["last"].endswith("page=5")
    assert parse_link_header(None) == {}
    assert parse_link_header("garbage; rel=next") == {}
    assert parse_link_header("<u>; rel=next") == {"next": "u"}


@FAST
@given(st.text(max_size=400))
def test_link_header_parser_never_raises(text: str) -> None:
    links = parse_link_header(text)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in links.items())


@FAST
@given(
    st.lists(
        st.tuples(
            st.from_regex(r"https://api\.github\.com/[a-z0-9/?=&]{0,40}", fullmatch=True),
            st.sampled_from(["next", "last", "prev", "first"]),
        ),
        max_size=4,
        unique_by=lambda pair: pair[1],
    )
)
def test_link_header_round_trip(pairs: list[tuple[str, str]]) -> None:
    header = ", ".join(f'<{url}>; rel="{rel}"' for url, rel in pairs)
    assert parse_link_header(header) == {rel: url for url, rel in pairs}


def test_same_origin() -> None:
    assert same_origin("https://api.github.com/x?page=2", "https://api.github.com")
    assert not same_origin("https://evil.example/x", "https://api.github.com")
    assert not same_origin("http://api.github.com/x", "https://api.github.com")
    assert not same_origin("https://api.github.com:444/x", "https://api.github.com")


# --- Retry-After ----------------------------------------------------------------------------


def test_retry_after_forms() -> None:
    now = 1_000_000.0
    assert retry_after_seconds({"retry-after": "30"}, now) == 30
    assert retry_after_seconds({"retry-after": "Mon, 12 Jan 1970 13:46:50 GMT"}, now) == 10
    limited = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(now) + 90)}
    assert retry_after_seconds(limited, now) == 90
    assert retry_after_seconds({"x-ratelimit-remaining": "12"}, now) is None
    assert retry_after_seconds({}, now) is None


@FAST
@given(st.dictionaries(st.sampled_from(["retry-after", "x-ratelimit-remaining",
                                        "x-ratelimit-reset"]), st.text(max_size=40)))  # fmt: skip
def test_retry_after_never_raises(headers: dict[str, str]) -> None:
    wait = retry_after_seconds(headers, time.time())
    assert wait is None or wait >= 0


# --- GitHub Actions -------------------------------------------------------------------------


def test_issue_from_github_actions(tmp_path: Path) -> None:
    assert issue_from_actions({"GITHUB_REF": "refs/pull/42/merge"}) == 42
    assert issue_from_actions({"GITHUB_REF": "refs/heads/main"}) is None
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"action": "opened", "issue": {"number": 9}}))
    assert issue_from_actions({"GITHUB_EVENT_PATH": str(event)}) == 9
    event.write_text("{not json")
    assert issue_from_actions({"GITHUB_EVENT_PATH": str(event)}) is None
    assert issue_from_actions({"GITHUB_EVENT_PATH": str(tmp_path / "missing.json")}) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=12), inner, max_size=3)
    ),
    max_leaves=12,
)


@FAST
@given(JSON, st.text(max_size=60))
def test_event_payloads_and_refs_never_raise(payload: Any, ref: str) -> None:
    number = issue_from_event(payload)
    assert number is None or (isinstance(number, int) and number > 0)
    found = issue_from_actions({"GITHUB_REF": ref})
    assert found is None or found > 0


# --- the marker and the body ----------------------------------------------------------------


def test_marker_must_open_the_body() -> None:
    key = default_key("make the tests pass")
    assert key == default_key("make the tests pass") != default_key("another goal")
    assert has_marker(f"{marker(key)}\nreport", key)
    assert has_marker(f"\n  {marker(key)}\nreport", key)
    assert not has_marker(f"report\n```\n{marker(key)}\n```", key)  # quoted in a log
    assert not has_marker(f"{marker(key + 'x')}\n", key)
    assert not has_marker(None, key)
    assert comment_key("py3.12", "goal") == "py3.12"
    assert comment_key("", "goal") == default_key("goal")


def _report(log: str, iteration: int = 2) -> Any:
    return build_report(log, iteration=iteration, goal="make the tests pass")


def test_every_body_fits_githubs_limit_even_for_a_huge_log() -> None:
    log = "\n".join(f"line {n}: " + "x" * 300 for n in range(20_000))
    log += "\nAssertionError: -1 != 5\n"
    last = render_report(_report(log))
    key = "k"
    bodies = [
        failing_body(key, last),
        resolved_body(key, last, 3, 3),
        stopped_body(key, last, "max_iterations", "y" * 10_000, 5),
        passed_body(key, 1),
    ]
    for body in bodies:
        assert len(body) <= GITHUB_COMMENT_LIMIT
        assert body.startswith(marker(key))
    assert "<details><summary>Last failure report (iteration 2, " in bodies[1]
    assert "resolved" in bodies[1]


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=3000), st.text(max_size=200))
def test_bodies_from_any_log_and_message(log: str, message: str) -> None:
    last = render_report(_report(log))
    for body in (
        failing_body("k", last),
        resolved_body("k", last, 2, 2),
        stopped_body("k", last, "plugin", message, 2),
    ):
        assert body.startswith(marker("k") + "\n")
        assert len(body) <= GITHUB_COMMENT_LIMIT
        assert body.count("<!-- loopctl:context-errors") == 1  # a log cannot forge a marker


def test_stopped_message_cannot_inject_markup() -> None:
    body = stopped_body("k", None, "plugin", "<img src=x onerror=alert(1)> `code` @someone", 2)
    assert "<img" not in body
    assert "&lt;img" in body


def test_last_report_round_trip_and_bad_input() -> None:
    last = LastReport(iteration=3, category="TYPE_ERROR", stage="tests", markdown="### hi")
    assert LastReport.from_json(json.loads(json.dumps(last.to_json()))) == last
    assert LastReport.from_json({"markdown": ""}) is None
    assert LastReport.from_json(["x"]) is None
    odd = LastReport.from_json({"markdown": "x", "iteration": "7"})
    assert odd is not None
    assert odd.iteration is None


# --- the token ------------------------------------------------------------------------------

TOKENS = st.from_regex(r"[\x21-\x7e]{12,80}", fullmatch=True)


@FAST
@given(TOKENS, st.text(max_size=300), st.text(max_size=300))
def test_scrub_removes_the_token_from_any_text(token: str, before: str, after: str) -> None:
    for text in (
        f"{before}{token}{after}",
        f"{before}Bearer {token}{after}",
        json.dumps({"t": token}),
    ):
        cleaned = scrub(text, token)
        assert token not in cleaned
        assert len(cleaned) <= 300
    assert token not in without_token(f"{before}{token}{after}", token)


def test_scrub_removes_github_token_shapes_without_knowing_them() -> None:
    assert scrub("error ghp_" + "a" * 36 + " here", None) == "error [REDACTED] here"
    assert "secretsecretsecret" not in scrub("Authorization: Bearer secretsecretsecret", None)


# --- config ---------------------------------------------------------------------------------


def test_resolve_from_config_and_environment() -> None:
    env = {
        "GITHUB_TOKEN": "ghp_" + "t" * 36,
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_REF": "refs/pull/5/merge",
    }
    target = resolve(GitHubConfig(), env)
    assert isinstance(target, Target)
    assert (target.repository, target.issue, target.api_url) == ("o/r", 5, "https://api.github.com")
    assert "t" * 36 not in repr(target)
    config = GitHubConfig(repository="a/b", issue=3, api_url="https://ghe.example/api/v3/",
                          token_env="MY_TOKEN")  # fmt: skip
    target = resolve(config, {"MY_TOKEN": "abc", **env, "GITHUB_API_URL": "https://x.example"})
    assert isinstance(target, Target)
    assert (target.repository, target.issue, target.api_url) == (
        "a/b",
        3,
        "https://ghe.example/api/v3",
    )
    assert target.token == "abc"


def test_resolve_names_what_to_set() -> None:
    found = resolve(GitHubConfig(token_env="MY_TOKEN"), {})
    assert isinstance(found, Unusable)
    assert found.missing == ("repository", "issue", "token")
    assert "$MY_TOKEN" in found.message
    bad = resolve(GitHubConfig(repository="a/b", issue=1), {"GITHUB_TOKEN": "two words\n"})
    assert isinstance(bad, Unusable)
    assert bad.missing == ("token",)
    assert "two words" not in bad.message


@FAST
@given(
    st.dictionaries(
        st.sampled_from(["GITHUB_REPOSITORY", "GITHUB_REF", "GITHUB_API_URL", "GITHUB_EVENT_PATH"]),
        st.text(max_size=40),
    ),
    st.from_regex(r"Q9z[A-Za-z0-9]{4}[A-Za-z0-9 \n\t\x00é]{4,40}", fullmatch=True),
)
def test_resolve_never_raises_nor_shows_the_token(env: dict[str, str], token: str) -> None:
    found = resolve(GitHubConfig(), {**env, "GITHUB_TOKEN": token})
    if isinstance(found, Unusable):
        assert token.strip() not in found.message
    else:
        assert found.token == token.strip()


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://api.github.com", True),
        ("https://ghe.example.com/api/v3", True),
        ("http://127.0.0.1:8080", True),
        ("http://localhost:1", True),
        ("http://[::1]:9", True),
        ("http://api.github.com", False),
        ("ftp://x", False),
        ("https://u:p@x.example", False),
        ("https://x.example/?q=1", False),
        ("https://x.example:99999", False),
        ("not a url", False),
    ],
)
def test_api_url(url: str, ok: bool) -> None:
    assert (api_url_problem(url) is None) is ok


def test_the_plugin_module_is_cheap_to_import() -> None:
    code = (
        "import sys, loopctl_github.plugin; "
        "heavy = [m for m in ('urllib.request', 'http.client', 'loopctl.engine', "
        "'loopctl_github.client', 'loopctl_github.poster', 'loopctl_context_errors.report') "
        "if m in sys.modules]; print(heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
