"""Is a missing module the project's own code or a third-party package?

"No module named 'billing.rates'" is a dependency problem when ``billing`` is a package from
PyPI and a code error when ``billing/`` is a directory of the project (the agent deleted or
misnamed a file). The answer comes from the working directory: a bounded look for a file or
package of that name, skipping vendored and virtual-environment directories. Every check is
cached per classification and never raises (an unreadable tree counts as "not found").
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: Directories that hold other people's code (or nothing of interest).
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".loopctl",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        "env",
        ".tox",
        ".nox",
        "site-packages",
        "dist-packages",
        "target",
        "build",
        "dist",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "vendor",
    }
)
MAX_DEPTH = 4
MAX_ENTRIES = 20_000

_C_SUFFIXES = (".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx")
_NODE_ALIAS_PREFIXES = ("./", "../", "/", "@/", "~/", "#", "src/", "file:")
_GO_MODULE = re.compile(r"^module\s+(\S+)", re.MULTILINE)


def _similar(name: str, names: set[str]) -> str | None:
    """A project module whose name is a near miss for ``name`` (a typo, a rename)."""
    if len(name) < 4:
        return None
    for other in sorted(names):
        if other.startswith(name + "_") or name.startswith(other + "_"):
            return other
    import difflib  # here: only a missing module's name needs it, not every classification

    close = difflib.get_close_matches(name, sorted(names), n=1, cutoff=0.85)
    return close[0] if close else None


class Locality:
    """Answers "is this name the project's own code?" for one working directory."""

    def __init__(self, workdir: Path | None) -> None:
        self.workdir = workdir
        self._python: set[str] | None = None
        self._cache: dict[tuple[str, str], tuple[bool, str]] = {}

    # --- the bounded walk ---------------------------------------------------------------------

    def _python_names(self) -> set[str]:
        """Top-level importable names the project defines: ``x.py`` files and ``x/`` packages
        (directories with Python files), anywhere in the first few levels of the tree."""
        if self._python is not None:
            return self._python
        names: set[str] = set()
        root = self.workdir
        if root is None:
            self._python = names
            return names
        seen = 0
        try:
            for current, dirs, files in os.walk(root):
                depth = len(Path(current).relative_to(root).parts)
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
                if depth >= MAX_DEPTH:
                    dirs[:] = []
                seen += len(dirs) + len(files)
                if any(f.endswith(".py") for f in files) and depth > 0:
                    names.add(Path(current).name)
                names.update(f[:-3] for f in files if f.endswith(".py"))
                if seen > MAX_ENTRIES:
                    break
        except (OSError, ValueError):
            pass
        self._python = names
        return names

    # --- the checks ---------------------------------------------------------------------------

    def is_own(self, kind: str, name: str, line: str = "") -> tuple[bool, str]:
        """``(own, why)`` for ``name`` of ``kind`` (a :class:`~.rules.Rule` locality)."""
        key = (kind, name)
        if key not in self._cache:
            try:
                self._cache[key] = self._check(kind, name, line)
            except (OSError, ValueError):
                self._cache[key] = (False, "")
        return self._cache[key]

    def _check(self, kind: str, name: str, line: str) -> tuple[bool, str]:
        if kind == "python_module":
            return self._python_module(name, line)
        if kind == "node_module":
            return self._node_module(name)
        if kind == "rust_crate":
            return self._rust_crate(name)
        if kind == "go_package":
            return self._go_package(name)
        if kind == "java_package":
            return self._java_package(name)
        if kind == "command":
            return self._command(name)
        if kind == "c_header":
            return self._c_header(name)
        return False, ""

    def _python_module(self, name: str, line: str) -> tuple[bool, str]:
        if "is not a package" in line:
            return True, f"'{name}' is shadowed by a module of the project (\"is not a package\")"
        top = name.split(".")[0]
        if name.startswith(".") or not top:
            return True, f"'{name}' is a relative import of the project's own code"
        names = self._python_names()
        if top in names:
            where = self._where_python(top)
            return True, f"'{name}' is the project's own code ({where} is in the working directory)"
        similar = _similar(top, names)
        if similar:
            return (
                True,
                f"'{name}' looks like the project's own module {similar!r} renamed or misspelt",
            )
        return False, ""

    def _where_python(self, top: str) -> str:
        root = self.workdir
        assert root is not None
        for candidate in (root / f"{top}.py", root / top, root / "src" / top):
            if candidate.exists():
                return str(candidate.relative_to(root))
        return f"a module named {top}"

    def _node_module(self, spec: str) -> tuple[bool, str]:
        if spec.startswith(_NODE_ALIAS_PREFIXES) or spec in (".", ".."):
            return True, f"'{spec}' is a path into the project, not a package"
        root = self.workdir
        if root is not None:
            for base in (root, root / "src"):
                candidate = base / spec
                if candidate.exists() or any(
                    candidate.with_name(candidate.name + ext).exists()
                    for ext in (".js", ".ts", ".mjs", ".cjs", ".tsx", ".jsx")
                ):
                    return True, f"'{spec}' is a file of the project"
        return False, ""

    def _rust_crate(self, name: str) -> tuple[bool, str]:
        if name in ("crate", "self", "super"):
            return True, f"`{name}` is a path into the project's own crate"
        root = self.workdir
        if root is not None:
            for candidate in (
                root / "src" / f"{name}.rs",
                root / "src" / name / "mod.rs",
                root / name / "Cargo.toml",
            ):
                if candidate.exists():
                    return (
                        True,
                        f"`{name}` is a module of the project ({candidate.relative_to(root)})",
                    )
        return False, ""

    def _go_package(self, path: str) -> tuple[bool, str]:
        root = self.workdir
        if root is None:
            return False, ""
        try:
            text = (root / "go.mod").read_text(encoding="utf-8", errors="replace")[:4096]
        except OSError:
            return False, ""
        found = _GO_MODULE.search(text)
        if found and (path == found.group(1) or path.startswith(found.group(1) + "/")):
            return True, f"{path} is inside the project's own module {found.group(1)}"
        return False, ""

    def _java_package(self, package: str) -> tuple[bool, str]:
        root = self.workdir
        if root is None:
            return False, ""
        relative = Path(*package.replace("/", ".").split("."))
        for base in (root, root / "src", root / "src" / "main" / "java"):
            if (base / relative).is_dir():
                return True, f"{package} is a package of the project"
        return False, ""

    def _c_names(self) -> set[str]:
        """Stems of the project's C and C++ sources and headers (``calc`` for ``calc.c``)."""
        names: set[str] = set()
        if self.workdir is None:
            return names
        seen = 0
        try:
            for current, dirs, files in os.walk(self.workdir):
                depth = len(Path(current).relative_to(self.workdir).parts)
                dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
                if depth >= MAX_DEPTH:
                    dirs[:] = []
                seen += len(dirs) + len(files)
                names.update(f.rsplit(".", 1)[0] for f in files if f.endswith(_C_SUFFIXES))
                if seen > MAX_ENTRIES:
                    break
        except (OSError, ValueError):
            pass
        return names

    def _c_header(self, header: str) -> tuple[bool, str]:
        """A missing header is the project's own when the project has a source or header of
        that name (``calc.h`` beside ``calc.c``) or of a near name (renamed, misspelt)."""
        stem = Path(header).name.rsplit(".", 1)[0]
        names = self._c_names()
        if stem in names:
            return True, f"{header} belongs to the project (it has {stem}.*)"
        similar = _similar(stem, names)
        if similar:
            return True, f"{header} looks like the project's own {similar!r} renamed or misspelt"
        return False, ""

    def _command(self, name: str) -> tuple[bool, str]:
        if "/" in name:
            return True, f"{name} is a path into the project, not an installed tool"
        return False, ""


#: A traceback frame's file: Python's ``File "x.py", line 3, in f`` or pytest's ``x.py:3: in f``.
_FRAME = re.compile(r'^\s*File "(?P<python>[^"]+)", line \d+|^(?P<pytest>[^\s:]+\.py):\d+: in ')
#: pytest's long traceback: the raising frame's location, after the ``E`` lines.
_RAISED_AT = re.compile(r"^(?P<path>[^\s:]+\.py):\d+: [A-Z]\w*\s*$")
#: Frames looked at above an exception line for the one that raised it.
FRAME_LINES = 12
_INSTALLED = ("site-packages", "dist-packages")


def importer(output: str, line: str) -> tuple[bool, str]:
    """``(own, why)`` for an ``ImportError: cannot import name …`` or ``AttributeError: module
    … has no attribute …`` line in ``output``: who asked for the name? The frame that raised
    it (named after the error in pytest's long tracebacks, else the nearest frame above the
    line) is the asking file. A package under site-packages asking its installed dependency
    for a name it lacks means the installed versions disagree; the project's own file asking,
    or no frame showing who asked, is the code's business (a wrong name, or code written for
    another version)."""
    at = output.find(line)
    if at < 0:
        return True, "no traceback shows who imports it"
    # pytest's long tracebacks name the raising frame after the error: ``path.py:4: Error``
    for text in output[at : at + 2000].splitlines()[1:FRAME_LINES]:
        found = _RAISED_AT.match(text)
        if found:
            return _judge(found.group("path"))
    for text in reversed(output[max(0, at - 4000) : at].splitlines()[-FRAME_LINES:]):
        found = _FRAME.match(text)
        if found:
            return _judge(found.group("python") or found.group("pytest"))
    return True, "no traceback shows who imports it"


def _judge(path: str) -> tuple[bool, str]:
    if any(part in path for part in _INSTALLED):
        return False, ""
    return True, f"the project's own {path} asks for it"
