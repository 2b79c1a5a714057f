"""What each mode's recovery is: the strategy table a scheduler reads (``loopctl classify``), the
reinstall command a dependency problem calls for, and a bounded runner for recovery commands.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

import attrs

import loopctl
from loopctl_failure_classifier.model import (
    BROKEN_TEST_COMMAND,
    CODE_ERROR,
    CONTEXT_EXHAUSTION,
    DEPENDENCY_ISSUE,
    INFINITE_LOOP,
    TEST_FLAKINESS,
    FailureMode,
    RecoveryStrategy,
)

#: The built-in recoveries (the seed's table, made real). ``{max_restarts}`` is filled in with
#: the run's restart limit plus two (capped at loopctl's hard cap of 10).
BUILTIN_RECOVERY: dict[str, FailureMode] = {
    CONTEXT_EXHAUSTION: FailureMode(
        name=CONTEXT_EXHAUSTION,
        action="restart_compressed",
        args=("--max-restarts", "{max_restarts}"),
        description="Restart the session with a compressed briefing, and allow two more restarts",
        max_retries_override=2,
    ),
    INFINITE_LOOP: FailureMode(
        name=INFINITE_LOOP,
        action="reduce_and_redirect",
        args=("--max-iterations", "10"),
        description="Name the failed approach, ask for a different one, cut the remaining "
        "iterations and restart the session",
        max_retries_override=1,
    ),
    TEST_FLAKINESS: FailureMode(
        name=TEST_FLAKINESS,
        action="rerun_tests",
        args=("--max-iterations", "3"),
        description="Rerun the tests without code changes; name the flaky tests in the prompt "
        "and do not count the failure against the agent",
        max_retries_override=3,
    ),
    DEPENDENCY_ISSUE: FailureMode(
        name=DEPENDENCY_ISSUE,
        action="reinstall_deps",
        args=("--max-iterations", "5"),
        description="Clean reinstall of the dependencies first (npm ci, uv sync, pip install -r "
        "…; enable with run_reinstall = true), then tell the agent what is missing",
        max_retries_override=2,
    ),
    BROKEN_TEST_COMMAND: FailureMode(
        name=BROKEN_TEST_COMMAND,
        action="fix_test_command",
        description="Stop: the test command cannot pass whatever the code says (a path it "
        "names is missing, its runner refuses its options or finds no test); fix the command "
        "or its environment before the next attempt",
        max_retries_override=0,
    ),
    CODE_ERROR: FailureMode(
        name=CODE_ERROR,
        action="standard_retry",
        description="Standard retry: the agent gets the failing tests and errors again",
    ),
}


def strategy(
    mode: str, custom: Mapping[str, FailureMode] | None = None, *, max_restarts: int = 3
) -> RecoveryStrategy:
    """The recovery strategy of ``mode``; an unknown mode gets the standard retry."""
    declared = BUILTIN_RECOVERY.get(mode) or (custom or {}).get(mode)
    if declared is None:
        return RecoveryStrategy(
            mode=mode,
            action="standard_retry",
            description=f"unknown mode {mode!r}: standard retry",
        )
    restarts = str(min(10, max(0, max_restarts) + 2))
    args = tuple(arg.replace("{max_restarts}", restarts) for arg in declared.args)
    return attrs.evolve(declared.strategy(), args=args)


# --- reinstalling dependencies -------------------------------------------------------------------

#: ``(file, command, ecosystem)``: the first file present (of the failing ecosystem, when known)
#: chooses the command. Lock files come first: they reinstall exactly what was resolved before.
REINSTALL_COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("package-lock.json", "npm ci", "node"),
    ("npm-shrinkwrap.json", "npm ci", "node"),
    ("pnpm-lock.yaml", "pnpm install --frozen-lockfile", "node"),
    ("yarn.lock", "yarn install --frozen-lockfile", "node"),
    ("bun.lockb", "bun install --frozen-lockfile", "node"),
    ("uv.lock", "uv sync", "python"),
    ("poetry.lock", "poetry install", "python"),
    ("Pipfile.lock", "pipenv sync --dev", "python"),
    ("pdm.lock", "pdm sync", "python"),
    ("requirements.txt", "python -m pip install -r requirements.txt", "python"),
    ("Cargo.lock", "cargo fetch", "rust"),
    ("Cargo.toml", "cargo fetch", "rust"),
    ("go.sum", "go mod download", "go"),
    ("go.mod", "go mod download", "go"),
    ("pom.xml", "mvn -q dependency:resolve", "java"),
    ("build.gradle", "gradle --refresh-dependencies dependencies", "java"),
    ("build.gradle.kts", "gradle --refresh-dependencies dependencies", "java"),
    ("Gemfile.lock", "bundle install", "ruby"),
    ("composer.lock", "composer install", "php"),
    ("mix.lock", "mix deps.get", "elixir"),
    ("Gemfile", "bundle install", "ruby"),
    ("composer.json", "composer install", "php"),
    ("mix.exs", "mix deps.get", "elixir"),
    ("package.json", "npm install", "node"),
    ("pyproject.toml", "python -m pip install -e .", "python"),
)


def detect_reinstall_command(
    workdir: Path | None, ecosystems: Sequence[str] = ()
) -> tuple[str, str] | None:
    """``(command, because)`` for the project in ``workdir``, or None when nothing fits."""
    if workdir is None:
        return None
    present = [entry for entry in REINSTALL_COMMANDS if (workdir / entry[0]).is_file()]
    for file, command, ecosystem in present:
        if not ecosystems or ecosystem in ecosystems:
            return command, f"{file} is present"
    return None


class CommandResult(NamedTuple):
    """A recovery command's result (a NamedTuple: cheaper to define than an attrs class, on the
    start-up of ``loopctl classify``)."""

    command: str
    exit_code: int | None
    output: str
    duration_s: float
    timed_out: bool = False
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def tail(self, chars: int = 2000) -> str:
        return self.output[-chars:]


def run_command(command: str, cwd: Path, timeout_s: float) -> CommandResult:
    """Run a recovery command through the shell, in its own process group (ended as a whole on
    a timeout), with the run's withheld variables removed from its environment
    (:func:`loopctl.child_environment`): a reinstall runs the project's own scripts
    (``preinstall``), code the agent can edit. Never raises: a command that cannot start is a
    result with ``error`` set."""
    import subprocess  # here: `loopctl classify` reads the strategies and runs nothing

    started = time.monotonic()
    try:
        process = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=loopctl.child_environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        return CommandResult(command, None, "", 0.0, error=f"cannot start: {exc}")
    try:
        raw, _ = process.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        raw, _ = process.communicate()
        timed_out = True
    output = raw.decode("utf-8", errors="replace")[-200_000:]
    return CommandResult(
        command,
        None if timed_out else process.returncode,
        output,
        round(time.monotonic() - started, 3),
        timed_out,
    )


def _kill_group(pid: int) -> None:
    import signal  # with subprocess: only a recovery command that runs needs it

    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
