"""``-v``/``-q``: the global options that set how much loopctl says, and the logging setup
they ask for (see :mod:`loopctl.debuglog`)."""

from __future__ import annotations

from typing import Any

#: The global options moved before the command (``loopctl run … -v`` as ``loopctl -v run …``).
GLOBAL_FLAGS = frozenset({"-v", "-vv", "-vvv", "--verbose", "-q", "--quiet"})

#: The handler :func:`configure` added to the root logger (removed by :func:`reset`).
_handlers: list[Any] = []


def global_options_first(args: list[str]) -> list[str]:
    """``args`` with the global flags that follow the command moved in front of it (as uv and
    gh allow), up to a ``--`` (after which every word is an argument)."""
    end = args.index("--") if "--" in args else len(args)
    flags = [arg for arg in args[:end] if arg in GLOBAL_FLAGS]
    if not flags:
        return args
    rest = [arg for arg in args[:end] if arg not in GLOBAL_FLAGS]
    return [*flags, *rest, *args[end:]]


def configure(verbosity: int) -> None:
    """Log to stderr: debug records of loopctl and its plugins at 1 (``-v``), of everything at
    2 (``-vv``); warnings and errors only at -1 (``-q``)."""
    import logging

    from loopctl.debuglog import is_ours

    reset()

    class Lines(logging.Formatter):
        """``loopctl: debug: loopctl.tests: …``, as loopctl's own warnings read."""

        def format(self, record: logging.LogRecord) -> str:
            record.levelname_lower = record.levelname.lower()
            return super().format(record)

    class Stderr(logging.StreamHandler):  # type: ignore[type-arg]
        """To whatever ``sys.stderr`` is when a record comes: under the live view, rich's
        proxy, which prints each line once above the panel (a stream taken at start-up
        wrote under the panel, which then drew over the line)."""

        @property
        def stream(self) -> Any:
            import sys

            return sys.stderr

        @stream.setter
        def stream(self, value: Any) -> None:
            pass

    handler = Stderr()
    handler.setFormatter(Lines("loopctl: %(levelname_lower)s: %(name)s: %(message)s"))
    if verbosity == 1:
        handler.addFilter(lambda record: record.levelno >= logging.WARNING or is_ours(record.name))
    root = logging.getLogger()
    root.addHandler(handler)
    _handlers.append((handler, root.level))
    root.setLevel(logging.DEBUG if verbosity > 0 else logging.WARNING)


def reset() -> None:
    """Undo :func:`configure` (``main`` may be called again in the same process)."""
    import sys

    logging = sys.modules.get("logging")
    if logging is None:
        return
    root = logging.getLogger()
    while _handlers:
        handler, level = _handlers.pop()
        root.removeHandler(handler)
        root.setLevel(level)
