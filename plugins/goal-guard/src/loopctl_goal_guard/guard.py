"""The guard of one run: seals the original goal, puts it back, and keeps the notes.

The original goal changes in one way only: a plugin's answer to ``resolve_original_goal``,
asked once before ``on_loop_start``. goal-guard answers it first (``tryfirst``) and always
answers for a goal it guards, so no later plugin can change it. How a change is caught, by where
it comes from:

* **state file** (``loop-state.md`` edited on disk while the loop was stopped): on resume its
  ``original_goal`` no longer matches the sealed record; goal-guard answers with the sealed goal
  (``repaired``);
* **guard record**: goal-guard's own record is missing or damaged for a run it sealed (resealed
  from ``loop-state.md``);
* **plugin**: a plugin answered ``resolve_original_goal`` before goal-guard (its own
  ``tryfirst``) and changed the goal, or contributes a "Your Goal" prompt section of its own;
* **unknown**: the goal changed in memory (through the engine's private state; the public API
  cannot do it), checked before every iteration and while the prompt is composed.

A change made after ``resolve_original_goal`` cannot be undone in the run's state
(``unrepaired``); the prompt still shows the sealed goal, and ``loopctl resume`` repairs the
state file. Every change is reported as a ``goal-guard.violation`` event naming its source.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from loopctl_goal_guard import events as ev
from loopctl_goal_guard import record as rec
from loopctl_goal_guard.legacy import strip_synthesized_sections
from loopctl_goal_guard.notes import Note, NoteBook, NoteJournal, TestOutcome, coerce_note

if TYPE_CHECKING:
    from loopctl import Decision, IterationRecord, Loop, LoopOutcome, PromptSection, TestRun
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
#: At most this many notes are taken from one plugin per call.
MAX_NOTES_PER_PLUGIN = 100
_ERROR_LINE_CHARS = 200


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
    """One run's guard; created by goal-guard's ``resolve_original_goal`` (or its
    ``on_loop_start``, when another plugin answered that hook first)."""

    def __init__(self, loop: Loop, config: GoalGuardConfig) -> None:
        self.loop = loop
        self.config = config
        self.sealed: rec.SealedGoal | None = None
        self.book = NoteBook(max_notes=config.max_notes, default_ttl=config.note_ttl_iterations)
        self.journal = NoteJournal(rec.guard_dir(loop.state_dir) / rec.NOTES_FILE)
        self.violations = 0
        #: Set once :meth:`resolve` ran (goal-guard's answer to ``resolve_original_goal``).
        self.resolved = False
        #: False when another plugin answered ``resolve_original_goal`` first: what
        #: :meth:`resolve` finds can then no longer be put back.
        self._answered = True
        #: The plugin whose answer came first and changed the goal, until that is reported.
        self._preempted_by: str | None = None
        self._stop_message: str | None = None
        #: The goal text last reported as changed in memory: reported once, not every iteration.
        self._reported_change: str | None = None
        #: The working goal goal-guard last set: a different ``loop.goal`` later means another
        #: plugin set it.
        self._working_goal: str | None = None
        #: The plugins that set the working goal since goal-guard last did (``on_event`` sees
        #: their ``loop.working_goal_set`` events: :meth:`working_goal_set`).
        self._working_goal_setters: set[str] = set()
        self._last_shown = 0
        #: Notes dropped over ``max_notes`` since the last prompt.
        self._evicted = 0
        #: Keys of the notes about a whole failing run (the runner named no tests): few, so
        #: superseding them never scans every note.
        self._run_note_keys: set[str] = set()

    # --- sealing (resolve_original_goal) -------------------------------------------------------

    def resolve(self, stored: str) -> str | None:
        """goal-guard's answer to ``resolve_original_goal``: the original goal this run must
        carry (``stored`` when it is right), sealed; None only when there is no goal to guard
        (a legacy state file without one). Loads the notes of a resumed run."""
        self.resolved = True
        if not self.loop.resumed:
            self._seal(stored, "cli")
            return stored
        return self._resolve_resumed(stored)

    def _seal(self, text: str, sealed_from: str, *, keep_notes: bool = False) -> None:
        # the loop's own id (loop.run_id) where it has one: a resume of the same loop then
        # knows its record even if loop-state.md was not written with RUN_KEY before a kill
        run_id = self.loop.run_id or secrets.token_hex(8)
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
            ev.SEALED,
            sealed_from=sealed_from,
            chars=len(text),
            sha256=self.sealed.sha256,
            record=str(rec.guard_dir(self.loop.state_dir)),
        )

    def _resolve_resumed(self, stored: str) -> str | None:
        loop = self.loop
        read = rec.load(loop.state_dir)
        run_id = loop.get_value(RUN_KEY)
        if read.repaired_files:
            loop.emit(
                ev.RECORD_REPAIRED, files=list(read.repaired_files), problems=list(read.problems)
            )
        sealed = read.sealed
        if not isinstance(run_id, str) and sealed is not None and sealed.run_id == loop.run_id:
            run_id = sealed.run_id  # this loop's record: loop-state.md lost goal-guard's key
            loop.set_value(RUN_KEY, run_id)
        if sealed is not None and isinstance(run_id, str) and sealed.run_id == run_id:
            self.sealed = sealed
            self._load_notes()
            if stored != sealed.text:
                self._changed(
                    stored,
                    sealed.text,
                    "loop-state.md has no original_goal"
                    if not stored
                    else "loop-state.md's original_goal differs from the sealed goal "
                    "(edited on disk while the loop was stopped)",
                )
            return sealed.text
        if isinstance(run_id, str):  # this loop was sealed, but its record is gone or damaged
            self._violation(
                found="",
                expected=stored,
                source="guard_record",
                detail="goal-guard's record of this loop is "
                + ("damaged: " + "; ".join(read.problems) if read.problems else "missing")
                + "; resealed from loop-state.md",
                where="resume",
                action="resealed",
            )
        elif sealed is not None:
            loop.emit(
                ev.RECORD_REPLACED, why="the record belongs to another run in this state directory"
            )
        return self._adopt(stored, trusted=isinstance(run_id, str))

    def _written_by_loopctl(self) -> bool:
        """Whether loop-state.md was started by loopctl (it records its version; the bash
        predecessor did not), whose engine captures original_goal before any note exists."""
        from loopctl import SavedRun, StateError

        try:
            return bool(SavedRun(self.loop.state_dir).loop_state().loopctl_version)
        except StateError:
            return False

    def _adopt(self, stored: str, *, trusted: bool) -> str | None:
        """No record of this loop: take the goal from loop-state.md. A loopctl-era (or guarded)
        original_goal is taken as it is; a bash-era one, or a bash-era goal when there is no
        original_goal, has the sections the bash tool synthesized into it removed."""
        loop = self.loop
        field = "original_goal" if stored else "goal"
        if stored and (trusted or self._written_by_loopctl()):
            if trusted:  # the same run, only its goal record was lost: keep its notes
                self._load_notes()
            self._seal(stored, "state_file", keep_notes=trusted)
            return stored
        recovery = strip_synthesized_sections(stored or loop.goal)
        text = recovery.text
        if not text.strip():
            loop.emit(
                ev.LEGACY_UNRECOVERABLE,
                detail="loop-state.md has neither original_goal nor a goal to recover it from",
            )
            return None
        recovered = recovery.changed or not stored
        if recovered:
            loop.emit(
                ev.LEGACY_RECOVERED,
                field=field,
                removed=list(recovery.removed),
                removed_chars=recovery.removed_chars,
                chars=len(text),
                sha256=rec.goal_digest(text),
            )
        self._seal(text, "legacy" if recovered else "state_file")
        return text

    def _load_notes(self) -> None:
        bad, problems = self.journal.read_into(self.book)
        self._run_note_keys = {k for k in self.book.entries if k.startswith(RUN_NOTE_PREFIX)}
        if bad or problems:
            self.loop.emit(ev.NOTES_JOURNAL_DAMAGED, skipped_lines=bad, problems=problems[:5])

    # --- on_loop_start -------------------------------------------------------------------------

    def _changed(self, found: str, expected: str, state_file_detail: str) -> None:
        """The run carries ``found`` where the sealed goal is ``expected``: a state file edited
        on disk (put back by goal-guard's answer), or another plugin's earlier answer."""
        if self._preempted_by is not None:
            self._violation(
                found=found,
                expected=expected,
                source="plugin",
                plugin=self._preempted_by,
                detail="answered resolve_original_goal before goal-guard and changed the "
                "original goal; the prompt keeps the sealed goal",
                where="resolve_original_goal",
                action="unrepaired",
            )
            self._preempted_by = None
        else:
            self._violation(
                found=found,
                expected=expected,
                source="state_file",
                detail=state_file_detail,
                where="resume",
                action="repaired" if self._answered else "unrepaired",
            )
        if not self._answered:
            self._reported_change = found  # check() need not report it again

    def start(self, preempted_by: str | None = None) -> None:
        """At ``on_loop_start``: the goal is fixed now. When another plugin answered
        ``resolve_original_goal`` before goal-guard, seal (or verify) what the run carries and
        report what can no longer be undone; ``preempted_by`` names that plugin when its answer
        changed the goal (``on_event`` saw the ``loop.original_goal_restored`` it caused).
        Then write the working goal."""
        if not self.resolved:
            current = self.loop.original_goal
            self._answered = False
            self._preempted_by = preempted_by
            self.resolve(current)
            if self._preempted_by is not None:  # sealed what the other plugin's answer left
                self._violation(
                    found=current,
                    expected=current,
                    source="plugin",
                    plugin=self._preempted_by,
                    detail="answered resolve_original_goal before goal-guard and changed the "
                    "original goal; sealed as found",
                    where="resolve_original_goal",
                    action="unrepaired",
                )
                self._preempted_by = None
        self.sync_working_goal()

    # --- checking ------------------------------------------------------------------------------

    def _violation(
        self,
        *,
        found: str,
        expected: str,
        source: str,
        detail: str,
        where: str,
        action: str,
        plugin: str | None = None,
    ) -> None:
        self.violations += 1
        data: dict[str, Any] = {
            "source": source,
            "detail": detail,
            "action": action,
            "where": where,
            "found_chars": len(found),
            "found_sha256": rec.goal_digest(found),
            "expected_chars": len(expected),
            "expected_sha256": rec.goal_digest(expected),
        }
        if plugin:
            data["plugin"] = plugin
        self.loop.emit(ev.VIOLATION, **data)
        if self.config.on_violation == "stop" and self._stop_message is None:
            self._stop_message = f"the original goal was changed ({source}: {detail}); {action}"

    def check(self, where: str) -> str | None:
        """The goal the run carries when it is not the sealed one (else None).

        Through the public API the original goal cannot change after ``resolve_original_goal``,
        so this catches only a write to the engine's private state (or an engine bug). It cannot
        be undone here: the prompt keeps the sealed goal (:meth:`police`) and ``loopctl
        resume`` repairs loop-state.md. Reported once per changed text. One string comparison."""
        sealed = self.sealed
        if sealed is None:
            return None
        current = self.loop.original_goal
        if current == sealed.text:
            return None
        if current != self._reported_change:
            self._reported_change = current
            self._violation(
                found=current,
                expected=sealed.text,
                source="unknown",
                detail="the original goal changed in memory after it was resolved; the prompt "
                "keeps the sealed goal and `loopctl resume` repairs loop-state.md",
                where=where,
                action="unrepaired",
            )
        return current

    # --- the prompt ----------------------------------------------------------------------------

    def notes_section(self) -> PromptSection | None:
        from loopctl import PromptSection

        budget = self.config.notes_budget_chars
        rendered = self.book.render(budget)
        self._last_shown = rendered.shown
        self.loop.emit(
            ev.NOTES,
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
        from loopctl import PromptSection

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
                action="resealed",
            )
        if not goals:
            self._violation(
                found="",
                expected=sealed.text,
                source="plugin",
                plugin="a compose_prompt wrapper",
                detail="the 'Your Goal' prompt section was missing; put back",
                where="compose_prompt",
                action="resealed",
            )
        goal = PromptSection(GOAL_TITLE, sealed.text, priority=100, protected=True, source=NAME)
        return [goal, *others]

    # --- notes ---------------------------------------------------------------------------------

    def _test_outcome(
        self, record: IterationRecord, test_run: TestRun | None
    ) -> TestOutcome | None:
        if test_run is None:
            return None  # no tests ran this iteration
        failing = frozenset(record.failing_tests) if record.failing_tests else None
        return TestOutcome(passed=record.tests_passed, failing=failing)

    def _derive_test_notes(self, record: IterationRecord, run: TestRun, iteration: int) -> None:
        if record.tests_passed or run.passed:
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

    def collect(
        self, record: IterationRecord | None, test_run: TestRun | None = None
    ) -> Decision | None:
        """After an iteration (with its own test run, None when the tests did not run) or a
        restart (no record): gather the notes, expire the resolved ones, persist, and keep the
        working goal in step."""
        iteration = self.loop.iteration
        before = len(self.book)
        outcome = None
        if record is not None:
            outcome = self._test_outcome(record, test_run)
            if self.config.test_notes and outcome is not None and test_run is not None:
                self._derive_test_notes(record, test_run, iteration)
        self._plugin_notes(iteration)
        gone = self.book.expire(iteration, outcome)
        evicted = self.book.evict_over_cap()
        changes = self.book.take_changes()
        compacted = self.journal.append(changes, self.book)
        self._evicted += len(evicted)  # reported with the next prompt's notes event
        if gone:
            self.loop.emit(
                ev.NOTES_EXPIRED,
                resolved=len(gone),
                evicted=len(evicted),
                notes=len(self.book),
                examples=[f"{key} ({why})" for key, why in gone[:3]],
            )
        if compacted:
            self.loop.emit(ev.NOTES_COMPACTED, notes=len(self.book))
        if changes or len(self.book) != before or self.loop.goal != self._working_goal:
            self.sync_working_goal()
        if self._stop_message is not None:
            from loopctl import Decision, StopStatus

            return Decision.stop("goal_violation", self._stop_message, status=StopStatus.PLUGIN)
        return None

    def sync_working_goal(self) -> None:
        """``goal`` in loop-state.md: the original goal, then the notes under their heading."""
        sealed = self.sealed
        if sealed is None:
            return
        body = self.book.render(self.config.notes_budget_chars).body
        text = sealed.text if not body else f"{sealed.text}\n\n{NOTES_HEADING}\n\n{body}"
        current = self.loop.goal
        if current != text:
            if self._working_goal is not None and current != self._working_goal:
                setters = sorted(self._working_goal_setters) or ["?"]
                self.loop.emit(ev.WORKING_GOAL_RESTORED, plugins=setters)
            self.loop.set_working_goal(text, source=NAME)
        self._working_goal = text
        self._working_goal_setters.clear()

    def working_goal_set(self, source: object) -> None:
        """A ``loop.working_goal_set`` event of this run (from ``on_event``): remember which
        plugin set the working goal, to name it if goal-guard has to put the goal back."""
        if source != NAME:
            self._working_goal_setters.add(str(source or "?"))

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
