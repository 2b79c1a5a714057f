"""Where is the project? Read from the output's own paths, not from the working directory.

A test run's output names the project's files: pytest's ``rootdir:``, a traceback's
``File "/home/me/shop/tests/test_cart.py"``, a compiler's ``src/calc.c:3:9``. From them come the
project's root (so a log classified from another directory is judged against its own project)
and the names of the project's files the output shows (so a log whose project is not on this
machine at all still tells ``billing/invoice.py``'s ``billing`` from a package). Only the ends of
a log and its decisive lines are read, as the rules do: a 10 MB log costs no more than a small
one. Nothing here raises.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import PurePosixPath

from loopctl import LazyPattern

#: How much of a log's start and end is read for paths (the failure's lines are read too).
HEAD_CHARS = 4 * 1024
TAIL_CHARS = 16 * 1024
#: Paths taken from one output at most, and parent directories climbed to find a project marker.
MAX_PATHS = 400
MAX_CLIMB = 4

#: Source files a test run or a build names (the extension tells a file from a word).
_SOURCE = (
    r"py|pyi|rb|rake|c|h|cc|cpp|cxx|hh|hpp|hxx|go|rs|java|kt|kts|scala|ex|exs|erl|hs|lhs|php"
    r"|js|mjs|cjs|jsx|ts|tsx|mts|cts|swift|cs|fs|dart|nix|bzl|cmake|sh|pm|pl|lua|ml|mli|f90|hrl"
)
_ABSOLUTE = LazyPattern(rf"(?<![\w.~-])(/(?:[\w.+@-]+/)+[\w.+@-]+\.(?:{_SOURCE}))(?![\w])")
_RELATIVE = LazyPattern(
    rf"(?:^|(?<=[\s'\"(\[`]))((?:\.{{1,2}}/)?(?:[\w+@-][\w.+@-]*/)*[\w+@-][\w.+@-]*\.(?:{_SOURCE}))"
    r"(?=[:'\"\s(),\]`]|$)",
    re.MULTILINE,
)
#: What follows a path that is a location (a frame, a compiler message), not a thing named
#: (``fatal error: zstd.h: No such file`` names a header; ``calc.c:1:10:`` is a place).
_LOCATION = LazyPattern(r':\d|", line \d|\(\d|\s+on line \d')
_ROOTDIR = LazyPattern(r"^rootdir: (?P<root>/\S+)", re.MULTILINE)
#: Other people's code: a path through one of these is not the project's.
INSTALLED = (
    "site-packages",
    "dist-packages",
    "node_modules",
    "/usr/",
    "/lib/python",
    "/.pyenv/",
    "/.rustup/",
    "/rustc/",
    "/.cargo/registry/",
    "/go/pkg/mod/",
    "/.m2/",
    "/.gradle/",
    "/gems/",
    "/vendor/",
    "/nix/store/",
    "/opt/",
    "<internal:",
    "/_build/",
    "/deps/",
    "/dist-newstyle/",
)
#: Files that mark a project's root directory.
MARKERS = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "tox.ini",
    "pytest.ini",
    ".git",
    "package.json",
    "Cargo.toml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "CMakeLists.txt",
    "Makefile",
    "WORKSPACE",
    "MODULE.bazel",
    "flake.nix",
    "conanfile.py",
    "conanfile.txt",
    ".pre-commit-config.yaml",
)


def installed(path: str) -> bool:
    """Whether ``path`` runs through other people's code (an environment, a registry cache)."""
    return any(part in path for part in INSTALLED)


def window(output: str, around: Iterable[str] = ()) -> str:
    """The parts of ``output`` that are read for paths: its ends and the decisive lines
    ``around`` (already extracted: no search of a long output for them)."""
    if len(output) <= HEAD_CHARS + TAIL_CHARS:
        return output
    return "\n".join([output[:HEAD_CHARS], output[-TAIL_CHARS:], *around])


class OutputPaths:
    """The project's paths an output shows: ``absolute`` and ``relative`` files (not installed
    ones), in the order they appear, each once."""

    __slots__ = ("absolute", "located", "relative", "rootdirs")

    def __init__(self, text: str) -> None:
        self.rootdirs = [m.group("root").rstrip("/") for m in _ROOTDIR.compiled.finditer(text)][:3]
        # path -> shown as a place (``file:line``, a frame) rather than as a thing that is
        # missing; a log names the same few files over and over: each is judged once
        absolute: dict[str, bool] = {}
        relative: dict[str, bool] = {}
        for pattern, found in ((_ABSOLUTE, absolute), (_RELATIVE, relative)):
            for match in pattern.compiled.finditer(text):
                path = match.group(1).removeprefix("./")
                if not found.get(path):
                    found[path] = bool(_LOCATION.compiled.match(text, match.end()))
        self.absolute = _unique(p for p in absolute if not installed(p))
        self.relative = _unique(p for p in relative if p not in absolute and not installed(p))
        kept = {*self.absolute, *self.relative}
        #: The paths shown as places, not as things that are missing.
        self.located = _unique(
            p for p, place in (*absolute.items(), *relative.items()) if place and p in kept
        )

    def roots(self) -> list[str]:
        """The project's root directories, best first: pytest's ``rootdir:``; an absolute path
        that ends with a relative one the output also shows (``/w/shop/tests/t.py`` and
        ``tests/t.py``: ``/w/shop``); else the nearest directory above an absolute path that
        holds a project marker (``pyproject.toml``, ``Cargo.toml``, …), or the path's own
        directory. Only directories that exist are kept."""
        found = list(self.rootdirs)
        relative = set(self.relative)
        for path in self.absolute:
            pure = PurePosixPath(path)
            for count in range(len(pure.parts) - 2, 0, -1):  # the longest tail first
                tail = "/".join(pure.parts[-count:])
                if tail in relative:
                    found.append(str(PurePosixPath(*pure.parts[:-count])))
        for path in self.absolute:
            found.append(_marked(os.path.dirname(path)))
        return [root for root in _unique(found) if _is_dir(root)][:3]

    def names(self, roots: Iterable[str] = ()) -> set[str]:
        """The names the project's files give: every directory and file stem of the relative
        paths shown as places (``billing/invoice.py:1``: billing, invoice), and of the absolute
        ones below ``roots``."""
        names: set[str] = set()
        prefixes = [root.rstrip("/") + "/" for root in roots]
        shown = [path for path in self.located if not path.startswith("/")]
        for path in self.located:
            for prefix in prefixes:
                if path.startswith(prefix):
                    shown.append(path[len(prefix) :])
                    break
        for path in shown:
            parts = [p for p in PurePosixPath(path).parts if p not in (".", "..")]
            if not parts:
                continue
            names.update(parts[:-1])
            names.add(parts[-1].split(".", 1)[0])
        names.discard("")
        return names


def _unique(paths: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(paths))[:MAX_PATHS]


def _is_dir(path: str) -> bool:
    try:
        return os.path.isdir(path)
    except (OSError, ValueError):
        return False


def _marked(directory: str) -> str:
    """The nearest directory at or above ``directory`` (``MAX_CLIMB`` levels) that holds a
    project marker; ``directory`` itself when none does (or it is not on this machine)."""
    current = directory
    for _ in range(MAX_CLIMB):
        try:
            if any(os.path.exists(os.path.join(current, marker)) for marker in MARKERS):
                return current
        except (OSError, ValueError):
            break
        parent = os.path.dirname(current)
        if len(PurePosixPath(parent).parts) < 3:
            break  # never "/" or a top directory such as /tmp or /home
        current = parent
    return directory
