"""The reactive Responses API server drives the real Codex CLI with the same behaviour models as
Claude Code: Codex runs the commands the behaviour's tools become, and the behaviour reads their
results back as its own Read / Edit / Bash calls."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from loopctl.testing import Project
from loopctl.testing.behaviours import Fixer
from loopctl.testing.conversation import request_tokens
from loopctl.testing.responses_server import ResponsesModelServer, as_messages

pytestmark = pytest.mark.e2e


def test_a_fresh_codex_session_repeats_its_failed_change_and_a_resumed_one_moves_on(
    codex_cli: str, pricing_project: tuple[Project, Fixer], tmp_path: Path
) -> None:
    project, fixer = pricing_project
    with ResponsesModelServer(behaviour=fixer, measured_usage=True) as server:
        env = {"PATH": os.environ["PATH"], **server.cli_env(tmp_path / "home")}

        def codex(*resume: str) -> tuple[str, str]:
            argv = [codex_cli, "exec", *resume, "--skip-git-repo-check"]
            argv += ["--dangerously-bypass-approvals-and-sandbox", "Make the tests pass."]
            done = subprocess.run(
                argv, cwd=project.path, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr
            session = re.search(r"^session id: (\S+)$", done.stderr, re.MULTILINE)
            return done.stdout, session.group(1) if session else ""

        first, session = codex()
        assert "still fails: AssertionError: 17.0 != 16.99" in first
        assert "return float(round(sum(prices)))" in project.read("pricing.py")
        again, _ = codex()  # fresh: finds its own change in place and stops there
        assert "already has" in again
        # the first session, resumed, remembers that change failing: it takes the next idea
        continued, _ = codex("resume", session)
        main = server.main_requests
        errors = server.behaviour_errors
        made = server.made_calls()
    assert errors == []
    assert "Fixed: the tests pass now." in continued
    assert "return round(sum(prices), 2)" in project.read("pricing.py")
    # each request is billed its own size, read the same way the behaviour read it
    assert [r.usage["input_tokens"] for r in main] == [
        request_tokens(as_messages(r.body, made)) for r in main
    ]
