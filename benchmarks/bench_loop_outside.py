"""The loop as a user feels it, timed from outside: loopctl against the bare bash loop.

Every contestant runs the same two scripts in a fresh git repository of its own (a temporary
directory; loopctl's workspace snapshot uses git):

- ``agent.sh``, the no-op agent: appends ``$EPOCHREALTIME`` (bash's own clock, no process) to
  a file outside the repository, reads the prompt from stdin, and writes its turn number into
  ``work.txt`` (one edited file: progress, as a real agent makes);
- ``tests.sh``, the no-op test command: prints pytest-looking output with one failing test whose
  name and error words are spelled from the turn number in letters (loopctl's fingerprints
  mask numbers), so stuck detection and the failure classifier never see the same
  failure twice; it passes once ``work.txt`` says the run's last turn, and appends its own end
  time to a second file.

The contestants: the bash loop ``while :; do ./agent.sh <prompt; sh -c ./tests.sh && break;
done``; ``loopctl run --agent-cmd ./agent.sh --test-cmd ./tests.sh`` with no plugins
(``LOOPCTL_DISABLE_PLUGIN_AUTOLOAD=1``); and the same with the four first-party plugins
(``LOOPCTL_PLUGINS=context-monitor,failure-classifier,context-errors,goal-guard``). loopctl is
the console script of the environment running this file, its output goes to a file (no
terminal), and each run gets its own ``XDG_DATA_HOME`` (the context-errors plugin's memory).

Iteration i lasts from the agent's i-th start to its (i+1)-th, so it holds everything a user
waits for: the agent, the tests, and whatever runs between them. Every run is checked before a
number is taken from it: its exit status, the number of agent starts, the journal's length and
the plugins loop.start names; a run that stopped early makes the benchmark fail, never report.

1. **Overhead** at N = 500: ``ROUNDS`` rounds, each running every contestant once for N
   iterations, in an order rotated every round, so a slow spell of the machine falls on all
   three alike. The extra time per iteration is loopctl's mean (median) iteration minus the
   bash loop's mean (median), over every round. Six rounds, because on a 2-core machine one
   loopctl round's median moves by up to 3 ms against the next while the bash loop's moves by
   0.5: the per-round figures (each round's loopctl against the same round's bash loop) are
   printed beside the pooled ones, so a reader sees how far one round could mislead.
2. **Flatness**: one loop of ``LONG`` (10,000) iterations without plugins and one of LONG / 5
   (2,000) with the four; the median iteration of the last tenth against the first tenth. A
   long run cannot be interleaved, so a fresh loop as long as a tenth runs right after each
   one: its median against the first tenth's says whether the machine changed meanwhile.
3. **resume and the final report**, 50 against LONG iterations (both without plugins, ended
   at their iteration limit): ``loopctl resume --max-iterations K+1`` (one more iteration, as a
   user continues a loop) timed as a whole process, taken in turns on the two loops; a plain
   ``resume`` of a loop at its limit (it runs no iteration: reads the state, ends, rewrites the
   report); and the end of a run: from the last test run's end (stamped by ``tests.sh``) to
   the loopctl process's exit, which is where the final report is written (the report alone,
   from the ``loop.end`` event's time to ``report.md``'s mtime, is shown beside it).
4. **Peak memory**: the maximum RSS of the loopctl process (``os.wait4``'s rusage: the largest
   of the process and its descendants, which are a bash, a git and a cat) of the LONG loop
   against the N = 500 runs. Every contestant is started by a small launcher (:data:`LAUNCHER`)
   that takes those figures and the times: Linux carries the peak RSS of the process that
   spawns across ``exec``, so a loop spawned straight from this benchmark, grown large by the
   benchmarks run before it, would report the benchmark's size instead of its own.

Sizes come from the environment: ``LOOPCTL_BENCH_N`` (500), ``LOOPCTL_BENCH_ROUNDS`` (6),
``LOOPCTL_BENCH_LONG`` (10,000), ``LOOPCTL_BENCH_RESUMES`` (5 turns); ``LOOPCTL_BENCH_QUICK=1``
makes them 50, 1, 500 and 2 for a check of the harness in well under a minute. Progress and
each phase's time go to stderr.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

sys.path.insert(0, str(Path(__file__).parent))

from _common import Figure, print_table

FIRST_PARTY = ("context-monitor", "failure-classifier", "context-errors", "goal-guard")
GOAL = "make the tests pass"
#: The loops of part 3 run at their iteration limit: their tests never pass.
NEVER = 10**9
#: The small loop part 3 compares the long one with.
SMALL = 50
#: What the bash loop feeds the agent: about the size of loopctl's own prompt without plugins.
PROMPT = f"""## Your Goal

{GOAL}

## Last Test Run

`./tests.sh` failed with exit code 1.

Failing tests:
- tests/test_kbj.py::test_kbj

Errors:
    E       AssertionError: assert 'hqoa' == 'mfnzb'
    tests/test_kbj.py:7: AssertionError
    FAILED tests/test_kbj.py::test_kbj - AssertionError: assert 'hqoa' == 'mfnzb'

## Loop Status

This is iteration 3 of at most 500.
After your turn, loopctl runs `./tests.sh`; the loop ends when it passes.
"""

AGENT = """#!/bin/bash
# The no-op agent: note the start, read the prompt, edit one file.
echo "$EPOCHREALTIME" >> {starts}
cat > /dev/null
read -r n < {count}
n=$((n + 1))
echo "$n" > {count}
echo "$n" > work.txt
echo "edited work.txt"
"""

TESTS = """#!/bin/bash
# The no-op test command: one failing test, named and worded differently every turn.
read -r n < work.txt
if [ "$n" -ge {pass_at} ]; then
  echo "============================== 3 passed in 0.01s ==============================="
  echo "$EPOCHREALTIME" >> {ends}
  exit 0
fi
L=abcdefghijklmnopqrstuvwxyz
word() {{ local k=$1; W=; while :; do W+=${{L:k%26:1}}; k=$((k / 26)); [ "$k" -eq 0 ] && break; done; }}
word "$n"; name=$W
word "$((n * 7919 + 13))"; got=$W
word "$((n * 104729 + 7))"; want=$W
printf '%s\\n' \\
  "============================= test session starts ==============================" \\
  "platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0" \\
  "collected 3 items" \\
  "" \\
  "tests/test_$name.py .F.                                                    [100%]" \\
  "" \\
  "=================================== FAILURES ===================================" \\
  "_________________________________ test_$name _________________________________" \\
  "" \\
  "    def test_$name():" \\
  ">       assert compute_$name() == '$want'" \\
  "E       AssertionError: assert '$got' == '$want'" \\
  "" \\
  "tests/test_$name.py:7: AssertionError" \\
  "=========================== short test summary info ============================" \\
  "FAILED tests/test_$name.py::test_$name - AssertionError: assert '$got' == '$want'" \\
  "========================= 1 failed, 2 passed in 0.02s =========================="
echo "$EPOCHREALTIME" >> {ends}
exit 1
"""

#: loopctl's exit codes for the two ways these loops end (docs/reference/exit-codes.md).
COMPLETE, MAX_ITERATIONS = 0, 10


#: Starts ``argv`` (after the figures file), waits for it and writes its start and exit times
#: (``time.time``), its run time (monotonic) and its peak RSS (KB) to the figures file; exits
#: as it did. A process of its own, a few MB big: what the contestant's rusage reports is its
#: own peak, not the size of the benchmark that spawned it.
LAUNCHER = """
import os, sys, time
figures, argv = sys.argv[1], sys.argv[2:]
spawned, began = time.time(), time.monotonic()
pid = os.posix_spawnp(argv[0], argv, os.environ)
_, status, usage = os.wait4(pid, 0)
wall, exited = time.monotonic() - began, time.time()
with open(figures, "w") as out:
    out.write(f"{spawned!r} {exited!r} {wall!r} {usage.ru_maxrss}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


#: The bash loop's iteration where issue 13 set the targets (+3 ms without plugins, +6 ms with
#: the four): they are judged as multiples of the bash loop's iteration in the same run, so a
#: slow spell of the machine (this one drifts by a third over a day) moves target and figure
#: alike.
ISSUE_BASH_MS = 4.1


class BenchError(RuntimeError):
    """A run did not do what the benchmark needs: no figure is taken from it."""


@attrs.frozen
class Sizes:
    n: int
    rounds: int
    long: int
    resumes: int

    @property
    def long_plugins(self) -> int:
        return max(self.long // 5, 20)

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> Sizes:
        quick = env.get("LOOPCTL_BENCH_QUICK", "") not in ("", "0")
        defaults = (50, 1, 500, 2) if quick else (500, 6, 10_000, 5)
        names = ("LOOPCTL_BENCH_N", "LOOPCTL_BENCH_ROUNDS", "LOOPCTL_BENCH_LONG")
        values = [_positive(env, name, d) for name, d in zip(names, defaults[:3], strict=True)]
        resumes = _positive(env, "LOOPCTL_BENCH_RESUMES", defaults[3])
        sizes = cls(values[0], values[1], values[2], resumes)
        if sizes.n < 3:
            raise BenchError(f"LOOPCTL_BENCH_N={sizes.n}: needs at least 3 iterations")
        if sizes.long < 2 * SMALL:
            raise BenchError(
                f"LOOPCTL_BENCH_LONG={sizes.long}: needs at least {2 * SMALL} iterations "
                f"(it is compared with a {SMALL}-iteration loop)"
            )
        return sizes


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").replace("_", "").replace(",", "")
    if not raw:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise BenchError(f"{name}={env[name]!r}: expected a whole number of at least 1")
    return int(raw)


@attrs.frozen
class Run:
    """One process (a loop, or a resume of one) as seen from outside."""

    #: Agent start times (epoch seconds) of this process's iterations.
    starts: list[float]
    #: Test-command end times of this process's iterations.
    ends: list[float]
    spawned: float
    exited: float
    wall_s: float
    maxrss_kb: int
    #: The loop.end event's time and report.md's mtime (loopctl runs only).
    loop_end: float | None = None
    report_written: float | None = None

    @property
    def intervals(self) -> list[float]:
        """Iteration i's duration: the agent's (i+1)-th start minus its i-th."""
        return [b - a for a, b in zip(self.starts, self.starts[1:], strict=False)]

    @property
    def end_of_run(self) -> float:
        """From the last test run's end to the process's exit."""
        return self.exited - self.ends[-1]


class Loop:
    """A fresh git repository with the two scripts, and the files they stamp."""

    def __init__(self, root: Path, name: str, pass_at: int) -> None:
        self.name = name
        self.dir = root / name
        self.repo = self.dir / "repo"
        self.meta = self.dir / "meta"
        self.repo.mkdir(parents=True)
        self.meta.mkdir()
        self.starts_file = self.meta / "starts"
        self.ends_file = self.meta / "ends"
        self.prompt_file = self.meta / "prompt"
        self.log = self.meta / "output.log"
        self.data_home = self.meta / "data"
        self.data_home.mkdir()
        (self.meta / "count").write_text("0\n")
        self.prompt_file.write_text(PROMPT)
        quoted = {
            "starts": shlex.quote(str(self.starts_file)),
            "ends": shlex.quote(str(self.ends_file)),
            "count": shlex.quote(str(self.meta / "count")),
        }
        for script, text in (
            ("agent.sh", AGENT.format(**quoted)),
            ("tests.sh", TESTS.format(pass_at=pass_at, **quoted)),
        ):
            (self.repo / script).write_text(text)
            (self.repo / script).chmod(0o755)
        (self.repo / "work.txt").write_text("0\n")
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid"]
        for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "scripts"]):
            subprocess.run(git + argv, cwd=self.repo, check=True, capture_output=True)
        self.iterations = 0

    def _stamps(self, path: Path) -> list[float]:
        return [float(line) for line in path.read_text().split()] if path.exists() else []

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], expect_exit: int) -> Run:
        """Run ``argv`` in the repository to its end, through :data:`LAUNCHER`; fails unless it
        exits ``expect_exit``."""
        starts_before = len(self._stamps(self.starts_file))
        ends_before = len(self._stamps(self.ends_file))
        figures = self.dir / "launched.txt"
        with self.log.open("ab") as out:
            out.write(f"\n$ {shlex.join(argv)}\n".encode())
            out.flush()
            done = subprocess.run(
                [sys.executable, "-S", "-c", LAUNCHER, str(figures), *argv],
                cwd=self.repo,
                env={**env, "XDG_DATA_HOME": str(self.data_home)},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if done.returncode != expect_exit:
            raise self.failure(
                f"{shlex.join(argv[:2])} exited {done.returncode}, expected {expect_exit}"
            )
        spawned, exited, wall, maxrss_kb = figures.read_text().split()
        return Run(
            starts=self._stamps(self.starts_file)[starts_before:],
            ends=self._stamps(self.ends_file)[ends_before:],
            spawned=float(spawned),
            exited=float(exited),
            wall_s=float(wall),
            maxrss_kb=int(maxrss_kb),
        )

    def failure(self, what: str) -> BenchError:
        tail = self.log.read_text(errors="replace")[-3000:]
        return BenchError(f"{self.name} ({self.dir}): {what}; the end of its output:\n{tail}")

    def bash_loop(self, env: Mapping[str, str], iterations: int) -> Run:
        script = f"while :; do ./agent.sh <{shlex.quote(str(self.prompt_file))}; "
        script += "sh -c ./tests.sh && break; done"
        run = self.spawn(["bash", "-c", script], env, 0)
        self._check(run, iterations)
        return run

    def loopctl(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        *,
        expect_exit: int,
        iterations: int,
        plugins: Sequence[str] | None = None,
        installed: frozenset[str] = frozenset(),
    ) -> Run:
        """One loopctl process (``run`` or ``resume``) that must add ``iterations`` iterations,
        end with ``expect_exit``, and (a ``run``) load exactly ``plugins`` of ``installed``."""
        run = self.spawn(argv, env, expect_exit)
        self._check(run, iterations)
        state = self.repo / ".loopctl"
        journal = _count_lines(state / "iterations.jsonl")
        if journal != self.iterations:
            raise self.failure(
                f"iterations.jsonl has {journal} records, expected {self.iterations}"
            )
        start, end = _first_and_last_events(state / "events.jsonl", "loop.start", "loop.end")
        if plugins is not None:
            loaded = sorted(set(start.get("plugins", [])) & installed) if start else None
            if loaded != sorted(plugins):
                raise self.failure(f"loaded plugins {loaded}, expected {sorted(plugins)}")
        if end is None or end.get("iterations") != self.iterations:
            raise self.failure(f"loop.end says {end}, expected {self.iterations} iterations")
        report = (state / "report.md").stat().st_mtime_ns / 1e9
        return attrs.evolve(run, loop_end=float(end["ts"]), report_written=report)

    def _check(self, run: Run, iterations: int) -> None:
        self.iterations += iterations
        if len(run.starts) != iterations or len(run.ends) < iterations:
            raise self.failure(
                f"{len(run.starts)} agent starts and {len(run.ends)} test runs, "
                f"expected {iterations} of each"
            )


def _count_lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))


def _first_and_last_events(
    path: Path, first: str, last: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The first ``first`` event and the last ``last`` event of an events.jsonl."""
    found_first: dict[str, Any] | None = None
    found_last: dict[str, Any] | None = None
    first_key, last_key = f'"type":"{first}"'.encode(), f'"type":"{last}"'.encode()
    with path.open("rb") as f:
        for line in f:
            compact = line.replace(b" ", b"")
            if found_first is None and first_key in compact:
                found_first = json.loads(line)
            elif last_key in compact:
                found_last = json.loads(line)
    return found_first, found_last


class Bench:
    def __init__(self, root: Path, sizes: Sizes) -> None:
        self.root = root
        self.sizes = sizes
        self.loopctl = str(Path(sys.executable).parent / "loopctl")
        if not Path(self.loopctl).exists():
            raise BenchError(f"no loopctl console script next to {sys.executable}")
        # Nothing of the caller's loopctl settings; bytecode written, as in an installation.
        self.env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("LOOPCTL_") and k != "PYTHONDONTWRITEBYTECODE"
        }
        listed = subprocess.run(
            [self.loopctl, "plugins", "list", "--json"],
            env=self.env,
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        )
        self.installed = frozenset(_plugin_names(json.loads(listed.stdout)))
        missing = sorted(set(FIRST_PARTY) - self.installed)
        if missing:
            raise BenchError(f"the first-party plugins {missing} are not installed here")
        self.contestants = {
            "none": {"LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": "1"},
            "four": {"LOOPCTL_PLUGINS": ",".join(FIRST_PARTY)},
        }
        self.count = 0
        self.started = time.perf_counter()

    def say(self, text: str) -> None:
        print(
            f"bench_loop_outside [{time.perf_counter() - self.started:7.1f} s] {text}",
            file=sys.stderr,
            flush=True,
        )

    def new_loop(self, kind: str, pass_at: int) -> Loop:
        self.count += 1
        return Loop(self.root, f"{self.count:03d}-{kind}", pass_at)

    def run(self, kind: str, iterations: int, *, pass_at: int | None = None) -> tuple[Loop, Run]:
        """A fresh loop of ``iterations`` iterations: the tests pass at the last one, or, with
        ``pass_at=NEVER``, the loop ends at its iteration limit."""
        loop = self.new_loop(kind, pass_at or iterations)
        if kind == "bash":
            return loop, loop.bash_loop(self.env, iterations)
        argv = [self.loopctl, "run", GOAL, "--agent-cmd", "./agent.sh", "--test-cmd"]
        argv += ["./tests.sh", "--max-iterations", str(iterations), "--wall-clock", "2000000"]
        run = loop.loopctl(
            argv,
            {**self.env, **self.contestants[kind]},
            expect_exit=COMPLETE if pass_at is None else MAX_ITERATIONS,
            iterations=iterations,
            plugins=FIRST_PARTY if kind == "four" else (),
            installed=self.installed,
        )
        return loop, run

    def resume(self, loop: Loop, *, more: int) -> Run:
        """``loopctl resume`` of a loop at its limit: ``more`` iterations more (0: plain resume)."""
        argv = [self.loopctl, "resume"]
        if more:
            argv += ["--max-iterations", str(loop.iterations + more)]
        return loop.loopctl(argv, self.env, expect_exit=MAX_ITERATIONS, iterations=more)


def _plugin_names(listed: object) -> list[str]:
    """The installed (not built-in) plugins in ``loopctl plugins list --json``."""
    if not isinstance(listed, list):
        raise BenchError(f"cannot read `loopctl plugins list --json`: {listed!r:.200}")
    return [
        str(row["name"])
        for row in listed
        if isinstance(row, dict) and "name" in row and row.get("origin") != "builtin"
    ]


def ms(seconds: float) -> float:
    return seconds * 1000


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def figures() -> list[Figure]:
    sizes = Sizes.from_env()
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-outside-") as tmp:
        bench = Bench(Path(tmp), sizes)
        return measure(bench, sizes)


def measure(bench: Bench, sizes: Sizes) -> list[Figure]:
    n = sizes.n
    kinds = ("bash", "none", "four")
    bench.say(f"sizes: N={n} x {sizes.rounds} rounds, long={sizes.long}, resumes={sizes.resumes}")
    for kind in kinds:  # warm-up: bytecode, page cache
        bench.run(kind, 5)

    # 1. the overhead per iteration, contestants in turns
    rounds: dict[str, list[Run]] = {kind: [] for kind in kinds}
    for r in range(sizes.rounds):
        for kind in kinds[r % 3 :] + kinds[: r % 3]:
            _, run = bench.run(kind, n)
            rounds[kind].append(run)
        bench.say(f"round {r + 1}/{sizes.rounds} of {n} iterations each")
    per_iteration = {k: [x for run in runs for x in run.intervals] for k, runs in rounds.items()}

    # 2. flatness; the long loop without plugins is also part 3's and part 4's
    small, small_run = bench.run("none", SMALL, pass_at=NEVER)
    long_, long_run = bench.run("none", sizes.long, pass_at=NEVER)
    bench.say(f"{sizes.long} iterations without plugins in {long_run.wall_s:.0f} s")
    # the control: a fresh loop right after, as long as the tenth compared (one iteration more,
    # since the last one's length is not seen): did the machine change during the long run?
    _, long_fresh = bench.run("none", sizes.long // 10 + 1, pass_at=NEVER)
    _, plugins_run = bench.run("four", sizes.long_plugins, pass_at=NEVER)
    bench.say(
        f"{sizes.long_plugins} iterations with the four plugins in {plugins_run.wall_s:.0f} s"
    )
    _, plugins_fresh = bench.run("four", sizes.long_plugins // 10 + 1, pass_at=NEVER)

    # 3. resume and the end of a run, 50 against long, in turns
    resumed: dict[str, list[Run]] = {"small": [], "long": []}
    plain: dict[str, list[Run]] = {"small": [], "long": []}
    for r in range(sizes.resumes):
        pair = (("small", small), ("long", long_))
        for name, loop in pair if r % 2 == 0 else pair[::-1]:
            plain[name].append(bench.resume(loop, more=0))
            resumed[name].append(bench.resume(loop, more=1))
    bench.say(f"{sizes.resumes} turns of resumes")

    figures: list[Figure] = []
    figures += _overhead_figures(per_iteration, rounds, n, sizes.rounds)
    figures += _flatness_figures(long_run, long_fresh, sizes.long, "no plugins")
    figures += _flatness_figures(plugins_run, plugins_fresh, sizes.long_plugins, "four plugins")
    figures += [
        Figure(f"  run time of the {sizes.long}-iteration loop", long_run.wall_s, "s"),
        Figure(f"  run time of the {sizes.long_plugins}-iteration loop", plugins_run.wall_s, "s"),
    ]
    figures += _resume_figures(small_run, long_run, resumed, plain, sizes.long)
    figures += _memory_figures(rounds, long_run, plugins_run, sizes)
    return figures


def _overhead_figures(
    per_iteration: Mapping[str, list[float]],
    rounds: Mapping[str, list[Run]],
    n: int,
    count: int,
) -> list[Figure]:
    bash = per_iteration["bash"]
    bash_mean, bash_median = statistics.fmean(bash), statistics.median(bash)
    figures = [
        Figure(
            "bash loop: one iteration (mean)",
            ms(bash_mean),
            "ms",
            note=f"baseline, same run; median {ms(bash_median):.2f} ms; "
            f"{count} round(s) x {n} iterations",
        )
    ]
    for kind, label, target in (("none", "no plugins", 3.0), ("four", "four plugins", 6.0)):
        times = per_iteration[kind]
        mean = ms(statistics.fmean(times) - bash_mean)
        median = ms(statistics.median(times) - bash_median)
        # judged against the same run's bash iteration, as the issue's 3 / 6 ms were against its
        most = target / ISSUE_BASH_MS
        stalls = sum(t > bash_median + 0.040 for t in times) / len(times)
        whole = statistics.fmean(
            (a.exited - a.spawned) / n - (b.exited - b.spawned) / n
            for a, b in zip(rounds[kind], rounds["bash"], strict=True)
        )
        figures += [
            Figure(
                f"loopctl, {label}: extra per iteration (mean)",
                mean / ms(bash_mean),
                "x",
                f"<= {most:.2f}x bash",
                mean / ms(bash_mean) <= most,
                f"{mean:.2f} ms over the bash loop's {ms(bash_mean):.2f} ms; the target: "
                f"{target:g} ms over its {ISSUE_BASH_MS} ms; N = {n}; {stalls:.0%} of "
                "iterations over bash + 40 ms",
            ),
            Figure(
                f"loopctl, {label}: extra per iteration (median)",
                median / ms(bash_median),
                "x",
                f"<= {most:.2f}x bash",
                median / ms(bash_median) <= most,
                f"{median:.2f} ms over the bash loop's {ms(bash_median):.2f} ms",
            ),
            _per_round_figure(rounds[kind], rounds["bash"]),
            Figure(
                "  whole run / N, over the bash loop's",
                ms(whole),
                "ms",
                note="startup and end included",
            ),
        ]
    return figures


def _per_round_figure(runs: Sequence[Run], bash: Sequence[Run]) -> Figure:
    """Each round's extra time (mean, median) against that round's bash loop: the spread."""
    means = [
        ms(statistics.fmean(a.intervals) - statistics.fmean(b.intervals))
        for a, b in zip(runs, bash, strict=True)
    ]
    medians = [
        ms(_median(a.intervals) - _median(b.intervals)) for a, b in zip(runs, bash, strict=True)
    ]
    return Figure(
        "  round by round: extra (median of rounds' means)",
        _median(means),
        "ms",
        note=f"means {min(means):.2f} to {max(means):.2f} ms, "
        f"medians {min(medians):.2f} to {max(medians):.2f} ms over {len(means)} round(s)",
    )


def _flatness_figures(run: Run, fresh: Run, iterations: int, label: str) -> list[Figure]:
    times = run.intervals  # iterations 1 .. iterations-1
    tenth = iterations // 10
    first, last = _median(times[:tenth]), _median(times[-tenth:])
    again = _median(fresh.intervals)
    ratio = last / first
    late = len(times) - tenth + 1
    return [
        Figure(
            f"flat, {label}: median iteration, last tenth / first",
            ratio,
            "x",
            "<= 1.2",
            ratio <= 1.2,
            f"{iterations} iterations: 1-{tenth} {ms(first):.1f} ms, "
            f"{late}-{len(times)} {ms(last):.1f} ms; mean {ms(statistics.fmean(times)):.1f} ms",
        ),
        Figure(
            "  control: a fresh loop right after / first tenth",
            again / first,
            "x",
            note=f"{len(fresh.intervals)} iterations, median {ms(again):.1f} ms; "
            "far from 1: the machine changed during the run",
        ),
    ]


def _resume_figures(
    small_run: Run,
    long_run: Run,
    resumed: Mapping[str, list[Run]],
    plain: Mapping[str, list[Run]],
    long_n: int,
) -> list[Figure]:
    def median_of(runs: Sequence[Run], what: str) -> float:
        if what == "wall":
            return _median([r.wall_s for r in runs])
        if what == "startup":
            return _median([r.starts[0] - r.spawned for r in runs])
        if what == "end":
            return _median([r.end_of_run for r in runs])
        return _median([(r.report_written or 0) - (r.loop_end or 0) for r in runs])

    figures: list[Figure] = []
    rows = (
        ("resume --max-iterations +1", resumed, "wall", 1.5, "one more iteration, whole process"),
        ("  of which before the agent starts", resumed, "startup", None, "reading the loop back"),
        ("resume of a loop at its limit", plain, "wall", None, "no iteration; report rewritten"),
    )
    for name, runs, what, target, note in rows:
        small, long_ = median_of(runs["small"], what), median_of(runs["long"], what)
        figures.append(_ratio(name, small, long_, target, note, long_n))
    # the end of a run: the loops' own ends and every resume with an iteration
    ends = {
        "small": [small_run, *resumed["small"]],
        "long": [long_run, *resumed["long"]],
    }
    small, long_ = median_of(ends["small"], "end"), median_of(ends["long"], "end")
    figures.append(
        _ratio(
            "end of run (final report)",
            small,
            long_,
            1.5,
            "last test run's end -> loopctl's exit",
            long_n,
        )
    )
    reports = {k: [*ends[k], *plain[k]] for k in ends}
    small, long_ = median_of(reports["small"], "report"), median_of(reports["long"], "report")
    figures.append(
        _ratio("  of which the report", small, long_, None, "loop.end event -> report.md", long_n)
    )
    return figures


def _ratio(
    name: str, small: float, long_: float, target: float | None, note: str, long_n: int
) -> Figure:
    ratio = long_ / small if small > 0 else float("nan")
    return Figure(
        f"{name}: {long_n} / {SMALL} iterations",
        ratio,
        "x",
        f"<= {target:g}" if target else "",
        None if target is None else ratio <= target,
        f"{ms(small):.1f} -> {ms(long_):.1f} ms; {note}",
    )


def _memory_figures(
    rounds: Mapping[str, list[Run]], long_run: Run, plugins_run: Run, sizes: Sizes
) -> list[Figure]:
    figures = []
    for label, kind, run, count, target in (
        ("no plugins", "none", long_run, sizes.long, 1.2),
        ("four plugins", "four", plugins_run, sizes.long_plugins, None),
    ):
        base = _median([r.maxrss_kb for r in rounds[kind]])
        ratio = run.maxrss_kb / base
        figures.append(
            Figure(
                f"peak memory, {label}: {count} / {sizes.n} iterations",
                ratio,
                "x",
                f"<= {target:g}" if target else "",
                None if target is None else ratio <= target,
                f"max RSS {base / 1024:.1f} -> {run.maxrss_kb / 1024:.1f} MB",
            )
        )
    return figures


if __name__ == "__main__":
    started = time.perf_counter()
    print_table(figures())
    print(f"bench_loop_outside took {time.perf_counter() - started:.0f} s", file=sys.stderr)
