"""Plugin commands described as :class:`loopctl.CliCommand` (``register_cli_commands``): their
plain forms run without typer, anything else through a typer command made from the same
description, which parses as the description does."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import example, given, settings
from hypothesis import strategies as st

from loopctl import CliArgument, CliCommand, CliOption
from loopctl.cli.app import app
from loopctl.cli.fast import BUILTIN_COMMANDS
from loopctl.cli.typed import typed_function

GREET_PLUGIN = """\
    import sys

    from loopctl import CliArgument, CliCommand, CliOption, hookimpl


    def greet(*, name, times, shout, path):
        text = " ".join([name.upper() if shout else name] * times)
        print(text, path)
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("typer", "rich")))
        return 3 if name == "three" else None


    PARAMS = [
        CliArgument("name", default="world", help="Who to greet."),
        CliOption("times", "--times", "-n", type=int, default=1, help="How many times."),
        CliOption("shout", "--shout", flag=True, help="In capitals."),
        CliOption("path", "--path", type=__import__("pathlib").Path, help="A path."),
    ]


    @hookimpl
    def register_commands(cli):
        import typer

        greetings = typer.Typer(help="Greetings.", no_args_is_help=True)

        @greetings.command("list")
        def listed() -> None:
            '''List the greetings.'''
            print("hello, hi")

        cli.add_typer(greetings, name="greetings")


    @hookimpl
    def register_cli_commands():
        return [
            CliCommand("greet", "loopctl_test_greet:greet", help="Greet someone. Twice.", params=PARAMS),
            CliCommand("greetings say", "loopctl_test_greet:greet", help="Say one.", params=PARAMS),
        ]
"""


def add_plugin(site: Path, name: str, source: str) -> None:
    """A real (tiny) installed distribution with a ``loopctl.plugins`` entry point."""
    module = "loopctl_test_" + name.replace("-", "_")
    info = site / f"loopctl_{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: loopctl-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[loopctl.plugins]\n{name} = {module}\n")
    (site / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def greet(tmp_path: Path) -> Any:
    site = tmp_path / "site"
    add_plugin(site, "greet", GREET_PLUGIN)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("LOOPCTL_") and k not in ("NO_COLOR", "PYTHONPATH")
    }
    env["PYTHONPATH"] = str(site)

    def run(*args: str, python: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, *args] if python else [sys.executable, "-m", "loopctl", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )

    return run


def test_a_described_command_runs_without_typer(greet: Any) -> None:
    done = greet("greet", "bob", "-n", "2", "--shout", "--path=a/b")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "BOB BOB a/b\n[]\n"
    done = greet("greetings", "say", "three")
    assert done.returncode == 3  # the function's exit code
    assert done.stdout == "three None\n[]\n"


def test_other_forms_go_to_typer_and_reach_the_same_function(greet: Any) -> None:
    done = greet("greet", "-n", "2", "--", "-bob")  # `--`: typer parses it
    assert done.returncode == 0, done.stderr
    first, modules = done.stdout.splitlines()
    assert first == "-bob -bob None"
    assert "typer" in modules
    mistake = greet("greet", "--times", "x")
    assert mistake.returncode == 2
    assert mistake.stderr.startswith("loopctl: error: ")
    assert "'x' is not a valid int" in mistake.stderr
    assert "(see `loopctl greet --help`)" in mistake.stderr


def test_a_described_command_has_help_like_a_typer_one(greet: Any) -> None:
    shown = greet("greet", "--help")
    assert shown.returncode == 0, shown.stderr
    assert "Greet someone. Twice." in shown.stdout
    for text in ("Who to greet.", "-n, --times", "How many times.", "--shout", "[default: 1]"):
        assert text in shown.stdout
    listed = greet("--help")
    assert "greet " in listed.stdout
    assert "Greet someone." in listed.stdout
    group = greet("greetings", "--help")
    assert group.returncode == 0, group.stderr
    assert group.stdout.index("say") < group.stdout.index("list")  # described commands first


def test_a_typer_command_of_a_plugin_loads_the_plugins_once(greet: Any) -> None:
    probe = (
        "import loopctl.pluginhost as ph\n"
        "from loopctl.__main__ import main\n"
        "loads = []\n"
        "load = ph.PluginHost.load\n"
        "ph.PluginHost.load = lambda self, *a, **k: (loads.append(1), load(self, *a, **k))[1]\n"
        "code = main(['greetings', 'list'])\n"
        "print(code, len(loads))\n"
    )
    done = greet("-c", probe, python=True)
    assert done.stdout == "hello, hi\n0 1\n", done.stderr


def test_the_builtin_command_names_are_the_apps() -> None:
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert names == BUILTIN_COMMANDS


def test_a_description_is_checked_when_made() -> None:
    with pytest.raises(ValueError, match="not a Python identifier"):
        CliOption("no-good", "--no-good")
    with pytest.raises(ValueError, match="flags"):
        CliOption("good", "good")
    with pytest.raises(ValueError, match="type must be"):
        CliArgument("good", type=bytes)
    with pytest.raises(ValueError, match="module:function"):
        CliCommand("x", "module.function", help="")
    with pytest.raises(ValueError, match="one or two words"):
        CliCommand("a b c", "m:f", help="")
    with pytest.raises(ValueError, match="same flag"):
        CliCommand("x", "m:f", help="", params=[CliOption("a", "--a"), CliOption("b", "--a")])


# --- the plain forms are read as typer reads them ---------------------------------------------------


class Recorded(CliCommand):
    """A command whose function records what it was called with."""

    calls: list[dict[str, Any]]

    def run(self, arguments: dict[str, Any]) -> int:
        self.calls.append(arguments)
        return 0


SPEC = Recorded(
    "x",
    "unused:function",
    help="A command.",
    params=[
        CliArgument("source", default="-"),
        CliArgument("where", type=Path, default=None),
        CliOption("fmt", "--format", "-f", default="terminal"),
        CliOption("count", "--count", type=int),
        CliOption("ratio", "--ratio", type=float, default=1.5),
        CliOption("logs", "--log", type=Path, multiple=True),
        CliOption("quiet", "--quiet", "-q", flag=True),
    ],
)

WORDS = st.sampled_from(
    [
        "--format", "-f", "--count", "--ratio", "--log", "--quiet", "-q", "--help", "--",
        "--format=json", "--count=3", "--log=a", "--quiet=1", "-fjson", "-qf", "--nope",
        "json", "3", "-3", " 4", "1e3", "nan", "a b", "", "-", "x/y", "é", "--count=x",
    ]
)  # fmt: skip


def typer_reading(args: list[str]) -> dict[str, Any] | None:
    """What the typer command made from SPEC calls its function with, None for an error."""
    SPEC.calls = []
    cli = typer.Typer()
    cli.command("x")(typed_function(SPEC))
    command = typer.main.get_command(cli)
    try:
        command.main(args=args, prog_name="x", standalone_mode=False)
    except Exception:  # a usage error: the plain reading must not accept it
        return None
    return SPEC.calls[0] if SPEC.calls else None


@settings(deadline=None, max_examples=300)
@given(st.lists(WORDS, max_size=6))
@example(["--ratio", "nan"])  # NaN equals nothing: compared as spelled
def test_a_plain_form_is_read_as_typer_reads_it(args: list[str]) -> None:
    plain = SPEC.parse(args)
    if plain is not None:
        assert comparable(plain) == comparable(typer_reading(args))


def comparable(reading: dict[str, Any] | None) -> dict[str, Any] | None:
    """A reading whose NaN (which equals nothing, itself included) is spelled as a string."""
    if reading is None:
        return None
    return {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in reading.items()}


def test_the_plain_reading_takes_the_usual_forms() -> None:
    assert SPEC.parse(["a", "-f", "json", "--log", "l1", "--log=l2", "-q", "--count", "2"]) == {
        "source": "a",
        "where": None,
        "fmt": "json",
        "count": 2,
        "ratio": 1.5,
        "logs": [Path("l1"), Path("l2")],
        "quiet": True,
    }
    assert SPEC.parse(["-", "p"]) == {**SPEC.parse([]), "where": Path("p")}  # type: ignore[dict-item]
    for other in (["--help"], ["-h"], ["--"], ["a", "b", "c"], ["--count", "x"], ["-q", "-q"]):
        assert SPEC.parse(other) is None, other


def test_classify_and_errors_report_run_without_typer(tmp_path: Path) -> None:
    """The first-party plugins' described commands, as a user runs them."""
    log = tmp_path / "small.log"
    log.write_text("FAILED tests/test_calc.py::test_add - assert -1 == 5\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = "failure-classifier,context-errors"
    env["LOOPCTL_FAILURE_MEMORY"] = str(tmp_path / "memory.sqlite3")
    probe = (
        "import json, sys\n"
        "from loopctl.__main__ import main\n"
        "code = main(sys.argv[1:])\n"
        "print(json.dumps([code, sorted(m for m in sys.modules if m.split('.')[0] == 'typer')]))\n"
    )
    for args in (["classify", "--log", str(log)], ["errors", "report", str(log)]):
        done = subprocess.run(
            [sys.executable, "-c", probe, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        *output, last = done.stdout.splitlines()
        assert json.loads(last) == [0, []], args
        assert any("test_add" in line for line in output), done.stdout


@pytest.mark.slow
def test_status_reads_a_finished_loop_with_only_what_reading_needs(tmp_path: Path) -> None:
    """No typer, none of what only writing the state needs (moving archives, naming temp
    files, the lock's host name), and not the typed configuration for the state directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    project = tmp_path / "demo"
    subprocess.run(
        [sys.executable, "-m", "loopctl", "demo", "--keep", str(project), "--json"],
        env=env, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    probe = (
        "import json, sys\n"
        "from loopctl.__main__ import main\n"
        "code = main(['status'])\n"
        "heavy = ('typer', 'rich', 'shutil', 'socket', 'secrets', 'loopctl.engine',\n"
        "         'loopctl.config.load', 'loopctl.config.schema',  # state_dir is not set\n"
        "         'loopctl.runmodel')  # a loop's classes: reading its records needs none\n"
        "import gc\n"
        "classes = sorted(f'{o.__module__}.{o.__qualname__}' for o in gc.get_objects()\n"
        "    if isinstance(o, type) and '__attrs_attrs__' in o.__dict__\n"
        "    and o.__module__.startswith('loopctl'))\n"
        "print(json.dumps(classes))\n"
        "print(json.dumps([code, [m for m in heavy if m in sys.modules]]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=project, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    *output, classes, last = done.stdout.splitlines()
    assert json.loads(last) == [0, []]
    assert any("complete" in line for line in output), done.stdout
    # each attrs class costs the start-up about 0.3 ms: status defines only these
    assert set(json.loads(classes)) <= {
        "loopctl.model.AgentSummary",
        "loopctl.model.IterationRecord",
        "loopctl.model.Usage",
        "loopctl.state.frontmatter.Entry",
        "loopctl.state.journal.JsonlRead",
        "loopctl.state.loopstate.LoopState",
        "loopctl.state.loopstate.RunSettings",
    }
    assert "loopctl.model.IterationRecord" in json.loads(classes)  # the probe sees them
