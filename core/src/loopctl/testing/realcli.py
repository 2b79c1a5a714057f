"""Helpers for tests that drive a real agent CLI (Claude Code, Codex, Gemini) offline.

The CLIs come from npm: ``nox -s e2e`` installs them under a cache prefix and passes it in
``LOOPCTL_E2E_NPM_PREFIX``; a CLI on PATH works too. Without one, :func:`require_cli` skips the
test with the reason, unless ``LOOPCTL_E2E_REQUIRE=1``, where a missing CLI is a failure. Point
the CLI at :class:`loopctl.testing.model_server.ScriptedModelServer` on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

#: Variables of the developer's own environment that would steer a CLI away from the test server.
FOREIGN_ENV = (
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_CUSTOM_HEADERS",
    "ANTHROPIC_DEFAULT_HAIKU_MODEL",
    "ANTHROPIC_DEFAULT_OPUS_MODEL",
    "ANTHROPIC_DEFAULT_SONNET_MODEL",
    "CLAUDE_CODE_USE_BEDROCK",
    "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CODE_OAUTH_TOKEN",
    "CLAUDE_CODE_ENTRYPOINT",
    "CLAUDECODE",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "https_proxy",
    "http_proxy",
)


def find_cli(name: str) -> str | None:
    """``name`` under ``$LOOPCTL_E2E_NPM_PREFIX`` (local or global npm layout), else on PATH."""
    prefix = os.environ.get("LOOPCTL_E2E_NPM_PREFIX")
    if prefix:
        for candidate in (
            Path(prefix) / "node_modules" / ".bin" / name,
            Path(prefix) / "bin" / name,
        ):
            if candidate.exists() and os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which(name)


def require_cli(name: str, package: str) -> str:
    """The path of CLI ``name`` (npm ``package``), or skip the test saying how to get it (fail
    instead when ``LOOPCTL_E2E_REQUIRE`` is set)."""
    import pytest

    path = find_cli(name)
    if path is not None:
        return path
    reason = (
        f"`{name}` not found: install it with `npm install --prefix DIR {package}` and set "
        "LOOPCTL_E2E_NPM_PREFIX=DIR (or run `nox -s e2e`, which does both)"
    )
    if os.environ.get("LOOPCTL_E2E_REQUIRE", "") not in ("", "0"):
        pytest.fail(reason)
    pytest.skip(reason)


class ArgvLog:
    """A wrapper command that records each CLI invocation's arguments, then runs the CLI: use
    :attr:`command` as the agent command to see how loopctl called it."""

    def __init__(self, directory: Path, cli: str) -> None:
        self.path = directory / "argv.jsonl"
        self.script = directory / "record_argv.py"
        self.script.write_text(
            "import json, os, sys\n"
            f"with open({str(self.path)!r}, 'a') as log:\n"
            "    log.write(json.dumps(sys.argv[1:]) + '\\n')\n"
            f"os.execv({cli!r}, [{cli!r}, *sys.argv[1:]])\n"
        )
        self.command = shlex.join([sys.executable, str(self.script)])

    def calls(self) -> list[list[str]]:
        """Each invocation's arguments, oldest first."""
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def resumed(self) -> list[str | None]:
        """The ``--resume`` argument of each invocation (None: a fresh session)."""
        return [
            argv[argv.index("--resume") + 1] if "--resume" in argv else None
            for argv in self.calls()
        ]


__all__ = ["FOREIGN_ENV", "ArgvLog", "find_cli", "require_cli"]
