"""The bare loops a user would run instead of loopctl, as one script the harness can time and cut.

``--mode fresh`` is ``until TESTS; do claude -p "$GOAL"; done``: a new session every time.
``--mode continue`` is the same with ``--continue`` from the second call on (what the Stop-hook loop
plugin for Claude Code does: the session goes on). Both give the CLI
``--permission-mode bypassPermissions``, as an unattended loop must. With ``--kind codex`` the
call is ``codex exec "$GOAL"`` (continued: ``codex exec resume --last "$GOAL"``) with
``--dangerously-bypass-approvals-and-sandbox``, the same thing for Codex. Both loops stop after
``--max-iterations`` calls (the scenario's iteration budget). Each call's exit code is ignored, as
the ``until`` loop ignores it. A JSON line as each call starts and one as it ends (with its exit
code), and a last one saying why the loop stopped, go to ``--record``.

    python bare_loop.py --mode fresh --cli claude --test-cmd "python -m pytest -q" \\
        --max-iterations 5 --record bare.jsonl -- "Make the tests pass."
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def _record(path: Path, line: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(line) + "\n")


def _passes(test_cmd: str) -> bool:
    return (
        subprocess.run(test_cmd, shell=True, stdin=subprocess.DEVNULL, check=False).returncode == 0
    )


def _call(kind: str, cli: str, goal: str, *, resume: bool) -> list[str]:
    """One call of the agent CLI ``cli`` (``kind``: claude or codex) on ``goal``."""
    if kind == "codex":
        again = ["resume", "--last"] if resume else []
        unattended = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
        return [cli, "exec", *again, *unattended, goal]
    return [cli, "-p", goal, "--permission-mode", "bypassPermissions"] + (
        ["--continue"] if resume else []
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("fresh", "continue"), required=True)
    parser.add_argument("--kind", choices=("claude", "codex"), default="claude")
    parser.add_argument("--cli", required=True, help="the claude (or codex) executable")
    parser.add_argument("--test-cmd", required=True)
    parser.add_argument("--max-iterations", type=int, required=True)
    parser.add_argument("--record", type=Path, required=True)
    parser.add_argument("goal")
    args = parser.parse_args(argv)
    for iteration in range(1, args.max_iterations + 1):
        if _passes(args.test_cmd):
            _record(args.record, {"stopped": "tests pass", "iterations": iteration - 1})
            return 0
        command = _call(
            args.kind, args.cli, args.goal, resume=args.mode == "continue" and iteration > 1
        )
        _record(args.record, {"iteration": iteration})  # a call that never returns still counts
        code = subprocess.run(command, stdin=subprocess.DEVNULL, check=False).returncode
        _record(args.record, {"iteration": iteration, "exit_code": code})
    passed = _passes(args.test_cmd)
    stopped = "tests pass" if passed else "iteration budget used up"
    _record(args.record, {"stopped": stopped, "iterations": args.max_iterations})
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
