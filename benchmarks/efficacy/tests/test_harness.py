"""The harness, with stand-ins for Claude Code (scripts that fix, hang or spend tokens): runs
are scored by the tests on the final tree and the budget, a contestant is cut at the wall clock
or the token budget, and nothing of a run outlives it."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from efficacy import cli, harness
from efficacy.contestants import CONTESTANTS, Outcome, RunContext
from efficacy.scenario import Scenario, parse

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs /proc")


def scenario(expect: str = "pass", **budget: Any) -> Scenario:
    return parse(_document(expect, **budget), name="fake", source=Path("fake.toml"))


def _document(expect: str = "pass", **budget: Any) -> dict[str, Any]:
    return {
        "expect": expect,
        "description": "add() subtracts",
        "pattern": "control",
        "goal": "Make the tests pass.",
        "test_cmd": f"{sys.executable} -m unittest -q",
        "budget": {"iterations": 2, "tokens": 100_000, "wall_clock_s": 60, **budget},
        "agent": {
            "behaviour": "fixer",
            "params": {"ideas": [{"file": "calc.py", "old": "a - b", "new": "a + b"}]},
        },
        "files": {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": "import unittest\nfrom calc import add\n\n\n"
            "class T(unittest.TestCase):\n    def test_add(self):\n"
            "        self.assertEqual(add(1, 2), 3)\n",
        },
    }


def fake_cli(tmp_path: Path, body: str) -> str:
    """An executable Python script standing in for Claude Code."""
    path = tmp_path / "claude"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return str(path)


def marked_processes(root: Path) -> list[int]:
    """Processes still alive whose environment marks them as a run's."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{harness.MARKER}=".encode() in environ and str(root).encode() in environ:
            found.append(int(entry.name))
    return found


FIXES = """
    import pathlib
    calc = pathlib.Path("calc.py")
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
"""


def test_a_fix_completes_and_a_non_fix_uses_up_the_iterations(tmp_path: Path) -> None:
    fixing = harness.run_one(
        scenario(), CONTESTANTS["bare-fresh"], cli=fake_cli(tmp_path, FIXES), base=tmp_path
    )
    assert (fixing.completed, fixing.tests_pass, fixing.iterations) == (True, True, 1)
    assert fixing.stopped == "tests pass"
    assert (fixing.input_tokens, fixing.requests, fixing.leaked) == (0, 0, [])
    idle = harness.run_one(
        scenario(), CONTESTANTS["bare-continue"], cli=fake_cli(tmp_path, "pass\n"), base=tmp_path
    )
    assert (idle.completed, idle.tests_pass, idle.iterations) == (False, False, 2)
    assert idle.stopped == "iteration budget used up"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["claude"]  # run directories removed


def test_a_hanging_contestant_is_cut_at_the_wall_clock_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    hangs = """
        import os, subprocess, time
        # a child in a session of its own: ending the contestant's session does not reach it
        subprocess.Popen(["sleep", "300"], start_new_session=True)
        time.sleep(300)
    """
    record = harness.run_one(
        scenario(wall_clock_s=2),
        CONTESTANTS["bare-fresh"],
        cli=fake_cli(tmp_path, hangs),
        base=tmp_path,
    )
    assert not record.completed
    assert record.stopped == "cut: wall clock (2 s)"
    assert 2 <= record.wall_s < 2 + harness.GRACE_S + 5
    assert [entry.split()[1] for entry in record.leaked] == ["sleep"]
    assert marked_processes(tmp_path) == []


def test_a_contestant_over_the_token_budget_is_cut(tmp_path: Path) -> None:
    spends = """
        import json, os, urllib.request
        body = {"model": "m", "max_tokens": 10, "tools": [{"name": "Read"}],
                "system": "x" * 40_000, "messages": [{"role": "user", "content": "go"}]}
        while True:
            request = urllib.request.Request(
                os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=json.dumps(body).encode(),
                headers={"content-type": "application/json"})
            urllib.request.urlopen(request).read()
    """
    record = harness.run_one(
        scenario(tokens=50_000),
        CONTESTANTS["bare-fresh"],
        cli=fake_cli(tmp_path, spends),
        base=tmp_path,
    )
    assert record.stopped == "cut: over the token budget (50,000)"
    assert not record.completed
    assert record.input_tokens > 50_000
    assert record.requests >= 5
    assert record.cost_usd == pytest.approx(
        harness.cost(record.input_tokens, record.output_tokens), abs=1e-4
    )
    assert marked_processes(tmp_path) == []


TOTALS = {"input_tokens": 1_000, "output_tokens": 10, "requests": 2}


@pytest.mark.parametrize(
    ("expect", "iterations", "cut", "passes", "completed"),
    [
        ("pass", 2, "", True, True),  # the last iteration of the budget still counts
        ("pass", 1, "", False, False),  # the tests must pass on the final tree
        ("pass", 1, "cut: wall clock (60 s)", True, False),
        ("stop", 1, "", False, True),  # stopped by itself before its budget was used up
        ("stop", 2, "", False, False),  # used its whole iteration budget
        ("stop", 1, "cut: wall clock (60 s)", False, False),
    ],
)
def test_a_run_is_scored_by_what_its_scenario_expects(
    tmp_path: Path, expect: str, iterations: int, cut: str, passes: bool, completed: bool
) -> None:
    ctx = RunContext(root=tmp_path, scenario=scenario(expect), cli="claude")
    record = harness.score(ctx, "c", Outcome(iterations, "said"), TOTALS, 1.0, cut, passes)
    assert record.completed is completed
    assert record.stopped == (cut or "said")
    assert (record.input_tokens, record.output_tokens, record.requests) == (1_000, 10, 2)


def test_an_earlier_run_goes_first_in_a_sibling_project_sharing_home(tmp_path: Path) -> None:
    logs = """
        import os, pathlib
        with open(os.path.join(os.environ["HOME"], "seen.log"), "a") as log:
            log.write(pathlib.Path("calc.py").read_text().splitlines()[0] + "\\n")
    """
    data = scenario().spec
    earlier = {"files": {**data.files, "calc.py": "# earlier\n" + data.files["calc.py"]}}
    with_earlier = parse({**_document(), "earlier": earlier}, name="fake", source=Path("fake.toml"))
    record = harness.run_one(
        with_earlier, CONTESTANTS["bare-fresh"], cli=fake_cli(tmp_path, logs), base=tmp_path,
        keep=True,
    )  # fmt: skip
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    seen = (root / "home" / "seen.log").read_text().splitlines()
    assert seen == ["# earlier"] * 2 + ["def add(a, b):"] * 2  # both runs, one HOME, in order
    assert record.iterations == 2  # only the second run is scored
    assert (root / "earlier-project" / "calc.py").exists()


def test_the_final_check_runs_the_scenarios_check_cmd(tmp_path: Path) -> None:
    fails_unless_told = (
        f'{sys.executable} -c \'import os, sys; sys.exit(os.environ.get("OK") != "1")\''
    )
    checked = parse(
        {**_document(), "test_cmd": fails_unless_told, "check_cmd": f"OK=1 {fails_unless_told}"},
        name="fake",
        source=Path("fake.toml"),
    )
    record = harness.run_one(
        checked, CONTESTANTS["bare-fresh"], cli=fake_cli(tmp_path, "pass\n"), base=tmp_path
    )
    assert (record.tests_pass, record.iterations) == (True, 2)  # the loop never passed


def test_jobs_run_contestants_at_once_and_keep_the_records_in_order(tmp_path: Path) -> None:
    """With ``--jobs 2`` two runs are under way together: each stand-in waits for the other to
    have started before it fixes the bug (run one after the other, the first gives up)."""
    import argparse

    from efficacy import cli

    rendezvous = tmp_path / "started"
    rendezvous.mkdir()
    body = f"""
        import os, pathlib, time
        here = pathlib.Path({str(rendezvous)!r})
        (here / str(os.getpid())).touch()
        deadline = time.monotonic() + 30
        while len(list(here.iterdir())) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if len(list(here.iterdir())) >= 2:
    """ + textwrap.indent(textwrap.dedent(FIXES), " " * 12)
    records_file = tmp_path / "records.jsonl"
    args = argparse.Namespace(jobs=2, keep=False, records=records_file)
    pairs = [
        (scenario(iterations=1), CONTESTANTS[name]) for name in ("bare-fresh", "bare-continue")
    ]
    records = cli._run_all(args, pairs, {"claude": fake_cli(tmp_path, body)}, tmp_path)
    assert [(r.contestant, r.completed) for r in records] == [
        ("bare-fresh", True),
        ("bare-continue", True),
    ]
    assert len(records_file.read_text().splitlines()) == 2


def test_jobs_below_one_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    from efficacy import cli

    assert cli.main(["--jobs", "0", "-s", "control-add"]) == 2
    assert "--jobs must be at least 1, not 0" in capsys.readouterr().err


RECORDS_ARGV = """
    import json, os, pathlib, sys
    home = pathlib.Path(os.environ["CODEX_HOME"])
    line = {"argv": sys.argv[1:], "config": (home / "config.toml").read_text()}
    with open(os.environ["TMPDIR"] + "/../calls.jsonl", "a") as out:
        out.write(json.dumps(line) + "\\n")
"""


def test_a_codex_bare_loop_calls_codex_exec_then_resumes_against_the_responses_server(
    tmp_path: Path,
) -> None:
    record = harness.run_one(
        scenario(),
        CONTESTANTS["codex-bare-continue"],
        cli=fake_cli(tmp_path, RECORDS_ARGV),
        base=tmp_path,
        keep=True,
    )
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    calls = [json.loads(line) for line in (root / "calls.jsonl").read_text().splitlines()]
    unattended = ["--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    assert [c["argv"] for c in calls] == [
        ["exec", *unattended, "Make the tests pass."],
        ["exec", "resume", "--last", *unattended, "Make the tests pass."],
    ]
    assert 'model_provider = "loopctl_fake"' in calls[0]["config"]
    assert 'base_url = "http://127.0.0.1:' in calls[0]["config"]
    assert (record.iterations, record.stopped) == (2, "iteration budget used up")


def test_a_contestant_runs_only_the_scenarios_that_name_its_cli() -> None:
    claude_only = scenario()
    both = parse(
        {**_document(), "clis": ["claude", "codex"]}, name="both", source=Path("both.toml")
    )
    contestants = [CONTESTANTS["bare-fresh"], CONTESTANTS["codex-loopctl"]]
    pairs = cli.runs([claude_only, both], contestants)
    assert [(s.name, c.name) for s, c in pairs] == [
        ("fake", "bare-fresh"),
        ("both", "bare-fresh"),
        ("both", "codex-loopctl"),
    ]
