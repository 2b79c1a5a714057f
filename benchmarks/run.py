"""Run every benchmark and print one table of figures (``nox -s bench``).

python benchmarks/run.py                     # every bench_*.py in this folder
python benchmarks/run.py bench_engine        # some of them
python benchmarks/run.py --write-docs        # also put the table in docs/benchmarks.md
"""

from __future__ import annotations

import datetime
import importlib
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

HERE = Path(__file__).parent

#: Every benchmark module (each has figures() -> list[Figure]): a new one cannot be forgotten.
BENCHMARKS = sorted(path.stem for path in HERE.glob("bench_*.py"))
DOCS = HERE.parent / "docs" / "benchmarks.md"
BEGIN = "<!-- measured: written by `python benchmarks/run.py --write-docs`; do not edit -->"
END = "<!-- /measured -->"


def markdown(figures: Sequence[Figure], load: float) -> str:
    """The figures as the table docs/benchmarks.md shows, with when and where they were taken."""
    lines = [
        f"Measured {datetime.date.today().isoformat()} with Python {platform.python_version()} "
        f"on {os.cpu_count()} cores (load average {load:.1f} when the run began).",
        "",
        "| figure | value | target | met | note |",
        "|---|---|---|---|---|",
    ]
    for f in figures:
        met = "" if f.ok is None else ("yes" if f.ok else "**no**")
        name = f.name.strip().replace("|", "\\|")
        name = f"&nbsp;&nbsp;{name}" if f.name.startswith(" ") else name
        note = f.note.replace("|", "\\|")
        lines.append(f"| {name} | {f.value:.3f} {f.unit} | {f.target} | {met} | {note} |")
    return "\n".join(lines)


def write_docs(figures: Sequence[Figure], load: float, path: Path = DOCS) -> None:
    text = path.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    table = markdown(figures, load)
    path.write_text(f"{text[:start]}\n{table}\n{text[end:]}", encoding="utf-8")


def main(argv: list[str]) -> int:
    write = "--write-docs" in argv
    names = [a for a in argv if a != "--write-docs"] or BENCHMARKS
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    figures: list[Figure] = []
    for name in names:
        started = time.perf_counter()
        module = importlib.import_module(name)
        measured = module.figures()
        figures.append(
            Figure(f"[{name}]", time.perf_counter() - started, "s", note="benchmark run time")
        )
        figures.extend(measured)
    print_table(figures)
    if write:
        write_docs(figures, load)
        print(f"wrote {DOCS}")
    return 0 if all(f.ok is not False for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
