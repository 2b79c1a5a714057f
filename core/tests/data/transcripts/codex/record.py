"""Re-record the Codex transcripts in this directory with the real Codex CLI.

Usage: ``python record.py /path/to/codex [NAME ...]`` (all scenarios when no NAME is given).

Every model request goes to the scripted Responses-API server in ``tests/fake_responses_api.py``
on 127.0.0.1, so no account or network is needed; what Codex prints is its own. Each scenario
writes ``NAME.jsonl`` (Codex's stdout, verbatim) and ``NAME.meta.json`` (exit code, stderr tail,
CLI version, and the per-scenario facts the tests check). Scenarios that use Codex's session log
also keep it as ``NAME.rollout.jsonl``. Paths, ports and ids that differ on every run are not
masked: the parser must cope with whatever the CLI prints.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # core/tests, for fake_responses_api

from fake_responses_api import (  # noqa: E402
    API_KEY_ENV,
    Reply,
    codex_provider_args,
    custom_tool_reply,
    error_reply,
    failed_reply,
    function_call_reply,
    serve,
    text_reply,
    usage,
)

MODEL = "gpt-5.5"
PATCH = "*** Begin Patch\n*** Add File: greet.py\n+print('hello')\n*** End Patch\n"


def _tools_replies() -> list[Reply]:
    return [
        function_call_reply(
            "exec_command", {"cmd": "cat hello.txt"}, "call_1", "r1", usage(1000, 20)
        ),
        custom_tool_reply("apply_patch", PATCH, "call_2", "r2", usage(1300, 40, cached=1000)),
        function_call_reply(
            "exec_command",
            {"cmd": "python3 -c 'raise SystemExit(3)'"},
            "call_3",
            "r3",
            usage(1450, 30, cached=1300),
        ),
        text_reply(
            "Added greet.py; the check exits 3.", "r4", usage(1600, 12, cached=1450, reasoning=4)
        ),
    ]


RATE_MESSAGE = (
    "Rate limit reached for gpt-5.5 on tokens per min (TPM): Limit 30000, Used 30000, "
    "Requested 500. Please try again in 20s."
)
SCENARIOS: dict[str, dict[str, Any]] = {
    "success_text": {"replies": [text_reply("Hello! LOOPCTL_DONE", "r1", usage(2400, 9))]},
    "success_tools": {"replies": _tools_replies(), "rollout": True},
    "resumed": {
        "resume_of": "success_tools",
        "replies": [text_reply("Still here.", "r5", usage(1800, 5, cached=1600))],
        "rollout": True,
    },
    "context_overflow": {
        "replies": [
            failed_reply(
                "context_length_exceeded",
                "Your input exceeds the context window of this model. Please adjust your input "
                "and try again.",
                "r1",
            )
        ]
    },
    "auth_401": {
        "replies": [
            error_reply(
                401,
                "invalid_api_key",
                "Incorrect API key provided: sk-fake. You can find your API key at "
                "https://platform.openai.com/account/api-keys.",
            )
        ],
        "repeat": True,
    },
    "missing_api_key": {"replies": [], "env_key_missing": True},
    "rate_limit_429": {
        "replies": [error_reply(429, "rate_limit_exceeded", RATE_MESSAGE, {"retry-after": "1"})],
        "repeat": True,
    },
    "rate_limit_stream": {
        "replies": [failed_reply("rate_limit_exceeded", RATE_MESSAGE, "r1")],
        "repeat": True,
    },
    "usage_limit": {
        "replies": [
            Reply(
                status=429,
                body=json.dumps(
                    {
                        "error": {
                            "type": "usage_limit_reached",
                            "message": "The usage limit has been reached",
                            "plan_type": "plus",
                            "resets_at": int(time.time()) + 3600,
                            "resets_in_seconds": 3600,
                        }
                    }
                ),
            )
        ],
        "repeat": True,
    },
    "quota_exceeded": {
        "replies": [
            error_reply(
                429,
                "insufficient_quota",
                "You exceeded your current quota, please check your plan and billing details.",
            )
        ],
        "repeat": True,
    },
    "server_overloaded": {
        "replies": [error_reply(500, "server_error", "The server had an error.")],
        "repeat": True,
    },
    "stream_dropped": {"replies": [Reply(drop=True)], "repeat": True},
    "waiting_for_network": {"replies": [], "refused": True, "kill_after_s": 12.0},
}


def version(codex: str) -> str:
    done = subprocess.run([codex, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def record(codex: str, name: str, home: Path, workdir: Path, thread_ids: dict[str, str]) -> None:
    spec = SCENARIOS[name]
    replies: list[Reply] = spec["replies"]
    fallback = replies[-1] if spec.get("repeat") else None
    with serve(replies, fallback) as server:
        base_url = "http://127.0.0.1:9/v1" if spec.get("refused") else server.base_url
        argv = [codex, "exec"]
        if spec.get("resume_of"):
            argv.append("resume")
        argv += ["--json", "--skip-git-repo-check", "-m", MODEL]
        argv += ["-c", 'approval_policy="never"', "-c", 'sandbox_mode="workspace-write"']
        argv += codex_provider_args(base_url)
        if spec.get("resume_of"):
            argv.append(thread_ids[spec["resume_of"]])
        argv.append("-")
        env = dict(os.environ, CODEX_HOME=str(home), RUST_LOG="error")
        if not spec.get("env_key_missing"):
            env[API_KEY_ENV] = "sk-fake"
        else:
            env.pop(API_KEY_ENV, None)
        out_path, err_path = HERE / f"{name}.jsonl", HERE / f"{name}.stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            proc = subprocess.Popen(
                argv,
                cwd=workdir,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            assert proc.stdin is not None
            proc.stdin.write(b"Fix the failing test.\n")
            proc.stdin.close()
            try:
                exit_code: int | None = proc.wait(timeout=spec.get("kill_after_s", 120.0))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                exit_code = None  # what the supervisor reports for a process it ended
    stderr = err_path.read_text(errors="replace")
    err_path.unlink()
    first = out_path.read_text().splitlines()[:1]
    if first:
        thread_ids[name] = json.loads(first[0]).get("thread_id", "")
    meta: dict[str, Any] = {
        "cli": "codex",
        "cli_version": version(codex),
        "model": MODEL,
        "exit_code": exit_code,
        "stderr": stderr[-4000:],
        "requests_served": len(server.requests),
        "synthetic": False,
    }
    if spec.get("rollout") and name in thread_ids:
        found = sorted(home.glob(f"sessions/*/*/*/rollout-*{thread_ids[name]}.jsonl"))
        if found:
            shutil.copyfile(found[-1], HERE / f"{name}.rollout.jsonl")
            meta["rollout"] = f"{name}.rollout.jsonl"
    (HERE / f"{name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{name}: exit {exit_code}, {len(server.requests)} request(s)")


def main() -> None:
    codex = sys.argv[1]
    names = sys.argv[2:] or list(SCENARIOS)
    home = Path(tempfile.mkdtemp(prefix="codex-home-"))
    workdir = Path(tempfile.mkdtemp(prefix="codex-work-"))
    (workdir / "hello.txt").write_text("hello world\n")
    thread_ids: dict[str, str] = {}
    for name in names:
        record(codex, name, home, workdir, thread_ids)


if __name__ == "__main__":
    main()
