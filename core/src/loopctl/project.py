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

from loopctl.configfile import RawSettings
from loopctl.withhold import set_withheld

if TYPE_CHECKING:  # a plugin's command imports this module: only what it uses is loaded
    import pluggy

    from loopctl import state as st
    from loopctl.config import LoadedConfig
    from loopctl.model import IterationRecord
    from loopctl.pluginhost import PluginHost

T = TypeVar("T")

#: The defaults of the settings a :class:`Project` reads, for when no source sets them (a test
#: checks them against the typed configuration's).
DEFAULTS: dict[tuple[str, ...], Any] = {
    ("state_dir",): ".loopctl",
    ("limits", "max_restarts"): 3,
    ("limits", "test_output_bytes"): 1_000_000,
    ("required_plugins",): (),
    ("withhold_env",): (),
}


class Project:
    """The project in a directory: its typed configuration (``loopctl.toml`` or
    ``[tool.loopctl]``, ``LOOPCTL_*`` variables) and its enabled plugins. Build it with
    :func:`load_project`.

    The configuration is read as far as what is asked for needs: a setting no source sets is
    its default, without loading (and checking) the whole typed configuration, which costs a
    command's start-up about 20 ms; it is loaded the first time a setting that is set, or a
    plugin section that is written, is read, and a problem in it is then a
    :class:`loopctl.ConfigError`. The plugins are chosen by the plugin switches, as
    ``loopctl plugins list`` chooses them.

    .. versionchanged:: 0.2
       The configuration is read when it is used, not all of it in :func:`load_project`.
    """

    def __init__(
        self,
        workdir: Path,
        loaded: LoadedConfig | None = None,
        *,
        config_file: Path | None = None,
        trust_config: bool = False,
    ) -> None:
        #: The project directory.
        self.workdir = workdir
        #: Whether the config file is trusted (``--trust-config``): see :meth:`untrusted_setting`.
        self.trust_config = trust_config
        self._config_file = config_file
        #: What the sources set, as written: None once the typed configuration is there.
        self._raw: RawSettings | None = None
        if loaded is not None:
            self._loaded = loaded
        else:
            self._raw = RawSettings(workdir, config_file=config_file)

    @functools.cached_property
    def _loaded(self) -> LoadedConfig:
        """The whole typed configuration (read and checked on first use)."""
        from loopctl.config import load_config

        env = self._raw.env if self._raw is not None else None  # what the raw reads saw
        loaded = load_config(self.workdir, config_file=self._config_file, env=env)
        self._raw = None
        return loaded

    def _setting(self, *key: str) -> Any:
        """The setting ``key``: its default when no source sets it, else the typed value."""
        if self._raw is not None and not self._raw.sets(*key):
            return DEFAULTS[key]
        value: Any = self._loaded.config
        for part in key:
            value = getattr(value, part)
        return value

    @property
    def state_dir(self) -> Path:
        """Where the project's loops keep their state (``state_dir``, default ``.loopctl``),
        as an absolute path. Unless the config is trusted, a state directory that leads out of
        the project (an absolute ``state_dir`` the config file sets, a ``..``, a symbolic link)
        raises :class:`loopctl.UntrustedConfig`; one a ``LOOPCTL_*`` variable sets never does.

        .. versionchanged:: 0.3
           A read-only command no longer follows the config file's state directory out of the
           project.
        """
        configured = Path(self._setting("state_dir"))
        path = configured if configured.is_absolute() else self.workdir / configured
        if not self.trust_config and not self._set_by_environment("state_dir"):
            self._refuse_outside(path, "state_dir", instead="--state-dir DIR")
        return path

    def untrusted_setting(self, *key: str) -> str | None:
        """Where the project's config file sets ``key`` (``"plugins", "my-plugin", "url"``),
        as messages name it (``loopctl.toml: plugins.my-plugin.url``), when the config is not
        trusted and it is the file, not a ``LOOPCTL_*`` variable, that gives the setting its
        value; None otherwise. A read-only command runs no program, opens no database and
        writes no file that such a setting names: it raises :class:`loopctl.UntrustedConfig`
        instead, which asks for the value on the command line or for ``--trust-config``.

        .. versionadded:: 0.3
        """
        if self.trust_config or (self._raw is not None and not self._raw.sets(*key)):
            return None
        from loopctl.config.errors import dotted_path
        from loopctl.trust import config_file_setting

        return config_file_setting(self._loaded, dotted_path(key))

    def _set_by_environment(self, *key: str) -> bool:
        if self._raw is not None:
            return self._raw.set_in_env(*key)
        from loopctl.config.errors import dotted_path

        return (self._loaded.origins.get(dotted_path(key)) or "").startswith("env ")

    def _refuse_outside(self, path: Path, key: str, *, instead: str) -> None:
        """Raise UntrustedConfig when ``path`` (the setting ``key``'s, or its default's) leads
        out of the project."""
        from loopctl.trust import UntrustedConfig, outside, project_roots

        config_file = self._raw.path if self._raw is not None else self._loaded.file
        real = outside(path, project_roots(self.workdir, config_file))
        if real is not None:
            where = self.untrusted_setting(key) or f"the default {key} {path}"
            raise UntrustedConfig(where, f"leads outside the project (to {real})", instead=instead)

    @property
    def max_restarts(self) -> int:
        """The session restarts a loop of this project allows (``limits.max_restarts``)."""
        value: int = self._setting("limits", "max_restarts")
        return value

    @property
    def test_output_bytes(self) -> int:
        """How much of a test run's output a loop of this project keeps, its first fifth and
        its end (``limits.test_output_bytes``): a command that reads a raw test log can look
        at what a loop would have seen.

        .. versionadded:: 0.2
        """
        value: int = self._setting("limits", "test_output_bytes")
        return value

    def plugin_config(self, name: str, cls: type[T]) -> T:
        """Plugin ``name``'s section (``[plugins.NAME]``) structured into its config class
        ``cls`` (defaults when absent). Raises :class:`loopctl.ConfigError` naming the key."""
        absent = self._raw is not None and not self._raw.sets("plugins", name)
        if absent and hasattr(cls, "__attrs_attrs__"):  # an attrs class, as structuring needs
            try:
                return cls()  # what structuring an absent (empty) section gives
            except Exception:  # noqa: BLE001 - structuring says what is wrong, naming the key
                pass
        return self._loaded.plugin_section(name, cls)

    @functools.cached_property
    def _host(self) -> PluginHost:
        from loopctl.pluginhost import build_host, switches_host

        if self._raw is None:
            host = build_host(self._loaded)
        else:
            host = switches_host(
                self.workdir,
                config_file=self._config_file,
                required=self._setting("required_plugins"),
            )
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


def load_project(
    workdir: Path | None = None, *, config_file: Path | None = None, trust_config: bool = False
) -> Project:
    """The project in ``workdir`` (default: the working directory), with its configuration
    read as ``loopctl run`` reads it (``config_file`` in place of the discovered one), as far
    as it is used (:class:`Project`). Its ``withhold_env`` becomes the process's:
    :func:`loopctl.redact` masks those variables' values and :func:`loopctl.child_environment`
    leaves them out. Raises :class:`loopctl.ConfigError` with one line per problem: for a
    config file that is missing, cannot be read or is not TOML, and, when ``withhold_env`` is
    set, for a problem in any setting.

    The config file is not trusted (:meth:`Project.untrusted_setting`) unless
    ``trust_config`` is true: a command's ``--trust-config``.

    .. versionchanged:: 0.3
       ``trust_config``.
    """
    workdir = (workdir or Path.cwd()).resolve()
    project = Project(workdir, config_file=config_file, trust_config=trust_config)
    set_withheld(project._setting("withhold_env"))  # the command's output masks their values too
    return project


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
    from loopctl.config import load_config
    from loopctl.pluginhost import build_host, validate_plugin_sections

    loaded = load_config(Path.cwd(), env={}, recorded=settings, recorded_in=where)
    validate_plugin_sections(loaded, build_host(loaded))
