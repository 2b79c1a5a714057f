"""Shared helpers for the benchmark scripts: timing, medians, and the figure rows they return."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Mapping, Sequence

import attrs


@attrs.define
class Figure:
    """One measured number, with its target and the same-run baseline it is compared against."""

    name: str
    value: float
    unit: str
    target: str = ""
    #: True / False when the figure has a target, None when it is informational.
    ok: bool | None = None
    note: str = ""


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


def time_commands(
    commands: Mapping[str, Sequence[str]],
    runs: int = 21,
    env: dict[str, str] | None = None,
    cwd: Mapping[str, str] | None = None,
) -> dict[str, list[float]]:
    """Wall-clock seconds of ``runs`` executions of each command (after one warm-up run each),
    taken in turns (one of each, then again) so that a slow spell of the machine falls on all
    of them alike rather than on whichever was being timed. ``cwd``: a command's working
    directory, by name (default: this process's)."""
    where = cwd or {}
    for name, argv in commands.items():
        subprocess.run(argv, capture_output=True, env=env, cwd=where.get(name), check=False)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, env=env, cwd=where.get(name), check=False)
            samples[name].append(time.perf_counter() - start)
    return samples


def print_table(figures: Sequence[Figure]) -> None:
    width = max(len(f.name) for f in figures)
    print(f"{'figure':<{width}}  {'value':>12}  {'target':<14} ok    note")
    for f in figures:
        mark = "" if f.ok is None else ("yes" if f.ok else "NO")
        print(f"{f.name:<{width}}  {f.value:>10.3f} {f.unit:<2} {f.target:<14} {mark:<5} {f.note}")
