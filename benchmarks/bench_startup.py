"""Start-up time of the one-shot commands people type: ``--version``, ``plugins list``, ``status``,
``--help``, and the plugins' ``classify`` and ``errors report``; and ``classify --log`` on a 10 MB
log against the classification itself.

Measured from outside, with the ``loopctl`` console script of the environment running this file
(``nox -s bench`` installs core and the four first-party plugins there, compiled, as users get
them), with the four first-party plugins enabled, output to pipes (so ``--help`` is the plain
text a pipe gets). ``status``, ``classify``, ``errors report`` and ``--help`` run in a project:
the example project of ``loopctl demo`` after its loop ran (its config file, its state
directory), with a small pytest log; ``--version`` and ``plugins list`` in an empty directory,
as before. Baselines in the same run: an empty Python start, and the plain way to build this CLI
(a typer app that scans the entry points). The commands are timed in turns, 21 rounds of one run
each after one warm-up run (cold-ish: the files are in the page cache, nothing else is warm), so
the machine's slow spells fall on all of them alike; each figure is the median.

``classify --log`` on 10 MB is held against the in-process classification of the same log
(``classify(evidence)``, the figure of bench_failure_classifier, measured here in this run) plus
the command's start-up (``classify --log`` on the small log): at most 3x that.

Issue 27 names ``classify``'s target in another form: under 100 ms over ``python -c pass``. That
figure is the median, over the rounds, of each round's ``classify --log`` (small log) minus its
``python -c pass``, from this run. It is only what users get from a compiled install (``pip
install ./core ./plugins/*``, as ``nox -s bench`` does): an editable install with
``PYTHONDONTWRITEBYTECODE`` set compiles every loopctl module at every start, and the figure says
which kind of install it measured. Unlike the multiples above it is not corrected for the
machine's speed: on a loaded machine (``python -c pass`` slower than :data:`ISSUE_PYTHON_MS`) it
grows with the load, and the note gives it scaled to an idle machine's Python start as well.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, median_ms, print_table, time_commands
from bench_failure_classifier import make_evidence, make_log

from loopctl_failure_classifier.arbitration import classify

PLAIN_TYPER_APP = """
import typer
from importlib import metadata
import rich

app = typer.Typer()

@app.command()
def plugins_list() -> None:
    for ep in metadata.entry_points(group="loopctl.plugins"):
        print(ep.name, ep.value)

@app.command()
def version() -> None:
    print("x")

app()
"""

#: The figures are for loopctl with exactly these plugins, whatever else is installed here.
FIRST_PARTY = "context-monitor,failure-classifier,context-errors,goal-guard"

SMALL_LOG = """\
============================= test session starts ==============================
collected 3 items

tests/test_calc.py .F.                                                   [100%]

=================================== FAILURES ===================================
___________________________________ test_add ___________________________________

    def test_add():
>       assert add(2, 3) == 5
E       assert -1 == 5
E        +  where -1 = add(2, 3)

tests/test_calc.py:7: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_add - assert -1 == 5
========================= 1 failed, 2 passed in 0.03s ==========================
"""

#: Target per command, in ms on the machine the issues measured (issue 13; --version and
#: plugins list from issue 9), where ``python -c pass`` took :data:`ISSUE_PYTHON_MS`. Judged as
#: a multiple of ``python -c pass`` in the same run, so a machine slower or faster than that one
#: (this one's speed drifts by a third over a day) neither fails nor passes a command by itself.
TARGETS = {
    "version": 60.0,
    "plugins": 150.0,
    "plugins_json": 150.0,
    "status": 100.0,
    "classify": 100.0,
    "errors": 100.0,
    "help": 150.0,
}
#: ``python -c pass`` on the issues' machine: issue 13 measured ``--help`` at 247 ms, 25.6x it.
ISSUE_PYTHON_MS = 247 / 25.6
#: Issue 27: ``classify --log`` (small log) at most this many ms over ``python -c pass``.
CLASSIFY_OVER_PYTHON_MS = 100.0
LABELS = {
    "version": "loopctl --version",
    "plugins": "loopctl plugins list",
    "plugins_json": "loopctl plugins list --json",
    "status": "loopctl status (a finished loop)",
    "classify": "loopctl classify --log (small log)",
    "errors": "loopctl errors report (small log)",
    "help": "loopctl --help (in a pipe)",
}


def _in_process_classification_ms(log: str, runs: int = 11) -> float:
    evidence = make_evidence(log)
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        classify(evidence)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def _install_kind() -> str:
    """How loopctl-core is installed here: ``compiled`` (from a wheel: the modules' bytecode was
    written at install time) or ``editable`` (the checkout's sources, compiled at every start
    when ``PYTHONDONTWRITEBYTECODE`` is set)."""
    from importlib import metadata

    text = metadata.distribution("loopctl-core").read_text("direct_url.json") or "{}"
    editable = json.loads(text).get("dir_info", {}).get("editable", False)
    return "editable" if editable else "compiled"


def _over_python(samples: dict[str, list[float]], name: str) -> float:
    """The median over the rounds of ``name``'s time minus ``python -c pass``'s, in ms: each
    round ran them one after the other, so a slow spell falls on both."""
    return statistics.median(
        (command - python) * 1000
        for command, python in zip(samples[name], samples["python"], strict=True)
    )


def figures() -> list[Figure]:
    bindir = Path(sys.executable).parent
    loopctl = str(bindir / "loopctl")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOOPCTL_")}
    env["LOOPCTL_PLUGINS"] = FIRST_PARTY
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env["LOOPCTL_FAILURE_MEMORY"] = str(root / "failures.sqlite3")  # none: a fresh user
        empty = root / "empty"  # no loopctl.toml found from here
        empty.mkdir()
        project = root / "project"
        subprocess.run(
            [loopctl, "demo", "--keep", str(project), "--json"],
            env=env, capture_output=True, check=True,
        )  # fmt: skip
        small, big = project / "small.log", project / "big.log"
        small.write_text(SMALL_LOG, encoding="utf-8")
        log = make_log()
        big.write_text(log, encoding="utf-8")
        script = root / "plain_typer.py"
        script.write_text(PLAIN_TYPER_APP)
        in_empty = str(empty)
        in_project = str(project)
        commands = {
            "python": ([sys.executable, "-c", "pass"], in_empty),
            "plain": ([sys.executable, str(script), "plugins-list"], in_empty),
            "version": ([loopctl, "--version"], in_empty),
            "plugins": ([loopctl, "plugins", "list"], in_empty),
            "plugins_json": ([loopctl, "plugins", "list", "--json"], in_empty),
            "status": ([loopctl, "status"], in_project),
            "classify": ([loopctl, "classify", "--log", str(small)], in_project),
            "errors": ([loopctl, "errors", "report", str(small)], in_project),
            "help": ([loopctl, "--help"], in_project),
            "classify_10mb": ([loopctl, "classify", "--log", str(big)], in_project),
        }
        for name, (argv, cwd) in commands.items():  # each must work, or its time means nothing
            done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
            if done.returncode != 0:
                raise RuntimeError(f"{name}: exit {done.returncode}: {done.stderr.decode()[-500:]}")
        samples = time_commands(
            {name: argv for name, (argv, _) in commands.items()},
            env=env,
            cwd={name: cwd for name, (_, cwd) in commands.items()},
        )
        inproc = _in_process_classification_ms(log)
    ms = {name: median_ms(values) for name, values in samples.items()}
    python = ms["python"]
    rows = [
        Figure(
            f"{LABELS[name]} (median)",
            ms[name] / python,
            "x",
            f"<= {TARGETS[name] / ISSUE_PYTHON_MS:.1f}x py",
            ms[name] / python <= TARGETS[name] / ISSUE_PYTHON_MS,
            f"{ms[name]:.1f} ms; the target: {TARGETS[name]:.0f} ms where python starts in "
            f"{ISSUE_PYTHON_MS:.2f} ms",
        )
        for name in TARGETS
    ]
    over = _over_python(samples, "classify")
    rows.append(
        Figure(
            "loopctl classify --log (small log) over python -c pass (median)",
            over,
            "ms",
            f"< {CLASSIFY_OVER_PYTHON_MS:.0f} ms",
            over < CLASSIFY_OVER_PYTHON_MS,
            f"issue 27; {_install_kind()} install; python -c pass {python:.1f} ms in this "
            f"run: {over * ISSUE_PYTHON_MS / python:.0f} ms where python starts in "
            f"{ISSUE_PYTHON_MS:.2f} ms",
        )
    )
    budget = 3 * (inproc + ms["classify"])
    rows += [
        Figure(
            "loopctl classify --log, 10 MB log (median)",
            ms["classify_10mb"],
            "ms",
            "<= 3x (c + s)",
            ms["classify_10mb"] <= budget,
            f"{ms['classify_10mb'] / (inproc + ms['classify']):.2f}x (c + s); "
            "read as a loop keeps output (1 MB)",
        ),
        Figure(
            "  c: in-process classification, same log",
            inproc,
            "ms",
            note="classify(evidence), same run",
        ),
        Figure("  s: start-up, classify --log on the small log", ms["classify"], "ms"),
        Figure("  baseline: python -c pass", python, "ms", note="same run"),
        Figure(
            "  baseline: plain typer app + entry-point scan", ms["plain"], "ms", note="same run"
        ),
        Figure("  --version / python start", ms["version"] / python, "x"),
        Figure("  plugins list / plain typer app", ms["plugins"] / ms["plain"], "x"),
        Figure("  --help / plain typer app", ms["help"] / ms["plain"], "x"),
    ]
    return rows


if __name__ == "__main__":
    print_table(figures())
