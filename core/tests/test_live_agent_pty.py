"""What the live view shows of the agent, in a real (pseudo-)terminal: each turn's actions as
they happen, the agent's last words, the panel's tokens while the turn runs; ``-v`` for the
whole stream, ``-q`` for the loop's lines only (issue 25)."""

from __future__ import annotations

import os
import select
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_terminal_pty import STAMP, run_in_terminal, screen, stamped, start_in_terminal

REPLY = "I think the test is wrong; leaving the code as is."
SCENARIO = f'''
[[turns]]
actions = [
  {{ say = "Reading the failing test first." }},
  {{ read = "calc.py" }},
  {{ replace = "calc.py", old = "a - b", new = "a + b" }},
  {{ run = "echo checked" }},
  {{ usage = {{ input_tokens = 5000, output_tokens = 50 }} }},
  {{ run = "while [ ! -e go ]; do sleep 0.05; done" }},
  {{ say = "{REPLY}\\nThe second line is not shown." }},
]
'''
FAILING = f"{sys.executable} -c 'raise SystemExit(1)'"
RUN = ["run", "make it pass", "--agent", "scripted", "--test-cmd", FAILING]
ONE = [*RUN, "--max-iterations", "1", "--no-plugins"]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (path / "s.toml").write_text(SCENARIO)
    (path / "loopctl.toml").write_text('[agents.scripted]\nscenario = "s.toml"\n')
    (path / "go").touch()  # the turn's waiting command ends at once unless a test removes it
    return path


def story(text: str) -> list[str]:
    return [STAMP.sub("", line) for line in stamped(screen(text))]


@pytest.mark.slow
def test_the_scrollback_shows_what_the_agent_did_and_said(workdir: Path) -> None:
    text, code = run_in_terminal(ONE, workdir)
    assert code == 10, text
    lines = story(text)
    actions = [line for line in lines if line.startswith("agent ") and "working" not in line]
    assert actions[:4] == [
        "agent read calc.py",
        "agent edited calc.py",
        "agent ran `echo checked`",
        "agent ran `while [ ! -e go ]; do sleep 0.05; done`",
    ], lines
    said = lines.index(f"agent said: {REPLY}")
    assert lines[said + 1].startswith("agent done in "), lines  # said, then the turn's line
    # only the first line is the turn's "said" line (the failed approach it notes may quote more)
    assert not [line for line in lines if line.startswith("agent said: The second line")], lines
    assert lines.index("agent read calc.py") < lines.index("running tests: " + FAILING)


@pytest.mark.slow
def test_verbose_shows_the_whole_stream(workdir: Path) -> None:
    text, code = run_in_terminal(["-v", *ONE], workdir)
    assert code == 10, text
    lines = story(text)
    assert "agent says: Reading the failing test first." in lines, lines
    assert f"agent says: {REPLY}" in lines
    assert "agent says: The second line is not shown." in lines  # every line, with -v
    assert "agent ran `echo checked`" in lines
    assert lines[lines.index("agent ran `echo checked`") + 1] == "  → exit 0: checked", lines
    assert not [line for line in lines if line.startswith("agent said:")]  # said already
    # -v's debug lines: each once, above the panel (not drawn over by it)
    shown = "\n".join(screen(text))
    ended = "loopctl: debug: loopctl.tests: the test command ended: exit 1"
    assert shown.count(ended) == 2, shown  # before the first turn, and after it
    assert shown.count("loopctl: debug: loopctl.agent: starting the scripted agent") == 1, shown


@pytest.mark.slow
def test_quiet_shows_the_loops_lines_only(workdir: Path) -> None:
    text, code = run_in_terminal(["-q", *ONE], workdir)
    assert code == 10, text
    lines = story(text)
    assert "iteration 1" in lines, lines
    assert any(line.startswith("agent done in ") for line in lines), lines
    assert not [
        line for line in lines if line.startswith(("agent read", "agent said", "agent ran"))
    ]


def run_until(
    args: list[str], cwd: Path, seen: Callable[[str], bool], then: Callable[[], None]
) -> tuple[str, int]:
    """Run ``loopctl ARGS`` in a pseudo-terminal; when what it wrote so far makes ``seen``
    true, call ``then`` (once); read on until it exits."""
    main, process = start_in_terminal(args, cwd)
    output, done, deadline = bytearray(), False, time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if not ready:
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
            if not done and seen(output.decode("utf-8", errors="replace")):
                done = True
                then()
    finally:
        os.close(main)
        if process.poll() is None:
            process.kill()
        code = process.wait()
    assert done, output.decode("utf-8", errors="replace")
    return output.decode("utf-8", errors="replace"), code


@pytest.mark.slow
def test_the_panel_counts_the_turns_tokens_while_it_runs(workdir: Path) -> None:
    (workdir / "go").unlink()  # the turn waits in its last command until the test says go
    shown: list[list[str]] = []

    def tokens_shown(text: str) -> bool:
        lines = screen(text)
        if any("5,050 (this turn so far)" in line for line in lines):
            shown.append(lines)
            return True
        return False

    text, code = run_until(ONE, workdir, tokens_shown, (workdir / "go").touch)
    assert code == 10, text
    during = shown[0]
    assert any(line.startswith("│ tokens") and "5,050" in line for line in during), during
    assert "tokens      unknown" not in "\n".join(during)
    # the actions were on screen while the turn ran, before the agent's end
    running = [STAMP.sub("", line) for line in stamped(during)]
    assert "agent ran `while [ ! -e go ]; do sleep 0.05; done`" in running, running
    assert not [line for line in running if line.startswith("agent done")], running
    final = screen(text)
    assert any(line.startswith("│ tokens") and "5,050" in line for line in final), final
