"""Re-record the aider transcripts in this directory with the real aider CLI.

Usage: ``python record.py /path/to/aider [NAME ...]`` (all scenarios when no NAME is given).

Model requests go to the scripted Chat Completions API in ``tests/fake_chat_api.py`` on
127.0.0.1 (``--openai-api-base``); what aider prints is its own. Each scenario writes
``NAME.txt`` (stdout, verbatim), ``NAME.meta.json`` (exit code, stderr tail, CLI version) and,
where aider wrote one, ``NAME.analytics.jsonl`` (its ``--analytics-log``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # core/tests, for fake_chat_api

from fake_chat_api import ChatReply, error, serve  # noqa: E402

MODEL = "openai/gpt-4o"
EDIT = (
    "I will fix the add function.\n\ncalc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n"
    "=======\n    return a + b\n>>>>>>> REPLACE\n```\n"
)
BAD_EDIT = (
    "calc.py\n```python\n<<<<<<< SEARCH\n    return a * b\n=======\n    return a + b\n"
    ">>>>>>> REPLACE\n```\n"
)
SCENARIOS: dict[str, dict[str, Any]] = {
    "success_edit": {"replies": [ChatReply(EDIT, 1500, 60)]},
    "success_edit_no_analytics": {"replies": [ChatReply(EDIT, 1500, 60)], "analytics": False},
    "failed_match_then_fixed": {
        "replies": [ChatReply(BAD_EDIT, 1500, 40), ChatReply(EDIT, 2300, 60)],
    },
    "auth_401": {
        "replies": [error(401, "invalid_api_key", "Incorrect API key provided: sk-fake.")],
        "repeat": True,
    },
    "context_overflow": {
        "replies": [
            error(
                400,
                "context_length_exceeded",
                "This model's maximum context length is 128000 tokens. However, your messages "
                "resulted in 130512 tokens. Please reduce the length of the messages.",
            )
        ],
        "repeat": True,
    },
    "quota_exceeded": {
        "replies": [
            error(
                429,
                "insufficient_quota",
                "You exceeded your current quota, please check your plan and billing details.",
            )
        ],
        "repeat": True,
        "kill_after_s": 100.0,
    },
}


def version(aider: str) -> str:
    done = subprocess.run([aider, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def record(aider: str, name: str) -> None:
    spec = SCENARIOS[name]
    # one scratch directory for the project, aider's home and its analytics log, removed after
    with tempfile.TemporaryDirectory(prefix="aider-record-") as scratch:
        _record(aider, name, spec, Path(scratch))


def _record(aider: str, name: str, spec: dict[str, Any], scratch: Path) -> None:
    workdir = scratch / "work"
    workdir.mkdir()
    (workdir / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git = ["git", "-C", str(workdir), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "init"], check=True)
    analytics = scratch / "analytics.jsonl"
    replies: list[ChatReply] = spec["replies"]
    with serve(replies, replies[-1] if spec.get("repeat") else None) as server:
        home = scratch / "home"
        home.mkdir()
        env = dict(os.environ, HOME=str(home), OPENAI_API_KEY="sk-fake")
        argv = [aider, "--message", "Fix the failing test.", "--yes-always", "--no-stream"]
        argv += ["--no-pretty", "--no-check-update", "--no-show-model-warnings"]
        argv += ["--model", MODEL, "--openai-api-base", server.base_url, "--no-auto-commits"]
        if spec.get("analytics", True):
            argv += ["--analytics-log", str(analytics)]
        argv.append("calc.py")
        out_path, err_path = HERE / f"{name}.txt", HERE / f"{name}.stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            try:
                exit_code: int | None = proc.wait(timeout=spec.get("kill_after_s", 150.0))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                exit_code = None
    stderr = err_path.read_text(errors="replace")
    err_path.unlink()
    meta: dict[str, Any] = {
        "cli": "aider",
        "cli_version": version(aider),
        "model": MODEL,
        "exit_code": exit_code,
        "stderr": stderr[-4000:],
        "requests_served": len(server.requests),
        "synthetic": False,
        "calc_py_after": (workdir / "calc.py").read_text(),
    }
    if analytics.exists():
        shutil.copyfile(analytics, HERE / f"{name}.analytics.jsonl")
        meta["analytics"] = f"{name}.analytics.jsonl"
    (HERE / f"{name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{name}: exit {exit_code}, {len(server.requests)} request(s)")


def main() -> None:
    aider = sys.argv[1]
    for name in sys.argv[2:] or list(SCENARIOS):
        record(aider, name)


if __name__ == "__main__":
    main()
