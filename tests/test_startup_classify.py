"""What ``loopctl classify --log`` imports and compiles on its way to a verdict, with the four
first-party plugins enabled as users have them (issue 27: under 100 ms over ``python -c pass``).

Its time is in benchmarks/bench_startup.py; these tests check what that time rests on, never a
time: a heavy module imported eagerly again (typer, rich, the typed configuration, another
plugin's runtime), or a regular expression compiled when its module is imported though a log
like this one never needs it, fails here, naming it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

#: Runs ``loopctl.__main__.main`` as the console script does and prints its exit code, the
#: modules imported by the end, and the modules of loopctl and its plugins that compiled a
#: regular expression while being imported (``re.compile`` at module level; a
#: ``loopctl.LazyPattern`` compiles when first used, inside a function).
DRIVER = """
import io, json, re, sys, contextlib
compiled = []
real = re.compile
def compile(pattern, flags=0):
    frame = sys._getframe(1)
    module = frame.f_globals.get("__name__", "")
    if frame.f_code.co_name == "<module>" and module.startswith("loopctl"):
        compiled.append(module)
    return real(pattern, flags)
re.compile = compile
exec("import re; re.compile('probe')", {"__name__": "loopctl_probe"})  # a module compiling one
from loopctl.__main__ import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(sys.argv[1:])
print(json.dumps([code, out.getvalue(), sorted(sys.modules), compiled]))
"""

FIRST_PARTY = ("context-monitor", "failure-classifier", "context-errors", "goal-guard")

#: What the other plugins may import for ``classify``: their entry-point module and what their
#: registration hooks import (their hook specifications, their events' names, context-errors'
#: own command's description). Their runtimes, rules and stores load in a loop, or in their own
#: commands.
OTHER_PLUGINS = {
    "loopctl_context_monitor": {"", ".plugin", ".hookspecs", ".events"},
    "loopctl_context_errors": {"", ".plugin", ".hookspecs", ".reportcmd"},
    "loopctl_goal_guard": {"", ".plugin", ".hookspecs", ".events"},
}

#: Never imported by ``classify --log``: the CLI framework and rich (the command is described,
#: run without typer; its output is plain text), the typed configuration (no setting is set),
#: a loop's engine and state files, entry points read through importlib.metadata, packaging
#: (``required_plugins`` of bare names), and what only other commands need.
HEAVY = {
    "typer",
    "click",
    "rich",
    "cattrs",
    "msgspec",
    "packaging",
    "sqlite3",
    "importlib.metadata",
    "email",
    "loopctl.cli.app",
    "loopctl.config",
    "loopctl.engine",
    "loopctl.launch",
    "loopctl.state",
    "loopctl.runmodel",
    "subprocess",
    "traceback",
}

#: The modules that compile regular expressions when imported, on this path: each of these
#: patterns is used by every ``classify --log`` (the fingerprint's masks, the withheld
#: variables' names, terminal control, the metadata directories of installed plugins). Any
#: other pattern must be a ``loopctl.LazyPattern`` (``re`` compiles one in 0.1-2 ms).
COMPILE_AT_IMPORT = {"loopctl.fingerprints", "loopctl.withhold", "loopctl.terminal"}
COMPILE_AT_IMPORT |= {"loopctl.pluginhost"}

#: A failed unittest run: a code error, found among the log's decisive lines.
UNITTEST_LOG = """\
F
======================================================================
FAIL: test_add (test_calc.AddTest.test_add)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/work/test_calc.py", line 7, in test_add
    self.assertEqual(add(1, 2), 3)
AssertionError: -1 != 3

----------------------------------------------------------------------
Ran 1 test in 0.001s

FAILED (failures=1)
"""


@pytest.fixture(scope="module")
def classified(tmp_path_factory: pytest.TempPathFactory) -> tuple[set[str], list[str]]:
    """``classify --log`` of a small unittest log, in a project with a config file, the four
    first-party plugins enabled: the modules it imported and where patterns compiled."""
    work = tmp_path_factory.mktemp("classify")
    (work / "loopctl.toml").write_text("[limits]\nmax_iterations = 5\n", encoding="utf-8")
    (work / "run.log").write_text(UNITTEST_LOG, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = ",".join(FIRST_PARTY)
    env["LOOPCTL_FAILURE_MEMORY"] = str(work / "failures.sqlite3")
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, "classify", "--log", "run.log"],
        cwd=work, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    code, out, modules, compiled = json.loads(done.stdout)
    assert code == 0, done.stderr
    assert "mode:        code_error" in out
    return set(modules), compiled


def test_classify_loads_no_other_plugins_runtime(classified: tuple[set[str], list[str]]) -> None:
    modules, _ = classified
    assert "loopctl_failure_classifier.arbitration" in modules  # the probe sees the imports
    for package, allowed in OTHER_PLUGINS.items():
        assert package in modules  # enabled, so loaded: custom classifiers may come from any
        loaded = {m for m in modules if m == package or m.startswith(package + ".")}
        assert loaded <= {package + suffix for suffix in allowed}, package


def test_classify_imports_no_heavy_module(classified: tuple[set[str], list[str]]) -> None:
    modules, _ = classified
    top = {m.split(".")[0] for m in modules}
    assert not {m for m in HEAVY if m in modules or m in top}


def test_classify_compiles_at_import_only_the_patterns_every_run_uses(
    classified: tuple[set[str], list[str]],
) -> None:
    _, compiled = classified
    assert "loopctl_probe" in compiled  # the driver sees a module's compiles
    assert set(compiled) - {"loopctl_probe"} <= COMPILE_AT_IMPORT
