"""The contestants: how each is started on a scenario and how it says why it stopped.

* ``bare-fresh``: ``until TESTS; do claude -p "$GOAL"; done`` (:mod:`efficacy.bare_loop`);
* ``bare-continue``: the same, continuing one session (``claude -p --continue``);
* ``loopctl``: ``loopctl run`` with the claude agent and no plugins (``--no-plugins``);
* ``loopctl-plugins``: the same with the four first-party plugins at their defaults;
* ``codex-bare-fresh``, ``codex-bare-continue``, ``codex-loopctl``, ``codex-loopctl-plugins``:
  the same four with the Codex CLI (``codex exec "$GOAL"``, ``codex exec resume --last``, and
  loopctl's codex agent, its sandbox left to the run's own directory), on the scenarios that
  name ``codex`` among their ``clis``.

Each is one process tree started in its own session in the project directory, with the run's
environment (its own HOME, temporary directory and model server). loopctl gets the scenario's
budget as its own limits (``--max-iterations``, ``--max-tokens``, ``--wall-clock``); the bare loops
get the iteration budget as their cap, as a user's ``for i in $(seq N)`` would.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import attrs

from efficacy.scenario import Scenario

#: The first-party plugins, by the names they load under.
FIRST_PARTY_PLUGINS = ("context-errors", "context-monitor", "failure-classifier", "goal-guard")
BARE_LOOP = Path(__file__).with_name("bare_loop.py")


@attrs.frozen
class RunContext:
    """Where one contestant's run happens; everything is under ``root``."""

    root: Path
    scenario: Scenario
    #: The agent CLI's executable (Claude Code or Codex: the contestant's ``cli``).
    cli: str
    #: The scenario's earlier run (``[earlier]``), in a sibling project, not the scored one.
    earlier: bool = False

    @property
    def prefix(self) -> str:
        return "earlier-" if self.earlier else ""

    @property
    def project(self) -> Path:
        return self.root / f"{self.prefix}project"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def state(self) -> Path:
        """loopctl's state directory (outside the project, so the agent never sees it)."""
        return self.root / f"{self.prefix}state"

    @property
    def record(self) -> Path:
        """The bare loops' record: JSON lines as each call starts and ends."""
        return self.root / f"{self.prefix}bare.jsonl"

    @property
    def output(self) -> Path:
        """The contestant's stdout and stderr."""
        return self.root / f"{self.prefix}output.log"


@attrs.frozen
class Outcome:
    """What a contestant says of its own run."""

    iterations: int
    stopped: str


@attrs.frozen
class BareLoop:
    """A bare shell-style loop around ``claude -p`` (or ``codex exec``)."""

    name: str
    mode: str
    #: The agent CLI it loops: ``claude`` or ``codex``.
    cli: str = "claude"

    def argv(self, ctx: RunContext) -> list[str]:
        budget = ctx.scenario.spec.budget
        return [
            sys.executable, str(BARE_LOOP), "--mode", self.mode, "--kind", self.cli,
            "--cli", ctx.cli,
            "--test-cmd", ctx.scenario.spec.test_cmd,
            "--max-iterations", str(budget.iterations), "--record", str(ctx.record),
            "--", ctx.scenario.spec.goal,
        ]  # fmt: skip

    def outcome(self, ctx: RunContext) -> Outcome:
        lines = _jsonl(ctx.record)
        calls = len({line["iteration"] for line in lines if "iteration" in line})
        last = lines[-1] if lines and "stopped" in lines[-1] else None
        return Outcome(calls, str(last["stopped"]) if last else "")


@attrs.frozen
class Loopctl:
    """``loopctl run`` with the claude (or codex) agent, with or without the first-party
    plugins."""

    name: str
    plugins: bool
    #: The agent: ``claude`` or ``codex``.
    cli: str = "claude"

    def argv(self, ctx: RunContext) -> list[str]:
        spec = ctx.scenario.spec
        config = ctx.root / f"{ctx.prefix}loopctl.toml"
        lines = [f"[agents.{self.cli}]", f"command = {json.dumps(ctx.cli)}"]
        if self.cli == "codex":  # as the bare loops run it: the run's directory is the sandbox
            lines.append("bypass_sandbox = true")
        if self.plugins:
            lines += ["", "[plugins]", f"enable = {json.dumps(list(FIRST_PARTY_PLUGINS))}"]
        config.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return [
            sys.executable, "-m", "loopctl", "run", spec.goal,
            "--test-cmd", spec.test_cmd, "--agent", self.cli,
            "--max-iterations", str(spec.budget.iterations),
            "--max-tokens", str(spec.budget.tokens),
            "--wall-clock", f"{spec.budget.wall_clock_s:g}",
            "--state-dir", str(ctx.state), "--config", str(config), "--json",
            *([] if self.plugins else ["--no-plugins"]),
        ]  # fmt: skip

    def outcome(self, ctx: RunContext) -> Outcome:
        events = _jsonl(ctx.state / "events.jsonl")
        end = next((e for e in reversed(events) if e.get("type") == "loop.end"), None)
        if end is None:
            return Outcome(len(_jsonl(ctx.state / "iterations.jsonl")), "")
        reason = f"{end.get('status')}: {end.get('reason')}"
        return Outcome(int(end.get("iterations") or 0), reason)


Contestant = BareLoop | Loopctl

CONTESTANTS: dict[str, Contestant] = {
    c.name: c
    for c in (
        BareLoop("bare-fresh", "fresh"),
        BareLoop("bare-continue", "continue"),
        Loopctl("loopctl", plugins=False),
        Loopctl("loopctl-plugins", plugins=True),
        BareLoop("codex-bare-fresh", "fresh", cli="codex"),
        BareLoop("codex-bare-continue", "continue", cli="codex"),
        Loopctl("codex-loopctl", plugins=False, cli="codex"),
        Loopctl("codex-loopctl-plugins", plugins=True, cli="codex"),
    )
}


def _jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file (none when it is missing; bad lines skipped)."""
    if not path.exists():
        return []
    found = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found
