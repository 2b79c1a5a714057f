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
from collections.abc import Callable, Sequence
from pathlib import Path

from loopctl import LazyPattern
from loopctl_failure_classifier.paths import OutputPaths, window

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
_GO_MODULE = LazyPattern(r"^module\s+(\S+)", re.MULTILINE)


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


def _walk(root: Path, keep: Callable[[str, list[str]], None]) -> None:
    """A bounded walk of ``root`` (``MAX_DEPTH`` levels, ``MAX_ENTRIES`` entries, no vendored or
    environment directories): ``keep(directory, files)`` for each directory."""
    seen = 0
    try:
        for current, dirs, files in os.walk(root):
            depth = len(Path(current).relative_to(root).parts)
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
            if depth >= MAX_DEPTH:
                dirs[:] = []
            seen += len(dirs) + len(files)
            keep(current, files)
            if seen > MAX_ENTRIES:
                break
    except (OSError, ValueError):
        pass


class Locality:
    """Answers "is this name the project's own code?" for one project: the working directory
    and the roots the output's own paths point to (:mod:`.paths`), and the names of the
    project's files the output shows."""

    def __init__(self, workdir: Path | None, output: str = "", around: Sequence[str] = ()) -> None:
        self.workdir = workdir
        self._output, self._around = output, around
        self._bases: list[Path] | None = None
        self._shown: set[str] | None = None
        self._files: dict[str, set[str]] | None = None
        self._cache: dict[tuple[str, str], tuple[bool, str]] = {}

    # --- where the project is -----------------------------------------------------------------

    def _read_output(self) -> None:
        paths = OutputPaths(window(self._output, self._around)) if self._output else None
        roots = paths.roots() if paths else []
        bases = [self.workdir] if self.workdir is not None else []
        bases += [Path(root) for root in roots if Path(root) != self.workdir]
        self._bases = bases
        self._shown = paths.names([str(b) for b in bases]) if paths else set()

    def bases(self) -> list[Path]:
        """The project's directories on this machine: the working directory, then the roots the
        output's paths show."""
        if self._bases is None:
            self._read_output()
        assert self._bases is not None
        return self._bases

    def shown(self) -> set[str]:
        """Directory names and file stems of the project's files the output shows."""
        if self._shown is None:
            self._read_output()
        assert self._shown is not None
        return self._shown

    def _stems(self) -> dict[str, set[str]]:
        """Per file suffix (``.py``, ``.rb``, …), the stems of the project's files, and under
        ``"/py"`` the directories that hold Python files: one bounded walk of every base."""
        if self._files is not None:
            return self._files
        files: dict[str, set[str]] = {}

        def keep(current: str, names: list[str]) -> None:
            for name in names:
                stem, dot, suffix = name.rpartition(".")
                if dot:
                    files.setdefault("." + suffix, set()).add(stem)
                    if suffix == "py" and Path(current) not in self.bases():
                        files.setdefault("/py", set()).add(Path(current).name)

        for base in self.bases():
            _walk(base, keep)
        self._files = files
        return files

    def _names(self, *suffixes: str) -> set[str]:
        stems = self._stems()
        found = set(self.shown())
        for suffix in suffixes:
            found |= stems.get(suffix, set())
        return found

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
        checks: dict[str, Callable[[str, str], tuple[bool, str]]] = {
            "python_module": self._python_module,
            "node_module": self._node_module,
            "rust_crate": self._rust_crate,
            "go_package": self._go_package,
            "java_package": self._java_package,
            "command": self._command,
            "c_header": self._c_header,
            "ruby_feature": self._ruby_feature,
            "elixir_module": self._elixir_module,
            "haskell_module": self._haskell_module,
            "import_line": self._import_line,
            "module": self._module,
            "path": self._path,
        }
        check = checks.get(kind)
        return check(name, line) if check else (False, "")

    def _python_module(self, name: str, line: str) -> tuple[bool, str]:
        if "is not a package" in line:
            return True, f"'{name}' is shadowed by a module of the project (\"is not a package\")"
        top = name.split(".")[0]
        if name.startswith(".") or not top:
            return True, f"'{name}' is a relative import of the project's own code"
        names = self._names(".py", "/py")
        if top in names:
            where = self._where(top, (f"{top}.py", top, f"src/{top}"))
            return True, f"'{name}' is the project's own code ({where})"
        return self._near(name, top, names)

    def _near(self, name: str, stem: str, names: set[str]) -> tuple[bool, str]:
        similar = _similar(stem, names)
        if similar:
            return True, f"'{name}' looks like the project's own {similar!r} renamed or misspelt"
        return False, ""

    def _where(self, top: str, candidates: Sequence[str]) -> str:
        for base in self.bases():
            for candidate in candidates:
                if (base / candidate).exists():
                    return f"{base / candidate} is in the project"
        return f"the output shows the project's {top}"

    def _node_module(self, spec: str, line: str = "") -> tuple[bool, str]:
        if spec.startswith(_NODE_ALIAS_PREFIXES) or spec in (".", ".."):
            return True, f"'{spec}' is a path into the project, not a package"
        for root in self.bases():
            for base in (root, root / "src"):
                candidate = base / spec
                if candidate.exists() or any(
                    candidate.with_name(candidate.name + ext).exists()
                    for ext in (".js", ".ts", ".mjs", ".cjs", ".tsx", ".jsx")
                ):
                    return True, f"'{spec}' is a file of the project"
        return False, ""

    def _rust_crate(self, name: str, line: str = "") -> tuple[bool, str]:
        if name in ("crate", "self", "super"):
            return True, f"`{name}` is a path into the project's own crate"
        for root in self.bases():
            for candidate in (
                root / "src" / f"{name}.rs",
                root / "src" / name / "mod.rs",
                root / name / "Cargo.toml",
            ):
                if candidate.exists():
                    return True, f"`{name}` is a module of the project ({candidate})"
        return False, ""

    def _go_package(self, path: str, line: str = "") -> tuple[bool, str]:
        if "/internal/" in f"/{path}/":
            # Go lets only the module that holds an internal package import it
            return True, f"{path} is an internal package: only its own module can import it"
        for root in self.bases():
            try:
                text = (root / "go.mod").read_text(encoding="utf-8", errors="replace")[:4096]
            except OSError:
                continue
            found = _GO_MODULE.search(text)
            if found and (path == found.group(1) or path.startswith(found.group(1) + "/")):
                return True, f"{path} is inside the project's own module {found.group(1)}"
        return False, ""

    def _java_package(self, package: str, line: str = "") -> tuple[bool, str]:
        relative = Path(*package.replace("/", ".").split("."))
        for root in self.bases():
            for base in (root, root / "src", root / "src" / "main" / "java"):
                if (base / relative).is_dir():
                    return True, f"{package} is a package of the project"
        return False, ""

    def _c_header(self, header: str, line: str = "") -> tuple[bool, str]:
        """A missing header is the project's own when the project has a source or header of
        that name (``calc.h`` beside ``calc.c``) or of a near name (renamed, misspelt)."""
        stem = Path(header).name.rsplit(".", 1)[0]
        names = self._names(*_C_SUFFIXES)
        if stem in names:
            return True, f"{header} belongs to the project (it has {stem}.*)"
        return self._near(header, stem, names)

    def _command(self, name: str, line: str = "") -> tuple[bool, str]:
        if "/" in name:
            return True, f"{name} is a path into the project, not an installed tool"
        return False, ""

    def _ruby_feature(self, feature: str, line: str = "") -> tuple[bool, str]:
        """``require 'x'``: the project's own when it is a path (``require_relative``), or the
        project has ``x.rb``, a near name, or a file named after it (``test_x.rb``)."""
        if feature.startswith(("/", ".")):
            return True, f"'{feature}' is a path into the project (require_relative)"
        stem = feature.rsplit("/", 1)[-1]
        names = self._names(".rb")
        if stem in names:
            return True, f"'{feature}' is the project's own {stem}.rb"
        return self._named_after(feature, stem, names)

    def _named_after(self, name: str, stem: str, names: set[str]) -> tuple[bool, str]:
        """A near name of the project's files, or a word of one (``calc`` in ``test_calc``,
        ``calc_test``): a project's tests are named after its own modules."""
        words = {word for other in names for word in re.split(r"[_\W]+", other.lower())}
        if stem.lower() in words - {"test", "tests", "spec", "main", "lib", "src", ""}:
            return True, f"'{name}' is what the project's own files are named after"
        return self._near(name, stem, names)

    def _elixir_module(self, module: str, line: str = "") -> tuple[bool, str]:
        """``module X is not available``: the project's own when a file of the project is named
        after it (``Calc.Rates`` → ``rates.ex``, ``calc_test.exs``)."""
        snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", module.rsplit(".", 1)[-1]).lower()
        return self._named_after(module, snake, self._names(".ex", ".exs"))

    def _haskell_module(self, module: str, line: str = "") -> tuple[bool, str]:
        """``Could not find module 'X'``: the project's own when the project has ``X.hs`` (or
        a near name), or its name is flat (``Calc``): packages' modules are hierarchical
        (``Data.Aeson``), a project's top modules are not."""
        if "." not in module:
            return True, f"'{module}' is a flat module name: the project's own, not a package's"
        stem = module.rsplit(".", 1)[-1]
        names = self._names(".hs", ".lhs")
        if stem in names:
            return True, f"'{module}' is the project's own {stem}.hs"
        return self._near(module, stem, names)

    def _module(self, name: str, line: str = "") -> tuple[bool, str]:
        """Any language's module, library or package by name (``YAML::Tiny``, ``app.format``,
        ``YAML/Tiny.pm``, ``json_module``): the project's own when the project holds its
        path (``lib/YAML/Tiny.pm``, ``app/`` for ``app.format``), or a file named after it
        (``calc`` → ``src/calc.erl``, ``calc.ml``), or a near name (renamed, misspelt)."""
        stem, _, suffix = name.rpartition(".")
        if not stem or suffix != "pm":
            stem = name
        parts = [part for part in re.split(r"::|[./:\\]", stem) if part]
        if not parts:
            return False, ""
        for base in self.bases():
            for root in (base, base / "src", base / "lib"):
                if len(parts) > 1 and (root / parts[0]).is_dir():
                    return True, f"'{name}' is under the project's own {root / parts[0]}"
        names = self._names(*self._stems())
        if parts[-1] in names:
            return True, f"'{name}' is named after the project's own {parts[-1]}"
        return self._near(name, parts[-1], names)

    def _path(self, path: str, line: str = "") -> tuple[bool, str]:
        """A program by its path: the project's own when the path is relative or inside the
        project; one installed elsewhere (``/opt/tools/bin/lint``) is not."""
        if not path.startswith("/"):
            return True, f"{path} is a path into the project"
        for base in self.bases():
            if Path(path).is_relative_to(base):
                return True, f"{path} is inside the project ({base})"
        return False, ""

    def _import_line(self, name: str, line: str) -> tuple[bool, str]:
        """An unresolved name: a dependency only when the source line the compiler quotes under
        it is an ``import`` of a package the project does not hold."""
        imported = _quoted_import(self._output, line)
        if imported is None:
            return True, f"'{name}' is not on an import line: the project's own code"
        return self._java_package(imported)


def _quoted_import(output: str, line: str) -> str | None:
    """The package of the ``import a.b.C`` line a compiler quotes right after ``line``."""
    at = output.find(line)
    if at < 0:
        return None
    following = output[at + len(line) : at + len(line) + 400].splitlines()[1:3]
    for text in following:
        found = _IMPORT.compiled.match(text)
        if found:
            return found.group("package")
    return None


_IMPORT = LazyPattern(r"^\s*import\s+(?:static\s+)?(?P<package>[\w.]+?)(?:\.[A-Z][\w.*]*)?;?\s*$")


#: A traceback frame's file: Python's ``File "x.py", line 3, in f`` or pytest's ``x.py:3: in f``.
_FRAME = LazyPattern(r'^\s*File "(?P<python>[^"]+)", line \d+|^(?P<pytest>[^\s:]+\.py):\d+: in ')
#: pytest's long traceback: the raising frame's location, after the ``E`` lines.
_RAISED_AT = LazyPattern(r"^(?P<path>[^\s:]+\.py):\d+: [A-Z]\w*\s*$")
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
