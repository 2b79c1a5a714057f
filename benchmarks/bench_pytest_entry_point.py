"""What loopctl costs the user's own test runs: ``pytest -q`` on a one-test project, in a venv
with pytest alone (the baseline) against one with pytest and loopctl-core.

pytest loads every installed ``pytest11`` entry point at start-up, and the loop runs the
user's tests every iteration, in the project's environment where the quickstart installs
loopctl. loopctl's entry point is one small module whose fixtures import the testing kit when
a test asks for one; the third row imports what the entry point of 0.2 imported
(``-p loopctl.testing.pytest_plugin``: the kit, and with it the engine), for comparison.

Two venvs are built in a temporary directory (pytest from the package index or the local
wheelhouse pip is configured with; loopctl-core from this checkout, or its wheel in
``LOOPCTL_WHEELHOUSE``), installed without
bytecode. The rows without bytecode (``PYTHONDONTWRITEBYTECODE=1``, as in some containers and
CI images: every import compiles its source, every run) are timed first, while no
``__pycache__`` exists yet; then the usual case, bytecode written on the first run. Commands
run in turns, 15 rounds after one warm-up each; the figures are medians of each run's CPU time
(user + system: on a shared machine wall-clock time is mostly waiting for a core, and swung
the ratio between 0.8x and 1.1x from run to run), with the wall-clock medians beside them, and
the ratios are against the baseline of the same run.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

ROOT = Path(__file__).resolve().parents[1]
ONE_TEST = "def test_one():\n    assert 1 + 1 == 2\n"
#: loopctl installed may cost a pytest run at most this much over pytest alone.
TARGET_RATIO = 1.10
RUNS = 15


def _venv(where: Path, *requirements: str) -> str:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = str(where / "bin" / "python")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-compile", *requirements],
        check=True, capture_output=True,
    )  # fmt: skip
    return python


def _measure(
    commands: dict[str, list[str]], cwd: Path, env: dict[str, str]
) -> dict[str, list[tuple[float, float]]]:
    """(CPU ms, wall ms) of ``RUNS`` runs of each command, after one warm-up each, in turns.
    CPU time (user + system, the child's rusage) is the figure: on a shared machine a run's
    wall-clock time is mostly how long it waited for a core."""
    for argv in commands.values():
        subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(RUNS):
        for name, argv in commands.items():
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            samples[name].append((cpu * 1000, wall * 1000))
    return samples


def _core() -> str:
    """loopctl-core to install: its wheel from ``LOOPCTL_WHEELHOUSE`` (nox builds one per run),
    else this checkout's source."""
    wheelhouse = os.environ.get("LOOPCTL_WHEELHOUSE")
    if wheelhouse:
        return str(next(Path(wheelhouse).glob("loopctl_core-*.whl")))
    return str(ROOT / "core")


def figures() -> list[Figure]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LOOPCTL_", "PYTEST_", "PYTHONDONTWRITEBYTECODE"))
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project = root / "project"
        project.mkdir()
        (project / "test_one.py").write_text(ONE_TEST)
        (project / "pytest.ini").write_text("[pytest]\n")  # the rootdir: nothing from above
        bare = _venv(root / "bare", "pytest")
        with_loopctl = _venv(root / "with", "pytest", _core())
        pytest = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]
        commands = {
            "bare": [bare, *pytest],
            "loopctl": [with_loopctl, *pytest],
            "kit": [with_loopctl, *pytest, "-p", "loopctl.testing.pytest_plugin"],
        }
        no_bytecode = {**env, "PYTHONDONTWRITEBYTECODE": "1"}
        for name, argv in commands.items():  # each must pass, or its time means nothing
            done = subprocess.run(
                argv, cwd=project, env=no_bytecode, capture_output=True, check=False
            )
            if done.returncode != 0:
                raise RuntimeError(f"{name}: exit {done.returncode}: {done.stdout.decode()[-500:]}")
        cold = _measure(commands, project, no_bytecode)
        warm = _measure(commands, project, env)
    rows = []
    for label, samples in (("bytecode cached", warm), ("no bytecode", cold)):
        cpu = {name: statistics.median(s[0] for s in runs) for name, runs in samples.items()}
        wall = {name: statistics.median(s[1] for s in runs) for name, runs in samples.items()}
        ratio = cpu["loopctl"] / cpu["bare"]
        rows += [
            Figure(
                f"pytest -q, one test, loopctl installed: CPU ({label})",
                cpu["loopctl"],
                "ms",
                f"<= {TARGET_RATIO:.2f}x bare",
                ratio <= TARGET_RATIO,
                f"{ratio:.3f}x pytest alone ({cpu['loopctl'] - cpu['bare']:+.1f} ms); "
                f"wall {wall['loopctl']:.0f} against {wall['bare']:.0f} ms",
            ),
            Figure(f"  baseline: pytest alone, CPU ({label})", cpu["bare"], "ms", note="same run"),
            Figure(
                f"  the kit imported, as 0.2's entry point did: CPU ({label})",
                cpu["kit"],
                "ms",
                note=f"{cpu['kit'] / cpu['bare']:.3f}x pytest alone "
                f"({cpu['kit'] - cpu['bare']:+.1f} ms); wall {wall['kit']:.0f} ms",
            ),
        ]
    return rows


if __name__ == "__main__":
    print_table(figures())
