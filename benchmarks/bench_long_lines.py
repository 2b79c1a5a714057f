"""One very long line: ``loopctl status`` on a journal with a 50 MB line, and an agent printing a
200 MB line.

The fault campaign of issue 12 found both costing far more than the line: ``status`` took 17.7 s
on one 50 MB line (the tail reader prepended every 64 KB chunk to a growing buffer and split it
again: quadratic), and the supervisor held a 200 MB line whole (RSS 629 MB).

- **status**: ``collect_status`` on a state directory whose ``iterations.jsonl`` ends with a
  valid 50 MB iteration record. Baseline in the same run: reading the file once (``read_bytes``,
  ``splitlines``, ``json.loads`` of each line), the least any reader of that record pays. The
  0.2.0 tail reader (kept below as the approach avoided) is timed once on the same file.
- **supervisor**: the peak RSS (``VmHWM``, Linux) of a process that runs one agent turn (``run_turn``) whose agent
  prints a 200 MB line between two ordinary ones, with today's limits (lines cut at 16 MiB as
  they stream) and with 0.2.0's (a line was held whole up to 256 MiB). Baselines in the same
  run: the same turn with the same 200 MB as 200,000 short lines, and a process that only
  imports loopctl.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

from loopctl import state as st
from loopctl.status import collect_status

LINE_MB = 50
AGENT_LINE_MB = 200
ROUNDS = 3


def best_s(work: Callable[[], object], rounds: int = ROUNDS) -> float:
    """The best of a few rounds: a busy machine slows some rounds, not all."""
    timings = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        timings.append(time.perf_counter() - started)
    return min(timings)


def tail_before(path: Path, n: int, chunk_size: int = 65536) -> list[dict[str, Any]]:
    """``tail_jsonl`` as 0.2.0 had it: each chunk prepended to the pending bytes, then the whole
    pending buffer split again (quadratic in the length of one line)."""
    found: list[dict[str, Any]] = []
    with open(path, "rb") as stream:
        position = stream.seek(0, os.SEEK_END)
        pending = b""
        while position > 0 and len(found) < n:
            size = min(chunk_size, position)
            position -= size
            stream.seek(position)
            pending = stream.read(size) + pending
            first, *complete = pending.split(b"\n")
            pending = first
            for raw in reversed(complete):
                if raw.strip():
                    found.append(json.loads(raw))
                    if len(found) == n:
                        break
    found.reverse()
    return found


def make_state_dir(root: Path) -> Path:
    state_dir = root / ".loopctl"
    state_dir.mkdir()
    st.write_loop_state(
        state_dir / st.LOOP_STATE_FILE,
        st.LoopState(goal="g", original_goal="g", iteration=2, status="max_iterations"),
    )
    small = {"iteration": 1, "restarts": 0, "started_at": 1.0, "tests_passed": False}
    huge = {**small, "iteration": 2, "annotations": {"notes": "x" * (LINE_MB * 1_000_000)}}
    with open(state_dir / st.ITERATIONS_FILE, "w", encoding="utf-8") as stream:
        stream.write(json.dumps(small) + "\n" + json.dumps(huge) + "\n")
    (state_dir / st.EVENTS_FILE).write_text('{"type": "loop.end", "ts": 1.0}\n')
    return state_dir


def read_once(path: Path) -> list[Any]:
    return [json.loads(raw) for raw in path.read_bytes().splitlines() if raw.strip()]


def status_figures() -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        state_dir = make_state_dir(Path(tmp))
        journal = state_dir / st.ITERATIONS_FILE
        data = collect_status(state_dir)
        assert data["last_iteration"]["iteration"] == 2, "the long record was not read"
        assert data["problems"] == [], data["problems"]
        baseline = best_s(lambda: read_once(journal))
        measured = best_s(lambda: collect_status(state_dir))
        before = best_s(lambda: tail_before(journal, 5), rounds=1)
    return [
        Figure(f"status on a {LINE_MB} MB journal line", measured, "s"),
        Figure("  baseline: read the file once", baseline, "s", note="same run"),
        Figure(
            "  status / one read",
            measured / baseline,
            "x",
            target="<= 3",
            ok=measured / baseline <= 3,
            note="linear: costs about what the line costs",
        ),
        Figure(
            "  0.2.0 tail reader, same file",
            before,
            "s",
            note="the approach avoided (17.7 s in the issue); one round",
        ),
    ]


AGENT = r"""
import json, sys
mode, size = sys.argv[1], int(sys.argv[2])
out = sys.stdout
out.write(json.dumps({"type": "init", "session_id": "s", "model": "m"}) + "\n")
if mode == "one_line":
    piece = "y" * (1 << 20)
    out.write('{"type": "text", "text": "')
    for _ in range(size // len(piece)):
        out.write(piece)
    out.write('"}\n')
else:  # the same bytes as short lines
    line = json.dumps({"type": "text", "text": "y" * 970}) + "\n"
    for _ in range(size // len(line)):
        out.write(line)
out.write(json.dumps({"type": "text", "text": "after"}) + "\n")
out.write(json.dumps({"type": "result", "is_error": False, "session_id": "s"}) + "\n")
"""

TURN = r"""
import json, sys
from pathlib import Path
from typing import ClassVar
from loopctl.agents.base import AgentAdapter, Invocation, StreamParser, TurnRequest
from loopctl.agents.scripted import ScriptedParser
from loopctl.agents.supervisor import Supervision, run_turn

agent_code, mode, size, cap, workdir = sys.argv[1:6]

class Agent(AgentAdapter):
    name: ClassVar[str] = "bench"
    def invocation(self, request: TurnRequest) -> Invocation:
        return Invocation([sys.executable, "-c", agent_code, mode, size])
    def new_parser(self) -> StreamParser:
        return ScriptedParser()

if mode == "idle":
    result_ok, text = True, ""
else:
    limits = Supervision(max_line_bytes=int(cap), timeout_s=600, idle_timeout_s=600)
    request = TurnRequest(prompt="go", workdir=Path(workdir), iteration=1)
    result = run_turn(Agent(), request, supervision=limits)
    result_ok, text = result.outcome.ok, result.final_text
# VmHWM: the peak RSS of this address space (ru_maxrss would carry the parent's over exec)
status = Path("/proc/self/status").read_text()
kb = int(next(l for l in status.splitlines() if l.startswith("VmHWM:")).split()[1])
print(json.dumps({"maxrss_mb": kb / 1024, "ok": result_ok, "final_text": text[-20:]}))
"""


def peak_rss_mb(mode: str, cap: int, workdir: str) -> float:
    size = str(AGENT_LINE_MB * 1_000_000)
    done = subprocess.run(
        [sys.executable, "-c", TURN, AGENT, mode, size, str(cap), workdir],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"], result
    assert mode == "idle" or result["final_text"].endswith("after"), result
    return float(result["maxrss_mb"])


def supervisor_figures() -> list[Figure]:
    from loopctl.agents.supervisor import Supervision

    cap = Supervision().max_line_bytes
    with tempfile.TemporaryDirectory() as workdir:
        now = peak_rss_mb("one_line", cap, workdir)
        before = peak_rss_mb("one_line", 256 * 1024 * 1024, workdir)
        short = peak_rss_mb("short_lines", cap, workdir)
        idle = peak_rss_mb("idle", cap, workdir)
    return [
        Figure(
            f"supervisor peak RSS, one {AGENT_LINE_MB} MB line",
            now,
            "MB",
            target="<= 100 MB",
            ok=now <= 100,
            note=f"lines cut at {cap >> 20} MiB",
        ),
        Figure(
            "  0.2.0 limits (line held whole)", before, "MB", note="same run; 629 MB in the issue"
        ),
        Figure(f"  baseline: {AGENT_LINE_MB} MB as short lines", short, "MB", note="same run"),
        Figure("  baseline: python + loopctl imported", idle, "MB", note="same run"),
    ]


def figures() -> list[Figure]:
    return status_figures() + supervisor_figures()


if __name__ == "__main__":
    print_table(figures())
