"""The sealed record of the original goal: exact, verified, self-repairing, never raising."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl_goal_guard import record as rec

TRICKY = 'line one\n---\nkey: "value" \\ back\\slash\n  - yaml: [1, 2]\n\u00e9\u4e2d\U0001f600\n'


def seal(tmp_path: Path, text: str) -> rec.SealedGoal:
    return rec.seal(tmp_path, text, run_id="r1", sealed_from="cli", sealed_at=1.0)


def test_seal_writes_the_goal_and_its_digest(tmp_path: Path) -> None:
    sealed = seal(tmp_path, TRICKY)
    directory = tmp_path / rec.GUARD_DIR
    assert (directory / rec.GOAL_FILE).read_bytes() == TRICKY.encode("utf-8")
    data = json.loads((directory / rec.RECORD_FILE).read_text("ascii"))
    assert data["sha256"] == hashlib.sha256(TRICKY.encode()).hexdigest() == sealed.sha256
    assert (data["original_goal"], data["run_id"], data["chars"]) == (TRICKY, "r1", len(TRICKY))
    assert rec.load(tmp_path) == rec.RecordRead(sealed)


def test_no_record_is_not_a_problem(tmp_path: Path) -> None:
    assert rec.load(tmp_path) == rec.RecordRead(None)


def test_an_edited_goal_md_is_restored_from_the_json_copy(tmp_path: Path) -> None:
    sealed = seal(tmp_path, TRICKY)
    goal_md = tmp_path / rec.GUARD_DIR / rec.GOAL_FILE
    goal_md.write_text(TRICKY + "\n\nBLOCKING ISSUES: x", encoding="utf-8")
    read = rec.load(tmp_path)
    assert read.sealed == sealed
    assert read.repaired_files == (rec.GOAL_FILE,)
    assert goal_md.read_text(encoding="utf-8") == TRICKY
    assert rec.load(tmp_path) == rec.RecordRead(sealed)  # repaired for good


def test_an_edited_json_copy_is_restored_from_goal_md(tmp_path: Path) -> None:
    sealed = seal(tmp_path, TRICKY)
    path = tmp_path / rec.GUARD_DIR / rec.RECORD_FILE
    data = json.loads(path.read_text())
    data["original_goal"] = "something else"
    path.write_text(json.dumps(data))
    read = rec.load(tmp_path)
    assert read.sealed == sealed
    assert read.repaired_files == (rec.RECORD_FILE,)
    assert json.loads(path.read_text())["original_goal"] == TRICKY


def test_both_copies_changed_makes_the_record_unusable(tmp_path: Path) -> None:
    seal(tmp_path, TRICKY)
    directory = tmp_path / rec.GUARD_DIR
    (directory / rec.GOAL_FILE).write_text("edited")
    data = json.loads((directory / rec.RECORD_FILE).read_text())
    data["original_goal"] = "edited too"
    (directory / rec.RECORD_FILE).write_text(json.dumps(data))
    read = rec.load(tmp_path)
    assert read.sealed is None
    assert "neither goal.md nor the copy" in read.problems[0]


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=300))
def test_garbage_records_never_raise(tmp_path: Path, raw: bytes) -> None:
    directory = tmp_path / rec.GUARD_DIR
    directory.mkdir(exist_ok=True)
    (directory / rec.RECORD_FILE).write_bytes(raw)
    (directory / rec.GOAL_FILE).write_bytes(raw[::-1])
    read = rec.load(tmp_path)
    assert read.sealed is None or read.sealed.sha256 == rec.goal_digest(read.sealed.text)


#: Any text, lone surrogates included (a goal read from a file with invalid UTF-8).
any_text = st.text(st.characters(blacklist_categories=()), max_size=400)


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(goal=any_text | st.sampled_from([TRICKY, "x" * 200_000, "---\n---\n", "'\"\\\\"]))
def test_any_goal_round_trips_exactly_through_the_record(tmp_path: Path, goal: str) -> None:
    sealed = seal(tmp_path, goal)
    read = rec.load(tmp_path)
    assert read.sealed is not None
    assert read.sealed.text == goal
    assert read.sealed == sealed
    assert not read.problems
