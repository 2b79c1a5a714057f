"""Field documentation for the generated config reference."""

from __future__ import annotations

import json
import types
from typing import Any, Literal, Union, get_args, get_origin

import attrs

from loopctl.config.errors import join_path


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
        path = join_path(prefix, metadata.get("doc_path", field.name))
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
