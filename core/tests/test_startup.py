"""How the one-shot commands start: only the command that runs is built, plugin commands come
from a host built on the plugin switches, help is plain text in a pipe, the plain forms of
``status`` skip typer, and no fast path imports a heavy module it does not need.

The timings are in benchmarks/bench_startup.py; these tests check the behaviour and the imports
that the timings rest on (what must NOT be imported), never a time."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from calc_loop import FIX, make_calc_project

from loopctl.cli import app as cli_app
from loopctl.cli import fast
from loopctl.model import EXIT_USAGE

#: Runs ``loopctl.__main__.main`` (what the console script runs) and writes the names of every
#: module imported by the end to the file named by the first argument.
DRIVER = """
import json, sys
from loopctl.__main__ import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""

#: Never imported by a one-shot command that does not run a loop.
NEVER = {
    "loopctl.engine",
    "loopctl.launch",
    "rich",
    "pydantic",
    "importlib_metadata",
    "importlib.metadata",
}


def clean_env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOOPCTL_") and k not in ("NO_COLOR", "PYTHONPATH")
    }
    env.update(extra)
    return env


def loopctl(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run ``loopctl ARGS`` with its output in pipes: the result and the modules it imported."""
    modules = cwd / ".modules.json"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(modules), *args],
        cwd=cwd,
        env=env if env is not None else clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    imported = set(json.loads(modules.read_text())) if modules.exists() else set()
    modules.unlink(missing_ok=True)
    return done, imported


def add_plugin(site: Path, name: str, source: str) -> None:
    """A real (tiny) installed distribution with a ``loopctl.plugins`` entry point."""
    module = "loopctl_test_" + name.replace("-", "_")
    info = site / f"loopctl_{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: loopctl-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


COMMANDS_PLUGIN = '''\
    import typer

    from loopctl import hookimpl

    tools = typer.Typer(help="Tools of the test plugin. Not shown: the second sentence.")


    @tools.command("check")
    def check() -> None:
        """Check something."""
        print("checked")


    @hookimpl
    def register_commands(cli):
        @cli.command("hello")
        def hello(name: str = "world") -> None:
            """Say hello from a plugin, with a first sentence longer than click's forty-five
            characters. The second sentence is not shown in the list."""
            print(f"hello {name} from a plugin")

        @cli.command("odd")
        def odd(value: object) -> None:
            """A command typer cannot build (its parameter has no click type)."""

        cli.add_typer(tools, name="tools")
'''

RAISING_PLUGIN = """\
    from loopctl import hookimpl


    @hookimpl
    def register_commands(cli):
        raise RuntimeError("no commands today")
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    add_plugin(site, "greeter", COMMANDS_PLUGIN)
    add_plugin(site, "raiser", RAISING_PLUGIN)
    return site


@pytest.fixture
def work(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


# --- help ------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_help_in_a_pipe_lists_every_command_with_its_first_sentence_as_plain_text(
    site: Path, work: Path
) -> None:
    done, imported = loopctl("--help", cwd=work, env=clean_env(PYTHONPATH=str(site)))
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # the help wraps long lines
    assert done.stdout.startswith("Usage: loopctl [OPTIONS] COMMAND [ARGS]...")
    assert not {"╭", "│", "\x1b"} & set(done.stdout)  # no rich panels, no colours
    builtin = {c.name for c in cli_app.app.registered_commands}
    builtin |= {g.name for g in cli_app.app.registered_groups}
    for name in builtin | {"hello", "odd", "tools"}:
        assert f"\n  {name} " in done.stdout, name
    assert (
        "hello Say hello from a plugin, with a first sentence longer than click's forty-five "
        "characters." in out
    )
    assert "The second sentence" not in out
    assert "odd A command typer cannot build (its parameter has no click type)." in out
    assert "tools Tools of the test plugin." in out
    assert "status Show a loop's state (works from another terminal while it runs)." in out
    # a plugin whose register_commands raises is named, and takes nothing else down
    assert "plugin 'raiser' failed in hook register_commands: RuntimeError: no commands today" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
    assert not (NEVER | {"loopctl.model", "cattrs", "loopctl.config", "loopctl.state"}) & imported


def test_help_in_a_terminal_is_rich(work: Path) -> None:
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "loopctl", "--help"],
        cwd=work,
        env=clean_env(COLUMNS="100", TERM="xterm"),
        stdin=subprocess.DEVNULL,
        stdout=terminal,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    chunks = []
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(controller)
    assert process.stderr is not None
    with process.stderr:
        errors = process.stderr.read()
    assert process.wait(timeout=120) == 0, errors
    shown = b"".join(chunks).decode("utf-8", "replace")
    assert "╭" in shown  # rich's panels
    assert "status" in shown


@pytest.mark.slow
def test_only_the_command_that_runs_is_built(site: Path, work: Path) -> None:
    env = clean_env(PYTHONPATH=str(site))
    hello, _ = loopctl("hello", "--name", "bob", cwd=work, env=env)
    assert hello.returncode == 0, hello.stderr
    assert hello.stdout == "hello bob from a plugin\n"
    checked, _ = loopctl("tools", "check", cwd=work, env=env)
    assert (checked.returncode, checked.stdout) == (0, "checked\n"), checked.stderr
    # the command typer cannot build fails alone, when it is the one asked for
    odd, _ = loopctl("odd", "x", cwd=work, env=env)
    assert odd.returncode != 0
    assert "object" in odd.stderr


def test_mistakes_in_plugin_command_names_get_suggestions(site: Path, work: Path) -> None:
    done, _ = loopctl("helo", cwd=work, env=clean_env(PYTHONPATH=str(site)))
    assert done.returncode == EXIT_USAGE
    assert "loopctl: error: No such command 'helo'. Did you mean 'hello'?" in done.stderr


@pytest.mark.slow
def test_plugin_commands_follow_the_plugin_switches_not_required_plugins(
    site: Path, work: Path
) -> None:
    env = clean_env(PYTHONPATH=str(site), LOOPCTL_PLUGINS__DISABLE="greeter")
    disabled, _ = loopctl("hello", cwd=work, env=env)
    assert disabled.returncode == EXIT_USAGE
    assert "No such command 'hello'" in disabled.stderr
    # a missing required plugin stops runs, not the commands of the plugins that are there
    (work / "loopctl.toml").write_text('required_plugins = ["not-installed"]\n')
    offered, _ = loopctl("hello", cwd=work, env=clean_env(PYTHONPATH=str(site)))
    assert offered.returncode == 0, offered.stderr
    (work / "loopctl.toml").write_text('[plugins]\nenable = "greeter"\n')
    broken, _ = loopctl("--help", cwd=work, env=clean_env(PYTHONPATH=str(site)))
    assert broken.returncode == 0
    assert "loopctl: warning: plugin commands unavailable:" in broken.stderr
    assert "plugins.enable" in broken.stderr
    assert "\n  status " in broken.stdout


# --- fast paths -------------------------------------------------------------------------------------


def test_version_and_plugins_list_import_neither_typer_nor_the_typed_config(work: Path) -> None:
    version, imported = loopctl("--version", cwd=work)
    assert version.returncode == 0
    assert not (NEVER | {"typer", "attrs", "loopctl.cli.app"}) & imported
    listed, imported = loopctl("plugins", "list", "--json", cwd=work)
    assert listed.returncode == 0, listed.stderr
    assert not (NEVER | {"typer", "cattrs", "loopctl.config", "packaging"}) & imported


@pytest.fixture
def finished(loopctl_project, run_loop) -> Path:  # type: ignore[no-untyped-def]
    """A project whose loop ran to the end (state in .loopctl)."""
    project = make_calc_project(loopctl_project)
    result = run_loop("make add() add", turns=[[FIX]])
    assert result.status == "complete"
    return Path(project.path)


STATUS_FORMS = [
    [],
    ["--json"],
    ["--state-dir", ".loopctl"],
    ["--state-dir=.loopctl", "--json"],
    ["--json", "--config", "loopctl.toml"],
    ["--state-dir", "nowhere"],  # no loop there: an error, exit 2
]


@pytest.mark.slow
@pytest.mark.parametrize("form", STATUS_FORMS, ids=lambda form: " ".join(form) or "plain")
def test_status_without_typer_says_what_the_typer_command_says(
    finished: Path,
    form: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fast_done, imported = loopctl("status", *form, cwd=finished)
    assert not (NEVER | {"typer", "click"}) & imported
    assert fast.status_options(form) is not None
    monkeypatch.chdir(finished)
    for name in [n for n in os.environ if n.startswith("LOOPCTL_")]:
        monkeypatch.delenv(name)
    code = cli_app.main(["status", *form])  # the typer app, which calls the same function
    out, err = capsys.readouterr()
    assert (fast_done.returncode, fast_done.stdout, fast_done.stderr) == (code, out, err)
    assert code == (EXIT_USAGE if "nowhere" in form else 0)


@pytest.mark.slow
def test_status_shows_the_loop_past_a_mistake_elsewhere_in_the_config(finished: Path) -> None:
    """status reads ``state_dir`` alone (not the typed configuration); a config that does not
    load is the error only when there is no loop to show."""
    config = finished / "loopctl.toml"
    config.write_text(config.read_text() + "\n[limits]\nmax_iteration = 3\n")
    done, imported = loopctl("status", cwd=finished)
    assert done.returncode == 0, done.stderr
    assert "complete" in done.stdout
    assert "loopctl.config.load" not in imported
    other = finished.parent / "no-loop-here"
    other.mkdir()
    (other / "loopctl.toml").write_text(config.read_text())
    gone, _ = loopctl("status", cwd=other)
    assert gone.returncode == EXIT_USAGE
    assert "loopctl.toml: limits: unknown key 'max_iteration'" in gone.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("form", "code", "says"),
    [
        (["--help"], 0, "Show a loop's state"),
        (["-h"], 0, "Show a loop's state"),
        (["--json", "--json"], 0, '"status": "complete"'),  # click: the last one counts
        (["--bogus"], EXIT_USAGE, "No such option: --bogus (see `loopctl status --help`)"),
        (["--state-dir"], EXIT_USAGE, "Option '--state-dir' requires an argument."),
        (["--state-dir", "-x"], EXIT_USAGE, "/-x (loop-state.md does not exist)"),  # click's value
    ],
    ids=lambda value: " ".join(value) if isinstance(value, list) else "",
)
def test_other_forms_of_status_go_to_typer(
    finished: Path, form: list[str], code: int, says: str
) -> None:
    assert fast.status_options(form) is None
    done, imported = loopctl("status", *form, cwd=finished)
    assert "typer" in imported
    assert done.returncode == code
    assert says in (done.stdout if code == 0 else done.stderr)


def test_exit_usage_is_the_models() -> None:
    assert cli_app.EXIT_USAGE == fast.EXIT_USAGE == EXIT_USAGE
