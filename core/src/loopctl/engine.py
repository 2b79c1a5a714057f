"""The loop engine: compose the prompt, run the agent, run the tests, record, decide.

The engine knows nothing about any particular plugin. Plugins take part through the hooks in
:mod:`loopctl.hookspecs` and act on the run through :class:`Loop`, the object every hook receives.
All state lives in the state directory (:mod:`loopctl.state`), rewritten atomically, so a loop
killed at any point can be continued with ``loopctl resume``, losing at most the iteration that
was in flight.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

import attrs

from loopctl import records
from loopctl import state as st
from loopctl._version import __version__
from loopctl.agents.base import AgentAdapter, TurnRequest
from loopctl.config import LoadedConfig, LoopctlConfig, context_window_for, withheld_environment
from loopctl.model import (
    ACTION_STRENGTH,
    INFRASTRUCTURE_ERRORS,
    Action,
    AgentMessage,
    AgentSummary,
    Decision,
    ErrorKind,
    Event,
    IterationRecord,
    PromptSection,
    StopStatus,
    TestRun,
    TurnOutcome,
    TurnResult,
    exit_code_for,
)
from loopctl.prompt import ComposedPrompt, compose
from loopctl.stuck import Escalation, StuckDetector
from loopctl.workspace import Snapshot, Workspace

if TYPE_CHECKING:
    from loopctl.pluginhost import HookFailure, PluginHost

#: Engine decisions carry this source so the record says who decided.
ENGINE = "engine"
#: How long to wait out a rate limit when the CLI names no reset time, by attempt.
RATE_LIMIT_BACKOFF_S = (30.0, 60.0, 120.0, 300.0, 600.0)
#: Statuses of a loop that did not end: ``loopctl run`` refuses to start over one of them.
UNFINISHED = ("running", "interrupted", "restarting")
_STATUSES = {status.value for status in StopStatus}


class LoopError(Exception):
    """A problem that stops a run before it starts (bad goal, state directory in use, …)."""


@attrs.define
class Restart:
    """Passed to ``on_restart``: the restart that just happened."""

    number: int
    reason: str
    message: str
    archive_dir: Path


@attrs.define
class LoopOutcome:
    """How a run ended; passed to ``on_loop_end`` and written to the report."""

    status: str
    reason: str = ""
    message: str = ""
    iterations: int = 0
    restarts: int = 0

    @property
    def exit_code(self) -> int:
        return exit_code_for(self.status)

    @property
    def complete(self) -> bool:
        return self.status == StopStatus.COMPLETE.value


@attrs.define
class ReportSection:
    title: str
    body: str
    source: str


class BackgroundWriter:
    """Rewrites the derived state files (loop-state.md, progress.md, error-summary.json, the
    plugins' files) and runs the plugins' background tasks in order on one thread, so their
    fsyncs never hold up an iteration.

    Work runs while the loop waits for the agent or the tests (``waiting`` is set): a thread
    doing Python work beside the loop's own would contend with it for the interpreter lock and
    slow every step of the loop's bookkeeping. Each rewrite is still atomic, so a reader or a
    crash only ever sees a complete old or new version. The journal ``iterations.jsonl`` is
    appended synchronously; it alone decides what ``loopctl resume`` continues from, so a kill
    loses at most the iteration in flight.
    """

    def __init__(
        self, name: str = "loopctl-state-writer", waiting: threading.Event | None = None
    ) -> None:
        self._queue: queue.Queue[Callable[[], object] | None] = queue.Queue()
        self.errors: list[str] = []
        self._latest: dict[object, Callable[[], object]] = {}
        self._latest_lock = threading.Lock()
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
            self._queue.put(write)
            return
        with self._latest_lock:
            waiting = key in self._latest
            self._latest[key] = write
        if not waiting:
            self._queue.put(lambda: self._write_latest(key))

    def _write_latest(self, key: object) -> None:
        with self._latest_lock:
            write = self._latest.pop(key)
        write()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until every submitted write is done (at most ``timeout_s``); True when done."""
        held = not self.waiting.is_set()
        self.waiting.set()
        try:
            if timeout_s is None:
                self._queue.join()
                return True
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
                self.errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                self._queue.task_done()


class _ReadOnly(Sequence[IterationRecord]):
    """A list seen through the Sequence protocol only; slices are tuples."""

    __slots__ = ("_items",)

    def __init__(self, items: list[IterationRecord]) -> None:
        self._items = items

    @overload
    def __getitem__(self, index: int) -> IterationRecord: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[IterationRecord, ...]: ...
    def __getitem__(self, index: int | slice) -> IterationRecord | tuple[IterationRecord, ...]:
        if isinstance(index, slice):
            return tuple(self._items[index])
        return self._items[index]

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[IterationRecord]:
        return iter(self._items)

    def __reversed__(self) -> Iterator[IterationRecord]:
        return reversed(self._items)


class Loop:
    """The running loop, as plugins see it: read its state, emit events, ask for a restart or a
    stop, annotate the current iteration, and run the tests again.

    Everything here is public API for plugins; the engine's internals are not.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    # --- what the loop is --------------------------------------------------------------------

    @property
    def config(self) -> LoopctlConfig:
        return self._engine.loaded.config

    @property
    def workdir(self) -> Path:
        return self._engine.workdir

    @property
    def state_dir(self) -> Path:
        return self._engine.state_dir

    @property
    def original_goal(self) -> str:
        """The goal exactly as the user wrote it; it never changes during a run."""
        return self._engine.state.original_goal

    @property
    def goal(self) -> str:
        """The working goal: the original goal unless a plugin keeps notes in it."""
        return self._engine.state.goal

    def set_working_goal(self, text: str, *, source: str) -> None:
        """Replace the working goal (``goal`` in loop-state.md). The original goal cannot be
        changed; this is where plugins keep notes beside it."""
        self._engine.state.goal = text
        self.emit("loop.working_goal_set", source=source, chars=len(text))

    @property
    def iteration(self) -> int:
        """The current (or last) iteration number, 1-based and counted across restarts."""
        return self._engine.state.iteration

    @property
    def generation(self) -> int:
        """How many session restarts happened so far."""
        return self._engine.state.generation

    @property
    def session_id(self) -> str | None:
        return self._engine.state.session_id

    @property
    def session_mode(self) -> str:
        return self._engine.state.session_mode

    @property
    def agent(self) -> AgentAdapter:
        return self._engine.agent

    @property
    def resumed(self) -> bool:
        """True when this run continues an earlier one (``loopctl resume``)."""
        return self._engine.resumed

    @property
    def start_commit(self) -> str | None:
        return self._engine.state.start_commit

    @property
    def workspace(self) -> Workspace:
        return self._engine.workspace

    @property
    def history(self) -> Sequence[IterationRecord]:
        """Every recorded iteration of this loop, oldest first: a read-only view (no copy), so
        ``loop.history[-20:]`` costs the same at iteration 10 and 10,000."""
        return _ReadOnly(self._engine.history)

    @property
    def last_record(self) -> IterationRecord | None:
        return self._engine.history[-1] if self._engine.history else None

    @property
    def last_test_run(self) -> TestRun | None:
        return self._engine.last_test_run

    @property
    def last_turn(self) -> TurnResult | None:
        return self._engine.last_turn

    def context_window(self, model: str | None = None) -> int | None:
        """The agent's context window: as the agent reported it, else from the model table."""
        turn = self._engine.last_turn
        if model is None and turn is not None and turn.context_window:
            return turn.context_window
        model = model or (turn.model if turn else None) or self._engine.agent.settings.model
        return context_window_for(model, self._engine.loaded.config.models)

    @property
    def failed_approaches(self) -> Sequence[str]:
        """The protected list of approaches that did not work; briefings never trim it."""
        return tuple(self._engine.state.extra.get("failed_approaches", []))

    @property
    def hook(self) -> Any:
        """The hook relay, for calling hooks that plugins added (``loop.hook.classify_failure``)."""
        return self._engine.host.hook

    @property
    def max_iterations(self) -> int:
        return self._engine.max_iterations

    @property
    def remaining_iterations(self) -> int:
        return max(0, self._engine.max_iterations - self._engine.state.iteration)

    # --- acting on the loop ------------------------------------------------------------------

    def emit(self, type: str, **data: Any) -> Event:
        """Record an event in ``events.jsonl`` and pass it to ``on_event`` sinks. Call it from
        the loop's thread (a hook), not from a thread of your own or an :meth:`in_background`
        task: keep what such work learns and emit it from your next hook."""
        return self._engine.emit(type, **data)

    def plugin_config(self, name: str) -> Any:
        """The typed config of plugin ``name`` (its ``register_config`` class)."""
        return self._engine.plugin_config(name)

    def request_restart(self, reason: str, message: str = "") -> None:
        """Restart the agent session after the current iteration."""
        self._engine.pending.append(Decision.restart(reason, message))

    def request_stop(self, reason: str, message: str = "") -> None:
        """Stop the loop after the current iteration with status ``reason``."""
        self._engine.pending.append(Decision.stop(reason, message))

    def veto_completion(self, reason: str, *, source: str) -> None:
        """Do not count this iteration's passing tests as completion (a flaky pass, say)."""
        self._engine.completion_veto = f"{source}: {reason}"

    def annotate(self, key: str, value: Any) -> None:
        """Attach a JSON-serialisable value to the current iteration's record."""
        record = self._engine.current_record
        if record is not None:
            record.annotations[key] = value

    def add_failed_approach(self, text: str, *, source: str) -> None:
        """Add to the protected list of failed approaches (deduplicated, kept across restarts)."""
        approaches = self._engine.state.extra.setdefault("failed_approaches", [])
        if text not in approaches:
            approaches.append(text)
            self.emit("loop.failed_approach", text=text[:500], source=source)

    def reduce_iteration_budget(self, by: int, *, reason: str) -> None:
        """Lower the remaining iteration budget (never below the next iteration)."""
        engine = self._engine
        floor = engine.state.iteration + 1
        engine.max_iterations = max(floor, engine.max_iterations - max(0, by))
        engine.state.max_iterations = engine.max_iterations
        self.emit(
            "loop.iteration_budget_reduced", max_iterations=engine.max_iterations, reason=reason
        )

    def set_value(self, key: str, value: Any) -> None:
        """Keep a small JSON value in loop-state.md (it survives resume); see :meth:`get_value`."""
        self._engine.state.extra[key] = value

    def get_value(self, key: str, default: Any = None) -> Any:
        return self._engine.state.extra.get(key, default)

    def write_file(self, name: str | Path, content: str | Callable[[], str]) -> Path:
        """Rewrite a file in the state directory atomically, off the loop's path, and return
        its path.

        The write (temp file, fsync, rename, directory fsync) happens on the engine's state
        writer thread, in submission order with the engine's own state files, so an iteration
        never waits for the disk; a crash leaves the old or the new version, never a torn one.
        Pending writes are done before a restart archives the state directory and before the
        loop ends. ``content`` may be a function returning the text: it is then called on the
        writer thread (it must not read loop state that changes). A relative ``name`` is taken
        from the state directory. A failed write is reported as a ``state.write_error`` event.
        """
        path = self._engine.state_dir / name
        self._engine.persist(path, content if callable(content) else (lambda: content))
        return path

    def in_background(self, task: Callable[[], object]) -> None:
        """Run ``task`` on the loop's background worker: in submission order, while the loop
        waits for the agent or the tests (so it does not slow the loop's own steps), and
        before the loop ends. For work a plugin need not wait for: a database insert, an
        upload. Pending tasks are done before a restart archives the state directory. A
        task that raises is reported as a ``state.write_error`` event.
        """

        tasks = self._engine.tasks
        if tasks is None:
            task()
        else:
            tasks.submit(task)

    def wait_for_background(self, timeout_s: float | None = None) -> bool:
        """Wait until the tasks given to :meth:`in_background` so far are done (at most
        ``timeout_s`` seconds); True when they are. For ``on_loop_end``, which runs before
        the loop's own final wait."""
        tasks = self._engine.tasks
        return True if tasks is None else tasks.flush(timeout_s)

    def run_tests(self, command: str | None = None, *, label: str = "rerun") -> TestRun:
        """Run the test command (or ``command``) again, now, with the run's timeout and limits.

        Its output goes to ``logs/iteration-NNNN.<label>.tests.log``: the iteration's own test
        log is never overwritten. It becomes :attr:`last_test_run`.
        """
        return self._engine.run_tests(command, log_label=_log_label(label))

    @property
    def last_snapshot(self) -> Snapshot | None:
        """The working tree as it was after the previous iteration (before this agent turn)."""
        return self._engine.last_snapshot

    def mark_not_agents_fault(self, reason: str, *, source: str) -> None:
        """This iteration failed for a reason the agent cannot fix (a flaky test, a broken
        environment): stuck detection skips it, as it does rate limits and network errors."""
        record = self._engine.current_record
        if record is not None:
            record.annotations["not_agents_fault"] = f"{source}: {reason}"
            self.emit("loop.not_agents_fault", reason=reason, source=source)

    def repair_original_goal(self, text: str, *, source: str, why: str) -> None:
        """Put back the user's goal when it was lost or changed outside loopctl (a state file
        edited on disk, a legacy file without it). Only for guards: the goal is otherwise fixed."""
        previous = self._engine.state.original_goal
        if text == previous:
            return
        self._engine.state.original_goal = text
        self.emit(
            "loop.original_goal_repaired",
            source=source,
            why=why,
            previous_chars=len(previous),
            chars=len(text),
        )

    def add_report_section(self, title: str, body: str, *, source: str) -> None:
        """Add a section to the run report (``report.md``/``report.json``)."""
        self._engine.report_sections.append(ReportSection(title, body, source))


class Engine:
    """Runs one loop. Build it with :func:`loopctl.runner.prepare` (which loads config and
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
        supervision: Any = None,
    ) -> None:
        self.loaded = loaded
        self.host = host
        self.agent = agent
        self.workdir = workdir
        self.state_dir = state_dir
        self.resumed = resume
        self.view = on_event
        self.loop = Loop(self)
        config = loaded.config
        self.max_iterations = config.limits.max_iterations
        self.history: list[IterationRecord] = []
        self.pending: list[Decision] = []
        self.report_sections: list[ReportSection] = []
        self.last_test_run: TestRun | None = None
        self.last_turn: TurnResult | None = None
        self.current_record: IterationRecord | None = None
        self.completion_veto: str | None = None
        self.outcome: LoopOutcome | None = None
        self.workspace = Workspace(workdir, ignore=_ignored_paths(workdir, state_dir))
        self.stuck = StuckDetector(window=config.stuck.window, exempt=config.stuck.exempt)
        self._supervision = supervision
        self._plugin_configs: dict[str, Any] = {}
        self._config_classes: dict[str, tuple[Any, str]] = {}
        self._in_event_hook = False
        self._lock = st.StateLock(state_dir)
        self._events: st.JsonlAppender | None = None
        self._iterations: st.JsonlAppender | None = None
        self._crashes = 0
        self.last_snapshot: Snapshot | None = None
        self._writer: BackgroundWriter | None = None
        self._tasks: BackgroundWriter | None = None
        #: Set while the loop waits for the agent or the tests: background work may run then.
        self._waiting = threading.Event()
        self._waiting.set()
        self._opened = False
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loopctl-snapshot")
        #: The last rows of iterations.jsonl, already unstructured, for progress.md.
        self._recent_rows: deque[dict[str, Any]] = deque(maxlen=20)
        self._tokens_total = 0
        self._cost_total = 0.0
        self._started_monotonic = time.monotonic()
        self._wall_clock_used_before = 0.0
        self.state = self._initial_state(goal)

    # --- setup ---------------------------------------------------------------------------------

    def _initial_state(self, goal: str | None) -> st.LoopState:
        config = self.loaded.config
        if self.resumed:
            return st.LoopState(goal="", original_goal="")  # read from disk in _open_state
        if goal is None or not goal.strip():
            raise LoopError("the goal is empty: give it as an argument or with --goal-file FILE")
        return st.LoopState(
            goal=goal,
            original_goal=goal,  # captured once, before the first state write
            session_mode=config.session,
            agent=self.agent.name,
            test_cmd=config.test_cmd or "",
            max_iterations=config.limits.max_iterations,
            workdir=str(self.workdir),
            loopctl_version=__version__,
        )

    def plugin_config(self, name: str) -> Any:
        if name not in self._plugin_configs:
            entry = self._config_classes.get(name)
            if entry is None:
                raise KeyError(f"no plugin registered a config section named {name!r}")
            self._plugin_configs[name] = self.loaded.plugin_section(name, entry[0])
        return self._plugin_configs[name]

    def validate_plugin_configs(self) -> None:
        """Structure every enabled plugin's section now, so a bad key fails before the loop."""
        self._config_classes = self.host.collect_named("register_config", "config section")
        for name in self._config_classes:
            self.plugin_config(name)
        for name in sorted(set(self.loaded.config.plugins.sections) - set(self._config_classes)):
            info = self.host.infos.get(name)
            where = (
                "no plugin by that name is installed"
                if info is None
                else f"plugin {name!r} is {info.status} or has no config"
            )
            self.loaded.warnings.append(f"the config has a [plugins.{name}] section, but {where}")

    def open(self) -> None:
        """Take the state directory: check it, lock it, and load or start the loop's state.

        Called by :func:`loopctl.runner.prepare`, so every problem (a file in the way, another
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
        except OSError as exc:
            raise LoopError(
                f"cannot write the state directory {self.state_dir}: {exc.strerror or exc}; "
                "choose another with --state-dir"
            ) from exc
        self._lock.acquire()
        try:
            st.remove_stale_temp_files(self.state_dir)  # left by a loop killed mid-write
            self._end_orphaned_agent()
            if self.resumed:
                self._load_previous_run()
            else:
                self._start_new_run()
        except BaseException:
            self._lock.release()
            raise
        self._events = st.JsonlAppender(self.state_dir / st.EVENTS_FILE)
        self._iterations = st.JsonlAppender(self.state_dir / st.ITERATIONS_FILE)
        self._writer = BackgroundWriter(waiting=self._waiting)
        self._tasks = BackgroundWriter("loopctl-plugin-tasks", waiting=self._waiting)
        (self.state_dir / st.LOGS_DIR).mkdir(exist_ok=True)
        self.state.pid = os.getpid()
        if self.state.status != "restarting":
            self.state.status = "running"
        self._write_state()
        self.last_snapshot = self.workspace.snapshot()
        self._opened = True

    def _end_orphaned_agent(self) -> None:
        """An agent runs in its own session, so it outlives a loopctl killed with SIGKILL. The
        lock is ours now, so that loop is gone: end its agent before another one starts."""
        from loopctl.agents.supervisor import end_orphaned_group

        try:
            recorded = st.read_loop_state(self.state_dir / st.LOOP_STATE_FILE).extra.get(
                "agent_process"
            )
        except st.StateError:
            return
        if (
            isinstance(recorded, list)
            and len(recorded) == 2
            and all(isinstance(v, int) for v in recorded)
        ) and end_orphaned_group(recorded[0], recorded[1]):
            self.loaded.warnings.append(
                f"ended the agent (process group {recorded[0]}) a killed loop left running"
            )

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
                raise LoopError(
                    f"{self.state_dir} holds an unfinished loop (status {old!r}); continue it "
                    "with `loopctl resume`, or start over with --fresh-state"
                )
            for name in (
                st.EVENTS_FILE,
                st.ITERATIONS_FILE,
                st.ERROR_SUMMARY_FILE,
                st.CONTEXT_SUMMARY_FILE,
            ):
                (self.state_dir / name).unlink(missing_ok=True)
        self.state.start_commit = self.workspace.head()
        self.state.started_at = round(time.time(), 3)

    def _load_previous_run(self) -> None:
        state_file = self.state_dir / st.LOOP_STATE_FILE
        if not state_file.exists():
            raise LoopError(f"nothing to resume: {state_file} does not exist")
        self.state = st.read_loop_state(state_file)
        if self.state.status == StopStatus.COMPLETE.value:
            raise LoopError(
                f"the loop in {self.state_dir} is complete; start a new one with `loopctl run`"
            )
        read = st.read_jsonl(self.state_dir / st.ITERATIONS_FILE)
        self.loaded.warnings.extend(read.problems)
        for raw in read.records:
            try:
                self.history.append(records.structure_record(raw))
            except ValueError as exc:
                self.loaded.warnings.append(f"iterations.jsonl: skipped a record ({exc})")
        self.state.iteration = (
            self.history[-1].iteration if self.history else 0
        )  # redo the one in flight
        if self.loaded.origins.get("limits.max_iterations", "default") == "default":
            self.max_iterations = self.state.max_iterations or self.max_iterations
        self.state.max_iterations = self.max_iterations
        self._recent_rows.extend(read.records[-20:])
        for record in self.history:
            self._tokens_total += record.agent.usage.total_tokens
            self._cost_total += record.agent.cost_usd or 0.0
        self._wall_clock_used_before = float(self.state.extra.get("wall_clock_used_s", 0.0))
        self.stuck.restore(self.history, int(self.state.extra.get("stuck_level", 0)))

    # --- events ------------------------------------------------------------------------------

    def emit(self, type: str, **data: Any) -> Event:
        event = Event(
            type=type, ts=round(time.time(), 3), data=data, iteration=self.state.iteration or None
        )
        if self._events is not None:
            self._events.append(event.to_json())
        if self.view is not None:
            self.view(event)
        if not self._in_event_hook:
            self._in_event_hook = True
            try:
                self.host.hook.on_event(event=event)
            finally:
                self._in_event_hook = False
        return event

    def _on_plugin_failure(self, failure: HookFailure) -> None:
        from loopctl.pluginhost import print_failure

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
        never escapes; Ctrl-C and SIGTERM end it with status ``interrupted``."""
        self.host.error_sink = self._on_plugin_failure
        self.open()
        outcome: LoopOutcome | None = None
        try:
            with _sigterm_as_interrupt():
                self.emit(
                    "loop.resume" if self.resumed else "loop.start",
                    goal=self.state.original_goal[:2000],
                    agent=self.agent.name,
                    test_cmd=self.state.test_cmd,
                    session_mode=self.state.session_mode,
                    max_iterations=self.max_iterations,
                    plugins=self.host.enabled_names(),
                )
                for warning in self.loaded.warnings:
                    self.emit("loop.warning", message=warning)
                if self.state.status == "restarting":  # died in the middle of a restart
                    self._finish_restart(
                        str(self.state.extra.get("restart_reason", "restart")),
                        str(self.state.extra.get("restart_message", "")),
                    )
                self.host.hook.on_loop_start(loop=self.loop)
                outcome = self._iterate()
        except KeyboardInterrupt:
            outcome = self._outcome(
                StopStatus.INTERRUPTED.value, "interrupted", "stopped by Ctrl-C or SIGTERM"
            )
        finally:
            if outcome is None:  # an engine bug: still leave valid state and a report behind
                outcome = self._outcome(
                    StopStatus.AGENT_ERROR.value,
                    "engine_error",
                    "loopctl failed unexpectedly; see the traceback",
                )
            self._finish(outcome)
        return outcome

    def _outcome(self, status: str, reason: str, message: str) -> LoopOutcome:
        return LoopOutcome(
            status=status,
            reason=reason,
            message=message,
            iterations=self.state.iteration,
            restarts=self.state.generation,
        )

    def _finish(self, outcome: LoopOutcome) -> None:
        self.outcome = outcome
        self.state.status = outcome.status
        self.state.reason = outcome.message or outcome.reason
        self._save_clock()
        try:
            self.host.hook.on_loop_end(loop=self.loop, outcome=outcome)
        except KeyboardInterrupt:
            pass
        self.emit(
            "loop.end",
            status=outcome.status,
            reason=outcome.reason,
            message=outcome.message,
            exit_code=outcome.exit_code,
            iterations=outcome.iterations,
            restarts=outcome.restarts,
        )
        self._background.shutdown(wait=True)
        from loopctl.report import write_report

        write_report(self)  # before the final status: a kill in between leaves a resumable loop
        self._write_state()
        for worker in (self._tasks, self._writer):  # tasks first: they may write files
            if worker is not None:
                worker.close()
        self._report_write_errors()
        self._writer = self._tasks = None
        for appender in (self._events, self._iterations):
            if appender is not None:
                appender.close()
        self._lock.release()

    def elapsed_s(self) -> float:
        return self._wall_clock_used_before + (time.monotonic() - self._started_monotonic)

    def _save_clock(self) -> None:
        self.state.extra["wall_clock_used_s"] = round(self.elapsed_s(), 3)
        self.state.extra["stuck_level"] = int(self.stuck.level)

    def _limit_reached(self) -> LoopOutcome | None:
        limits = self.loaded.config.limits
        if self.state.iteration >= self.max_iterations:
            return self._outcome(
                StopStatus.MAX_ITERATIONS.value,
                "max_iterations",
                f"reached the iteration limit ({self.max_iterations}) without meeting the goal",
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
            return self._outcome(
                StopStatus.BUDGET.value,
                "max_cost_usd",
                f"spent ${self._cost_total:.2f}, over the budget of ${limits.max_cost_usd:.2f}",
            )
        return None

    def _iterate(self) -> LoopOutcome:
        self._waiting.clear()  # background work waits for the loop to wait
        try:
            return self._iterate_until_the_end()
        finally:
            self._waiting.set()

    @contextmanager
    def _wait_window(self) -> Iterator[None]:
        """The loop is about to wait (agent, tests, a rate limit): background work may run."""
        was_set = self._waiting.is_set()
        self._waiting.set()
        try:
            yield
        finally:
            if not was_set:
                self._waiting.clear()

    def _iterate_until_the_end(self) -> LoopOutcome:
        while True:
            limit = self._limit_reached()
            if limit is not None:
                return limit
            decision = self._one_iteration()
            if decision.action is Action.STOP:
                status = (
                    decision.reason if decision.reason in _STATUSES else StopStatus.PLUGIN.value
                )
                return self._outcome(status, decision.reason, decision.message)
            if decision.action is Action.RESTART:
                limit = self._limit_reached()
                if limit is not None:  # no point in a fresh session the loop cannot use
                    return limit
                if self.state.generation >= self.loaded.config.limits.max_restarts:
                    return self._outcome(
                        StopStatus.MAX_RESTARTS.value,
                        decision.reason,
                        f"a restart was needed ({decision.reason}) but all "
                        f"{self.loaded.config.limits.max_restarts} restarts are used up",
                    )
                self._restart(decision.reason, decision.message)

    def _one_iteration(self) -> Decision:
        self.state.iteration += 1
        self.pending.clear()
        self.completion_veto = None
        started = time.time()
        iteration = self.state.iteration
        self.emit(
            "iteration.start", generation=self.state.generation, session_id=self.state.session_id
        )
        self.host.hook.before_iteration(loop=self.loop)

        composed = self._compose_prompt()
        self._log(st.log_name(iteration, "prompt.md"), composed.text)
        self.emit(
            "agent.start",
            agent=self.agent.name,
            prompt_chars=len(composed.text),
            trimmed=composed.trimmed,
        )
        turn = self._run_agent(composed.text, iteration)
        self.state.extra.pop("agent_process", None)
        self.last_turn = turn
        if turn.session_id:
            self.state.session_id = turn.session_id
        summary = AgentSummary.from_turn(turn)
        self._tokens_total += summary.usage.total_tokens
        self._cost_total += turn.cost_usd or 0.0
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
        )
        agent_decision = self._agent_error_decision(turn)
        if agent_decision is not None and agent_decision.reason == "rate_limit_retry":
            self.state.iteration -= 1  # the waited-out iteration is tried again
            return agent_decision
        if agent_decision is not None and agent_decision.action is Action.STOP:
            record = self._record(
                iteration, started, summary, None, composed, self.workspace.snapshot()
            )
            return self._conclude(record, agent_decision)

        # The snapshot (a git subprocess) runs while the tests run: the engine's own work then
        # costs almost nothing on top of the agent and the test command.
        snapshot = self._background.submit(self.workspace.snapshot)
        test_run = self.run_tests(None)
        record = self._record(iteration, started, summary, test_run, composed, snapshot.result())
        self.current_record = record
        self._write_error_summary(test_run)
        if test_run.passed and turn.outcome.ok:
            self.host.hook.on_success(loop=self.loop, record=record)
        else:
            self.host.hook.on_failure(loop=self.loop, record=record)

        decisions: list[Decision] = list(self.pending)
        results = self.host.hook.after_iteration(loop=self.loop, record=record)
        decisions.extend(d for d in results if isinstance(d, Decision))
        own = agent_decision or self._engine_decision(record, test_run, turn)
        if own is not None:
            decisions.append(own)
        return self._conclude(record, _strongest(decisions))

    def _conclude(self, record: IterationRecord, decision: Decision) -> Decision:
        record.decision = decision.action.value
        record.reason = decision.reason
        record.duration_s = round(time.time() - record.started_at, 3)
        self.history.append(record)
        assert self._iterations is not None
        row = records.unstructure_record(record)
        self._iterations.append(row)  # visible to readers and safe from a kill at once
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
        self._write_state()
        self.current_record = None
        return decision

    # --- the parts of an iteration -----------------------------------------------------------

    def _compose_prompt(self) -> ComposedPrompt:
        sections: list[PromptSection] = []
        for result in self.host.hook.compose_prompt(loop=self.loop):
            items = result if isinstance(result, (list, tuple)) else [result]
            sections.extend(s for s in items if isinstance(s, PromptSection))
        return compose(sections, self.loaded.config.prompt.budget_chars)

    def _run_agent(self, prompt: str, iteration: int) -> TurnResult:
        from loopctl.agents.supervisor import Supervision, process_start_time, run_turn

        limits = self.loaded.config.limits
        supervision = self._supervision or Supervision(
            timeout_s=limits.agent_timeout_s, idle_timeout_s=limits.idle_timeout_s
        )
        resume = self.state.session_mode == "resume" and self.state.session_id
        request = TurnRequest(
            prompt=prompt,
            workdir=self.workdir,
            iteration=iteration,
            session_id=self.state.session_id if resume else None,
        )

        def on_message(message: AgentMessage) -> Decision | None:
            decision = self.host.hook.on_agent_message(loop=self.loop, message=message)
            if isinstance(decision, Decision):
                self.pending.append(decision)
                self.emit("agent.turn_stopped", reason=decision.reason, message=decision.message)
                return decision
            return None

        def on_start(pgid: int) -> None:
            self.state.extra["agent_process"] = [pgid, process_start_time(pgid)]
            self._write_state()

        env = {
            **withheld_environment(self.loaded.config.withhold_env),
            "LOOPCTL_ITERATION": str(iteration),
            "LOOPCTL_STATE_DIR": str(self.state_dir),
        }
        transcript = self.state_dir / st.LOGS_DIR / st.log_name(iteration, "agent.jsonl")
        try:
            with self._wait_window():
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
                outcome=TurnOutcome(ErrorKind.CRASHED, f"cannot start the agent: {exc}"),
                started=False,
            )

    def run_tests(self, command: str | None, *, log_label: str = "") -> TestRun:
        from loopctl.testcmd import run_test_command

        limits = self.loaded.config.limits
        command = command or self.state.test_cmd
        labelled = {"label": log_label} if log_label else {}
        self.emit("tests.start", command=command, **labelled)
        with self._wait_window():
            result = run_test_command(
                command,
                cwd=self.workdir,
                timeout_s=limits.test_timeout_s,
                output_limit=limits.test_output_bytes,
                base_env=withheld_environment(self.loaded.config.withhold_env),
            )
        kind = f"{log_label}.tests.log" if log_label else "tests.log"
        self._log(st.log_name(self.state.iteration, kind), result.output)
        self.last_test_run = result
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
        composed: ComposedPrompt,
        snapshot: Snapshot,
    ) -> IterationRecord:
        changed = self.workspace.changed_files(self.last_snapshot, snapshot)
        self.last_snapshot = snapshot
        return IterationRecord(
            iteration=iteration,
            generation=self.state.generation,
            started_at=round(started, 3),
            tests_passed=bool(test_run and test_run.passed),
            test_exit_code=test_run.exit_code if test_run else None,
            error_count=len(test_run.error_lines) if test_run else 0,
            error_fingerprint=test_run.fingerprint if test_run else "",
            failing_tests=list(test_run.failing_tests) if test_run else [],
            changed_files=changed[:200],
            commit=snapshot.commit,
            tree_hash=snapshot.tree_hash,
            agent=summary,
            prompt_chars=len(composed.text),
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
            return Decision.stop(
                StopStatus.AUTH.value,
                f"the agent cannot work until this is fixed ({kind.value}): {message}",
            )
        if not turn.started:
            return Decision.stop(StopStatus.AGENT_ERROR.value, message)
        if kind is ErrorKind.RATE_LIMIT:
            return self._wait_for_rate_limit(turn)
        if kind in (ErrorKind.CRASHED, ErrorKind.INVALID_OUTPUT, ErrorKind.UNKNOWN):
            self._crashes += 1
            if self._crashes > self.loaded.config.limits.max_agent_crashes:
                return Decision.stop(
                    StopStatus.AGENT_ERROR.value,
                    f"the agent failed {self._crashes} times in a row; last error: {message}",
                )
            return Decision.restart("agent_crash", f"the agent failed ({kind.value}): {message}")
        if kind is ErrorKind.CONTEXT_OVERFLOW:
            return Decision.restart(
                "context_exhaustion", f"the agent ran out of context: {message}"
            )
        return None  # timeouts, network, max_turns, budget: the tests decide

    def _wait_for_rate_limit(self, turn: TurnResult) -> Decision:
        attempts = int(self.state.extra.get("rate_limit_waits", 0))
        self.state.extra["rate_limit_waits"] = attempts + 1
        now = time.time()
        if turn.outcome.retry_at is not None:
            wait = max(1.0, turn.outcome.retry_at - now)
        else:
            wait = RATE_LIMIT_BACKOFF_S[min(attempts, len(RATE_LIMIT_BACKOFF_S) - 1)]
        left_in_budget = self.loaded.config.limits.wall_clock_s - self.elapsed_s()
        until = time.strftime("%H:%M:%S", time.localtime(now + wait))
        if wait >= left_in_budget:
            return Decision.stop(
                StopStatus.WALL_CLOCK.value,
                f"rate limited until {until}, after the wall-clock budget ends",
            )
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
        return Decision.proceed("rate_limit_retry")

    def _engine_decision(
        self, record: IterationRecord, test_run: TestRun, turn: TurnResult
    ) -> Decision | None:
        if test_run.passed and turn.outcome.ok:
            if self.completion_veto:
                self.emit("loop.completion_vetoed", reason=self.completion_veto)
            elif self._completion_signalled(turn):
                return Decision.stop(StopStatus.COMPLETE.value, "the tests pass")
            else:
                self.emit(
                    "loop.completion_signal_missing", signal=self.loaded.config.completion_signal
                )
        if not self.loaded.config.stuck.enabled:
            return None
        infrastructure = (
            turn.outcome.error_kind in INFRASTRUCTURE_ERRORS
            or "not_agents_fault" in record.annotations
        )
        escalation = self.stuck.observe(
            record, error_lines=test_run.error_lines, infrastructure=infrastructure
        )
        if escalation is Escalation.NONE:
            return None
        summary = (
            test_run.error_lines[0] if test_run.error_lines else ", ".join(record.failing_tests[:3])
        )
        first = record.iteration - self.stuck.streak + 1
        self.loop.add_failed_approach(
            f"iterations {first}-{record.iteration} kept failing with: {summary[:300]}",
            source=ENGINE,
        )
        self.emit(
            "loop.stuck",
            escalation=escalation.name.lower(),
            streak=self.stuck.streak,
            fingerprint=record.error_fingerprint,
        )
        if escalation is Escalation.NUDGE:
            self.state.extra["stuck_nudge"] = summary[:500]
            return None
        if escalation is Escalation.RESTART:
            return Decision.restart(
                StopStatus.STUCK.value,
                f"the same failure {self.stuck.streak} times in a row, even after a nudge",
            )
        return Decision.stop(
            StopStatus.STUCK.value,
            f"the same failure {self.stuck.streak} times in a row, through a nudge and a restart: {summary[:300]}",
        )

    def _completion_signalled(self, turn: TurnResult) -> bool:
        wanted = self.loaded.config.completion_signal
        return not wanted or any(line.strip() == wanted for line in turn.final_text.splitlines())

    # --- restarts ----------------------------------------------------------------------------

    def _restart(self, reason: str, message: str) -> None:
        self.state.status = "restarting"
        self.state.extra["restart_reason"] = reason
        self.state.extra["restart_message"] = message
        self._write_state()
        self._finish_restart(reason, message)

    def _finish_restart(self, reason: str, message: str) -> None:
        number = self.state.generation + 1
        for worker in (self._tasks, self._writer):  # the archive holds the generation's last word
            if worker is not None:
                worker.flush()
        archive = st.archive_restart(self.state_dir, number)
        (self.state_dir / st.LOGS_DIR).mkdir(exist_ok=True)
        self.state.generation = number
        self.state.session_id = None
        self.state.status = "running"
        for key in ("restart_reason", "restart_message", "stuck_nudge"):
            self.state.extra.pop(key, None)
        self._write_state()
        self.emit(
            "loop.restart", number=number, reason=reason, message=message, archive=str(archive)
        )
        restart = Restart(number=number, reason=reason, message=message, archive_dir=archive)
        self.host.hook.on_restart(loop=self.loop, restart=restart)

    # --- state files -------------------------------------------------------------------------

    @property
    def tasks(self) -> BackgroundWriter | None:
        """The plugins' background worker (None before the loop opens and after it ends)."""
        return self._tasks

    def persist(self, path: Path, render: Callable[[], str]) -> None:
        """Atomically rewrite ``path`` with ``render()``'s text, both done by the background
        writer (synchronously before the writer exists or after it closed)."""
        if self._writer is None:
            st.atomic_write_text(path, render())
        else:
            self._writer.submit(lambda: st.atomic_write_text(path, render()), key=path)

    def _write_state(self) -> None:
        self.state.updated_at = round(time.time(), 3)
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
        )

    def _write_progress(self) -> None:
        rows = list(self._recent_rows)
        goal, status = self.state.original_goal, self.state.status
        self.persist(  # rendered on the writer thread from these copies
            self.state_dir / st.PROGRESS_FILE,
            lambda: st.render_progress(rows, goal=goal, status=status),
        )

    def _log(self, name: str, text: str) -> None:
        """Write ``logs/NAME`` for people debugging a run, off the loop's path when it can."""
        path = self.state_dir / st.LOGS_DIR / name
        if self._writer is None:
            _write_log(path, text)
        else:
            self._writer.submit(lambda: _write_log(path, text))

    def _report_write_errors(self) -> None:
        for worker in (self._writer, self._tasks):
            if worker is not None and worker.errors:
                errors, worker.errors = worker.errors, []
                for error in errors:
                    self.emit("state.write_error", error=error)


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
        f"Iteration {state.iteration} of {engine.max_iterations}, restarts {state.generation}.",
    ]
    if last is not None:
        verdict = "passed" if last.tests_passed else f"failed ({len(last.failing_tests)} failing)"
        lines.append(f"Last tests {verdict}; decision: {last.decision} {last.reason}".rstrip())
    return "\n".join(lines) + "\n"


def _log_label(label: str) -> str:
    """``label`` made safe for a file name (``rerun`` when nothing is left of it)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:40].strip("-") or "rerun"


def _write_log(path: Path, text: str) -> None:
    """Logs are for people debugging a run: best effort, never a reason to stop the loop."""
    try:
        path.write_text(text, encoding="utf-8", errors="replace")
    except OSError:
        pass


def _ignored_paths(workdir: Path, state_dir: Path) -> tuple[str, ...]:
    try:
        return (str(state_dir.resolve().relative_to(workdir.resolve())),)
    except ValueError:
        return ()


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """Treat SIGTERM like Ctrl-C, so ``kill`` also ends the loop gracefully (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
