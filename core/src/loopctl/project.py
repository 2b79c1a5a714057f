"""A project and its saved runs, as a plugin's own CLI commands see them (outside a loop).

Inside a loop a plugin has :class:`loopctl.Loop`. A command it adds with ``register_commands``
(``loopctl classify``, ``loopctl errors report``) has no loop: it calls
:func:`load_project` for the project's configuration and plugins, and reads what a run left in
its state directory through :class:`SavedRun`::

    project = loopctl.load_project()
    config = project.plugin_config("my-plugin", MyConfig)
    run = project.saved_run()
    for record in run.iterations():
        ...
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from loopctl.config import LoadedConfig, load_config
from loopctl.withhold import set_withheld

if TYPE_CHECKING:  # a plugin's command imports this module: only what it uses is loaded
    import pluggy

    from loopctl import state as st
    from loopctl.model import IterationRecord
    from loopctl.pluginhost import PluginHost

T = TypeVar("T")


class Project:
    """The project in a directory: its typed configuration (``loopctl.toml`` or
    ``[tool.loopctl]``, ``LOOPCTL_*`` variables) and its enabled plugins. Build it with
    :func:`load_project`."""

    def __init__(self, workdir: Path, loaded: LoadedConfig) -> None:
        self._loaded = loaded
        #: The project directory.
        self.workdir = workdir

    @property
    def state_dir(self) -> Path:
        """Where the project's loops keep their state (``state_dir``, default ``.loopctl``),
        as an absolute path."""
        configured = Path(self._loaded.config.state_dir)
        return configured if configured.is_absolute() else self.workdir / configured

    @property
    def max_restarts(self) -> int:
        """The session restarts a loop of this project allows (``limits.max_restarts``)."""
        return self._loaded.config.limits.max_restarts

    @property
    def test_output_bytes(self) -> int:
        """How much of a test run's output a loop of this project keeps, its first fifth and
        its end (``limits.test_output_bytes``): a command that reads a raw test log can look
        at what a loop would have seen.

        .. versionadded:: 0.2
        """
        return self._loaded.config.limits.test_output_bytes

    def plugin_config(self, name: str, cls: type[T]) -> T:
        """Plugin ``name``'s section (``[plugins.NAME]``) structured into its config class
        ``cls`` (defaults when absent). Raises :class:`loopctl.ConfigError` naming the key."""
        return self._loaded.plugin_section(name, cls)

    @functools.cached_property
    def _host(self) -> PluginHost:
        from loopctl.pluginhost import build_host

        host = build_host(self._loaded)
        host.error_sink = lambda failure: None  # kept in plugin_failures for the command to show
        return host

    @property
    def hook(self) -> pluggy.HookRelay:
        """The hook relay of the project's enabled plugins (loaded on first use), for calling
        hooks that plugins declare (``getattr(project.hook, "classify_failure", None)``). A
        plugin that raises is skipped, as in a loop, and listed in :attr:`plugin_failures`."""
        return self._host.hook

    @property
    def plugin_failures(self) -> list[str]:
        """``plugin in hook: error`` for every hook implementation that raised so far."""
        return [f"{f.plugin} in {f.hook}: {f.error}" for f in self._host.failures]

    def saved_run(self, state_dir: Path | None = None) -> SavedRun:
        """The run kept in ``state_dir`` (default: :attr:`state_dir`)."""
        return SavedRun(state_dir or self.state_dir)


def load_project(workdir: Path | None = None, *, config_file: Path | None = None) -> Project:
    """The project in ``workdir`` (default: the working directory), with its configuration
    loaded as ``loopctl run`` would (``config_file`` in place of the discovered one). Its
    ``withhold_env`` becomes the process's: :func:`loopctl.redact` masks those variables'
    values and :func:`loopctl.child_environment` leaves them out.
    Raises :class:`loopctl.ConfigError` with one line per problem."""
    workdir = (workdir or Path.cwd()).resolve()
    loaded = load_config(workdir, config_file=config_file)
    set_withheld(loaded.config.withhold_env)  # the command's output masks their values too
    return Project(workdir, loaded)


class SavedRun:
    """What a run left in its state directory, read without running anything. Every reader
    tolerates a run that is still going (files are written atomically or appended whole)."""

    def __init__(self, state_dir: Path) -> None:
        #: The run's state directory.
        self.state_dir = Path(state_dir)

    def loop_state(self) -> st.LoopState:
        """``loop-state.md``: the goals, status, iteration, restarts and plugins' values
        (``extra``). Raises :class:`loopctl.StateError` naming the file when it is missing or
        damaged."""
        from loopctl import state as st

        return st.read_loop_state(self.state_dir / st.LOOP_STATE_FILE)

    @property
    def events_path(self) -> Path:
        """``events.jsonl``: for a reader that follows the log as it grows."""
        from loopctl import state as st

        return self.state_dir / st.EVENTS_FILE

    def iterations(self, problems: list[str] | None = None) -> list[IterationRecord]:
        """Every iteration recorded in ``iterations.jsonl``, oldest first. Lines that are not
        valid records are skipped; pass a list as ``problems`` to be told which, one message
        each (``iterations.jsonl line 7: not valid JSON (torn write?)``)."""
        from loopctl import records
        from loopctl import state as st

        read = st.read_jsonl(self.state_dir / st.ITERATIONS_FILE)
        skipped = list(read.problems)
        found: list[IterationRecord] = []
        for raw in read.records:
            try:
                found.append(records.structure_record(raw))
            except ValueError as exc:
                skipped.append(f"{st.ITERATIONS_FILE}: skipped a record ({exc})")
        if problems is not None:
            problems.extend(skipped)
        return found

    def events(self, last: int | None = None) -> list[dict[str, Any]]:
        """The events of ``events.jsonl`` as JSON objects, oldest first: all of them, or the
        ``last`` N (read from the end, so cheap on a long run)."""
        from loopctl import state as st

        path = self.events_path
        if last is not None:
            return st.tail_jsonl(path, last)
        return st.read_jsonl(path).records

    def error_summary(self) -> dict[str, Any] | None:
        """``error-summary.json`` (the last test run's error lines), None when there is none.
        Raises :class:`loopctl.StateError` when it is damaged."""
        from loopctl import state as st

        return st.read_error_summary(self.state_dir / st.ERROR_SUMMARY_FILE)

    def log_path(self, iteration: int, kind: str) -> Path:
        """The path of one of an iteration's logs: ``log_path(7, "tests.log")`` is
        ``logs/iteration-0007.tests.log`` (it may not exist)."""
        from loopctl import state as st

        return self.state_dir / st.LOGS_DIR / st.log_name(iteration, kind)


__all__ = ["Project", "SavedRun", "load_project"]


def check_settings(settings: dict[str, Any], *, where: str) -> None:
    """Check ``settings``, laid out like ``loopctl.toml``, as ``loopctl run`` checks a config
    file: every key known, every value of its type, and each ``[plugins.NAME]`` section against
    the installed plugin's config class. Nothing else is read: no config file, no ``LOOPCTL_*``
    variable. For a tool that hands settings to a loop that runs elsewhere (``loopctl fleet
    submit``) and wants the mistakes now. Raises :class:`loopctl.ConfigError`, one line per
    problem, each starting with ``where`` (``tasks.toml: task[3]: limits.max_iterations: …``).

    .. versionadded:: 0.3
    """
    from loopctl.pluginhost import build_host, validate_plugin_sections

    loaded = load_config(Path.cwd(), env={}, recorded=settings, recorded_in=where)
    validate_plugin_sections(loaded, build_host(loaded))
