"""loopctl's typed configuration, read from layered sources with origin tracking.

Sources, weakest first: built-in defaults, a config file (``loopctl.toml``, or ``[tool.loopctl]``
in ``pyproject.toml``), ``LOOPCTL_*`` environment variables, then overrides from the command line.
Every layer is checked on its own before the layers are merged, so each problem is reported with
the source it came from and the key path as the user spelled it there::

    pyproject.toml: tool.loopctl.limits: unknown key 'max_iteration' (did you mean 'max_iterations'?)

Structuring goes through one cattrs converter that is strict on purpose: TOML gives real types,
so a string is never silently turned into an integer or a boolean (``"false"`` is not true).
Text from the environment or the command line is converted by the target field's type first.

Plugins and agent adapters own free-form sections (``[plugins.NAME]``, ``[agents.NAME]``) that
are kept raw here and structured later into their own classes with :func:`structure`
(see :meth:`LoadedConfig.plugin_section` and :meth:`LoadedConfig.agent_settings`).
"""

from __future__ import annotations

import copy
import difflib
import json
import math
import os
import re
import reprlib
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import (
    homogenous_tuple_structure_factory,
    is_any_set,
    is_frozenset,
    is_mapping,
    is_sequence,
    list_structure_factory,
)
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from cattrs.gen import make_dict_structure_fn, mapping_structure_factory

from loopctl.configfile import (
    ENV_DISABLE_AUTOLOAD,
    ENV_PLUGINS,
    ENV_PREFIX,
    FALSE_WORDS,
    PYPROJECT_FILE_NAME,
    PYPROJECT_PREFIX,
    TRUE_WORDS,
    ConfigError,
    display_path,
    find_config_file,
    locate,
    pyproject_section,
    read_toml,
    split_list,
)

__all__ = [
    "DEFAULT_MODEL_WINDOWS",
    "ENV_PREFIX",
    "NON_CONFIG_ENV_VARS",
    "ConfigError",
    "FieldDoc",
    "InvalidFields",
    "Limits",
    "LoadedConfig",
    "LoopctlConfig",
    "PluginsConfig",
    "PromptConfig",
    "Stuck",
    "config_to_dict",
    "context_window_for",
    "describe_fields",
    "dotted_path",
    "find_config_file",
    "hide_secrets",
    "load_config",
    "model_windows",
    "structure",
    "withheld_environment",
]

T = TypeVar("T")

#: A key path inside a config document: table keys (str) and array indices (int).
KeyPath = tuple[Union[str, int], ...]


#: Variables loopctl itself sets for agents and test commands: never config, never warned about.
NON_CONFIG_ENV_VARS = frozenset(
    {
        "LOOPCTL_ITERATION",
        "LOOPCTL_SESSION_ID",
        "LOOPCTL_RUN_ID",
        # read by first-party plugins (the context-errors failure memory's location)
        "LOOPCTL_FAILURE_MEMORY",
    }
)

#: Hard cap on ``limits.max_restarts``: a loop that needs more restarts is not converging.
MAX_RESTARTS_CAP = 10


# --- errors -------------------------------------------------------------------------------------


class InvalidFields(ValueError):
    """Raised by a config class whose field values are out of range.

    Each problem is ``(key path relative to the class, message)``, so the loader can name the
    offending key; constructing the classes directly in Python gets the same checks.
    """

    def __init__(self, problems: Sequence[tuple[KeyPath, str]]) -> None:
        self.problems = list(problems)
        super().__init__("; ".join(f"{dotted_path(path)}: {msg}" for path, msg in self.problems))


class _Mismatch(ValueError):
    """A value of the wrong type or form: ``expected X, got Y``."""

    def __init__(self, expected: str, found: object) -> None:
        self.message = f"expected {expected}, got {_show(found)}"
        super().__init__(self.message)


class _UnknownKeys(ValueError):
    """Keys a table does not allow; ``allowed`` feeds the "did you mean" suggestion."""

    def __init__(self, keys: Iterable[object], allowed: Iterable[str], hint: str = "") -> None:
        self.keys = list(keys)
        self.allowed = sorted(allowed)
        self.hint = hint
        super().__init__(f"unknown keys {self.keys!r}")


@attrs.frozen
class _Problem:
    """One problem found while structuring, relative to the structured root."""

    path: KeyPath
    message: str
    #: Where the offending key or value is (for finding its source); defaults to ``path``.
    subject: KeyPath | None = None


_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlong = 40
_repr.maxlist = 5
_repr.maxtuple = 5
_repr.maxdict = 4
_repr.maxlevel = 2


def _show(value: object) -> str:
    """A short rendering of a value found in the config, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a table"
    try:
        if isinstance(value, (list, tuple)):
            return f"an array {_repr.repr(list(value))}"
        if isinstance(value, (str, int, float)):
            return _repr.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not hide the real problem
        pass
    return f"a value of type {type(value).__name__}"


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dotted_path(parts: Iterable[str | int]) -> str:
    """Render a key path the way TOML spells it: ``limits.max_iterations``, ``stuck.exempt[1]``,
    ``models."gemini-2.5-pro"`` (keys that are not bare TOML keys are quoted)."""
    out = ""
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
            continue
        if isinstance(part, str):
            text = part if _BARE_KEY.fullmatch(part) else json.dumps(part, ensure_ascii=False)
        else:
            text = _show(part)
        out = f"{out}.{text}" if out else text
    return out


def _join_path(prefix: str, rest: str) -> str:
    if not prefix:
        return rest
    if not rest:
        return prefix
    return prefix + rest if rest.startswith("[") else f"{prefix}.{rest}"


def _unknown_key_message(key: object, allowed: Sequence[str], hint: str = "") -> str:
    message = f"unknown key {_show(key) if not isinstance(key, str) else repr(key)}"
    if isinstance(key, str):
        close = difflib.get_close_matches(key, allowed, n=1)
        if close:
            return f"{message} (did you mean {close[0]!r}?)"
    return f"{message}{hint}"


# --- field checks -------------------------------------------------------------------------------


def _doc(text: str, **extra: str) -> dict[str, str]:
    return {"doc": text, **extra}


def _at_least(minimum: int, value: int) -> str | None:
    return None if value >= minimum else f"must be at least {minimum}, got {value}"


def _positive_seconds(value: float) -> str | None:
    if math.isnan(value) or value <= 0:
        return f"must be a number of seconds greater than 0, got {_show(value)}"
    return None


def _raise_problems(problems: list[tuple[KeyPath, str | None]]) -> None:
    found = [(path, message) for path, message in problems if message is not None]
    if found:
        raise InvalidFields(found)


# --- the configuration classes ------------------------------------------------------------------


@attrs.define(kw_only=True)
class Limits:
    """Bounds on one run; reaching any of them ends the loop with its own status."""

    max_iterations: int = attrs.field(
        default=20, metadata=_doc("Most agent turns in one run (at least 1).")
    )
    max_restarts: int = attrs.field(
        default=3,
        metadata=_doc(
            "Most fresh-session restarts in one run (0 to 10; 10 is a hard cap, since a loop "
            "that needs more is not converging)."
        ),
    )
    agent_timeout_s: float = attrs.field(
        default=1800.0, metadata=_doc("Seconds one agent turn may take before it is ended.")
    )
    idle_timeout_s: float = attrs.field(
        default=300.0,
        metadata=_doc("Seconds the agent may go without any output before its turn is ended."),
    )
    wall_clock_s: float = attrs.field(
        default=14400.0, metadata=_doc("Seconds the whole run may take.")
    )
    test_timeout_s: float = attrs.field(
        default=900.0, metadata=_doc("Seconds one run of the test command may take.")
    )
    max_tokens: int | None = attrs.field(
        default=None, metadata=_doc("Stop when the run has used this many tokens (unset: no cap).")
    )
    max_cost_usd: float | None = attrs.field(
        default=None,
        metadata=_doc("Stop when the run's reported cost reaches this many US dollars."),
    )
    max_agent_crashes: int = attrs.field(
        default=3,
        metadata=_doc(
            "Agent crashes retried with a fresh session before the run stops with agent_error."
        ),
    )
    test_output_bytes: int = attrs.field(
        default=1_000_000,
        metadata=_doc("How much of the test command's output is kept (its tail), in bytes."),
    )

    def __attrs_post_init__(self) -> None:
        restarts: str | None = None
        if self.max_restarts > MAX_RESTARTS_CAP:
            restarts = (
                f"must be at most {MAX_RESTARTS_CAP} ({MAX_RESTARTS_CAP} is a hard cap on "
                f"restarts), got {self.max_restarts}"
            )
        elif self.max_restarts < 0:
            restarts = f"must be 0 or more, got {self.max_restarts}"
        cost = self.max_cost_usd
        _raise_problems(
            [
                (("max_iterations",), _at_least(1, self.max_iterations)),
                (("max_restarts",), restarts),
                (("agent_timeout_s",), _positive_seconds(self.agent_timeout_s)),
                (("idle_timeout_s",), _positive_seconds(self.idle_timeout_s)),
                (("wall_clock_s",), _positive_seconds(self.wall_clock_s)),
                (("test_timeout_s",), _positive_seconds(self.test_timeout_s)),
                (
                    ("max_tokens",),
                    None if self.max_tokens is None else _at_least(1, self.max_tokens),
                ),
                (
                    ("max_cost_usd",),
                    None
                    if cost is None or (cost > 0 and not math.isnan(cost))
                    else f"must be greater than 0, got {_show(cost)}",
                ),
                (("max_agent_crashes",), _at_least(0, self.max_agent_crashes)),
                (("test_output_bytes",), _at_least(1, self.test_output_bytes)),
            ]
        )


@attrs.define(kw_only=True)
class Stuck:
    """When the loop counts as stuck: the same failure, iteration after iteration."""

    enabled: bool = attrs.field(default=True, metadata=_doc("Detect stuck loops at all."))
    window: int = attrs.field(
        default=3,
        metadata=_doc(
            "Iterations in a row with the same error fingerprint or failing-test set and no "
            "progress that count as stuck (at least 2)."
        ),
    )
    exempt: list[str] = attrs.field(
        factory=list,
        metadata=_doc(
            "Regular expressions for error lines that are expected to repeat: lines matching "
            "any of them never count toward stuck."
        ),
    )

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[KeyPath, str | None]] = [(("window",), _at_least(2, self.window))]
        for index, pattern in enumerate(self.exempt):
            try:
                re.compile(pattern)
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                problems.append(
                    (("exempt", index), f"invalid regular expression {_show(pattern)}: {exc}")
                )
        _raise_problems(problems)

    def exempt_patterns(self) -> list[re.Pattern[str]]:
        """The ``exempt`` expressions, compiled (they are known to compile)."""
        return [re.compile(pattern) for pattern in self.exempt]


@attrs.define(kw_only=True)
class PromptConfig:
    """How the agent prompt is put together."""

    budget_chars: int = attrs.field(
        default=24000,
        metadata=_doc(
            "Size budget of the prompt in characters (at least 500); over it, the "
            "lowest-priority sections are trimmed first."
        ),
    )

    def __attrs_post_init__(self) -> None:
        _raise_problems([(("budget_chars",), _at_least(500, self.budget_chars))])


#: The keys of ``[plugins]`` that are settings; every other key is a plugin's own section.
PLUGINS_SETTING_KEYS = ("enable", "disable", "strict")


@attrs.define(kw_only=True)
class PluginsConfig:
    """Which plugins run, and their own sections (``[plugins.NAME]``)."""

    enable: list[str] | None = attrs.field(
        default=None,
        metadata=_doc("Allow-list of plugin names to load; unset loads every installed plugin."),
    )
    disable: list[str] = attrs.field(
        factory=list, metadata=_doc("Plugin names never to load, even if installed or enabled.")
    )
    strict: bool = attrs.field(
        default=False,
        metadata=_doc(
            "Let plugin errors end the run instead of being reported and skipped "
            "(for plugin authors)."
        ),
    )
    sections: dict[str, dict[str, Any]] = attrs.field(
        factory=dict,
        metadata=_doc(
            "A plugin's own settings: every other table under [plugins], named after the "
            "plugin and checked by it.",
            doc_path="<plugin>",
            doc_type="table",
        ),
    )


@attrs.define(kw_only=True)
class LoopctlConfig:
    """Everything loopctl reads from its configuration sources."""

    agent: str | None = attrs.field(
        default=None,
        metadata=_doc(
            "The agent adapter to run: claude, codex, gemini, aider, command, scripted, or one "
            "a plugin adds."
        ),
    )
    agent_cmd: str | None = attrs.field(
        default=None,
        metadata=_doc("Any command line to run as the agent; selects the `command` adapter."),
    )
    test_cmd: str | None = attrs.field(
        default=None,
        metadata=_doc("The command that decides success: the loop is done when it exits 0."),
    )
    session: Literal["fresh", "resume"] = attrs.field(
        default="fresh",
        metadata=_doc(
            "`fresh` starts a new agent session every iteration; `resume` continues the last one."
        ),
    )
    state_dir: str = attrs.field(
        default=".loopctl",
        metadata=_doc("Where run records are kept, relative to the project directory."),
    )
    completion_signal: str | None = attrs.field(
        default=None,
        metadata=_doc(
            "When set (e.g. LOOPCTL_DONE), success also needs this text as a whole line of the "
            "agent's final message."
        ),
    )
    required_plugins: list[str] = attrs.field(
        factory=list,
        metadata=_doc(
            "Plugins the project needs, as requirement strings such as 'context-monitor>=0.1'."
        ),
    )
    withhold_env: list[str] = attrs.field(
        factory=list,
        metadata=_doc(
            "Environment variables the agent and the test command never see, by name or "
            "shell-style pattern ('GITHUB_TOKEN', 'AWS_*'): secrets loopctl's plugins need "
            "but the agent should not read. The test command is included because the agent "
            "writes the tests and reads their output."
        ),
    )
    limits: Limits = attrs.field(
        factory=Limits, metadata=_doc("Bounds on iterations, restarts, time, tokens and cost.")
    )
    stuck: Stuck = attrs.field(factory=Stuck, metadata=_doc("Stuck-loop detection."))
    prompt: PromptConfig = attrs.field(
        factory=PromptConfig, metadata=_doc("How the agent prompt is put together.")
    )
    plugins: PluginsConfig = attrs.field(
        factory=PluginsConfig, metadata=_doc("Which plugins run, and their own sections.")
    )
    agents: dict[str, dict[str, Any]] = attrs.field(
        factory=dict,
        metadata=_doc(
            "Settings of one agent adapter ([agents.NAME]), checked by that adapter.",
            doc_path="agents.<agent>",
            doc_type="table",
        ),
    )
    models: dict[str, int] = attrs.field(
        factory=dict,
        metadata=_doc(
            "Context window in tokens of a model, by model name; extends or overrides the "
            "built-in table.",
            doc_path="models.<model>",
            doc_type="int",
        ),
    )

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[KeyPath, str | None]] = []
        for name in ("agent", "agent_cmd", "test_cmd", "state_dir"):
            value = getattr(self, name)
            if value is not None and not value.strip():
                problems.append(((name,), "must not be empty"))
        signal = self.completion_signal
        if signal is not None and (not signal.strip() or "\n" in signal or "\r" in signal):
            problems.append(
                (("completion_signal",), f"must be one non-empty line of text, got {_show(signal)}")
            )
        if self.required_plugins:  # packaging is slow to import; most configs need none
            from packaging.requirements import InvalidRequirement, Requirement
        for index, requirement in enumerate(self.required_plugins):
            try:
                Requirement(requirement)
            except InvalidRequirement as exc:
                problems.append(
                    (
                        ("required_plugins", index),
                        f"invalid requirement {_show(requirement)} (expected something like "
                        f"'context-monitor>=0.1'): {str(exc).splitlines()[0]}",
                    )
                )
        for index, pattern in enumerate(self.withhold_env):
            if not pattern.strip() or "=" in pattern:
                problems.append(
                    (
                        ("withhold_env", index),
                        f"must be a variable name or a pattern such as 'AWS_*', got {_show(pattern)}",
                    )
                )
        for model, window in self.models.items():
            if window < 1:
                problems.append(
                    (
                        ("models", model),
                        f"must be a context window in tokens (1 or more), got {window}",
                    )
                )
        _raise_problems(problems)


for _cls in (Limits, Stuck, PromptConfig, PluginsConfig, LoopctlConfig):
    attrs.resolve_types(_cls)


def withheld_environment(patterns: Sequence[str]) -> dict[str, str]:
    """``os.environ`` without the variables whose names match one of ``patterns``
    (``withhold_env``): the environment the agent and the test command start from."""
    from fnmatch import fnmatchcase

    return {
        name: value
        for name, value in os.environ.items()
        if not any(fnmatchcase(name, pattern) for pattern in patterns)
    }


# --- the converter ------------------------------------------------------------------------------


def _structure_bool(obj: object, _: object) -> bool:
    if isinstance(obj, bool):
        return obj
    raise _Mismatch("a boolean (true or false)", obj)


def _structure_int(obj: object, _: object) -> int:
    if isinstance(obj, int) and not isinstance(obj, bool):
        return int(obj)
    raise _Mismatch("an integer", obj)


def _structure_float(obj: object, _: object) -> float:
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        try:
            return float(obj)
        except OverflowError:
            pass
    raise _Mismatch("a number", obj)


def _structure_str(obj: object, _: object) -> str:
    if isinstance(obj, str):
        return str(obj)
    raise _Mismatch("a string", obj)


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _literal_choices(tp: Any) -> str:
    return ", ".join(repr(choice) for choice in get_args(tp))


def _literal_hook_factory(tp: Any) -> Callable[[Any, Any], Any]:
    choices = get_args(tp)

    def structure_literal(obj: object, _: object) -> Any:
        for choice in choices:
            # type check first: True == 1 must not pass as 1, and unhashables must not crash
            if type(obj) is type(choice) and obj == choice:
                return choice
        raise _Mismatch(f"one of {_literal_choices(tp)}", obj)

    return structure_literal


def _is_container(tp: Any) -> bool:
    return attrs.has(tp) or is_mapping(tp) or is_any_set(tp) or is_sequence(tp)


def _container_hook_factory(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure hooks that check the container's own type first: cattrs alone would happily
    read a string as a list of characters, or look keys up in it as if it were a table."""
    if attrs.has(tp) or is_mapping(tp):
        inner = (
            make_dict_structure_fn(tp, converter)
            if attrs.has(tp)
            else mapping_structure_factory(tp, converter, structure_to=dict)
        )

        def structure_table(obj: object, _: object) -> Any:
            if not isinstance(obj, Mapping):
                raise _Mismatch("a table", obj)
            return inner(obj, tp)

        if not attrs.has(tp):
            return structure_table

        def structure_class(obj: object, _: object) -> Any:
            try:
                return structure_table(obj, tp)
            except ClassValidationError as exc:
                raise _with_range_problems(exc, obj, tp) from None

        return structure_class

    args = get_args(tp)
    if is_any_set(tp):
        list_type: Any = types.GenericAlias(list, (args[0],)) if args else list
        as_list = list_structure_factory(list_type, converter)
        make: Callable[[list[Any]], Any] = frozenset if is_frozenset(tp) else set
    elif get_origin(tp) is tuple:
        as_list = homogenous_tuple_structure_factory(tp, converter)
        make = tuple
    else:
        as_list = list_structure_factory(tp, converter)
        make = list

    def structure_array(obj: object, _: object) -> Any:
        if not isinstance(obj, (list, tuple)):
            raise _Mismatch("an array", obj)
        return make(as_list(obj, tp))

    return structure_array


def _with_range_problems(exc: ClassValidationError, obj: object, cls: Any) -> ClassValidationError:
    """Add the class's own checks of the fields that did structure.

    cattrs builds the instance only when every field structured, so a wrong type would hide an
    out-of-range value next to it until the next run. Retrying with the good fields alone (the
    others at their defaults) runs ``__attrs_post_init__`` and reports both at once.
    """
    with_notes, _ = exc.group_exceptions()
    failed = {note.name for _, note in with_notes}
    if not failed or not isinstance(obj, Mapping):
        return exc
    allowed = set(_field_names(cls))
    kept = {key: value for key, value in obj.items() if key in allowed and key not in failed}
    try:
        _converter.structure(kept, cls)
    except ClassValidationError as retry:
        _, class_level = retry.group_exceptions()
        extra = [
            sub for sub in class_level if not isinstance(sub, (ForbiddenExtraKeysError, KeyError))
        ]
        if extra:
            return ClassValidationError(str(exc.message), [*exc.exceptions, *extra], cls)
    except Exception:  # noqa: BLE001 - the first error is the one to report
        pass
    return exc


def _structure_plugins(obj: object, _: object) -> PluginsConfig:
    """``[plugins]`` mixes three settings with one table per plugin; split them apart."""
    if not isinstance(obj, Mapping):
        raise _Mismatch("a table", obj)
    settings: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    errors: list[Exception] = []
    unknown: list[object] = []
    for key, value in obj.items():
        if key in PLUGINS_SETTING_KEYS:
            settings[key] = value
        elif isinstance(key, str) and isinstance(value, Mapping):
            sections[key] = dict(value)
        else:
            unknown.append(key)
    if unknown:
        errors.append(
            _UnknownKeys(
                unknown,
                PLUGINS_SETTING_KEYS,
                hint=" (besides enable, disable and strict, every key under plugins must be a "
                "table: a plugin's own section)",
            )
        )
    base: PluginsConfig | None = None
    try:
        base = _plugins_settings_hook(settings, PluginsConfig)
    except ClassValidationError as exc:
        errors.extend(exc.exceptions)
    if errors or base is None:
        raise ClassValidationError("While structuring PluginsConfig", errors, PluginsConfig)
    return attrs.evolve(base, sections=sections)


def _unstructure_plugins(plugins: PluginsConfig) -> dict[str, Any]:
    data: dict[str, Any] = {
        "enable": None if plugins.enable is None else list(plugins.enable),
        "disable": list(plugins.disable),
        "strict": plugins.strict,
    }
    for name, section in plugins.sections.items():
        data.setdefault(name, copy.deepcopy(section))
    return data


def _make_converter() -> cattrs.Converter:
    converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    converter.register_structure_hook(bool, _structure_bool)
    converter.register_structure_hook(int, _structure_int)
    converter.register_structure_hook(float, _structure_float)
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook_factory(_is_container, _container_hook_factory)
    converter.register_structure_hook_factory(_is_literal, _literal_hook_factory)
    converter.register_structure_hook(PluginsConfig, _structure_plugins)
    converter.register_unstructure_hook(PluginsConfig, _unstructure_plugins)
    return converter


_converter = _make_converter()
_plugins_settings_hook = make_dict_structure_fn(PluginsConfig, _converter)


def _field_names(cls: type) -> list[str]:
    try:
        return [field.name for field in attrs.fields(cls) if field.init]
    except (TypeError, ValueError):
        return []


def _problems(exc: BaseException, path: KeyPath = ()) -> list[_Problem]:
    """Flatten cattrs' tree of validation errors into problems with key paths.

    The same walk as :func:`cattrs.transform_error`, but keeping paths as tuples (so they can be
    spelled the user's way and traced to their source) and giving each unknown key its own line.
    """
    if isinstance(exc, IterableValidationError):
        found: list[_Problem] = []
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            found += _problems(sub, (*path, note.index))
        for sub in without:
            found += _problems(sub, path)
        return found
    if isinstance(exc, ClassValidationError):
        found = []
        class_notes, class_without = exc.group_exceptions()
        for sub, attribute_note in class_notes:
            found += _problems(sub, (*path, attribute_note.name))
        for sub in class_without:
            found += _problems(sub, path)
        return found
    if isinstance(exc, ForbiddenExtraKeysError):
        exc = _UnknownKeys(exc.extra_fields, _field_names(exc.cl))
    if isinstance(exc, _UnknownKeys):
        ordered = sorted(exc.keys, key=lambda key: (not isinstance(key, str), str(key)))
        return [
            _Problem(
                path,
                _unknown_key_message(key, exc.allowed, exc.hint),
                subject=(*path, key if isinstance(key, (str, int)) else str(key)),
            )
            for key in ordered
        ]
    if isinstance(exc, InvalidFields):
        return [_Problem((*path, *sub_path), message) for sub_path, message in exc.problems]
    if isinstance(exc, _Mismatch):
        return [_Problem(path, exc.message)]
    if isinstance(exc, KeyError):
        return [_Problem(path, "required, but missing")]
    if isinstance(exc, RecursionError):
        return [_Problem(path, "nested too deeply")]
    text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    return [
        _Problem(
            path, f"invalid value: {text}" if text else f"invalid value ({type(exc).__name__})"
        )
    ]


def _try_structure(data: object, cls: type[T]) -> tuple[T | None, list[_Problem]]:
    try:
        return _converter.structure(data, cls), []
    except cattrs.StructureHandlerNotFoundError:
        raise  # the class itself is unsupported: a bug in its author's code, not in the input
    except Exception as exc:  # noqa: BLE001 - everything the input can cause becomes a problem
        problems = _problems(exc)
        return None, problems or [_Problem((), f"invalid value: {exc}")]


def _format_problem(source: str, prefix: str, problem: _Problem) -> str:
    where = _join_path(prefix, dotted_path(problem.path))
    message = " ".join(problem.message.split("\n"))  # one problem, one line
    return f"{source}: {where}: {message}" if where else f"{source}: {message}"


def structure(data: Mapping[str, Any], cls: type[T], *, source: str, prefix: str) -> T:
    """Structure raw config ``data`` into the attrs class ``cls``, strictly.

    ``source`` names where the data came from (a file path, ``command line`` …) and ``prefix`` is
    the key path of ``data`` in that source (``tool.loopctl.plugins.my-plugin``), so every
    problem reads ``SOURCE: PREFIX.KEY: what is wrong``. Unknown keys and wrong types are
    errors. Raises :class:`ConfigError` listing every problem, one per line.
    """
    result, problems = _try_structure(data, cls)
    if problems or result is None:
        raise ConfigError([_format_problem(source, prefix, problem) for problem in problems])
    return result


# --- the schema: which key paths exist, and of what type ----------------------------------------


def _strip_optional(tp: Any) -> tuple[Any, bool]:
    """``X | None`` → ``(X, True)``; anything else → ``(tp, False)``."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [arg for arg in get_args(tp) if arg is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0], True
    return tp, False


def _is_table_type(tp: Any) -> bool:
    return attrs.has(tp) or is_mapping(tp)


def _type_at(parts: Sequence[str]) -> Any | None:
    """The type a key path of LoopctlConfig holds (``Any`` inside free-form sections), or None
    when no such key exists."""
    tp: Any = LoopctlConfig
    for part in parts:
        if tp is Any:
            continue
        if tp is PluginsConfig and part not in PLUGINS_SETTING_KEYS:
            tp = dict[str, Any]
        elif attrs.has(tp):
            field = attrs.fields_dict(tp).get(part)
            if field is None:
                return None
            tp = field.type
        elif is_mapping(tp):
            args = get_args(tp)
            tp = args[1] if len(args) == 2 else Any
        else:
            return None
    return tp


def _schema_leaves(
    cls: type = LoopctlConfig, prefix: KeyPath = ()
) -> Iterator[tuple[KeyPath, Any]]:
    """Every setting reachable through attrs classes alone (no named sections)."""
    for field in attrs.fields(cls):
        if cls is PluginsConfig and field.name == "sections":
            continue
        path = (*prefix, field.name)
        if attrs.has(field.type):
            yield from _schema_leaves(field.type, path)
        elif not is_mapping(field.type):
            yield path, field.type


def _known_paths() -> list[str]:
    names = [dotted_path(path) for path, _ in _schema_leaves()]
    names += [f.name for f in attrs.fields(LoopctlConfig) if _is_table_type(f.type)]
    return names


def _env_name(path: KeyPath) -> str:
    return ENV_PREFIX + "__".join(str(part).upper() for part in path)


#: ``LOOPCTL_LIMITS__MAX_ITERATIONS`` → (("limits", "max_iterations"), int), for every setting.
_ENV_KEYS: dict[str, tuple[KeyPath, Any]] = {
    _env_name(path): (path, tp) for path, tp in _schema_leaves()
}


def _needs_text_conversion(tp: Any) -> bool:
    inner, _ = _strip_optional(tp)
    return inner in (bool, int, float) or _is_literal(inner) or is_sequence(inner)


def _from_text(text: str, tp: Any) -> Any:
    """Convert text from the environment or command line by the target type."""
    inner, optional = _strip_optional(tp)
    if optional and not text.strip():
        return None
    if inner is bool:
        word = text.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise _Mismatch("a boolean (1/true/yes/on or 0/false/no/off)", text)
    if inner is int:
        try:
            return int(text.strip())
        except ValueError:
            raise _Mismatch("an integer", text) from None
    if inner is float:
        try:
            return float(text.strip())
        except ValueError:
            raise _Mismatch("a number", text) from None
    if _is_literal(inner):
        stripped = text.strip()
        for choice in get_args(inner):
            if isinstance(choice, str) and choice.lower() == stripped.lower():
                return choice
        raise _Mismatch(f"one of {_literal_choices(inner)}", text)
    if is_sequence(inner):
        args = get_args(inner)
        return [_from_text(item, args[0]) if args else item for item in split_list(text)]
    return text


# --- the layers ---------------------------------------------------------------------------------


@attrs.define
class _Layer:
    """One source's raw data, in loopctl.toml spelling, with what names it in messages."""

    data: dict[str, Any]
    #: The origin string recorded for every key this layer sets.
    origin: str
    source: str
    prefix: str = ""
    #: Per key path, a more precise origin and source (one environment variable each).
    origin_by_path: dict[KeyPath, str] = attrs.Factory(dict)


def _file_layer(path: Path, cwd: Path, warnings: list[str]) -> _Layer:
    display = display_path(path, cwd)
    document = read_toml(path, display)
    if path.name != PYPROJECT_FILE_NAME:
        return _Layer(document, origin=display, source=display)
    found, section = pyproject_section(document)
    if not found:
        warnings.append(f"{display} has no [{PYPROJECT_PREFIX}] table; using the defaults")
        section = {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{display}: {PYPROJECT_PREFIX}: expected a table, got {_show(section)}")
    return _Layer(dict(section), origin=display, source=display, prefix=PYPROJECT_PREFIX)


def _set_path(data: dict[str, Any], path: Sequence[str], value: Any) -> None:
    for part in path[:-1]:
        child = data.get(part)
        if not isinstance(child, dict):
            child = data[part] = {}
        data = child
    data[path[-1]] = value


def _env_layer(env: Mapping[str, str]) -> tuple[_Layer, list[str], list[str], bool]:
    """``(layer, problems, warnings, autoload)`` from ``LOOPCTL_*`` variables."""
    layer = _Layer({}, origin="environment", source="environment")
    problems: list[str] = []
    warnings: list[str] = []
    autoload = True
    for name in sorted(env):
        if not name.startswith(ENV_PREFIX) or name in NON_CONFIG_ENV_VARS:
            continue
        text = env[name]
        if name == ENV_DISABLE_AUTOLOAD:
            autoload = text.strip() in ("", "0")
            continue
        if name == ENV_PLUGINS:
            if not text.strip():
                continue  # set but empty: the same as unset
            target: tuple[KeyPath, Any] | None = (("plugins", "enable"), list[str])
        else:
            target = _ENV_KEYS.get(name)
        if target is None:
            warnings.append(_stray_env_warning(name))
            continue
        path, tp = target
        try:
            value = _from_text(text, tp)
        except _Mismatch as exc:
            problems.append(f"environment variable {name}: {dotted_path(path)}: {exc.message}")
            continue
        _set_path(layer.data, [str(part) for part in path], value)
        layer.origin_by_path[path] = f"env {name}"
    return layer, problems, warnings, autoload


def _stray_env_warning(name: str) -> str:
    parts = name[len(ENV_PREFIX) :].lower().split("__")
    if all(parts) and _type_at(parts) is not None:
        return (
            f"environment variable {name}: {dotted_path(parts)} cannot be set from the "
            "environment (only top-level settings and the keys of [limits], [stuck], [prompt] "
            "and [plugins] can); ignored"
        )
    close = difflib.get_close_matches(name.upper(), [*_ENV_KEYS, ENV_PLUGINS], n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"environment variable {name} does not name a loopctl setting; ignored{hint}"


def _parse_key_path(text: str) -> list[str] | None:
    """Split a dotted key path from the command line. A model name may hold dots, so everything
    after ``models.`` is one key; elsewhere TOML quoting (``agents."my.agent"``) is understood."""
    text = text.strip()
    if text.startswith("models.") and len(text) > len("models."):
        rest = text[len("models.") :]
        return ["models", _unquote(rest)]
    parts: list[str] = []
    pattern = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|\'([^\']*)\'|([A-Za-z0-9_-]+))\s*(\.|$)')
    position = 0
    while position < len(text):
        match = pattern.match(text, position)
        if match is None or match.end() == position:
            return None
        quoted, literal, bare, _ = match.groups()
        parts.append(_unquote(f'"{quoted}"') if quoted is not None else literal or bare or "")
        position = match.end()
        if match.group(4) == "" and position < len(text):
            return None
    return parts or None


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] == '"':
        try:
            value = json.loads(text)
        except ValueError:
            return text
        return value if isinstance(value, str) else text
    if len(text) >= 2 and text[0] == text[-1] == "'":
        return text[1:-1]
    return text


def _override_layer(overrides: Mapping[str, Any]) -> tuple[_Layer, list[str]]:
    layer = _Layer({}, origin="command line", source="command line")
    problems: list[str] = []
    for raw_path, value in overrides.items():
        parts = _parse_key_path(raw_path) if isinstance(raw_path, str) else None
        tp = _type_at(parts) if parts else None
        if parts is None or tp is None:
            close = difflib.get_close_matches(str(raw_path), _known_paths(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(f"command line: unknown key {str(raw_path)!r}{hint}")
            continue
        if isinstance(value, str) and _needs_text_conversion(tp):
            try:
                value = _from_text(value, tp)
            except _Mismatch as exc:
                problems.append(f"command line: {dotted_path(parts)}: {exc.message}")
                continue
        elif isinstance(value, Mapping):
            value = copy.deepcopy(dict(value))
        _set_path(layer.data, parts, value)
    return layer, problems


def _check_layer(layer: _Layer) -> list[str]:
    """Structure one layer alone, so each problem is reported against its own source."""
    _, problems = _try_structure(layer.data, LoopctlConfig)
    lines = []
    for problem in problems:
        source = layer.source
        subject = problem.subject or problem.path
        for path, origin in layer.origin_by_path.items():
            if subject[: len(path)] == path or path[: len(subject)] == subject:
                source = "environment variable " + origin.removeprefix("env ")
                break
        lines.append(_format_problem(source, layer.prefix, problem))
    return lines


def _leaves(data: Mapping[Any, Any]) -> Iterator[tuple[KeyPath, Any]]:
    """Every leaf value of nested tables (an empty table counts as a leaf). Iterative, so deep
    input cannot overflow the stack."""
    stack: list[tuple[KeyPath, Mapping[Any, Any]]] = [((), data)]
    while stack:
        prefix, table = stack.pop()
        for key, value in table.items():
            path = (*prefix, key)
            if isinstance(value, Mapping) and value:
                stack.append((path, value))
            else:
                yield path, value


def _merge(base: dict[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in top.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _merge(dict(below), value)
        else:
            merged[key] = value
    return merged


def _record_origins(origins: dict[str, str], layer: _Layer) -> None:
    for path, _ in _leaves(layer.data):
        key = dotted_path(path)
        for existing in list(origins):
            # a key set here replaces whatever an earlier layer had above or below it
            if existing.startswith((key + ".", key + "[")) or key.startswith(
                (existing + ".", existing + "[")
            ):
                del origins[existing]
        origin = layer.origin
        for env_path, env_origin in layer.origin_by_path.items():
            if path[: len(env_path)] == env_path:
                origin = env_origin
                break
        origins[key] = origin


# --- loading ------------------------------------------------------------------------------------


@attrs.define
class LoadedConfig:
    """The effective configuration and where each of its values came from."""

    config: LoopctlConfig
    #: The config file that was read, if any.
    file: Path | None = None
    #: Dotted key path (loopctl.toml spelling) → ``default``, the file's path (relative to
    #: ``cwd`` when inside it, as in messages),
    #: ``env LOOPCTL_X`` or ``command line``; one entry per leaf key.
    origins: dict[str, str] = attrs.Factory(dict)
    #: False when LOOPCTL_DISABLE_PLUGIN_AUTOLOAD is set: only allow-listed plugins load.
    autoload: bool = True
    #: Things worth telling the user that are not errors (stray LOOPCTL_ variables …).
    warnings: list[str] = attrs.Factory(list)

    def plugin_section(self, name: str, cls: type[T]) -> T:
        """Structure ``[plugins.NAME]`` (empty when absent) into the plugin's class ``cls``.

        Raises :class:`ConfigError` naming ``plugins.NAME.KEY`` as the source spells it.
        """
        return self._section(("plugins", name), self.config.plugins.sections.get(name, {}), cls)

    def agent_settings(self, name: str, cls: type[T]) -> T:
        """Structure ``[agents.NAME]`` (empty when absent) into the adapter's settings class."""
        return self._section(("agents", name), self.config.agents.get(name, {}), cls)

    def _section(self, where: KeyPath, data: Mapping[str, Any], cls: type[T]) -> T:
        data = self._typed_command_line_values(where, data, cls)
        result, problems = _try_structure(data, cls)
        if result is not None and not problems:
            return result
        raise ConfigError([self._format(where, problem) for problem in problems])

    def _typed_command_line_values(
        self, where: KeyPath, data: Mapping[str, Any], cls: type[Any]
    ) -> Mapping[str, Any]:
        """A plugin's keys set on the command line (``register_run_options``) arrive as text:
        convert them by the field's type, as the core's own flags are converted."""
        if not attrs.has(cls):
            return data
        try:
            attrs.resolve_types(cls)  # plugins' classes may use string annotations
        except Exception:  # noqa: BLE001 - unresolvable: leave the values to structuring
            return data
        converted = dict(data)
        for field in attrs.fields(cls):
            value = data.get(field.name)
            origin = self.origins.get(dotted_path((*where, field.name)))
            if (
                isinstance(value, str)
                and origin == "command line"
                and _needs_text_conversion(field.type)
            ):
                try:
                    converted[field.name] = _from_text(value, field.type)
                except _Mismatch:
                    pass  # structuring reports it, naming the key
        return converted

    def _format(self, where: KeyPath, problem: _Problem) -> str:
        """Name the problem after the source that set the offending key (its origin)."""
        subject = dotted_path((*where, *(problem.subject or problem.path)))
        origin = self.origins.get(subject)
        if origin is None:
            # an unset key inside a section: blame whoever set the section's other keys
            near = [
                value
                for key, value in self.origins.items()
                if key.startswith((subject + ".", subject + "["))
                or subject.startswith((key + ".", key + "["))
            ]
            origin = near[0] if near else None
        source, prefix = self._source_of(origin)
        return _format_problem(source, prefix, _Problem((*where, *problem.path), problem.message))

    def _source_of(self, origin: str | None) -> tuple[str, str]:
        """``(source, key prefix)`` for messages about a key with this origin."""
        if origin is not None and origin.startswith("env "):
            return "environment variable " + origin.removeprefix("env "), ""
        if origin == "command line":
            return origin, ""
        if self.file is None:
            return "configuration", ""
        prefix = PYPROJECT_PREFIX if self.file.name == PYPROJECT_FILE_NAME else ""
        if origin is not None and origin != "default":
            return origin, prefix
        file_origins = {
            value
            for value in self.origins.values()
            if value not in ("default", "command line") and not value.startswith("env ")
        }
        return (next(iter(file_origins)) if len(file_origins) == 1 else str(self.file)), prefix


def load_config(
    cwd: Path,
    *,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> LoadedConfig:
    """Read the configuration for a run in ``cwd``: defaults < file < environment < overrides.

    ``config_file`` (relative to ``cwd``) replaces discovery and must exist. ``env`` defaults to
    ``os.environ``. ``overrides`` maps dotted key paths (``limits.max_iterations``) to values
    from the command line; strings are converted by the target field's type. Raises
    :class:`ConfigError` listing every problem found in any source.
    """
    cwd = Path(os.path.abspath(cwd))
    try:
        return _load(cwd, config_file, os.environ if env is None else env, overrides or {})
    except RecursionError:
        raise ConfigError("configuration: nested too deeply") from None


def _load(
    cwd: Path, config_file: Path | None, env: Mapping[str, str], overrides: Mapping[str, Any]
) -> LoadedConfig:
    warnings: list[str] = []
    path = locate(cwd, config_file)

    layers: list[_Layer] = []
    problems: list[str] = []
    if path is not None:
        file_layer = _file_layer(path, cwd, warnings)
        layers.append(file_layer)
        problems += _check_layer(file_layer)

    env_layer, env_problems, env_warnings, autoload = _env_layer(env)
    warnings += env_warnings
    problems += env_problems
    problems += _check_layer(env_layer)
    layers.append(env_layer)

    cli_layer, cli_problems = _override_layer(overrides)
    problems += cli_problems
    problems += _check_layer(cli_layer)
    layers.append(cli_layer)

    if problems:
        raise ConfigError(problems)

    merged: dict[str, Any] = {}
    origins = {dotted_path(key_path): "default" for key_path, _ in _schema_leaves()}
    for layer in layers:
        merged = _merge(merged, layer.data)
        _record_origins(origins, layer)
    config = structure(merged, LoopctlConfig, source="configuration", prefix="")
    return LoadedConfig(
        config=config, file=path, origins=origins, autoload=autoload, warnings=warnings
    )


def config_to_dict(loaded: LoadedConfig) -> dict[str, Any]:
    """The effective configuration as plain data, laid out like ``loopctl.toml`` (plugin
    sections sit directly under ``plugins``); unset values are None."""
    data: dict[str, Any] = _converter.unstructure(loaded.config)
    return data


#: Setting names whose text values are secrets (an API key an agent's env table sets, say).
_SECRET_NAME = re.compile(r"(?i)token|secret|passw(or)?d|credential|api_?key|private_?key")
#: Shown instead of a secret by ``loopctl config show``.
HIDDEN = "<hidden>"


def hide_secrets(data: Any, name: str = "", in_env: bool = False) -> Any:
    """``data`` (from :func:`config_to_dict`) with secret-looking text values replaced by
    :data:`HIDDEN`, for printing: a value is hidden when its setting's name says it is a
    token, secret, password, credential or API key, or, in an ``env`` table, a key
    (``OPENAI_KEY``). ``*_env`` settings name a variable, they do not hold one."""
    if isinstance(data, dict):
        inside = in_env or name == "env"
        return {key: hide_secrets(value, str(key), inside) for key, value in data.items()}
    if isinstance(data, list):
        return [hide_secrets(item, name, in_env) for item in data]
    if not isinstance(data, str) or not data or name.lower().endswith("_env"):
        return data
    if _SECRET_NAME.search(name) or (in_env and re.search(r"(?i)key", name)):
        return HIDDEN
    return data


# --- documentation ------------------------------------------------------------------------------


@attrs.frozen
class FieldDoc:
    """One setting, as the generated config reference shows it."""

    #: Dotted key path in loopctl.toml spelling; named sections show as ``agents.<agent>``.
    path: str
    #: The type, spelled like a Python annotation (``int | None``, ``list[str]``).
    type: str
    #: The default value (a fresh copy for list defaults); None when required and for the
    #: entries of named tables (``agents.<agent>``, ``plugins.<plugin>``, ``models.<model>``).
    default: Any
    doc: str
    required: bool = False


def _type_text(tp: Any) -> str:
    if tp is type(None) or tp is None:
        return "None"
    if tp is Any:
        return "Any"
    if isinstance(tp, str):
        return tp
    origin, args = get_origin(tp), get_args(tp)
    if origin is Literal:
        return " | ".join(json.dumps(arg) if isinstance(arg, str) else repr(arg) for arg in args)
    if origin in (Union, types.UnionType):
        return " | ".join(_type_text(arg) for arg in args)
    if origin is not None and args:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(_type_text(arg) for arg in args)}]"
    return getattr(tp, "__name__", str(tp))


def describe_fields(cls: type, prefix: str = "") -> list[FieldDoc]:
    """Every field of an attrs config class, nested classes flattened into dotted paths, with
    type, default and the ``doc`` metadata: the source of the generated config reference."""
    try:
        attrs.resolve_types(cls)
    except (NameError, TypeError, AttributeError):
        pass  # unresolvable annotations are shown as written
    docs: list[FieldDoc] = []
    for field in attrs.fields(cls):
        metadata = field.metadata
        # doc_path replaces the key for named sections: "agents.<agent>", "plugins.<plugin>"
        path = _join_path(prefix, metadata.get("doc_path", field.name))
        if attrs.has(field.type) and not isinstance(field.type, str):
            docs += describe_fields(field.type, path)
            continue
        required = field.default is attrs.NOTHING
        default: Any = None
        if "doc_path" in metadata:
            pass  # one entry of a named table has no default; the table starts empty
        elif isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            factory = field.default
            default = None if factory.takes_self else factory.factory()
        elif not required:
            default = field.default
        docs.append(
            FieldDoc(
                path=path,
                type=metadata.get("doc_type") or _type_text(field.type),
                default=default,
                doc=str(metadata.get("doc", "")),
                required=required,
            )
        )
    return docs


# --- model context windows ----------------------------------------------------------------------

#: Context windows in tokens of well-known models. Names match exactly, then by longest prefix
#: (``claude-sonnet-4-5-20250929`` is ``claude-sonnet-4-5``); any name ending ``[1m]`` has
#: 1,000,000. ``[models]`` in the config extends and overrides this table.
DEFAULT_MODEL_WINDOWS: dict[str, int] = {
    # Anthropic
    "claude-opus-4-1": 200_000,
    "claude-opus-4": 200_000,
    "claude-opus-4-5": 200_000,
    "claude-sonnet-4-5": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-haiku-4-5": 200_000,
    "claude-3-7-sonnet": 200_000,
    "claude-3-5-sonnet": 200_000,
    "claude-3-5-haiku": 200_000,
    "opus": 200_000,
    "sonnet": 200_000,
    "haiku": 200_000,
    # OpenAI (Codex reports what is usable of gpt-5-codex's window: 272k)
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "gpt-5-codex": 272_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "openai/gpt-4o": 128_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    # Google
    "gemini-2.5-pro": 1_048_576,
    "gemini-2.5-flash": 1_048_576,
    "gemini-2.5-flash-lite": 1_048_576,
    "gemini-2.0-flash": 1_048_576,
    "gemini-3": 1_048_576,
}

#: Suffix some CLIs add to a model name to ask for its million-token context window.
ONE_MILLION_SUFFIX = "[1m]"


def context_window_for(model: str | None, table: Mapping[str, int]) -> int | None:
    """The context window of ``model`` in tokens, or None when it is not known.

    ``table`` (usually ``config.models``) extends and overrides :data:`DEFAULT_MODEL_WINDOWS`.
    Exact name first, then the ``[1m]`` suffix rule, then the longest known name that ``model``
    starts with. Matching ignores case and a provider path (``openrouter/google/…``).
    """
    if not model or not model.strip():
        return None
    name = model.strip().lower()
    windows = {key.lower(): value for key, value in {**DEFAULT_MODEL_WINDOWS, **table}.items()}
    candidates = list(dict.fromkeys([name, name.rsplit("/", 1)[-1]]))
    for candidate in candidates:
        if candidate in windows:
            return windows[candidate]
    if name.endswith(ONE_MILLION_SUFFIX):
        return 1_000_000
    for candidate in candidates:
        prefixes = [key for key in windows if key and candidate.startswith(key)]
        if prefixes:
            return windows[max(prefixes, key=len)]
    return None


def model_windows(config: LoopctlConfig) -> dict[str, int]:
    """The built-in context-window table with the config's ``[models]`` applied."""
    return {**DEFAULT_MODEL_WINDOWS, **config.models}
