"""The guard of one run: seals the original goal, checks it, repairs it, and keeps the notes.

How a change to the original goal is caught, by where it comes from:

* **state file** (``loop-state.md`` edited on disk while the loop was stopped): on resume the
  engine reads ``original_goal`` from that file, and it no longer matches the sealed record;
* **plugin**: a plugin calls ``loop.repair_original_goal`` (the ``loop.original_goal_repaired``
  event names it) or contributes a "Your Goal" prompt section of its own;
* **guard record**: goal-guard's own record is missing or damaged for a run it sealed;
* **unknown**: the goal changed in memory without an event (checked before every iteration
  and again while the prompt is composed).

Every one is repaired (the sealed text is put back through ``loop.repair_original_goal``) and
reported as a ``goal_guard.violation`` event naming the source.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from loopctl_goal_guard import record as rec
from loopctl_goal_guard.legacy import strip_synthesized_sections
from loopctl_goal_guard.notes import Note, NoteBook, NoteJournal, TestOutcome, coerce_note

if TYPE_CHECKING:
    from loopctl.engine import Loop, LoopOutcome
    from loopctl.model import Decision, IterationRecord, PromptSection
    from loopctl_goal_guard.config import GoalGuardConfig

NAME = "goal-guard"
#: The key in loop-state.md (``extra``) that ties the loop to its sealed record.
RUN_KEY = "goal_guard_run"
GOAL_TITLE = "Your Goal"
NOTES_TITLE = "Notes"
#: The heading of the notes in the working goal (``goal`` in loop-state.md).
NOTES_HEADING = "## Notes (goal-guard; not part of the original goal)"
#: Source name of the notes goal-guard derives from test runs.
TESTS_SOURCE = "tests"
RUN_NOTE_PREFIX = f"{TESTS_SOURCE}:run:"
#: The ``loop.start`` event carries the goal cut to this many characters.
START_EVENT_GOAL_CHARS = 2000
#: At most this many notes are taken from one plugin per call.
MAX_NOTES_PER_PLUGIN = 100
_ERROR_LINE_CHARS = 200


@attrs.define
class EarlySightings:
    """What ``on_event`` saw before the guard existed (between the start of a run and
    goal-guard's ``on_loop_start``): the goal as the run started, and plugins changing it."""

    start_goal: str | None = None
    foreign_changes: list[dict[str, Any]] = attrs.Factory(list)


_ERROR_WORDS = re.compile(r"error|assert|exception|expected|fail", re.IGNORECASE)
_HEADER = re.compile(r"^(?:FAIL|ERROR|FAILED|PASSED|---|===|\S+ \.\.\. )", re.IGNORECASE)


def _short_name(test_id: str) -> str:
    return test_id.replace("::", ".").rsplit(".", 1)[-1].split("[", 1)[0]


def _error_for(test_id: str, lines: Sequence[str]) -> str:
    """The error message of one failing test among a run's decisive lines: the message on the
    test's own line (pytest's ``FAILED id - message``) or the first error-looking line of the
    few that follow it (unittest's header, location, exception)."""
    short = _short_name(test_id)
    if not short:
        return ""
    for index, line in enumerate(lines):
        if short not in line:
            continue
        head, sep, message = line.partition(" - ")
        if sep and test_id in head and message.strip():
            return message.strip()
        for follower in lines[index + 1 : index + 4]:
            if _HEADER.match(follower):
                break
            if _ERROR_WORDS.search(follower) and not follower.startswith("File "):
                return follower
        return ""
    return ""


class GoalGuard:
    """One run's guard; created by goal-guard's ``on_loop_start``."""

    def __init__(self, loop: Loop, config: GoalGuardConfig) -> None:
        self.loop = loop
        self.config = config
        self.sealed: rec.SealedGoal | None = None
        self.book = NoteBook(max_notes=config.max_notes, default_ttl=config.note_ttl_iterations)
        self.journal = NoteJournal(rec.guard_dir(loop.state_dir) / rec.NOTES_FILE)
        self.violations = 0
        self._stop_message: str | None = None
        self._foreign_working_goal: list[str] = []
        self._last_shown = 0
        #: Notes dropped over ``max_notes`` since the last prompt.
        self._evicted = 0
        #: Keys of the notes about a whole failing run (the runner named no tests): few, so
        #: superseding them never scans every note.
        self._run_note_keys: set[str] = set()

    # --- sealing -------------------------------------------------------------------------------

    def start(self, early: EarlySightings) -> None:
        """Seal (fresh run) or verify (resume) the original goal, load the notes."""
        if self.loop.resumed:
            self._start_resumed()
        else:
            self._start_fresh(early)
        self.sync_working_goal()

    def _seal(self, text: str, sealed_from: str, *, keep_notes: bool = False) -> None:
        run_id = secrets.token_hex(8)
        self.sealed = rec.seal(
            self.loop.state_dir,
            text,
            run_id=run_id,
            sealed_from=sealed_from,
            sealed_at=round(time.time(), 3),
        )
        self.loop.set_value(RUN_KEY, run_id)
        if not keep_notes:
            self.journal.reset()  # notes belong to a run: a new seal starts without any
        self.loop.emit(
            "goal_guard.sealed",
            sealed_from=sealed_from,
            chars=len(text),
            sha256=self.sealed.sha256,
            record=str(rec.guard_dir(self.loop.state_dir)),
        )

    def _start_fresh(self, early: EarlySightings) -> None:
        text = self.loop.original_goal
        if early.foreign_changes:
            plugins = sorted({str(c.get("source") or "?") for c in early.foreign_changes})
            start = early.start_goal
            complete = isinstance(start, str) and 0 < len(start) < START_EVENT_GOAL_CHARS
            if complete and start != text:
                assert start is not None
                self._violation(
                    found=text,
                    expected=start,
                    source="plugin",
                    plugin=", ".join(plugins),
                    detail="changed the goal before goal-guard sealed it",
                    where="on_loop_start",
                    repair=True,
                )
                text = start
            elif not complete:
                self.loop.emit(
                    "goal_guard.violation",
                    source="plugin",
                    plugin=", ".join(plugins),
                    detail="changed the goal before goal-guard sealed it, and the goal is too "
                    "long to restore from the loop.start event; sealed as found",
                    action="unrepaired",
                    where="on_loop_start",
                    found_chars=len(text),
                )
                self.violations += 1
        self._seal(text, "cli")

    def _start_resumed(self) -> None:
        loop = self.loop
        read = rec.load(loop.state_dir)
        run_id = loop.get_value(RUN_KEY)
        if read.repaired_files:
            loop.emit(
                "goal_guard.record_repaired",
                files=list(read.repaired_files),
                problems=list(read.problems),
            )
        ours = read.sealed is not None and isinstance(run_id, str) and read.sealed.run_id == run_id
        if ours:
            assert read.sealed is not None
            self.sealed = read.sealed
            self._load_notes()
            current = loop.original_goal
            if current != self.sealed.text:
                self._violation(
                    found=current,
                    expected=self.sealed.text,
                    source="state_file",
                    detail=(
                        "loop-state.md has no original_goal"
                        if not current
                        else "loop-state.md's original_goal differs from the sealed goal "
                        "(edited on disk while the loop was stopped)"
                    ),
                    where="resume",
                    repair=True,
                )
            return
        if isinstance(run_id, str):  # this loop was sealed, but its record is gone or damaged
            self._violation(
                found="",
                expected=loop.original_goal,
                source="guard_record",
                detail="goal-guard's record of this loop is "
                + ("damaged: " + "; ".join(read.problems) if read.problems else "missing")
                + "; resealed from loop-state.md",
                where="resume",
                repair=False,
            )
        elif read.sealed is not None:
            loop.emit(
                "goal_guard.record_replaced",
                why="the record belongs to another run in this state directory",
            )
        self._adopt(trusted=isinstance(run_id, str))

    def _written_by_loopctl(self) -> bool:
        """Whether loop-state.md was started by loopctl (it records its version; the bash
        predecessor did not), whose engine captures original_goal before any note exists."""
        from loopctl import state as st

        try:
            return bool(
                st.read_loop_state(self.loop.state_dir / st.LOOP_STATE_FILE).loopctl_version
            )
        except st.StateError:
            return False

    def _adopt(self, *, trusted: bool) -> None:
        """No record of this loop: take the goal from loop-state.md. A loopctl-era (or guarded)
        original_goal is taken as it is; a bash-era one, or a bash-era goal when there is no
        original_goal, has the sections the bash tool synthesized into it removed."""
        loop = self.loop
        current = loop.original_goal
        field = "original_goal" if current else "goal"
        if current and (trusted or self._written_by_loopctl()):
            if trusted:  # the same run, only its goal record was lost: keep its notes
                self._load_notes()
            self._seal(current, "state_file", keep_notes=trusted)
            return
        recovery = strip_synthesized_sections(current or loop.goal)
        text = recovery.text
        if not text.strip():
            loop.emit(
                "goal_guard.legacy_unrecoverable",
                detail="loop-state.md has neither original_goal nor a goal to recover it from",
            )
            return
        if recovery.changed or not current:
            loop.repair_original_goal(
                text,
                source=NAME,
                why=f"recovered from a legacy state file's {field}"
                + (" (synthesized sections removed)" if recovery.changed else ""),
            )
            loop.emit(
                "goal_guard.legacy_recovered",
                field=field,
                removed=list(recovery.removed),
                removed_chars=recovery.removed_chars,
                chars=len(text),
                sha256=rec.goal_digest(text),
            )
        self._seal(text, "legacy" if recovery.changed or not current else "state_file")

    def _load_notes(self) -> None:
        bad, problems = self.journal.read_into(self.book)
        self._run_note_keys = {k for k in self.book.entries if k.startswith(RUN_NOTE_PREFIX)}
        if bad or problems:
            self.loop.emit(
                "goal_guard.notes_journal_damaged", skipped_lines=bad, problems=problems[:5]
            )

    # --- checking ------------------------------------------------------------------------------

    def _violation(
        self,
        *,
        found: str,
        expected: str,
        source: str,
        detail: str,
        where: str,
        repair: bool,
        plugin: str | None = None,
    ) -> None:
        self.violations += 1
        if repair:
            why = f"{source}{f' ({plugin})' if plugin else ''}: {detail}"
            self.loop.repair_original_goal(expected, source=NAME, why=why)
        data: dict[str, Any] = {
            "source": source,
            "detail": detail,
            "action": "repaired" if repair else "resealed",
            "where": where,
            "found_chars": len(found),
            "found_sha256": rec.goal_digest(found),
            "expected_chars": len(expected),
            "expected_sha256": rec.goal_digest(expected),
        }
        if plugin:
            data["plugin"] = plugin
        self.loop.emit("goal_guard.violation", **data)
        if self.config.on_violation == "stop" and self._stop_message is None:
            self._stop_message = f"the original goal was changed ({source}: {detail}); repaired"

    def check(self, where: str) -> str | None:
        """Put the sealed goal back if it changed in memory; returns the text found then."""
        sealed = self.sealed
        if sealed is None:
            return None
        current = self.loop.original_goal
        if current == sealed.text:
            return None
        self._violation(
            found=current,
            expected=sealed.text,
            source="unknown",
            detail="the original goal changed in memory without a loop.original_goal_repaired "
            "event",
            where=where,
            repair=True,
        )
        return current

    def refuse(self, change: Mapping[str, Any]) -> None:
        """A plugin changed the original goal through ``loop.repair_original_goal``: undo it."""
        sealed = self.sealed
        if sealed is None or self.loop.original_goal == sealed.text:
            return
        why = str(change.get("why") or "")[:300]
        self._violation(
            found=self.loop.original_goal,
            expected=sealed.text,
            source="plugin",
            plugin=str(change.get("source") or "?"),
            detail="called loop.repair_original_goal" + (f" ({why})" if why else ""),
            where="on_event",
            repair=True,
        )

    def note_foreign_working_goal(self, source: str) -> None:
        self._foreign_working_goal.append(source)

    # --- the prompt ----------------------------------------------------------------------------

    def notes_section(self) -> PromptSection | None:
        from loopctl.model import PromptSection

        budget = self.config.notes_budget_chars
        rendered = self.book.render(budget)
        self._last_shown = rendered.shown
        self.loop.emit(
            "goal_guard.notes",
            notes=rendered.total,
            shown=rendered.shown,
            left_out=rendered.left_out,
            chars=len(rendered.body),
            budget_chars=budget,
            evicted=self._evicted,
        )
        self._evicted = 0
        if not rendered.body:
            return None
        return PromptSection(
            NOTES_TITLE,
            "Things earlier iterations learned; they are not part of the goal above.\n\n"
            + rendered.body,
            priority=self.config.notes_priority,
            source=NAME,
        )

    def police(self, results: Sequence[Any]) -> list[Any]:
        """The prompt sections with exactly one "Your Goal", the sealed goal, placed first."""
        from loopctl.model import PromptSection

        sealed = self.sealed
        if sealed is None:
            return list(results)
        stale = self.check("compose_prompt")
        flat: list[PromptSection] = []
        for result in results:
            items = result if isinstance(result, (list, tuple)) else [result]
            flat.extend(s for s in items if isinstance(s, PromptSection))
        others = [s for s in flat if s.title != GOAL_TITLE]
        goals = [s for s in flat if s.title == GOAL_TITLE]
        for section in goals:
            if section.body == sealed.text or (stale is not None and section.body == stale):
                continue
            self._violation(
                found=section.body,
                expected=sealed.text,
                source="plugin",
                plugin=section.source or "a compose_prompt implementation",
                detail="contributed a 'Your Goal' prompt section that is not the original goal; "
                "it was left out",
                where="compose_prompt",
                repair=False,
            )
        if not goals:
            self._violation(
                found="",
                expected=sealed.text,
                source="plugin",
                plugin="a compose_prompt wrapper",
                detail="the 'Your Goal' prompt section was missing; put back",
                where="compose_prompt",
                repair=False,
            )
        goal = PromptSection(GOAL_TITLE, sealed.text, priority=100, protected=True, source=NAME)
        return [goal, *others]

    # --- notes ---------------------------------------------------------------------------------

    def _test_outcome(self, record: IterationRecord) -> TestOutcome | None:
        if record.test_exit_code is None and not record.tests_passed:
            run = self.loop.last_test_run
            if run is None or not run.timed_out:
                return None  # no tests ran this iteration
        failing = frozenset(record.failing_tests) if record.failing_tests else None
        return TestOutcome(passed=record.tests_passed, failing=failing)

    def _derive_test_notes(self, record: IterationRecord, iteration: int) -> None:
        run = self.loop.last_test_run
        if record.tests_passed or run is None or run.passed:
            self._drop_run_notes()
            return
        lines = [line.strip() for line in run.error_lines if line.strip()]
        if record.failing_tests:
            self._drop_run_notes()  # the failure is named test by test now
            for test_id in record.failing_tests[: self.config.max_test_notes]:
                detail = _error_for(test_id, lines)
                text = f"Test `{test_id}` fails" + (
                    f": {detail[:_ERROR_LINE_CHARS]}" if detail else ""
                )
                self.book.report(
                    Note(
                        text=text[: self.config.max_note_chars],
                        source=TESTS_SOURCE,
                        key=f"test:{test_id}",
                        priority=55,
                        tests=(test_id,),
                    ),
                    iteration,
                )
            return
        what = "times out" if run.timed_out else f"fails (exit code {run.exit_code})"
        text = f"`{run.command}` {what}" + (f": {lines[0][:_ERROR_LINE_CHARS]}" if lines else "")
        key = f"run:{run.fingerprint or ('timeout' if run.timed_out else run.exit_code)}"
        self._drop_run_notes(keep=f"{TESTS_SOURCE}:{key}")  # that failure is gone: another now
        self._run_note_keys.add(f"{TESTS_SOURCE}:{key}")
        self.book.report(
            Note(
                text=text[: self.config.max_note_chars],
                source=TESTS_SOURCE,
                key=key,
                priority=55,
                until_pass=True,
            ),
            iteration,
        )

    def _drop_run_notes(self, keep: str = "") -> None:
        for key in [k for k in self._run_note_keys if k != keep]:
            self.book.remove(key)
            self._run_note_keys.discard(key)

    def _plugin_notes(self, iteration: int) -> None:
        caller = getattr(self.loop.hook, "goal_guard_notes", None)
        if caller is None:
            return
        for impl in reversed(caller.get_hookimpls()):  # pluggy's call order
            if impl.wrapper or impl.hookwrapper:
                continue
            kwargs = {"loop": self.loop} if "loop" in impl.argnames else {}
            result = impl.function(**kwargs)
            if result is None:
                continue
            items: Iterable[Any] = (
                result if isinstance(result, (list, tuple)) else [result]  # one note or many
            )
            for item in list(items)[:MAX_NOTES_PER_PLUGIN]:
                note = coerce_note(
                    item, default_source=impl.plugin_name, max_chars=self.config.max_note_chars
                )
                if note is not None:
                    self.book.report(note, iteration)

    def collect(self, record: IterationRecord | None) -> Decision | None:
        """After an iteration (or a restart, with no record): gather the notes, expire the
        resolved ones, persist, and keep the working goal in step."""
        iteration = self.loop.iteration
        before = len(self.book)
        outcome = None
        if record is not None:
            outcome = self._test_outcome(record)
            if self.config.test_notes and outcome is not None:
                self._derive_test_notes(record, iteration)
        self._plugin_notes(iteration)
        gone = self.book.expire(iteration, outcome)
        evicted = self.book.evict_over_cap()
        changes = self.book.take_changes()
        compacted = self.journal.append(changes, self.book)
        self._evicted += len(evicted)  # reported with the next prompt's notes event
        if gone:
            self.loop.emit(
                "goal_guard.notes_expired",
                resolved=len(gone),
                evicted=len(evicted),
                notes=len(self.book),
                examples=[f"{key} ({why})" for key, why in gone[:3]],
            )
        if compacted:
            self.loop.emit("goal_guard.notes_compacted", notes=len(self.book))
        if changes or len(self.book) != before or self._foreign_working_goal:
            self.sync_working_goal()
        if self._stop_message is not None:
            from loopctl.model import Decision

            return Decision.stop("goal_violation", self._stop_message)
        return None

    def sync_working_goal(self) -> None:
        """``goal`` in loop-state.md: the original goal, then the notes under their heading."""
        sealed = self.sealed
        if sealed is None:
            return
        body = self.book.render(self.config.notes_budget_chars).body
        text = sealed.text if not body else f"{sealed.text}\n\n{NOTES_HEADING}\n\n{body}"
        if self.loop.goal != text:
            if self._foreign_working_goal:
                self.loop.emit(
                    "goal_guard.working_goal_restored",
                    plugins=sorted(set(self._foreign_working_goal)),
                )
            self.loop.set_working_goal(text, source=NAME)
        self._foreign_working_goal.clear()

    # --- the end -------------------------------------------------------------------------------

    def end(self, outcome: LoopOutcome) -> None:
        self.journal.close()
        sealed = self.sealed
        if sealed is None:
            return
        lines = [
            f"- Original goal sealed from {sealed.sealed_from}: {len(sealed.text)} characters, "
            f"sha256 {sealed.sha256[:12]}….",
            f"- Violations repaired this run: {self.violations}.",
            f"- Notes kept: {len(self.book)} (shown in the last prompt: {self._last_shown}).",
        ]
        self.loop.add_report_section("Goal guard", "\n".join(lines), source=NAME)
