"""The strict cattrs converter: TOML gives real types, so no value is coerced into another type."""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args, get_origin

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
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.gen import make_dict_structure_fn, mapping_structure_factory

from loopctl.config.errors import Mismatch, UnknownKeys
from loopctl.config.schema import PLUGINS_SETTING_KEYS, PluginsConfig


def _structure_bool(obj: object, _: object) -> bool:
    if isinstance(obj, bool):
        return obj
    raise Mismatch("a boolean (true or false)", obj)


def _structure_int(obj: object, _: object) -> int:
    if isinstance(obj, int) and not isinstance(obj, bool):
        return int(obj)
    raise Mismatch("an integer", obj)


def _structure_float(obj: object, _: object) -> float:
    if isinstance(obj, (int, float)) and not isinstance(obj, bool):
        try:
            return float(obj)
        except OverflowError:
            pass
    raise Mismatch("a number", obj)


def _structure_str(obj: object, _: object) -> str:
    if isinstance(obj, str):
        return str(obj)
    raise Mismatch("a string", obj)


def is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def literal_choices(tp: Any) -> str:
    return ", ".join(repr(choice) for choice in get_args(tp))


def _literal_hook_factory(tp: Any) -> Callable[[Any, Any], Any]:
    choices = get_args(tp)

    def structure_literal(obj: object, _: object) -> Any:
        for choice in choices:
            # type check first: True == 1 must not pass as 1, and unhashables must not crash
            if type(obj) is type(choice) and obj == choice:
                return choice
        raise Mismatch(f"one of {literal_choices(tp)}", obj)

    return structure_literal


def _is_container(tp: Any) -> bool:
    return attrs.has(tp) or is_mapping(tp) or is_any_set(tp) or is_sequence(tp)


def _container_hook_factory(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
    """Structure hooks that check the container's own type first: cattrs alone would happily
    read a string as a list of characters, or look keys up in it as if it were a table."""
    if attrs.has(tp):
        return _class_hook(tp, make_dict_structure_fn(tp, converter))
    if is_mapping(tp):
        return _table_hook(tp, mapping_structure_factory(tp, converter, structure_to=dict))
    return _array_hook(tp, converter)


def _table_hook(tp: Any, inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def structure_table(obj: object, _: object) -> Any:
        if not isinstance(obj, Mapping):
            raise Mismatch("a table", obj)
        return inner(obj, tp)

    return structure_table


def _class_hook(cls: Any, inner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    structure_table = _table_hook(cls, inner)

    def structure_class(obj: object, _: object) -> Any:
        try:
            return structure_table(obj, cls)
        except ClassValidationError as exc:
            raise _with_range_problems(exc, obj, cls, structure_table) from None

    return structure_class


def _array_hook(tp: Any, converter: cattrs.Converter) -> Callable[[Any, Any], Any]:
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
            raise Mismatch("an array", obj)
        return make(as_list(obj, tp))

    return structure_array


def _with_range_problems(
    exc: ClassValidationError,
    obj: object,
    cls: Any,
    structure_table: Callable[[Any, Any], Any],
) -> ClassValidationError:
    """Add the class's own checks of the fields that did structure.

    cattrs builds the instance only when every field structured, so a wrong type would hide an
    out-of-range value next to it until the next run. Retrying with the good fields alone (the
    others at their defaults) runs ``__attrs_post_init__`` and reports both at once. The retry
    goes through ``structure_table`` (this hook's inner structuring), never through this hook
    again: a class with a required field that is missing fails the retry the same way, and
    retrying that would recurse to Python's recursion limit.
    """
    with_notes, _ = exc.group_exceptions()
    failed = {note.name for _, note in with_notes}
    if not failed or not isinstance(obj, Mapping):
        return exc
    allowed = set(field_names(cls))
    kept = {key: value for key, value in obj.items() if key in allowed and key not in failed}
    try:
        structure_table(kept, cls)
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
        raise Mismatch("a table", obj)
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
            UnknownKeys(
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
    converter.register_structure_hook_factory(is_literal, _literal_hook_factory)
    converter.register_structure_hook(PluginsConfig, _structure_plugins)
    converter.register_unstructure_hook(PluginsConfig, _unstructure_plugins)
    return converter


converter = _make_converter()
_plugins_settings_hook = make_dict_structure_fn(PluginsConfig, converter)


def field_names(cls: type) -> list[str]:
    try:
        return [field.name for field in attrs.fields(cls) if field.init]
    except (TypeError, ValueError):
        return []
