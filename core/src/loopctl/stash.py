"""Per-run plugin state: a typed :class:`Stash` on the loop, keyed by :class:`StashKey`.

pytest's ``Stash`` is the model. A plugin makes one key per kind of value at import time and
keeps its run's state under it, instead of in module globals that outlive the run (and leak
between two loops in one process)::

    MONITOR = loopctl.StashKey[Monitor]()

    @loopctl.hookimpl
    def on_loop_start(loop):
        loop.stash[MONITOR] = Monitor(loop)

    @loopctl.hookimpl
    def after_iteration(loop, record):
        return loop.stash[MONITOR].decide(record)

The stash lives as long as the run and is not written anywhere; for a small value that must
survive ``loopctl resume``, use :meth:`loopctl.Loop.set_value`.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast, overload

T = TypeVar("T")
D = TypeVar("D")


class StashKey(Generic[T]):
    """A key into a :class:`Stash`. Keys compare by identity: two plugins can never collide,
    and the key's type parameter types the value (``StashKey[Monitor]()``)."""

    __slots__ = ()


class Stash:
    """A typed, per-run store for plugins: ``loop.stash[KEY] = value``, ``loop.stash[KEY]``,
    ``loop.stash.get(KEY, default)``, ``KEY in loop.stash``, ``del loop.stash[KEY]``,
    ``loop.stash.setdefault(KEY, value)``."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[StashKey[Any], object] = {}

    def __setitem__(self, key: StashKey[T], value: T) -> None:
        self._values[key] = value

    def __getitem__(self, key: StashKey[T]) -> T:
        """The value under ``key``; KeyError when there is none."""
        return cast(T, self._values[key])

    @overload
    def get(self, key: StashKey[T]) -> T | None: ...
    @overload
    def get(self, key: StashKey[T], default: D) -> T | D: ...
    def get(self, key: StashKey[T], default: object = None) -> object:
        """The value under ``key``, or ``default`` when there is none."""
        return self._values.get(key, default)

    def setdefault(self, key: StashKey[T], default: T) -> T:
        """The value under ``key``; when there is none, ``default``, stored first."""
        return cast(T, self._values.setdefault(key, default))

    def __delitem__(self, key: StashKey[T]) -> None:
        del self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __len__(self) -> int:
        return len(self._values)
