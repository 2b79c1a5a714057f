"""What a person sees in a real terminal: ``loopctl demo`` run under a pseudo-terminal.

The terminal is modelled (:func:`screen`): text, carriage returns, line feeds, cursor up and
line erasing, which is all rich's live display uses. What the model holds at the end is what
the terminal's screen and scrollback hold: every event's line printed above the live panel,
once, and the final panel below them.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process  # a real pseudo-terminal: the OS's, run once

pty = pytest.importorskip("pty")
fcntl = pytest.importorskip("fcntl")
termios = pytest.importorskip("termios")

#: A CSI sequence (parameters, final byte), or another two-byte escape.
CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
#: An SGR sequence that sets a colour (foreground, background, 256 or true colour).
COLOUR = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-9]|4[0-9]|9[0-7]|10[0-7])(?:;[0-9;]*)?m")
STAMP = re.compile(r"^\[\d\d:\d\d:\d\d\] ")
COLUMNS = 110


def screen(text: str) -> list[str]:
    """The lines a terminal holds (screen and scrollback) after it is sent ``text``."""
    lines: list[list[str]] = [[]]
    row = col = 0
    pos = 0
    while pos < len(text):
        match = CSI.match(text, pos)
        if match:
            pos = match.end()
            params, final = match.group(1) or "", match.group(2)
            if final == "A":  # cursor up
                row = max(0, row - int(params or 1))
            elif final == "K" and params == "2":  # erase the line
                lines[row] = []
            elif final == "K" and params in ("", "0"):  # erase to its end
                del lines[row][col:]
            continue
        char = text[pos]
        pos += 1
        if char == "\r":
            col = 0
        elif char == "\n":
            row, col = row + 1, 0
            while len(lines) <= row:
                lines.append([])
        elif char >= " ":
            line = lines[row]
            line.extend(" " * (col - len(line)))
            if col < len(line):
                line[col] = char
            else:
                line.append(char)
            col += 1
    return ["".join(line).rstrip() for line in lines]


def private_home(home: Path) -> dict[str, str]:
    """A home of the test's own: the demo's failure memory never lands in the user's."""
    home.mkdir(exist_ok=True)
    return {
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "LOOPCTL_FAILURE_MEMORY": str(home / "failures.sqlite3"),
    }


def start_in_terminal(
    args: list[str], cwd: Path, **env: str
) -> tuple[int, subprocess.Popen[bytes]]:
    """Start ``loopctl ARGS`` with a pseudo-terminal as its stdin, stdout and stderr; the
    terminal's other end (to read) and the process."""
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("LOOPCTL_") and key not in ("NO_COLOR", "FORCE_COLOR", "COLUMNS")
    }
    environ.update(private_home(cwd.parent / "home"), TERM="xterm-256color", **env)
    main, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, COLUMNS, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "loopctl", *args],
        stdin=child,
        stdout=child,
        stderr=child,
        cwd=cwd,
        env=environ,
        start_new_session=True,
    )
    os.close(child)
    return main, process


def run_in_terminal(args: list[str], cwd: Path, **env: str) -> tuple[str, int]:
    """Run ``loopctl ARGS`` in a pseudo-terminal (:func:`start_in_terminal`); read all it
    writes until it exits (the terminal's other end closes), then its exit status."""
    main, process = start_in_terminal(args, cwd, **env)
    output = bytearray()
    try:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: every holder of the terminal's other end has closed it
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(main)
        code = process.wait()
    return output.decode("utf-8", errors="replace"), code


def stamped(lines: list[str]) -> list[str]:
    return [line for line in lines if STAMP.match(line)]


def check_the_story(lines: list[str]) -> None:
    """Every iteration's lines are there, in order, each once; then the loop's end."""
    story = [STAMP.sub("", line) for line in stamped(lines)]
    iterations = [
        line for line in story if re.fullmatch(r"iteration \d+( \((after|session) .*\))?", line)
    ]
    assert [line.split()[1] for line in iterations] == ["1", "2", "3"], story
    for number in (1, 2, 3):
        assert sum(line.startswith(f"iteration {number} done") for line in story) == 1, story
    # the tests before the first turn, failed twice (the second time as a flaky check), then two
    # iterations' failures
    assert sum(line.startswith("running tests before the first turn: ") for line in story) == 1
    assert sum(line.startswith("running tests again (flaky-check) before") for line in story) == 1
    assert sum(bool(re.match(r"tests failed \(exit 1\b", line)) for line in story) == 4, story
    assert sum(bool(re.match(r"tests passed \(", line)) for line in story) == 1, story
    assert any(line.startswith("restart 1: the agent starts session 2") for line in story), story
    assert story[-1].startswith("loop ended: complete"), story
    # the plugins' decisions read in words, and the two names of one failure do not clash
    assert any(
        line.startswith("failure classified as a dependency issue, ")
        and "No module named 'slugify'" in line
        for line in story
    ), story
    assert any(
        line.startswith("error report: tests failed with a missing dependency (RESOURCE_ERROR")
        for line in story
    ), story
    assert "dependency issue → telling the agent to declare the missing dependency" in "\n".join(
        story
    )
    assert any(
        "past the warn threshold (70%) → restart after this iteration" in line for line in story
    )
    assert "restart 1: a fresh agent session (the context passed the warn threshold)" in "\n".join(
        story
    )
    assert not [line for line in story if line.startswith(("failure-classifier.", "context-"))]
    assert not [line for line in story if re.search(r"\w=\S|[{\[]['\"]", line)], story


def panel(lines: list[str]) -> list[str]:
    tops = [n for n, line in enumerate(lines) if line.startswith("╭") and "loopctl" in line]
    assert len(tops) == 1, lines  # redrawn in place many times; one panel is left on screen
    bottom = next(n for n in range(tops[0], len(lines)) if lines[n].startswith("╰"))
    return lines[tops[0] : bottom + 1]


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The directory loopctl runs in (its home is beside it)."""
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_the_live_view_prints_every_line_above_its_panel(workdir: Path) -> None:
    text, code = run_in_terminal(["demo"], workdir)
    assert code == 0, text
    lines = screen(text)
    check_the_story(lines)
    box = panel(lines)
    assert "ended: complete" in "\n".join(box)
    assert "3 of 8" in "\n".join(box)
    # the panel stays below the story: nothing stamped comes after it
    assert not stamped(lines[lines.index(box[-1]) :])
    assert "\x1b[1A" in text  # the panel was redrawn in place: the live view, not plain lines
    assert COLOUR.search(text)  # in colour on a colour terminal


def test_no_color_takes_the_colour_out_not_the_live_view(workdir: Path) -> None:
    text, code = run_in_terminal(["demo"], workdir, NO_COLOR="1")
    assert code == 0, text
    assert not COLOUR.search(text), COLOUR.search(text)
    lines = screen(text)
    check_the_story(lines)
    assert "ended: complete" in "\n".join(panel(lines))
    assert "\x1b[1A" in text


def test_plain_prints_plain_lines_on_a_terminal(workdir: Path) -> None:
    text, code = run_in_terminal(["demo", "--plain"], workdir)
    assert code == 0, text
    assert "\x1b" not in text  # no escape code at all: no colour, no cursor movement
    lines = screen(text)
    check_the_story(lines)
    assert not [line for line in lines if line.startswith("╭")]


def test_force_color_colours_the_lines_of_a_pipe_without_a_panel(tmp_path: Path) -> None:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("LOOPCTL_") and key != "NO_COLOR"
    }
    environ.update(private_home(tmp_path / "home"))
    command = [sys.executable, "-m", "loopctl", "demo"]
    piped = subprocess.run(
        command, cwd=tmp_path, env={**environ, "FORCE_COLOR": "1"}, capture_output=True, text=True
    )
    assert piped.returncode == 0, piped.stderr
    assert COLOUR.search(piped.stdout)
    assert "\x1b[1A" not in piped.stdout  # nothing redrawn in a file
    lines = screen(piped.stdout)
    check_the_story(lines)
    assert "ended: complete" in "\n".join(panel(lines))  # printed once, at the end
    plain = subprocess.run(command, cwd=tmp_path, env=environ, capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert "\x1b" not in plain.stdout
    check_the_story(screen(plain.stdout))


def test_run_and_resume_take_plain_on_a_terminal(workdir: Path) -> None:
    failing = f"{sys.executable} -c 'raise SystemExit(1)'"
    run = ["run", "make it pass", "--agent-cmd", "true", "--test-cmd", failing, "--no-plugins"]
    text, code = run_in_terminal([*run, "--max-iterations", "1", "--plain"], workdir)
    assert code == 10, text  # the iteration limit
    assert "\x1b" not in text
    story = [STAMP.sub("", line) for line in stamped(screen(text))]
    assert "iteration 1" in story, story
    text, code = run_in_terminal(
        ["resume", "--max-iterations", "2", "--plain", "--no-plugins"], workdir
    )
    assert "\x1b" not in text
    story = [STAMP.sub("", line) for line in stamped(screen(text))]
    assert story[0].startswith("resuming loop"), story
    assert "iteration 2" in story, story
    assert story[-1].startswith("loop ended: max_iterations"), story
    # and without --plain, the same terminal gets the live view
    text, code = run_in_terminal([*run, "--max-iterations", "1", "--fresh-state"], workdir)
    assert "\x1b[1A" in text
    assert "iteration 1" in [STAMP.sub("", line) for line in stamped(screen(text))]
