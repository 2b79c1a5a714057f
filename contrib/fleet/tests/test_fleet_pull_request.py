"""A pull request for a completed task's branch, against a fake GitHub on 127.0.0.1: opened
with the worker's token, based on the task's branch (or the repository's default), and a
refusal that never undoes the task nor shows the token."""

from __future__ import annotations

import asyncio
import json
import shlex
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from fleet_testkit import run_git
from temporalio.testing import ActivityEnvironment

from loopctl_fleet.activities import FleetActivities
from loopctl_fleet.model import LoopInput
from loopctl_fleet.pullrequest import PullRequestError, open_pull_request, repository_of
from loopctl_fleet.taskfile import TaskSpec

TOKEN = "ghp_" + "T" * 36


class FakeGitHub:
    def __init__(self) -> None:
        self.requests: list[tuple[str, str, dict[str, Any], str]] = []
        self.refuse = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _reply(self, status: int, data: dict[str, Any]) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.requests.append(("GET", self.path, {}, self.headers.get("Authorization", "")))
                self._reply(200, {"default_branch": "main"})

            def do_POST(self) -> None:
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(
                    ("POST", self.path, data, self.headers.get("Authorization", ""))
                )
                if fake.refuse:
                    self._reply(
                        422, {"message": "Validation Failed", "errors": [{"message": "No commits"}]}
                    )
                else:
                    self._reply(201, {"html_url": "https://github.com/org/app/pull/7", "number": 7})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://github.com/org/app.git", "org/app"),
        ("https://github.com/org/app", "org/app"),
        ("git@github.com:org/app.git", "org/app"),
        ("ssh://git@github.com/org/app.git", "org/app"),
        ("https://ghe.example.com/team/tool.git", "team/tool"),  # GITHUB_SERVER_URL's host
    ],
)
def test_the_repository_comes_from_the_tasks_url(url: str, expected: str) -> None:
    assert repository_of(url, {"GITHUB_SERVER_URL": "https://ghe.example.com"}) == expected


@pytest.mark.parametrize(
    "url", ["/srv/app.git", "https://gitlab.com/org/app.git", "https://github.com/org"]
)
def test_a_repository_not_on_github_gets_no_pull_request(url: str) -> None:
    with pytest.raises(PullRequestError, match="not a GitHub repository URL"):
        repository_of(url, {})


def test_a_pull_request_is_opened_on_the_task_branch(github: FakeGitHub) -> None:
    spec = TaskSpec("t1", "https://github.com/org/app.git", "HEAD", "Fix the parser\nmore", pr=True)
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.url}
    assert open_pull_request(spec, "body", env) == "https://github.com/org/app/pull/7"
    (get, _, _, auth), (post, path, data, _) = github.requests
    assert (get, auth) == ("GET", f"Bearer {TOKEN}")  # HEAD: the default branch is asked for
    assert (post, path) == ("POST", "/repos/org/app/pulls")
    assert data == {"title": "Fix the parser", "head": "loopctl/t1", "base": "main", "body": "body"}


def test_a_refusal_says_why_without_the_token(github: FakeGitHub) -> None:
    github.refuse = True
    spec = TaskSpec("t1", "https://github.com/org/app.git", "release", "g", pr=True)
    with pytest.raises(PullRequestError) as caught:
        open_pull_request(spec, "b", {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": github.url})
    assert "GitHub said 422" in str(caught.value)
    assert "No commits" in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert github.requests[0][2]["base"] == "release"  # a branch base is used as it is


def test_no_token_no_request(github: FakeGitHub) -> None:
    spec = TaskSpec("t1", "https://github.com/org/app.git", "main", "g", pr=True)
    with pytest.raises(PullRequestError, match=r"\$GITHUB_TOKEN is not set"):
        open_pull_request(spec, "b", {"GITHUB_API_URL": github.url})
    assert github.requests == []


def test_a_completed_task_with_pr_opens_one_after_its_push(
    tmp_path: Path, bare: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    # git reads the GitHub URL as the local bare repository; the API is the fake one
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "{bare}"]\n\tinsteadOf = https://github.com/org/app.git\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", github.url)
    agent = f"sh -c {shlex.quote('cat >/dev/null; echo fixed > f.txt')}"
    spec = TaskSpec(
        "t1", "https://github.com/org/app.git", "main", "Fix f.txt",
        {"agent_cmd": agent, "test_cmd": "sh check.sh"}, pr=True,
    )  # fmt: skip
    acts = FleetActivities(tmp_path / "home", "w1", heartbeat_s=0.05)
    sha = run_git("rev-parse", "main", cwd=bare).strip()
    result = asyncio.run(ActivityEnvironment().run(acts.run_loop, LoopInput(spec, sha)))
    assert result.status == "complete"
    assert result.pull_request == "https://github.com/org/app/pull/7"
    assert run_git("rev-parse", "loopctl/t1", cwd=bare).strip() == result.commit
    [(_, path, data, _)] = github.requests
    assert path == "/repos/org/app/pulls"
    assert data["head"] == "loopctl/t1"
    assert "task `t1`" in data["body"]
