"""Re-record the Gemini CLI transcripts in this directory with the real Gemini CLI.

Usage: ``python record.py /path/to/gemini [NAME ...]`` (all scenarios when no NAME is given).

Model requests go to the scripted Gemini API in ``tests/fake_gemini_api.py`` on 127.0.0.1
(``GOOGLE_GEMINI_BASE_URL`` with the ``gemini-api-key`` auth type selected in a throw-away
``$HOME/.gemini/settings.json``); what the CLI prints is its own. ``auth_missing`` runs with no
credentials at all, exactly as a fresh machine would. Each scenario writes ``NAME.jsonl``
(stdout, verbatim) and ``NAME.meta.json`` (exit code, stderr tail, CLI version).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))  # core/tests, for fake_gemini_api

from fake_gemini_api import (  # noqa: E402
    GeminiReply,
    call_reply,
    error_reply,
    serve,
    text_reply,
    usage_metadata,
)

MODEL = "gemini-2.5-flash"


def _tools(workdir: Path) -> list[GeminiReply]:
    return [
        call_reply(
            "run_shell_command",
            {"command": "cat hello.txt", "description": "Show the file"},
            usage_metadata(3000, 20),
        ),
        call_reply(
            "write_file",
            {"file_path": str(workdir / "greet.py"), "content": "print('hello')\n"},
            usage_metadata(3200, 30, cached=3000),
        ),
        call_reply(
            "read_file",
            {"file_path": str(workdir / "missing.txt")},
            usage_metadata(3300, 15, cached=3200),
        ),
        text_reply(
            "Wrote greet.py. LOOPCTL_DONE", usage_metadata(3450, 10, cached=3300, thoughts=6)
        ),
    ]


QUOTA_DETAILS = [
    {
        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
        "violations": [
            {
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
                "quotaValue": "250",
            }
        ],
    },
    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2s"},
]


def scenarios(workdir: Path) -> dict[str, dict[str, Any]]:
    return {
        "success_text": {
            "replies": [text_reply("Hello there. LOOPCTL_DONE", usage_metadata(2900, 7))]
        },
        "success_tools": {"replies": _tools(workdir)},
        "resumed": {
            "resume_of": "success_tools",
            "replies": [text_reply("Resumed fine.", usage_metadata(3600, 4, cached=3400))],
        },
        "auth_missing": {"no_auth": True},
        "api_key_invalid": {
            "replies": [
                error_reply(
                    400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key."
                )
            ],
            "repeat": True,
        },
        "permission_denied": {
            "replies": [
                error_reply(
                    403,
                    "PERMISSION_DENIED",
                    "Method doesn't allow unregistered callers (callers without established "
                    "identity). Please use API Key or other form of API consumer identity to call "
                    "this API.",
                )
            ],
            "repeat": True,
        },
        "quota_exhausted": {
            "replies": [
                error_reply(
                    429,
                    "RESOURCE_EXHAUSTED",
                    "You exceeded your current quota, please check your plan and billing details.",
                    QUOTA_DETAILS,
                )
            ],
            "repeat": True,
            "kill_after_s": 90.0,
        },
        "context_overflow": {
            "replies": [
                error_reply(
                    400,
                    "INVALID_ARGUMENT",
                    "The input token count (1148576) exceeds the maximum number of tokens allowed "
                    "(1048576).",
                )
            ],
            "repeat": True,
        },
        "max_turns": {
            "replies": _tools(workdir),
            "settings": {"model": {"maxSessionTurns": 1}},
        },
        "server_error": {
            "replies": [error_reply(500, "INTERNAL", "An internal error has occurred.")],
            "repeat": True,
            "kill_after_s": 90.0,
        },
    }


def version(gemini: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [gemini, "--version"], capture_output=True, text=True, check=False, env=env
    )
    return done.stdout.strip()


def record(
    gemini: str, name: str, spec: dict[str, Any], workdir: Path, ids: dict[str, str]
) -> None:
    home = Path(tempfile.mkdtemp(prefix="gemini-home-")) if spec.get("no_auth") else HOME
    settings: dict[str, Any] = {"security": {"auth": {"selectedType": "gemini-api-key"}}}
    settings.update(spec.get("settings", {}))
    if not spec.get("no_auth"):
        (home / ".gemini").mkdir(parents=True, exist_ok=True)
        (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
    replies: list[GeminiReply] = spec.get("replies", [])
    fallback = replies[-1] if spec.get("repeat") else None
    with serve(replies, fallback) as server:
        env = dict(os.environ, HOME=str(home))
        for variable in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL"):
            env.pop(variable, None)
        if not spec.get("no_auth"):
            env.update(GEMINI_API_KEY="fake-key", GOOGLE_GEMINI_BASE_URL=server.base_url)
        argv = [gemini, "-p", "", "--output-format", "stream-json", "--yolo", "--skip-trust"]
        argv += ["-m", MODEL]
        if spec.get("resume_of"):
            argv += ["--resume", ids[spec["resume_of"]]]
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
                exit_code = None
    stderr = err_path.read_text(errors="replace")
    err_path.unlink()
    for line in out_path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("type") == "init":
            ids[name] = event.get("session_id", "")
            break
    meta = {
        "cli": "gemini",
        "cli_version": version(gemini, env),
        "model": MODEL,
        "exit_code": exit_code,
        "stderr": stderr[-4000:],
        "requests_served": len(server.requests),
        "synthetic": False,
    }
    (HERE / f"{name}.meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{name}: exit {exit_code}, {len(server.requests)} request(s)")


HOME = Path(tempfile.mkdtemp(prefix="gemini-home-"))


def main() -> None:
    gemini = sys.argv[1]
    workdir = Path(tempfile.mkdtemp(prefix="gemini-work-"))
    (workdir / "hello.txt").write_text("hello world\n")
    specs = scenarios(workdir)
    ids: dict[str, str] = {}
    for name in sys.argv[2:] or list(specs):
        record(gemini, name, specs[name], workdir, ids)


if __name__ == "__main__":
    main()
