"""``loopctl status``: read a loop's state from its files, safely, while it may be running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs

from loopctl import state as st


def collect_status(state_dir: Path) -> dict[str, Any]:
    """Everything ``loopctl status`` shows. Raises StateError when there is no loop here."""
    state_file = state_dir / "loop-state.md"
    if not state_file.exists():
        raise st.StateError(f"no loop in {state_dir}: {state_file} does not exist")
    state = st.read_loop_state(state_file)
    holder = st.StateLock(state_dir).holder()
    recent = st.tail_jsonl(state_dir / "iterations.jsonl", 5)
    problems = []
    summary = None
    try:
        summary = st.read_error_summary(state_dir / "error-summary.json")
    except st.StateError as exc:
        problems.append(str(exc))
    running = holder is not None
    status = state.status
    if status in ("running", "restarting") and not running:
        status = f"{status} (no process holds the lock: it died; `loopctl resume` continues it)"
    last = recent[-1] if recent else None
    return {
        "state_dir": str(state_dir),
        "status": status,
        "running": running,
        "pid": holder.get("pid") if holder else None,
        "state": attrs.asdict(state),
        "last_iteration": last,
        "prompt_chars": last.get("prompt_chars") if last else None,
        "recent": recent,
        "error_summary": summary,
        "problems": problems,
    }


def render_status(data: dict[str, Any]) -> str:
    state = data["state"]
    lines = [
        f"loop in {data['state_dir']}: {data['status']}" + (f" (pid {data['pid']})" if data["running"] else ""),
        f"goal: {state['original_goal'].strip().splitlines()[0][:100] if state['original_goal'].strip() else '(empty)'}",
        f"iteration {state['iteration']} of {state['max_iterations']}, restarts {state['generation']}, "
        f"agent {state['agent']}, session {state['session_mode']}",
    ]
    if state.get("reason"):
        lines.append(f"reason: {state['reason']}")
    if data["prompt_chars"] is not None:
        lines.append(f"last prompt size: {data['prompt_chars']} chars")
    for record in data["recent"]:
        agent = record.get("agent") or {}
        usage = agent.get("usage") or {}
        tokens = sum(int(v or 0) for v in usage.values()) if isinstance(usage, dict) else 0
        lines.append(
            f"  #{record.get('iteration')}: tests {'pass' if record.get('tests_passed') else 'fail'}"
            f" ({len(record.get('failing_tests') or [])} failing), {tokens} tokens,"
            f" {record.get('decision')} {record.get('reason') or ''}".rstrip()
        )
    for problem in data["problems"]:
        lines.append(f"warning: {problem}")
    return "\n".join(lines)
