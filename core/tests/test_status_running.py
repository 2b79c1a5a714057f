"""``loopctl status`` from another process while a loop runs: the running iteration and what the
loop is doing, not the last finished iteration (issue 25: it said "iteration 0 of 20")."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_run import clean_env, loopctl

from loopctl.status import render_status, running_now

SCENARIO = """
[[turns]]
actions = [
  { read = "calc.py" },
  { run = "while [ ! -e go ]; do sleep 0.05; done" },
]
"""


def wait_for(condition: object, what: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert process.poll() is None, f"the loop ended before {what}"
        assert time.monotonic() < deadline, f"no {what} in 60 s"
        time.sleep(0.02)


@pytest.mark.slow
def test_status_shows_the_running_iteration_and_its_phase(tmp_path: Path) -> None:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "s.toml").write_text(SCENARIO)
    (tmp_path / "loopctl.toml").write_text('[agents.scripted]\nscenario = "s.toml"\n')
    events = tmp_path / ".loopctl" / "events.jsonl"
    command = ["run", "go", "--agent", "scripted", "--test-cmd", "false", "--no-plugins"]
    process = subprocess.Popen(
        [sys.executable, "-m", "loopctl", *command, "--max-iterations", "20", "--plain"],
        cwd=tmp_path,
        env=clean_env(HOME=str(tmp_path / "home")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(
            lambda: events.exists() and '"agent.start"' in events.read_text(),
            "agent.start",
            process,
        )
        shown = loopctl("status", cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert "iteration 1 (running) of 20," in shown.stdout, shown.stdout
        assert "\nnow: the agent is working (for " in shown.stdout, shown.stdout
        data = json.loads(loopctl("status", "--json", cwd=tmp_path).stdout)
        assert data["now"]["iteration"] == 1
        assert data["now"]["phase"] == "the agent is working"
    finally:
        (tmp_path / "go").touch()
        process.wait(timeout=120)
    ended = loopctl("status", cwd=tmp_path).stdout
    assert "(running)" not in ended, ended  # it ended (stuck)
    assert "now:" not in ended, ended


def test_the_phase_comes_from_the_latest_event_that_says_one() -> None:
    events = [
        {"type": "iteration.start", "iteration": 3, "ts": 1.0},
        {"type": "agent.start", "iteration": 3, "ts": 2.0},
        {"type": "agent.end", "iteration": 3, "ts": 3.0},
        {"type": "tests.start", "iteration": 3, "ts": 4.0},
        {"type": "context-monitor.fill", "iteration": 3, "ts": 5.0},
    ]
    assert running_now(events, 2) == {"iteration": 3, "phase": "running the tests", "since": 4.0}
    assert running_now(events[:1], 2)["phase"] == "starting the iteration"  # type: ignore[index]
    assert running_now([], 2) is None
    ended = [{"type": "iteration.end", "iteration": 3, "ts": 1.0}]
    assert running_now(ended, 3)["phase"] == (  # type: ignore[index]
        "iteration 3 ended; the next one is starting"
    )


def test_a_hand_written_now_does_not_break_the_status() -> None:
    data = {
        "state_dir": "x",
        "status": "running",
        "running": True,
        "pid": 1,
        "state": {"iteration": 2, "max_iterations": 5},
        "now": {"iteration": "three", "phase": "p", "since": float("nan")},
    }
    text = render_status(data)
    assert "iteration 2 of 5" in text, text
    assert "now: p\n" in text + "\n", text
