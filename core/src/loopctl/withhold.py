"""The variables a run withholds (``withhold_env``, ``LOOPCTL_WITHHOLD_ENV``), and the one place
that builds the environment of every process loopctl starts.

``withhold_env`` names variables (or shell-style patterns, ``AWS_*``) that loopctl's plugins may
need but that no child process may see: the agent, the test command and its re-runs, a recovery
command such as the failure classifier's reinstall (which runs the project's ``preinstall``
script, code the agent can edit), git, an adapter's ``--version`` probe. Every one of them gets
its environment from :func:`child_environment`.

The same registry tells :mod:`loopctl.redaction` which values to mask: the value of a withheld
variable is replaced wherever it appears in what loopctl writes or prints.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from typing import Any

#: The variable that adds patterns to ``withhold_env`` from the environment (comma-separated).
ENV_VARIABLE = "LOOPCTL_WITHHOLD_ENV"
#: Variables whose name says they hold a secret: their values are masked in what loopctl writes
#: even when they are not withheld (the agent may need its API key; no file needs it).
SECRET_NAME = re.compile(r"(?i)token|secret|passw(?:or)?d|credential|api_?key|private_?key")
#: A value shorter than this is not masked: it would mask ordinary words ("true", "1").
MIN_SECRET_CHARS = 6

_patterns: tuple[str, ...] = ()
_values: tuple[str, ...] | None = None


def _from_environment() -> tuple[str, ...]:
    raw = os.environ.get(ENV_VARIABLE, "")
    return tuple(item.strip() for item in raw.split(",") if item.strip())


def set_withheld(patterns: Iterable[str]) -> None:
    """Make ``patterns`` (a run's ``withhold_env``) the withheld variables of this process; the
    values to mask are read from the environment now. Called when a run or a project's
    configuration is loaded."""
    global _patterns, _values
    _patterns = tuple(dict.fromkeys(str(p) for p in patterns if str(p).strip()))
    _values = None


def withheld_patterns() -> tuple[str, ...]:
    """The patterns set with :func:`set_withheld`, and those in ``LOOPCTL_WITHHOLD_ENV``."""
    return tuple(dict.fromkeys((*_patterns, *_from_environment())))


def is_withheld(name: str, patterns: Iterable[str] | None = None) -> bool:
    """Whether variable ``name`` matches one of ``patterns`` (default: the withheld ones)."""
    chosen = withheld_patterns() if patterns is None else tuple(patterns)
    return any(fnmatchcase(name, pattern) for pattern in chosen)


def child_environment(
    extra: Mapping[str, str | None] | None = None,
    *,
    withhold: Iterable[str] | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment for a process loopctl starts: ``base`` (default ``os.environ``) without
    the withheld variables, then ``extra`` on top (a ``None`` value removes a variable).

    ``withhold`` replaces the process's withheld patterns (:func:`withheld_patterns`) for this
    call; ``LOOPCTL_WITHHOLD_ENV`` always applies. ``extra`` is the caller's own word: a
    variable it names is set even when a pattern withholds it."""
    patterns = withheld_patterns() if withhold is None else (*withhold, *_from_environment())
    env = dict(_kept_environment(patterns)) if base is None else _kept(base, patterns)
    for name, value in (extra or {}).items():
        if value is None:
            env.pop(str(name), None)
        else:
            env[str(name)] = str(value)
    return env


def _kept(source: Mapping[str, str], patterns: tuple[str, ...]) -> dict[str, str]:
    return {
        name: value
        for name, value in source.items()
        if not any(fnmatchcase(name, pattern) for pattern in patterns)
    }


def _kept_environment(patterns: tuple[str, ...]) -> dict[str, str]:
    """``os.environ`` without the variables ``patterns`` withhold, built again only when the
    environment or the patterns changed: reading ``os.environ`` decodes every name and value,
    and the loop starts three processes an iteration. Its raw ``bytes`` copy is compared
    (a C-level comparison) where ``os.environ`` keeps one; the caller copies the result."""
    global _last_environment
    raw = getattr(os.environ, "_data", None)
    if not isinstance(raw, dict):
        return _kept(os.environ, patterns)
    cached = _last_environment  # one tuple, replaced whole: safe beside other threads
    if cached is not None and cached[0] == patterns and cached[1] == raw:
        return cached[2]
    copy = dict(raw)  # first: a change made meanwhile is seen by the next call
    env = _kept(os.environ, patterns)
    _last_environment = (patterns, copy, env)
    return env


#: The last :func:`_kept_environment`: its patterns, ``os.environ``'s raw copy, the result.
_last_environment: tuple[tuple[str, ...], dict[Any, Any], dict[str, str]] | None = None


def secret_values() -> tuple[str, ...]:
    """The values to mask wherever they appear: those of the withheld variables and of the
    variables whose names say they hold a secret (:data:`SECRET_NAME`), longest first. Read from
    the environment when the patterns were last set."""
    global _values
    if _values is None:
        patterns = withheld_patterns()
        found = {
            value
            for name, value in os.environ.items()
            if len(value) >= MIN_SECRET_CHARS
            and (
                any(fnmatchcase(name, pattern) for pattern in patterns)
                or (SECRET_NAME.search(name) and not name.endswith("_ENV"))
            )
        }
        _values = tuple(sorted(found, key=len, reverse=True))
    return _values


__all__ = [
    "ENV_VARIABLE",
    "MIN_SECRET_CHARS",
    "SECRET_NAME",
    "child_environment",
    "is_withheld",
    "secret_values",
    "set_withheld",
    "withheld_patterns",
]
