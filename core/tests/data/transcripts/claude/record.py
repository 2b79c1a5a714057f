"""Re-record the Claude Code transcripts in this directory with the real CLI.

Each transcript is the stdout of one real ``claude -p --output-format stream-json --verbose``
run (argv built by loopctl's ClaudeAgent), driven by loopctl's scripted model server
(:mod:`loopctl.testing.model_server`) instead of the Anthropic API. Usage:

    python core/tests/data/transcripts/claude/record.py [--claude PATH] [NAME ...]

The server mimics the real API's usage reporting (``early_output_tokens=False``: the
``message_start`` event carries ``output_tokens: 1``, the final count comes in ``message_delta``),
so ``assistant`` lines show what they show against the real API. Two transcripts cannot be made
this way (subscription usage limits need a claude.ai login); they are derived by hand from
``rate_limit.jsonl`` by :func:`derive_usage_limit` and marked as derived in README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from loopctl.agents.base import TurnRequest
from loopctl.agents.claude import ClaudeAgent, ClaudeSettings
from loopctl.testing import model_server as ms

HERE = Path(__file__).parent
CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
TEST = (
    "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
)


def find_claude(given: str | None) -> str:
    candidates = [given, shutil.which("claude")]
    prefix = os.environ.get("LOOPCTL_E2E_NPM_PREFIX")
    if prefix:
        candidates.append(str(Path(prefix) / "node_modules" / ".bin" / "claude"))
    for candidate in candidates:
        if candidate and Path(candidate).exists():
            return candidate
    sys.exit("claude not found: pass --claude PATH or set LOOPCTL_E2E_NPM_PREFIX")


def run(
    claude: str,
    scenario: list[ms.Reply],
    *,
    workdir: Path,
    home: Path,
    session_id: str | None = None,
    settings: ClaudeSettings | None = None,
    env_extra: dict[str, str] | None = None,
    server_kw: dict[str, object] | None = None,
) -> tuple[bytes, bytes, int, ms.ScriptedModelServer]:
    agent = ClaudeAgent(settings or ClaudeSettings(command=claude))
    request = TurnRequest(
        prompt="Make the failing test in test_calc.py pass.",
        workdir=workdir,
        iteration=1,
        session_id=session_id,
    )
    invocation = agent.invocation(request)
    server = ms.ScriptedModelServer(scenario, early_output_tokens=False, **(server_kw or {}))
    with server:
        env = {**os.environ, **server.cli_env(home), **(env_extra or {})}
        env.update({k: v for k, v in invocation.env.items() if v is not None})
        done = subprocess.run(
            invocation.argv,
            input=invocation.stdin,
            cwd=workdir,
            env=env,
            capture_output=True,
            timeout=120,
            check=False,
        )
    return done.stdout, done.stderr, done.returncode, server


def project(root: Path) -> Path:
    work = root / "work"
    work.mkdir(parents=True)
    (work / "calc.py").write_text(CALC)
    (work / "test_calc.py").write_text(TEST)
    subprocess.run(["git", "init", "-q"], cwd=work, check=True)
    return work


def u(inp: int, out: int = 180, cread: int = 0, ccreate: int = 0) -> dict[str, int]:
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "cache_read_input_tokens": cread,
        "cache_creation_input_tokens": ccreate,
    }


THOUGHTS = [
    "The user wants the failing test in test_calc.py to pass. Before changing anything I should "
    "read the implementation and the test, so that I understand what is expected and do not guess.",
    "The test calls add(2, 3) and expects 5. Let me look at the test file as well, and search for "
    "other definitions of add in case something shadows it.",
    "I will run the test suite first to see the actual failure message rather than assume it.",
    "The failure says -1 != 5, which is exactly 2 - 3. So add subtracts instead of adding. The fix "
    "is a one-character change in calc.py: return a + b. mul looks right and is not touched.",
    "Now I will run the tests again to confirm that the fix works and nothing else broke.",
    "All tests pass. I can summarise the change for the user.",
]


def think(i: int) -> str:
    """Extended thinking like the models send (Claude Code asks for it by default)."""
    return THOUGHTS[i % len(THOUGHTS)] * 3


SCENARIOS: dict[str, Callable[[], list[ms.Reply]]] = {
    # thinking + text + tool_use in one API message, parallel tool calls, an edit, a failing and a
    # passing Bash
    "success_edit": lambda: [
        ms.read(
            "calc.py",
            say="Let me look at the code first.",
            thinking=think(0),
            usage=u(6, 120, 0, 14000),
        ),
        ms.tools(
            ms.ToolUse("Read", {"file_path": "test_calc.py"}),
            ms.ToolUse("Grep", {"pattern": "def add", "path": "."}),
            thinking=think(1),
            usage=u(4, 150, 14000, 900),
        ),
        ms.bash("python3 -m unittest -q", thinking=think(2), usage=u(5, 90, 14900, 700)),
        ms.edit(
            "calc.py",
            "return a - b",
            "return a + b",
            thinking=think(3),
            usage=u(3, 140, 15600, 800),
        ),
        ms.bash("python3 -m unittest -q", thinking=think(4), usage=u(4, 90, 16400, 300)),
        ms.text(
            "Fixed `add`: it subtracted.\n\nLOOPCTL_DONE",
            thinking=think(5),
            usage=u(2, 60, 16700, 200),
        ),
    ],
    "subagent": lambda: [
        ms.tools(
            ms.ToolUse(
                "Task",
                {
                    "description": "Inspect calc",
                    "prompt": "Read calc.py and say what add does.",
                    "subagent_type": "general-purpose",
                },
            ),
            say="I'll ask a helper to look.",
            thinking=think(0),
            usage=u(8, 200, 0, 20000),
        ),
        ms.read("calc.py", usage=u(9000, 80)),  # the sub-agent
        ms.text("add subtracts b from a.", usage=u(9400, 40)),  # the sub-agent's answer
        ms.text("The helper found the bug.", thinking=think(3), usage=u(10, 50, 20000, 600)),
    ],
    "prompt_too_long": lambda: [
        ms.read("calc.py", usage=u(150000, 90)),
        ms.prompt_too_long(210000, 200000),
    ],
    "compaction": lambda: [
        *[ms.bash(f"echo step{i}", thinking=think(i), usage=u(30000 * i, 60)) for i in range(1, 6)],
        ms.prompt_too_long(205000, 200000),
        ms.text("Continuing after the summary.", usage=u(12000, 70)),
    ],
    "rate_limit": lambda: [ms.rate_limited()],
    "auth_invalid_key": lambda: [ms.auth_error()],
    "credit_balance": lambda: [
        ms.api_error(
            400,
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. Please go to Plans & "
            "Billing to upgrade or purchase credits.",
        )
    ],
    "overloaded": lambda: [ms.overloaded()],
    "max_turns": lambda: [ms.read("calc.py"), ms.read("test_calc.py"), ms.text("never")],
    "max_budget": lambda: [
        ms.read("calc.py", usage=u(100000, 100)),
        ms.read("test_calc.py", usage=u(110000, 100)),
        ms.text("never"),
    ],
    "api_retry": lambda: [
        ms.api_error(
            529, "overloaded_error", "Overloaded", times=2, headers={"x-should-retry": "true"}
        ),
        ms.text("Answered after two retries.", usage=u(3000, 20)),
    ],
}


#: Scenarios recorded again under another name with a newer CLI whose output differs (the
#: older recording stays: loopctl reads both).
SAME_AS = {"subagent_background": "subagent"}
#: Recorded with Claude Code 2.1.332 (see README.md); the rest with 2.1.197.
NEWER = ["subagent_background", "resumed_running_total"]


def record(claude: str, name: str, root: Path) -> None:
    work = project(root / name)
    home = root / name / "home"
    settings = ClaudeSettings(command=claude)
    env_extra: dict[str, str] = {}
    server_kw: dict[str, object] = {}
    if name == "max_turns":
        settings.max_turns = 1
    if name == "max_budget":
        settings.extra_args = ["--max-budget-usd", "0.1"]
    if name == "api_retry":
        env_extra["CLAUDE_CODE_MAX_RETRIES"] = "3"
    if name == "prompt_too_long":
        server_kw["compact_reply"] = ms.prompt_too_long(210000, 200000)
    if name == "not_logged_in":
        env_extra["ANTHROPIC_API_KEY"] = ""
    if name in ("resumed", "resumed_running_total"):  # a second turn of a session
        first = [
            ms.read("calc.py", thinking=think(0), usage=u(6, 100, 0, 14000)),
            ms.text("Read it.", usage=u(4, 30, 14000, 500)),
        ]
        out1, _, _, _ = run(claude, first, workdir=work, home=home, settings=settings)
        session = json.loads(out1.splitlines()[0])["session_id"]
        if name == "resumed_running_total":  # kept: its cost is what the second turn adds to
            (HERE / f"{name}_first.jsonl").write_bytes(out1)
        second = [
            ms.edit(
                "calc.py",
                "return a - b",
                "return a + b",
                thinking=think(3),
                usage=u(3, 120, 14500, 400),
            ),
            ms.text("Done.", usage=u(2, 20, 14900, 200)),
        ]
        out, err, code, server = run(
            claude, second, workdir=work, home=home, session_id=session, settings=settings
        )
    elif name == "resume_missing_session":
        out, err, code, server = run(
            claude,
            [],
            workdir=work,
            home=home,
            session_id="00000000-0000-4000-8000-000000000000",
            settings=settings,
        )
    else:
        out, err, code, server = run(
            claude,
            SCENARIOS[SAME_AS.get(name, name)]() if SAME_AS.get(name, name) in SCENARIOS else [],
            workdir=work,
            home=home,
            settings=settings,
            env_extra=env_extra,
            server_kw=server_kw,
        )
    (HERE / f"{name}.jsonl").write_bytes(out)
    print(f"{name}: exit {code}, {len(out.splitlines())} lines, {len(server.requests)} requests")
    if err.strip():
        print(f"  stderr: {err.decode(errors='replace').strip()[:300]}")


def derive_usage_limit() -> None:
    """Subscription usage-limit transcripts, derived from ``rate_limit.jsonl`` (see README)."""
    lines = (HERE / "rate_limit.jsonl").read_text().splitlines()
    for name, words, event in [
        (
            "usage_limit_resets",
            "You've hit your session limit · resets 3pm (UTC)",
            {"status": "rejected", "resetsAt": 1893510000, "rateLimitType": "five_hour"},
        ),
        ("usage_limit_epoch", "Claude AI usage limit reached|1760000000", None),
    ]:
        out: list[str] = []
        for line in lines:
            data = json.loads(line)
            if data["type"] == "assistant":
                data["message"]["content"][0]["text"] = words
                if event is not None:
                    out.append(
                        json.dumps(
                            {
                                "type": "rate_limit_event",
                                "rate_limit_info": event,
                                "uuid": "5b0e4c1c-0000-4000-8000-000000000001",
                                "session_id": data["session_id"],
                            },
                            ensure_ascii=False,
                            separators=(",", ":"),
                        )
                    )
            if data["type"] == "result":
                data["result"] = words
            out.append(json.dumps(data, ensure_ascii=False, separators=(",", ":")))
        (HERE / f"{name}.jsonl").write_text("\n".join(out) + "\n")
        print(f"{name}: derived from rate_limit.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--claude")
    parser.add_argument("names", nargs="*")
    args = parser.parse_args()
    claude = find_claude(args.claude)
    names = args.names or [
        *SCENARIOS,
        "not_logged_in",
        "resumed",
        "resume_missing_session",
        *NEWER,
    ]
    with tempfile.TemporaryDirectory(prefix="loopctl-record-") as tmp:
        for name in names:
            record(claude, name, Path(tmp))
    if not args.names or "rate_limit" in args.names:
        derive_usage_limit()
    version = subprocess.run([claude, "--version"], capture_output=True, text=True, check=False)
    print("recorded with", version.stdout.strip())


if __name__ == "__main__":
    main()
