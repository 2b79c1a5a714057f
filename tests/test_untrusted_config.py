"""A cloned repository's config is not trusted until ``loopctl run``: the read-only commands run
no program it names, and open, follow or write nothing it names outside the project.

Each test builds a hostile repository: its ``loopctl.toml`` names an agent command
``./evil.sh`` (a script that leaves a mark when it runs), a state directory and a failure
memory in a directory outside the project; the real ``loopctl`` command (``python -m loopctl``,
as a user in that repository would start it) then runs each read-only command there. The
directory outside is compared before and after, down to every modification time (a SQLite
``-wal`` created and removed again changes its directory's), and no mark may appear. The
same commands with ``--trust-config``, or with the path on the command line, do what they
did before.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from loopctl import state as st

#: A window title (OSC 0) in a directory's name: it must never reach the terminal as it is.
TITLE = "\x1b]0;pwned\x07"


class Hostile:
    """A git repository whose config names things outside it, and the commands run in it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.outside = root / "outside"  # what the repository's config names
        self.marks = root / "marks"  # where evil.sh says that it ran
        self.home = root / "home"
        self.repo = root / "repo"
        for directory in (self.outside, self.marks, self.home, self.repo):
            directory.mkdir()
        self.state_dir = self.outside / "state"
        self.memory = self.outside / "failures.sqlite3"
        self.write(
            "evil.sh",
            f'#!/bin/sh\ntouch "{self.marks}/ran-$$"\necho "evil 6.6.6"\n',
            mode=0o755,
        )
        self.write(
            "loopctl.toml",
            textwrap.dedent(
                f"""\
                agent = "claude"
                test_cmd = "./evil.sh"
                state_dir = "{self.state_dir}"

                [agents.claude]
                command = "./evil.sh"

                [agents.codex]
                command = "./evil.sh --fast"

                [plugins.context-errors]
                memory_path = "{self.memory}"
                """
            ),
        )
        subprocess.run(["git", "init", "-q", str(self.repo)], check=True)

    def write(self, name: str, text: str, *, mode: int | None = None) -> Path:
        path = self.repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if mode is not None:
            path.chmod(mode)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        """The user's environment: no loopctl setting of theirs (LOOPCTL_*), a home of its own."""
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("LOOPCTL_", "_LOOPCTL_")) and k not in ("PYTHONPATH", "NO_COLOR")
        }
        env.update(HOME=str(self.home), XDG_DATA_HOME=str(self.home / "data"), **extra)
        return env

    def loopctl(self, *args: str, cwd: Path | None = None, **env: str) -> Any:
        return subprocess.run(
            [sys.executable, "-m", "loopctl", *args],
            cwd=cwd or self.repo,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    def snapshot(self) -> dict[str, tuple[int, int, int]]:
        """Every file and directory outside the project: type, size and modification time."""
        found = {}
        for path in [self.outside, *sorted(self.outside.rglob("*"))]:
            info = path.lstat()
            found[str(path.relative_to(self.root))] = (
                stat.S_IFMT(info.st_mode),
                info.st_size,
                info.st_mtime_ns,
            )
        return found

    def ran(self) -> list[str]:
        return sorted(p.name for p in self.marks.iterdir())

    def make_memory(self) -> None:
        """A failure memory of this loopctl's schema, in WAL mode, outside the project."""
        from loopctl_context_errors.memory import FailureMemory, close_all

        memory = FailureMemory(self.memory)
        assert memory.record_failure(
            decisive=["E   ModuleNotFoundError: No module named 'shop'"],
            category="RESOURCE_ERROR",
            project="shop",
            run_id="r1",
        )
        close_all()
        with sqlite3.connect(self.memory) as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        conn.close()
        assert not Path(f"{self.memory}-wal").exists()

    def make_running_loop(self) -> None:
        """A loop-state.md that says running, with no process behind it: ``status`` (and
        ``resume``) would rewrite progress.md to say the loop died."""
        self.state_dir.mkdir()
        st.write_loop_state(
            self.state_dir / st.LOOP_STATE_FILE,
            st.LoopState(goal="ship it", original_goal="ship it", iteration=2),
        )
        (self.state_dir / st.PROGRESS_FILE).write_text("Status: running\n")


@pytest.fixture
def hostile(tmp_path: Path) -> Hostile:
    return Hostile(tmp_path)


def refused(done: Any, setting: str, instead: str) -> None:
    """The command refused what the config names, saying which setting and what to give."""
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"loopctl.toml: {setting}" in done.stderr, done.stderr
    assert "--trust-config" in done.stderr, done.stderr
    assert instead in done.stderr, done.stderr


def test_agents_list_runs_no_program_the_config_names(hostile):
    before = hostile.snapshot()
    for args in (["agents", "list"], ["agents", "list", "--json"]):
        done = hostile.loopctl(*args)
        assert done.returncode == 0, done.stderr
        assert hostile.ran() == [], f"`loopctl {' '.join(args)}` ran ./evil.sh"
        assert "evil 6.6.6" not in done.stdout
    assert "named by loopctl.toml: agents.claude.command" in done.stdout
    text = hostile.loopctl("agents", "list").stdout
    assert "./evil.sh (version not asked: named by loopctl.toml: agents.codex.command)" in text
    assert "loopctl agents list --trust-config" in text
    assert hostile.snapshot() == before

    trusted = hostile.loopctl("agents", "list", "--trust-config")
    assert trusted.returncode == 0, trusted.stderr
    assert "./evil.sh (evil 6.6.6)" in trusted.stdout
    assert len(hostile.ran()) == 2  # claude's and codex's


def test_status_does_not_follow_the_configs_state_dir_out_of_the_project(hostile):
    hostile.make_running_loop()
    before = hostile.snapshot()
    for args in (["status"], ["status", "--json"]):
        refused(hostile.loopctl(*args), "state_dir", "--state-dir DIR")
    assert hostile.snapshot() == before
    hostile.write("loopctl.toml", 'state_dir = "../outside/state"\n')  # a way out without a /
    refused(hostile.loopctl("status"), "state_dir", "--state-dir DIR")
    os.symlink(hostile.state_dir, hostile.repo / ".loopctl")  # the default, led out by a link
    hostile.write("loopctl.toml", "")
    done = hostile.loopctl("status")
    assert done.returncode == 2, done.stderr
    assert "leads outside the project" in done.stderr
    assert hostile.snapshot() == before

    # the user's own choice is followed: the flag, the path on the command line, a variable
    assert hostile.loopctl("status", "--trust-config").returncode == 0
    shown = hostile.loopctl("status", "--state-dir", str(hostile.state_dir))
    assert shown.returncode == 0, shown.stderr
    assert "ship it" in shown.stdout
    hostile.write("loopctl.toml", 'state_dir = "/nowhere"\n')
    by_variable = hostile.loopctl("status", LOOPCTL_STATE_DIR=str(hostile.state_dir))
    assert by_variable.returncode == 0, by_variable.stderr


def test_goal_commands_do_not_follow_the_configs_state_dir_out_of_the_project(hostile):
    from loopctl_goal_guard import record

    hostile.make_running_loop()
    record.seal(hostile.state_dir, "ship it", run_id="r1", sealed_from="argument", sealed_at=1.0)
    (record.guard_dir(hostile.state_dir) / record.GOAL_FILE).unlink()  # `goal show` repairs it
    before = hostile.snapshot()
    for args in (["goal", "show"], ["goal", "show", "--json"], ["goal", "check"]):
        refused(hostile.loopctl(*args), "state_dir", "--state-dir DIR")
    refused(hostile.loopctl("goal", "notes"), "state_dir", "--state-dir DIR")
    assert hostile.snapshot() == before

    trusted = hostile.loopctl("goal", "show", "--trust-config")
    assert trusted.returncode == 0, trusted.stderr
    assert "ship it" in trusted.stdout


def test_memory_commands_do_not_open_the_memory_the_config_names(hostile):
    hostile.make_memory()
    before = hostile.snapshot()
    pipe = hostile.root / "error.log"
    pipe.write_text("E   ModuleNotFoundError: No module named 'shop'\n")
    for args in (
        ["memory", "stats"],
        ["memory", "stats", "--json"],
        ["memory", "search", "ModuleNotFoundError"],
        ["memory", "prune", "--keep", "0"],
        ["errors", "similar", str(pipe)],
    ):
        refused(hostile.loopctl(*args), "plugins.context-errors.memory_path", "--memory FILE|URL")
    assert hostile.snapshot() == before, "a command opened the memory the config names"

    report = hostile.loopctl("errors", "report", str(pipe))
    assert report.returncode == 0, report.stderr
    assert "goes on without the memory" in report.stderr
    assert "--trust-config" in report.stderr
    assert hostile.snapshot() == before


def test_reading_a_memory_writes_nothing_beside_it(hostile):
    hostile.make_memory()
    before = hostile.snapshot()
    for args in (
        ["memory", "stats", "--memory", str(hostile.memory)],
        ["memory", "search", "shop", "--memory", str(hostile.memory)],
        ["memory", "stats", "--trust-config"],
        ["memory", "search", "shop", "--trust-config"],
        ["errors", "similar", "--trust-config", str(hostile.repo / "loopctl.toml")],
        ["errors", "report", "--trust-config", str(hostile.repo / "loopctl.toml")],
    ):
        done = hostile.loopctl(*args)
        assert done.returncode == 0, f"{args}: {done.stderr}"
        assert hostile.snapshot() == before, f"`loopctl {' '.join(args)}` wrote beside the memory"
    stats = hostile.loopctl("memory", "stats", "--trust-config").stdout
    assert "failures: 1" in stats


def test_a_loop_writing_the_memory_is_read_as_it_is(hostile):
    """While a writer holds the memory open (its -wal and -shm are there), a read shares them
    and sees what the writer committed; it creates nothing."""
    hostile.make_memory()
    writer = sqlite3.connect(hostile.memory)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("UPDATE failures SET category = 'NETWORK_ERROR'")
        writer.commit()
        assert Path(f"{hostile.memory}-wal").exists()
        before = hostile.snapshot()
        done = hostile.loopctl("memory", "stats", "--memory", str(hostile.memory))
        assert done.returncode == 0, done.stderr
        assert "NETWORK_ERROR" in done.stdout
        assert {k: v for k, v in hostile.snapshot().items() if not k.endswith("-shm")} == {
            k: v for k, v in before.items() if not k.endswith("-shm")
        }
    finally:
        writer.close()


def test_the_other_read_only_commands_run_and_write_nothing_the_config_names(hostile):
    hostile.make_running_loop()
    before = hostile.snapshot()
    for args in (
        ["config", "show"],
        ["config", "show", "--json"],
        ["plugins", "list"],
        ["plugins", "list", "--json"],
        ["classify"],
        ["classify", "--json"],
        ["errors", "rules"],
        ["events", "schema"],
    ):
        done = hostile.loopctl(*args)
        assert done.returncode in (0, 2), f"{args}: {done.stderr}"
        assert "Traceback" not in done.stderr
        assert hostile.ran() == [], f"`loopctl {' '.join(args)}` ran ./evil.sh"
    assert hostile.snapshot() == before


def test_python_m_loopctl_imports_no_plugin_from_the_working_directory(hostile):
    """``python -m loopctl`` puts the working directory on sys.path: a repository's
    ``*.dist-info`` there would make its module one of loopctl's plugins."""
    hostile.write(
        "shopext-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: shopext\nVersion: 1.0\n"
    )
    hostile.write(
        "shopext-1.0.dist-info/entry_points.txt", "[loopctl.plugins]\nshopext = shopext\n"
    )
    hostile.write("shopext.py", f"open({str(hostile.marks / 'imported')!r}, 'w').close()\n")
    for args in (["plugins", "list"], ["config", "show"], ["errors", "rules"], ["--help"]):
        done = hostile.loopctl(*args)
        assert hostile.ran() == [], f"`python -m loopctl {' '.join(args)}` imported shopext.py"
        assert "shopext" not in done.stdout


def test_a_project_path_with_terminal_control_is_printed_sanitised(tmp_path):
    box = Hostile(tmp_path)
    project = tmp_path / f"shop{TITLE}"
    project.mkdir()
    (project / "loopctl.toml").write_text("[limits]\nmax_iterations = 3\n")
    shown = box.loopctl("config", "show", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "# config file: " in shown.stdout
    assert not {"\x1b", "\x07"} & set(shown.stdout)

    demo = box.loopctl("demo", "--dir", str(project / "demo"), "--plain", cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    lines = [line for line in demo.stdout.splitlines() if line.startswith("report: ")]
    assert lines == [f"report: {tmp_path}/shop/demo/.loopctl/report.md"]
    assert not {"\x1b", "\x07"} & set(demo.stdout)

    for args in (
        ["memory", "stats", "--memory", str(project / "failures.sqlite3")],
        ["goal", "show", "--state-dir", str(project)],
        ["classify", str(project / "nothing")],
    ):
        done = box.loopctl(*args, cwd=project)
        assert str(tmp_path / "shop") in done.stdout + done.stderr, args
        assert "\x1b" not in done.stdout + done.stderr, args
