"""``loopctl status``: read a loop's state from its files, safely, while it may be running.

Only ``loop-state.md`` must be sound (a StateError names it otherwise); the JSONL logs and the
error summary are read tolerantly, since a running loop may be halfway through a line. Like
``resume``, status skips a line that is not a whole JSON object, or not a valid iteration record,
and says so (``problems``, shown as warnings); it reads only the end of the journals.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from loopctl import humanize
from loopctl import state as st
from loopctl.records import structure_record

if TYPE_CHECKING:
    from loopctl.ending import RecordedEnd

#: How many iteration records ``status`` shows.
RECENT = 5


class NoLoopError(st.StateError):
    """There is no loop in the state directory (nothing has run there yet)."""


def collect_status(state_dir: Path) -> dict[str, Any]:
    """Everything ``loopctl status`` shows. Raises NoLoopError when no loop ran here and
    StateError when ``loop-state.md`` is unreadable."""
    state_file = state_dir / st.LOOP_STATE_FILE
    if not state_file.exists():
        raise NoLoopError(
            f"no loop in {state_dir} ({st.LOOP_STATE_FILE} does not exist); start one with "
            "`loopctl run`, or point to another state directory with --state-dir"
        )
    state = st.read_loop_state(state_file)
    holder = st.StateLock(state_dir).holder()
    problems: list[str] = []
    # like `resume`: a record must structure as an iteration record to count as one
    recent = st.tail_jsonl(
        state_dir / st.ITERATIONS_FILE, RECENT, problems=problems, check=structure_record
    )
    events = st.tail_jsonl(state_dir / st.EVENTS_FILE, 20, problems=problems)
    summary = None
    try:
        summary = st.read_error_summary(state_dir / st.ERROR_SUMMARY_FILE)
    except st.StateError as exc:
        problems.append(str(exc))
    running = holder is not None
    status = state.status
    ended = None
    if status in ("running", "restarting") and not running:  # did it end, unsaid?
        from loopctl.ending import recorded_end

        ended = recorded_end(state_dir, state)
    if ended is not None:
        status = f"{ended.status} ({ENDED_UNSAID.format(then=_after_ending(ended))})"
    elif status in ("running", "restarting") and not running:
        status = f"{status} (no process holds the lock: it died; `loopctl resume` continues it)"
        last_recorded = _int(recent[-1].get("iteration")) if recent else None
        _mark_died(state_dir, last_recorded or 0)
    last = recent[-1] if recent else None
    prompt_chars = _int(last.get("prompt_chars")) if last else None
    for event in reversed(events):  # a running iteration's prompt is newer than its record
        if event.get("type") == "agent.start":
            if last is None or _int(event.get("iteration")) != _int(last.get("iteration")):
                prompt_chars = _int(event.get("prompt_chars"))
            break
    now = running_now(events, state.iteration) if running else None
    return {
        "state_dir": str(state_dir),
        "status": status,
        "running": running,
        "now": now,
        "pid": holder.get("pid") if holder else None,
        "state": attrs.asdict(state),
        "last_iteration": last,
        "prompt_chars": prompt_chars,
        "recent": recent,
        "error_summary": summary,
        "problems": problems,
        "ended": ended.to_json() if ended is not None else None,
    }


#: What a running loop is doing, by the latest of these events it wrote.
PHASES = {
    "iteration.start": "starting the iteration",
    "agent.start": "the agent is working",
    "agent.rate_limit_wait": "waiting out a rate limit",
    "agent.end": "the agent's turn ended",
    "tests.start": "running the tests",
    "tests.end": "weighing the tests' result",
    "iteration.end": "between iterations",
    "loop.restart": "restarting the agent session",
    "loop.end": "ending",
}


def running_now(events: list[dict[str, Any]], recorded: int) -> dict[str, Any] | None:
    """``{"iteration": N, "phase": "…", "since": ts}`` of a running loop, from the latest
    events it wrote (loop-state.md is rewritten between iterations only, so it holds the last
    finished iteration while the next one runs); None when its events say nothing yet."""
    for event in reversed(events):
        phase = PHASES.get(str(event.get("type")))
        if phase is None:
            continue
        iteration = _int(event.get("iteration"))
        if iteration is None or iteration < recorded:
            iteration = recorded
        if event.get("type") == "iteration.end":
            phase = f"iteration {iteration} ended; the next one is starting"
        return {"iteration": iteration, "phase": phase, "since": event.get("ts")}
    return None


#: What ``status`` adds to the status of a loop whose loopctl was killed after it recorded how
#: the loop ended but before loop-state.md said so.
ENDED_UNSAID = (
    "it ended so, but its loopctl process was killed before loop-state.md said so; "
    "`loopctl resume` {then}"
)


def _after_ending(ended: RecordedEnd) -> str:
    """What ``resume`` does with a loop that ended so."""
    return "continues it" if ended.continued else "records that, running nothing"


#: What ``progress.md`` says of a loop whose process died without finishing.
DIED = (
    "died: its loopctl process ended without finishing (killed, or a crash) {when}; "
    "`loopctl resume` continues it"
)


def _mark_died(state_dir: Path, last_recorded: int) -> None:
    """``progress.md`` said ``running`` for a loop no process runs: make it say the loop died.
    Done holding the state lock, and only if the state still says running then (a loop that
    starts meanwhile is left alone); a read-only state directory is left as it is."""
    lock = st.StateLock(state_dir)
    try:
        lock.acquire()
    except st.StateError:
        return  # a loop holds it now, or the directory is not ours to lock
    try:
        if st.read_loop_state(state_dir / st.LOOP_STATE_FILE).status in ("running", "restarting"):
            when = (
                f"after iteration {last_recorded}"
                if last_recorded
                else "before its first iteration ended"
            )
            st.set_progress_status(state_dir / st.PROGRESS_FILE, DIED.format(when=when))
    except (OSError, st.StateError):
        pass  # status only reports; a file it cannot rewrite stays as it was
    finally:
        lock.release()


def _int(value: Any) -> int | None:
    """A whole number from a record field, or None for anything else (text, NaN, infinity)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return int(value)


def _tokens(record: dict[str, Any]) -> int | None:
    agent = record.get("agent")
    if not isinstance(agent, dict) or not isinstance(agent.get("usage"), dict):
        return None
    usage = agent["usage"]
    total = sum(_int(v) or 0 for v in usage.values())
    return total if total or _int(agent.get("requests")) else None  # no usage reported: unknown


def _session(restarts: Any) -> str:
    """``session 2 (1 restart)``: sessions count from 1, as everywhere people read them."""
    count = _int(restarts)
    if count is None or count < 0:
        return f"restarts {restarts}"
    return f"session {count + 1:,} ({count:,} restart{'' if count == 1 else 's'})"


def _first_line(text: Any, limit: int = 100) -> str:
    lines = str(text or "").strip().splitlines()
    if not lines:
        return "(empty)"
    first = lines[0].strip()
    return first if len(first) <= limit and len(lines) == 1 else first[: limit - 1] + "…"


def _iteration(state: dict[str, Any], now: Any) -> str:
    """The running iteration of a running loop (``3 (running)``), else the last recorded."""
    running = _int(now.get("iteration")) if isinstance(now, dict) else None
    recorded = state.get("iteration")
    if running is not None and running > (_int(recorded) or 0):
        return f"{running:,} (running)"
    return str(recorded)


def _since(ts: Any) -> str:
    """`` (for 12 s)``: how long ago ``ts`` was, when it is a time."""
    import time

    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
        return ""
    return f" (for {max(0.0, time.time() - ts):,.0f} s)"


def render_status(data: dict[str, Any]) -> str:
    """The text ``loopctl status`` prints; tolerant of hand-edited or half-written records."""
    state = data["state"]
    pid = f" (pid {data['pid']})" if data.get("running") and data.get("pid") else ""
    lines = [
        f"loop in {data['state_dir']}: {data['status']}{pid}",
        f"goal: {_first_line(state.get('original_goal'))}",
        f"iteration {_iteration(state, data.get('now'))} of {state.get('max_iterations')}, "
        f"{_session(state.get('restarts', state.get('generation')))}, "
        f"agent {state.get('agent') or '?'}, session mode {state.get('session_mode')}",
    ]
    now = data.get("now")
    if isinstance(now, dict) and now.get("phase"):
        lines.append(f"now: {now['phase']}{_since(now.get('since'))}")
    ended = data.get("ended") or {}
    reason = state.get("reason") or ended.get("message") or ended.get("reason")
    if reason:
        lines.append(f"reason: {reason}")
    if data.get("prompt_chars") is not None:
        lines.append(f"prompt size: {data['prompt_chars']:,} chars (latest iteration)")
    if data.get("recent"):
        lines.append("recent iterations:")
    for record in data.get("recent") or []:
        if not isinstance(record, dict):
            continue
        failing = record.get("failing_tests")
        count = len(failing) if isinstance(failing, list) else "?"
        tokens = _tokens(record)
        verdict = "pass" if record.get("tests_passed") is True else f"fail ({count} failing)"
        decision = f"{record.get('decision') or '?'} {record.get('reason') or ''}".rstrip()
        lines.append(
            f"  #{record.get('iteration')}: tests {verdict}, "
            f"{humanize.count(tokens, 'unknown')} tokens → {decision}"
        )
    for problem in data.get("problems") or []:
        lines.append(f"warning: {problem}")
    return "\n".join(lines)
