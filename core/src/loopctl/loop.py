"""The types plugins receive: :class:`Loop` (the running loop, passed to every hook),
:class:`LoopOutcome`, :class:`Restart` and :class:`ReportSection`.

:class:`Loop` is written against :class:`LoopDriver`, the small protocol the engine implements,
so this module (and :mod:`loopctl.hookspecs`, which names these types) never imports the
engine. Everything documented here is public API, importable from ``loopctl``; see
``docs/reference/loop.md`` for the stability rule.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, overload

import attrs
import pluggy

from loopctl.model import Event, IterationRecord, StopStatus, TestRun, TurnResult, exit_code_for
from loopctl.stash import Stash
from loopctl.state import LoopState
from loopctl.workspace import Snapshot, Workspace


@attrs.define
class Restart:
    """Passed to ``on_restart``: the restart that just happened."""

    #: 1-based: the first restart of a run is number 1.
    number: int
    #: The machine-readable reason of the decision that asked for it (``context_exhaustion``…).
    reason: str
    #: The decision's words for the user.
    message: str
    #: ``restart-N/`` in the state directory: the archived logs and files of the session that ended.
    archive_dir: Path


@attrs.define
class LoopOutcome:
    """How a run ended; passed to ``on_loop_end`` and written to the report."""

    #: A :class:`~loopctl.model.StopStatus` value (``complete``, ``max_iterations``, …).
    status: str
    #: The machine-readable reason (a plugin's own stop reason, or the status again).
    reason: str = ""
    #: Words for the user: why it stopped.
    message: str = ""
    #: Iterations run, across restarts.
    iterations: int = 0
    #: Session restarts made.
    restarts: int = 0

    @property
    def exit_code(self) -> int:
        """The exit code of ``loopctl run`` for this outcome (see the exit-codes reference)."""
        return exit_code_for(self.status)

    @property
    def complete(self) -> bool:
        """True when the goal was met (status ``complete``, exit code 0)."""
        return self.status == StopStatus.COMPLETE.value


@attrs.define
class ReportSection:
    """A section a plugin added to the run report with :meth:`Loop.add_report_section`."""

    title: str
    body: str
    #: The plugin that added it.
    source: str


class LoopDriver(Protocol):
    """What :class:`Loop` needs from whatever runs the loop; :class:`loopctl.engine.Engine`
    implements it. Not for plugins: they use :class:`Loop`."""

    @property
    def facts(self) -> RunFacts: ...
    @property
    def state(self) -> LoopState: ...
    @property
    def history(self) -> Sequence[IterationRecord]: ...
    @property
    def max_iterations(self) -> int: ...
    @property
    def last_test_run(self) -> TestRun | None: ...
    @property
    def reruns(self) -> Sequence[TestRun]: ...
    @property
    def last_turn(self) -> TurnResult | None: ...
    @property
    def last_snapshot(self) -> Snapshot | None: ...
    @property
    def stash(self) -> Stash: ...
    @property
    def hook(self) -> pluggy.HookRelay: ...
    def emit(self, type: str, **data: Any) -> Event: ...
    def plugin_config(self, name: str) -> Any: ...
    def context_window(self, model: str | None) -> int | None: ...
    def add_failed_approach(self, text: str) -> bool | None: ...
    def annotate(self, key: str, value: Any) -> None: ...
    def persist(
        self, path: Path, render: Callable[[], str], *, background: bool, durable: bool
    ) -> None: ...
    def submit_task(self, task: Callable[[], object]) -> None: ...
    def flush_tasks(self, timeout_s: float | None) -> bool: ...
    def run_tests(self, command: str | None, *, label: str) -> TestRun: ...
    def add_report_section(self, section: ReportSection) -> None: ...


@attrs.define(frozen=True)
class RunFacts:
    """What does not change while a run runs; the engine fills it in once."""

    workdir: Path
    state_dir: Path
    resumed: bool
    agent_name: str
    agent_model: str | None
    test_command: str
    completion_signal: str | None
    max_restarts: int
    workspace: Workspace


class _ReadOnly(Sequence[IterationRecord]):
    """A list seen through the Sequence protocol only; slices are tuples."""

    __slots__ = ("_items",)

    def __init__(self, items: Sequence[IterationRecord]) -> None:
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
    """The running loop, as plugins see it: what it is, what happened so far, and the few
    ways a plugin acts on it. Every hook that concerns a run receives it as ``loop``.

    Decisions (continue, restart, stop), verdicts on a failure or a pass, and prompt sections
    are hook *results*, not calls on this object: see :mod:`loopctl.hookspecs`.
    """

    __slots__ = ("_driver",)

    def __init__(self, driver: LoopDriver) -> None:
        self._driver = driver

    # --- what the run is -----------------------------------------------------------------------

    @property
    def workdir(self) -> Path:
        """The project directory the agent works in and the tests run in."""
        return self._driver.facts.workdir

    @property
    def state_dir(self) -> Path:
        """The run's state directory (``.loopctl/`` by default). A plugin keeps its own files in
        a subdirectory named after itself, written with :meth:`write_file`."""
        return self._driver.facts.state_dir

    @property
    def resumed(self) -> bool:
        """True when this run continues an earlier one (``loopctl resume``)."""
        return self._driver.facts.resumed

    @property
    def run_id(self) -> str | None:
        """This loop's id: new for each ``loopctl run``, the same across its ``loopctl resume``
        runs (kept in ``loop-state.md`` from its first write). A plugin that keeps records in
        the state directory stamps them with it, so it never counts an earlier loop's records
        (left in the same state directory) as this loop's. None for a loop started by loopctl
        0.2 or earlier, which recorded none.

        .. versionadded:: 0.3"""
        return self._driver.state.run_id

    @property
    def agent_name(self) -> str:
        """The adapter running the agent (``claude``, ``codex``, ``command`` …)."""
        return self._driver.facts.agent_name

    @property
    def agent_model(self) -> str | None:
        """The model the run asked the agent for (``--model`` or config), None for the CLI's
        default. The model a turn actually used is ``loop.last_turn.model``."""
        return self._driver.facts.agent_model

    @property
    def test_command(self) -> str:
        """The test command run after every agent turn."""
        return self._driver.facts.test_command

    @property
    def completion_signal(self) -> str | None:
        """The line the agent must end its reply with for a pass to count, if one is set."""
        return self._driver.facts.completion_signal

    @property
    def workspace(self) -> Workspace:
        """The working tree: ``is_git``, ``head()``, ``snapshot()``, ``diff_stat(base)``, and
        between two snapshots (:attr:`last_snapshot`, say) ``changed_files(before, after)`` and
        ``change_diff(before, after, paths)``: each changed file's name and its ``-``/``+``
        lines ("" when that cannot be told exactly, as without git)."""
        return self._driver.facts.workspace

    def context_window(self, model: str | None = None) -> int | None:
        """The context window of ``model`` in tokens (default: the model of the last turn, else
        the run's): as the agent reported it, else from the ``[models]`` config and the built-in
        table; None when unknown."""
        return self._driver.context_window(model)

    # --- where the run is ------------------------------------------------------------------------

    @property
    def original_goal(self) -> str:
        """The goal exactly as the user wrote it; it never changes during a run."""
        return self._driver.state.original_goal

    @property
    def goal(self) -> str:
        """The working goal: the original goal unless a plugin keeps notes in it
        (:meth:`set_working_goal`)."""
        return self._driver.state.goal

    @property
    def iteration(self) -> int:
        """The current (or last) iteration number, 1-based and counted across restarts; 0
        before the first."""
        return self._driver.state.iteration

    @property
    def restarts(self) -> int:
        """How many session restarts happened so far in this run (0 in the first session)."""
        return self._driver.state.restarts

    @property
    def generation(self) -> int:
        """Deprecated since 0.2: the same number as :attr:`restarts`, under its old name.

        .. deprecated:: 0.2 use ``loop.restarts``; ``generation`` goes in 0.3."""
        warnings.warn(
            "Loop.generation is deprecated: use Loop.restarts (the same number)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.restarts

    @property
    def session_id(self) -> str | None:
        """The agent's session id, once the agent reported one (None with ``--session fresh``
        before the first turn of an iteration)."""
        return self._driver.state.session_id

    @property
    def session_mode(self) -> str:
        """``fresh`` (a new agent session every iteration) or ``resume`` (one session until a
        restart)."""
        return self._driver.state.session_mode

    @property
    def start_commit(self) -> str | None:
        """The commit the working tree was at when the run started (None outside git)."""
        return self._driver.state.start_commit

    @property
    def max_iterations(self) -> int:
        """The iteration limit, as a plugin's budget cut may have lowered it."""
        return self._driver.max_iterations

    @property
    def remaining_iterations(self) -> int:
        """Iterations left after the current one."""
        return max(0, self.max_iterations - self.iteration)

    @property
    def max_restarts(self) -> int:
        """How many session restarts the run allows (``limits.max_restarts``)."""
        return self._driver.facts.max_restarts

    @property
    def history(self) -> Sequence[IterationRecord]:
        """Every recorded iteration of this loop, oldest first: a read-only view (no copy), so
        ``loop.history[-20:]`` costs the same at iteration 10 and 10,000. Only the last 100
        are held in memory: an older one is read back from ``iterations.jsonl`` when asked
        for (the first such read indexes the journal), so iterating over all of a long loop's
        history costs what reading its journal does; look back only as far as you need."""
        return _ReadOnly(self._driver.history)

    @property
    def last_record(self) -> IterationRecord | None:
        """The newest recorded iteration (``history[-1]``), None before the first ends."""
        history = self._driver.history
        return history[-1] if history else None

    @property
    def last_test_run(self) -> TestRun | None:
        """The test run of the current iteration once its tests ran, else of the previous one.
        Never a plugin's re-run: :meth:`run_tests` returns those and leaves this alone."""
        return self._driver.last_test_run

    @property
    def reruns(self) -> Sequence[TestRun]:
        """The re-runs plugins made (:meth:`run_tests`) of the iteration whose test run is
        :attr:`last_test_run`, oldest first; each carries its ``label``."""
        return tuple(self._driver.reruns)

    @property
    def last_turn(self) -> TurnResult | None:
        """Everything the adapter learned from the latest agent turn (tool calls, usage, final
        text), once its turn ended."""
        return self._driver.last_turn

    @property
    def last_snapshot(self) -> Snapshot | None:
        """The working tree as it was after the previous iteration (before this agent turn)."""
        return self._driver.last_snapshot

    @property
    def failed_approaches(self) -> Sequence[str]:
        """The protected list of approaches that did not work; briefings never trim it."""
        return tuple(self._driver.state.failed_approaches)

    @property
    def stuck_nudge(self) -> str | None:
        """While stuck detection is nudging the agent: the failure that keeps repeating (the
        prompt quotes it); None otherwise. Cleared by a restart."""
        return self._driver.state.stuck_nudge

    # --- plugins' own things --------------------------------------------------------------------

    @property
    def hook(self) -> pluggy.HookRelay:
        """The hook relay, for calling hooks that plugins added with ``add_hookspecs``
        (``loop.hook.classify_failure(...)``); ``getattr(loop.hook, NAME, None)`` is None when
        no installed plugin declares ``NAME``."""
        return self._driver.hook

    @property
    def stash(self) -> Stash:
        """Per-run plugin state, typed by :class:`~loopctl.StashKey`: what a plugin keeps for
        this run and nowhere else (never module globals)."""
        return self._driver.stash

    def plugin_config(self, name: str) -> Any:
        """The typed config of plugin ``name`` (the class it returned from ``register_config``);
        KeyError when no enabled plugin registered that name."""
        return self._driver.plugin_config(name)

    def set_value(self, key: str, value: Any) -> None:
        """Keep a small JSON value in ``loop-state.md``, so it survives ``loopctl resume``.
        Prefix ``key`` with the plugin's name; the engine's own state is never among these."""
        self._driver.state.extra[key] = value

    def get_value(self, key: str, default: Any = None) -> Any:
        """A value kept with :meth:`set_value` (in this run or the run it resumed)."""
        return self._driver.state.extra.get(key, default)

    # --- acting on the run ----------------------------------------------------------------------

    def emit(self, type: str, **data: Any) -> Event:
        """Record an event in ``events.jsonl`` and pass it to ``on_event`` sinks. ``type`` starts
        with the plugin's own name (``context-monitor.restart_planned``). Call it from the loop's
        thread (a hook), not from a thread of your own or an :meth:`in_background` task."""
        return self._driver.emit(type, **data)

    def annotate(self, key: str, value: Any) -> None:
        """Attach a JSON-serialisable value to the current iteration's record (between its tests
        and ``after_iteration``); does nothing outside an iteration."""
        self._driver.annotate(key, value)

    def set_working_goal(self, text: str, *, source: str) -> None:
        """Replace the working goal (``goal`` in loop-state.md), where a plugin keeps notes beside
        the goal. The original goal cannot be changed."""
        self._driver.state.goal = text
        self.emit("loop.working_goal_set", source=source, chars=len(text))

    def add_failed_approach(self, text: str, *, source: str) -> None:
        """Add to the protected list of failed approaches (kept across restarts and resume, shown
        in every prompt and briefing). A text that repeats an entry but for the iterations it
        names (``iterations 1-3 …``, then ``iterations 1-4 …``) replaces that entry in place.
        The engine itself lists every failed iteration's change (:mod:`loopctl.approaches`):
        add what it cannot know, not that the same failure repeated."""
        added = self._driver.add_failed_approach(text)
        if added is not False:
            self.emit("loop.failed_approach", text=text[:500], source=source, updated=added is None)

    def run_tests(self, command: str | None = None, *, label: str = "rerun") -> TestRun:
        """Run the test command (or ``command``) again, now, with the run's timeout, limits and
        withheld environment, and return its parsed result (``label`` set).

        Its output goes to ``logs/iteration-NNNN.<label>.tests.log``. It never replaces the
        iteration's own test run: other plugins still see that, and the next prompt shows it,
        with this re-run's verdict beside it."""
        return self._driver.run_tests(command, label=label)

    def write_file(
        self,
        name: str | Path,
        content: str | Callable[[], str],
        *,
        background: bool = True,
        durable: bool = True,
    ) -> Path:
        """Rewrite a file in the state directory atomically and return its path; a relative
        ``name`` is taken from the state directory, parents are made.

        By default the write (temp file, fsync, rename) happens on the engine's state-writer
        thread, in order with the engine's own state files, so an iteration never waits for
        the disk; pending writes are done before a restart archives the state directory and
        before the loop ends. ``content`` may be a function returning the text, called on that
        thread (it must not read loop state that changes). With ``background=False`` the file
        is written before this returns. A reader, a kill or a crash sees the old or the new
        version, never a torn one; a failed background write is reported as a
        ``state.write_error`` event, a failed immediate one raises OSError.

        ``durable=False`` skips the fsync, for a view rewritten every iteration (a plugin's
        latest verdict, say): a power cut may then lose its latest version, never tear it.
        A durable rewrite cost the writer about 1 ms per file."""
        path = self._driver.facts.state_dir / name
        render = content if callable(content) else (lambda: content)
        self._driver.persist(path, render, background=background, durable=durable)
        return path

    def in_background(self, task: Callable[[], object]) -> None:
        """Run ``task`` on the loop's background worker: in submission order, while the loop
        waits for the agent or the tests, and before the loop ends. For work a plugin need not
        wait for (a database insert, an upload). A task that raises is reported as a
        ``state.write_error`` event."""
        self._driver.submit_task(task)

    def wait_for_background(self, timeout_s: float | None = None) -> bool:
        """Wait until the tasks given to :meth:`in_background` so far are done (at most
        ``timeout_s`` seconds); True when they are. For ``on_loop_end``, which runs before the
        loop's own final wait."""
        return self._driver.flush_tasks(timeout_s)

    def add_report_section(self, title: str, body: str, *, source: str) -> None:
        """Add a section to the run report (``report.md``/``report.json``)."""
        self._driver.add_report_section(ReportSection(title, body, source))


__all__ = ["Loop", "LoopDriver", "LoopOutcome", "ReportSection", "Restart", "RunFacts"]
