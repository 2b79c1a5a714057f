"""The reactive model server drives the real Claude Code CLI: a behaviour model answers from the
tool results the CLI really sends back, and the usage the CLI reports is the requests' size."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from loopctl.testing import Project
from loopctl.testing import model_server as ms
from loopctl.testing.behaviours import Fixer
from loopctl.testing.conversation import request_tokens

pytestmark = pytest.mark.e2e


def test_a_fresh_session_repeats_its_failed_change_and_a_resumed_one_moves_on(
    claude_cli: str, pricing_project: tuple[Project, Fixer], tmp_path: Path
) -> None:
    project, fixer = pricing_project
    with ms.ScriptedModelServer(behaviour=fixer, measured_usage=True) as server:
        env = {"PATH": os.environ["PATH"], **server.cli_env(tmp_path / "home")}

        def claude(*extra: str) -> dict[str, object]:
            argv = [claude_cli, "-p", "Make the tests pass.", *extra, "--output-format", "json"]
            argv += ["--permission-mode", "bypassPermissions"]
            done = subprocess.run(
                argv, cwd=project.path, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr
            result: dict[str, object] = json.loads(done.stdout)
            return result

        first = claude()
        after_first = len(server.main_requests)
        again = claude()  # fresh: finds its own change in place and stops there
        after_again = len(server.main_requests)
        assert "return float(round(sum(prices)))" in project.read("pricing.py")
        # the first session, resumed, remembers that change failing: it takes the next idea
        continued = claude("--resume", str(first["session_id"]))
        main = server.main_requests
        totals = server.usage_totals()
        errors = server.behaviour_errors
    assert errors == []
    assert "still fails: AssertionError: 17.0 != 16.99" in str(first["result"])
    assert "already has" in str(again["result"])
    assert continued["result"] == "Fixed: the tests pass now."
    assert "return round(sum(prices), 2)" in project.read("pricing.py")
    # each request's usage is its own size: the CLI reports what the server measured
    assert [r.usage["input_tokens"] for r in main] == [request_tokens(r.body) for r in main]
    reported = sum(
        int(run["usage"]["input_tokens"])  # type: ignore[index]
        for run in (first, again, continued)
    )
    assert reported == totals["input_tokens"]
    # the resumed session sends its whole history: each of its requests is bigger than any of
    # the fresh session's, which starts from the prompt alone
    fresh = [r.usage["input_tokens"] for r in main[after_first:after_again]]
    resumed = [r.usage["input_tokens"] for r in main[after_again:]]
    assert min(resumed) > max(fresh)
