"""The context monitor of one running loop: gauge, thresholds, restarts, briefing, storm guard.

:mod:`loopctl_context_monitor.plugin` keeps one :class:`Monitor` per run in ``loop.stash`` and
forwards the hooks to it. How it decides, in one place:

* **Gauge.** Every streamed main-thread usage updates the fill (:mod:`.gauge`). A fresh agent
  session starts empty: every iteration in ``fresh`` mode, after a restart in ``resume`` mode.
* **Warn** (default 70%): a ``context-monitor.exhaustion_warning`` the moment it is reached; in
  ``resume`` mode the session is restarted after the iteration (``after_iteration``), with a
  graceful handoff turn first when configured. In ``fresh`` mode nothing more happens: the next
  iteration starts a new, empty session anyway, and a restart would only use up the restart
  budget.
* **Hard** (default 90%), reached mid-turn: the turn is ended at that message boundary and the
  session restarted, in either mode.
* **Overflow** (the adapter's ``context_overflow``): the engine itself restarts with a fresh
  session; the monitor only briefs it (no second restart).
* **Storm guard.** After a context restart, the fresh session's first measured fill is its
  baseline. A baseline at or over warn never triggers another warn restart (nor a hard one when
  it is over hard): the briefing budget is shrunk when the briefing could be what pushed it over,
  and otherwise the loop stops with ``context_baseline_too_high``.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import (
    AgentMessage,
    Decision,
    ErrorKind,
    IterationEnd,
    IterationRecord,
    MessageKind,
    PromptSection,
    StopStatus,
)
from loopctl_context_monitor import events as ev
from loopctl_context_monitor import gauge as g
from loopctl_context_monitor.activity import ActivityLog
from loopctl_context_monitor.briefing import Briefing, BriefingInputs, build_briefing, trim_text
from loopctl_context_monitor.config import MIN_BUDGET_CHARS, SECTION, ContextMonitorConfig
from loopctl_context_monitor.gauge import Gauge, Reading, window_lookup

if TYPE_CHECKING:
    from loopctl import Loop, LoopOutcome, Restart, TestRun, TurnResult

#: The prompt section the briefing is injected as.
BRIEFING_TITLE = "Previous Session Context (Summarized)"
BRIEFING_FILE = "context-summary.md"
#: The restart reason (and the engine's own, for context overflow).
REASON = "context_exhaustion"
STOP_REASON = "context_baseline_too_high"
#: Characters per token when estimating how much of a baseline the briefing is (a low figure:
#: it over-estimates the briefing's share, so shrinking is tried before stopping).
CHARS_PER_TOKEN_LOW = 3
#: The loop-state.md key the monitor keeps its state under (survives ``loopctl resume``).
STATE_KEY = "context_monitor"


#: Why the monitor restarted the session, in words.
_TRIGGER_WORDS = {
    "warn": "the context passed the warn threshold",
    "hard": "the context passed the hard threshold",
    "overflow": "the agent ran out of context",
    "handoff": "after the handoff turn",
}


def _percent(reading: Reading) -> str:
    return reading.describe()


class Monitor:
    """Everything the plugin knows about one loop."""

    def __init__(self, loop: Loop, config: ContextMonitorConfig) -> None:
        self.loop = loop
        self.cfg = config
        self.gauge = Gauge(
            warn=config.warn_threshold,
            hard=config.hard_threshold,
            override=config.window,
            window_for_model=window_lookup(config.models, loop.context_window),
            model=loop.agent_model,
        )
        self.activity = ActivityLog(
            config.recent_tool_calls, config.activity_retention, root=str(loop.workdir)
        )
        self.resume_mode = loop.session_mode == "resume"
        # the current session
        self.session_fresh = False  # loopctl started it empty: its first fill is a baseline
        self.baseline_high = False
        self.hard_suppressed = False
        self.check_baseline = False  # it is the first session after a context restart
        self.session_briefing_chars = 0
        # the current iteration
        self.warn_pending = False
        self.carry_warn = False  # a rate-limited retry keeps the warn restart it earned
        self.hard_this_iteration = False
        self.rollback_tree: str | None = None
        # across iterations (persisted)
        self.budget = config.summary_budget_chars
        self.after_context_restart = False
        self.briefing_pending: str | None = None
        self.trigger: str | None = None
        self.trigger_reading: Reading | None = None
        self.stop_message: str | None = None
        self.handoff: str | None = None  # "requested" while the handoff turn runs
        self.handoff_text: str | None = None
        self.handoff_check: list[str] = []
        self.incomplete: list[str] = []
        self.restored: list[str] = []
        self.unknown_reported: set[tuple[int, str]] = set()
        self.warned_about: set[str] = set()
        # for the report
        self.peak: Reading | None = None
        self.restarts: list[str] = []

    # --- persistence -------------------------------------------------------------------------

    def persist(self) -> None:
        self.loop.set_value(
            STATE_KEY,
            {
                "budget": self.budget,
                "after_context_restart": self.after_context_restart,
                "briefing_pending": self.briefing_pending is not None,
                "handoff": self.handoff,
                "incomplete": self.incomplete[:200],
                "restored": self.restored[:200],
                "stop_message": self.stop_message,
                "restarts": self.restarts[-20:],
            },
        )

    def restore(self) -> None:
        """Pick up where an earlier process left off (``loopctl resume``)."""
        saved = self.loop.get_value(STATE_KEY)
        if isinstance(saved, dict):
            budget = saved.get("budget")
            if isinstance(budget, int) and budget >= MIN_BUDGET_CHARS:
                self.budget = min(budget, self.cfg.summary_budget_chars)
            self.after_context_restart = saved.get("after_context_restart") is True
            if saved.get("briefing_pending") is True:
                try:
                    text = (self.loop.state_dir / BRIEFING_FILE).read_text(encoding="utf-8")
                    self.briefing_pending = _strip_title(text) or None
                except (OSError, UnicodeDecodeError):
                    self.briefing_pending = None
            self.handoff = "requested" if saved.get("handoff") == "requested" else None
            self.incomplete = _strings(saved.get("incomplete"))
            self.restored = _strings(saved.get("restored"))
            stop = saved.get("stop_message")
            self.stop_message = stop if isinstance(stop, str) and stop else None
            self.restarts = _strings(saved.get("restarts"))
        last = self.loop.last_record
        if (
            self.resume_mode
            and last is not None
            and self.loop.session_id
            and last.agent.session_id == self.loop.session_id
        ):
            self.gauge.restore(
                self.loop.session_id, last.agent.context_tokens, last.agent.context_window
            )

    # --- hooks -------------------------------------------------------------------------------

    def before_iteration(self) -> None:
        loop = self.loop
        self.warn_pending, self.carry_warn = self.carry_warn, False
        self.hard_this_iteration = False
        if not self.resume_mode or not loop.session_id:
            self._new_session()
        elif loop.session_id != self.gauge.session_id:
            # resuming a session this process never measured: keep going without a baseline
            self.gauge.new_session(loop.session_id)
            self.session_fresh = False
            self.baseline_high = self.hard_suppressed = self.check_baseline = False
        self.rollback_tree = None
        if self.cfg.on_interrupted_turn == "rollback":
            self._take_rollback_snapshot()

    def _new_session(self) -> None:
        self.gauge.new_session(None)
        self.session_fresh = True
        self.baseline_high = False
        self.hard_suppressed = False
        self.check_baseline = self.after_context_restart
        self.after_context_restart = False
        self.session_briefing_chars = 0

    def compose_prompt(self) -> list[PromptSection]:
        sections = []
        if self.briefing_pending:
            sections.append(
                PromptSection(BRIEFING_TITLE, self.briefing_pending, priority=80, source=SECTION)
            )
            self.session_briefing_chars = len(self.briefing_pending)
            self.briefing_pending = None
            self.incomplete, self.restored = [], []  # the briefing lists them
        elif self.incomplete or self.restored:
            lines = []
            if self.incomplete:
                lines.append(
                    "The last turn was cut off while it was changing these files; they may be "
                    "incomplete. Verify them before building on them:"
                )
                lines += [f"- {path}" for path in self.incomplete[:50]]
            if self.restored:
                lines.append("The last turn was cut off; its changes to these files were undone:")
                lines += [f"- {path}" for path in self.restored[:50]]
            sections.append(
                PromptSection("Possibly Incomplete Edits", "\n".join(lines), priority=88)
            )
            self.incomplete, self.restored = [], []
        if self.handoff == "requested":
            from loopctl_context_monitor.handoff import request_text

            sections.append(
                PromptSection(
                    "Context Limit: Finish Up and Hand Off",
                    request_text(self.handoff_path, _percent(self.gauge.reading)),
                    priority=95,
                    protected=True,
                )
            )
        return sections

    def on_message(self, message: AgentMessage) -> Decision | None:
        """The hot path: runs for every streamed message."""
        kind = message.kind
        if kind is MessageKind.TOOL_CALL:
            if message.tool_call is not None:
                self.activity.note_call(message.tool_call)
        elif kind is MessageKind.TOOL_RESULT and message.tool_call is not None:
            self.activity.note_result(message.tool_call)
        flags = self.gauge.observe(message)
        if not flags:
            return None
        return self._on_flags(flags)

    def _on_flags(self, flags: int) -> Decision | None:
        reading = self.gauge.reading
        if reading.known and (self.peak is None or (reading.tokens or 0) > (self.peak.tokens or 0)):
            self.peak = reading
        if flags & g.FIRST:
            self._on_baseline()
        if flags & g.CHANGED:
            self._emit_usage("stream", reading)
        if flags & g.WARN:
            self._on_warn(reading)
        if flags & g.HARD:
            return self._on_hard(reading)
        return None

    def _on_baseline(self) -> None:
        gauge = self.gauge
        limits = gauge.limits()
        if not (self.session_fresh and self.check_baseline) or limits is None:
            return
        if gauge.baseline is None:
            return
        warn_tokens, hard_tokens = limits
        baseline = gauge.baseline
        if baseline < warn_tokens:
            self.check_baseline = False
            return
        self.baseline_high = True
        self.hard_suppressed = baseline >= hard_tokens
        self.check_baseline = False
        reading = Reading(baseline, gauge.window)
        self.loop.emit(
            ev.BASELINE_HIGH,
            tokens=baseline,
            window=gauge.window,
            percent=reading.percent,
            threshold=self.cfg.warn_threshold,
            briefing_chars=self.session_briefing_chars,
            message=f"the fresh session starts {reading.describe()}, at or over the warn "
            f"threshold of {self.cfg.warn_threshold:.0%}: it is not restarted again for that",
        )
        self._storm_guard(baseline, warn_tokens, reading)

    def _storm_guard(self, baseline: int, warn_tokens: int, reading: Reading) -> None:
        """Right after a context restart the fresh session is already over warn: restarting again
        would loop. Shrink the briefing if it could be the cause, else stop the loop."""
        briefing_tokens = math.ceil(self.session_briefing_chars / CHARS_PER_TOKEN_LOW)
        excess = baseline - warn_tokens + 1
        shrinkable = self.budget > MIN_BUDGET_CHARS and briefing_tokens >= excess
        if shrinkable:
            target = self.session_briefing_chars - 4 * excess
            new_budget = max(MIN_BUDGET_CHARS, min(self.budget // 2, target))
            self.loop.emit(
                ev.BRIEFING_SHRUNK,
                budget_from=self.budget,
                budget_to=new_budget,
                baseline=baseline,
                briefing_chars=self.session_briefing_chars,
            )
            self.budget = new_budget
            return
        self.stop_message = (
            f"the fresh session after a context restart starts {reading.describe()} "
            f"(baseline {baseline:,} tokens), at or over the warn threshold of "
            f"{self.cfg.warn_threshold:.0%} before doing any work; the briefing is only about "
            f"{briefing_tokens:,} tokens, so shrinking it cannot help. Restarting again would "
            "loop: reduce the agent's fixed context (system prompt, memory files, tools), use a "
            "model with a larger window, or raise plugins.context-monitor.warn_threshold"
        )
        self.loop.emit(ev.BASELINE_TOO_HIGH, baseline=baseline, message=self.stop_message)

    def _on_warn(self, reading: Reading) -> None:
        if self.baseline_high:
            action = "none: the session started at or over the threshold"
        elif not self.resume_mode:
            action = "none: in fresh session mode the next iteration starts an empty session"
        elif self.handoff == "requested":
            action = "restart after this handoff turn"
        elif self.cfg.graceful_handoff:
            action = "one more turn to wrap up and write a handoff, then a restart"
        else:
            action = "restart after this iteration"
        if self.resume_mode and not self.baseline_high:
            self.warn_pending = True
        self.loop.emit(
            ev.EXHAUSTION_WARNING,
            tokens=reading.tokens,
            window=reading.window,
            percent=reading.percent,
            threshold=self.cfg.warn_threshold,
            session=self.gauge.session_id or self.loop.session_id,
            restarts=self.loop.restarts,
            action=action,
            summary=f"context {reading.describe()}, past the warn threshold "
            f"({self.cfg.warn_threshold:.0%}) → {action}",
        )

    def _on_hard(self, reading: Reading) -> Decision | None:
        if self.hard_suppressed:
            return None
        self.hard_this_iteration = True
        self.trigger, self.trigger_reading = "hard", reading
        message = (
            f"context {reading.describe()} reached the hard threshold of "
            f"{self.cfg.hard_threshold:.0%} mid-turn; the turn was ended at a message boundary"
        )
        self.loop.emit(
            ev.HARD_LIMIT,
            tokens=reading.tokens,
            window=reading.window,
            percent=reading.percent,
            threshold=self.cfg.hard_threshold,
            session=self.gauge.session_id or self.loop.session_id,
            restarts=self.loop.restarts,
        )
        return Decision.restart(REASON, message)

    def after_iteration(self, record: IterationRecord, test_run: TestRun | None) -> Decision | None:
        ending = record.ending
        if ending == IterationEnd.RATE_LIMITED.value:
            # the iteration runs again in the same session: a warn restart it earned still
            # stands (the gauge does not warn twice in one session)
            self.carry_warn = self.warn_pending
            return None
        if ending == IterationEnd.INTERRUPTED.value:
            return None  # the run is ending; resume runs the iteration again
        turn = self.loop.last_turn
        self._emit_iteration_usage()
        if ending == IterationEnd.AGENT_FAILED.value:
            # the agent's failure ends the loop: the fill is reported, nothing is decided
            self.warn_pending = False
            self.persist()
            return None
        overflow = turn is not None and turn.outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW
        if turn is not None and (turn.interrupted or overflow):
            self._cut_off(turn, record)
        decision = self._decide(record, turn, overflow)
        self.persist()
        return decision

    def _decide(
        self, record: IterationRecord, turn: TurnResult | None, overflow: bool
    ) -> Decision | None:
        if overflow and not (turn is not None and turn.interrupted):
            # the engine restarts with a fresh session on its own; the monitor only briefs it
            self.trigger, self.trigger_reading = "overflow", self.gauge.reading
            self.warn_pending = False
            self.handoff = None
            self.loop.emit(
                ev.OVERFLOW,
                message=(turn.outcome.message if turn else "")[:300],
                tokens=self.gauge.tokens,
                window=self.gauge.window,
            )
            return None
        if self.hard_this_iteration:
            self.warn_pending = False
            return None  # the restart decided mid-turn is already pending
        passed = record.tests_passed and turn is not None and turn.outcome.ok
        if self.stop_message and not passed:
            message, self.stop_message = self.stop_message, None
            return Decision.stop(STOP_REASON, message, status=StopStatus.PLUGIN)
        if self.handoff == "requested":
            self._collect_handoff()
            self.handoff = None
            self.warn_pending = False
            self.trigger, self.trigger_reading = "handoff", self.gauge.reading
            return Decision.restart(
                REASON,
                f"context {self.gauge.reading.describe()}: the agent wrapped up and wrote a "
                "handoff; restarting with a fresh session",
            )
        if not self.warn_pending:
            return None
        self.warn_pending = False
        reading = self.gauge.reading
        if self.cfg.graceful_handoff:
            self.handoff = "requested"
            self.handoff_text, self.handoff_check = None, []
            try:
                self.handoff_path.unlink(missing_ok=True)
            except OSError:
                pass
            self.loop.emit(
                ev.HANDOFF_REQUESTED,
                path=str(self.handoff_path),
                tokens=reading.tokens,
                window=reading.window,
                percent=reading.percent,
            )
            return None
        self.trigger, self.trigger_reading = "warn", reading
        return Decision.restart(
            REASON,
            f"context {reading.describe()} reached the warn threshold of "
            f"{self.cfg.warn_threshold:.0%}; restarting with a fresh session and a briefing",
        )

    def on_restart(self, restart: Restart) -> None:
        self.warn_pending = False
        self.stop_message = None
        if restart.reason != REASON:
            self.trigger = None
            self.handoff = None
            self.persist()
            return
        turn = self.loop.last_turn
        trigger = self.trigger or (
            "overflow"
            if turn is not None and turn.outcome.error_kind is ErrorKind.CONTEXT_OVERFLOW
            else "restart"
        )
        reading = self.trigger_reading or self.gauge.reading
        briefing = self._briefing(restart.number, trigger, reading)
        text = briefing.text
        state_dir = self.loop.state_dir
        written = self._write(state_dir / BRIEFING_FILE, _briefing_file(text))
        archived = self._write(Path(restart.archive_dir) / BRIEFING_FILE, _briefing_file(text))
        if self.handoff_text is not None:
            self._write(Path(restart.archive_dir) / "handoff.md", self.handoff_text + "\n")
        self.briefing_pending = text
        self.after_context_restart = True
        self.restarts.append(
            f"restart {restart.number} after iteration {self.loop.iteration}: {trigger}, "
            f"context {reading.describe()}"
        )
        self.loop.emit(
            ev.EXHAUSTION_RESTART,
            number=restart.number,
            trigger=trigger,
            tokens=reading.tokens,
            window=reading.window,
            percent=reading.percent,
            briefing_chars=len(text),
            briefing_budget=self.budget,
            briefing_source=briefing.source,
            trimmed=briefing.trimmed,
            path=str(state_dir / BRIEFING_FILE) if written else None,
            archived=str(Path(restart.archive_dir) / BRIEFING_FILE) if archived else None,
            summary=f"restart {restart.number}: a fresh agent session ({_TRIGGER_WORDS.get(trigger, trigger)})"
            f", briefed in {len(text):,} chars",
        )
        self.trigger, self.trigger_reading = None, None
        self.handoff, self.handoff_text, self.handoff_check = None, None, []
        self.persist()

    def on_loop_end(self, outcome: LoopOutcome) -> None:
        lines = []
        if self.peak is not None:
            lines.append(f"Peak context fill seen: {self.peak.describe()}.")
        else:
            lines.append("No context fill was measured (the agent reported no token usage).")
        lines.append(
            f"Thresholds: warn {self.cfg.warn_threshold:.0%}, hard {self.cfg.hard_threshold:.0%}."
        )
        if self.restarts:
            lines.append("Context restarts:")
            lines += [f"- {line}" for line in self.restarts]
        else:
            lines.append("No context restarts.")
        self.loop.add_report_section("Context monitor", "\n".join(lines), source=SECTION)

    # --- pieces ------------------------------------------------------------------------------

    def _write(self, path: Path, text: str) -> bool:
        """Write ``path`` (in the state directory) atomically, now: the event that follows
        names it, and ``loopctl resume`` reads the briefing back. False when it failed."""
        try:
            self.loop.write_file(path, text, background=False)
        except OSError:
            return False
        return True

    @property
    def handoff_path(self) -> Path:
        from loopctl_context_monitor.handoff import HANDOFF_FILE

        return self.loop.state_dir / HANDOFF_FILE

    def _emit_usage(self, source: str, reading: Reading, **extra: Any) -> None:
        self.loop.emit(
            ev.USAGE,
            tokens=reading.tokens,
            window=reading.window,
            percent=reading.percent,
            session=self.gauge.session_id or self.loop.session_id,
            restarts=self.loop.restarts,
            source=source,
            known=reading.known,
            **extra,
            summary=_usage_line(source, reading, extra.get("reason")),
        )

    def _emit_iteration_usage(self) -> None:
        gauge = self.gauge
        reading = gauge.reading
        if reading.tokens is None:
            reading = Reading(None, gauge.resolve_window())
        if reading.known:
            if self.peak is None or (reading.tokens or 0) > (self.peak.tokens or 0):
                self.peak = reading
            self._emit_usage("iteration", reading)
            return
        if reading.tokens is None:
            reason = "the agent reported no token usage"
        else:
            reason = f"the context window of model {gauge.model or '(unknown)'} is not known"
        self._emit_usage("iteration", reading, reason=reason)
        key = (self.loop.restarts, reason)
        if key not in self.unknown_reported:
            self.unknown_reported.add(key)
            hint = (
                "set plugins.context-monitor.window or a [models] entry"
                if reading.tokens is not None
                else "this agent may not report usage; the thresholds cannot act"
            )
            self.loop.emit(
                ev.USAGE_UNKNOWN,
                reason=reason,
                model=gauge.model,
                agent=self.loop.agent_name,
                hint=hint,
            )

    def _take_rollback_snapshot(self) -> None:
        loop = self.loop
        if not loop.workspace.is_git:
            if "rollback_no_git" not in self.warned_about:
                self.warned_about.add("rollback_no_git")
                loop.emit(
                    ev.ROLLBACK_UNAVAILABLE,
                    reason="the working directory is not a git repository; interrupted turns "
                    "are flagged instead",
                )
            return
        from loopctl_context_monitor.rollback import snapshot_tree

        self.rollback_tree = snapshot_tree(loop.workdir, exclude=_state_dir_inside(loop))
        if self.rollback_tree is None and "rollback_snapshot" not in self.warned_about:
            self.warned_about.add("rollback_snapshot")
            loop.emit(
                ev.ROLLBACK_UNAVAILABLE,
                reason="git could not record the working tree before the turn",
            )

    def _cut_off(self, turn: TurnResult, record: IterationRecord) -> None:
        files = [path for path in record.changed_files if path]
        why = turn.interrupt_reason or (
            turn.outcome.error_kind.value if turn.outcome.error_kind else "cut off"
        )
        if not files:
            return
        action = "flag"
        restored: list[str] = []
        flagged = files
        if self.cfg.on_interrupted_turn == "rollback" and self.rollback_tree:
            from loopctl_context_monitor.rollback import restore

            result = restore(self.loop.workdir, self.rollback_tree, files)
            restored = result.restored + result.deleted
            flagged = [p for p in files if p not in set(restored)]
            action = "rollback"
            self.loop.emit(
                ev.ROLLBACK,
                restored=result.restored[:50],
                deleted=result.deleted[:50],
                failed=result.failed[:50],
            )
        self.incomplete = flagged
        self.restored = restored
        self.loop.emit(
            ev.INTERRUPTED_TURN,
            reason=why,
            action=action,
            files=files[:50],
            count=len(files),
        )

    def _collect_handoff(self) -> None:
        from loopctl_context_monitor.handoff import cross_check, mentioned_paths, read_handoff

        text = read_handoff(self.handoff_path)
        changed = self._changed_paths()
        if text is None:
            self.handoff_text = None
            self.handoff_check = [
                "The previous session was asked to write a handoff note but wrote none."
            ]
        else:
            root = self.loop.workdir
            exists = [p for p in mentioned_paths(text) if (root / p).exists()]
            self.handoff_text = text
            self.handoff_check = cross_check(text, changed, exists)
        self.loop.emit(
            ev.HANDOFF,
            written=text is not None,
            chars=len(text or ""),
            check=self.handoff_check,
        )

    def _changed_paths(self) -> list[str]:
        """Every file changed since the loop began, as paths (for cross-checks)."""
        paths: dict[str, None] = {}
        for record in self.loop.history:
            paths.update(dict.fromkeys(record.changed_files))
        snapshot = self.loop.last_snapshot
        if snapshot is not None:
            paths.update(dict.fromkeys(p for p, v in snapshot.files.items() if v != "deleted"))
        return list(paths)

    def _modified_lines(self) -> list[str]:
        loop = self.loop
        workspace = loop.workspace
        stat = ""
        if workspace.is_git and loop.start_commit:
            try:
                stat = workspace.diff_stat(loop.start_commit)
            except Exception:  # noqa: BLE001 - no stat is a shorter briefing, not a failure
                stat = ""
        lines = [line.strip() for line in stat.splitlines() if line.strip()]
        out: list[str] = []
        shown: set[str] = set()
        abbreviated: list[str] = []
        if lines:
            summary, files = lines[-1], lines[:-1]
            out.append(f"{summary} (git diff --stat against the loop's start commit)")
            for line in files:
                out.append(f"- {line}")
                name = line.split("|", 1)[0].strip()
                if name.startswith("..."):
                    abbreviated.append(name[3:])
                else:
                    shown.add(name)
        extra: list[str] = []
        if workspace.is_git and lines:
            snapshot = loop.last_snapshot
            for path in sorted(snapshot.files if snapshot is not None else ()):
                if snapshot is not None and snapshot.files[path] == "deleted":
                    continue
                if path in shown or any(path.endswith(tail) for tail in abbreviated):
                    continue
                extra.append(path)
            out += [f"- {path} (new, not in git yet)" for path in extra]
            return out
        changed = sorted(dict.fromkeys(p for r in loop.history for p in r.changed_files))
        if changed:
            noun = "file" if len(changed) == 1 else "files"
            out.append(f"{len(changed)} {noun} changed during the loop (from loopctl's snapshots)")
            out += [f"- {path}" for path in changed]
        return out

    def _briefing(self, number: int, trigger: str, reading: Reading) -> Briefing:
        loop = self.loop
        run = loop.last_test_run
        inputs = BriefingInputs(
            goal=loop.original_goal,
            trigger=trigger,
            restart_number=number,
            iteration=loop.iteration,
            max_iterations=loop.max_iterations,
            tokens=reading.tokens,
            window=reading.window,
            warn_threshold=self.cfg.warn_threshold,
            hard_threshold=self.cfg.hard_threshold,
            tests_passed=None if run is None else run.passed,
            test_command=run.command if run is not None else "",
            failing_tests=list(run.failing_tests) if run is not None else [],
            error_lines=list(run.error_lines) if run is not None else [],
            modified=self._modified_lines(),
            failed_approaches=list(loop.failed_approaches),
            incomplete_files=list(self.incomplete),
            restored_files=list(self.restored),
            handoff_check=list(self.handoff_check),
            handoff=self.handoff_text or "",
            recent_activity=self.activity.recent_lines(),
            older_activity=self.activity.older_lines(),
        )
        briefing = build_briefing(inputs, self.budget)
        return self._enrich(briefing)

    def _enrich(self, briefing: Briefing) -> Briefing:
        """Offer the briefing to plugins implementing ``context_monitor_briefing``, time-boxed;
        the deterministic one stays when they fail, are slow, or return nothing."""
        caller = getattr(self.loop.hook, "context_monitor_briefing", None)
        if caller is None or not caller.get_hookimpls():
            return briefing
        answer: dict[str, Any] = {}

        def ask() -> None:
            try:
                answer["text"] = caller(loop=self.loop, briefing=briefing)
            except Exception as exc:  # noqa: BLE001 - strict mode lets it through: fall back
                answer["error"] = f"{type(exc).__name__}: {exc}"

        worker = threading.Thread(target=ask, name="loopctl-context-briefing", daemon=True)
        worker.start()
        worker.join(self.cfg.briefing_hook_timeout_s)
        text = answer.get("text")
        if worker.is_alive():
            why = f"no answer within {self.cfg.briefing_hook_timeout_s:g} s"
        elif "error" in answer:
            why = f"it raised {answer['error']}"
        elif not isinstance(text, str) or not text.strip():
            why = "it returned no text"
        else:
            trimmed, cut = trim_text(text, self.budget)
            self.loop.emit(ev.BRIEFING_ENRICHED, chars=len(trimmed), cut=cut)
            briefing.text = trimmed
            briefing.source = "hook"
            return briefing
        self.loop.emit(ev.BRIEFING_FALLBACK, reason=why)
        return briefing


def _briefing_file(text: str) -> str:
    return f"# {BRIEFING_TITLE}\n\n{text.rstrip()}\n"


def _strip_title(text: str) -> str:
    prefix = f"# {BRIEFING_TITLE}\n\n"
    return (text[len(prefix) :] if text.startswith(prefix) else text).strip()


def _strings(value: object) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def _state_dir_inside(loop: Loop) -> tuple[str, ...]:
    try:
        return (str(loop.state_dir.resolve().relative_to(loop.workdir.resolve())),)
    except ValueError:
        return ()


def _usage_line(source: str, reading: Reading, reason: Any) -> str:
    """The line loopctl's views show for a usage reading: each streamed change; the
    iteration's reading only when it says something new (tokens without a known window), else
    "" (hidden from the views; it is in events.jsonl): an unknown fill is said once per session
    and reason, by ``usage_unknown``."""
    if source == "iteration" and (reading.known or reading.tokens is None):
        return ""
    if reading.tokens is None and isinstance(reason, str) and reason:
        return f"context fill unknown: {reason}"
    return f"context {reading.describe()}"
