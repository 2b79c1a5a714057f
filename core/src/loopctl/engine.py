"""The loop engine: compose the prompt, run the agent, run the tests, record, decide.

The engine knows nothing about any particular plugin. Plugins take part through the hooks in
:mod:`loopctl.hookspecs` and act on the run through :class:`loopctl.Loop`, the object every hook
receives, which the engine drives through the :class:`loopctl.loop.LoopDriver` protocol.
All state lives in the state directory (:mod:`loopctl.state`), rewritten atomically, so a loop
killed at any point can be continued with ``loopctl resume``, losing at most the iteration that
was in flight.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import queue
import signal
import stat
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import attrs
import pluggy

from loopctl import records
from loopctl import state as st
from loopctl._version import __version__
from loopctl.agents.base import AgentAdapter, TurnRequest
from loopctl.agents.supervisor import Supervision, run_turn
from loopctl.approaches import ApproachBook, same_approach
from loopctl.config import LoadedConfig, context_window_for
from loopctl.ending import RecordedEnd, recorded_after, recorded_end
from loopctl.guard import heard, loop_pid
from loopctl.history import History, RunTotals, load_history
from loopctl.loop import Loop, LoopOutcome, ReportSection, Restart, RunFacts
from loopctl.model import (
    ACTION_STRENGTH,
    EXIT_CODES,
    Action,
    AgentMessage,
    AgentSummary,
    CompletionVeto,
    Decision,
    ErrorKind,
    Event,
    IterationEnd,
    IterationRecord,
    NotAgentsFault,
    PromptSection,
    StopStatus,
    TestRun,
    TurnOutcome,
    TurnResult,
)
from loopctl.pluginhost import HookCall, HookFailure, PluginHost, print_failure
from loopctl.procgroup import (
    deferred_interrupts,
    end_escaped,
    end_orphaned_group,
    interrupt,
    process_start_time,
    set_subreaper,
)
from loopctl.prompt import ComposedPrompt, compose
from loopctl.redaction import redact, redact_data
from loopctl.report import REPORT_ITERATIONS, RunSummary, reported, write_report
from loopctl.stash import Stash
from loopctl.state.journal import jsonl_text
from loopctl.stuck import Escalation, StuckDetector, is_infrastructure_failure
from loopctl.terminal import sanitize
from loopctl.testbroken import TEST_COMMAND_BROKEN, agent_may_have_caused, broken_test_command
from loopctl.testcmd import run_test_command
from loopctl.testfirst import (
    ALREADY_PASSING,
    FLAKY_CHECK,
    MAX_FLAKY_NAMED,
    already_passing_message,
    flaky_text,
    worth_a_rerun,
)
from loopctl.withhold import child_environment, set_withheld
from loopctl.workspace import PendingSnapshot, Snapshot, Workspace

#: Engine decisions carry this source so the record says who decided.
ENGINE = "engine"
#: How long to wait out a rate limit when the CLI names no reset time, by attempt.
RATE_LIMIT_BACKOFF_S = (30.0, 60.0, 120.0, 300.0, 600.0)
#: The reason of the engine's decision to try a rate-limited iteration again.
RATE_LIMIT_RETRY = "rate_limit_retry"
#: Statuses of a loop that did not end: ``loopctl run`` refuses to start over one of them.
UNFINISHED = ("running", "interrupted", "restarting", StopStatus.DISK_FULL.value)
#: ``errno`` values that mean the disk, or the user's quota on it, is full.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: The signals that stop a loop gracefully (status ``interrupted``), and how the outcome names
#: each. One the process ignores when the loop starts (``nohup``, a background job) stays ignored.
STOP_SIGNALS: dict[int, str] = {
    signal.SIGINT: "Ctrl-C (SIGINT)",
    signal.SIGTERM: "SIGTERM",
    signal.SIGHUP: "SIGHUP (the terminal closed)",
    signal.SIGQUIT: "SIGQUIT",
}
#: A plugin hook still running at the wall-clock limit is stopped then, or this long after it
#: started if that is later (a hook called as the loop winds down gets this much time).
HOOK_GRACE_S = 2.0
#: What the watchdog thread sends the main thread to stop such a hook. Its default action is
#: to ignore it, so one that arrives after the loop put the old handler back does no harm.
_WATCHDOG_SIGNAL = signal.SIGURG


class StopSignal(KeyboardInterrupt):
    """A stop signal, raised in the main thread: the loop ends as ``interrupted``. A
    KeyboardInterrupt, so everything that ends processes on Ctrl-C does so on it too."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class HookOverran(KeyboardInterrupt):
    """Raised in a plugin hook still running at the wall-clock limit: the loop ends as
    ``wall_clock`` and names the hook (``plugin.hung``)."""

    def __init__(self, call: HookCall) -> None:
        super().__init__(f"plugin {call.plugin!r}: {call.hook}")
        self.call = call


class LoopError(Exception):
    """A problem that stops a run before it starts (bad goal, state directory in use, …)."""


class DiskFullError(LoopError):
    """The state directory's disk is full before the loop could start."""

    #: The stop status it stands for: the CLI says it the way it ends a run with it.
    status = StopStatus.DISK_FULL.value

    #: The process exit code the CLI uses for it (the ``disk_full`` status's).
    exit_code = EXIT_CODES[StopStatus.DISK_FULL.value]


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota) is full."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def disk_full_message(exc: OSError, *, resumable: bool = True) -> str:
    """One line for the user: what could not be written, and what to do (``resume`` when the
    loop's state was saved, else ``run`` again)."""
    what = f"cannot write {exc.filename}" if exc.filename else "cannot write the state files"
    then = "continue the loop with `loopctl resume`" if resumable else "start it with `loopctl run`"
    return (
        f"the disk is full: {what} ({exc.strerror or os.strerror(exc.errno or 0)}); free some "
        f"space, then {then}"
    )


class BackgroundWriter:
    """Rewrites the derived state files (loop-state.md, progress.md, error-summary.json, the
    plugins' files) and runs the plugins' background tasks in order on one thread, so their
    fsyncs never hold up an iteration.

    Work runs while the loop waits for the agent or the tests (``waiting`` is set): a thread
    doing Python work beside the loop's own would contend with it for the interpreter lock and
    slow every step of the loop's bookkeeping. What is submitted while the loop is busy is
    held back, not queued, until the loop waits (:meth:`release`): queueing it would wake the
    writer's thread only for it to go back to sleep, taking the interpreter lock from the loop
    on the way (a stall of a whole time slice on a busy machine). Each rewrite is still
    atomic, so a reader or a crash only ever sees a complete old or new version. The journal
    ``iterations.jsonl`` is appended synchronously; it alone decides what ``loopctl resume``
    continues from, so a kill loses at most the iteration in flight.
    """

    def __init__(
        self, name: str = "loopctl-state-writer", waiting: threading.Event | None = None
    ) -> None:
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self.errors: list[str] = []
        #: The first write that failed because the disk is full (the engine stops on it).
        self.disk_full: OSError | None = None
        self._latest: dict[object, Callable[[], object]] = {}
        self._latest_lock = threading.Lock()
        #: Submitted while the loop was busy: queued by :meth:`release`, in order.
        self._held: list[Callable[[], object]] = []
        self._held_lock = threading.Lock()
        #: Set while the loop waits (and while flushing): the writer may work.
        self.waiting = waiting or threading.Event()
        if waiting is None:
            self.waiting.set()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, write: Callable[[], object], *, key: object = None) -> None:
        """Queue ``write``. Writes with the same ``key`` (a file's path) that are still
        waiting collapse into the latest one: a file rewritten twice before the writer got to
        it is written, and fsynced, once."""
        if key is None:
            self._enqueue(write)
            return
        with self._latest_lock:
            self._latest[key] = write
        # Queued each time (the entries after the first find nothing left to write), so a
        # Ctrl-C between these two steps cannot leave a file marked as queued that is not.
        self._enqueue(lambda: self._write_latest(key))

    def _enqueue(self, item: Callable[[], object]) -> None:
        if self.waiting.is_set():
            self.release()  # what was held goes first
            self._queue.put(item)
            return
        with self._held_lock:
            self._held.append(item)
        if self.waiting.is_set():  # the loop began to wait meanwhile: do not leave it held
            self.release()

    def release(self) -> None:
        """Queue what was submitted while the loop was busy (call it once ``waiting`` is set)."""
        if not self._held:
            return
        with self._held_lock, deferred_interrupts():  # a Ctrl-C here would lose an item
            held, self._held = self._held, []
            for item in held:
                self._queue.put(item)

    def _write_latest(self, key: object) -> None:
        with self._latest_lock:
            write = self._latest.pop(key, None)
        if write is not None:
            write()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every submitted write is done (at most ``timeout_s``); True when done.

        It waits for a marker queued behind them, never for the queue's count of unfinished
        work: a Ctrl-C that interrupts a ``put`` (in the loop's thread, where KeyboardInterrupt
        is raised) can leave an item queued without waking the writer or counted wrong; the
        marker's own ``put`` wakes it, and the items are done in order."""
        held = not self.waiting.is_set()
        self.waiting.set()
        try:
            self.release()
            done = threading.Event()
            self._queue.put(done.set)
            return done.wait(timeout_s)
        finally:
            if held:
                self.waiting.clear()

    def close(self) -> None:
        self.flush()
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while True:
            write = self._queue.get()
            try:
                if write is None:
                    return
                self.waiting.wait()
                write()
            except Exception as exc:  # noqa: BLE001 - reported by the engine, never fatal
                if isinstance(exc, OSError) and is_disk_full(exc):
                    self.disk_full = self.disk_full or exc  # said by loop.end, not as an error
                else:
                    self.errors.append(f"{type(exc).__name__}: {exc}")


class Engine:
    """Runs one loop. Build it with :func:`loopctl.launch.prepare` (which loads config and
    plugins and selects the agent), then call :meth:`run`."""

    def __init__(
        self,
        *,
        loaded: LoadedConfig,
        host: PluginHost,
        agent: AgentAdapter,
        workdir: Path,
        state_dir: Path,
        goal: str | None,
        resume: bool = False,
        on_event: Callable[[Event], None] | None = None,
        supervision: Supervision | None = None,
        settings: st.RunSettings | None = None,
        settings_changed: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        self.loaded = loaded
        self.host = host
        self.agent = agent
        self.workdir = workdir
        self.state_dir = state_dir
        self.resumed = resume
        #: What this run goes by, recorded in loop-state.md from its first write on.
        self.settings = settings
        #: What ``resume`` was told to change (``loop.resume``'s ``changed``).
        self.settings_changed = dict(settings_changed or {})
        #: Called with every event as it is recorded (the CLI's live view); plugins use on_event.
        self.event_listener = on_event
        #: Called with every message of the agent's turn as it is parsed, before the plugins'
        #: on_agent_message (the CLI's view shows what the agent does); never stops the loop.
        self.message_listener: Callable[[AgentMessage], None] | None = None
        config = loaded.config
        set_withheld(config.withhold_env)  # before anything is written: their values are masked
        self.max_iterations = config.limits.max_iterations
        #: Every record of the loop, the recent ones in memory (``loop.history``).
        self.history = History(state_dir / st.ITERATIONS_FILE)
        #: The running summary of the records, saved with loop-state.md (``summary``).
        self.totals = RunTotals()
        #: Decisions made while the agent ran (``on_agent_message``), weighed after the iteration.
        self.pending: list[Decision] = []
        self.report_sections: list[ReportSection] = []
        self.last_test_run: TestRun | None = None
        self.last_turn: TurnResult | None = None
        self.current_record: IterationRecord | None = None
        #: Plugins' re-runs of the iteration whose test run is ``last_test_run``.
        self.reruns: list[TestRun] = []
        self.outcome: LoopOutcome | None = None
        self.workspace = Workspace(
            workdir,
            ignore=_ignored_paths(workdir, state_dir) + tuple(getattr(agent, "private_paths", ())),
        )
        self.stash = Stash()
        self.facts = RunFacts(
            workdir=workdir,
            state_dir=state_dir,
            resumed=resume,
            agent_name=agent.name,
            agent_model=agent.settings.model,
            test_command=config.test_cmd or "",
            completion_signal=config.completion_signal,
            max_restarts=config.limits.max_restarts,
            workspace=self.workspace,
        )
        self.loop = Loop(self)
        self.stuck = StuckDetector(window=config.stuck.window, exempt=config.stuck.exempt)
        self.approaches = ApproachBook()
        #: The tests before the first turn, as a record of iteration 0 (``test_first``): what
        #: the first turn's failing tests are compared with (one fewer is progress).
        self.before_first_turn: IterationRecord | None = None
        self._supervision = supervision
        self._plugin_configs: dict[str, Any] = {}
        self._config_classes: dict[str, tuple[Any, str]] = {}
        self._in_event_hook = False
        self._lock = st.StateLock(state_dir)
        self._events: st.JsonlAppender | None = None
        self._iterations: st.JsonlAppender | None = None
        self._crashes = 0
        #: True between before_iteration and the after_iteration that closes it.
        self._iteration_open = False
        self.last_snapshot: Snapshot | None = None
        self._writer: BackgroundWriter | None = None
        self._tasks: BackgroundWriter | None = None
        #: Set while the loop waits for the agent or the tests: background work may run then.
        self._waiting = threading.Event()
        #: loop-state.md changed since it was last rendered (:meth:`_write_state_later`).
        self._state_stale = False
        #: running.json: the agent's or the test command's process group while it runs.
        self._running: st.RunningRecord | None = None
        self._waiting.set()
        self._opened = False
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopctl-snapshot")
        #: The last rows of iterations.jsonl, already unstructured, for progress.md.
        self._recent_rows: deque[dict[str, Any]] = deque(maxlen=20)
        self._tokens_total = 0
        self._cost_total = 0.0
        #: Some of the cost was estimated from token counts (loopctl.pricing).
        self._cost_estimated = False
        #: Said once per run: why turns with tokens had no cost while a cost budget is set.
        self._unpriced_said = False
        #: Whether the run's report was written when it ended (a full disk may prevent it).
        self.report_written = False
        #: The first write that failed because the disk is full: the loop stops at the next
        #: step (:meth:`_stop_if_disk_full`), and says so once.
        self._disk_full: OSError | None = None
        self._started_monotonic = time.monotonic()
        self._wall_clock_used_before = 0.0
        #: The first stop signal received, and whether the loop is ending (then one only cuts
        #: short a plugin hook that holds up the end).
        self._stop_signal: int | None = None
        self._finishing = False
        #: The hook the watchdog found running past the wall clock and asked to stop.
        self._overrunning: HookCall | None = None
        #: How the loop being resumed had ended, recorded in its journals but not yet in its
        #: loop-state.md (its loopctl was killed in between): ``resume`` closes it, running
        #: nothing (:meth:`_load_previous_run`).
        self.ended_before: RecordedEnd | None = None
        self.state = self._initial_state(goal)

    # --- setup ---------------------------------------------------------------------------------

    def _initial_state(self, goal: str | None) -> st.LoopState:
        config = self.loaded.config
        if self.resumed:
            return st.LoopState(goal="", original_goal="")  # read from disk in _open_state
        if goal is None or not goal.strip():
            raise LoopError("the goal is empty: give it as an argument or with --goal-file FILE")
        _check_goal(goal, config.prompt.budget_chars)
        # The goal goes to the agent's model and into every state file: a secret in it is
        # redacted once, here, so the sealed goal, the state and the prompt all agree.
        goal = redact(goal)
        if config.test_cmd and redact(config.test_cmd) != config.test_cmd:
            self.loaded.warnings.append(
                "the test command holds what looks like a secret; it is stored redacted, so "
                "`loopctl resume` cannot run it as given: pass the secret in an environment "
                "variable instead"
            )
        return st.LoopState(
            goal=goal,
            original_goal=goal,  # captured once, before the first state write
            run_id=uuid.uuid4().hex,
            session_mode=config.session,
            agent=self.agent.name,
            test_cmd=config.test_cmd or "",
            max_iterations=config.limits.max_iterations,
            workdir=str(self.workdir),
            loopctl_version=__version__,
            settings=self.settings,
        )

    # --- what the Loop reads and does (the LoopDriver protocol) ----------------------------------

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.host.hook

    def context_window(self, model: str | None) -> int | None:
        turn = self.last_turn
        if model is None and turn is not None and turn.context_window:
            return turn.context_window
        model = model or (turn.model if turn else None) or self.agent.settings.model
        return context_window_for(model, self.loaded.config.models)

    def add_failed_approach(self, text: str) -> bool | None:
        """Add ``text`` (True), or update in place the entry it repeats but for the iterations
        it names (None: a producer's growing line is one entry); False when nothing changed."""
        known = self.state.failed_approaches
        for index, entry in enumerate(known):
            if same_approach(entry, text):
                if entry == text:
                    return False
                known[index] = text
                return None
        known.append(text)
        return True

    def _note_approach(
        self, record: IterationRecord, test_run: TestRun, before: Snapshot | None, turn: TurnResult
    ) -> None:
        """Put a failed iteration's change (or that it changed nothing) into the failed
        approaches (:mod:`loopctl.approaches`)."""
        if test_run.passed or is_infrastructure_failure(record):
            return
        previous = next(
            (r for r in reversed(self.history) if not is_infrastructure_failure(r)),
            self.before_first_turn,
        )
        diff = ""
        if record.changed_files and self.last_snapshot is not None:
            diff = self.workspace.change_diff(before, self.last_snapshot, record.changed_files)
        update = self.approaches.note(
            record,
            previous,
            failure=_failure_summary(record, test_run) or f"exit code {test_run.exit_code}",
            diff=diff,
            final_text=turn.final_text,
        )
        if update is None:
            return
        old, text = update
        known = self.state.failed_approaches
        updated = old is not None and old in known
        if old is not None and updated:
            known[known.index(old)] = text
        elif text not in known:
            known.append(text)
        else:
            return
        self.emit("loop.failed_approach", text=text[:500], source=ENGINE, updated=updated)

    def annotate(self, key: str, value: Any) -> None:
        if self.current_record is not None:
            self.current_record.annotations[key] = value

    def submit_task(self, task: Callable[[], object]) -> None:
        if self._tasks is None:
            task()
        else:
            self._tasks.submit(task)

    def flush_tasks(self, timeout_s: float | None) -> bool:
        return True if self._tasks is None else self._tasks.flush(timeout_s)

    def add_report_section(self, section: ReportSection) -> None:
        self.report_sections.append(section)

    def plugin_config(self, name: str) -> Any:
        if name not in self._plugin_configs:
            entry = self._config_classes.get(name)
            if entry is None:
                raise KeyError(f"no plugin registered a config section named {name!r}")
            self._plugin_configs[name] = self.loaded.plugin_section(name, entry[0])
        return self._plugin_configs[name]

    def validate_plugin_configs(self) -> None:
        """Structure every enabled plugin's section now, so a bad key fails before the loop."""
        from loopctl.pluginhost import validate_plugin_sections

        self._config_classes, configs = validate_plugin_sections(self.loaded, self.host)
        self._plugin_configs.update(configs)

    def open(self) -> None:
        """Take the state directory: check it, lock it, and load or start the loop's state.

        Called by :func:`loopctl.launch.prepare`, so every problem (a file in the way, another
        loop holding the lock, a corrupt or unfinished state) is reported before a run starts.
        Raises LoopError or StateError with a message for the user; idempotent.
        """
        if self._opened:
            return
        existing = self.state_dir
        while not existing.exists() and existing.parent != existing:
            existing = existing.parent
        if not existing.is_dir():
            what = (
                "is a file"
                if existing == self.state_dir
                else f"cannot be created: {existing} is a file"
            )
            raise LoopError(
                f"the state directory {self.state_dir} {what}; remove it or choose another "
                "with --state-dir"
            )
        try:
            self.state_dir.mkdir(parents=True, exist_ok=True)
            probe = self.state_dir / f".write-test.{os.getpid()}"
            probe.write_text("")
            probe.unlink()
            st.ignore_in_git(self.state_dir, self.workdir)  # git status never lists its files
        except OSError as exc:
            if is_disk_full(exc):
                raise DiskFullError(disk_full_message(exc)) from None
            raise LoopError(
                f"cannot write the state directory {self.state_dir}: {exc.strerror or exc}; "
                "choose another with --state-dir"
            ) from exc
        self._lock.acquire()
        try:
            st.remove_stale_temp_files(self.state_dir)  # left by a loop killed mid-write
            self._end_orphaned_processes()
            if self.resumed:
                self._load_previous_run()
            else:
                self._start_new_run()
        except BaseException:
            self._lock.release()
            raise
        if self.closing:
            self._opened = True  # nothing to start: run() closes the loop
            return
        self.state.pid = loop_pid()
        if self.state.status != "restarting":
            self.state.status = "running"
        # The first durable write, made at once (there is no writer yet), with the run's
        # settings: from here on a kill leaves a loop that `loopctl resume` can continue.
        try:
            self._write_state()
            self._write_progress()  # not the last run's word (how it ended, or that it died)
        except OSError as exc:
            self._lock.release()
            if not is_disk_full(exc):
                raise
            resumable = self.resumed and (self.state_dir / st.LOOP_STATE_FILE).exists()
            raise DiskFullError(disk_full_message(exc, resumable=resumable)) from None
        self._events = st.JsonlAppender(self.state_dir / st.EVENTS_FILE)
        self._iterations = st.JsonlAppender(self.state_dir / st.ITERATIONS_FILE)
        self._running = st.RunningRecord(self.state_dir)
        self._writer = BackgroundWriter(waiting=self._waiting)
        self._tasks = BackgroundWriter("loopctl-plugin-tasks", waiting=self._waiting)
        (self.state_dir / st.LOGS_DIR).mkdir(exist_ok=True)
        self.last_snapshot = self.workspace.snapshot()
        self._opened = True

    def _end_orphaned_processes(self) -> None:
        """The lock is ours now, so the loop that wrote the state is gone: end what it left
        running before another agent or test run starts (:func:`end_left_running`)."""
        self.loaded.warnings.extend(end_left_running(self.state_dir))

    def _start_new_run(self) -> None:
        state_file = self.state_dir / st.LOOP_STATE_FILE
        if state_file.exists():
            try:
                old = st.read_loop_state(state_file).status
            except st.StateError as exc:
                raise LoopError(
                    f"{exc}; start over with --fresh-state (the old state is discarded)"
                ) from exc
            if old in UNFINISHED:
                raise LoopError(self._unfinished_message(st.read_loop_state(state_file)))
        self._set_aside_previous_run(ended=state_file.exists())
        self.state.start_commit = self.workspace.head()
        self.state.started_at = round(time.time(), 3)

    def _unfinished_message(self, state: st.LoopState) -> str:
        """Why ``run`` refuses to start over a loop whose state says it did not end: one that
        ended but was killed before going through its end is closed by ``resume``."""
        ended = recorded_end(self.state_dir, state)
        if ended is not None and not ended.continued:
            return (
                f"{self.state_dir} holds a loop that had ended ({ended.status}, decided by "
                f"iteration {ended.iterations}) when its loopctl process was killed, before it "
                "went through its end: `loopctl resume` closes it (no agent, no tests), or "
                "start over with --fresh-state"
            )
        return (
            f"{self.state_dir} holds an unfinished loop (status {state.status!r}); continue it "
            "with `loopctl resume`, or start over with --fresh-state"
        )

    def _set_aside_previous_run(self, *, ended: bool) -> None:
        """A new run never appends to an earlier loop's journals nor shares its logs, restart
        archives and report: they are moved aside (``ended``: that loop's loop-state.md, which
        says how it ended, with them; else its state file was deleted)."""
        aside = st.set_aside_previous_run(self.state_dir, ended=ended)
        if aside is not None:
            where, names = aside
            what = (
                "an earlier loop"
                if ended
                else f"an earlier loop's files but no {st.LOOP_STATE_FILE}"
            )
            self.loaded.warnings.append(
                f"{self.state_dir} held {what}: moved {', '.join(names)} to {where}, so this "
                "run's journals, logs and report are its own"
            )

    def _load_previous_run(self) -> None:
        state_file = self.state_dir / st.LOOP_STATE_FILE
        if not state_file.exists():
            raise LoopError(f"nothing to resume: {state_file} does not exist")
        self.state = st.read_loop_state(state_file)
        died = self.state.status in ("running", "restarting")  # the lock is ours: its loop died
        if self.state.status == StopStatus.COMPLETE.value:
            raise LoopError(
                f"the loop in {self.state_dir} is complete; start a new one with `loopctl run`"
            )
        ended = recorded_end(self.state_dir, self.state)  # before this run changes the state
        # What the journal holds, from the summary saved with the state and the records
        # appended after it: never the whole journal (unless the summary must be rebuilt).
        loaded = load_history(self.state_dir / st.ITERATIONS_FILE, self.state.summary)
        self.loaded.warnings.extend(loaded.problems)
        if loaded.note:
            self.loaded.warnings.append(loaded.note)
        self.history, self.totals = loaded.history, loaded.totals
        self.state.iteration = self.totals.last_iteration  # redo the one in flight
        self._recent_rows.extend(loaded.rows)
        self._wall_clock_used_before = self.state.wall_clock_used_s + self._unsaved_time()
        self.stuck.resume(
            self.totals.stuck_streak,
            self.totals.stuck_previous,
            self.state.stuck_level,
            self.history[-100:],
        )
        if ended is not None and not ended.continued:
            self.ended_before = ended
            if self.closing:  # closed as it is: nothing of this run is taken
                self.max_iterations = self.state.max_iterations or self.max_iterations
                return
            self.loaded.warnings.append(
                f"this loop had already ended ({ended.status}, decided by iteration "
                f"{ended.iterations}) "
                "when its loopctl process was killed, before it went through its end; resume "
                "goes through that end now, running no agent and no tests"
            )
        elif died:
            self.loaded.warnings.append(
                "the previous run of this loop ended without finishing (killed, or a crash)"
                + (f" after iteration {self.state.iteration}" if self.state.iteration else "")
                + f"; resuming with iteration {self.state.iteration + 1}"
            )
        if self.loaded.origins.get("limits.max_iterations", "default") == "default":
            self.max_iterations = self.state.max_iterations or self.max_iterations
        elif self.max_iterations != self.state.max_iterations:
            self.state.iteration_limit_cut = None  # the limit resume was given replaces any cut
        self.state.max_iterations = self.max_iterations
        self._tokens_total = self.totals.tokens
        self._cost_total = self.totals.cost_usd
        self._cost_estimated = self.totals.costs_estimated > 0
        self._take_settings()
        self.facts = attrs.evolve(self.facts, test_command=self.state.test_cmd)

    def _unsaved_time(self) -> float:
        """The wall-clock time the loop spent after its loop-state.md was last written, to the
        end of its last recorded iteration (a kill right after it lost the state's own count):
        a loop that ended on its wall clock stays ended."""
        last = self.history[-1] if self.history else None
        if last is None or not self.state.updated_at or not recorded_after(last, self.state):
            return 0.0
        unsaved = last.started_at + last.duration_s - self.state.updated_at
        return unsaved if math.isfinite(unsaved) and unsaved > 0 else 0.0

    def _take_settings(self) -> None:
        """A resumed loop goes by the settings it was prepared with (the recorded ones, and
        what ``resume`` was told to change); a new agent starts a new session."""
        config = self.loaded.config
        if self.settings is not None:
            self.state.settings = self.settings
        self.state.test_cmd = config.test_cmd or self.state.test_cmd
        if self.state.session_mode == "fresh" and config.session == "resume":
            self.state.session_id = None  # a fresh-session run's sessions were not kept
        self.state.session_mode = config.session
        if self.state.agent and self.state.agent != self.agent.name:
            self.state.session_id = None
        self.state.agent = self.agent.name

    # --- events ------------------------------------------------------------------------------

    def emit(self, type: str, **data: Any) -> Event:
        event = Event(
            type=type, ts=round(time.time(), 3), data=data, iteration=self.state.iteration or None
        )
        # Redacted once, here: the journal, the views and every plugin see it. The journal's
        # line is looked at first; only a line with something to hide has its data redacted
        # (and the line again, from that data).
        line = jsonl_text(event.to_json())
        text: str | None = line
        if redact(line) != line:
            event, text = attrs.evolve(event, data=redact_data(data)), None
        if self._events is not None:
            try:
                self._events.append(event.to_json(), clean_text=text)
            except OSError as exc:  # not here, in the middle of a hook: at the next step
                if not is_disk_full(exc):
                    raise
                self._disk_full = self._disk_full or exc
        if self.event_listener is not None:
            self.event_listener(event)
        if not self._in_event_hook:
            self._in_event_hook = True
            try:
                self.host.hook.on_event(event=event, loop=self.loop)
            finally:
                self._in_event_hook = False
        return event

    def _on_plugin_failure(self, failure: HookFailure) -> None:
        if failure.exception is not None and is_disk_full(failure.exception):
            assert isinstance(failure.exception, OSError)
            self._disk_full = self._disk_full or failure.exception  # the loop stops on it
            return
        print_failure(failure)
        self.emit(
            "plugin.error",
            plugin=failure.plugin,
            hook=failure.hook,
            error=failure.error,
            traceback=failure.traceback,
        )

    # --- the run -------------------------------------------------------------------------------

    def run(self) -> LoopOutcome:
        """Run the loop to its end and return how it ended. A plugin's or an agent's failure
        never escapes; Ctrl-C, SIGTERM, SIGHUP and SIGQUIT end it with status ``interrupted``,
        a plugin hook still running at the wall-clock limit with ``wall_clock``."""
        self.host.error_sink = self._on_plugin_failure
        self.open()
        if self.closing:
            return self._close_ended()
        outcome: LoopOutcome | None = None
        with self._guarded():
            try:
                self.emit(
                    "loop.resume" if self.resumed else "loop.start",
                    goal=self.state.original_goal[:2000],
                    agent=self.agent.name,
                    test_cmd=self.state.test_cmd,
                    session_mode=self.state.session_mode,
                    max_iterations=self.max_iterations,
                    plugins=self.host.enabled_names(),
                    **({"changed": self.settings_changed} if self.resumed else {}),
                )
                for warning in self.loaded.warnings:
                    self.emit("loop.warning", message=warning)
                self._resolve_original_goal()
                self.host.hook.on_loop_start(loop=self.loop)
                outcome = self._carry_out_recorded() or self._iterate()
            except HookOverran as exc:
                outcome = self._hook_overran(exc.call)
            except KeyboardInterrupt:
                by = STOP_SIGNALS.get(self._stop_signal or signal.SIGINT, "a signal")
                outcome = self._outcome(
                    StopStatus.INTERRUPTED.value, "interrupted", f"stopped by {by}"
                )
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                if self._writer is not None:
                    self._write_stale_state()
                    self._writer.flush()  # the first loop-state.md may be on its way
                resumable = (self.state_dir / st.LOOP_STATE_FILE).exists()
                outcome = self._outcome(
                    StopStatus.DISK_FULL.value,
                    StopStatus.DISK_FULL.value,
                    disk_full_message(exc, resumable=resumable),
                )
            finally:
                if outcome is None:  # an engine bug: still leave valid state and a report
                    outcome = self._outcome(
                        StopStatus.AGENT_ERROR.value,
                        "engine_error",
                        "loopctl failed unexpectedly; see the traceback",
                    )
                self._finish(outcome)
        return outcome

    # --- signals, orphans and hooks past the wall clock --------------------------------------------

    @contextmanager
    def _guarded(self) -> Iterator[None]:
        """For the whole run: the stop signals end it gracefully, loopctl is a subreaper (Linux)
        so the agent's and the tests' descendants that leave their group come back to it, and a
        watchdog stops a plugin hook still running at the wall-clock limit."""
        previous_subreaper = set_subreaper(True)
        stop_watchdog = threading.Event()
        watchdog: threading.Thread | None = None
        with ExitStack() as restore:
            if threading.current_thread() is threading.main_thread():
                for signum in STOP_SIGNALS:
                    if signal.getsignal(signum) is not signal.SIG_IGN:
                        restore.enter_context(_handler(signum, self._on_stop_signal))
                restore.enter_context(_handler(_WATCHDOG_SIGNAL, self._on_watchdog_signal))
                watchdog = threading.Thread(
                    target=self._watch_hooks,
                    args=(stop_watchdog,),
                    name="loopctl-hook-watchdog",
                    daemon=True,
                )
                watchdog.start()
            try:
                yield
            finally:
                stop_watchdog.set()
                if watchdog is not None:
                    watchdog.join()
                end_escaped(None, 1.0)  # any that came back after the last turn or test run
                if previous_subreaper is False:
                    set_subreaper(False)

    def _on_stop_signal(self, signum: int, frame: Any) -> None:
        """SIGINT, SIGTERM, SIGHUP, SIGQUIT: the first one stops the loop (after the process
        being started, if one is); later ones, and one while the loop ends, only cut short a
        plugin hook holding up the end: the agent's and the tests' groups are being ended, and
        that must finish for nothing to be left behind."""
        heard(signum)  # for the command's guard (loopctl.guard): the signal came to the loop
        if signum == signal.SIGHUP:
            _leave_the_terminal()
        first = self._stop_signal is None
        if first:
            self._stop_signal = signum
        if (first and not self._finishing) or self.host.running_hook() is not None:
            interrupt(StopSignal(signum))

    def _on_watchdog_signal(self, signum: int, frame: Any) -> None:
        call = self._overrunning
        if call is not None and self.host.running_hook() is call:
            self.host.skip(call.plugin)
            interrupt(HookOverran(call))

    def _watch_hooks(self, stop: threading.Event) -> None:
        """The watchdog thread: at the wall-clock limit, stop the plugin hook the main thread
        is running (:data:`HOOK_GRACE_S`), naming it on stderr, and again if it goes on."""
        limit = self.loaded.config.limits.wall_clock_s
        deadline = self._started_monotonic + (limit - self._wall_clock_used_before)
        if math.isnan(deadline):
            deadline = math.inf
        main = threading.main_thread().ident
        while True:
            now = time.monotonic()
            if now < deadline:
                if stop.wait(min(deadline - now, 3600.0)):
                    return
                continue
            call = self.host.running_hook()
            if (
                call is not None
                and now - call.started >= HOOK_GRACE_S
                and (call.interrupted_at is None or now - call.interrupted_at >= HOOK_GRACE_S)
            ):
                if call.interrupted_at is None:
                    _stderr(
                        f"loopctl: plugin {call.plugin!r} is still running its {call.hook} hook "
                        f"({now - call.started:.0f} s) at the wall-clock limit ({limit:g} s); "
                        "stopping it and the loop"
                    )
                call.interrupted_at = now
                self._overrunning = call
                if main is not None:
                    signal.pthread_kill(main, _WATCHDOG_SIGNAL)
            if stop.wait(0.05):
                return

    def _hook_overran(self, call: HookCall) -> LoopOutcome:
        self._emit_hung(call)
        limit = self.loaded.config.limits.wall_clock_s
        return self._outcome(
            StopStatus.WALL_CLOCK.value,
            "wall_clock",
            f"the run used its whole wall-clock budget ({limit:.0f} s) while plugin "
            f"{call.plugin!r} was still running its {call.hook} hook",
        )

    def _emit_hung(self, call: HookCall) -> None:
        with contextlib.suppress(KeyboardInterrupt):  # another hook stopped on the way: no matter
            self.emit(
                "plugin.hung",
                plugin=call.plugin,
                hook=call.hook,
                running_s=round(time.monotonic() - call.started, 3),
                wall_clock_s=self.loaded.config.limits.wall_clock_s,
            )

    def _cut_short(self, exc: KeyboardInterrupt) -> None:
        """A hook of the loop's end was stopped (a signal, or the watchdog): say which."""
        if isinstance(exc, HookOverran):
            self._emit_hung(exc.call)

    def _resolve_original_goal(self) -> None:
        """Let a plugin that sealed the goal put it back (``resolve_original_goal``)."""
        stored = self.state.original_goal
        caller = self.host.hook.resolve_original_goal
        # Called one implementation at a time, in pluggy's call order, to name the one that
        # answered; each is isolated by the host like any hook call. (Wrappers have nothing to
        # wrap here and are not called.)
        for impl in reversed(caller.get_hookimpls()):
            if impl.wrapper or impl.hookwrapper:
                continue
            text = impl.function(loop=self.loop, stored=stored)
            if text is None:
                continue
            if isinstance(text, str) and text.strip() and text != stored:
                self.state.original_goal = text
                self.emit(
                    "loop.original_goal_restored",
                    source=impl.plugin_name,
                    previous_chars=len(stored),
                    chars=len(text),
                )
            return

    # --- what the loop being resumed recorded but did not carry out ------------------------------

    @property
    def closing(self) -> bool:
        """Whether this run only closes a loop whose ending was recorded whole (``loop.end``):
        it writes no event and calls no hook (:meth:`_close_ended`)."""
        return self.ended_before is not None and self.ended_before.source == st.EVENTS_FILE

    def _close_ended(self) -> LoopOutcome:
        """Close a loop that had gone through its whole end (``loop.end``, the report before
        it) when its loopctl was killed: the report (if the disk was too full for it), then
        progress.md and loop-state.md say how it ended. Nothing runs, no event is written, no
        hook is called: the loop ended once. The listener is shown the recorded ``loop.end``."""
        end = self.ended_before
        assert end is not None
        self.outcome = outcome = self._outcome(end.status, end.reason, end.message)
        self.state.status = end.status
        self.state.reason = end.message or end.reason
        self.state.pid = loop_pid()
        try:
            with _unless_disk_full():
                if not reported(self.state_dir, outcome):
                    write_report(self.state_dir, self._summary(outcome))
                self.report_written = True
            with _unless_disk_full():
                self._write_progress()
                self._write_state()
                st.fsync_dir(self.state_dir)
        finally:
            self._lock.release()
        if self.event_listener is not None and end.event is not None:
            data = {k: v for k, v in end.event.items() if k not in ("type", "ts", "iteration")}
            iteration = end.event.get("iteration")
            self.event_listener(
                Event(
                    type="loop.end",
                    ts=float(end.event.get("ts") or 0.0),
                    data=data,
                    iteration=iteration if isinstance(iteration, int) else None,
                )
            )
        return outcome

    def _carry_out_recorded(self) -> LoopOutcome | None:
        """Before any agent turn of a resumed loop: carry out the decision its last iteration
        recorded and it did not carry out. A stop (the loop was killed before ``loop.end``)
        ends this run the same way; a restart is made now, unless a limit or the restarts left
        end the loop, as they would have then."""
        end = self.ended_before
        if end is not None:
            return self._outcome(end.status, end.reason, end.message)
        pending = self._pending_restart()
        if pending is None:
            return None
        return self._restart_unless_ended(*pending)

    def _pending_restart(self) -> tuple[str, str] | None:
        """The reason and message of a restart the loop decided and did not finish: its state
        says so (``restarting``, or a full disk that cut the restart short), or the journal's
        last record decided it and came after the state's last restart."""
        state, last = self.state, (self.history[-1] if self.history else None)
        if state.status == "restarting" or state.restart_reason:
            return (state.restart_reason or "restart", state.restart_message)
        decided = last is not None and last.decision == Action.RESTART.value
        if last is not None and decided and last.restarts >= state.restarts:
            return (last.reason or "restart", last.message)
        return None

    def _outcome(self, status: str, reason: str, message: str) -> LoopOutcome:
        return LoopOutcome(
            status=status,
            reason=reason,
            message=message,
            iterations=self.state.iteration,
            restarts=self.state.restarts,
        )

    def _finish(self, outcome: LoopOutcome) -> None:
        self._finishing = True  # from now on a signal only cuts short a hook (on_loop_end)
        self.outcome = outcome
        self.state.status = outcome.status
        self.state.reason = outcome.message or outcome.reason
        self.state.agent_process = self.state.test_process = None  # a 0.2 state's, ended
        self._save_clock()
        try:
            self.host.hook.on_loop_end(loop=self.loop, outcome=outcome)
        except KeyboardInterrupt as exc:
            self._cut_short(exc)
        # On a full disk each write below may fail: what fails is left as it was (journals
        # are cut back to whole lines, atomic rewrites keep the old file), and `resume`
        # continues from there once there is space. The report comes before loop.end, which
        # says the loop went through its whole end: a kill after it leaves a loop that
        # `resume` closes as it is (ending.py), one before it a loop whose end `resume`
        # goes through again, running no agent.
        self._background.shutdown(wait=True)
        with _unless_disk_full():
            write_report(self.state_dir, self._summary(outcome))
            self.report_written = True
        try:
            with _unless_disk_full():
                self.emit(
                    "loop.end",
                    status=outcome.status,
                    reason=outcome.reason,
                    message=outcome.message,
                    exit_code=outcome.exit_code,
                    iterations=outcome.iterations,
                    restarts=outcome.restarts,
                )
        except KeyboardInterrupt as exc:  # in an on_event hook: the event is written already
            self._cut_short(exc)
        self._write_progress()  # final: it says how the loop ended
        self._write_state()
        for worker in (self._tasks, self._writer):  # tasks first: they may write files
            if worker is not None:
                worker.close()
        with _unless_disk_full():
            self._report_write_errors()
        self._writer = self._tasks = None
        for appender in (self._events, self._iterations):
            if appender is not None:
                appender.close()
        if self._running is not None:
            self._running.close()
        st.fsync_dir(self.state_dir)  # the last rewrites' renames, made durable once
        self._lock.release()

    def _summary(self, outcome: LoopOutcome) -> RunSummary:
        return RunSummary(
            outcome=outcome,
            goal=self.state.original_goal,
            agent=self.state.agent,
            test_cmd=self.state.test_cmd,
            start_commit=self.state.start_commit,
            state_dir=self.state_dir,
            elapsed_s=self.elapsed_s(),
            history=self.history[-REPORT_ITERATIONS:],
            totals=self.totals,
            failed_approaches=tuple(self.state.failed_approaches),
            plugin_errors=tuple(self.host.failures),
            sections=tuple(self.report_sections),
        )

    def elapsed_s(self) -> float:
        return self._wall_clock_used_before + (time.monotonic() - self._started_monotonic)

    def _save_clock(self) -> None:
        self.state.wall_clock_used_s = round(self.elapsed_s(), 3)
        self.state.stuck_level = int(self.stuck.level)

    def _limit_reached(self) -> LoopOutcome | None:
        limits = self.loaded.config.limits
        if self.state.iteration >= self.max_iterations:
            return self._outcome(
                StopStatus.MAX_ITERATIONS.value,
                "max_iterations",
                f"reached the iteration limit ({self.max_iterations}) without meeting the goal"
                + self._limit_cut_text(),
            )
        if self.elapsed_s() >= limits.wall_clock_s:
            return self._outcome(
                StopStatus.WALL_CLOCK.value,
                "wall_clock",
                f"the run used its whole wall-clock budget ({limits.wall_clock_s:.0f} s)",
            )
        if limits.max_tokens is not None and self._tokens_total >= limits.max_tokens:
            return self._outcome(
                StopStatus.BUDGET.value,
                "max_tokens",
                f"used {self._tokens_total} tokens, over the budget of {limits.max_tokens}",
            )
        if limits.max_cost_usd is not None and self._cost_total >= limits.max_cost_usd:
            estimated = " (estimated from token counts)" if self._cost_estimated else ""
            return self._outcome(
                StopStatus.BUDGET.value,
                "max_cost_usd",
                f"spent ${self._cost_total:.2f}{estimated}, over the budget of "
                f"${limits.max_cost_usd:.2f}",
            )
        return None

    def _iterate(self) -> LoopOutcome:
        self._waiting.clear()  # background work waits for the loop to wait
        try:
            return self._tests_first() or self._iterate_until_the_end()
        finally:
            self._set_waiting()

    def _tests_first(self) -> LoopOutcome | None:
        """Before the first agent turn of a fresh run (``test_first``): run the tests once,
        and once more if they fail in a way a flaky test may (:mod:`loopctl.testfirst`).
        Plugins see the result as they see an iteration's (``on_failure`` or ``on_success``,
        with a record of iteration 0); a failure goes into the first prompt. Tests that pass
        end the run complete with no turn, unless a plugin vetoes that or a completion signal
        is wanted (the agent must give it); None: the loop goes on to its first turn."""
        if self.resumed or not self.loaded.config.test_first or not self.state.test_cmd:
            return None
        self._stop_if_disk_full()
        started = time.time()
        test_run = self._run_test_command(None, label="")
        flaky: TestRun | None = None
        if worth_a_rerun(test_run):
            rerun = self._run_test_command(None, label=FLAKY_CHECK)
            if rerun.passed and not self._tree_changed():
                flaky, test_run = test_run, rerun
                self._note_flaky(flaky)
        self.last_test_run, self.reruns = test_run, []
        self._write_error_summary(test_run)
        # the snapshot the first turn's changes are counted from: not the tests' own files
        record = self._record(0, started, AgentSummary(), test_run, None, self.workspace.snapshot())
        record.ending = IterationEnd.TESTS_FIRST.value
        self.current_record = self.before_first_turn = record
        try:
            veto = self._judge(record, test_run, None)
        finally:
            self.current_record = None
        if not test_run.passed:
            return None
        if veto:
            self.emit("loop.completion_vetoed", reason=veto)
            return None
        if self.loaded.config.completion_signal:
            return None  # done needs the agent's word
        return self._outcome(
            StopStatus.COMPLETE.value, ALREADY_PASSING, already_passing_message(flaky)
        )

    def _tree_changed(self) -> bool:
        """Whether the working tree changed since the run started (the tests wrote to it)."""
        return bool(self.workspace.changed_files(self.last_snapshot, self.workspace.snapshot()))

    def _note_flaky(self, failed: TestRun) -> None:
        """A failure that passed on an immediate re-run: an event, and a line in the report."""
        self.emit(
            "tests.flaky",
            command=failed.command,
            failing_tests=failed.failing_tests[:MAX_FLAKY_NAMED],
            error_lines=failed.error_lines[:5],
        )
        self.add_report_section(ReportSection("Flaky Tests", flaky_text(failed), ENGINE))

    @contextmanager
    def _wait_window(self, *, from_start: bool = False) -> Iterator[None]:
        """The loop is about to wait (agent, tests, a rate limit): background work may run.

        ``from_start``: only once the command has started (its ``on_start`` calls
        :meth:`_let_background_run`). Starting a process releases and retakes the interpreter
        lock several times; a background thread doing Python work then holds up every step
        (spawns took a median 2.4 ms instead of 0.1 ms beside the snapshot's thread)."""
        was_set = self._waiting.is_set()
        if not from_start:
            self._write_stale_state()
            self._set_waiting()
        try:
            yield
        finally:
            if not was_set:
                self._waiting.clear()

    def _let_background_run(self) -> None:
        """A command the loop waits for has started: background work may run beside it."""
        self._write_stale_state()
        self._set_waiting()

    def _set_waiting(self) -> None:
        """The loop waits: the background threads may work, on what was held for them too."""
        self._waiting.set()
        for worker in (self._writer, self._tasks):
            if worker is not None:
                worker.release()

    def _iterate_until_the_end(self) -> LoopOutcome:
        while True:
            self._stop_if_disk_full()
            limit = self._limit_reached()
            if limit is not None:
                return limit
            decision = self._one_iteration()
            if decision.action is Action.STOP:
                return self._outcome(_stop_status(decision), decision.reason, decision.message)
            if decision.action is Action.RESTART:
                ended = self._restart_unless_ended(decision.reason, decision.message)
                if ended is not None:
                    return ended

    def _one_iteration(self) -> Decision:
        self.state.iteration += 1
        self.pending.clear()
        started = time.time()
        self.emit("iteration.start", restarts=self.state.restarts, session_id=self.state.session_id)
        self.host.hook.before_iteration(loop=self.loop)
        self._iteration_open = True
        try:
            return self._run_iteration(started)
        except BaseException:  # Ctrl-C, SIGTERM, an engine bug: the iteration still closes
            if self._iteration_open:
                self._close_interrupted(started)
            raise

    def _run_iteration(self, started: float) -> Decision:
        iteration = self.state.iteration
        composed = self._compose_prompt()
        self._log(st.log_name(iteration, "prompt.md"), composed.text)
        self.emit(
            "agent.start",
            agent=self.agent.name,
            prompt_chars=len(composed.text),
            trimmed=composed.trimmed,
        )
        turn = self._run_agent(composed.text, iteration)
        summary = self._account_for(turn)
        agent_decision = self._agent_error_decision(turn)
        if agent_decision is not None and agent_decision.reason == RATE_LIMIT_RETRY:
            record = self._record(iteration, started, summary, None, composed, None)
            record.ending = IterationEnd.RATE_LIMITED.value
            self._close(record, None)  # the result is ignored: the iteration runs again
            self._wait_out_rate_limit(turn)
            self.state.iteration -= 1
            return agent_decision
        if agent_decision is not None and agent_decision.action is Action.STOP:
            snapshot = self.workspace.snapshot()
            record = self._record(iteration, started, summary, None, composed, snapshot)
            record.ending = IterationEnd.AGENT_FAILED.value
            self.current_record = record
            self._judge(record, None, turn)
            decisions = [agent_decision, *self.pending, *self._close(record, None)]
            return self._conclude(record, decisions)

        # The snapshot runs while the tests run, started once they have started (a process
        # starting beside them delays their start): the engine's own work then costs almost
        # nothing on top of the agent and the test command. With git, `git status` is a process
        # of its own (no thread of ours competes with the loop's); without git, the scan runs
        # on a thread. A test command that never started leaves it to be taken afterwards.
        git: list[PendingSnapshot] = []
        snapshots: list[Callable[[], Snapshot]] = []

        def snapshot_when_started() -> None:
            if self.workspace.is_git:
                git.append(self.workspace.start_snapshot())
                snapshots.append(git[0].result)
            else:
                snapshots.append(self._background.submit(self.workspace.snapshot).result)

        try:
            test_run = self._run_test_command(None, label="", when_started=snapshot_when_started)
        except BaseException:
            for pending in git:
                pending.abandon()
            raise
        self.last_test_run, self.reruns = test_run, []
        snapshot = snapshots[0]() if snapshots else self.workspace.snapshot()
        before = self.last_snapshot
        record = self._record(iteration, started, summary, test_run, composed, snapshot)
        self.current_record = record
        self._write_error_summary(test_run)
        veto = self._judge(record, test_run, turn)
        self._note_approach(record, test_run, before, turn)
        decisions = [*self.pending, *self._close(record, test_run)]
        own = agent_decision or self._engine_decision(record, test_run, turn, veto)
        if own is not None:
            decisions.append(own)
        return self._conclude(record, decisions)

    def _account_for(self, turn: TurnResult) -> AgentSummary:
        """Keep what the turn used and tell the listeners (``agent.end``)."""
        self._running_ended()
        self.last_turn = turn
        if turn.session_id:
            self.state.session_id = turn.session_id
        if turn.cost_usd is None and turn.requests:
            self._price(turn)
        summary = AgentSummary.from_turn(turn)
        self._tokens_total += summary.usage.total_tokens
        self._cost_total += turn.cost_usd or 0.0
        self._cost_estimated = self._cost_estimated or turn.cost_estimated
        # an agent that reports no usage (a plain command) used an unknown number, not 0
        reported = attrs.asdict(summary.usage) if turn.requests else None
        self.emit(
            "agent.end",
            outcome=summary.outcome,
            error_kind=summary.error_kind,
            message=summary.message[:500],
            tokens=summary.usage.total_tokens if reported else None,
            usage=reported,
            context_tokens=turn.context_tokens,
            context_window=turn.context_window,
            cost_usd=turn.cost_usd,
            tool_calls=len(turn.tool_calls),
            duration_s=round(turn.duration_s, 3),
            interrupted=turn.interrupted,
            **({"cost_estimated": True} if turn.cost_estimated else {}),
        )
        return summary

    def _judge(
        self, record: IterationRecord, test_run: TestRun | None, turn: TurnResult | None
    ) -> str | None:
        """``on_success`` or ``on_failure``, and what their verdicts mean: a completion veto
        (returned, as ``source: reason``) or a failure that is not the agent's (noted).
        ``turn`` is None for the test run before the first turn."""
        ok = turn is None or turn.outcome.ok
        if test_run is not None and test_run.passed and ok:
            results = self.host.hook.on_success(loop=self.loop, record=record, test_run=test_run)
            vetoes = [r for r in results if isinstance(r, CompletionVeto)]
            return f"{vetoes[0].source}: {vetoes[0].reason}" if vetoes else None
        results = self.host.hook.on_failure(loop=self.loop, record=record, test_run=test_run)
        for fault in (r for r in results if isinstance(r, NotAgentsFault)):
            if "not_agents_fault" not in record.annotations:
                record.annotations["not_agents_fault"] = f"{fault.source}: {fault.reason}"
            self.emit("loop.not_agents_fault", reason=fault.reason, source=fault.source)
        return None

    def _close(self, record: IterationRecord, test_run: TestRun | None) -> list[Decision]:
        """``after_iteration``: the one call that closes every ``before_iteration``."""
        self._iteration_open = False
        results = self.host.hook.after_iteration(loop=self.loop, record=record, test_run=test_run)
        return [d for d in results if isinstance(d, Decision)]

    def _close_interrupted(self, started: float) -> None:
        record = IterationRecord(
            iteration=self.state.iteration,
            restarts=self.state.restarts,
            started_at=round(started, 3),
            decision=Action.STOP.value,
            reason=StopStatus.INTERRUPTED.value,
            ending=IterationEnd.INTERRUPTED.value,
        )
        self.current_record = None
        self._close(record, None)

    def _conclude(self, record: IterationRecord, decisions: Sequence[Decision]) -> Decision:
        decision = _strongest(decisions)
        self._apply_budget_cuts(decisions)
        record.decision = decision.action.value
        record.reason = decision.reason
        if decision.action is not Action.CONTINUE:  # how the loop ends or restarts, recorded
            record.status = _stop_status(decision) if decision.action is Action.STOP else ""
            record.message = decision.message
        record.duration_s = round(time.time() - record.started_at, 3)
        self.history.append(record)
        assert self._iterations is not None
        row = records.unstructure_record(record)
        size = self._iterations.append(row)  # visible to readers and safe from a kill at once
        self.totals.add(record, journal_bytes=size)  # saved with the next loop-state.md
        if self._writer is not None:
            self._writer.submit(self._iterations.sync)  # and on disk soon after
        self._recent_rows.append(row)
        self._report_write_errors()
        self.emit(
            "iteration.end",
            tests_passed=record.tests_passed,
            failing=len(record.failing_tests),
            error_fingerprint=record.error_fingerprint,
            decision=record.decision,
            reason=record.reason,
            duration_s=record.duration_s,
        )
        self._save_clock()
        self._write_progress()
        self._write_state_later()
        self.current_record = None
        return decision

    def _limit_cut_text(self) -> str:
        """``; PLUGIN lowered it from N (reason)`` when plugins' decisions cut the limit the
        run was given (the names are the ones the cuts carried), else ""."""
        cut = self.state.iteration_limit_cut
        if not isinstance(cut, dict) or cut.get("to") != self.max_iterations:
            return ""
        names = [str(name) for name in cut.get("by") or [] if name] or ["a plugin"]
        who = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        why = f" ({cut['reason']})" if cut.get("reason") else ""
        return f"; {who} lowered it from {cut.get('from', '?')}{why}"

    def _apply_budget_cuts(self, decisions: Sequence[Decision]) -> None:
        """Lower the iteration limit where a decision asks (never below the next iteration)."""
        for decision in decisions:
            if decision.remaining_iterations is None:
                continue
            floor = self.state.iteration + 1
            wanted = self.state.iteration + max(0, decision.remaining_iterations)
            limit = max(floor, min(self.max_iterations, wanted))
            if limit < self.max_iterations:
                cut = self.state.iteration_limit_cut or {}
                by = [name for name in cut.get("by", []) if name != decision.source]
                self.state.iteration_limit_cut = {
                    "from": cut.get("from", self.max_iterations),
                    "to": limit,
                    "by": [*by, decision.source],
                    "reason": decision.reason,
                }
                self.max_iterations = self.state.max_iterations = limit
                self.emit(
                    "loop.iteration_budget_reduced",
                    max_iterations=limit,
                    reason=decision.reason,
                    source=decision.source,
                )

    # --- the parts of an iteration -----------------------------------------------------------

    def _compose_prompt(self) -> ComposedPrompt:
        sections: list[PromptSection] = []
        for result in self.host.hook.compose_prompt(loop=self.loop):
            items = result if isinstance(result, (list, tuple)) else [result]
            sections.extend(s for s in items if isinstance(s, PromptSection))
        composed = compose(sections, self.loaded.config.prompt.budget_chars)
        composed.text = redact(composed.text)  # what the agent's model receives
        return composed

    def _run_agent(self, prompt: str, iteration: int) -> TurnResult:
        limits = self.loaded.config.limits
        supervision = self._supervision or Supervision(
            timeout_s=limits.agent_timeout_s,
            idle_timeout_s=limits.idle_timeout_s,
            grace_s=limits.agent_exit_grace_s,
            transcript_limit=limits.agent_log_bytes,
        )
        resume = self.state.session_mode == "resume" and self.state.session_id
        request = TurnRequest(
            prompt=prompt,
            workdir=self.workdir,
            iteration=iteration,
            session_id=self.state.session_id if resume else None,
            keep_session=self.state.session_mode == "resume",
            budget_usd=(
                None
                if limits.max_cost_usd is None
                else max(limits.max_cost_usd - self._cost_total, 0.0)
            ),
            session_cost_usd=self._session_cost(self.state.session_id) if resume else 0.0,
        )

        def on_message(message: AgentMessage) -> Decision | None:
            if self.message_listener is not None:
                try:
                    self.message_listener(message)
                except Exception:  # noqa: BLE001 - a view never stops a loop
                    self.message_listener = None
            decision = self.host.hook.on_agent_message(loop=self.loop, message=message)
            if isinstance(decision, Decision):
                self.pending.append(decision)
                self.emit("agent.turn_stopped", reason=decision.reason, message=decision.message)
                return decision
            return None

        def on_start(pgid: int) -> None:
            self._record_group(pgid, "agent")
            self._let_background_run()

        env = child_environment(
            {"LOOPCTL_ITERATION": str(iteration), "LOOPCTL_STATE_DIR": str(self.state_dir)},
            withhold=self.loaded.config.withhold_env,
        )
        transcript = self.state_dir / st.LOGS_DIR / st.log_name(iteration, "agent.jsonl")
        try:
            with self._wait_window(from_start=True):
                return run_turn(
                    self.agent,
                    request,
                    on_message=on_message,
                    supervision=supervision,
                    transcript=transcript,
                    env=env,
                    on_start=on_start,
                )
        except ValueError as exc:  # the adapter refused its settings (a missing scenario, say)
            return TurnResult(
                outcome=TurnOutcome(ErrorKind.USAGE, f"cannot start the agent: {exc}"),
                started=False,
            )

    def _session_cost(self, session_id: str | None) -> float:
        """What the iterations recorded for ``session_id`` cost together."""
        return sum(
            record.agent.cost_usd or 0.0
            for record in self.history
            if session_id and record.agent.session_id == session_id
        )

    def _price(self, turn: TurnResult) -> None:
        """Estimate the cost of a turn whose CLI reported tokens but no cost (loopctl.pricing);
        with a cost budget, say once why a turn could not be priced."""
        from loopctl.pricing import estimate_cost

        estimate = estimate_cost(turn.model, turn.requests, self.loaded.config.prices)
        if estimate.cost_usd is not None:
            turn.cost_usd, turn.cost_estimated = estimate.cost_usd, True
        elif self.loaded.config.limits.max_cost_usd is not None and not self._unpriced_said:
            self._unpriced_said = True
            self.emit(
                "loop.warning",
                message=f"limits.max_cost_usd cannot count this agent's turns: "
                f"{self.agent.name} reports no cost, and {estimate.source}",
            )

    def run_tests(self, command: str | None, *, label: str) -> TestRun:
        """A plugin's re-run (``loop.run_tests``): logged and returned under its own label,
        kept beside the iteration's own run for the next prompt, never in its place."""
        result = self._run_test_command(command, label=_log_label(label))
        self.reruns.append(result)
        return result

    def _run_test_command(
        self,
        command: str | None,
        *,
        label: str,
        when_started: Callable[[], object] | None = None,
    ) -> TestRun:
        limits = self.loaded.config.limits
        command = command or self.state.test_cmd
        labelled = {"label": label} if label else {}
        self.emit("tests.start", command=command, **labelled)

        def on_start(pgid: int) -> None:
            self._record_group(pgid, "tests")
            if when_started is not None:
                when_started()
            self._let_background_run()

        try:
            with self._wait_window(from_start=True):
                result = run_test_command(
                    command,
                    cwd=self.workdir,
                    timeout_s=limits.test_timeout_s,
                    output_limit=limits.test_output_bytes,
                    base_env=child_environment(withhold=self.loaded.config.withhold_env),
                    on_start=on_start,
                    report=self.loaded.config.test_report,
                    ask_pytest=True,
                )
        finally:
            self._running_ended()
        result = attrs.evolve(result, label=label) if label else result
        kind = f"{label}.tests.log" if label else "tests.log"
        self._log(st.log_name(self.state.iteration, kind), result.output)
        self.emit(
            "tests.end",
            command=command,
            passed=result.passed,
            exit_code=result.exit_code,
            timed_out=result.timed_out,
            failing=len(result.failing_tests),
            failing_tests=result.failing_tests[:20],
            error_count=len(result.error_lines),
            runner=result.runner,
            duration_s=round(result.duration_s, 3),
            **labelled,
        )
        return result

    def _record(
        self,
        iteration: int,
        started: float,
        summary: AgentSummary,
        test_run: TestRun | None,
        composed: ComposedPrompt | None,
        snapshot: Snapshot | None,
    ) -> IterationRecord:
        changed: list[str] = []
        if snapshot is not None:
            changed = self.workspace.changed_files(self.last_snapshot, snapshot)
            self.last_snapshot = snapshot
        return IterationRecord(
            iteration=iteration,
            restarts=self.state.restarts,
            started_at=round(started, 3),
            tests_passed=bool(test_run and test_run.passed),
            test_exit_code=test_run.exit_code if test_run else None,
            error_count=len(test_run.error_lines) if test_run else 0,
            error_fingerprint=test_run.fingerprint if test_run else "",
            failing_tests=list(test_run.failing_tests) if test_run else [],
            changed_files=changed[:200],
            commit=snapshot.commit if snapshot else None,
            tree_hash=snapshot.tree_hash if snapshot else None,
            agent=summary,
            prompt_chars=len(composed.text) if composed is not None else 0,
        )

    def _agent_error_decision(self, turn: TurnResult) -> Decision | None:
        """The engine's own reaction to a failed turn (None: go on to the tests)."""
        kind = turn.outcome.error_kind
        if kind is None:
            self._crashes = 0
            return None
        if turn.interrupted:
            return None
        message = turn.outcome.message or kind.value
        if kind in (ErrorKind.AUTH, ErrorKind.BILLING):
            return _engine_stop(
                StopStatus.AUTH,
                f"the agent cannot work until this is fixed ({kind.value}): {message}",
            )
        if kind is ErrorKind.USAGE:  # its command line is wrong: every retry would fail alike
            return _engine_stop(StopStatus.USAGE_ERROR, message)
        if not turn.started:
            return _engine_stop(StopStatus.AGENT_ERROR, message)
        if kind is ErrorKind.RATE_LIMIT:
            return self._rate_limit_decision(turn)
        if kind in (ErrorKind.CRASHED, ErrorKind.INVALID_OUTPUT, ErrorKind.UNKNOWN):
            self._crashes += 1
            if self._crashes > self.loaded.config.limits.max_agent_crashes:
                return _engine_stop(
                    StopStatus.AGENT_ERROR,
                    f"the agent failed {self._crashes} times in a row; last error: {message}",
                )
            return _engine_restart("agent_crash", f"the agent failed ({kind.value}): {message}")
        if kind is ErrorKind.CONTEXT_OVERFLOW:
            return _engine_restart("context_exhaustion", f"the agent ran out of context: {message}")
        return None  # timeouts, network, max_turns, budget: the tests decide

    def _rate_limit_wait_s(self, turn: TurnResult) -> float:
        if turn.outcome.retry_at is not None:
            return max(1.0, turn.outcome.retry_at - time.time())
        attempt = min(self.state.rate_limit_waits, len(RATE_LIMIT_BACKOFF_S) - 1)
        return RATE_LIMIT_BACKOFF_S[attempt]

    def _rate_limit_decision(self, turn: TurnResult) -> Decision:
        """Wait out the limit and try the iteration again, unless the wait outlasts the
        wall-clock budget."""
        wait = self._rate_limit_wait_s(turn)
        left_in_budget = self.loaded.config.limits.wall_clock_s - self.elapsed_s()
        if wait >= left_in_budget:
            until = time.strftime("%H:%M:%S", time.localtime(time.time() + wait))
            return _engine_stop(
                StopStatus.WALL_CLOCK,
                f"rate limited until {until}, after the wall-clock budget ends",
            )
        return Decision(Action.CONTINUE, RATE_LIMIT_RETRY, source=ENGINE)

    def _wait_out_rate_limit(self, turn: TurnResult) -> None:
        wait = self._rate_limit_wait_s(turn)
        self.state.rate_limit_waits += 1
        until = time.strftime("%H:%M:%S", time.localtime(time.time() + wait))
        self.emit(
            "agent.rate_limit_wait",
            seconds=round(wait, 1),
            until=until,
            message=turn.outcome.message[:300],
        )
        deadline = time.monotonic() + wait
        while (left := deadline - time.monotonic()) > 0:
            with self._wait_window():
                time.sleep(min(left, 1.0))
            self.emit("agent.rate_limit_waiting", seconds_left=round(max(0.0, left - 1.0)))

    def _engine_decision(
        self, record: IterationRecord, test_run: TestRun, turn: TurnResult, veto: str | None
    ) -> Decision | None:
        if test_run.passed and turn.outcome.ok:
            if veto:
                self.emit("loop.completion_vetoed", reason=veto)
            elif self._completion_signalled(turn):
                return attrs.evolve(Decision.complete("the tests pass"), source=ENGINE)
            else:
                self.emit(
                    "loop.completion_signal_missing", signal=self.loaded.config.completion_signal
                )
        broken = self._broken_test_command(record, test_run)
        if broken is not None:
            return broken
        if not self.loaded.config.stuck.enabled:
            return None
        escalation = self.stuck.observe(
            record,
            error_lines=test_run.error_lines,
            infrastructure=is_infrastructure_failure(record),
            fresh=self.state.session_mode == "fresh",
        )
        if escalation is Escalation.NONE:
            return None
        return self._escalate(escalation, record, test_run)

    def _broken_test_command(self, record: IterationRecord, test_run: TestRun) -> Decision | None:
        """A test command that cannot pass whatever the code says stops the loop at once
        (:mod:`loopctl.testbroken`), unless the iteration's own changes may have broken it."""
        if test_run.passed or test_run.timed_out:
            return None
        broken = broken_test_command(test_run.command, test_run.exit_code, test_run.output)
        if broken is None or agent_may_have_caused(broken, record.changed_files):
            return None
        message = broken.message(test_run.command)
        stop = Decision.stop(TEST_COMMAND_BROKEN, message, status=StopStatus.USAGE_ERROR)
        return attrs.evolve(stop, source=ENGINE)

    def _escalate(
        self, escalation: Escalation, record: IterationRecord, test_run: TestRun
    ) -> Decision | None:
        summary = _failure_summary(record, test_run)
        self.emit(
            "loop.stuck",
            escalation=escalation.name.lower(),
            streak=self.stuck.streak,
            fingerprint=record.error_fingerprint,
        )
        if escalation is Escalation.NUDGE:
            self.state.stuck_nudge = summary[:500]
            return None
        if escalation is Escalation.RESTART:
            return _engine_restart(
                StopStatus.STUCK.value,
                f"the same failure {self.stuck.streak} times in a row, even after a nudge",
            )
        streak, idle = self.stuck.streak, self.stuck.idle
        if streak <= self.stuck.window:  # stopped before any nudge: it changed nothing
            how = "and the agent changed nothing in any of them"
        else:
            how = _through(self._restarts_in_streak(record))
            if idle >= self.stuck.window:
                how += f"; the agent changed nothing in the last {idle}"
        return _engine_stop(
            StopStatus.STUCK,
            f"the same failure {streak} times in a row, {how}: {summary[:300]}",
        )

    def _restarts_in_streak(self, record: IterationRecord) -> int:
        """How many session restarts the current stuck streak (ending with ``record``, not yet
        in the history) went through, whoever asked for them."""
        first, left = record, self.stuck.streak - 1
        for earlier in reversed(self.history[-min(len(self.history), 4 * left + 10) :]):
            if left <= 0:
                break
            if not is_infrastructure_failure(earlier):  # skipped by stuck detection
                first, left = earlier, left - 1
        return max(0, record.restarts - first.restarts)

    def _completion_signalled(self, turn: TurnResult) -> bool:
        wanted = self.loaded.config.completion_signal
        return not wanted or any(line.strip() == wanted for line in turn.final_text.splitlines())

    # --- restarts ----------------------------------------------------------------------------

    def _restart_unless_ended(self, reason: str, message: str) -> LoopOutcome | None:
        """Carry out a restart decision, or end the loop when a limit leaves it no use for a
        fresh session or no restart is left (the outcome)."""
        limit = self._limit_reached()
        if limit is not None:  # no point in a fresh session the loop cannot use
            return limit
        if self.state.restarts >= self.loaded.config.limits.max_restarts:
            return self._outcome(
                StopStatus.MAX_RESTARTS.value,
                reason,
                f"a restart was needed ({reason}) but all "
                f"{self.loaded.config.limits.max_restarts} restarts are used up",
            )
        self._restart(reason, message)
        return None

    def _restart(self, reason: str, message: str) -> None:
        self.state.status = "restarting"
        self.state.restart_reason = reason
        self.state.restart_message = message
        self._write_state()
        self._finish_restart(reason, message)

    def _finish_restart(self, reason: str, message: str) -> None:
        number = self.state.restarts + 1
        self._write_stale_state()
        for worker in (self._tasks, self._writer):  # the archive holds the session's last word
            if worker is not None:
                worker.flush()
        archive = st.archive_restart(self.state_dir, number)
        (self.state_dir / st.LOGS_DIR).mkdir(exist_ok=True)
        self.state.restarts = number
        self.state.session_id = None
        self.state.status = "running"
        self.state.restart_reason = self.state.restart_message = ""
        self.state.stuck_nudge = None
        self.emit(
            "loop.restart", number=number, reason=reason, message=message, archive=str(archive)
        )
        restart = Restart(number=number, reason=reason, message=message, archive_dir=archive)
        self.host.hook.on_restart(loop=self.loop, restart=restart)
        # Done, and on disk before the next iteration: a loop killed before this is restarted
        # again by `resume` (loop.restart and on_restart once more, the same number), never
        # one killed after the next iteration was recorded.
        self._write_state()
        if self._writer is not None:
            self._writer.flush()

    # --- state files -------------------------------------------------------------------------

    def persist(
        self,
        path: Path,
        render: Callable[[], str],
        *,
        background: bool = True,
        durable: bool = True,
    ) -> None:
        """Atomically rewrite ``path`` with ``render()``'s text, both done by the background
        writer (at once when ``background`` is false, before the writer exists or after it
        closed). ``durable``: fsynced (see :func:`loopctl.state.files.atomic_write_bytes`)."""
        if self._writer is None or not background:
            path.parent.mkdir(parents=True, exist_ok=True)
            st.atomic_write_text(path, render(), durable=durable)
        else:
            self._writer.submit(lambda: _write_file(path, render, durable), key=path)

    def _write_state_later(self) -> None:
        """loop-state.md is to be rewritten, but not before the loop next waits (or ends): the
        background writer writes nothing before then, and the next iteration's agent start
        rewrites it anyway, so rendering it now would be work thrown away."""
        self._state_stale = True

    def _write_stale_state(self) -> None:
        """Render loop-state.md if :meth:`_write_state_later` asked for it (the writer is
        about to run)."""
        if self._state_stale:
            self._write_state()

    def _record_group(self, pgid: int, kind: str) -> None:
        """Record the process group of the command that started (``agent``, ``tests``) in
        running.json, at once: a loopctl killed from now on leaves it to be ended by the next
        loop (:func:`end_left_running`)."""
        started_at = process_start_time(pgid)
        if started_at is not None and self._running is not None:  # else a pid could be reused
            self._running.set(kind, [pgid, started_at])

    def _running_ended(self) -> None:
        if self._running is not None:
            self._running.clear()

    def _write_state(self) -> None:
        self._state_stale = False
        self._save_clock()  # the wall clock used, as of updated_at
        self.state.updated_at = round(time.time(), 3)
        self.state.summary = self.totals.to_json()  # what the journal holds so far
        text = st.render_loop_state(self.state, _state_body(self))  # now: the state changes
        self.persist(self.state_dir / st.LOOP_STATE_FILE, lambda: text)

    def _write_error_summary(self, test_run: TestRun) -> None:
        summary = {
            "iteration": self.state.iteration,
            "error_count": len(test_run.error_lines),
            "error_lines": list(test_run.error_lines),
            "test_cmd": test_run.command,
        }
        self.persist(  # rendered on the writer thread: ``summary`` is not shared
            self.state_dir / st.ERROR_SUMMARY_FILE,
            lambda: st.json_text(summary),
            durable=False,  # a view of the journal's last record, rewritten every iteration
        )

    def _write_progress(self) -> None:
        rows, totals = list(self._recent_rows), self.totals.to_json()
        goal, status = self.state.original_goal, self.state.status
        if self.outcome is not None:  # the loop has ended: say how, for good
            status = f"{status}: {self.state.reason}" if self.state.reason else status
        self.persist(  # rendered on the writer thread from these copies
            self.state_dir / st.PROGRESS_FILE,
            lambda: sanitize(st.render_progress(rows, goal=goal, status=status, totals=totals)),
            durable=self.outcome is not None,  # a view rewritten every iteration, but the last
        )

    def _log(self, name: str, text: str) -> None:
        """Write ``logs/NAME`` for people debugging a run, off the loop's path when it can."""
        path = self.state_dir / st.LOGS_DIR / name
        if self._writer is None:
            _write_log(path, text)
        else:
            self._writer.submit(lambda: _write_log(path, text))

    def _report_write_errors(self) -> None:
        """Emit ``state.write_error`` for each failed background write; raise the error of one
        that failed because the disk is full, which ends the loop (status ``disk_full``)."""
        for worker in (self._writer, self._tasks):
            if worker is None:
                continue
            self._disk_full, worker.disk_full = self._disk_full or worker.disk_full, None
            if worker.errors:
                errors, worker.errors = worker.errors, []
                for error in errors:
                    self.emit("state.write_error", error=error)
        self._stop_if_disk_full()

    def _stop_if_disk_full(self) -> None:
        """Raise the write error of a full disk, if one happened: the loop ends there."""
        if self._disk_full is not None:
            raise self._disk_full


def _check_goal(goal: str, budget_chars: int) -> None:
    """A goal is text, and leaves room in the prompt for the rest: at most half the prompt
    budget, since it is never trimmed (a bigger one would crowd out the test output)."""
    if "\x00" in goal:
        raise LoopError(
            f"the goal contains a NUL character (character {goal.index(chr(0)) + 1}); "
            "a goal is text: remove it"
        )
    limit = budget_chars // 2
    if len(goal) > limit:
        raise LoopError(
            f"the goal is {len(goal):,} characters long; it may take at most half of the "
            f"prompt ({limit:,} characters of prompt.budget_chars = {budget_chars:,}) so the "
            "test output and the loop's notes still fit: shorten it, or raise "
            "prompt.budget_chars"
        )


def end_left_running(state_dir: Path) -> list[str]:
    """End the agent and the test command a killed loop left running in ``state_dir``, and
    wait until they are gone; one line per group ended, to tell the user.

    Both run in sessions of their own, so they outlive a loopctl killed with SIGKILL;
    ``running.json`` records their process groups (``loop-state.md`` did, up to 0.2). Call it
    holding the state directory's lock (so that loop is really gone), before the state is
    discarded or another run starts.
    """
    names = {"agent": "the agent", "tests": "the test command"}
    running = st.read_running(state_dir)
    recorded: list[tuple[str, list[int] | None]] = []
    if running is not None:
        recorded.append((names[running[0]], running[1]))
    try:  # where a loop of 0.2 or earlier recorded them
        previous = st.read_loop_state(state_dir / st.LOOP_STATE_FILE)
        recorded += [
            ("the agent", previous.agent_process),
            ("the test command", previous.test_process),
        ]
    except st.StateError:
        pass
    ended = []
    for what, group in recorded:
        if group is not None and end_orphaned_group(group[0], group[1]):
            ended.append(f"ended {what} (process group {group[0]}) a killed loop left running")
    return ended


def _engine_stop(status: StopStatus, message: str) -> Decision:
    return attrs.evolve(Decision.stop(status.value, message, status=status), source=ENGINE)


def _failure_summary(record: IterationRecord, test_run: TestRun) -> str:
    """The failure in one line: the first error line, else the first failing tests."""
    return test_run.error_lines[0] if test_run.error_lines else ", ".join(record.failing_tests[:3])


def _through(restarts: int) -> str:
    """What a stuck streak went through: the nudge, and the restarts it really had."""
    if restarts <= 0:
        return "even after a nudge"
    return "through a nudge and " + ("a restart" if restarts == 1 else f"{restarts} restarts")


def _stop_status(decision: Decision) -> str:
    """The status a stop decision ends the loop with (a plugin's own stop: ``plugin``)."""
    return decision.status or StopStatus.PLUGIN.value


def _engine_restart(reason: str, message: str) -> Decision:
    return attrs.evolve(Decision.restart(reason, message), source=ENGINE)


def _write_file(path: Path, render: Callable[[], str], durable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    st.atomic_write_text(path, render(), durable=durable)


def _strongest(decisions: Sequence[Decision]) -> Decision:
    """Stop beats restart beats continue; among equals the first (in hook order) wins."""
    best = Decision.proceed()
    for decision in decisions:
        if ACTION_STRENGTH[decision.action] > ACTION_STRENGTH[best.action]:
            best = decision
    return best


def _state_body(engine: Engine) -> str:
    state = engine.state
    last = engine.history[-1] if engine.history else None
    lines = [
        f"# loopctl: {state.status}",
        "",
        f"Iteration {state.iteration} of {engine.max_iterations}, restarts {state.restarts}.",
    ]
    if last is not None:
        verdict = "passed" if last.tests_passed else f"failed ({len(last.failing_tests)} failing)"
        lines.append(f"Last tests {verdict}; decision: {last.decision} {last.reason}".rstrip())
    return sanitize("\n".join(lines) + "\n")


def _log_label(label: str) -> str:
    """``label`` made safe for a file name (``rerun`` when nothing is left of it)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:40].strip("-") or "rerun"


def _write_log(path: Path, text: str) -> None:
    """Logs are for people debugging a run: best effort, never a reason to stop the loop.
    Redacted like every file loopctl writes (here, on the writer thread)."""
    try:
        path.write_text(redact(text), encoding="utf-8", errors="replace")
    except OSError:
        pass


def _ignored_paths(workdir: Path, state_dir: Path) -> tuple[str, ...]:
    try:
        return (str(state_dir.resolve().relative_to(workdir.resolve())),)
    except ValueError:
        return ()


@contextmanager
def _unless_disk_full() -> Iterator[None]:
    """Go on past a write that failed because the disk is full (the loop is ending anyway)."""
    try:
        yield
    except OSError as exc:
        if not is_disk_full(exc):
            raise


@contextmanager
def _handler(signum: int, handler: Callable[[int, Any], None]) -> Iterator[None]:
    """``handler`` for ``signum`` during the block, then the one before it again."""
    previous = signal.signal(signum, handler)
    try:
        yield
    finally:
        signal.signal(signum, signal.SIG_DFL if previous is None else previous)


def _leave_the_terminal() -> None:
    """After SIGHUP the terminal is gone: point stdout and stderr at /dev/null where they were
    on it, so that the graceful stop's output cannot fail (EIO) and stop it."""
    for fd in (1, 2):
        try:
            if stat.S_ISCHR(os.fstat(fd).st_mode):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, fd)
                os.close(devnull)
        except OSError:
            pass


def _stderr(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # no stderr left (a closed terminal): the event still says it
        pass
