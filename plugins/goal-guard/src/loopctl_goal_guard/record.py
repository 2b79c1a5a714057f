"""The sealed record of the original goal: written once when a run starts, then only read.

It lives in ``<state dir>/goal-guard/`` and is independent of ``loop-state.md``, so an edit to
that file (or a plugin changing the goal in memory) can be detected and undone:

* ``goal.md``: the goal exactly as the user wrote it (UTF-8), for people to read;
* ``guard.json``: its sha256, the run it belongs to, when and from what it was sealed, and a
  second, JSON-escaped copy of the text (exact even for text UTF-8 cannot hold).

Either copy can restore the other: the one whose digest matches the recorded sha256 wins. Both
are written atomically (temp file, fsync, rename), ``guard.json`` last, so a crash while sealing
leaves the old record or the new one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import attrs

import loopctl

#: The plugin's directory inside the state directory.
GUARD_DIR = "goal-guard"
GOAL_FILE = "goal.md"
RECORD_FILE = "guard.json"
NOTES_FILE = "notes.jsonl"
FORMAT = 1


def goal_digest(text: str) -> str:
    """sha256 of the goal as ``goal.md`` holds it (UTF-8; a lone surrogate as ``\\udcXX``)."""
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


@attrs.frozen
class SealedGoal:
    """The original goal as sealed at the start of a run."""

    text: str
    sha256: str
    #: A random id also kept in loop-state.md (``extra.goal_guard_run``): a record from another
    #: run (a state directory reused with the guard disabled) is told apart from a changed goal.
    run_id: str
    sealed_at: float = 0.0
    #: cli (a fresh run), state_file (adopted on resume), legacy (recovered), restored.
    sealed_from: str = "cli"


@attrs.frozen
class RecordRead:
    """What :func:`load` found: the record (None when there is none or it is unusable), what was
    wrong with it, and which of its files were rewritten from the good copy."""

    sealed: SealedGoal | None
    problems: tuple[str, ...] = ()
    repaired_files: tuple[str, ...] = ()


def guard_dir(state_dir: Path) -> Path:
    return Path(state_dir) / GUARD_DIR


def _record_json(sealed: SealedGoal) -> str:
    data = {
        "format": FORMAT,
        "run_id": sealed.run_id,
        "sha256": sealed.sha256,
        "chars": len(sealed.text),
        "sealed_at": sealed.sealed_at,
        "sealed_from": sealed.sealed_from,
        "original_goal": sealed.text,
    }
    return json.dumps(data, indent=2, ensure_ascii=True) + "\n"


def _write(directory: Path, sealed: SealedGoal) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    loopctl.atomic_write_text(directory / GOAL_FILE, sealed.text)
    loopctl.atomic_write_text(directory / RECORD_FILE, _record_json(sealed))


def seal(
    state_dir: Path, text: str, *, run_id: str, sealed_from: str, sealed_at: float
) -> SealedGoal:
    """Write the record of ``text`` (replacing any record of an earlier run). Raises OSError
    when the state directory is not writable (the engine already checked that it is)."""
    sealed = SealedGoal(
        text=text,
        sha256=goal_digest(text),
        run_id=run_id,
        sealed_at=sealed_at,
        sealed_from=sealed_from,
    )
    _write(guard_dir(state_dir), sealed)
    return sealed


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, ""
    except OSError as exc:
        return None, f"{path}: cannot read it ({exc.strerror or exc})"
    try:
        data = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError) as exc:
        return None, f"{path}: not valid JSON ({exc})"
    if not isinstance(data, dict):
        return None, f"{path}: expected a JSON object"
    return data, ""


def load(state_dir: Path) -> RecordRead:
    """Read and verify the record; repair one damaged copy from the other. Never raises: a
    missing record gives ``sealed=None`` with no problems, an unusable one ``sealed=None`` with
    the problems named."""
    directory = guard_dir(state_dir)
    record_path, goal_path = directory / RECORD_FILE, directory / GOAL_FILE
    data, problem = _read_record(record_path)
    if data is None:
        return RecordRead(None, (problem,) if problem else ())
    sha = data.get("sha256")
    run_id = data.get("run_id")
    if not isinstance(sha, str) or not isinstance(run_id, str):
        return RecordRead(None, (f"{record_path}: no sha256 or run_id",))
    raw_at, raw_from = data.get("sealed_at"), data.get("sealed_from")
    sealed_at = (
        float(raw_at) if isinstance(raw_at, (int, float)) and not isinstance(raw_at, bool) else 0.0
    )
    sealed_from = raw_from if isinstance(raw_from, str) else "unknown"

    def sealed_with(text: str) -> SealedGoal:
        return SealedGoal(
            text=text, sha256=sha, run_id=run_id, sealed_at=sealed_at, sealed_from=sealed_from
        )

    try:
        goal_bytes: bytes | None = goal_path.read_bytes()
    except OSError:
        goal_bytes = None
    goal_ok = goal_bytes is not None and hashlib.sha256(goal_bytes).hexdigest() == sha
    text = data.get("original_goal")
    if isinstance(text, str) and goal_digest(text) == sha:
        sealed = sealed_with(text)
        if goal_ok:
            return RecordRead(sealed)
        try:
            loopctl.atomic_write_text(goal_path, text)
        except OSError as exc:
            return RecordRead(sealed, (f"{goal_path}: cannot restore it ({exc})",))
        return RecordRead(
            sealed,
            (f"{goal_path} did not match the recorded sha256",),
            (GOAL_FILE,),
        )
    if goal_ok and goal_bytes is not None:
        sealed = sealed_with(goal_bytes.decode("utf-8", "replace"))
        try:
            loopctl.atomic_write_text(record_path, _record_json(sealed))
        except OSError as exc:
            return RecordRead(sealed, (f"{record_path}: cannot restore it ({exc})",))
        return RecordRead(
            sealed,
            (f"{record_path}: its copy of the goal did not match its sha256",),
            (RECORD_FILE,),
        )
    return RecordRead(
        None,
        (f"{directory}: neither {GOAL_FILE} nor the copy in {RECORD_FILE} matches the sha256",),
    )


__all__ = [
    "GOAL_FILE",
    "GUARD_DIR",
    "NOTES_FILE",
    "RECORD_FILE",
    "RecordRead",
    "SealedGoal",
    "goal_digest",
    "guard_dir",
    "load",
    "seal",
]
