"""Run one contestant on one scenario, in a temporary directory, and score the run.

The run gets its own directory holding the project (a git repository of the scenario's files),
HOME (the CLI's config and sessions: Claude Code's, or Codex's ``CODEX_HOME``; the XDG
directories, so the failure memory too), the temporary directories (``TMPDIR``, and Claude Code's
``CLAUDE_CODE_TMPDIR`` from the server's ``cli_env``) and loopctl's state; its own model server on
127.0.0.1 with a new behaviour model, speaking the contestant's CLI's API;
and an environment built from scratch (PATH and the locale of this process, nothing else of the
caller's). The contestant is cut (SIGTERM to its
session, SIGKILL five seconds later) at the scenario's wall clock or as soon as the server has
billed more than the token budget; either way it is scored failed.

Afterwards every process still carrying the run's marker variable is killed and reported (a
contestant that ended by itself should leave none; one that was cut may, as a bare loop killed
mid-call leaves its CLI's background jobs), the test command is run again on the final tree, and
the directory is removed.

A run **completed** when the tests really pass on the final tree and it stayed within every
budget: iterations, tokens (input plus output, as the server billed them) and wall clock. In a
scenario that ``expect``s a stop (nothing can make the tests pass), a run completed when the
contestant stopped by itself before using up its iteration budget, within the other budgets.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import attrs

from efficacy.contestants import Contestant, Outcome, RunContext
from efficacy.scenario import Scenario
from loopctl.testing import model_server as ms
from loopctl.testing.responses_server import ResponsesModelServer

#: Claude Sonnet 4.5's list prices, US dollars per million tokens (every token is priced
#: uncached: the server reports no cache use).
PRICE_INPUT = 3.0
PRICE_OUTPUT = 15.0
#: The variable that marks every process of one run, so that none outlives it unseen.
MARKER = "EFFICACY_RUN"
#: Seconds between SIGTERM and SIGKILL when a contestant is cut.
GRACE_S = 5.0
#: Seconds the final test run may take.
TEST_TIMEOUT_S = 120.0


@attrs.define
class RunRecord:
    """One contestant's run of one scenario."""

    scenario: str
    contestant: str
    completed: bool
    #: The test command passes on the final tree (run again by the harness).
    tests_pass: bool
    within_budget: bool
    iterations: int
    input_tokens: int
    output_tokens: int
    #: Model requests the server answered with a message.
    requests: int
    cost_usd: float
    wall_s: float
    #: Why it stopped: the contestant's own reason, or the harness's cut.
    stopped: str
    #: Processes of the run still alive after it ended or was cut (killed by the harness).
    leaked: list[str] = attrs.Factory(list)
    #: Exceptions of the behaviour model (a broken scenario; should be none).
    behaviour_errors: list[str] = attrs.Factory(list)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


def cost(input_tokens: int, output_tokens: int) -> float:
    return (input_tokens * PRICE_INPUT + output_tokens * PRICE_OUTPUT) / 1_000_000


def run_environment(ctx: RunContext, server: ms.ReplyServer, marker: str) -> dict[str, str]:
    """The run's whole environment: this interpreter's bin directory first on PATH (so
    ``python`` is one with pytest), everything per-user inside the run's directory."""
    tmp = ctx.root / "tmp"
    tmp.mkdir(exist_ok=True)
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
        "TERM": "dumb",
        "TMPDIR": str(tmp),
        "XDG_DATA_HOME": str(ctx.home / ".local" / "share"),
        "XDG_STATE_HOME": str(ctx.home / ".local" / "state"),
        "XDG_CACHE_HOME": str(ctx.home / ".cache"),
        "GIT_AUTHOR_NAME": "efficacy",
        "GIT_AUTHOR_EMAIL": "efficacy@loopctl.invalid",
        "GIT_COMMITTER_NAME": "efficacy",
        "GIT_COMMITTER_EMAIL": "efficacy@loopctl.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        MARKER: marker,
    }
    env.update(server.cli_env(ctx.home))
    return env


def make_project(ctx: RunContext, env: dict[str, str]) -> None:
    """The scenario's files (the earlier run's, for it) as a git repository with one commit."""
    ctx.project.mkdir(parents=True)
    ctx.scenario.write_project(ctx.project, earlier=ctx.earlier)
    gitignore = ctx.project / ".gitignore"
    if not gitignore.exists():
        gitignore.write_text("__pycache__/\n.pytest_cache/\n", encoding="utf-8")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "start"]):
        subprocess.run(argv, cwd=ctx.project, env=env, check=True, capture_output=True)


def model_server(scenario: Scenario, log_path: Path | None, cli: str = "claude") -> ms.ReplyServer:
    """A new model server on 127.0.0.1 with a new behaviour model of ``scenario``, speaking the
    API of the agent CLI ``cli``: the Messages API (Claude Code) or the Responses API (Codex)."""
    spec = scenario.spec.agent
    if cli == "codex":
        return ResponsesModelServer(
            behaviour=scenario.behaviour(),
            measured_usage=True,
            context_window=spec.context_window,
            log_path=log_path,
        )
    return ms.ScriptedModelServer(
        behaviour=scenario.behaviour(),
        measured_usage=True,
        context_window=spec.context_window,
        compact_reply=ms.prompt_too_long() if spec.compaction == "fails" else None,
        log_path=log_path,
    )


def run_one(
    scenario: Scenario,
    contestant: Contestant,
    *,
    cli: str,
    base: Path,
    keep: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> RunRecord:
    """Run ``contestant`` on ``scenario`` in a new directory under ``base`` (after the
    scenario's earlier run, when it has one); score it."""
    root = Path(tempfile.mkdtemp(prefix=f"{scenario.name}-{contestant.name}-", dir=base))
    ctx = RunContext(root=root, scenario=scenario, cli=cli)
    marker = uuid.uuid4().hex
    try:
        leaked: list[str] = []
        if scenario.spec.earlier is not None:
            earlier = attrs.evolve(ctx, earlier=True)
            with model_server(
                scenario, root / "earlier-requests.jsonl" if keep else None, contestant.cli
            ) as server:
                env = run_environment(earlier, server, marker)
                make_project(earlier, env)
                _race(contestant.argv(earlier), earlier, env, server)
                leaked = kill_marked(marker)
        with model_server(
            scenario, root / "requests.jsonl" if keep else None, contestant.cli
        ) as server:
            env = run_environment(ctx, server, marker)
            make_project(ctx, env)
            wall_s, cut = _race(contestant.argv(ctx), ctx, env, server)
            leaked += kill_marked(marker)
            totals = server.usage_totals()
            errors = [f"{type(e).__name__}: {e}" for e in server.behaviour_errors]
        passes = tests_pass(ctx, env)
        outcome = contestant.outcome(ctx)
        record = score(ctx, contestant.name, outcome, totals, wall_s, cut, passes)
        record.leaked, record.behaviour_errors = leaked, errors
        log(f"{scenario.name} / {contestant.name}: {record.stopped} ({root})")
        return record
    finally:
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def _race(
    argv: list[str], ctx: RunContext, env: dict[str, str], server: ms.ReplyServer
) -> tuple[float, str]:
    """Run the contestant until it exits, or cut it at the wall clock or the token budget.
    Returns the wall time and why it was cut ("" when it ended by itself)."""
    budget = ctx.scenario.spec.budget
    started = time.monotonic()
    with ctx.output.open("wb") as output:
        proc = subprocess.Popen(
            argv,
            cwd=ctx.project,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        cut = ""
        while not cut:
            try:
                proc.wait(timeout=0.25)
                break
            except subprocess.TimeoutExpired:
                pass
            spent = server.usage_totals()
            if spent["input_tokens"] + spent["output_tokens"] > budget.tokens:
                cut = f"cut: over the token budget ({budget.tokens:,})"
            elif time.monotonic() - started > budget.wall_clock_s:
                cut = f"cut: wall clock ({budget.wall_clock_s:g} s)"
        if cut:
            _end_session(proc)
        wall_s = time.monotonic() - started
        _signal_group(proc.pid, signal.SIGKILL)  # whatever of its group is left
    return wall_s, cut


def _end_session(proc: subprocess.Popen[bytes]) -> None:
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(proc.pid, signal.SIGKILL)
        proc.wait()


def _signal_group(pgid: int, signum: signal.Signals) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def kill_marked(marker: str) -> list[str]:
    """Kill every process whose environment carries ``MARKER=marker`` (Linux ``/proc``);
    returns each one's pid and command name."""
    wanted = f"{MARKER}={marker}".encode()
    killed = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            name = (entry / "comm").read_text().strip()
        except OSError:
            continue
        if wanted in environ.split(b"\0"):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                continue
            killed.append(f"{entry.name} {name}")
    return killed


def tests_pass(ctx: RunContext, env: dict[str, str]) -> bool:
    """The scenario's test command (or its ``check_cmd``), run again on the final tree, passes."""
    try:
        done = subprocess.run(
            ctx.scenario.spec.final_check,
            shell=True,
            cwd=ctx.project,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=TEST_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def score(
    ctx: RunContext,
    name: str,
    outcome: Outcome,
    totals: dict[str, int],
    wall_s: float,
    cut: str,
    passes: bool,
) -> RunRecord:
    """The record of a run that ended (``cut``: why the harness cut it, "" when it was not)."""
    spec = ctx.scenario.spec
    budget = spec.budget
    tokens_in, tokens_out = totals["input_tokens"], totals["output_tokens"]
    within = (
        not cut
        and outcome.iterations <= budget.iterations
        and tokens_in + tokens_out <= budget.tokens
        and wall_s <= budget.wall_clock_s
    )
    if spec.expect == "stop":
        done = within and outcome.iterations < budget.iterations
    else:
        done = passes and within
    return RunRecord(
        scenario=ctx.scenario.name,
        contestant=name,
        completed=done,
        tests_pass=passes,
        within_budget=within,
        iterations=outcome.iterations,
        input_tokens=tokens_in,
        output_tokens=tokens_out,
        requests=totals["requests"],
        cost_usd=round(cost(tokens_in, tokens_out), 4),
        wall_s=round(wall_s, 1),
        stopped=cut or outcome.stopped or "ended without saying why",
    )
