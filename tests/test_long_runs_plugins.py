"""The first-party plugins keep a long loop's ``resume`` and end flat: none of them reads the
whole history back (only the last records are held in memory; older ones come from the journal).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import pytest

from loopctl import records
from loopctl import state as st
from loopctl.history import RECENT_RECORDS, RunTotals
from loopctl.testing import Project, make_project, python_test_cmd, run_loop

FOUR = ["context-monitor", "failure-classifier", "context-errors", "goal-guard"]
TEST = (
    "import unittest\nfrom calc import add\n\n"
    "class T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
)


@pytest.fixture
def project(tmp_path: Any) -> Project:
    project = make_project(tmp_path / "project")
    project.write("calc.py", "def add(a, b):\n    return a - b\n")
    project.write("test_calc.py", TEST)
    project.commit("buggy calc")
    return project


def test_resuming_a_long_loop_with_the_four_plugins_reads_only_its_end(project, monkeypatch):
    """300 iterations, the last two failing the same way: on resume the iteration it runs is a
    failed approach, and the loop's end (the failure classifier's report section among others)
    reads no record from before the last 100."""
    config = {
        "test_cmd": python_test_cmd(),
        "session": "fresh",
        "stuck": {"enabled": False},
        "plugins": {"enable": FOUR},
    }
    turns = [[{"read": "calc.py"}]]

    def loop(count: int, **kwargs: Any) -> Any:
        return run_loop(
            project,
            "make add() add",
            turns=turns,
            config={**config, "limits": {"max_iterations": count}},
            load_installed_plugins=True,
            **kwargs,
        )

    first = loop(1)
    row, count = first.records[0], 3 * RECENT_RECORDS
    fingerprint = row["error_fingerprint"]
    rows = [
        {**row, "iteration": n, "error_fingerprint": fingerprint if n > count - 2 else f"x{n}"}
        for n in range(1, count + 1)
    ]
    journal = first.state_dir / st.ITERATIONS_FILE
    journal.write_text("".join(json.dumps(r) + "\n" for r in rows))
    totals = RunTotals.of(records.structure_record(r) for r in rows)
    totals.journal_bytes = journal.stat().st_size
    state_file = first.state_dir / st.LOOP_STATE_FILE
    state = st.read_loop_state(state_file)
    st.write_loop_state(
        state_file,
        attrs.evolve(state, iteration=count, status="interrupted", summary=totals.to_json()),
    )
    read = [0]
    real = records.structure_record

    def counting(data: Any) -> Any:
        read[0] += 1
        return real(data)

    monkeypatch.setattr(records, "structure_record", counting)
    second = loop(count + 1, resume=True)
    assert second.status == "max_iterations"
    assert not [e for e in second.live_events if e.type == "plugin.error"]
    assert read[0] <= RECENT_RECORDS + 5
    approaches = second.loop_state().failed_approaches
    assert any(a.startswith(f"iteration {count + 1} changed nothing") for a in approaches)
    assert "## Failure classification" in (second.state_dir / st.REPORT_MD_FILE).read_text()
