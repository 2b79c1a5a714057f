"""``loopctl resume`` keeps the rules a run was started with.

For every flag of ``loopctl run`` (and the ``LOOPCTL_*`` environment, the config file, a plugin's
run option), one loop runs uninterrupted, and the same loop is interrupted with SIGINT in its
first agent turn, then resumed with a plain ``loopctl resume``. Both must end the same way:
status, exit code, the iterations recorded, and the setting's own effect (the completion signal
still required, the wall-clock budget still ending the run, …).

The interruption is deterministic: the first agent turn waits for a gate file that exists in
the uninterrupted run and is created only after the SIGINT, so the test waits for the
``agent.start`` event (never a time) and the turn cannot have ended before the signal.
"""

from __future__ import annotations

import json
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest

from loopctl import state as st
from loopctl.model import EXIT_CODES
from loopctl.testing import python_test_cmd

GOAL = "Make add() return the sum of its arguments."
#: Stands for "wait for the gate file" in a case's turns.
GATE = {"gate": True}
SAY = {"say": "Looked at calc.py; not done yet."}
FIX = {"replace": "calc.py", "old": "a - b", "new": "a + b"}
DONE = {"done": True}
#: Every case's loop stops by this many iterations at the latest.
BOUND = 4

# --- agents that are not the scripted one ---------------------------------------------------------

#: ``--agent-cmd``: waits for the gate in iteration 1 (argv[1]), fixes the bug from iteration
#: argv[2] on.
COMMAND_AGENT = """\
import os, pathlib, sys, time
sys.stdin.read()
iteration = int(os.environ["LOOPCTL_ITERATION"])
while iteration == 1 and not pathlib.Path(sys.argv[1]).exists():
    time.sleep(0.02)
if iteration >= int(sys.argv[2]):
    pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
print("looked at calc.py")
"""
#: Speaks Claude Code's stream-json and reports a cost of 0.6 USD a turn (the scripted agent
#: reports none); waits for the gate (argv[1]) in iteration 1.
COSTLY_CLAUDE = """\
import json, os, pathlib, sys, time
sys.stdin.read()
while os.environ["LOOPCTL_ITERATION"] == "1" and not pathlib.Path(sys.argv[1]).exists():
    time.sleep(0.02)
print(json.dumps({"type": "system", "subtype": "init", "session_id": "s1", "model": "fake"}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False,
                  "result": "looked", "session_id": "s1", "total_cost_usd": 0.6}))
"""
#: A plugin with a run option (``--speed``) that sets its config; it reports the value.
OPTION_PLUGIN = """\
import attrs
from loopctl import RunOption, hookimpl


@attrs.define
class Config:
    speed: str = "normal"


@hookimpl
def register_config():
    return {"opt": Config}


@hookimpl
def register_run_options():
    return [RunOption("--speed", "plugins.opt.speed", help="How fast.", choices=("normal", "fast"))]


@hookimpl
def on_loop_start(loop):
    loop.emit("opt.speed", speed=loop.plugin_config("opt").speed)
"""


def _add_plugin(site: Path, name: str, source: str) -> None:
    """A real (tiny) installed distribution with a ``loopctl.plugins`` entry point."""
    module = f"loopctl_test_{name}"
    info = site / f"loopctl_{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: loopctl-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


# --- the cases ----------------------------------------------------------------------------------


@attrs.frozen
class Ctx:
    """What a case's parts are built from: the sandbox and this phase's files."""

    box: Any
    gate: Path
    scenario: Path

    def agent_script(self, name: str, source: str) -> str:
        path = self.box.root / name
        path.write_text(source)
        return (
            f"{shlex.quote(sys.executable)} {shlex.quote(str(path))} {shlex.quote(str(self.gate))}"
        )


@attrs.frozen
class Outcome:
    status: str
    exit_code: int
    iterations: list[int]
    effect: Any


def _events(box: Any) -> list[dict[str, Any]]:
    return list(box.events())


def _records(box: Any) -> list[dict[str, Any]]:
    return list(box.iterations())


def signal_missing(box: Any) -> int:
    """How often the tests passed but the completion signal was missing."""
    return sum(e["type"] == "loop.completion_signal_missing" for e in _events(box))


def end_reason(box: Any) -> tuple[str, str]:
    end = [e for e in _events(box) if e["type"] == "loop.end"][-1]
    return end["status"], end["reason"]


def agent_error_kinds(box: Any) -> list[str | None]:
    return [r["agent"]["error_kind"] for r in _records(box)]


def session_ids(box: Any) -> int:
    """How many agent sessions the recorded turns used."""
    return len({r["agent"]["session_id"] for r in _records(box)})


def started(field: str, *types: str) -> Callable[[Any], set[Any]]:
    """The values ``field`` took in the events of ``types``."""

    def effect(box: Any) -> set[Any]:
        values = [e[field] for e in _events(box) if e["type"] in types]
        return {tuple(v) if isinstance(v, list) else v for v in values}

    return effect


@attrs.frozen
class Case:
    id: str
    #: Flags of `loopctl run` besides the goal and --json.
    run: Callable[[Ctx], Sequence[str]]
    #: (status, exit code, iterations recorded) of the uninterrupted run.
    expected: tuple[str, int, list[int]]
    #: The setting's own effect, read from the finished loop's files.
    effect: Callable[[Any], Any]
    turns: Sequence[Sequence[Mapping[str, Any]]] = ([GATE, SAY], [FIX, DONE])
    #: ``loopctl.toml`` as lines; None for none at all.
    toml: Callable[[Ctx], Sequence[str] | None] = lambda ctx: base_toml(ctx)
    #: LOOPCTL_* variables `run` gets; `resume` gets none of them.
    env: Callable[[Ctx], Mapping[str, str]] = lambda ctx: {}
    #: Other variables, given to both (where a plugin is installed, say).
    both_env: Callable[[Ctx], Mapping[str, str]] = lambda ctx: {}
    #: Flags `resume` needs to find the loop (not settings).
    resume: Sequence[str] = ()
    #: Done between the interruption and `resume` (say, the config file changes).
    meanwhile: Callable[[Ctx], None] | None = None
    #: Part of a ``loop.warning`` the resume must give (what ``meanwhile`` changed, named).
    warns: str | None = None
    state_dir: str = st.DEFAULT_STATE_DIR


def base_toml(
    ctx: Ctx, *, agent: bool = True, test_cmd: bool = True, limit: bool = True, extra: str = ""
) -> list[str]:
    lines = ['agent = "scripted"'] if agent else []
    if test_cmd:
        lines.append(f"test_cmd = {json.dumps(python_test_cmd())}")
    if extra:
        lines.append(extra)
    lines += ["[limits]", f"max_iterations = {BOUND}"] if limit else []
    lines += ["[stuck]", "enabled = false"]
    lines += ["[agents.scripted]", f"scenario = {json.dumps(str(ctx.scenario))}"]
    return lines


NO_PLUGINS = ("--no-plugins",)
NEVER_FIXED = ([GATE, SAY], [SAY])
COMPLETE = ("complete", 0, [1, 2])


def _write_ci_toml(ctx: Ctx) -> str:
    path = ctx.box.root / "ci.toml"
    path.write_text("\n".join(base_toml(ctx, extra='completion_signal = "LOOPCTL_DONE"')) + "\n")
    return str(path)


def _drop_signal_from_the_config(ctx: Ctx) -> None:
    ctx.box.project.write("loopctl.toml", "\n".join(base_toml(ctx)) + "\n")


def _plugin_site(ctx: Ctx) -> dict[str, str]:
    site = ctx.box.root / "site"
    if not site.exists():
        _add_plugin(site, "opt", OPTION_PLUGIN)
    return {"PYTHONPATH": str(site)}


def speeds(box: Any) -> tuple[set[str], bool]:
    """The speeds the plugin saw, and whether it saw one at each start (run and resume)."""
    events = _events(box)
    seen = [e["speed"] for e in events if e["type"] == "opt.speed"]
    starts = [e for e in events if e["type"] in ("loop.start", "loop.resume")]
    return set(seen), len(seen) == len(starts)


#: Turns for the completion-signal cases: the fix comes in turn 1, the signal only in turn 3.
SIGNAL_LATE = ([GATE, FIX], [SAY], [DONE])
SIGNALLED = ("complete", 0, [1, 2, 3])

CASES = [
    Case(
        "completion-signal",
        lambda ctx: ["--completion-signal", "LOOPCTL_DONE", *NO_PLUGINS],
        SIGNALLED,
        signal_missing,
        turns=SIGNAL_LATE,
    ),
    Case(
        "wall-clock",
        # The budget outlasts the time before the interruption (which counts) by far.
        lambda ctx: ["--wall-clock", "8", *NO_PLUGINS],
        ("wall_clock", EXIT_CODES["wall_clock"], [1]),
        end_reason,
        turns=([GATE, {"sleep": 8}], [SAY]),
    ),
    Case(
        "agent-timeout",
        # long enough for a quick turn on a loaded machine
        lambda ctx: ["--agent-timeout", "8", *NO_PLUGINS],
        ("complete", 0, [1, 2, 3]),
        agent_error_kinds,
        turns=([GATE, SAY], [{"sleep": 60}], [FIX, DONE]),
    ),
    Case(
        "max-restarts",
        lambda ctx: ["--max-restarts", "0", *NO_PLUGINS],
        ("max_restarts", EXIT_CODES["max_restarts"], [1, 2]),
        end_reason,
        turns=([GATE, SAY], [{"exit": 1}], [FIX, DONE]),
    ),
    Case(
        "max-tokens",
        lambda ctx: ["--max-tokens", "1000", *NO_PLUGINS],
        ("budget", EXIT_CODES["budget"], [1, 2]),
        end_reason,
        turns=(
            [GATE, {"usage": {"input_tokens": 500, "output_tokens": 100}}],
            [{"usage": {"input_tokens": 500, "output_tokens": 100}}],
        ),
    ),
    Case(
        "max-cost",
        lambda ctx: ["--max-cost", "1.0", *NO_PLUGINS],
        ("budget", EXIT_CODES["budget"], [1, 2]),
        end_reason,
        toml=lambda ctx: [
            'agent = "claude"',
            f"test_cmd = {json.dumps(python_test_cmd())}",
            "[limits]",
            f"max_iterations = {BOUND}",
            "[stuck]",
            "enabled = false",
            "[agents.claude]",
            f"command = {json.dumps(ctx.agent_script('claude.py', COSTLY_CLAUDE))}",
        ],
    ),
    Case(
        "max-iterations",
        lambda ctx: ["--max-iterations", "3", *NO_PLUGINS],
        ("max_iterations", EXIT_CODES["max_iterations"], [1, 2, 3]),
        end_reason,
        turns=NEVER_FIXED,
        toml=lambda ctx: base_toml(ctx, limit=False),
    ),
    Case(
        "session",
        lambda ctx: ["--session", "resume", *NO_PLUGINS],
        ("complete", 0, [1, 2, 3]),
        session_ids,
        turns=([GATE, SAY], [SAY], [FIX, DONE]),
    ),
    Case(
        "test-cmd",
        lambda ctx: ["--test-cmd", python_test_cmd(), *NO_PLUGINS],
        COMPLETE,
        started("command", "tests.start"),
        toml=lambda ctx: base_toml(ctx, test_cmd=False),
    ),
    Case(
        "agent",
        lambda ctx: ["--agent", "scripted", *NO_PLUGINS],
        COMPLETE,
        started("agent", "agent.start"),
        toml=lambda ctx: base_toml(ctx, agent=False),
    ),
    Case(
        "agent-cmd",
        lambda ctx: [
            "--agent-cmd",
            f"{ctx.agent_script('agent.py', COMMAND_AGENT)} 2",
            *NO_PLUGINS,
        ],
        COMPLETE,
        started("agent", "agent.start"),
        toml=lambda ctx: base_toml(ctx, agent=False),
    ),
    Case(
        "config",
        lambda ctx: ["--config", _write_ci_toml(ctx), *NO_PLUGINS],
        SIGNALLED,
        signal_missing,
        turns=SIGNAL_LATE,
        toml=lambda ctx: None,
    ),
    Case(
        "no-plugins",
        lambda ctx: list(NO_PLUGINS),
        COMPLETE,
        started("plugins", "loop.start", "loop.resume"),
    ),
    Case(
        "plugin-option",
        lambda ctx: ["--speed", "fast"],
        COMPLETE,
        speeds,
        # only the test's plugin: LOOPCTL_PLUGINS is a setting, the other variable is not
        env=lambda ctx: {"LOOPCTL_PLUGINS": "opt", "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": "1"},
        both_env=_plugin_site,
    ),
    Case(
        "state-dir",
        lambda ctx: ["--state-dir", "elsewhere", *NO_PLUGINS],
        COMPLETE,
        started("test_cmd", "loop.start", "loop.resume"),
        resume=("--state-dir", "elsewhere"),
        state_dir="elsewhere",
    ),
    Case(
        "goal-file",
        lambda ctx: ["--goal-file", str(ctx.box.root / "goal.md"), *NO_PLUGINS],
        COMPLETE,
        started("goal", "loop.start", "loop.resume"),
    ),
    Case(
        "env",
        lambda ctx: list(NO_PLUGINS),
        SIGNALLED,
        signal_missing,
        turns=SIGNAL_LATE,
        env=lambda ctx: {"LOOPCTL_COMPLETION_SIGNAL": "LOOPCTL_DONE"},
    ),
    Case(
        "config-file-edited",
        lambda ctx: list(NO_PLUGINS),
        SIGNALLED,
        signal_missing,
        turns=SIGNAL_LATE,
        toml=lambda ctx: base_toml(ctx, extra='completion_signal = "LOOPCTL_DONE"'),
        meanwhile=_drop_signal_from_the_config,
        warns='completion_signal stays "LOOPCTL_DONE" (default now: null)',
    ),
]


# --- running a case -----------------------------------------------------------------------------


def _prepare(box: Any, case: Case, phase: str, *, gate_open: bool) -> Ctx:
    """A fresh start for one phase: no state, the bug back, this phase's scenario and gate."""
    box.state_dir = box.path / case.state_dir
    shutil.rmtree(box.state_dir, ignore_errors=True)
    box.project.write("calc.py", box.BUGGY_CALC)
    ctx = Ctx(box=box, gate=box.root / f"gate-{phase}", scenario=box.root / f"{phase}.json")
    if gate_open:
        ctx.gate.touch()
    gate = {"run": f"while [ ! -e {shlex.quote(str(ctx.gate))} ]; do sleep 0.02; done"}
    box.scenario = ctx.scenario
    box.script([[gate if a is GATE else a for a in turn] for turn in case.turns], repeat_last=True)
    (box.root / "goal.md").write_text(GOAL + "\n")
    toml = case.toml(ctx)
    config = box.path / "loopctl.toml"
    if toml is None:
        config.unlink(missing_ok=True)
    else:
        box.project.write("loopctl.toml", "\n".join(toml) + "\n")
    return ctx


def _argv(box: Any, ctx: Ctx, case: Case) -> list[str]:
    goal = [] if any(a == "--goal-file" for a in case.run(ctx)) else [GOAL]
    return box.argv("run", *goal, "--json", *case.run(ctx))


def _spawn(box: Any, argv: list[str], env: Mapping[str, str], name: str) -> subprocess.Popen[bytes]:
    out = box.out_dir / f"{len(box.spawned) + 1:03d}-{name}.out"
    with open(out, "wb") as stream:
        proc = subprocess.Popen(
            argv,
            cwd=box.path,
            env={**box.env(), **env},
            stdin=subprocess.DEVNULL,
            stdout=stream,
            stderr=subprocess.STDOUT,
            preexec_fn=_sigint_default,
        )
    box.outputs[proc.pid] = out
    box.spawned.append(proc)
    return proc


def _sigint_default() -> None:  # pragma: no cover - runs in the child before exec
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _outcome(box: Any, case: Case, exit_code: int) -> Outcome:
    state = box.loop_state()
    iterations = [r["iteration"] for r in _records(box)]
    return Outcome(state.status, exit_code, iterations, case.effect(box))


def start_uninterrupted(box: Any, case: Case) -> Callable[[], Outcome]:
    """Start the uninterrupted run; the returned function waits for it and reads its outcome
    (the interrupted run goes on meanwhile in another sandbox: half of a case's time is the
    wall-clock budget or the agent timeout running out, once in each run)."""
    ctx = _prepare(box, case, "whole", gate_open=True)
    proc = _spawn(box, _argv(box, ctx, case), {**case.env(ctx), **case.both_env(ctx)}, "run")
    return lambda: _outcome(box, case, proc.wait(timeout=120))


def run_interrupted_then_resumed(box: Any, case: Case) -> tuple[Outcome, str]:
    """The outcome, and what `resume` printed."""
    ctx = _prepare(box, case, "parts", gate_open=False)
    proc = _spawn(box, _argv(box, ctx, case), {**case.env(ctx), **case.both_env(ctx)}, "run")
    box.wait_for_event("agent.start", proc, timeout=60)  # iteration 1, waiting at the gate
    proc.send_signal(signal.SIGINT)
    code = proc.wait(timeout=60)
    assert code == EXIT_CODES["interrupted"], f"{case.id}: run exited {code}: {box.output_of(proc)}"
    assert box.loop_state().status == "interrupted"
    if case.meanwhile is not None:
        case.meanwhile(ctx)
    ctx.gate.touch()
    resumed = _spawn(box, box.argv("resume", "--json", *case.resume), case.both_env(ctx), "resume")
    code = resumed.wait(timeout=120)
    return _outcome(box, case, code), box.output_of(resumed)


@pytest.fixture
def another_sandbox(sandbox: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A second sandbox like ``sandbox``, for a run beside its run."""
    box = type(sandbox)(tmp_path_factory.mktemp("another"))
    try:
        yield box
    finally:
        box.cleanup()


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_an_interrupted_and_resumed_run_ends_like_an_uninterrupted_one(
    sandbox: Any, another_sandbox: Any, case: Case
) -> None:
    finish_whole = start_uninterrupted(another_sandbox, case)
    parts, printed = run_interrupted_then_resumed(sandbox, case)
    whole = finish_whole()
    status, exit_code, iterations = case.expected
    assert (whole.status, whole.exit_code, whole.iterations) == (status, exit_code, iterations)
    assert parts == whole, f"{case.id}: resume printed:\n{printed}"
    assert "loopctl: resume: changed" not in printed  # nothing was asked to change
    resume_event = next(e for e in sandbox.events() if e["type"] == "loop.resume")
    assert resume_event["changed"] == {}
    if case.warns is not None:  # the config file edited meanwhile: named, and not used
        warnings = [e["message"] for e in sandbox.events() if e["type"] == "loop.warning"]
        assert any(case.warns in warning for warning in warnings), warnings


# --- what resume may change -----------------------------------------------------------------------


def _interrupted(box: Any, case: Case) -> Ctx:
    ctx = _prepare(box, case, "parts", gate_open=False)
    proc = _spawn(box, _argv(box, ctx, case), case.env(ctx), "run")
    box.wait_for_event("agent.start", proc, timeout=60)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == EXIT_CODES["interrupted"], box.output_of(proc)
    ctx.gate.touch()
    return ctx


def _resume(box: Any, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        box.argv("resume", "--json", *flags),
        cwd=box.path,
        env=box.env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _limits(box: Any) -> dict[str, Any]:
    settings = box.loop_state().settings
    assert settings is not None
    assert settings.config is not None
    limits: dict[str, Any] = settings.config["limits"]
    return limits


def test_resume_changes_only_what_it_is_told_and_says_so(sandbox: Any) -> None:
    box = sandbox
    case = Case(
        "told",
        lambda ctx: ["--max-iterations", "2", "--agent-timeout", "40", *NO_PLUGINS],
        ("max_iterations", 10, [1, 2]),
        end_reason,
        turns=NEVER_FIXED,
        toml=lambda ctx: base_toml(ctx, limit=False),
    )
    _interrupted(box, case)

    done = _resume(box, "--max-iterations", "3", "--wall-clock", "500")
    assert done.returncode == EXIT_CODES["max_iterations"], done.stderr
    assert [r["iteration"] for r in box.iterations()] == [1, 2, 3]
    said = "loopctl: resume: changed limits.max_iterations from 2 to 3, limits.wall_clock_s from "
    assert f"{said}14400.0 to 500.0\n" in done.stderr
    (event,) = [e for e in box.events() if e["type"] == "loop.resume"]
    assert event["changed"] == {
        "limits.max_iterations": {"from": 2, "to": 3},
        "limits.wall_clock_s": {"from": 14400.0, "to": 500.0},
    }
    assert event["max_iterations"] == 3
    limits = _limits(box)
    assert (limits["max_iterations"], limits["wall_clock_s"], limits["agent_timeout_s"]) == (
        3,
        500.0,
        40.0,
    )

    # What one resume changed, the next keeps: only the new change is reported (this time
    # from a config file given explicitly: the keys it sets are taken).
    extra = box.root / "more.toml"
    extra.write_text("[limits]\nmax_iterations = 4\n")
    again = _resume(box, "--config", str(extra))
    assert again.returncode == EXIT_CODES["max_iterations"], again.stderr
    assert [r["iteration"] for r in box.iterations()] == [1, 2, 3, 4]
    assert "changed limits.max_iterations from 3 to 4\n" in again.stderr
    last = [e for e in box.events() if e["type"] == "loop.resume"][-1]
    assert last["changed"] == {"limits.max_iterations": {"from": 3, "to": 4}}
    assert (_limits(box)["wall_clock_s"], _limits(box)["agent_timeout_s"]) == (500.0, 40.0)
    assert not [e for e in box.events() if e["type"] == "loop.warning"]


def test_resume_can_be_given_another_agent_command(sandbox: Any) -> None:
    box = sandbox
    case = Case(
        "agent-cmd",
        lambda ctx: [
            "--agent-cmd",
            f"{ctx.agent_script('agent.py', COMMAND_AGENT)} 99",  # never fixes
            *NO_PLUGINS,
        ],
        COMPLETE,
        end_reason,
        toml=lambda ctx: base_toml(ctx, agent=False),
    )
    ctx = _interrupted(box, case)
    before = box.loop_state().settings
    assert before is not None
    fixer = f"{ctx.agent_script('fixer.py', COMMAND_AGENT)} 1"

    done = _resume(box, "--agent-cmd", fixer)
    assert done.returncode == 0, done.stderr
    assert box.project.read("calc.py") == box.FIXED_CALC
    (event,) = [e for e in box.events() if e["type"] == "loop.resume"]
    assert event["changed"] == {"agent_cmd": {"from": before.agent_cmd, "to": fixer}}
    assert f"loopctl: resume: changed agent_cmd from {json.dumps(before.agent_cmd)}" in done.stderr
    after = box.loop_state().settings
    assert after is not None
    assert (after.agent, after.agent_cmd) == ("command", fixer)
