"""The command line's rough edges a new user meets first: a closed pipe, typos in the plugin
switches and misplaced keys, a missing agent command, the demo's files, shell completion,
``-v``/``-q`` and the help's choices and examples."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli_run import clean_env, loopctl
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl.testing import Project, make_project


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return make_project(tmp_path / "project")


# --- a reader that goes away -----------------------------------------------------------------------


def into_closed_pipe(*args: str, cwd: Path) -> tuple[int, str]:
    """Run ``loopctl ARGS`` with stdout a pipe whose reader has already closed it (as in
    ``loopctl … | true`` once ``true`` exits); (exit code, stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the process starts: its first write meets a closed pipe
    try:
        result = subprocess.run(
            [sys.executable, "-m", "loopctl", *args],
            cwd=cwd,
            env=clean_env(),
            stdout=write_end,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["plugins", "list", "--json"], id="plugins-list-json"),
        pytest.param(["plugins", "list"], id="plugins-list"),
        pytest.param(["plugins", "list", "--json", "--config", "loopctl.toml"], id="typer-path"),
        pytest.param(["agents", "list", "--json"], id="agents-list"),
        pytest.param(["--help"], id="help"),
        pytest.param(["config", "show"], id="config-show"),
    ],
)
def test_a_closed_pipe_ends_the_command_quietly(project: Project, args: list[str]) -> None:
    project.write("loopctl.toml", "")
    code, stderr = into_closed_pipe(*args, cwd=project.path)
    assert stderr == ""  # no traceback, no "Exception ignored"
    assert code == 1


# --- demo ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_demo_keeps_its_project_and_writes_nothing_in_the_users_directories(
    tmp_path: Path,
) -> None:
    home, data, temp = tmp_path / "home", tmp_path / "xdg-data", tmp_path / "tmp"
    for directory in (home, data, temp):
        directory.mkdir()
    env = clean_env(
        HOME=str(home),
        XDG_DATA_HOME=str(data),
        TMPDIR=str(temp),
        # the user's own settings do not reach the demo: not the agent, not the memory's place
        LOOPCTL_AGENT="no-such-agent",
        LOOPCTL_FAILURE_MEMORY=str(home / "failures.sqlite3"),
    )
    result = loopctl("demo", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert list(home.iterdir()) == []
    assert list(data.iterdir()) == []
    report = next(
        line.removeprefix("report: ")
        for line in result.stdout.splitlines()
        if line.startswith("report: ")
    )
    assert Path(report).is_file()  # after loopctl exited
    assert "complete" in Path(report).read_text(encoding="utf-8")
    project = Path(report).parent.parent
    assert project.parent == temp.resolve()
    assert f"the demo project is kept in {project}" in result.stdout
    # per-user data the loop's plugins keep (the failure memory) stayed inside the project
    from importlib.util import find_spec

    if find_spec("loopctl_context_errors") is not None:
        assert list(project.rglob("failures.sqlite3"))


@pytest.mark.slow
def test_demo_dir_puts_the_project_there(tmp_path: Path) -> None:
    target = tmp_path / "demo"
    result = loopctl("demo", "--dir", str(target), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (target / ".loopctl" / "report.md").is_file()
    assert f"the demo project is kept in {target.resolve()}" in result.stdout


# --- typos in the config -------------------------------------------------------------------------

KNOWN_PLUGINS = ("core", "claude", "command", "scripted")  # built in: there whatever is installed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "args", "fragments"),
    [
        pytest.param(
            '[plugins]\ndisable = ["scriptd"]\n',
            ["config", "show"],
            ["loopctl.toml: plugins.disable: no plugin is named 'scriptd'", "'scripted'?"],
            id="disable-config-show",
        ),
        pytest.param(
            '[plugins]\nenable = ["scriptd"]\n',
            ["run", "go", "--test-cmd", "true", "--agent", "scripted"],
            ["loopctl.toml: plugins.enable: no plugin is named 'scriptd'", "'scripted'?"],
            id="enable-run",
        ),
        pytest.param(
            '[tool.loopctl.plugins]\ndisable = ["Scripted"]\n',
            ["agents", "list"],
            ["pyproject.toml: tool.loopctl.plugins.disable: no plugin is named 'Scripted'"],
            id="pyproject-agents-list",
        ),
        pytest.param(
            "max_iterations = 3\n",
            ["config", "show"],
            ["loopctl.toml: unknown key 'max_iterations' (it belongs in [limits]"],
            id="misplaced-key",
        ),
        pytest.param(
            "[tool.loopctl]\nmax_iterations = 3\n",
            ["config", "show"],
            [
                "pyproject.toml: tool.loopctl: unknown key 'max_iterations' (it belongs in "
                "[tool.loopctl.limits]: tool.loopctl.limits.max_iterations)"
            ],
            id="misplaced-key-pyproject",
        ),
        pytest.param(
            "max_iteration = 3\n",
            ["config", "show"],
            [
                "loopctl.toml: unknown key 'max_iteration' (did you mean 'max_iterations'? "
                "it belongs in [limits]: limits.max_iterations)"
            ],
            id="misspelt-misplaced-key",
        ),
        pytest.param(
            'agent = "scriptd"\n',
            ["config", "show"],
            [
                "loopctl.toml: agent: no agent is named 'scriptd' (did you mean 'scripted'?); "
                "the agents are: ",
                "command",
                "claude",
            ],
            id="agent-config-show",
        ),
        pytest.param(
            "[plugins.scripted]\n",  # fine: a section; the test below checks plugin sections
            ["config", "show"],
            [],
            id="no-problem",
        ),
    ],
)
def test_config_typos_are_errors_that_say_what_was_meant(
    project: Project, config: str, args: list[str], fragments: list[str]
) -> None:
    name = "pyproject.toml" if config.startswith("[tool.") else "loopctl.toml"
    project.write(name, config)
    result = loopctl(*args, cwd=project.path)
    if not fragments:
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("loopctl: error: ")
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr
    if "plugin" in fragments[0]:
        assert all(name in result.stderr for name in KNOWN_PLUGINS)  # the names there are
    assert not (project.path / ".loopctl").exists()  # nothing ran


@pytest.mark.slow
def test_a_misspelled_plugin_in_the_environment_is_named_after_the_variable(
    project: Project,
) -> None:
    result = loopctl("agents", "list", cwd=project.path, env=clean_env(LOOPCTL_PLUGINS="scriptd"))
    assert result.returncode == 2
    assert "environment variable LOOPCTL_PLUGINS: no plugin is named 'scriptd'" in result.stderr


@pytest.mark.slow
def test_a_misspelt_setting_in_the_environment_is_an_error(project: Project) -> None:
    env = clean_env(LOOPCTL_LIMITS__MAX_ITERATION="3")
    result = loopctl("config", "show", cwd=project.path, env=env)
    assert result.returncode == 2
    assert result.stderr == (
        "loopctl: error: environment variable LOOPCTL_LIMITS__MAX_ITERATION names no loopctl "
        "setting (did you mean LOOPCTL_LIMITS__MAX_ITERATIONS?); rename it, or unset it\n"
    )


def test_a_misspelt_option_of_run_gets_a_suggestion(project: Project) -> None:
    result = loopctl("run", "go", "--agent", "scripted", "--max-iteration", "3", cwd=project.path)
    assert result.returncode == 2
    assert "no such option: --max-iteration (did you mean --max-iterations?)" in result.stderr
    assert not (project.path / ".loopctl").exists()  # nothing ran


def test_a_usage_error_is_one_line(project: Project) -> None:
    result = loopctl("completion", cwd=project.path)
    assert result.returncode == 2
    assert result.stderr == (
        "loopctl: error: Missing argument 'SHELL'. Choose from: bash, zsh, fish, powershell "
        "(see `loopctl completion --help`)\n"
    )


def test_plugins_list_warns_of_a_misspelled_plugin_and_lists_all(project: Project) -> None:
    project.write("loopctl.toml", '[plugins]\ndisable = ["scriptd"]\n')
    result = loopctl("plugins", "list", "--json", cwd=project.path)
    assert result.returncode == 0
    assert "loopctl: warning: loopctl.toml: plugins.disable: no plugin" in result.stderr
    assert "scripted" in result.stdout


@pytest.mark.slow
def test_config_show_checks_plugin_sections_as_run_does(project: Project) -> None:
    project.write("loopctl.toml", '[agents.scripted]\nscenario = "s.toml"\n')
    fake = project.path / "site"
    fake.mkdir()
    (fake / "loopctl_test_cfg.py").write_text(
        "import attrs\nfrom loopctl import hookimpl\n\n"
        "@attrs.define\nclass Settings:\n    level: int = 1\n\n"
        "@hookimpl\ndef register_config():\n    return {'cfg': Settings}\n"
    )
    info = fake / "loopctl_test_cfg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: loopctl-test-cfg\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[loopctl.plugins]\ncfg = loopctl_test_cfg\n")
    env = clean_env(PYTHONPATH=str(fake))
    project.write("loopctl.toml", "[plugins.cfg]\nlevl = 2\n")
    shown = loopctl("config", "show", cwd=project.path, env=env)
    ran = loopctl(
        "run", "go", "--test-cmd", "true", "--agent-cmd", "true", cwd=project.path, env=env
    )
    expected = "loopctl.toml: plugins.cfg: unknown key 'levl' (did you mean 'level'?)"
    assert shown.returncode == ran.returncode == 2, (shown.stderr, ran.stderr)
    assert expected in shown.stderr
    assert expected in ran.stderr
    project.write("loopctl.toml", "[plugins.cfg]\nlevel = 2\n[plugins.cgf]\nlevel = 2\n")
    shown = loopctl("config", "show", cwd=project.path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert (
        "[plugins.cgf] section, but no plugin by that name is installed (did you mean 'cfg'?)"
        in (shown.stderr)
    )


@pytest.mark.slow
def test_a_missing_agent_command_is_said_to_be_missing(project: Project) -> None:
    result = loopctl(
        "run",
        "go",
        "--test-cmd",
        "false",
        "--agent-cmd",
        "nosuchbin-x",
        "--no-plugins",
        cwd=project.path,
    )
    assert result.returncode == 13, result.stderr
    assert "command 'nosuchbin-x' not found on PATH" in result.stdout
    assert "check the agent command (--agent-cmd" in result.stdout
    assert "install it, or set [agents.command] command" not in result.stdout


# --- -v and -q -----------------------------------------------------------------------------------

ONE_TURN = ["--test-cmd", "false", "--agent-cmd", "true", "--max-iterations", "1", "--no-plugins"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["-v", "run", "go", *ONE_TURN], id="before"),
        pytest.param(["run", "go", *ONE_TURN, "--verbose"], id="after"),
    ],
)
def test_verbose_shows_debug_logging_on_stderr(project: Project, args: list[str]) -> None:
    result = loopctl(*args, cwd=project.path)
    assert result.returncode == 10, result.stderr
    debug = [line for line in result.stderr.splitlines() if line.startswith("loopctl: debug: ")]
    assert any("loopctl.config: config file: " in line for line in debug)
    assert any("loopctl.agent: starting the command agent in " in line for line in debug)
    assert any("loopctl.tests: running the test command in " in line for line in debug)
    assert any("loopctl.tests: the test command ended: exit 1" in line for line in debug)
    assert "loopctl: debug" not in result.stdout


@pytest.mark.slow
def test_without_verbose_there_is_no_debug_output(project: Project) -> None:
    result = loopctl("run", "go", *ONE_TURN, cwd=project.path)
    assert result.returncode == 10
    assert "debug" not in result.stderr


@pytest.mark.slow
def test_quiet_prints_the_loops_lines_and_how_the_run_ended(project: Project) -> None:
    result = loopctl("-q", "run", "go", *ONE_TURN, cwd=project.path)
    assert result.returncode == 10, result.stderr
    lines = result.stdout.splitlines()
    assert any(line.endswith("] iteration 1") for line in lines), lines
    assert not [line for line in lines if "] agent ran " in line or "] agent said" in line]
    assert lines[-2].startswith("max_iterations: reached the iteration limit")
    assert lines[-1].startswith("report: ")
    assert result.stderr == ""


def test_logging_is_left_as_it_was_after_main(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import logging

    from loopctl.cli.app import main

    monkeypatch.chdir(project.path)
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    assert main(["-v", "config", "show"]) == 0
    assert "loopctl: debug: loopctl.config: config file: none" in capsys.readouterr().err
    assert (list(root.handlers), root.level) == before


@settings(deadline=None)
@given(st.lists(st.sampled_from(["-v", "-q", "--verbose", "--", "run", "x", "-vx", "--json"])))
def test_global_flags_move_to_the_front_and_nothing_else_moves(args: list[str]) -> None:
    from loopctl.cli.logs import GLOBAL_FLAGS, global_options_first

    moved = global_options_first(args)
    assert sorted(moved) == sorted(args)
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in GLOBAL_FLAGS]
    assert moved[: len(flags)] == flags
    assert moved[len(flags) :] == [a for a in args[:end] if a not in GLOBAL_FLAGS] + args[end:]


# --- help ----------------------------------------------------------------------------------------


def plain_help(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from loopctl.cli.app import main

    assert main([*args, "--help"]) == 0
    return capsys.readouterr().out


def subcommands(text: str) -> list[str]:
    """The command names a help text lists."""
    section = text.partition("\nCommands:\n")[2].partition("\n\n")[0]
    return [
        line.split()[0] for line in section.splitlines() if line.startswith("  ") and line[2] != " "
    ]


def every_command(capsys: pytest.CaptureFixture[str]) -> dict[tuple[str, ...], str]:
    """Every command's plain help, by its words (``("plugins", "list")``)."""
    found: dict[tuple[str, ...], str] = {}
    todo: list[tuple[str, ...]] = [(name,) for name in subcommands(plain_help(capsys))]
    while todo:
        words = todo.pop()
        text = plain_help(capsys, *words)
        subs = subcommands(text)
        if subs:
            todo += [(*words, sub) for sub in subs]
        else:
            found[words] = text
    return found


TYPE_NAMES = re.compile(r"<(str|int|float|bool|path|directory|list\[.*?\]|int range)>")


@pytest.mark.slow
def test_every_command_has_readable_placeholders_and_an_example(
    project: Project, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project.path)
    commands = every_command(capsys)
    assert ("run",) in commands
    assert ("plugins", "list") in commands
    for words, text in commands.items():
        name = " ".join(words)
        assert not TYPE_NAMES.search(text), (name, TYPE_NAMES.search(text))
        assert "\n  Example" in text, f"`loopctl {name} --help` shows no example"
        example = text.partition("\n  Example")[2]
        assert f"loopctl {name}" in example, (name, example)
    run = commands[("run",)]
    assert "--session <fresh|resume>" in run or "--session [fresh|resume]" in run
    assert "--test-cmd COMMAND" in run
    assert "--max-iterations N" in run
    assert "Usage: loopctl run [OPTIONS] [GOAL]" in run
    assert "--config FILE" in commands[("config", "show")]


def in_terminal(*args: str, cwd: Path, exit_code: int = 0) -> str:
    """What ``loopctl ARGS`` shows in a terminal (a pseudo-terminal), colours removed."""
    import pty

    leader, follower = pty.openpty()
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "loopctl", *args],
            cwd=cwd,
            env=clean_env(COLUMNS="120", TERM="xterm"),
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.DEVNULL,
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert process.wait(timeout=120) == exit_code
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    text = b"".join(chunks).decode("utf-8", "replace")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("\r", "")


def rich_help(*args: str, cwd: Path) -> str:
    """``loopctl ARGS --help`` as a terminal shows it."""
    return in_terminal(*args, "--help", cwd=cwd)


@pytest.mark.slow
@pytest.mark.parametrize("words", [("run",), ("resume",), ("classify",), ("plugins", "new")])
def test_the_terminal_help_shows_choices_placeholders_and_examples(
    project: Project, words: tuple[str, ...]
) -> None:
    text = rich_help(*words, cwd=project.path)
    assert "╭─ Options" in text  # the rich help, not the plain one
    options = [line for line in text.splitlines() if line.startswith("│ --")]
    assert options
    assert not any(TYPE_NAMES.search(line) for line in options), options
    assert "Examples:" in text
    assert f"loopctl {' '.join(words)}" in text.partition("Examples:")[2]
    if words == ("run",):
        assert any("--session" in line and "fresh|resume" in line for line in options)
        assert any("--test-cmd" in line and "COMMAND" in line for line in options)


# --- shell completion ----------------------------------------------------------------------------


def complete(words: str, cword: int, cwd: Path) -> list[str]:
    """What loopctl answers bash's completion request for ``words`` (the word at ``cword``)."""
    env = clean_env(_LOOPCTL_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword))
    result = subprocess.run(
        [sys.executable, "-m", "loopctl"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.slow
def test_a_completion_request_answers_with_commands_options_and_choices(project: Project) -> None:
    top = complete("loopctl ", 1, project.path)
    assert {"run", "resume", "status", "demo", "plugins", "config", "completion"} <= set(top)
    assert complete("loopctl pl", 1, project.path) == ["plugins"]
    assert complete("loopctl plugins l", 2, project.path) == ["list"]
    assert complete("loopctl run --sess", 2, project.path) == ["--session"]
    assert complete("loopctl run --session ", 3, project.path) == ["fresh", "resume"]
    assert complete("loopctl completion ", 2, project.path) == ["bash", "zsh", "fish", "powershell"]


@pytest.mark.slow
def test_completion_offers_agent_and_plugin_names(project: Project) -> None:
    agents = complete("loopctl run --agent ", 3, project.path)
    assert {"claude", "codex", "command", "scripted"} <= set(agents)
    assert complete("loopctl run --agent scr", 3, project.path) == ["scripted"]
    assert complete("loopctl resume --agent scr", 3, project.path) == ["scripted"]
    assert complete("loopctl agents parse scr", 3, project.path) == ["scripted"]
    installed = complete("loopctl plugins uninstall ", 3, project.path)
    assert {"goal-guard", "context-errors"} <= set(installed)
    assert complete("loopctl plugins uninstall goal-", 3, project.path) == ["goal-guard"]


@pytest.mark.parametrize(
    ("shell", "fragment"),
    [
        ("bash", "complete -o default -F _loopctl_completion loopctl"),
        ("zsh", "compdef _loopctl_completion loopctl"),
        ("fish", "complete --command loopctl"),
        ("powershell", "Register-ArgumentCompleter"),
    ],
)
def test_completion_prints_the_shells_script(project: Project, shell: str, fragment: str) -> None:
    result = loopctl("completion", shell, cwd=project.path)
    assert result.returncode == 0, result.stderr
    assert fragment in result.stdout
    assert "_LOOPCTL_COMPLETE" in result.stdout


def test_bash_completes_loopctl_with_its_script(project: Project, tmp_path: Path) -> None:
    import shutil

    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash here")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "loopctl"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m loopctl "$@"\n')
    launcher.chmod(0o755)
    script = (
        'eval "$(loopctl completion bash)"\n'
        "COMP_WORDS=(loopctl plugins l); COMP_CWORD=2\n"
        "_loopctl_completion loopctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = clean_env(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(
        [bash, "--norc", "--noprofile", "-c", script],
        cwd=project.path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["list"]


@settings(deadline=None, max_examples=50)
@given(
    enable=st.none()
    | st.lists(st.sampled_from(["core", "claude", "scripted"]) | st.text(max_size=12)),
    disable=st.lists(st.sampled_from(["claude", "codex"]) | st.text(max_size=12), max_size=4),
)
def test_every_unknown_plugin_name_is_reported_and_no_known_one(
    enable: list[str] | None, disable: list[str]
) -> None:
    from loopctl.pluginhost import PluginHost, PluginSelection, unknown_plugin_names

    host = PluginHost(PluginSelection(enable=enable, disable=disable))
    host.load(entry_points=[])  # the built-ins only
    problems = unknown_plugin_names(host, {"disable": "loopctl.toml: plugins.disable"})
    unknown = [n for n in [*(enable or []), *disable] if n not in host.infos]
    assert len(problems) == len(unknown)
    for problem, name in zip(problems, unknown, strict=True):
        assert f"no plugin is named {name!r}" in problem
        assert "the plugins are: " in problem
