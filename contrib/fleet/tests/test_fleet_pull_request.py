"""A pull request for a completed task's branch, against a fake GitHub on 127.0.0.1: opened
with the worker's token, based on the task's branch (or the repository's default), and a
refusal that never undoes the task nor shows the token. A result with a pull request lands
through it: the tested commit becomes its head and the base's tip at once, and a pull request
that is closed, pushed to or unreadable lands nothing."""

from __future__ import annotations

import asyncio
import json
import shlex
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fleet_testkit import run_git, with_fleet
from temporalio.client import Client
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from loopctl_fleet.activities import FleetActivities
from loopctl_fleet.cli import submit_task
from loopctl_fleet.lander import LANDED, LandOutcome, LandRequest, PullRequestRef
from loopctl_fleet.landing import FleetLanding, land_rows
from loopctl_fleet.model import LoopInput
from loopctl_fleet.pullrequest import PullRequestError, open_pull_request, repository_of
from loopctl_fleet.status import TaskRow, list_rows
from loopctl_fleet.taskfile import LandOptions, TaskSpec

TOKEN = "ghp_" + "T" * 36


class FakeGitHub:
    """GitHub's REST API for one repository, org/app, on 127.0.0.1. Its pull requests
    (``pulls``: number → head and base branch, state) are read from ``bare`` as GitHub does:
    the head's commit, and merged once that commit is on the base (GitHub marks a pull request
    merged when its head reaches its base by a push). ``refuse``: answer POST with 422;
    ``refuse_status``: answer every pull request request with it, the token echoed in the body
    (no GitHub does, but a message must not show it even so)."""

    def __init__(self, bare: Path | None = None) -> None:
        self.requests: list[tuple[str, str, dict[str, Any], str]] = []
        self.refuse = False
        self.refuse_status: int | None = None
        self.bare = bare
        self.pulls: dict[int, dict[str, Any]] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def _reply(self, status: int, data: Any) -> None:
                body = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _record(self, data: dict[str, Any]) -> None:
                auth = self.headers.get("Authorization", "")
                fake.requests.append((self.command, self.path, data, auth))

            def do_GET(self) -> None:
                self._record({})
                path = urlsplit(self.path)
                if path.path == "/repos/org/app":
                    self._reply(200, {"default_branch": "main"})
                elif fake.refuse_status is not None:
                    said = f"refused {self.headers.get('Authorization')}"
                    self._reply(fake.refuse_status, {"message": said})
                elif path.path == "/repos/org/app/pulls":
                    [head] = parse_qs(path.query)["head"]
                    pulls = [fake.pull(n) for n in fake.pulls]
                    self._reply(200, [p for p in pulls if f"org:{p['head']['ref']}" == head])
                elif (number := int(path.path.rpartition("/")[2])) in fake.pulls:
                    self._reply(200, fake.pull(number))
                else:
                    self._reply(404, {"message": "Not Found"})

            def do_PUT(self) -> None:  # the merge API: never used, refused if it were
                self._record(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self._reply(405, {"message": "Pull Request is not mergeable"})

            def do_POST(self) -> None:
                self._record(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                data = fake.requests[-1][2]
                if fake.refuse:
                    self._reply(
                        422, {"message": "Validation Failed", "errors": [{"message": "No commits"}]}
                    )
                elif fake.bare is None:
                    self._reply(201, {"html_url": "https://github.com/org/app/pull/7", "number": 7})
                else:
                    fake.pulls[7] = {"head": data["head"], "base": data["base"], "state": "open"}
                    self._reply(201, fake.pull(7))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def pull(self, number: int) -> dict[str, Any]:
        pull = self.pulls[number]
        assert self.bare is not None
        head = _tip(self.bare, pull["head"])
        if head and pull["state"] == "open" and _tip(self.bare, pull["base"]):
            on_base = subprocess.run(
                ["git", "merge-base", "--is-ancestor", head, pull["base"]], cwd=self.bare
            )
            if on_base.returncode == 0:
                pull.update(state="closed", merged=True)
        return {
            "number": number,
            "html_url": f"https://github.com/org/app/pull/{number}",
            "state": pull["state"],
            "merged": pull.get("merged", False),
            "head": {"ref": pull["head"], "sha": head},
            "base": {"ref": pull["base"]},
        }


def _tip(bare: Path, branch: str) -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
        cwd=bare, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout.strip()


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
    opened = open_pull_request(spec, "body", env)
    assert (opened.url, opened.number) == ("https://github.com/org/app/pull/7", 7)
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
    assert (result.pull_request, result.pull_request_number) == (
        "https://github.com/org/app/pull/7",
        7,
    )
    assert run_git("rev-parse", "loopctl/t1", cwd=bare).strip() == result.commit
    [(_, path, data, _)] = github.requests
    assert path == "/repos/org/app/pulls"
    assert data["head"] == "loopctl/t1"
    assert "task `t1`" in data["body"]


GITHUB_URL = "https://github.com/org/app.git"


@pytest.fixture
def on_github(tmp_path: Path, bare: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """``bare`` as org/app on GitHub: git reads the GitHub URL as it, the API is the fake one;
    the worker has the token."""
    config = tmp_path / "gitconfig"
    config.write_text(f'[url "{bare}"]\n\tinsteadOf = {GITHUB_URL}\n')
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    fake = FakeGitHub(bare)
    monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
    monkeypatch.setenv("GITHUB_API_URL", fake.url)
    yield fake
    fake.server.shutdown()
    fake.server.server_close()


def result_with_pull_request(tmp_path: Path, bare: Path, github: FakeGitHub) -> tuple[str, str]:
    """Task t1's result on ``loopctl/t1`` (f.txt fixed) with pull request #7 into main, and
    main moved on since (another file): the result and main's tip."""
    work = tmp_path / "clone"
    run_git("clone", "-q", str(bare), str(work), cwd=tmp_path)
    who = ("-c", "user.name=t", "-c", "user.email=t@t")
    (work / "f.txt").write_text("fixed\n")
    run_git(*who, "commit", "-qam", "Fix f.txt", cwd=work)
    run_git("push", "-q", "origin", "HEAD:refs/heads/loopctl/t1", cwd=work)
    result = run_git("rev-parse", "HEAD", cwd=work).strip()
    run_git("reset", "-q", "--hard", "HEAD^", cwd=work)
    (work / "g.txt").write_text("meanwhile\n")
    run_git("add", "g.txt", cwd=work)
    run_git(*who, "commit", "-qm", "Meanwhile on main", cwd=work)
    run_git("push", "-q", "origin", "HEAD:main", cwd=work)
    github.pulls[7] = {"head": "loopctl/t1", "base": "main", "state": "open"}
    return result, run_git("rev-parse", "HEAD", cwd=work).strip()


def land_request(tmp_path: Path, commit: str, number: int = 7, test: str = "") -> LandRequest:
    """Landing t1's ``commit`` through its pull request ``number`` (0: found by its head); its
    test command notes each commit it runs on in ``tested``, runs ``test``, then the tests."""
    check = f"git rev-parse HEAD >> {tmp_path / 'tested'}; {test}\nsh check.sh"
    spec = TaskSpec("t1", GITHUB_URL, "main", "Fix f.txt", {"test_cmd": check}, pr=True)
    through = PullRequestRef("loopctl/t1", commit, number)
    return LandRequest("t1", "wf-t1", spec.goal, spec, commit, pull_request=through)


def land(tmp_path: Path, request: LandRequest) -> LandOutcome:
    landing = FleetLanding(tmp_path / "home", "w1", heartbeat_s=0.05)
    outcome: LandOutcome = asyncio.run(ActivityEnvironment().run(landing.land_result, request))
    return outcome


@pytest.mark.parametrize("number", [7, 0])
def test_a_result_with_a_pull_request_lands_through_it_as_the_commit_tested(
    tmp_path: Path, bare: Path, on_github: FakeGitHub, number: int
) -> None:
    result, tip = result_with_pull_request(tmp_path, bare, on_github)
    outcome = land(tmp_path, land_request(tmp_path, result, number))
    assert outcome.state == LANDED, outcome.reason
    landed = outcome.commit
    assert landed is not None
    assert (tmp_path / "tested").read_text().split() == [landed]  # tested: exactly what landed
    assert _tip(bare, "main") == landed == _tip(bare, "loopctl/t1")
    assert run_git("rev-parse", f"{landed}^", cwd=bare).strip() == tip  # rebased on main's tip
    assert on_github.pull(7)["merged"]
    assert outcome.reason.endswith("pull request #7 merged")
    assert "PUT" not in {method for method, *_ in on_github.requests}  # never the merge API
    assert {auth for *_, auth in on_github.requests} == {f"Bearer {TOKEN}"}
    assert TOKEN not in outcome.reason


def _closed(github: FakeGitHub, bare: Path, result: str) -> str:
    github.pulls[7]["state"] = "closed"
    return ""


def _forbidden(github: FakeGitHub, bare: Path, result: str) -> str:
    github.refuse_status = 403
    return ""


def _down(github: FakeGitHub, bare: Path, result: str) -> str:
    github.refuse_status = 502
    return ""


def _someone_pushes(bare: Path, result: str) -> str:
    """A shell command: someone pushes a commit of their own to the pull request's head."""
    git = f"git -C {shlex.quote(str(bare))}"
    made = f"{git} -c user.name=s -c user.email=s@s commit-tree {result}^{{tree}} -p {result}"
    return f"{git} update-ref refs/heads/loopctl/t1 $({made} -m someone)"


def _pushed_to(github: FakeGitHub, bare: Path, result: str) -> str:
    subprocess.run(["sh", "-c", _someone_pushes(bare, result)], check=True)
    return ""


def _pushed_to_while_tested(github: FakeGitHub, bare: Path, result: str) -> str:
    return _someone_pushes(bare, result)


@pytest.mark.parametrize(
    ("refusal", "failure_class", "said"),
    [
        (_closed, "repository", "pull request #7 is closed: nothing landed"),
        (_forbidden, "auth", "GitHub said 403 to GET /repos/org/app/pulls/7"),
        (_down, "infrastructure", "GitHub said 502"),
        (_pushed_to, "repository", "someone pushed to pull request #7; nothing landed"),
        (_pushed_to_while_tested, "repository", "someone pushed to pull request #7"),
    ],
)
def test_a_pull_request_that_refuses_the_landing_lands_nothing_and_says_why(
    tmp_path: Path,
    bare: Path,
    on_github: FakeGitHub,
    refusal: Any,
    failure_class: str,
    said: str,
) -> None:
    result, tip = result_with_pull_request(tmp_path, bare, on_github)
    test = refusal(on_github, bare, result)
    with pytest.raises(ApplicationError) as caught:
        land(tmp_path, land_request(tmp_path, result, test=test))
    assert caught.value.type == failure_class
    assert said in caught.value.message
    assert TOKEN not in caught.value.message
    assert _tip(bare, "main") == tip  # nothing landed: main, and the pull request's head, as
    head = run_git("log", "-1", "--format=%H %s", "loopctl/t1", cwd=bare).split()  # they were
    assert head[:2] == ([head[0], "someone"] if "pushed" in refusal.__name__ else [result, "Fix"])


async def until(client: Client, fleet: str, done: Callable[[TaskRow], bool]) -> TaskRow:
    """The fleet's task once ``done`` holds for it (it never fails meanwhile)."""
    while True:
        for row in await list_rows(client, fleet):  # none until the server lists it
            if done(row):
                return row
            assert row.closed is None or row.state in ("complete", "landing"), row.reason
        await asyncio.sleep(0.1)  # a poll of the server's state: what the test waits for


@pytest.mark.temporal
@pytest.mark.parametrize("later", [False, True], ids=["land-at-submit", "fleet-land"])
def test_a_task_with_pr_and_land_opens_its_pull_request_and_lands_through_it(
    tmp_path: Path, bare: Path, on_github: FakeGitHub, later: bool
) -> None:
    agent = f"sh -c {shlex.quote('cat >/dev/null; echo fixed > f.txt')}"
    settings = {"agent_cmd": agent, "test_cmd": "sh check.sh", "limits": {"max_iterations": 2}}
    land = None if later else LandOptions()
    task = TaskSpec("t1", GITHUB_URL, "main", "Fix f.txt", settings, pr=True, land=land)

    async def body(client: Client, queue: str) -> TaskRow:
        fleet = queue.removeprefix("loopctl-")
        line, ok = await submit_task(client, fleet, task, 5.0)
        assert ok, line
        if later:  # `fleet land`: the pull request is found by its head branch
            await until(client, fleet, lambda row: row.closed is not None)
            queued, refused = await land_rows(client, fleet, ["t1"], {})
            assert (len(queued), refused) == (1, [])
        return await until(client, fleet, lambda row: row.state in ("landed", "not landed"))

    row = with_fleet(tmp_path, body)
    assert row.state == "landed", row.reason
    assert row.reason.endswith("pull request #7 merged")
    assert row.land is not None
    assert _tip(bare, "main") == row.land["commit"] == _tip(bare, "loopctl/t1") == row.commit
    assert on_github.pull(7)["merged"]
    methods = [method for method, *_ in on_github.requests]
    assert methods[0] == "POST"
    assert set(methods[1:]) == {"GET"}  # read, then read back merged: never the merge API
