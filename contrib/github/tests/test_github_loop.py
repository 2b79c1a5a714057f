"""loopctl-github in real loops (loopctl.testing.run_loop, the scripted agent, a real failing test)
with loopctl-context-errors making the reports, against the fake GitHub API on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from github_testkit import (
    FIX_ADD,
    ISSUE,
    OWNER,
    REPO,
    SAY,
    FakeGitHub,
    Fault,
    calc_project,
    closed_port,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loopctl_context_errors.plugin as context_errors
import loopctl_github.plugin as github_plugin
from loopctl import Event, hookimpl
from loopctl.testing import RunResult, run_loop
from loopctl_context_errors import CONTEXT_GENERATED
from loopctl_github import DISABLED, FAILED, POSTED
from loopctl_github.comment import default_key, marker
from loopctl_github.runtime import STATE_KEY

PLUGINS = {"context-errors": context_errors, "github": github_plugin}
GOAL = "make the tests pass"


def loop_config(api_url: str, **github: Any) -> dict[str, Any]:
    section = {"repository": f"{OWNER}/{REPO}", "issue": ISSUE, "api_url": api_url}
    section.update({"timeout_s": 2.0, "flush_timeout_s": 10.0})
    section.update(github)
    return {"plugins": {"context-errors": {"memory": False}, "github": section}}


def run(path: Path, turns: list[list[dict[str, Any]]], api_url: str, **kw: Any) -> RunResult:
    extra = kw.pop("config", {})
    config = loop_config(api_url, **kw)
    config.update(extra)
    return run_loop(calc_project(path), GOAL, turns=turns, plugins=PLUGINS, config=config)


def posted(result: RunResult) -> list[dict[str, Any]]:
    return result.events_of(POSTED)


@pytest.mark.slow
def test_one_comment_created_then_updated_then_marked_resolved(
    tmp_path: Path, github: FakeGitHub
) -> None:
    result = run(tmp_path / "p", [[SAY], [SAY], [FIX_ADD]], github.api_url)

    assert result.status == "complete"
    assert github.violations == []
    assert len(result.events_of(CONTEXT_GENERATED)) == 3  # before the first turn, after 1, 2
    # one search, one comment created, every later report an update of it
    assert github.methods()[:2] == ["GET", "POST"]
    assert github.methods().count("POST") == 1
    assert github.methods().count("GET") == 1
    assert set(github.methods()[2:]) == {"PATCH"}
    events = posted(result)
    assert [e["action"] for e in events] == ["created"] + ["updated"] * (len(events) - 1)
    comment_id = events[0]["comment_id"]
    assert all(e["comment_id"] == comment_id for e in events)
    assert events[-1]["state"] == "resolved"
    assert events[0]["url"].endswith(f"#issuecomment-{comment_id}")
    assert all(r.path.endswith(f"/comments/{comment_id}") for r in github.of("PATCH"))

    # the final state on GitHub: resolved, the last report collapsed, the marker first
    assert list(github.comments) == [comment_id]
    body = github.comments[comment_id]["body"]
    assert body.startswith(marker(default_key(GOAL)))
    assert "resolved — the tests pass" in body
    assert "<details><summary>Last failure report (iteration 2, ASSERTION_FAILURE" in body
    assert "AssertionError: -1 != 5" in body
    assert "completed at iteration 3" in body
    first = github.of("POST")[0].body["body"]
    assert "ASSERTION_FAILURE" in first
    assert "resolved" not in first

    state = result.loop_state().extra[STATE_KEY]
    assert state == {
        "id": comment_id,
        "url": events[-1]["url"],
        "target": f"{OWNER}/{REPO}#{ISSUE}",
    }
    assert "GitHub comment" in (result.state_dir / "report.md").read_text(encoding="utf-8")
    assert not result.events_of(FAILED)
    assert not result.events_of("plugin.error")
    assert_events_match_their_schema(result)


def assert_events_match_their_schema(result: RunResult) -> None:
    """Every github.* line validates against the declared schema, and its view line renders."""
    from loopctl.testing import event_schema
    from loopctl_github.events import event_schemas

    jsonschema = pytest.importorskip("jsonschema")
    declared = event_schemas()
    validator = jsonschema.Draft202012Validator(event_schema(declared))
    mine = [e for e in result.events if e["type"].startswith("github.")]
    assert mine
    for line in mine:
        assert list(validator.iter_errors(line)) == [], line
        spec = declared[line["type"]]
        assert set(spec["required"]) <= set(line)
        assert set(line) - {"type", "ts", "iteration"} <= set(spec["properties"])
        spec["line"].format(**line)


@pytest.mark.slow
def test_a_token_withheld_from_the_agent_still_posts(
    tmp_path: Path, github: FakeGitHub, token: str
) -> None:
    """withhold_env keeps the token from the agent and the tests; the plugin reads it in
    loopctl's own process, so the comment is posted all the same."""
    snoop = {"run": "env > agent-env.txt"}
    result = run(
        tmp_path / "p",
        [[SAY, snoop], [FIX_ADD]],
        github.api_url,
        config={"withhold_env": ["GITHUB_TOKEN"]},
    )
    assert result.status == "complete"
    assert [e["state"] for e in posted(result)][-1] == "resolved"
    seen = (tmp_path / "p" / "agent-env.txt").read_text()
    assert "PATH=" in seen
    assert token not in seen


@pytest.mark.slow
def test_posting_never_holds_up_the_loop(tmp_path: Path, github: FakeGitHub) -> None:
    """GitHub answers nothing until iteration 2 has ended: were any hook waiting on it, the
    loop would stall until the server gave up (10 s)."""
    github.hold = threading.Event()
    in_flight_at_release: list[int] = []

    class Releaser:
        @hookimpl
        def on_event(self, event: Event) -> None:
            if event.type == "iteration.end" and event.iteration == 2 and github.hold:
                in_flight_at_release.append(github.arrived)
                github.hold.set()

    result = run_loop(calc_project(tmp_path / "p"), GOAL, turns=[[SAY], [SAY], [FIX_ADD]],
                      plugins={**PLUGINS, "releaser": Releaser()},
                      config=loop_config(github.api_url))  # fmt: skip
    assert result.status == "complete"
    assert in_flight_at_release == [1]  # the first request was waiting the whole time
    assert not github.hold_timed_out
    assert github.violations == []
    assert posted(result)[-1]["state"] == "resolved"  # the end of the loop flushed it


@pytest.mark.slow
def test_the_session_lives_in_the_run_stash_and_ends_with_the_run(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """Per-run state is in ``loop.stash`` (never a module global): present from the first
    iteration on, gone once the loop ended; every iteration's end drains the poster, also an
    iteration whose agent failed."""
    from loopctl_github import runtime

    seen: list[tuple[str, bool]] = []

    class Spy:
        @hookimpl(trylast=True)
        def after_iteration(self, loop: Any, record: Any) -> None:
            seen.append((str(record.ending), runtime.SESSION in loop.stash))

        @hookimpl(trylast=True)
        def on_loop_end(self, loop: Any) -> None:
            seen.append(("end", runtime.SESSION in loop.stash))

    result = run_loop(calc_project(tmp_path / "p"), GOAL, turns=[[SAY], [FIX_ADD]],
                      plugins={**PLUGINS, "spy": Spy()},
                      config=loop_config(github.api_url))  # fmt: skip
    assert result.status == "complete"
    assert [has for _, has in seen] == [True, True, False]
    assert not any(name.isupper() and name.startswith("_") for name in vars(runtime))


@pytest.mark.slow
def test_resume_keeps_updating_the_same_comment(tmp_path: Path, github: FakeGitHub) -> None:
    project = calc_project(tmp_path / "p")
    first = run_loop(project, GOAL, turns=[[SAY], [FIX_ADD]], plugins=PLUGINS,
                     config={**loop_config(github.api_url), "limits": {"max_iterations": 1}})  # fmt: skip
    assert first.status == "max_iterations"
    comment_id = posted(first)[0]["comment_id"]
    assert "stopped (max_iterations)" in github.comments[comment_id]["body"]
    before = len(github.requests)

    second = run_loop(project, GOAL, turns=[[SAY], [FIX_ADD]], plugins=PLUGINS, resume=True,
                      config={**loop_config(github.api_url), "limits": {"max_iterations": 3}})  # fmt: skip
    assert second.status == "complete"
    assert github.violations == []
    after = github.requests[before:]
    assert [r.method for r in after] == ["PATCH"]  # no search, no new comment
    assert after[0].path.endswith(f"/comments/{comment_id}")
    assert list(github.comments) == [comment_id]
    body = github.comments[comment_id]["body"]
    assert "resolved — the tests pass" in body
    # the report of iteration 1 came from the first process, through the state directory
    assert "Last failure report (iteration 1, ASSERTION_FAILURE" in body


@pytest.mark.slow
def test_a_new_run_updates_the_comment_an_earlier_run_left(
    tmp_path: Path, github: FakeGitHub
) -> None:
    github.page_size = 2  # the marker comment is on page 3: pagination is followed
    for n in range(4):
        github.seed(
            f"an unrelated comment {n}\n<!-- loopctl:context-errors key={default_key(GOAL)} -->"
        )
    github.seed(marker("someone-elses-loop") + "\nnot ours")
    ours = github.seed(marker(default_key(GOAL)) + "\nan old report")

    result = run(tmp_path / "p", [[SAY], [FIX_ADD]], github.api_url)
    assert result.status == "complete"
    assert github.violations == []
    gets = github.of("GET")
    assert [g.query.get("page", ["1"])[0] for g in gets] == ["1", "2", "3"]
    assert "POST" not in github.methods()
    assert {e["comment_id"] for e in posted(result)} == {ours}
    assert "resolved" in github.comments[ours]["body"]
    assert github.comments[ours - 1]["body"].endswith("not ours")

    # update_existing = false: a fresh run starts its own comment
    again = run(tmp_path / "q", [[SAY], [FIX_ADD]], github.api_url, update_existing=False)
    assert posted(again)[0]["action"] == "created"
    assert posted(again)[-1]["state"] == "resolved"
    assert posted(again)[0]["comment_id"] != ours


def test_a_clean_run_marks_an_earlier_comment_passed_and_posts_nothing_new(
    tmp_path: Path, github: FakeGitHub
) -> None:
    ours = github.seed(marker(default_key(GOAL)) + "\nan old failure")
    project = calc_project(tmp_path / "p")
    project.write("calc.py", "def add(a, b):\n    return a + b\n")
    result = run_loop(project, GOAL, turns=[[SAY]], plugins=PLUGINS,
                      config=loop_config(github.api_url))  # fmt: skip
    assert result.status == "complete"
    assert github.methods() == ["GET", "PATCH"]
    assert "the tests pass" in github.comments[ours]["body"]
    assert posted(result)[0]["state"] == "passed"

    github.comments.clear()
    clean = run_loop(
        project, GOAL, turns=[[SAY]], plugins=PLUGINS, config=loop_config(github.api_url)
    )
    assert clean.status == "complete"
    assert github.comments == {}  # nothing failed: no comment


@pytest.mark.slow
def test_a_deleted_comment_is_created_again(tmp_path: Path, github: FakeGitHub) -> None:
    github.delete_after_create = 1  # someone deletes the first comment at once
    result = run(tmp_path / "p", [[SAY], [SAY], [FIX_ADD]], github.api_url)

    assert result.status == "complete"
    assert github.violations == []
    assert github.methods().count("POST") == 2
    recreated = [e for e in posted(result) if e["recreated"]]
    assert len(recreated) == 1
    assert recreated[0]["action"] == "created"
    assert len(github.comments) == 1
    (survivor,) = github.comments.values()
    assert "resolved" in survivor["body"]
    assert result.loop_state().extra[STATE_KEY]["id"] == survivor["id"]


@pytest.mark.slow
def test_server_errors_are_retried(tmp_path: Path, github: FakeGitHub) -> None:
    github.faults.append(Fault("POST", 502, {"message": "Server Error"}, times=1))
    result = run(tmp_path / "p", [[SAY], [FIX_ADD]], github.api_url)
    assert result.status == "complete"
    assert github.violations == []
    assert github.methods()[:3] == ["GET", "POST", "POST"]
    created = posted(result)[0]
    assert created["action"] == "created"
    assert created["attempts"] == 3  # the search, the 502, the retry
    assert len(github.comments) == 1
    assert not result.events_of(FAILED)


@pytest.mark.slow
def test_a_rejected_token_stops_posting_and_the_loop_goes_on(
    tmp_path: Path, github: FakeGitHub, token: str, capfd: pytest.CaptureFixture[str]
) -> None:
    echo = {"message": f"Bad credentials for Bearer {token}", "token": token}
    github.faults.append(Fault("*", 401, echo, times=50))
    result = run(tmp_path / "p", [[SAY], [SAY], [FIX_ADD]], github.api_url)

    assert result.status == "complete"
    assert github.methods() == ["GET"]  # one try; nothing more this run
    (failed,) = result.events_of(FAILED)
    assert failed["reason"] == "unauthorized"
    assert failed["status"] == 401
    assert failed["stopped"] is True
    assert "$GITHUB_TOKEN" in failed["message"]
    assert "Bad credentials" in failed["message"]
    assert_events_match_their_schema(result)
    assert_token_absent(token, result, capfd)


@pytest.mark.slow
def test_server_down_the_loop_completes_and_says_so_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)
    api = f"http://127.0.0.1:{closed_port()}"
    result = run(tmp_path / "p", [[SAY], [SAY], [FIX_ADD]], api, retries=1, timeout_s=0.5)
    assert result.status == "complete"
    failed = result.events_of(FAILED)
    assert [f["reason"] for f in failed] == ["network"]  # reported once, not per iteration
    assert "cannot reach http://127.0.0.1" in failed[0]["message"]
    assert not posted(result)
    assert not result.events_of("plugin.error")


@pytest.mark.slow
def test_missing_settings_one_clear_warning_then_quiet(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_TOKEN")
    result = run(tmp_path / "p", [[SAY], [FIX_ADD]], github.api_url, repository="", issue=0)
    assert result.status == "complete"
    (disabled,) = result.events_of(DISABLED)
    assert disabled["missing"] == ["repository", "issue", "token"]
    for words in ("repository", "GITHUB_REPOSITORY", "issue", "$GITHUB_TOKEN"):
        assert words in disabled["message"]
    warnings = [w["message"] for w in result.events_of("loop.warning")]
    assert warnings == [disabled["message"]]
    assert github.requests == []
    assert_events_match_their_schema(result)


def test_github_actions_variables_are_enough(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_REPOSITORY", f"{OWNER}/{REPO}")
    monkeypatch.setenv("GITHUB_API_URL", github.api_url)
    monkeypatch.setenv("GITHUB_REF", f"refs/pull/{ISSUE}/merge")
    result = run_loop(calc_project(tmp_path / "p"), GOAL, turns=[[SAY], [FIX_ADD]], plugins=PLUGINS,
                      config={"plugins": {"context-errors": {"memory": False}}})  # fmt: skip
    assert result.status == "complete"
    assert github.violations == []
    assert posted(result)[0]["action"] == "created"
    assert posted(result)[-1]["state"] == "resolved"
    (body,) = github.bodies()
    assert "Last failure report (iteration 1, ASSERTION_FAILURE" in body


def test_without_context_errors_it_says_there_is_nothing_to_post(
    tmp_path: Path, github: FakeGitHub
) -> None:
    result = run_loop(calc_project(tmp_path / "p"), GOAL, turns=[[SAY], [FIX_ADD]],
                      plugins={"github": github_plugin},
                      config={"plugins": {"github": {"repository": "a/b", "issue": 1}}})  # fmt: skip
    assert result.status == "complete"
    (disabled,) = result.events_of(DISABLED)
    assert disabled["reason"] == "no_reports"
    assert "context-errors" in disabled["message"]
    assert github.requests == []


@pytest.mark.parametrize(
    ("section", "key", "words"),
    [
        ({"repository": "not a repo"}, "repository", "owner/name"),
        ({"issue": -3}, "issue", "number"),
        ({"issue": "seven"}, "issue", "int"),
        ({"api_url": "http://api.example.com"}, "api_url", "https"),
        ({"api_url": "https://user:pw@example.com"}, "api_url", "credentials"),
        ({"token_env": "NOT-A-NAME"}, "token_env", "environment variable"),
        ({"timeout_s": 0}, "timeout_s", "more than 0"),
        ({"comment_key": "a b -->"}, "comment_key", "letters"),
        ({"retries": 11}, "retries", "between 0 and 10"),
        ({"flush_timeout_s": 0}, "flush_timeout_s", "more than 0"),
        ({"update_existing": "yes"}, "update_existing", "bool"),
    ],
)
def test_config_errors_name_the_key(
    tmp_path: Path, section: dict[str, Any], key: str, words: str
) -> None:
    from loopctl import ConfigError

    with pytest.raises(ConfigError) as caught:
        run_loop(calc_project(tmp_path / "p"), GOAL, turns=[[SAY]], plugins=PLUGINS,
                 config={"plugins": {"github": section}})  # fmt: skip
    message = str(caught.value)
    assert f"plugins.github.{key}" in message
    assert words in message


def test_a_token_in_the_config_file_is_refused_without_echoing_it(tmp_path: Path) -> None:
    from loopctl import ConfigError

    secret = "ghp_" + "S3cr3t" * 6
    with pytest.raises(ConfigError) as caught:
        run_loop(calc_project(tmp_path / "p"), GOAL, turns=[[SAY]], plugins=PLUGINS,
                 config={"plugins": {"github": {"token": secret}}})  # fmt: skip
    assert "plugins.github: unknown key 'token'" in str(caught.value)
    assert secret not in str(caught.value)


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    token=st.from_regex(r"(ghp_|github_pat_|)[A-Za-z0-9_]{24,48}", fullmatch=True),
    reject=st.booleans(),
)
def test_a_generated_token_never_leaks_from_a_real_loop(
    tmp_path_factory: pytest.TempPathFactory,
    capfd: pytest.CaptureFixture[str],
    token: str,
    reject: bool,
) -> None:
    server = FakeGitHub(token).start()
    try:
        if reject:  # 401 with the token echoed back in the body and a header
            echo = {"message": f"Bad credentials: {token}", "documentation_url": token}
            server.faults.append(Fault("*", 401, echo, {"X-Echo": token}, times=50))
        with pytest.MonkeyPatch.context() as env:
            env.setenv("GITHUB_TOKEN", token)
            result = run(tmp_path_factory.mktemp("leak") / "p", [[SAY], [FIX_ADD]], server.api_url)
        assert result.status == "complete"
        assert server.violations == []
        kinds = [e["type"] for e in result.events if e["type"].startswith("github.")]
        if reject:
            assert kinds == [FAILED]
        else:  # created (and updated, unless the end of the loop overtook the first report)
            assert set(kinds) == {POSTED}
        assert_token_absent(token, result, capfd)
        assert all(token not in r.raw for r in server.requests)
    finally:
        server.stop()


def assert_token_absent(token: str, result: RunResult, capfd: pytest.CaptureFixture[str]) -> None:
    out, err = capfd.readouterr()
    assert token not in out
    assert token not in err
    for path in result.state_dir.rglob("*"):
        if path.is_file():
            assert token not in path.read_text(encoding="utf-8", errors="replace"), path
    assert token not in json.dumps([e.to_json() for e in result.live_events])
