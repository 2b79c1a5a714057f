"""The plugin host: finds installed plugins, decides which are enabled, loads them one at a time,
and calls their hooks so that no plugin can take down another or the loop.

Plugins are distributions with an entry point in the ``loopctl.plugins`` group whose name is the
distribution name without its ``loopctl-`` prefix::

    [project.entry-points."loopctl.plugins"]
    context-monitor = "loopctl_context_monitor.plugin"

Enabling is decided *before* import, so a disabled plugin is never imported (and a broken one
cannot break a run it is not part of). A plugin that fails to import is reported with its name and
error and skipped. Every hook implementation is wrapped so that an exception is reported (and
recorded as a ``plugin.error`` event by the engine) instead of stopping the other implementations;
``plugins.strict`` turns that off for plugin authors who want the traceback.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import threading
import time
import types
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import attrs
import pluggy

from loopctl import builtin, hookspecs, markers
from loopctl._version import DISTRIBUTION
from loopctl.agents.builtin import BUILTIN_ADAPTERS, AdapterPlugin
from loopctl.debuglog import debug
from loopctl.lazyre import lazy_compile

if TYPE_CHECKING:  # annotation only: `plugins list` must not load the typed config (attrs, cattrs)
    from loopctl.config import LoadedConfig

ENTRY_POINT_GROUP = "loopctl.plugins"
#: loopctl's own plugin that cannot be disabled: the prompt's goal, status and test sections.
CORE_PLUGIN = "core"


class PluginError(Exception):
    """A plugin problem the user must fix before a run can start (a missing required plugin,
    two plugins claiming one name). The message says which plugin and what to do."""


@attrs.define
class PluginInfo:
    """What ``loopctl plugins list`` shows for one plugin."""

    name: str
    distribution: str | None
    version: str | None
    #: enabled | disabled | broken
    status: str
    #: Why it is disabled, or the import error of a broken plugin.
    detail: str = ""
    hooks: list[str] = attrs.Factory(list)
    #: The entry point (``module:attr``) and where the distribution is installed.
    source: str = ""
    #: ``builtin`` (part of loopctl) or ``installed`` (an entry point of a distribution).
    origin: str = "installed"


@attrs.define
class PluginSelection:
    """Which plugins to load: from config (``plugins.enable``/``disable``), env and CLI flags."""

    enable: list[str] | None = None
    disable: list[str] = attrs.Factory(list)
    #: False when LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set: only allow-listed plugins load.
    autoload: bool = True
    #: ``--no-plugins``: load nothing but the built-ins.
    no_plugins: bool = False
    strict: bool = False

    @classmethod
    def from_config(cls, loaded: LoadedConfig, *, no_plugins: bool = False) -> PluginSelection:
        """The selection a loaded config (file, env, CLI) asks for."""
        plugins = loaded.config.plugins
        return cls(
            enable=plugins.enable,
            disable=list(plugins.disable),
            autoload=loaded.autoload,
            no_plugins=no_plugins,
            strict=plugins.strict,
        )

    def decide(self, name: str) -> tuple[bool, str]:
        """Whether plugin ``name`` is enabled, and if not, why (in words a user can act on)."""
        if self.no_plugins:
            return False, "--no-plugins was given"
        if name in self.disable:
            return False, "listed in plugins.disable"
        if self.enable is not None:
            if name in self.enable:
                return True, ""
            return False, "not in the plugins.enable allow-list (or LOOPCTL_PLUGINS)"
        if not self.autoload:
            return False, "LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set and it is not allow-listed"
        return True, ""


class HookFailure(NamedTuple):
    """One exception raised by a hook implementation, as reported to the error sink. (A
    NamedTuple: an attrs class costs every command that loads the plugins about 0.5 ms.)"""

    plugin: str
    hook: str
    error: str
    traceback: str
    #: The exception itself (a full disk is told apart by its errno, not its words).
    exception: BaseException | None = None


ErrorSink = Callable[[HookFailure], None]
_MAIN_THREAD = threading.main_thread().ident


class HookCall:
    """A plugin's hook implementation running on the main thread (:meth:`PluginHost.running_hook`):
    what the engine's wall-clock watchdog names and stops when it runs past the limit. (A plain
    class: each attrs class costs every command's start-up about 0.3 ms.)"""

    __slots__ = ("hook", "interrupted_at", "plugin", "started")

    def __init__(
        self, plugin: str, hook: str, started: float, interrupted_at: float | None = None
    ) -> None:
        self.plugin = plugin
        self.hook = hook
        #: ``time.monotonic()`` when it was called.
        self.started = started
        #: When the watchdog last interrupted it (None: never).
        self.interrupted_at = interrupted_at

    def __repr__(self) -> str:
        return f"HookCall(plugin={self.plugin!r}, hook={self.hook!r}, started={self.started!r})"


def print_failure(failure: HookFailure) -> None:
    from loopctl.redaction import redact
    from loopctl.terminal import sanitize_line

    error = sanitize_line(redact(failure.error))  # an error message may quote the agent
    print(
        f"loopctl: plugin {failure.plugin!r} failed in hook {failure.hook}: {error} "
        "(skipped; the loop goes on)",
        file=sys.stderr,
    )


def plugin_name_for(distribution: str) -> str:
    """The entry-point name a distribution should use: its name without the ``loopctl-`` prefix."""
    name = distribution.lower().replace("_", "-")
    return name.removeprefix("loopctl-")


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager, not looking for hook implementations among dunder names.

    pluggy inspects every name in ``dir(plugin)`` without running descriptors (about 20 us
    each); most of those names are ``object``'s dunders, which no hook is named after, and
    they cost every command that loads the plugins ~10 ms. Nor among the other names of a
    module (or of the host's stand-in for a plugin) that hold no function, or a function without
    the hookimpl marker: a plugin module's imports and constants, which pluggy would each look
    up without running descriptors too.
    """

    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        if name.startswith("__") or _no_hookimpl(plugin, name):
            return None
        return super().parse_hookimpl_opts(plugin, name)


def _no_hookimpl(plugin: object, name: str) -> bool:
    """Whether ``name`` of a module or namespace ``plugin`` surely holds no hook implementation:
    it holds neither a function with the hookimpl marker nor anything else pluggy would look
    into (a callable, a class- or staticmethod). False when unsure (pluggy decides)."""
    if not isinstance(plugin, (types.ModuleType, types.SimpleNamespace)):
        return False
    value = vars(plugin).get(name, _NOT_OWN)
    if isinstance(value, types.FunctionType):
        return not hasattr(value, f"{markers.PROJECT_NAME}_impl")
    return value is not _NOT_OWN and not (
        callable(value) or isinstance(value, (classmethod, staticmethod))
    )


#: What a plugin's own ``__dict__`` gives for a name it does not hold.
_NOT_OWN = object()


class PluginHost:
    """Owns the :class:`pluggy.PluginManager` of one loopctl process."""

    def __init__(self, selection: PluginSelection | None = None) -> None:
        self.selection = selection or PluginSelection()
        self.pm: pluggy.PluginManager = _PluginManager(markers.PROJECT_NAME)
        self.pm.add_hookspecs(hookspecs)
        # Historic: every plugin registered from now on gets its add_hookspecs called at once.
        self.pm.hook.add_hookspecs.call_historic(kwargs={"pluginmanager": self.pm})
        self.infos: dict[str, PluginInfo] = {}
        self.failures: list[HookFailure] = []
        self.error_sink: ErrorSink = print_failure
        self._loaded = False
        #: The hook implementations running on the main thread, innermost last.
        self._calls: list[HookCall] = []
        #: Plugins whose hooks are no longer called in this process (:meth:`skip`).
        self.skipped: set[str] = set()

    @property
    def hook(self) -> pluggy.HookRelay:
        """The hook relay (``host.hook.after_iteration(...)``), including plugins' own hooks."""
        return self.pm.hook

    # --- loading -----------------------------------------------------------------------------

    def load(self, entry_points: Iterable[Any] | None = None) -> None:
        """Register the built-ins, then every enabled installed plugin, one at a time."""
        if self._loaded:
            return
        self._loaded = True
        self._load_builtin(CORE_PLUGIN, builtin, "loopctl.builtin", required=True)
        for name, target in BUILTIN_ADAPTERS.items():
            self._load_builtin(name, AdapterPlugin(target), target, required=False)
        for ep in entry_points if entry_points is not None else discover_entry_points():
            self._load_entry_point(ep)

    def _load_builtin(self, name: str, plugin: object, source: str, *, required: bool) -> None:
        """A plugin that is part of loopctl: only ``plugins.disable`` turns one off (not the
        allow-list, nor ``--no-plugins``), and the core one not even that."""
        info = PluginInfo(
            name=name,
            distribution=DISTRIBUTION,
            version=_loopctl_version(),
            status="enabled",
            source=source,
            origin="builtin",
        )
        if required:
            info.detail = "part of loopctl; cannot be disabled"
        elif name in self.selection.disable:
            info.status, info.detail = "disabled", "listed in plugins.disable"
        if info.status == "enabled":
            self.register(plugin, name)
            info.hooks = self.hooks_of(name)
        self.infos[name] = info

    def _load_entry_point(self, ep: Any) -> None:
        dist = getattr(ep, "dist", None)
        distribution, version = _name_and_version(dist)
        info = PluginInfo(
            name=ep.name,
            distribution=distribution,
            version=version,
            status="enabled",
            source=f"{ep.value} ({_location(dist)})",
        )
        self.infos[ep.name] = info
        if ep.name == CORE_PLUGIN or ep.name in BUILTIN_ADAPTERS:
            info.status, info.detail = "broken", f"the name {ep.name!r} is reserved for loopctl"
            return
        enabled, why = self.selection.decide(ep.name)
        if not enabled:
            info.status, info.detail = "disabled", why
            debug("loopctl.plugins", "plugin %s (%s) not loaded: %s", ep.name, ep.value, why)
            return
        debug("loopctl.plugins", "loading plugin %s from %s", ep.name, info.source)
        try:
            plugin = ep.load()
            self.register(plugin, ep.name)
        except Exception as exc:
            if self.selection.strict:
                raise
            info.status = "broken"
            info.detail = f"Error importing plugin {ep.name!r}: {type(exc).__name__}: {exc}"
            from loopctl.terminal import sanitize

            print(  # the error may name a path (the project's): no terminal control
                sanitize(
                    f"loopctl: warning: plugin {ep.name!r} failed to import and is skipped: "
                    f"{type(exc).__name__}: {exc} (see `loopctl plugins list`)"
                ),
                file=sys.stderr,
            )
            return
        info.hooks = self.hooks_of(ep.name)

    def register(self, plugin: object, name: str) -> None:
        """Register ``plugin`` under ``name`` with every hook implementation isolated.

        Public so tests and embedding code can add plugins that are not installed.
        """
        self.pm.register(self._isolated(plugin, name), name=name)
        if name not in self.infos:
            self.infos[name] = PluginInfo(
                name=name,
                distribution=None,
                version=None,
                status="enabled",
                hooks=self.hooks_of(name),
                source="registered at run time",
            )

    def unregister(self, name: str) -> None:
        self.pm.unregister(name=name)
        self.infos.pop(name, None)

    def hooks_of(self, name: str) -> list[str]:
        plugin = self.pm.get_plugin(name)
        if plugin is None:
            return []
        callers = self.pm.get_hookcallers(plugin) or []
        return sorted(caller.name for caller in callers)

    def enabled_names(self) -> list[str]:
        return [i.name for i in self.infos.values() if i.status == "enabled"]

    def check_unknown_hooks(self) -> list[str]:
        """Hook implementations that match no known spec (after every plugin added its specs).

        Returned as warnings, not errors: the plugin that defines the spec may be disabled.
        """
        warnings = []
        for name, caller in self.pm.hook.__dict__.items():
            if isinstance(caller, pluggy.HookCaller) and caller.spec is None:
                for impl in caller.get_hookimpls():
                    warnings.append(
                        f"plugin {impl.plugin_name!r} implements {name!r}, which no installed "
                        "plugin specifies (is the plugin that defines it disabled?)"
                    )
        return warnings

    def check_required(self, requirements: Iterable[str]) -> None:
        """Fail fast unless every ``required_plugins`` entry is installed, enabled and loaded in a
        matching version. Names may be the plugin name or the distribution name."""
        problems = []
        for text in requirements:
            try:
                req = _requirement(text)
            except ValueError as exc:
                problems.append(f"required_plugins: {text!r} is not a valid requirement ({exc})")
                continue
            wanted = plugin_name_for(req.name)
            info = self.infos.get(wanted)
            if info is None:
                problems.append(
                    f"required plugin {text!r} is not installed "
                    f"(pip install loopctl-{wanted}, or remove it from required_plugins)"
                )
            elif info.status == "disabled":
                problems.append(f"required plugin {text!r} is disabled: {info.detail}")
            elif info.status == "broken":
                problems.append(f"required plugin {text!r} failed to load: {info.detail}")
            elif (
                info.version
                and req.specifier
                and not req.specifier.contains(info.version, prereleases=True)
            ):
                problems.append(
                    f"required plugin {text!r} is installed in version {info.version}, which "
                    "does not match"
                )
        if problems:
            raise PluginError("\n".join(problems))

    # --- isolation ---------------------------------------------------------------------------

    def _isolated(self, plugin: object, plugin_name: str) -> object:
        """A stand-in for ``plugin`` whose hook implementations report exceptions instead of
        raising them (unless ``strict``), and whose prompt sections name the plugin that wrote
        them. Wrappers (``wrapper=True``) are passed through unchanged: they must yield exactly
        once, so they cannot be made to swallow errors safely."""
        proxy = types.SimpleNamespace()
        for attr in dir(plugin):
            opts = self.pm.parse_hookimpl_opts(plugin, attr)
            if opts is None:
                continue
            function = getattr(plugin, attr)
            if opts.get("wrapper") or opts.get("hookwrapper"):
                setattr(proxy, attr, function)
                continue
            hook_name = opts.get("specname") or attr
            safe = self._guard(function, plugin_name, hook_name)
            setattr(safe, f"{markers.PROJECT_NAME}_impl", opts)
            setattr(proxy, attr, safe)
        proxy.__loopctl_plugin__ = plugin
        return proxy

    def _guard(self, function: Callable[..., Any], plugin: str, hook: str) -> Callable[..., Any]:
        attribute = _attribute if hook in _ATTRIBUTED_HOOKS else None
        strict = self.selection.strict

        @functools.wraps(function)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            if plugin in self.skipped:
                return None
            call = self._enter(plugin, hook)
            try:
                result = function(*args, **kwargs)
            except Exception as exc:  # isolation is the point (re-raised when strict)
                if strict:
                    raise
                self.report_failure(plugin, hook, exc)
                return None
            finally:
                if call is not None:
                    self._leave(call)
            return result if attribute is None else attribute(result, plugin)

        return guarded

    def _enter(self, plugin: str, hook: str) -> HookCall | None:
        if threading.get_ident() != _MAIN_THREAD:
            return None
        call = HookCall(plugin, hook, time.monotonic())
        self._calls.append(call)
        return call

    def _leave(self, call: HookCall) -> None:
        if self._calls and self._calls[-1] is call:
            self._calls.pop()
        elif call in self._calls:
            self._calls.remove(call)

    def skip(self, plugin: str) -> None:
        """Call none of ``plugin``'s hooks from now on (a hook of it hung past the wall clock):
        each would only hold up the loop's end again."""
        self.skipped.add(plugin)

    def running_hook(self) -> HookCall | None:
        """The innermost plugin hook implementation running on the main thread now, if any
        (wrappers are not counted). Safe to call from any thread."""
        try:
            return self._calls[-1]
        except IndexError:
            return None

    def report_failure(self, plugin: str, hook: str, exc: BaseException) -> None:
        import traceback  # here: a command whose plugins all behave never needs it

        failure = HookFailure(
            plugin=plugin,
            hook=hook,
            error=f"{type(exc).__name__}: {exc}",
            traceback="".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[
                -4000:
            ],
            exception=exc,
        )
        self.failures.append(failure)
        try:
            self.error_sink(failure)
        except Exception:  # noqa: BLE001 - a failing sink must not turn isolation into a crash
            print_failure(failure)

    def original(self, name: str) -> object | None:
        """The plugin object registered under ``name`` (not its isolating stand-in)."""
        plugin = self.pm.get_plugin(name)
        return getattr(plugin, "__loopctl_plugin__", plugin)

    # --- collected registrations ---------------------------------------------------------------

    def collect_named(self, hook_name: str, what: str) -> dict[str, tuple[Any, str]]:
        """Call a registration hook that returns ``{name: value}`` or a list of classes with a
        ``name`` attribute, and merge the results; a name claimed twice is a PluginError."""
        found: dict[str, tuple[Any, str]] = {}
        caller = getattr(self.pm.hook, hook_name)
        for impl in caller.get_hookimpls():  # registration order
            result = impl.function()
            if not result:
                continue
            items: Iterable[tuple[str, Any]]
            if isinstance(result, Mapping):
                items = result.items()
            else:
                items = ((getattr(cls, "name", repr(cls)), cls) for cls in result)
            for key, value in items:
                if key in found and found[key][1] != impl.plugin_name:
                    raise PluginError(
                        f"{what} {key!r} is registered by both {found[key][1]!r} and "
                        f"{impl.plugin_name!r}; disable one of them"
                    )
                found[key] = (value, impl.plugin_name)
        return found


#: Hooks whose results carry a ``source``: the host fills it in with the plugin's name.
_ATTRIBUTED_HOOKS = frozenset(
    {"compose_prompt", "after_iteration", "on_agent_message", "on_failure", "on_success"}
)


def _attribute(result: Any, plugin: str) -> Any:
    """Fill in ``source`` on the results (prompt sections, decisions, verdicts) a plugin
    returned without one, so the loop can say which plugin decided."""

    def named(item: Any) -> Any:
        if attrs.has(type(item)) and getattr(item, "source", None) == "":
            return attrs.evolve(item, source=plugin)
        return item

    if isinstance(result, (list, tuple)):
        return [named(item) for item in result]
    return named(result)


def build_host(loaded: LoadedConfig, *, no_plugins: bool = False) -> PluginHost:
    """The host of a run (or of a command that reads the typed configuration): the plugins the
    config selects, loaded (or the host :func:`offer_host` offers, when it selects the same);
    a PluginError when ``plugins.disable`` names the core plugin or a ``required_plugins``
    entry is not met."""
    selection = PluginSelection.from_config(loaded, no_plugins=no_plugins)
    host = _take_offered(selection) or PluginHost(selection)
    host.load()
    check_core_enabled(host.selection)
    check_plugin_names(host, {key: loaded.where(f"plugins.{key}") for key in SWITCHES})
    host.check_required(loaded.config.required_plugins)
    return host


def switches_host(
    workdir: Path, *, config_file: Path | None = None, required: Iterable[str] = ()
) -> PluginHost:
    """:func:`build_host` for a command that has not loaded the typed configuration: the
    plugins chosen by the plugin switches alone (:func:`loopctl.configfile.plugin_switches`,
    which read them as the typed configuration does), loaded or offered, with the same checks
    (``required``: the ``required_plugins`` setting)."""
    from loopctl.configfile import plugin_switches

    sources: dict[str, str] = {}
    switches = plugin_switches(workdir, config_file=config_file, sources=sources)
    selection = PluginSelection(
        enable=switches["enable"],
        disable=switches["disable"],
        autoload=switches["autoload"],
        strict=switches["strict"],
    )
    host = _take_offered(selection) or PluginHost(selection)
    host.load()
    check_core_enabled(selection)
    check_plugin_names(host, sources)
    host.check_required(required)
    return host


#: The host :func:`offer_host` offers to the next :func:`build_host`.
_offered: list[PluginHost] = []


def offer_host(host: PluginHost | None) -> None:
    """Let the next :func:`build_host` (or :func:`switches_host`) of this process take ``host`` (loaded, used for nothing
    but registrations) instead of loading the same plugins again, if it selects the same
    plugins; None withdraws the offer. The CLI offers the host that registered the plugins'
    commands while one of them runs, so its ``load_project().hook`` costs no second load."""
    _offered[:] = [] if host is None else [host]


def _take_offered(selection: PluginSelection) -> PluginHost | None:
    host = _offered.pop() if _offered else None
    if host is None or host.selection != selection:
        return None
    host.failures.clear()  # a failed registration was reported when it happened
    return host


def validate_plugin_sections(
    loaded: LoadedConfig, host: PluginHost
) -> tuple[dict[str, tuple[Any, str]], dict[str, Any]]:
    """``(classes, configs)``: the config classes the enabled plugins register
    (``register_config``) and each plugin's ``[plugins.NAME]`` section structured into its
    class, so a bad key fails before a run starts (ConfigError naming the key). A section no
    enabled plugin claims adds a warning to ``loaded.warnings``."""
    classes = host.collect_named("register_config", "config section")
    configs = {name: loaded.plugin_section(name, entry[0]) for name, entry in classes.items()}
    for name in sorted(set(loaded.config.plugins.sections) - set(classes)):
        info = host.infos.get(name)
        if info is None:
            from loopctl.suggest import did_you_mean

            where = f"no plugin by that name is installed{did_you_mean(name, host.infos)}"
        else:
            where = f"plugin {name!r} is {info.status} or has no config"
        loaded.warnings.append(f"the config has a [plugins.{name}] section, but {where}")
    return classes, configs


#: The plugin switches that name plugins.
SWITCHES = ("enable", "disable")


def unknown_plugin_names(host: PluginHost, sources: Mapping[str, str]) -> list[str]:
    """A message for every name in ``plugins.enable`` or ``plugins.disable`` that names no
    plugin ``host`` knows (built in or installed, enabled or not): a typo there would
    otherwise disable nothing, or, in the allow-list, every plugin. ``sources`` says where
    each switch was set (``loopctl.toml: plugins.disable``)."""
    known = sorted(host.infos)
    problems = []
    for key in SWITCHES:
        names = host.selection.enable if key == "enable" else host.selection.disable
        for name in names or ():
            if name not in host.infos:
                from loopctl.suggest import did_you_mean

                where = sources.get(key) or f"plugins.{key}"
                problems.append(
                    f"{where}: no plugin is named {name!r}{did_you_mean(name, known)}; "
                    f"the plugins are: {', '.join(known)}"
                )
    return problems


def check_plugin_names(host: PluginHost, sources: Mapping[str, str]) -> None:
    """Raise PluginError for :func:`unknown_plugin_names`."""
    problems = unknown_plugin_names(host, sources)
    if problems:
        raise PluginError("\n".join(problems))


def check_core_enabled(selection: PluginSelection) -> None:
    if CORE_PLUGIN in selection.disable:
        raise PluginError(f"plugin {CORE_PLUGIN!r} is part of loopctl and cannot be disabled")


#: A requirement that is a bare distribution name (PEP 508), the usual ``required_plugins``
#: entry: read without importing packaging, which costs a command's start-up 15-20 ms.
_BARE_NAME = lazy_compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


class _BareRequirement(NamedTuple):
    name: str
    specifier: str = ""


def _requirement(text: str) -> Any:
    """``text`` as a requirement (``name``, ``specifier``); ValueError when it is not one."""
    if _BARE_NAME.fullmatch(text.strip()):
        return _BareRequirement(text.strip())
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        raise ValueError(str(exc)) from None


def discover_entry_points() -> list[Any]:
    """The installed ``loopctl.plugins`` entry points (nothing is imported), one per name: the
    first found on ``sys.path`` wins, as a distribution installed twice resolves on import.

    Read straight from each ``*.dist-info``/``*.egg-info`` directory's ``entry_points.txt``:
    importing importlib.metadata and letting it scan costs every command that loads plugins
    10-15 ms. A ``sys.path`` entry that is not a directory (a zip) is left to
    importlib.metadata, which reads those too.
    """
    found: list[Any] | None = _scan_entry_points(sys.path)
    if found is None:
        from importlib import metadata  # only for a zip on sys.path: see above

        found = list(metadata.entry_points(group=ENTRY_POINT_GROUP))
    seen: set[str] = set()
    unique = []
    for ep in found:
        if ep.name in seen:  # the same distribution on sys.path twice
            continue
        seen.add(ep.name)
        unique.append(ep)
    return sorted(unique, key=lambda ep: ep.name)


class _Distribution:
    """The parts of an ``importlib.metadata.Distribution`` the host reads, for a metadata
    directory found by :func:`_scan_entry_points`."""

    def __init__(self, path: str) -> None:
        self._path = path

    def read_text(self, filename: str) -> str | None:
        try:
            with open(os.path.join(self._path, filename), encoding="utf-8") as stream:
                return stream.read()
        except (OSError, UnicodeDecodeError):
            return None

    def locate_file(self, path: str) -> Path:
        return Path(os.path.dirname(self._path), path)

    @property
    def name(self) -> str | None:
        return _name_and_version(self)[0]

    @property
    def version(self) -> str | None:
        return _name_and_version(self)[1]

    def __repr__(self) -> str:
        return f"<distribution {self._path}>"


class _EntryPoint:
    """An entry point read by :func:`_scan_entry_points`; ``load()`` imports its object as
    ``importlib.metadata.EntryPoint.load`` does (``module:attr.attr``, extras ignored)."""

    def __init__(self, name: str, value: str, group: str, dist: _Distribution) -> None:
        self.name, self.value, self.group, self.dist = name, value, group, dist

    def load(self) -> Any:
        import importlib

        target = self.value.partition("[")[0]
        module_name, _, attribute = target.partition(":")
        value: Any = importlib.import_module(module_name.strip())
        for part in filter(None, attribute.strip().split(".")):
            value = getattr(value, part)
        return value

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"


_METADATA_DIR = re.compile(r"(?P<name>[^-]+)(?:-[^/]*)?\.(?:dist|egg)-info", re.IGNORECASE)


def _scan_entry_points(
    path: Iterable[str], group: str = ENTRY_POINT_GROUP
) -> list[_EntryPoint] | None:
    """Every ``group`` entry point of the distributions on ``path``, in path order (a
    distribution name counts once: its first metadata directory); None when an entry is not a
    directory (a zip, left to importlib.metadata)."""
    found: list[_EntryPoint] = []
    distributions: set[str] = set()
    for entry in path:
        directory = entry or "."
        try:
            names = sorted(os.listdir(directory))
        except NotADirectoryError:
            return None
        except OSError:  # missing or unreadable: nothing installed there
            continue
        for name in names:
            match = _METADATA_DIR.fullmatch(name)
            if match is None:
                continue
            key = re.sub(r"[-_.]+", "_", match.group("name")).lower()
            if key in distributions:
                continue
            distributions.add(key)
            dist = _Distribution(os.path.join(directory, name))
            text = dist.read_text("entry_points.txt")
            if text and f"[{group}]" in text:
                found += [
                    _EntryPoint(ep_name, value, group, dist)
                    for ep_name, value in _entry_points_in(text, group)
                ]
    return found


def _entry_points_in(text: str, group: str) -> list[tuple[str, str]]:
    """``(name, value)`` of the ``[group]`` section of an ``entry_points.txt``, read as
    importlib.metadata reads it (a line without ``=``, which makes it fail, is skipped)."""
    pairs = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")
        elif section == group:
            name, equals, value = line.partition("=")
            if equals:
                pairs.append((name.strip(), value.strip()))
    return pairs


def _name_and_version(dist: Any) -> tuple[str | None, str | None]:
    """A distribution's name and version from the first lines of its metadata file.

    ``dist.name`` and ``dist.version`` parse the whole file with the email package, whose
    import alone costs ``loopctl plugins list`` a tenth of its start-up; both fields are
    single-line headers at the top of every metadata file, so reading those lines suffices.
    """
    if dist is None:
        return None, None
    found: dict[str, str] = {}
    try:
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    except Exception:  # noqa: BLE001 - odd distributions still get listed
        text = ""
    for line in text.splitlines():
        if not line:  # the headers end at the first empty line
            break
        key, colon, value = line.partition(":")
        if colon and key in ("Name", "Version"):
            found.setdefault(key, value.strip())
    name = found.get("Name") or getattr(dist, "name", None)
    return name, found.get("Version") or getattr(dist, "version", None)


def _location(dist: Any) -> str:
    if dist is None:
        return "unknown location"
    try:
        return str(dist.locate_file(""))
    except Exception:  # noqa: BLE001 - odd distributions still get listed
        return "unknown location"


def _loopctl_version() -> str:
    from loopctl._version import __version__

    return __version__
