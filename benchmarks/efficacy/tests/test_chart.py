"""The chart is a well-formed SVG with a completion bar and a tokens bar per contestant; the smoke
run's verdict names what shows the harness did not work."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from efficacy import chart, cli, report
from efficacy.harness import RunRecord

SVG = "{http://www.w3.org/2000/svg}"


def record(contestant: str, *, completed: bool, tokens: int, **changes: object) -> RunRecord:
    fields: dict[str, object] = {
        "scenario": "control-add",
        "contestant": contestant,
        "completed": completed,
        "tests_pass": completed,
        "within_budget": True,
        "iterations": 1,
        "input_tokens": tokens,
        "output_tokens": 0,
        "requests": 3,
        "cost_usd": 0.0,
        "wall_s": 1.0,
        "stopped": "tests pass",
        **changes,
    }
    return RunRecord(**fields)  # type: ignore[arg-type]


def test_the_chart_has_a_completion_and_a_tokens_bar_per_contestant() -> None:
    records = [
        record("bare-fresh", completed=False, tokens=50_000),
        record("loopctl", completed=True, tokens=25_000),
    ]
    root = ET.fromstring(chart.svg(records, title="T & co"))
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "T & co" in texts
    assert {"0/1", "1/1", "50k", "25k"} <= set(texts)
    heights = [float(r.get("height", 0)) for r in root.iter(f"{SVG}rect")][1:]  # not the ground
    assert len(heights) == 4
    done_fresh, done_loopctl, tokens_fresh, tokens_loopctl = heights
    assert done_fresh == 0 < done_loopctl
    assert tokens_fresh == 2 * tokens_loopctl


def test_the_smoke_verdict_names_what_the_harness_got_wrong() -> None:
    good = record("loopctl", completed=True, tokens=1)
    assert cli.smoke_problems([good]) == []
    bad = [
        record("bare-fresh", completed=False, tokens=0, requests=0, stopped="x"),
        record("loopctl", completed=True, tokens=1, leaked=["12 sleep"]),
    ]
    problems = cli.smoke_problems(bad)
    assert "control-add: no run completed" not in problems  # loopctl's did
    assert cli.smoke_problems(bad[:1])[0] == "control-add: no run completed"
    assert "control-add / bare-fresh: the control was not done (x)" in problems
    assert "control-add / loopctl: left running: 12 sleep" in problems


def test_a_records_file_reads_back_as_the_runs_it_holds(tmp_path: Path) -> None:
    runs = [record("loopctl", completed=True, tokens=7, leaked=["1 sleep"])]
    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(report.as_json(runs, {})["runs"][0]) + "\n\n")
    assert report.read_records(path) == runs
