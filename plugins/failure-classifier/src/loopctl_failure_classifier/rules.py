"""The signatures of dependency failures across ecosystems, and how they are found.

Logs can be many megabytes, so nothing here runs a regular expression over the whole text.
Every rule has one *anchor*, a short literal that any line the rule matches contains; the core's
:class:`loopctl.Scanner` looks for the anchors with ``str.find``, takes the line around each
hit, and only then runs the rules on that one line. There is no giant alternation: Python's
``re`` tries every branch at every position, which is what makes a single pattern of a hundred
alternatives crawl at well under a megabyte per second.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import attrs

from loopctl import LazyPattern, Scanner, ScanRule, strip_ansi

#: Lines longer than this are cut before a rule looks at them (the signature comes early).
LINE_CHARS = 2000
#: Lines looked at per anchor from the start of the text, and again from its end backwards when
#: the start already had that many (a log that says "module" a million times stays cheap; the
#: decisive lines of a test run are at its start or its end).
HITS_PER_ANCHOR = 64
#: Rules with ``window`` set look at the first ``WINDOW_HEAD`` and the last ``WINDOW_TAIL``
#: characters of a whole log (and at every decisive line), where a tool prints why it stopped:
#: their many anchors then cost as little on a 10 MB log as on a small one.
WINDOW_HEAD = 16 * 1024
WINDOW_TAIL = 64 * 1024


@attrs.frozen
class Rule:
    """One signature: ``pattern`` is searched in lines that contain ``anchor``.

    ``locality`` names the check that tells the project's own code from a third-party package
    for the captured ``pkg`` (python_module, node_module, rust_crate, go_package, java_package,
    command); None when the signature is about third-party packages by nature.
    """

    name: str
    ecosystem: str
    anchor: str
    #: Compiled when a line holding the anchor first needs it.
    pattern: LazyPattern[str]
    confidence: float
    locality: str | None = None
    description: str = ""
    #: False for signatures the core's extraction always puts among the decisive error lines
    #: (exception lines, compiler errors): they are only looked for there, which spares a
    #: whole-log search for their anchor.
    full_scan: bool = True
    #: Searched in the log's ends only (``WINDOW_HEAD``, ``WINDOW_TAIL``), not all of it.
    window: bool = False


def _rule(
    name: str,
    ecosystem: str,
    anchor: str,
    pattern: str,
    confidence: float,
    locality: str | None = None,
    description: str = "",
    *,
    full_scan: bool = True,
    window: bool = False,
) -> Rule:
    lazy = LazyPattern(pattern)
    return Rule(name, ecosystem, anchor, lazy, confidence, locality, description, full_scan, window)


#: Where a tool, not a test's message quoting it, says that something is missing: at the line's
#: start, or after an error's prefix (``Error: ``, ``failed: ``).
_SAID = r"(?:^|(?<!\w)(?:[Ee]rror|ERROR|[Ff]ailed): )"
#: After the place a message comes from (``lua: main.lua:1: ``).
_AT_A_PLACE = r"^[^\s:]+: [^\s:]+:\d+: "

# The patterns are searched (not matched) in one line; they are specific enough that a test
# printing an ordinary sentence does not trip them, and anchored to the tool's own wording.
DEPENDENCY_RULES: tuple[Rule, ...] = (
    # --- Python -------------------------------------------------------------------------------
    _rule(
        "python.module_not_found",
        "python",
        "odule",
        # The exception line; ``python -m pytest`` without pytest ("/venv/bin/python: No
        # module named pytest"); a plugin pytest or mypy was told to load.
        r"(?:^(?:E\s+)?(?:[\w.]+\.)?(?:ModuleNotFoundError|ImportError): "
        r"|^\S*python[\d.]*(?:\.exe)?: |\(ModuleNotFoundError: |\bError importing plugin \"[^\"]+\": )"
        r"No module named '?(?P<pkg>[A-Za-z_][\w.]*)'?",
        0.9,
        "python_module",
        "a Python import failed: the module is not installed",
    ),
    _rule(
        "python.installed_versions_disagree",
        "python",
        "cannot import name",
        r"cannot import name '\w+' from '(?P<pkg>[\w.]+)' \([^)]*[/\\](?:site|dist)-packages[/\\]",
        0.85,
        "importer",
        "an installed package imports a name its installed dependency lacks: the installed "
        "versions do not fit together",
        window=True,
    ),
    _rule(
        "python.installed_attribute_missing",
        "python",
        "has no attribute",
        r"AttributeError: module '(?P<pkg>[\w.]+)' has no attribute '\w+'",
        0.8,
        "importer",
        "an installed package uses a function its installed dependency lacks: the installed "
        "versions do not fit together",
        window=True,
    ),
    _rule(
        "pip.hash_mismatch",
        "python",
        "HASHES",
        r"THESE PACKAGES DO NOT MATCH THE HASHES",
        0.9,
        window=True,
    ),
    _rule(
        "poetry.python_version",
        "python",
        "is not supported by the project",
        r"Python version \S+ is not supported by the project",
        0.9,
        window=True,
    ),
    _rule(
        "pytest.async_plugin",
        "python",
        "natively supported",
        r"async def functions are not natively supported",
        0.85,
        None,
        "async tests need a plugin (pytest-asyncio, anyio, …) that is not installed",
        window=True,
    ),
    _rule(
        "python.requires_python",
        "python",
        "ifferent ",
        r"(?i:requires? a different python)",
        0.9,
        None,
        "a package or the project needs another version of Python",
        window=True,
    ),
    _rule(
        "python.interpreter_missing",
        "python",
        "nterpreter",
        r"No interpreter found for Python|could not find python interpreter"
        r"|failed to find interpreter for"
        r"|Python interpreter \S+ not found|InterpreterNotFound",
        0.9,
        None,
        "the Python version the project or environment asks for is not installed",
        window=True,
    ),
    _rule(
        "pytest.plugin_option",
        "python",
        "unrecognized arguments",
        r"^(?:ERROR: )?(?:__main__\.py|pytest|py\.test): error: unrecognized arguments: -",
        0.75,
        None,
        "pytest does not know an option: the plugin that adds it is not installed",
        window=True,
    ),
    _rule(
        "pytest.required_plugins",
        "python",
        "required plugins",
        r"Missing required plugins: (?P<pkg>[\w.-]+)",
        0.95,
        window=True,
    ),
    _rule(
        "tox.command_not_in_env",
        "python",
        "allowlist_externals",
        r"(?P<pkg>\S+) is not allowed, use allowlist_externals",
        0.75,
        None,
        "the command is not installed in the tox environment (tox found it outside)",
        window=True,
    ),
    _rule(
        "poetry.lock_stale",
        "python",
        "poetry.lock",
        r"pyproject\.toml changed significantly since poetry\.lock|poetry\.lock is not consistent",
        0.9,
        window=True,
    ),
    _rule(
        "python.package_metadata",
        "python",
        "ackage",
        r"PackageNotFoundError: (?:No package metadata was found for )?(?P<pkg>[\w.-]+)",
        0.85,
    ),
    _rule(
        "python.distribution_not_found",
        "python",
        "istribution",
        r"DistributionNotFound: The '(?P<pkg>[^']+)' distribution was not found",
        0.9,
    ),
    _rule(
        "pip.no_matching_distribution",
        "python",
        "istribution",
        r"^(?:ERROR: )?No matching distribution found for (?P<pkg>\S+)",
        0.95,
        None,
        "pip found no version of a requirement",
    ),
    _rule(
        "pip.conflicting_dependencies",
        "python",
        "ackage",
        r"these package versions have conflicting dependencies",
        0.95,
    ),
    _rule(
        "pip.wheel_build_failed",
        "python",
        "wheel",
        r"(?:Failed building wheel for|Could not build wheels for|ERROR: Failed to build) "
        r"(?P<pkg>[\w.-]+)",
        0.85,
        full_scan=False,
    ),
    _rule(
        "uv.no_solution",
        "python",
        "olv",
        r"No solution found when resolving dependencies",
        0.95,
    ),
    _rule(
        "uv.not_in_registry",
        "python",
        "ackage",
        r"Because (?P<pkg>[\w.-]+) was not found in the package registry",
        0.95,
    ),
    _rule(
        "uv.locked",
        "python",
        "locked",
        r"needs to be updated, but `--locked` was provided",
        0.85,
        window=True,
    ),
    _rule(
        "poetry.solver",
        "python",
        "olv",
        r"(?:SolverProblemError|version solving failed)",
        0.95,
    ),
    _rule(
        "mypy.missing_stubs",
        "python",
        "stubs",
        r"Library stubs not installed for \"(?P<pkg>[\w.]+)\"",
        0.8,
        None,
        "mypy needs type stubs that are not installed",
        full_scan=False,
    ),
    _rule(
        "mypy.missing_module",
        "python",
        "odule",
        r"Cannot find implementation or library stub for module named \"(?P<pkg>[\w.]+)\"",
        0.85,
        "python_module",
    ),
    _rule(
        "system.shared_library",
        "system",
        "shared object",
        r"(?P<pkg>lib[\w.+-]*\.so[\w.]*): cannot open shared object file",
        0.85,
        None,
        "a program needs a shared library that is not installed (at build or at run time)",
        window=True,
    ),
    # --- JavaScript / TypeScript --------------------------------------------------------------
    _rule(
        "node.cannot_find_module",
        "node",
        "odule",
        r"(?:^|Error(?: \[ERR_\w+\])?: |error TS(?:2307|2792): )Cannot find module '(?P<pkg>[^']+)'",
        0.9,
        "node_module",
        "a JavaScript or TypeScript import names a package that is not installed",
    ),
    _rule(
        "node.cannot_find_package",
        "node",
        "ackage",
        r"(?:^|Error(?: \[ERR_\w+\])?: )Cannot find package '(?P<pkg>[^']+)'",
        0.9,
        "node_module",
    ),
    _rule(
        "tsc.missing_type_library",
        "node",
        "type definition",
        r"error TS2688: Cannot find type definition file for '(?P<pkg>[^']+)'",
        0.85,
        None,
        "tsconfig names a type library (@types/…) that is not installed",
        window=True,
    ),
    _rule(
        "jest.environment_missing",
        "node",
        "cannot be found",
        r"Test environment (?P<pkg>\S+) cannot be found",
        0.9,
        window=True,
    ),
    _rule(
        "jest.preset_missing",
        "node",
        "Preset",
        r"Preset (?P<pkg>\S+) not found",
        0.85,
        "node_module",
        window=True,
    ),
    _rule(
        "node.builtin_missing",
        "node",
        "built-in module",
        # a node: module newer than the installed Node
        r"No such built-in module: (?P<pkg>\S+)",
        0.85,
        None,
        "the code needs a newer Node.js",
        window=True,
    ),
    _rule(
        "vitest.missing_dependency",
        "node",
        "MISSING DEPENDENCY",
        r"MISSING DEPENDENCY\s+Cannot find dependency '(?P<pkg>[^']+)'",
        0.9,
        window=True,
    ),
    _rule(
        "tsc.missing_declarations",
        "node",
        "odule",
        r"Could not find a declaration file for module '(?P<pkg>[^']+)'",
        0.8,
        "node_module",
    ),
    _rule(
        "bundler.cannot_resolve",
        "node",
        "odule",
        r"Module not found: Error: Can't resolve '(?P<pkg>[^']+)'",
        0.85,
        "node_module",
    ),
    _rule(
        "bundler.resolve_import",
        "node",
        "olv",
        r"(?:failed to resolve import|Could not resolve) \"(?P<pkg>[^\"]+)\"",
        0.85,
        "node_module",
    ),
    _rule(
        "npm.error_code",
        "node",
        "npm ",
        r"npm (?:ERR!|error) code (?P<code>E404|ERESOLVE|ETARGET|ENOTFOUND|EAI_AGAIN|EINTEGRITY"
        r"|ENOVERSIONS|E403|ENOENT|ECONNREFUSED|ETIMEDOUT|ECONNRESET|ENETUNREACH|EUNSUPPORTEDPROTOCOL"
        r"|ENOLOCK|EBADPLATFORM|EPEERINVALID|ENOTCACHED|EBADENGINE|ENOTSUP)\b",
        0.95,
        None,
        "npm could not install or resolve the dependencies",
    ),
    _rule(
        "npm.not_found",
        "node",
        "npm ",
        r"npm (?:ERR!|error) 404 +(?:Not Found|'(?P<pkg>[^']+)' is not in)",
        0.95,
    ),
    _rule(
        "npm.resolve",
        "node",
        "npm ",
        r"npm (?:ERR!|error) (?:ERESOLVE|Could not resolve dependency|Conflicting peer dependency"
        r"|missing: (?P<pkg>\S+))",
        0.9,
    ),
    _rule(
        "npm.missing_lock",
        "node",
        "npm ",
        r"npm (?:ERR!|error) (?:The `npm ci` command can only install with an existing"
        r"|`npm ci` can only install packages when your package\.json and package-lock)",
        0.9,
    ),
    _rule(
        "yarn.package_not_found",
        "node",
        "ackage",
        r"error Couldn't find package \"(?P<pkg>[^\"]+)\"",
        0.9,
    ),
    _rule(
        "pnpm.install",
        "node",
        "ERR_PNPM",
        r"ERR_PNPM_(?:NO_MATCHING_VERSION|FETCH_\d+|PEER_DEP_ISSUES|NO_VERSIONS|OUTDATED_LOCKFILE"
        r"|NO_LOCKFILE|LOCKFILE_\w+|NO_OFFLINE_\w+|META_FETCH_FAIL|UNSUPPORTED_ENGINE"
        r"|BAD_PM_VERSION|MISSING_PACKAGE_\w+)",
        0.9,
        window=True,
    ),
    # --- C and C++ ----------------------------------------------------------------------------
    _rule(
        "c.header_missing",
        "c",
        "fatal error",
        # gcc's wording, then clang's; cgo and pip's extension builds print the same.
        r"fatal error: (?:(?P<pkg>[\w./+-]+): No such file or directory"
        r"|'(?P<pkg2>[\w./+-]+)' file not found)",
        0.85,
        "c_header",
        "a C or C++ header is not installed (a system library's development files)",
        window=True,
    ),
    _rule(
        "ld.library_missing",
        "c",
        "cannot find -l",
        r"ld(?:\.\w+)?: (?:error: )?cannot find -l(?P<pkg>[\w.+-]+)",
        0.85,
        None,
        "the linker cannot find a library: it is not installed",
        window=True,
    ),
    _rule(
        "ld.library_not_found",
        "c",
        "library",
        r"ld(?:\.\w+)?: (?:error: )?(?:unable to find library|library not found for) -l(?P<pkg>[\w.+-]+)",
        0.85,
        window=True,
    ),
    _rule(
        "pkg_config.not_found",
        "c",
        "pkg-config",
        r"Package '?(?P<pkg>[\w.+-]+)'? was not found in the pkg-config search path",
        0.9,
        window=True,
    ),
    _rule(
        "cmake.not_found",
        "c",
        "ould",
        r"Could NOT find (?P<pkg>[\w.+-]+)|Could not find a package configuration file provided by \"(?P<pkg2>[\w.+-]+)\"",
        0.9,
        window=True,
    ),
    # --- Rust ---------------------------------------------------------------------------------
    _rule(
        "cargo.no_matching_package",
        "rust",
        "ackage",
        r"no matching package (?:named|found)(?: `(?P<pkg>[\w-]+)`)?",
        0.95,
        None,
        "cargo cannot find a crate the manifest asks for",
    ),
    _rule(
        "cargo.failed_get",
        "rust",
        "ackage",
        r"failed to (?:get|select a version for|load source for dependency) `(?P<pkg>[\w-]+)`",
        0.9,
    ),
    _rule(
        "cargo.rust_version",
        "rust",
        "rustc",
        r"rustc \S+ is not supported by the following package|cannot be built because it requires "
        r"rustc|requires rustc [\d.]+ or newer",
        0.9,
        None,
        "the crate (or a dependency) needs a newer Rust toolchain",
        window=True,
    ),
    _rule(
        "cargo.locked",
        "rust",
        "locked",
        # The lock file no longer fits Cargo.toml, and --locked forbids updating it.
        r"because --locked was passed|needs to be updated but --locked was passed",
        0.85,
        window=True,
    ),
    _rule(
        "rust.nightly_feature",
        "rust",
        "stable release channel",
        r"may not be used on the stable release channel",
        0.85,
        None,
        "the crate needs a nightly Rust toolchain",
        window=True,
    ),
    _rule(
        "cargo.select_version",
        "rust",
        "olv",
        r"failed to select a version for|failed to resolve patches",
        0.9,
    ),
    _rule(
        "rust.unlinked_crate",
        "rust",
        "odule",
        r"(?:unlinked crate|undeclared crate or module|unresolved module or unlinked crate) "
        r"`(?P<pkg>\w+)`",
        0.9,
        "rust_crate",
        "the code uses a crate that Cargo.toml does not declare",
    ),
    _rule(
        "rust.missing_extern_crate",
        "rust",
        "crate",
        r"can't find crate for `(?P<pkg>\w+)`",
        0.9,
        "rust_crate",
        full_scan=False,
    ),
    # --- Go -----------------------------------------------------------------------------------
    _rule(
        "go.no_required_module",
        "go",
        "odule",
        r"no required module provides package (?P<pkg>[\w./~-]+)"
        r"|cannot find module providing package (?P<pkg2>[\w./~-]+)"
        r"|missing go\.sum entry for module providing package (?P<pkg3>[\w./~-]+)",
        0.9,
        "go_package",
        "a Go import is not provided by any module in go.mod",
    ),
    _rule(
        "go.module_lookup",
        "go",
        "odule",
        r"module lookup disabled by GOPROXY|verifying module: checksum mismatch"
        r"|updates to go\.mod needed",
        0.9,
    ),
    _rule(
        "go.toolchain",
        "go",
        "equires ",
        r"(?i:note: module requires go [\d.]+|go\.mod requires go >= ?[\d.]+"
        r"|requires go >= ?[\d.]+ \(running go)",
        0.85,
        None,
        "go.mod asks for a newer Go than the one installed",
        window=True,
    ),
    _rule(
        "go.exec_not_found",
        "go",
        "executable file not found",
        # Go's exec error, from cgo (``C compiler "clang" not found``) and go run/generate
        r"exec: \"(?P<pkg>[^\"]+)\": executable file not found in \$PATH",
        0.8,
        "command",
        "a program the Go build runs is not installed",
        window=True,
    ),
    _rule(
        "go.not_in_std",
        "go",
        "ackage",
        r"package (?P<pkg>[\w./~-]+) is not in (?:std|GOROOT)",
        0.8,
        "go_package",
    ),
    # --- JVM ----------------------------------------------------------------------------------
    _rule(
        "javac.package_missing",
        "java",
        "ackage",
        r"error: package (?P<pkg>[\w.]+) does not exist",
        0.85,
        "java_package",
    ),
    _rule(
        "java.class_missing",
        "java",
        "Class",
        # At run time: the class's package is not the project's, so a jar is missing from the
        # class path (``java.lang.NoClassDefFoundError: com/acme/Json``).
        r"\b(?:NoClassDefFoundError|ClassNotFoundException): (?P<pkg>[\w$]+(?:[./][\w$]+)*)[./][\w$]+\s*$",
        0.8,
        "java_package",
        "a class is missing from the class path at run time",
        window=True,
    ),
    _rule(
        "maven.resolve",
        "java",
        "olv",
        r"Could not resolve dependencies for project|could not be resolved: |"
        r"or one of its dependencies could not be resolved",
        0.95,
    ),
    _rule(
        "maven.offline",
        "java",
        "offline mode",
        r"in offline mode and the artifact \S+ has not been downloaded",
        0.9,
        window=True,
    ),
    _rule(
        "java.release",
        "java",
        "release",
        # javac (alone or under Maven or Gradle) is older than the Java the build asks for.
        r"invalid (?:target|source) release: \S+|release version \S+ not supported",
        0.85,
        None,
        "the build asks for a newer Java than the installed JDK",
        window=True,
    ),
    _rule(
        "gradle.resolve",
        "java",
        "olv",
        r"Could not resolve all (?:files|dependencies|artifacts) for configuration",
        0.95,
    ),
    # --- what the output says is missing, in any tool's words ----------------------------------
    # A program or a compiler.
    _rule(
        "program.executable_not_found",
        "system",
        "Executable `",
        r"^Executable `(?P<pkg>[^`]+)` not found",
        0.85,
        "command",
        "a hook or tool runs a program that is not installed (pre-commit's words)",
        window=True,
    ),
    _rule(
        "program.cannot_run",
        "system",
        "Cannot run program",
        r"Cannot run program \"(?P<pkg>[^\"]+)\"(?: \(in directory \"[^\"]*\"\))?: error=2\b",
        0.85,
        "command",
        "the JVM could not start a program: it is not installed",
        window=True,
    ),
    _rule(
        "program.io_not_found",
        "system",
        "kind: NotFound",
        # Rust's io::Error of a Command that could not start (a build script running protoc)
        r"\b(?:run|execute|spawn|invoke|call|start)(?:ing)? `?(?P<pkg>[\w.+-]+)`?\W*"
        r"(?:: )?Os \{ code: 2, kind: NotFound",
        0.8,
        "command",
        "a build script or program runs a tool that is not installed",
        window=True,
    ),
    _rule(
        "program.spawn_enoent",
        "system",
        "ENOENT",
        r"\bspawn (?P<pkg>[\w.@/+-]+) ENOENT",
        0.8,
        "command",
        "Node.js could not start a program: it is not installed",
        window=True,
    ),
    _rule(
        "program.env_interpreter",
        "system",
        "/usr/bin/env: ",
        # a script's ``#!/usr/bin/env x`` names a program that is not installed
        "^/usr/bin/env: [\u2018'\"]?(?P<pkg>[^\u2019'\":\\s]+)[\u2019'\"]?: No such file or directory",
        0.85,
        "command",
        "a script's first line names an interpreter that is not installed",
        window=True,
    ),
    _rule(
        "program.bad_interpreter",
        "system",
        "interpreter",
        r"(?P<pkg>/\S+): bad interpreter: No such file or directory",
        0.85,
        None,
        "a script's first line names an interpreter that is not installed",
        window=True,
    ),
    _rule(
        "program.required_file_not_found",
        "system",
        "required file not found",
        # bash 5.2's words for the same: the script is there, its interpreter is not
        r": cannot execute: required file not found",
        0.8,
        None,
        "a script's first line names an interpreter that is not installed",
        window=True,
    ),
    _rule(
        "npx.other_package",
        "node",
        "command you are looking for",
        r"This is not the (?P<pkg>\S+) command you are looking for",
        0.85,
        None,
        "npx ran a package of that name from the registry: the project's tool is not installed",
        window=True,
    ),
    _rule(
        "cmake.program_missing",
        "c",
        "using the following names",
        r"Could not find \w+ using the following names: (?P<pkg>[\w.+-]+)",
        0.85,
        None,
        "find_program found no such tool",
        window=True,
    ),
    _rule(
        "compiler.missing",
        "c",
        "OMPILER",
        r"No CMAKE_(?P<pkg>\w+)_COMPILER could be found|CMAKE_(?P<pkg2>\w+)_COMPILER not set",
        0.85,
        None,
        "no compiler for the project's language is installed",
        window=True,
    ),
    _rule(
        "compiler.linker_missing",
        "c",
        "linker `",
        r"linker `(?P<pkg>[^`]+)` not found",
        0.85,
        None,
        "the linker (a C toolchain) is not installed",
        window=True,
    ),
    _rule(
        "program.not_executable",
        "system",
        "Permission denied",
        # a shell could not run a program: ``check.sh: 2: /opt/x/bin/lint: Permission denied``
        r"^(?:[^\s:]+: (?:line )?\d+: |(?:/(?:usr/)?bin/)?(?:ba|da|z)?sh: (?:line )?\d*:? ?)"
        r"(?P<pkg>/[^\s:]+): Permission denied\s*$",
        0.8,
        "path",
        "a program installed outside the project cannot be run (it lacks its execute bit)",
        window=True,
    ),
    # A library, package, module or gem.
    _rule(
        "module.cannot_locate",
        "perl",
        "Can't locate ",
        r"Can't locate (?P<pkg>[\w/]+\.pm) in @INC",
        0.85,
        "module",
        "Perl: a module the code uses is not installed",
        window=True,
    ),
    _rule(
        "library.not_on_path",
        "java",
        "library.path",
        # the JVM: ``UnsatisfiedLinkError: no zstd-jni in java.library.path``
        r"\bno (?P<pkg>[\w.+-]+) in java\.library\.path\b",
        0.85,
        None,
        "a native library the code loads is not installed",
        window=True,
    ),
    _rule(
        "library.shared_object_path",
        "system",
        "shared object",
        # a shared object by its path (a SQLite extension, a plugin): installed elsewhere, it is
        # the environment's; inside the project, the project's build did not make it
        r"(?P<pkg>/[^\s:'\"]+\.so[\w.]*): cannot open shared object file",
        0.8,
        "path",
        "a shared library or extension the program loads is not installed",
        window=True,
    ),
    _rule(
        "module.file_missing",
        "system",
        "module file",
        # gfortran's compiled interface of a module (``use json_module``)
        "Cannot open module file [\u2018'\"`](?P<pkg>[\\w.-]+?)\\.mod[\u2019'\"`]",
        0.85,
        "module",
        "the compiled interface of a module the code uses is not there (its library is missing)",
        window=True,
    ),
    _rule(
        "module.undefined_at_run_time",
        "erlang",
        "{undef,",
        # Erlang: the first frame names the module whose function could not be called
        r"\{undef,\[\{(?P<pkg>\w+),\w+,",
        0.8,
        "module",
        "the code calls a module that is not loaded: a library missing from the code path",
        window=True,
    ),
    _rule(
        "package.none_matching",
        "system",
        "ouldn't find ",
        # Yarn offline, cpanm without a mirror that has it
        r"Couldn't find (?:any versions for|module or a distribution) [\"']?(?P<pkg>[^\"'\s]+)",
        0.85,
        None,
        "the package manager has no version of a package the project requires",
        window=True,
    ),
    _rule(
        "package.fetch_failed",
        "system",
        "ailed to fetch",
        r"\bFailed to fetch(?: and copy)? (?:dep|dependency|package)\b",
        0.85,
        None,
        "the package manager could not fetch a dependency",
        window=True,
    ),
    _rule(
        "package.no_results",
        "system",
        "No results matching",
        # LuaRocks: ``No results matching query were found for Lua 5.4.``
        r"\bNo results matching query were found\b",
        0.85,
        None,
        "the package manager has no package of that name",
        window=True,
    ),
    _rule(
        "build.macro_unexpanded",
        "c",
        "configure: line ",
        # a configure script with an Autoconf macro left unexpanded: the package that defines it
        # (autoconf-archive, pkg-config's pkg.m4, libtool) was not installed when it was made
        r"configure: line \d+: [`'\u2018]?(?P<pkg>[A-Z][A-Z0-9]*_[A-Z0-9_]+)\(",
        0.85,
        None,
        "configure holds a macro of a package that is not installed (autoreconf left it as is)",
        window=True,
    ),
    _rule(
        "ruby.load_error",
        "ruby",
        "cannot load such file",
        r"cannot load such file -- (?P<pkg>\S+?)(?: \((?:LoadError|Gem::\w+)\))?$",
        0.85,
        "ruby_feature",
        "a Ruby require failed: the gem is not installed",
        window=True,
    ),
    _rule(
        "bundler.gem_not_found",
        "ruby",
        "Could not find",
        r"Could not find (?:gem '(?P<pkg>[^' ]+)[^']*'|(?P<pkg2>[\w.-]+?)-\d[\w.]*) in "
        r"(?:locally installed gems|any of the (?:gem )?sources)",
        0.9,
        None,
        "Bundler: a gem of the Gemfile or its lock file is not installed",
        window=True,
    ),
    _rule(
        "ruby.gem_missing",
        "ruby",
        "Gem::",
        r"\bGem::(?:MissingSpecError|MissingSpecVersionError|LoadError)\b",
        0.85,
        window=True,
    ),
    _rule(
        "php.vendor_missing",
        "php",
        "/vendor/",
        # vendor/autoload.php and the rest of vendor/ are what `composer install` writes
        r"(?:Failed opening required '|require(?:_once)?\(|include(?:_once)?\()"
        r"(?P<pkg>[^')]*/vendor/[^')]*)",
        0.85,
        None,
        "the project's Composer packages are not installed (vendor/ is missing)",
        window=True,
    ),
    _rule(
        "composer.platform",
        "php",
        "ext-",
        r"requires PHP extension (?P<pkg>ext-[\w-]+)|^(?P<pkg2>ext-[\w-]+)\s+n/a\s.*\bmissing\s*$",
        0.9,
        None,
        "a PHP extension the project requires is not installed",
        window=True,
    ),
    _rule(
        "mix.dependency",
        "elixir",
        "ependenc",
        r"Could not find an SCM for dependency :(?P<pkg>\w+)"
        r"|Could not find Hex, which is needed to build dependency :(?P<pkg2>\w+)"
        r"|the dependency is not available|Unchecked dependencies for environment",
        0.9,
        None,
        "Mix: a dependency was not fetched (mix deps.get)",
        window=True,
    ),
    _rule(
        "elixir.module_unavailable",
        "elixir",
        "is not available",
        r"\(module (?P<pkg>[A-Z][\w.]*) is not available\)",
        0.8,
        "elixir_module",
        "the code calls a module no installed dependency provides",
        window=True,
    ),
    _rule(
        "haskell.module_missing",
        "haskell",
        "Could not find module",
        "Could not find module [\u2018'`\"](?P<pkg>[\\w.]+)[\u2019'`\"]",
        0.85,
        "haskell_module",
        "GHC: an import of a package that is not installed",
        window=True,
    ),
    _rule(
        "haskell.hidden_package",
        "haskell",
        "hidden package",
        "member of the hidden package [\u2018'`\"](?P<pkg>[\\w.-]+)",
        0.85,
        None,
        "the module's package is installed but not declared (build-depends)",
        window=True,
    ),
    _rule(
        "build.plugin_not_found",
        "java",
        "was not found",
        r"Plugin \[id: '(?P<pkg>[^']+)'[^\]]*\] was not found",
        0.85,
        None,
        "a build plugin is not installed and cannot be fetched",
        window=True,
    ),
    _rule(
        "tool.feature_disabled",
        "nix",
        "is disabled",
        r"experimental (?:Nix )?feature '(?P<pkg>[^']+)' is disabled",
        0.85,
        None,
        "the installed tool has a feature the project needs switched off in its configuration",
        window=True,
    ),
    _rule(
        "solver.unresolved",
        "system",
        "resolve dependencies",
        # cabal's and stack's solver, and any tool's words for the same thing
        r"\bCould not resolve dependencies\b|\bunable to resolve dependencies\b",
        0.85,
        None,
        "no set of installed or available packages satisfies the project's requirements",
        window=True,
    ),
    _rule(
        "package.unknown",
        "system",
        "unknown package",
        r"\bunknown package: (?P<pkg>[\w.-]+)",
        0.85,
        window=True,
    ),
    _rule(
        "conan.unresolved",
        "conan",
        "not resolved",
        r"ERROR: Package '(?P<pkg>[^']+)' not resolved",
        0.9,
        window=True,
    ),
    _rule(
        "conan.prebuilt_missing",
        "conan",
        "Missing prebuilt",
        r"ERROR: Missing prebuilt package for '(?P<pkg>[^']+)'",
        0.9,
        window=True,
    ),
    _rule(
        "bazel.repository",
        "bazel",
        "'@",
        r"The repository '@(?P<pkg>[\w.~+-]+)' could not be resolved|no such package '@(?P<pkg2>[\w.~+-]+)//",
        0.85,
        None,
        "an external repository the build needs is not defined or could not be fetched",
        window=True,
    ),
    _rule(
        "nix.search_path",
        "nix",
        "search path",
        r"file '(?P<pkg>[^']+)' was not found in the Nix search path",
        0.9,
        window=True,
    ),
    _rule(
        "pip.check",
        "python",
        "requir",
        # pip check's report of installed packages that do not fit together
        r"^[\w.-]+ [\w.+!-]+ (?:has requirement (?P<pkg>[^,]+), but you have |requires (?P<pkg2>[\w.-]+), which is not installed)",
        0.9,
        None,
        "an installed package needs another version of a package, or one that is missing",
        window=True,
    ),
    _rule(
        "java.linkage",
        "java",
        "Error: ",
        # a jar on the class path older (or newer) than the one the code was compiled against
        r"\b(?:NoSuchMethodError|NoSuchFieldError|AbstractMethodError|IncompatibleClassChangeError): "
        r"'?(?:[\w$.\[\]<>]+ )?(?P<pkg>[a-z][\w$]*(?:\.[a-z][\w$]*)*)\.[A-Z][\w$]*\.[\w$<>]+",
        0.8,
        "java_package",
        "a library on the class path is not the version the code was compiled against",
        window=True,
    ),
    _rule(
        "jvm.unresolved_import",
        "java",
        "nresolved reference",
        r"error: [Uu]nresolved reference:? '?(?P<pkg>\w+)'?",
        0.8,
        "import_line",
        "Kotlin: an import of a library that is not on the class path",
        window=True,
    ),
    # A toolchain or runtime of the wrong version, or none.
    _rule(
        "version.or_higher_required",
        "system",
        "is required",
        r"\b(?P<pkg>[A-Za-z][\w.+-]*) (?:version )?\d[\w.]* or (?:higher|newer|later|greater) is required",
        0.85,
        None,
        "the project needs a newer version of a tool than the one installed",
        window=True,
    ),
    _rule(
        "version.runtime_mismatch",
        "system",
        " version is ",
        # Bundler: ``Your Ruby version is 3.1.2, but your Gemfile specified 3.9.0``; Meson:
        # ``Meson version is 1.0.1 but project requires >=1.9.0``
        r"\bYour (?P<pkg>\w+) version is \S+, but your \w+ specified"
        r"|\b(?P<pkg2>[A-Z]\w*) version is \S+ but (?:the )?\w+ requires",
        0.9,
        None,
        "the project asks for another version of its language runtime",
        window=True,
    ),
    _rule(
        "version.required_only",
        "system",
        "required--this is only",
        # Perl: ``Perl v5.99.0 required--this is only v5.36.0``
        r"\b(?P<pkg>[A-Za-z]\w*) v?\d[\w.]* required--this is only",
        0.9,
        None,
        "the code needs a newer version of its language than the one installed",
        window=True,
    ),
    _rule(
        "version.conflict_have_need",
        "system",
        "version conflict",
        # Tcl: ``version conflict for package "Tcl": have 8.6.13, need 9.0``
        r"\bversion conflict for package [\"']?(?P<pkg>[\w:.-]+)[\"']?: have \S+, need",
        0.85,
        None,
        "the code needs another version of a package or runtime than the one installed",
        window=True,
    ),
    _rule(
        "version.language_unsupported",
        "system",
        "language is not supported",
        # dune: ``Version 3.11 of the dune language is not supported.``
        r"\bVersion \S+ of the (?P<pkg>[\w-]+) language is not supported",
        0.85,
        None,
        "the project's build file asks for a newer version of the tool than the one installed",
        window=True,
    ),
    _rule(
        "mix.elixir_version",
        "elixir",
        "trying to run",
        r"You're trying to run :\w+ on (?P<pkg>\w+) v\S+ but it has declared in its mix\.exs file",
        0.9,
        None,
        "mix.exs asks for another Elixir",
        window=True,
    ),
    _rule(
        "cabal.version",
        "haskell",
        "cabal-version",
        r"Unsupported cabal-version|must specify at least 'cabal-version",
        0.85,
        None,
        "the package description needs a newer cabal-install",
        window=True,
    ),
    _rule(
        "toolchain.not_installed",
        "rust",
        "toolchain '",
        r"toolchain '(?P<pkg>[^']+)' is not installed",
        0.9,
        None,
        "the toolchain the project pins (rust-toolchain.toml) is not installed",
        window=True,
    ),
    _rule(
        "java.home",
        "java",
        "JAVA_HOME",
        r"JAVA_HOME (?:is not set|is set to an invalid directory|environment variable is not "
        r"defined correctly|(?:does not|should) point to a JDK)",
        0.9,
        None,
        "no Java is installed where JAVA_HOME says",
        window=True,
    ),
    _rule(
        "java.class_version",
        "java",
        "ClassVersionError",
        r"UnsupportedClassVersionError|compiled by a more recent version of the Java Runtime",
        0.9,
        None,
        "a class was compiled for a newer Java than the one running it",
        window=True,
    ),
    # A daemon or service the tool needs.
    _rule(
        "service.not_running",
        "system",
        "onnect to ",
        r"(?i:cannot connect to (?:socket at|the docker daemon)|is the docker daemon running"
        r"|could not connect to the (?:nix )?daemon)",
        0.85,
        None,
        "a daemon the tool talks to is not running",
        window=True,
    ),
    _rule(
        "service.server_not_running",
        "system",
        "Is the server running",
        # libpq's hint under a failed connection (psql, psycopg, …)
        r"Is the server running (?:locally|on (?:that )?host)",
        0.85,
        None,
        "the database server the tests need is not running",
        window=True,
    ),
    # --- others -------------------------------------------------------------------------------
    _rule(
        "composer.resolve",
        "php",
        "olv",
        r"Your requirements could not be resolved to an installable set of packages",
        0.95,
    ),
    _rule(
        "nuget.unable_to_find",
        "dotnet",
        "ackage",
        r"error NU1101: Unable to find package (?P<pkg>[\w.-]+)",
        0.95,
    ),
    _rule(
        "shell.command_not_found",
        "shell",
        "not found",
        # sh (dash) and bash, run with -c or as a script (``./run.sh: line 3: meson: command
        # not found``, ``./run.sh: 3: meson: not found``), and zsh.
        r"^(?:/(?:usr/)?bin/)?(?:ba|da|z)?sh: (?:line )?\d*:? ?(?P<pkg>[\w.@/+-]+): "
        r"(?:command )?not found"
        r"|^[^\s:]+: (?:line )?\d+: (?P<pkg3>[\w.@/+-]+): (?:command )?not found\s*$"
        r"|^(?:[^\s:]+:(?:\d+: )?)?(?:zsh: )?command not found: (?P<pkg2>[\w.@/+-]+)",
        0.8,
        "command",
        "the test command needs a tool that is not installed",
    ),
    _rule(
        "runner.command_not_found",
        "shell",
        "ommand not found",
        # poetry run, pdm run, hatch run: ``Command not found: pytest``
        r"^Command not found: (?P<pkg>[\w.@+-]+)\s*$",
        0.8,
        "command",
        window=True,
    ),
    _rule(
        "uv.failed_to_spawn",
        "python",
        "Failed to spawn",
        r"Failed to spawn: `?(?P<pkg>[\w.@+-]+)`?",
        0.8,
        "command",
        "uv run: the program is not installed in the project's environment",
        window=True,
    ),
    _rule(
        "make.command_not_found",
        "shell",
        "make",
        # make runs a recipe line without a shell when it can: it says so itself.
        r"^g?make(?:\[\d+\])?: (?P<pkg>[\w.@+-]+): (?:No such file or directory|Command not found)\s*$",
        0.8,
        "command",
        "a make recipe runs a program that is not installed",
        window=True,
    ),
    _rule(
        "make.exit_127",
        "shell",
        "Error 127",
        # 127 is the shell's "command not found" status.
        r"^g?make(?:\[\d+\])?: \*\*\* \[[^\]]*\] Error 127\s*$",
        0.75,
        window=True,
    ),
    # --- the generic sentences, after every tool's own rule (which is more precise) ----------
    *(
        _rule(
            f"module.{anchor.strip().replace(' ', '_')}",
            "system",
            anchor,
            # any tool's words: ``module 'lpeg' not found``, ``Library "yojson" not found``,
            # ``Dependency "zstd" not found``, ``Module 'Text::Table' is not installed``,
            # ``Package 'zstd', required by 'virtual:world', not found``; the sentence starts
            # the line, or follows an error's prefix or a place (``lua: main.lua:1: ``), so a
            # test's message about one (``AssertionError: Library 'x' not found``) is not it
            rf"(?:{_SAID}|{_AT_A_PLACE})"
            r"(?:[Mm]odule|[Ll]ibrary|[Pp]ackage|[Dd]ependency|[Dd]istribution|[Gg]em|[Rr]ock"
            r"|[Cc]rate)s? [\"'\u2018`](?P<pkg>[^\"'\u2019`\s]+)[\"'\u2019`]"
            r"(?:, required by [\"'\u2018][^\"'\u2019]*[\"'\u2019],)? (?:is |was )?"
            + anchor.strip(),
            0.85,
            "module",
            "a module, library or package the code or the build names is not installed",
            window=True,
        )
        for anchor in (" not found", " not installed")
    ),
    _rule(
        "module.cannot_find",
        "system",
        "find ",
        # the verb first: Tcl's ``can't find package json``, ``cannot find library x``
        rf"{_SAID}(?:[Cc]an't|[Cc]annot|[Cc]ould not|[Uu]nable to) "
        r"find (?:the )?(?:package|module|library|extension|plugin) [\"'\u2018`]?"
        r"(?P<pkg>[\w.:/@+-]+)",
        0.85,
        "module",
        "a package, module or library the code asks for is not installed",
        window=True,
    ),
)

#: Timing, port and connection signatures: supporting evidence of flakiness, never enough alone.
FLAKY_SIGNATURES: tuple[tuple[str, str, LazyPattern[str]], ...] = tuple(
    (name, anchor, LazyPattern(pattern))
    for name, anchor, pattern in (
        ("port in use", "in use", r"[Aa]ddress already in use|\[Errno 98\]"),
        ("port in use", "EADDRINUSE", r"EADDRINUSE"),
        ("connection refused", "efused", r"ECONNREFUSED|Connection refused|ConnectionRefused"),
        ("connection reset", "eset", r"ECONNRESET|Connection reset|ConnectionResetError"),
        (
            "timeout",
            "ime",
            r"TimeoutError|[Tt]imed out|[Tt]imeout of \d+ ?ms exceeded|deadline exceeded"
            r"|ETIMEDOUT|TimeoutExpired",
        ),
        ("flaky marker", "RERUN", r"\bRERUN\b"),
    )
)


class Hit(NamedTuple):
    """A line where a rule matched (a NamedTuple: cheaper to define than an attrs class)."""

    rule: Rule
    line: str
    pkg: str | None


def _clean(line: str) -> str:
    return strip_ansi(line).strip()


def _scanner(rules: Iterable[Rule]) -> Scanner[Rule]:
    """The rules, in order, each found by its anchor; lines cut to ``LINE_CHARS``, then
    stripped of colour codes and surrounding spaces."""
    scan_rules = [ScanRule(rule.name, rule.pattern, rule.anchor, rule) for rule in rules]
    return Scanner(scan_rules, line_chars=LINE_CHARS, normalize=_clean)


_ALL = _scanner(DEPENDENCY_RULES)
_FULL_SCAN = _scanner(rule for rule in DEPENDENCY_RULES if rule.full_scan and not rule.window)
_WINDOWED = _scanner(rule for rule in DEPENDENCY_RULES if rule.full_scan and rule.window)


def _ends(text: str) -> str:
    """The first ``WINDOW_HEAD`` and last ``WINDOW_TAIL`` characters of ``text`` (all of it
    when it is that short)."""
    if len(text) <= WINDOW_HEAD + WINDOW_TAIL:
        return text
    return f"{text[:WINDOW_HEAD]}\n{text[-WINDOW_TAIL:]}"


def _package(match: re.Match[str]) -> str | None:
    groups = match.groupdict()
    for key in ("pkg", "pkg2", "pkg3"):
        value = groups.get(key)
        if value:
            return value
    return None


def scan(text: str, lines: Sequence[str] = (), rules: Sequence[Rule] | None = None) -> list[Hit]:
    """Every dependency signature in ``lines`` (the decisive error lines, checked in full) and in
    ``text`` (a whole log, checked anchor by anchor: ``HITS_PER_ANCHOR`` lines from its start,
    and as many from its end for a noisy anchor; the ``window`` rules in its ends only), in
    order, each line at most once and with the first rule, in order, that matches it."""
    every = _ALL if rules is None else _scanner(rules)
    if rules is None:
        full_scan, windowed = _FULL_SCAN, _WINDOWED
    else:
        full_scan = _scanner(r for r in rules if r.full_scan and not r.window)
        windowed = _scanner(r for r in rules if r.full_scan and r.window)
    found = [*every.search_lines(lines)]
    if text:
        found += full_scan.search(text, per_literal=HITS_PER_ANCHOR, from_end=True)
        found += windowed.search(_ends(text), per_literal=HITS_PER_ANCHOR, from_end=True)
    hits: list[Hit] = []
    seen: set[str] = set()
    for match in found:
        if match.line not in seen:
            seen.add(match.line)
            hits.append(Hit(match.tag, match.line, _package(match.match)))
    return hits


_FLAKY: Scanner[str] = Scanner(
    [ScanRule(name, pattern, anchor, name) for name, anchor, pattern in FLAKY_SIGNATURES],
    line_chars=LINE_CHARS,
)


def flaky_signatures(lines: Iterable[str]) -> list[tuple[str, str]]:
    """``(signature, line)`` for each timing/port/connection signature in ``lines``: each
    signature once, on the first line that shows it."""
    found: dict[str, str] = {}
    for line in lines:
        for match in _FLAKY.matches(line):
            found.setdefault(match.tag, match.line.strip())
    return list(found.items())
