"""Sort error output into one of ten categories, with named rules and a documented precedence.

A person (or the agent) acting on a failure first needs to know what kind of failure it is: a
missing file wants a different fix than a failed assertion. Each :class:`Rule` is a regular
expression with a name, a category, a tier and a few lowercase *needles*: the rule's expression
only runs on a line that contains one of its needles, so a megabyte of log costs a handful of
substring searches, not thousands of regex runs.

How a category is decided (the precedence, also in the docs):

1. **Overriding** rules (tier 0: memory exhausted, a crash, the test command timed out) win
   wherever they match in the output.
2. Then the **decisive lines** (the exception line, the first compiler error, the assertion
   diff, as :func:`loopctl.parse_test_output` finds them, or the lines the caller gives) are
   tried tier by tier: tier 1 **causes** (a file, the network, a dependency, the clock, code
   that does not parse, a name that does not exist), tier 2 **symptoms** (a wrong type, a
   failed assertion), tier 3 **weak** signals (an exception the rules have no category for, a
   panic in a test). Within a tier the earliest line wins; on one line, the first rule in order.
3. The same tiers over the rest of the output.
4. Tier 4 **hints** (the word "timeout", a failed-test marker) anywhere; else ``UNKNOWN``.

Rules from other plugins (the ``context_errors_rules`` hook) are tried before the built-in rules
of the same tier.
"""

from __future__ import annotations

import enum
import itertools
import re
from collections.abc import Iterable, Sequence

import attrs

from loopctl import LazyPattern, Scanner, ScanRule, strip_ansi

#: Lines longer than this are cut before a rule looks at them (the decisive part comes first).
SCAN_CHARS = 4096
#: A reported decisive line is cut to this many characters.
LINE_CHARS = 500
#: At most this many candidate lines are looked at per scan (the first ones).
MAX_CANDIDATES = 5_000
#: Decisive-line extraction reads this much of the start and of the end of a large output.
HEAD_CHARS = 32 * 1024
TAIL_CHARS = 192 * 1024
#: Rules below the overriding tier read this much of the start and of the end of the output
#: (the overriding rules read all of it).
RULE_HEAD_CHARS = 128 * 1024
RULE_TAIL_CHARS = 384 * 1024


class Category(str, enum.Enum):
    """The ten categories. The value is the name, so JSON and events carry ``"TYPE_ERROR"``."""

    FILE_ACCESS = "FILE_ACCESS"
    FUNCTION_ERROR = "FUNCTION_ERROR"
    SYNTAX_ERROR = "SYNTAX_ERROR"
    ASSERTION_FAILURE = "ASSERTION_FAILURE"
    TYPE_ERROR = "TYPE_ERROR"
    TIMEOUT = "TIMEOUT"
    MEMORY_ERROR = "MEMORY_ERROR"
    NETWORK_ERROR = "NETWORK_ERROR"
    RESOURCE_ERROR = "RESOURCE_ERROR"
    UNKNOWN = "UNKNOWN"


#: What each category means; the report's "Why" section starts from this.
CATEGORY_MEANING: dict[Category, str] = {
    Category.FILE_ACCESS: (
        "A file or directory the code needs is missing, unreadable or unwritable, or a path "
        "points at the wrong kind of thing."
    ),
    Category.FUNCTION_ERROR: (
        "The code refers to a function, method, attribute, name or script that does not exist "
        "(misspelt, not defined yet, not imported, or removed)."
    ),
    Category.SYNTAX_ERROR: (
        "Source code or a data file (JSON, TOML, YAML, package.json) cannot be parsed."
    ),
    Category.ASSERTION_FAILURE: (
        "A test ran and an assertion or expectation did not hold: the code gives a different "
        "result from the one the test expects."
    ),
    Category.TYPE_ERROR: (
        "A value has the wrong type or shape for what is done with it: a type checker's "
        "complaint, a TypeError, a null/None/undefined dereference or a failed conversion."
    ),
    Category.TIMEOUT: "An operation, a test or the whole test command ran out of time.",
    Category.MEMORY_ERROR: (
        "Memory ran out or was corrupted: out of memory, a stack overflow or runaway "
        "recursion, a segmentation fault."
    ),
    Category.NETWORK_ERROR: (
        "A network connection failed: refused, reset, unreachable, a name that does not "
        "resolve, or a TLS problem."
    ),
    Category.RESOURCE_ERROR: (
        "The environment lacks something other than memory: a dependency, module or program "
        "that is not installed, a full disk, too many open files, a port already in use."
    ),
    Category.UNKNOWN: "The output matches no category rule.",
}


class Tier(enum.IntEnum):
    """Where a rule stands in the precedence (lower wins; see the module docstring)."""

    OVERRIDE = 0
    CAUSE = 1
    SYMPTOM = 2
    WEAK = 3
    HINT = 4


def _needles(value: Iterable[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _category(value: Category | str) -> Category:
    return Category(value)


def _tier(value: Tier | int) -> Tier:
    return Tier(value)


@attrs.define(frozen=True)
class Rule:
    """One named categorization rule.

    ``pattern`` is a regular expression searched in one line; ``needles`` are lowercase
    substrings of which a line must contain at least one before the pattern runs (so they must
    be implied by every match). Plugins return these from the ``context_errors_rules`` hook.
    """

    name: str
    category: Category = attrs.field(converter=_category)
    pattern: str
    needles: tuple[str, ...] = attrs.field(converter=_needles)
    tier: Tier = attrs.field(default=Tier.CAUSE, converter=_tier)
    description: str = ""
    #: Extra ``re`` flags for ``pattern`` (``re.IGNORECASE`` …).
    flags: int = 0

    @needles.validator
    def _check_needles(self, _attribute: object, value: tuple[str, ...]) -> None:
        if not value or any(not n or n != n.lower() for n in value):
            raise ValueError(f"rule {self.name!r}: needles must be non-empty lowercase strings")

    def compiled(self) -> re.Pattern[str]:
        return self.lazy().compiled

    def lazy(self) -> LazyPattern[str]:
        """The pattern, compiled when a line first needs it (most texts need few of the
        rules); shared by every rule set that holds this rule."""
        key = (self.pattern, self.flags)
        found = _PATTERNS.get(key)
        if found is None:
            found = _PATTERNS[key] = LazyPattern(self.pattern, self.flags)
        return found


_PATTERNS: dict[tuple[str, int], LazyPattern[str]] = {}


def _exc(*names: str) -> str:
    """An exception name as it appears on an exception line (optionally package-qualified)."""
    return r"(?<![\w$])(?:" + "|".join(names) + r")\b(?![(\w])"


#: Where a tool, not a test's message quoting it, says that something is missing: at the line's
#: start, or after an error's prefix (``Error: ``, ``failed: ``).
_SAID = r"(?:^|(?<!\w)(?:[Ee]rror|ERROR|[Ff]ailed): )"
#: After the place a message comes from (``lua: main.lua:1: ``).
_AT_A_PLACE = r"^[^\s:]+: [^\s:]+:\d+: "

#: The built-in rules, in precedence order within each tier.
BUILTIN_RULES: tuple[Rule, ...] = (
    # --- tier 0: overriding ----------------------------------------------------------------
    Rule(
        "loopctl.test-command-timeout",
        Category.TIMEOUT,
        r"the test command timed out",
        ("the test command timed out",),
        Tier.OVERRIDE,
        "loopctl stopped the test command at its time limit",
    ),
    Rule(
        "memory.out-of-memory",
        Category.MEMORY_ERROR,
        _exc("MemoryError", "OutOfMemoryError", "OutOfMemoryException")
        + r"|heap out of memory|[Oo]ut of memory|memory allocation of \d+ bytes failed"
        r"|[Cc]annot allocate memory|\bENOMEM\b|std::bad_alloc|Reached heap limit",
        (
            "cannot allocate memory",
            "enomem",
            "heap out of memory",
            "memory allocation of ",
            "memoryerror",
            "out of memory",
            "outofmemoryerror",
            "outofmemoryexception",
            "reached heap limit",
            "std::bad_alloc",
        ),
        Tier.OVERRIDE,
        "memory ran out",
    ),
    Rule(
        "memory.stack-overflow",
        Category.MEMORY_ERROR,
        _exc("RecursionError", "StackOverflowError")
        + r"|maximum recursion depth|Maximum call stack size exceeded|stack overflow"
        r"|has overflowed its stack|too much recursion",
        (
            "has overflowed its stack",
            "maximum call stack size exceeded",
            "maximum recursion depth",
            "recursionerror",
            "stack overflow",
            "stackoverflowerror",
            "too much recursion",
        ),
        Tier.OVERRIDE,
        "the stack ran out, usually runaway recursion",
    ),
    Rule(
        "type.nil-pointer-crash",
        Category.TYPE_ERROR,
        r"invalid memory address or nil pointer dereference",
        ("invalid memory address or nil pointer dereference",),
        Tier.OVERRIDE,
        "a nil pointer dereference that the runtime reports as a crash (Go's panic, whose "
        "next line names SIGSEGV)",
    ),
    Rule(
        "memory.crash",
        Category.MEMORY_ERROR,
        r"Segmentation fault|\bSIGSEGV\b|\bsegfault\b|\bBus error\b|\bSIGBUS\b|double free"
        r"|heap-buffer-overflow|stack smashing detected|AddressSanitizer",
        (
            "addresssanitizer",
            "bus error",
            "double free",
            "heap-buffer-overflow",
            "segfault",
            "segmentation fault",
            "sigbus",
            "sigsegv",
            "stack smashing detected",
        ),
        Tier.OVERRIDE,
        "the process crashed on a bad memory access",
    ),
    # --- tier 1: causes --------------------------------------------------------------------
    # Specific forms that later, more general rules would misread come first.
    # (Memory rules that need not override: each literal of the overriding tier costs one
    # more search through the whole output, the causes' many literals are searched in one.)
    Rule(
        "memory.limit-exhausted",
        Category.MEMORY_ERROR,
        r"[Aa]llowed memory size of \d+ bytes exhausted|\b[Mm]emory exhausted\b",
        ("allowed memory size of ", "memory exhausted"),
        Tier.CAUSE,
        "a memory limit was reached (PHP's memory_limit)",
    ),
    Rule(
        "memory.runaway-recursion",
        Category.MEMORY_ERROR,
        _exc("SystemStackError") + r"|stack level too deep|infinite recursion",
        ("infinite recursion", "stack level too deep", "systemstackerror"),
        Tier.CAUSE,
        "runaway recursion: Ruby's SystemStackError, Nix's infinite recursion",
    ),
    Rule(
        "network.fetch-failed",
        Category.NETWORK_ERROR,
        r"\bfetch failed\b",
        ("fetch failed",),
        Tier.CAUSE,
        "fetch() could not reach the server (Node reports it as a TypeError)",
    ),
    Rule(
        "type.null-dereference",
        Category.TYPE_ERROR,
        r"'NoneType' object has no attribute|Cannot (?:read|set) propert(?:y|ies) of (?:undefined|null)"
        r"|"
        + _exc("NullPointerException", "NullReferenceException")
        + r"|null pointer dereference|\bis possibly '(?:null|undefined)'|Object is possibly"
        r"|Item \"None\" of|called `Option::unwrap\(\)` on a `None` value"
        # Ruby (`… for nil:NilClass`, 3.4: `… for nil`), PHP and Dart (`… on null`), Elixir
        # (`… not found in: nil`), Go (a nil pointer, a nil map), Kotlin (`!!` on null, a
        # nullable receiver), Swift, C#
        r"|undefined method .{1,200}? for nil\b|\bon null\b|\bnot found in: nil\b"
        r"|\bnil pointer dereference|\bentry in nil map\b|NullPointerException\b"
        r"|on a nullable receiver|[Uu]nexpectedly found nil|Object reference not set to an instance"
        r"|lateinit property \w+ has not been initialized"
        # Perl (a method called on undef), Lua (a nil indexed, or used in arithmetic)
        r"|\bon an undefined value\b|\battempt to (?:index|perform arithmetic on|concatenate) an? nil value",
        (
            " propert",
            "attempt to ",
            "on an undefined value",
            "'nonetype' object has no attribute",
            "called `option::unwrap()` on a `none` value",
            "entry in nil map",
            "is possibly '",
            'item "none" of',
            "lateinit property ",
            "nil pointer dereference",
            "not found in: nil",
            "null pointer dereference",
            "object is possibly",
            "object reference not set to an instance",
            "on a nullable receiver",
            "on null",
            "pointerexception",
            "referenceexception",
            "undefined method ",
            "unexpectedly found nil",
        ),
        Tier.CAUSE,
        "a null, None or undefined value was used as if it were an object",
    ),
    Rule(
        "function.not-callable",
        Category.FUNCTION_ERROR,
        r"\bis not a function\b|\bis not a constructor\b|object is not callable"
        r"|This expression is not callable",
        (
            "is not a constructor",
            "is not a function",
            "object is not callable",
            "this expression is not callable",
        ),
        Tier.CAUSE,
        "something that is not a function was called",
    ),
    Rule(
        "mypy.syntax",
        Category.SYNTAX_ERROR,
        r": error: .*\[syntax\]\s*$",
        (": error: ",),
        Tier.CAUSE,
        "mypy could not parse the file",
    ),
    Rule(
        "mypy.union-attr",
        Category.TYPE_ERROR,
        r": error: .*\[union-attr\]\s*$",
        ("[union-attr]",),
        Tier.CAUSE,
        "an attribute used on a union (often Optional) that one member lacks",
    ),
    Rule(
        "mypy.missing-name",
        Category.FUNCTION_ERROR,
        r": error: .*\[(?:name-defined|attr-defined|has-type)\]\s*$",
        (": error: ",),
        Tier.CAUSE,
        "mypy: a name or attribute that does not exist",
    ),
    Rule(
        "mypy.missing-import",
        Category.RESOURCE_ERROR,
        r": error: .*\[(?:import-not-found|import-untyped|import)\]\s*$",
        (": error: ",),
        Tier.CAUSE,
        "mypy: a module that is not installed",
    ),
    Rule(
        "timeout.timed-out",
        Category.TIMEOUT,
        _exc(
            "TimeoutError",
            "TimeoutException",
            "SocketTimeoutException",
            "TimeoutExpired",
            "ReadTimeout",
            "ConnectTimeout",
            "ReadTimeoutError",
            "ConnectTimeoutError",
            "DeadlineExceeded",
        )
        + r"|\b[Tt]imed out\b|\bETIMEDOUT\b|\bESOCKETTIMEDOUT\b|[Dd]eadline exceeded"
        r"|Exceeded timeout of|[Tt]imeout of \d+\s*m?s exceeded|`Err` value: Timeout\b"
        r"|kind: (?:WouldBlock|TimedOut)\b|\[TimeoutError\]|timeout: sending signal"
        r"|\bTIMEOUT\b|RecvTimeoutError::Timeout|Elapsed\(\(\)\)"
        # pytest-timeout (its signal and its thread method), Erlang/Elixir's exit reason, Ruby,
        # ctest
        r"|\bTimeout \(>?[\d.]+\s*m?s\)|\+{5} Timeout \+{5}|\(EXIT\) time out\b"
        r"|\bTimeout::Error\b|\*\*\*Timeout\b",
        (
            "(exit) time out",
            "[timeouterror]",
            "`err` value: timeout",
            "connecttimeout",
            "connecttimeouterror",
            "deadline exceeded",
            "deadlineexceeded",
            "elapsed(())",
            "esockettimedout",
            "etimedout",
            "exceeded timeout of",
            "readtimeout",
            "readtimeouterror",
            "recvtimeouterror::timeout",
            "sockettimeoutexception",
            "timed out",
            "timedout",
            "timeout",
            "timeout of ",
            "timeout: sending signal",
            "timeouterror",
            "timeoutexception",
            "timeoutexpired",
            "wouldblock",
        ),
        Tier.CAUSE,
        "an operation or a test hit its time limit",
    ),
    Rule(
        "network.connection",
        Category.NETWORK_ERROR,
        _exc(
            "ConnectionRefusedError",
            "ConnectionResetError",
            "ConnectionAbortedError",
            "ConnectException",
            "RemoteDisconnected",
            "NoRouteToHostException",
            "ConnectionError",
            "ProtocolError",
        )
        + r"|[Cc]onnection refused|\bECONNREFUSED\b|\bConnectionRefused\b|[Cc]onnection reset"
        r"|\bECONNRESET\b|\bConnectionReset\b|socket hang up|[Cc]onnection aborted|\bECONNABORTED\b"
        r"|Remote end closed connection|[Ff]ailed to connect to|Couldn't connect to server"
        r"|No route to host|\bEHOSTUNREACH\b|\bENETUNREACH\b|[Nn]etwork is unreachable"
        r"|Connection closed by peer|\bEPROTO\b",
        (
            "connectexception",
            "connection aborted",
            "connection closed by peer",
            "connection refused",
            "connection reset",
            "connectionabortederror",
            "connectionerror",
            "connectionrefused",
            "connectionrefusederror",
            "connectionreset",
            "connectionreseterror",
            "couldn't connect to server",
            "econnaborted",
            "econnrefused",
            "econnreset",
            "ehostunreach",
            "enetunreach",
            "eproto",
            "failed to connect to",
            "network is unreachable",
            "no route to host",
            "noroutetohostexception",
            "protocolerror",
            "remote end closed connection",
            "remotedisconnected",
            "socket hang up",
        ),
        Tier.CAUSE,
        "a connection could not be made or was cut",
    ),
    Rule(
        "network.dns",
        Category.NETWORK_ERROR,
        _exc("UnknownHostException", "gaierror")
        + r"|Name or service not known|nodename nor servname|Temporary failure in name resolution"
        r"|Could not resolve host|\bENOTFOUND\b|\bEAI_AGAIN\b|getaddrinfo \w+|no such host"
        r"|failed to lookup address",
        (
            "could not resolve host",
            "eai_again",
            "enotfound",
            "failed to lookup address",
            "gaierror",
            "getaddrinfo ",
            "name or service not known",
            "no such host",
            "nodename nor servname",
            "temporary failure in name resolution",
            "unknownhostexception",
        ),
        Tier.CAUSE,
        "a host name could not be resolved",
    ),
    Rule(
        "network.tls",
        Category.NETWORK_ERROR,
        _exc("SSLError", "SSLHandshakeException", "CertificateError")
        + r"|certificate verify failed|self[- ]signed certificate|unable to get local issuer"
        r"|\bCERT_[A-Z_]+\b|\bERR_TLS_[A-Z_]+\b|TLS handshake",
        (
            "cert_",
            "certificate verify failed",
            "certificateerror",
            "err_tls_",
            "signed certificate",
            "sslerror",
            "sslhandshakeexception",
            "tls handshake",
            "unable to get local issuer",
        ),
        Tier.CAUSE,
        "a TLS connection failed (certificates, handshake)",
    ),
    Rule(
        "resource.disk-full",
        Category.RESOURCE_ERROR,
        r"No space left on device|\bENOSPC\b|Disk quota exceeded|\bEDQUOT\b|[Dd]isk full",
        ("disk full", "disk quota exceeded", "edquot", "enospc", "no space left on device"),
        Tier.CAUSE,
        "the disk is full",
    ),
    Rule(
        "resource.open-files",
        Category.RESOURCE_ERROR,
        r"[Tt]oo many open files|\bEMFILE\b|\bENFILE\b",
        ("emfile", "enfile", "too many open files"),
        Tier.CAUSE,
        "the process ran out of file descriptors",
    ),
    Rule(
        "resource.address-in-use",
        Category.RESOURCE_ERROR,
        r"[Aa]ddress already in use|\bEADDRINUSE\b|\bAddrInUse\b|" + _exc("BindException"),
        ("address already in use", "addrinuse", "bindexception", "eaddrinuse"),
        Tier.CAUSE,
        "a port or address is already taken",
    ),
    Rule(
        "resource.busy",
        Category.RESOURCE_ERROR,
        r"Resource temporarily unavailable|\bEAGAIN\b|Device or resource busy|\bEBUSY\b"
        r"|Text file busy|[Cc]annot fork|fork: retry",
        (
            "cannot fork",
            "device or resource busy",
            "eagain",
            "ebusy",
            "fork: retry",
            "resource temporarily unavailable",
            "text file busy",
        ),
        Tier.CAUSE,
        "a system limit or a busy resource",
    ),
    Rule(
        "module.relative-missing",
        Category.FILE_ACCESS,
        r"Cannot find module '(?:\.{1,2}/|/)[^']*'|Cannot find module \"(?:\.{1,2}/|/)[^\"]*\"",
        ("cannot find module ",),
        Tier.CAUSE,
        "a module given by path (./x, ../x, /x) does not exist",
    ),
    Rule(
        "resource.missing-python-module",
        Category.RESOURCE_ERROR,
        _exc("ModuleNotFoundError", "PackageNotFoundError")
        + r"|No module named\b|No package metadata was found",
        (
            "modulenotfounderror",
            "no module named",
            "no package metadata was found",
            "packagenotfounderror",
        ),
        Tier.CAUSE,
        "a Python module is not installed (or not on the path)",
    ),
    Rule(
        "resource.missing-js-package",
        Category.RESOURCE_ERROR,
        r"Cannot find (?:module|package) '[^'./][^']*'|Cannot find (?:module|package) \"[^\"./][^\"]*\""
        r"|\bERR_MODULE_NOT_FOUND\b",
        ("cannot find ", "err_module_not_found"),
        Tier.CAUSE,
        "a JavaScript package is not installed",
    ),
    Rule(
        "resource.missing-crate",
        Category.RESOURCE_ERROR,
        r"unresolved module or unlinked crate|can't find crate|cannot find module or crate"
        r"|use of undeclared crate|no matching package named|failed to select a version"
        r"|could not find `\w+` in the list of imported crates",
        (
            "` in the list of imported crates",
            "can't find crate",
            "cannot find module or crate",
            "failed to select a version",
            "no matching package named",
            "unresolved module or unlinked crate",
            "use of undeclared crate",
        ),
        Tier.CAUSE,
        "a Rust crate is not a dependency (or not available offline)",
    ),
    Rule(
        "resource.missing-java-class",
        Category.RESOURCE_ERROR,
        r"error: package [\w.]+ does not exist|"
        + _exc("ClassNotFoundException", "NoClassDefFoundError")
        + r"|Could not find or load main class",
        (
            "classnotfoundexception",
            "could not find or load main class",
            "error: package ",
            "noclassdeffounderror",
        ),
        Tier.CAUSE,
        "a Java package or class is not on the classpath",
    ),
    Rule(
        "function.shell-undefined",
        Category.FUNCTION_ERROR,
        r"(?:^|[\s:])[a-z][a-z0-9]*_[a-z0-9_]+: command not found",
        (": command not found",),
        Tier.CAUSE,
        "an undefined shell function (a snake_case name reads as a function, not a program)",
    ),
    Rule(
        "resource.missing-command",
        Category.RESOURCE_ERROR,
        r": command not found|: not found\s*$|is not recognized as an internal or external command"
        r"|executable file not found|No such file or directory \(os error 2\).*spawn"
        r"|\bspawn \S+ ENOENT\b"
        # make's own words when it runs a recipe's program directly, and the shell's status
        r"|^g?make(?:\[\d+\])?: [\w.@+-]+: No such file or directory\s*$"
        r"|^g?make(?:\[\d+\])?: \*\*\* \[[^\]]*\] Error 127\s*$"
        # uv run, poetry run, tox
        r"|Failed to spawn: |^Command not found: \S+\s*$|is not allowed, use allowlist_externals"
        # a program named as not found (pre-commit's hooks: "Executable `x` not found")
        r"|\b(?:[Ee]xecutable|[Pp]rogram) [`'\"‘][^`'\"’]+[`'\"’] (?:was )?not found",
        (
            " enoent",
            ": command not found",
            ": no such file or directory",
            ": not found",
            "] error 127",
            "command not found: ",
            "executable ",
            "executable file not found",
            "failed to spawn: ",
            "is not allowed, use allowlist_externals",
            "is not recognized as an internal or external command",
            "no such file or directory (os error 2)",
            "program ",
        ),
        Tier.CAUSE,
        "a program is not installed or not on PATH",
    ),
    # The failure classifier's dependency signatures (plugins/failure-classifier rules.py), in
    # this plugin's words: what the project needs from outside itself is missing, of the wrong
    # version or cannot be resolved. A test checks the two plugins agree on its corpus.
    Rule(
        "resource.package-resolution",
        Category.RESOURCE_ERROR,
        r"No matching distribution found for|these package versions have conflicting dependencies"
        r"|No solution found when resolving dependencies|version solving failed"
        r"|poetry\.lock was last generated|needs to be updated,? but `?--locked`? was"
        r"|because --locked was passed|npm (?:ERR!|error) code (?:E404|ETARGET|ERESOLVE|ENOTCACHED"
        r"|EBADENGINE|ENOLOCK|EUSAGE|ENOVERSIONS)\b|\bERR_PNPM_(?:NO_|FETCH_|LOCKFILE|OUTDATED"
        r"|META_FETCH|PEER_DEP|UNSUPPORTED_ENGINE)\w*|no required module provides package"
        r"|missing go\.sum entry|module lookup disabled by GOPROXY"
        r"|Could not resolve dependencies for project|could not be resolved: "
        r"|in offline mode and the artifact \S+ has not been downloaded"
        r"|THESE PACKAGES DO NOT MATCH THE HASHES",
        (
            " code e",
            "because --locked was passed",
            "could not be resolved: ",
            "could not resolve dependencies for project",
            "err_pnpm_",
            "in offline mode and the artifact ",
            "missing go.sum entry",
            "module lookup disabled by goproxy",
            "needs to be updated",
            "no matching distribution found for",
            "no required module provides package",
            "no solution found when resolving dependencies",
            "poetry.lock was last generated",
            "these package versions have conflicting dependencies",
            "these packages do not match the hashes",
            "version solving failed",
        ),
        Tier.CAUSE,
        "a package manager cannot install or resolve the dependencies",
    ),
    Rule(
        "resource.missing-package",
        Category.RESOURCE_ERROR,
        # what the output says it could not find or load, in each ecosystem's words: Ruby
        # (`cannot load such file -- x (LoadError)`, Bundler), GHC and Cabal, Mix and Hex,
        # Gradle/Maven coordinates, Composer, Conan
        r"cannot load such file -- |"
        + _exc("LoadError", "GemNotFound")
        + r"|Could not find gem '|Could not find module [‘'`\"]|\bunknown package: "
        r"|[Cc]ould not resolve dependencies:|Could not find an SCM for dependency"
        r"|Could not find Hex\b|\bUnchecked dependencies for environment"
        r"|Could not resolve all (?:files|dependencies|artifacts) for configuration"
        r"|Could not find [\w.-]+:[\w.-]+:[\w.-]+\."
        r"|could not be resolved to an installable set of packages|is missing from your system"
        r"|\bPackage '[^']+' not resolved\b|Can't locate \S+ in @INC|you may need to install the\b"
        # a library or package said to be missing, hidden or of another version: Bazel's
        # external repository, Conan's binary, GHC's hidden package, a gem's version, pip
        # check and pkg_resources, Go's vendor directory, Composer's platform and autoloader,
        # a Gradle plugin, Nix's <nixpkgs>
        r"|[Tt]he repository '@[^']*' could not be resolved|Missing prebuilt package for '"
        r"|It is a member of the hidden package|"
        + _exc("MissingSpecError", "MissingSpecVersionError", "VersionConflict")
        + r"|\binconsistent vendoring\b|\brequires \S+, which is not installed|\bhas requirement \S+, but you have\b"
        r"|\brequires (?:ext|lib)-[\w.-]+ \(.*\bmissing\s*$|/vendor/autoload\.php\b"
        r"|\bPlugin \[id: '[^']+'[^\]]*\] was not found|was not found in the Nix search path",
        (
            "' not resolved",
            "can't locate ",
            "cannot load such file -- ",
            "could not be resolved",
            "could not be resolved to an installable set of packages",
            "could not find ",
            "could not resolve all ",
            "could not resolve dependencies:",
            "gemnotfound",
            "has requirement ",
            "inconsistent vendoring",
            "is missing from your system",
            "loaderror",
            "member of the hidden package",
            "missing prebuilt package for '",
            "missingspec",
            "plugin [id: '",
            "requires ext-",
            "requires lib-",
            "unchecked dependencies for environment",
            "unknown package: ",
            "vendor/autoload.php",
            "versionconflict",
            "was not found in the nix search path",
            "which is not installed",
            "you may need to install the",
        ),
        Tier.CAUSE,
        "a package, gem, module or library the project needs is not installed or not resolvable",
    ),
    Rule(
        "resource.toolchain-version",
        Category.RESOURCE_ERROR,
        r"(?i:requires? a different python)|No interpreter found for Python"
        r"|could not find python interpreter|Python interpreter \S+ not found"
        r"|rustc \S+ is not supported by the following package|requires rustc [\d.]+ or newer"
        r"|note: module requires Go [\d.]+|invalid (?:target|source) release: \S+"
        r"|release version \S+ not supported|Python version \S+ is not supported by the project"
        r"|may not be used on the stable release channel|No such built-in module: "
        # CMake's cmake_minimum_required, Composer's platform check ("requires php >=9.1 but
        # your php version (8.2.32) does not satisfy that requirement")
        r"|\bor (?:higher|newer|later) is required\.\s+You are running version"
        r"|\bbut your \w+ version \([^)]*\) does not satisfy"
        # Perl's ``use v5.99``, dune's ``(lang dune 3.11)``
        r"|\bv?\d[\w.]* required--this is only\b|\bVersion \S+ of the [\w-]+ language is not supported",
        (
            ") does not satisfy",
            "language is not supported",
            "required--this is only",
            "built-in module",
            "different python",
            "interpreter",
            "is not supported by",
            "release version",
            "requires go",
            "requires rustc",
            "source release",
            "stable release channel",
            "target release",
            "you are running version",
        ),
        Tier.CAUSE,
        "the project needs a version of Python, Rust, Go or Java that is not installed",
    ),
    Rule(
        "resource.runtime-version",
        Category.RESOURCE_ERROR,
        # a pinned toolchain, a runtime version the project declares (Bundler, Mix, Cabal,
        # virtualenv's python_spec, Maven's enforcer), JAVA_HOME that names no Java, a tool
        # feature the project needs switched off
        r"\btoolchain '[^']+' is not installed|\bYour \w+ version is \S+, but your \w+ specified"
        r"|\bon \w+ v[\d.]+ but it has declared .* supports only\b|Unsupported cabal-version"
        r"|failed to find interpreter for|JAVA_HOME (?:is set to an invalid|is not set"
        r"|environment variable is not defined correctly)|experimental \w+ feature '[^']+' is disabled"
        r"|\bversion \S+ .*\bis not in the allowed range\b"
        # Meson's meson_version: ``Meson version is 1.0.1 but project requires >=1.9.0``
        r"|\b[A-Z]\w* version is \S+ but (?:the )?\w+ requires\b"
        # Tcl: ``version conflict for package "Tcl": have 8.6.13, need 9.0``
        r"|\bversion conflict for package\b",
        (
            "' is not installed",
            "but it has declared",
            "experimental ",
            "failed to find interpreter for",
            "is not in the allowed range",
            "java_home ",
            "unsupported cabal-version",
            "version conflict for package",
            "version is ",
        ),
        Tier.CAUSE,
        "the project needs a toolchain, runtime or version of one that is not installed",
    ),
    Rule(
        "resource.native-library",
        Category.RESOURCE_ERROR,
        r"fatal error: [\w./+-]+\.h\w*: No such file or directory|fatal error: '[^']+' file not found"
        r"|ld(?:\.\w+)?: (?:error: )?(?:cannot find|unable to find library|library not found for) -l"
        r"|was not found in the pkg-config search path|Could NOT find \w+"
        r"|Could not find a package configuration file provided by"
        r"|[^\s:'\"]*\.so[\w.]*: cannot open shared object file"
        # the JVM's native libraries
        r"|\bUnsatisfiedLinkError: no \S+ in java\.library\.path",
        (
            " in java.library.path",
            "' file not found",
            ": cannot open shared object file",
            ": no such file or directory",
            "cannot find",
            "could not find ",
            "could not find a package configuration file provided by",
            "library not found for",
            "unable to find library",
            "was not found in the pkg-config search path",
        ),
        Tier.CAUSE,
        "a system library or its headers are not installed",
    ),
    Rule(
        "resource.test-plugin",
        Category.RESOURCE_ERROR,
        r"Missing required plugins: |Error importing plugin \"|^(?:ERROR: )?(?:__main__\.py|pytest)"
        r": error: unrecognized arguments: -|Test environment \S+ cannot be found"
        r"|MISSING DEPENDENCY\s+Cannot find dependency|Cannot find type definition file for"
        r"|Could not find a declaration file for module '[^'./]|Preset \S+ not found"
        # (pytest's summary line cuts it short: "Failed: async def functions are not native...")
        r"|async def functions are not nat",
        (
            " not found",
            ": error: unrecognized arguments: -",
            "async def functions are not nat",
            "cannot find dependency",
            "cannot find type definition file for",
            "could not find a declaration file for module '",
            'error importing plugin "',
            "missing required plugins: ",
            "test environment ",
        ),
        Tier.CAUSE,
        "a test-runner or type-checker plugin (or environment) is not installed",
    ),
    Rule(
        "resource.missing-program",
        Category.RESOURCE_ERROR,
        # a program, compiler or interpreter named as missing where no rule above knows the
        # wording: a build script's (`failed to run protoc: … NotFound`), CMake's, a `#!` line's
        r"\bfailed to run [`'\"]?[\w.+-]+[`'\"]?: .*(?:NotFound|[Nn]o such file)"
        r"|Could not find \w+ using the following names:|No CMAKE_\w+_COMPILER could be found"
        r"|: bad interpreter: |cannot execute: required file not found"
        r"|^/usr/bin/env: [‘'\"][^’'\"]+[’'\"]: No such file or directory"
        r"|This is not the \S+ command you are looking for",
        (
            ": bad interpreter: ",
            ": no such file or directory",
            "cannot execute: required file not found",
            "command you are looking for",
            "compiler could be found",
            "failed to run ",
            "using the following names:",
        ),
        Tier.CAUSE,
        "a program, compiler or interpreter the project runs is not installed",
    ),
    Rule(
        "resource.service-down",
        Category.RESOURCE_ERROR,
        # a daemon or server the project talks to is not running (its socket is not there)
        r"Is the (?:docker )?daemon running\b|Is the server running\b|[Cc]annot connect to the \w+ daemon\b"
        r"|cannot connect to socket at '[^']*daemon[^']*'"
        r"|connection to server on socket \S+ failed: No such file or directory",
        (
            " failed: no such file or directory",
            "cannot connect to socket at '",
            "cannot connect to the ",
            "is the daemon running",
            "is the docker daemon running",
            "is the server running",
        ),
        Tier.CAUSE,
        "a daemon or server the project needs is not running",
    ),
    Rule(
        "resource.named-missing",
        Category.RESOURCE_ERROR,
        # what is missing, in any tool's words: a module, library, package or dependency said
        # not to be found or installed (Lua, dune, Meson, pkg-config, cpanm), at the start of
        # the line or after an error's prefix or a place, so a test's message about one
        # (``AssertionError: Library 'x' not found``) is not it
        rf"(?:{_SAID}|{_AT_A_PLACE})"
        r"(?:[Mm]odule|[Ll]ibrary|[Pp]ackage|[Dd]ependency|[Dd]istribution|[Gg]em|[Rr]ock|[Cc]rate)s?"
        r" [\"'‘`][^\"'’`\s]+[\"'’`](?:, required by [\"'‘][^\"'’]*[\"'’],)? (?:is |was )?"
        r"not (?:found|installed)\b"
        # the verb first (Tcl's ``can't find package json``)
        rf"|{_SAID}(?:[Cc]an't|[Cc]annot|[Cc]ould not|[Uu]nable to) "
        r"find (?:the )?(?:package|module|library|extension|plugin) "
        # a module's compiled interface (gfortran), pkg-config under configure
        r"|\bCannot open module file\b|\bPackage requirements \(.*\) were not met"
        # a package manager with no such package, or that cannot fetch it: Yarn offline, cpanm,
        # rebar3, LuaRocks
        r"|\bCouldn't find (?:any versions for|module or a distribution) "
        r"|\bFailed to fetch(?: and copy)? (?:dep|dependency|package)\b"
        r"|\bNo results matching query were found\b"
        # a configure script with a macro left unexpanded: the package that defines the macro
        # (autoconf-archive, pkg.m4, libtool) was not installed when it was generated
        r"|configure: line \d+: (?:syntax error near unexpected token|[`'‘]?[A-Z][A-Z0-9]*_[A-Z0-9_]+\()",
        (
            " find ",
            " not found",
            " not installed",
            "cannot open module file",
            "configure: line ",
            "couldn't find ",
            "failed to fetch",
            "no results matching query",
            "package requirements (",
        ),
        Tier.CAUSE,
        "a module, library or package is named as missing, or cannot be found or fetched",
    ),
    Rule(
        "file.not-found",
        Category.FILE_ACCESS,
        _exc("FileNotFoundError", "FileNotFoundException", "NoSuchFileException")
        + r"|[Nn]o such file or directory|\bENOENT\b|kind: NotFound\b|cannot stat"
        r"|The system cannot find the (?:file|path) specified|error TS6053:"
        # a build tool's words: CMake, Bazel
        r"|[Cc]annot find source file|\bmissing input file\b|\binput file\(s\) do not exist"
        r"|could not find requested file|\bis not an existing\b",
        (
            "cannot find source file",
            "cannot stat",
            "could not find requested file",
            "enoent",
            "error ts6053:",
            "filenotfounderror",
            "filenotfoundexception",
            "input file(s) do not exist",
            "is not an existing",
            "kind: notfound",
            "missing input file",
            "no such file or directory",
            "nosuchfileexception",
            "the system cannot find the ",
        ),
        Tier.CAUSE,
        "a file or directory does not exist",
    ),
    Rule(
        "file.permission",
        Category.FILE_ACCESS,
        _exc("PermissionError", "AccessDeniedException", "UnauthorizedAccessException")
        + r"|Permission denied|\bEACCES\b|\bEPERM\b|Operation not permitted"
        r"|Read-only file system|\bEROFS\b|kind: PermissionDenied\b",
        (
            "accessdeniedexception",
            "eacces",
            "eperm",
            "erofs",
            "kind: permissiondenied",
            "operation not permitted",
            "permission denied",
            "permissionerror",
            "read-only file system",
            "unauthorizedaccessexception",
        ),
        Tier.CAUSE,
        "the file system refused access",
    ),
    Rule(
        "file.wrong-kind",
        Category.FILE_ACCESS,
        _exc("IsADirectoryError", "NotADirectoryError")
        + r"|\bEISDIR\b|\bENOTDIR\b|[Ii]s a directory|[Nn]ot a directory|kind: IsADirectory\b",
        (
            "eisdir",
            "enotdir",
            "is a directory",
            "isadirectoryerror",
            "kind: isadirectory",
            "not a directory",
            "notadirectoryerror",
        ),
        Tier.CAUSE,
        "a path is a directory where a file was expected, or the reverse",
    ),
    Rule(
        "type.failed-conversion",
        Category.TYPE_ERROR,
        # a string that is not a number, in each language's words: Ruby's Integer(), Erlang's
        # binary_to_integer, Haskell's read, Perl's numeric warning, Go's strconv (whose
        # "invalid syntax" is about the number, not the code)
        r"invalid value for \w+\(\)|not a textual representation of|\bread: no parse\b"
        r"|isn't numeric\b|\bstrconv\.\w+: parsing \"",
        (
            ': parsing "',
            "invalid value for ",
            "isn't numeric",
            "not a textual representation of",
            "read: no parse",
        ),
        Tier.CAUSE,
        "a string could not be converted to a number",
    ),
    Rule(
        "syntax.exception",
        Category.SYNTAX_ERROR,
        _exc(
            "SyntaxError",
            "IndentationError",
            "TabError",
            "ParseError",
            "ParserError",
            "TokenMissingError",
            "MismatchedDelimiterError",
        )
        + r"|\binvalid syntax\b|^invalid-syntax:|Jest encountered an unexpected token"
        r"|\bmissing terminator: ",
        (
            "indentationerror",
            "invalid syntax",
            "invalid-syntax:",
            "jest encountered an unexpected token",
            "mismatcheddelimitererror",
            "missing terminator: ",
            "parseerror",
            "parsererror",
            "syntaxerror",
            "taberror",
            "tokenmissingerror",
        ),
        Tier.CAUSE,
        "the source code does not parse",
    ),
    Rule(
        "syntax.data",
        Category.SYNTAX_ERROR,
        _exc(
            "JSONDecodeError",
            "JSONParseError",
            "TOMLDecodeError",
            "YAMLError",
            "ScannerError",
            "JsonParseException",
            "JsonSyntaxException",
        )
        + r"|\bEJSONPARSE\b|is not valid JSON|Unexpected (?:token|end of JSON)"
        r"|Invalid package\.json|Failed to parse JSON",
        (
            "ejsonparse",
            "failed to parse json",
            "invalid package.json",
            "is not valid json",
            "jsondecodeerror",
            "jsonparseerror",
            "jsonparseexception",
            "jsonsyntaxexception",
            "scannererror",
            "tomldecodeerror",
            "unexpected ",
            "yamlerror",
        ),
        Tier.CAUSE,
        "a data file or string does not parse",
    ),
    Rule(
        "syntax.shell",
        Category.SYNTAX_ERROR,
        r"syntax error near unexpected token|syntax error: unexpected end of file"
        r"|unexpected EOF while looking for matching|: syntax error\b|Syntax error:",
        (
            ": syntax error",
            "syntax error near unexpected token",
            "syntax error:",
            "syntax error: unexpected end of file",
            "unexpected eof while looking for matching",
        ),
        Tier.CAUSE,
        "a shell script does not parse",
    ),
    Rule(
        "syntax.compiler",
        Category.SYNTAX_ERROR,
        r"^error(?:\[E0(?:765|758|766|762|763)\])?: (?:expected|unexpected"
        r"|mismatched closing delimiter|unclosed delimiter"
        r"|this file contains an unclosed delimiter|unterminated|unknown start of token)"
        r"|\.java:\d+: error: (?:'.+' expected|reached end of file while parsing"
        r"|illegal start of|class, interface, enum, or record expected|<identifier> expected"
        r"|not a statement|unclosed (?:string|character) literal|orphaned)"
        r"|error TS1\d{3}:|: error: expected (?:';'|'\)'|'\}'|expression|identifier)"
        # gcc and g++ (their quotes are ‘’ in a UTF-8 locale), kotlinc
        r"|: error: expect(?:ed|ing)\b|: error: [‘'`]\w+[’'`] without a previous\b",
        (
            ": error: ",
            ": error: expected ",
            "error ts1",
            "expected",
            "mismatched closing delimiter",
            "this file contains an unclosed delimiter",
            "unclosed delimiter",
            "unexpected",
            "unknown start of token",
            "unterminated",
        ),
        Tier.CAUSE,
        "the compiler could not parse the source",
    ),
    Rule(
        "syntax.parse-error",
        Category.SYNTAX_ERROR,
        # a parser's own words, whatever the tool: PHP, CMake, GHC, Nix, Bison-made parsers
        # ("syntax error, unexpected …"), Groovy ("expecting '}', found ''"), YAML ("while
        # parsing a block collection"), Python's json ("… line 1 column 14 (char 13)")
        r"\b[Ss]yntax error\b|\b[Pp]arse error\b|\bexpecting '[^']*', found '"
        r"|\bwhile (?:parsing|scanning) an? \w+|: line \d+ column \d+ \(char \d+\)"
        r"|\bdoes not contain valid JSON\b|Could not compile build file"
        # Lua (``'end' expected (to close 'function' at line 1) near 'print'``), gfortran
        r"|'[^']+' expected (?:\(to close|near )|\bunexpected symbol near\b"
        r"|\bExpecting END \w+ statement\b|\bUnexpected end of file\b"
        # awk (mawk): ``missing } near END``
        r"|\bmissing [})\]] near\b",
        (
            " column ",
            "' expected ",
            "could not compile build file",
            "does not contain valid json",
            "expecting '",
            "expecting end ",
            "missing ) near",
            "missing ] near",
            "missing } near",
            "parse error",
            "parsing",
            "scanning",
            "syntax error",
            "unexpected end of file",
            "unexpected symbol near",
        ),
        Tier.CAUSE,
        "a parser reports a syntax or parse error",
    ),
    Rule(
        "type.wrong-arguments",
        Category.TYPE_ERROR,
        # a call with the wrong number of arguments: Ruby, PHP (ArgumentCountError), gcc,
        # Nix ("called without required argument 'x'"); or of the wrong type (gcc's format
        # check: "… but argument 2 has type ‘char *’")
        r"\bwrong number of arguments\b|\b[Tt]oo (?:few|many) arguments\b"
        r"|\bcalled without required argument\b|\bbut argument \d+ has type\b",
        (
            "but argument ",
            "called without required argument",
            "few arguments",
            "many arguments",
            "wrong number of arguments",
        ),
        Tier.CAUSE,
        "a function was called with the wrong number or type of arguments",
    ),
    Rule(
        "function.undefined-name",
        Category.FUNCTION_ERROR,
        _exc("NameError", "UnboundLocalError", "ReferenceError")
        + r"|\bis not defined\b|Undefined name\b|undefined reference to|undefined symbol"
        r"|implicit declaration of function|use of undeclared identifier"
        # Ruby, PHP, Elixir, Nix (`undefined method/function/variable …`), GHC (`Variable not
        # in scope: …`), Go (`x.go:7:27: undefined: totl`), Nix attribute sets, CMake commands
        r"|\b[Uu]ndefined (?:method|function|local variable or method|variable|subroutine"
        r"|constant)\b|"
        + _exc("UndefinedFunctionError")
        + r"|\bis undefined or private\b|\b[Nn]ot in scope:|^\S+:\d+:\d+: undefined: "
        r"|\battribute '[^']+' missing\b|Unknown CMake command|\b[Cc]lass \"[\w\\]+\" not found\b"
        # Erlang: a function (or its module) that cannot be called, ``{undef,[{calc,add,…``;
        # Tcl: ``can't read "totl": no such variable``
        r"|\{undef,\[\{|\bno such variable\b",
        (
            '" not found',
            ": undefined: ",
            "attribute '",
            "implicit declaration of function",
            "is not defined",
            "is undefined or private",
            "nameerror",
            "no such variable",
            "not in scope:",
            "referenceerror",
            "unboundlocalerror",
            "undefined ",
            "undefined name",
            "undefined reference to",
            "undefined symbol",
            "undefinedfunctionerror",
            "unknown cmake command",
            "use of undeclared identifier",
            "{undef,[{",
        ),
        Tier.CAUSE,
        "a name that was never defined",
    ),
    Rule(
        "function.missing-member",
        Category.FUNCTION_ERROR,
        _exc("AttributeError", "NoSuchMethodError", "NoSuchFieldError", "MissingMethodException")
        + r"|has no attribute\b|does not exist on type|has no member named|\bno method named\b"
        r"|no function or associated item named|\bno field `|cannot import name\b"
        r"|has no exported member|does not provide an export named"
        r"|^error\[E0603\]: \w+ `[^`]+` is private|is private and only accessible"
        r"|has private access in",
        (
            "attributeerror",
            "cannot import name",
            "does not exist on type",
            "does not provide an export named",
            "error[e0603]: ",
            "has no attribute",
            "has no exported member",
            "has no member named",
            "has private access in",
            "is private and only accessible",
            "missingmethodexception",
            "no field `",
            "no function or associated item named",
            "no method named",
            "nosuchfielderror",
            "nosuchmethoderror",
        ),
        Tier.CAUSE,
        "an attribute, method or export that does not exist or is not visible",
    ),
    Rule(
        "function.missing-symbol",
        Category.FUNCTION_ERROR,
        r"cannot find (?:function|value|symbol|macro|method|type|struct|trait)\b"
        r"|error: cannot find symbol|Cannot find name '|error TS2304:|error TS2339:|error TS2551:"
        r"|not found in this scope|unresolved (?:name|reference)",
        (
            "cannot find ",
            "cannot find name '",
            "error ts2304:",
            "error ts2339:",
            "error ts2551:",
            "error: cannot find symbol",
            "not found in this scope",
            "unresolved ",
        ),
        Tier.CAUSE,
        "a compiler could not find a function or symbol",
    ),
    Rule(
        "function.pytest-fixture",
        Category.FUNCTION_ERROR,
        r"fixture '[^']+' not found",
        ("' not found",),
        Tier.CAUSE,
        "a pytest fixture that does not exist",
    ),
    Rule(
        "function.missing-script",
        Category.FUNCTION_ERROR,
        r"Missing script:|missing script:",
        ("missing script:",),
        Tier.CAUSE,
        "a package script that does not exist",
    ),
    # --- tier 2: symptoms ------------------------------------------------------------------
    Rule(
        "type.conversion",
        Category.TYPE_ERROR,
        r"invalid literal for (?:int|float)\(\)|could not convert string to|"
        + _exc("NumberFormatException", "ParseIntError", "ParseFloatError", "InvalidCastException")
        + r"|invalid digit found in string|integer expression expected|cannot be converted to"
        r"|[Cc]annot convert\b|value too great for base|invalid number",
        (
            "cannot be converted to",
            "cannot convert",
            "could not convert string to",
            "integer expression expected",
            "invalid digit found in string",
            "invalid literal for ",
            "invalid number",
            "invalidcastexception",
            "numberformatexception",
            "parsefloaterror",
            "parseinterror",
            "value too great for base",
        ),
        Tier.SYMPTOM,
        "a value could not be converted to the type needed",
    ),
    Rule(
        "type.checker",
        Category.TYPE_ERROR,
        r"^error\[E\d{4}\]|error TS[2-9]\d{3}:|^\S+:\d+(?::\d+)?: error: .*\[[a-z][a-z-]*\]\s*$"
        r"|error: incompatible types|error: bad operand types|cannot be applied to given types"
        r"|cannot be dereferenced|\bmismatched types\b|is not assignable to"
        # GHC, Go (and go vet), Nix, Erlang/Elixir's binaries and arithmetic
        r"|Couldn't match (?:expected |actual )?type|\bNo instance for\b|\bof wrong type\b"
        r"|\bcannot (?:use .+ as .+ value|coerce|add an? \w+ to an?)\b"
        r"|\bwhile an? \w+ was expected\b|construction of binary failed"
        r"|bad argument in arithmetic expression|\{badarith,|\{badarg,"
        # OCaml, gfortran
        r"|\bbut an expression was expected of type\b|\bCannot convert \S+ to \S+ at\b",
        (
            " was expected",
            "{badarg,",
            "{badarith,",
            "cannot convert ",
            ": error: ",
            "bad argument in arithmetic expression",
            "cannot be applied to given types",
            "cannot be dereferenced",
            "cannot ",
            "construction of binary failed",
            "couldn't match ",
            "error ts",
            "error: bad operand types",
            "error: incompatible types",
            "error[e",
            "is not assignable to",
            "mismatched types",
            "no instance for",
            "of wrong type",
        ),
        Tier.SYMPTOM,
        "the type checker or compiler rejected the types",
    ),
    Rule(
        "type.exception",
        Category.TYPE_ERROR,
        _exc("TypeError", "ClassCastException", "ArrayStoreException", "TypeMismatchError")
        + r"|\btype mismatch\b|\binterface conversion: ",
        (
            "arraystoreexception",
            "interface conversion: ",
            "classcastexception",
            "type mismatch",
            "typeerror",
            "typemismatcherror",
        ),
        Tier.SYMPTOM,
        "a TypeError (or the language's equivalent)",
    ),
    Rule(
        "assertion.failed",
        Category.ASSERTION_FAILURE,
        _exc(
            "AssertionError",
            "AssertionFailedError",
            "ComparisonFailure",
            "AssertionException",
            "DocTestFailure",
        )
        + r"|\bERR_ASSERTION\b|[Aa]ssertion (?:`[^`]*` |'[^']*' |with \S+ )?failed|assertion failed"
        r"|\bFailed asserting that\b"
        r"|Assertion .* failed|\bAssert_failure\b"
        # tcltest: ``---- Result should have been (exact matching):``
        r"|^---- Result should have been\b",
        (
            "---- result should have been",
            "assert_failure",
            "assertion ",
            "assertion failed",
            "assertionerror",
            "assertionexception",
            "assertionfailederror",
            "comparisonfailure",
            "doctestfailure",
            "err_assertion",
            "failed asserting that",
        ),
        Tier.SYMPTOM,
        "an assertion did not hold",
    ),
    Rule(
        "assertion.pytest",
        Category.ASSERTION_FAILURE,
        r"^E\s+assert\b|^E\s+Failed: DID NOT (?:RAISE|WARN)|^FAILED \S+ - assert\b"
        r"|Failed: DID NOT (?:RAISE|WARN)",
        (" - assert", "assert", "failed: did not "),
        Tier.SYMPTOM,
        "a pytest assertion did not hold",
    ),
    Rule(
        "assertion.expectation",
        Category.ASSERTION_FAILURE,
        r"expect\((?:received|jest\.fn\(\)|[^)]*)\)\.(?:not\.)?\w+\(|^\s*Expected(?: \w+)*:\s"
        r"|^\s*Received(?: \w+)*:\s|Received function did not throw|Error Trace:"
        r"|Expected values to be (?:strictly |loosely )?(?:deep-)?equal"
        # RSpec ("expected [1] to include 2", "expected X but nothing was raised", "expected: 3"
        # then "got: -1"), doctest ("Failed example:")
        r"|^\s*[Ee]xpected\b.*\b(?:to|but)\b|^[\s#]*got:\s|^Failed example:"
        r"|^#\s+Failed test\b|\bbut nothing was raised\b",
        (
            "error trace:",
            "expect(",
            "expected",
            "expected values to be ",
            "but nothing was raised",
            "failed example:",
            "failed test",
            "got:",
            "received",
            "received function did not throw",
        ),
        Tier.SYMPTOM,
        "an expectation (jest, node:assert, testify, RSpec, doctest) did not hold",
    ),
    # --- tier 3: weak signals --------------------------------------------------------------
    Rule(
        "assertion.test-panic",
        Category.ASSERTION_FAILURE,
        r"thread '(?!main')[^']+'(?: \(\d+\))? panicked at",
        (" panicked at",),
        Tier.WEAK,
        "a panic inside a Rust test (how assert! and friends fail)",
    ),
    Rule(
        "exception.uncategorized",
        Category.UNKNOWN,
        r"^(?:E\s+)?(?:[\w$]+\.)*[A-Z]\w*(?:Error|Exception)\b(?: \[\w+\])?(?::|\s*$)"
        r"|Exception in thread|panicked at|^Error: |^(?:FAILED|ERROR) \S+ - [\w.]+:",
        ("error", "exception", "panic", "fail"),
        Tier.WEAK,
        "an exception or panic the rules have no category for",
    ),
    # --- tier 4: hints ---------------------------------------------------------------------
    Rule(
        "timeout.hint",
        Category.TIMEOUT,
        r"\b[Tt]ime-?out\b|\bTIMEOUT\b|\btimed out\b",
        ("timeout", "time-out", "timed out"),
        Tier.HINT,
        "the output mentions a timeout",
    ),
    Rule(
        "function.undeclared",
        Category.FUNCTION_ERROR,
        r"[’'] undeclared\b",
        ("' undeclared", "’ undeclared"),
        Tier.HINT,
        "gcc: an identifier that was never declared; only a hint, since a header or library "
        "that is not installed (pkg-config's complaint earlier in the output) leaves names "
        "undeclared too",
    ),
    Rule(
        "assertion.tests-failed",
        Category.ASSERTION_FAILURE,
        r"^FAIL\b|--- FAIL:|^not ok \d+|\b\d+ failed\b|^FAILED\b|test result: FAILED|✕|✗|[Tt]ests failed\b"
        r"|Tests:\s+\d+ failed",
        ("fail", "not ", "✕", "✗"),
        Tier.HINT,
        "tests failed without a more specific reason",
    ),
)


@attrs.define
class Categorization:
    """What :func:`categorize` decided, and on which evidence."""

    category: Category
    #: The rule that fired, or None when nothing matched (UNKNOWN).
    rule: Rule | None
    #: The decisive lines: the line the rule matched and its neighbours, bounded.
    decisive_lines: list[str]
    #: The line the rule matched ("" when none did).
    matched_line: str = ""
    #: Where the evidence came from: "decisive" (the extracted lines), "output", or "none".
    source: str = "none"
    #: Which output format was recognised (pytest, cargo …), from the extractor.
    runner: str = "generic"

    @property
    def rule_name(self) -> str:
        return self.rule.name if self.rule is not None else "none"

    def to_json(self) -> dict[str, object]:
        return {
            "category": self.category.value,
            "rule": self.rule_name,
            "rule_tier": int(self.rule.tier) if self.rule is not None else None,
            "rule_description": self.rule.description if self.rule is not None else "",
            "decisive_lines": list(self.decisive_lines),
            "matched_line": self.matched_line,
            "source": self.source,
            "runner": self.runner,
        }


class RuleSet:
    """Rules in precedence order, grouped by tier; each tier is a :class:`loopctl.Scanner`
    that finds lines by the rules' needles, and one combined expression per tier that rejects
    most lines at C speed before the rules are tried one by one, in order. Patterns are
    compiled when first needed (a short error output needs a few), the combined expressions
    once a scanner has seen enough candidate lines (:data:`loopctl.scan.COMBINE_AFTER`)."""

    def __init__(self, rules: Iterable[Rule], *, use_needles: bool = True) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        names = [rule.name for rule in self.rules]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"rule names must be unique; repeated: {', '.join(duplicates)}")
        #: False only in tests: every rule runs on every line (to check the needles change
        #: nothing but speed).
        self.use_needles = use_needles
        #: Each tier's scanner: needles are lowercase and looked for in lowercased lines.
        self.scanners: dict[Tier, Scanner[Rule]] = {
            tier: Scanner(
                [ScanRule(r.name, r.lazy(), r.needles, r) for r in self.rules if r.tier == tier],
                line_chars=SCAN_CHARS,
                ignore_case=True,
                prefilter=use_needles,
                combine=True,
            )
            for tier in Tier
        }
        self.by_tier: dict[Tier, tuple[tuple[Rule, LazyPattern[str]], ...]] = {
            tier: tuple((r.tag, r.pattern) for r in scanner.rules)
            for tier, scanner in self.scanners.items()
        }

    @property
    def combined(self) -> dict[Tier, re.Pattern[str] | None]:
        """Each tier's combined expression (compiled now, where not yet)."""
        return {tier: scanner.combined for tier, scanner in self.scanners.items()}

    @classmethod
    def with_extra(cls, extra: Sequence[Rule]) -> RuleSet:
        """Plugin rules first within each tier, then the built-ins (a stable sort by tier);
        :data:`DEFAULT_RULES` itself when there are none. The plugin rules' patterns are
        compiled here, so a broken one fails at once (``re.error``), not when a text first
        needs it."""
        if not extra and cls is RuleSet:
            return DEFAULT_RULES
        for rule in extra:
            rule.compiled()
        ordered = sorted([*extra, *BUILTIN_RULES], key=lambda rule: int(rule.tier))
        return cls(ordered)

    def first_match(self, line: str, tier: Tier) -> Rule | None:
        """The first rule of ``tier``, in order, that matches ``line``."""
        found = self.scanners[tier].first(line)
        return None if found is None else found.tag


DEFAULT_RULES = RuleSet(BUILTIN_RULES)


# --- scanning ----------------------------------------------------------------------------------

#: The cause of a wrapped error ("[cause]: …", "Caused by: …") is decisive too.
_CAUSES: Scanner[None] = Scanner(
    [
        ScanRule(
            "cause",
            LazyPattern(r"^\s*(?:\[cause\]|Caused by|Cause):\s*\S", re.IGNORECASE),
            ("[cause]", "caused by:", "cause:"),
            None,
        )
    ],
    line_chars=SCAN_CHARS,
    ignore_case=True,
)
#: At most this many cause lines are added to the decisive lines.
_MAX_CAUSES = 20
#: An exception named alone on its line, its message on the next one (RSpec and Ruby's test
#: runners print "NoMethodError:" and then "undefined method `x' for nil"): the message is
#: decisive too.
_BARE_EXCEPTION = re.compile(
    r"^\s*(?:[\w$]+(?:\.|::))*[A-Z]\w*(?:Error|Exception)\w*:\s*$", re.ASCII
)
#: At most this many bare exception lines get their message added.
_MAX_MESSAGES = 8


def _clean(text: str) -> str:
    text = strip_ansi(text)
    return text.replace("\r\n", "\n") if "\r" in text else text


def _window(text: str, head: int = HEAD_CHARS, tail: int = TAIL_CHARS) -> str:
    """The start and the end of a large output (where runners put failures and summaries)."""
    if len(text) <= head + tail:
        return text
    first = text[:head]
    last = text[-tail:]
    first = first[: first.rfind("\n") + 1] or first
    last = last[last.find("\n") + 1 :] or last
    return first + "\n" + last


def extract_decisive(text: str) -> tuple[list[str], str]:
    """The decisive lines and the runner, from :func:`loopctl.parse_test_output`."""
    from loopctl import parse_test_output

    found = parse_test_output(_window(text), max_lines=40)
    return list(found.error_lines), found.runner


def _strip_line(line: str) -> str:
    return line.strip()[:LINE_CHARS]


def _around(lines: Sequence[str], index: int, before: int = 2, after: int = 5) -> list[str]:
    picked = [_strip_line(line) for line in lines[max(0, index - before) : index + after + 1]]
    return [line for line in picked if line]


def _lines_from(text: str, offset: int, count: int) -> list[str]:
    """Up to ``count`` non-blank lines of ``text``, from the line that starts at ``offset``."""
    found: list[str] = []
    while len(found) < count and offset < len(text):
        end = text.find("\n", offset)
        end = len(text) if end == -1 else end
        line = _strip_line(text[offset : min(end, offset + SCAN_CHARS)])
        if line:
            found.append(line)
        offset = end + 1
    return found


def _with_messages(decisive: list[str], text: str) -> list[str]:
    """``decisive``, each line that only names an exception followed by its message: the next
    non-blank line of ``text`` after that line's first occurrence."""
    out: list[str] = []
    budget = _MAX_MESSAGES
    for line in decisive:
        out.append(line)
        if not budget or _BARE_EXCEPTION.match(line) is None:
            continue
        budget -= 1
        at = text.find(line.strip())
        end = text.find("\n", at) if at != -1 else -1
        following = _lines_from(text, end + 1, 1) if end != -1 else []
        if following and following[0] not in decisive:
            out.append(following[0])
    return out


def categorize(
    text: str,
    *,
    decisive_lines: Sequence[str] | None = None,
    rules: RuleSet | None = None,
    runner: str | None = None,
) -> Categorization:
    """Categorize error output. Never raises: odd input gives ``UNKNOWN``.

    ``decisive_lines`` are the lines that matter most (a :class:`~loopctl.model.TestRun`'s
    ``error_lines``); when None they are extracted from ``text``. ``rules`` defaults to the
    built-in rules (see :meth:`RuleSet.with_extra` for adding a plugin's).
    """
    try:
        return _categorize(text, decisive_lines, rules or DEFAULT_RULES, runner)
    except Exception:  # noqa: BLE001 - a rule bug must never break a failure report
        lines = [line for line in (decisive_lines or []) if isinstance(line, str) and line.strip()]
        return Categorization(Category.UNKNOWN, None, [_strip_line(x) for x in lines[:8]])


#: Where to look, tier by tier; the first rule found decides (the module docstring explains
#: why). "decisive" is the decisive lines, "output" the whole output for the overriding tier
#: and its start and end for the others.
PRECEDENCE: tuple[tuple[str, Tier], ...] = (
    ("decisive", Tier.OVERRIDE),
    ("output", Tier.OVERRIDE),
    ("decisive", Tier.CAUSE),
    ("decisive", Tier.SYMPTOM),
    ("decisive", Tier.WEAK),
    ("output", Tier.CAUSE),
    ("output", Tier.SYMPTOM),
    ("output", Tier.WEAK),
    ("decisive", Tier.HINT),
    ("output", Tier.HINT),
)


@attrs.define
class _Evidence:
    """One output made ready for the precedence: cleaned, its decisive lines found."""

    rules: RuleSet
    #: The whole output, without colour codes; the overriding rules read all of it.
    whole: str
    #: Its start and end; the other tiers read only this.
    window: str
    decisive: list[str]
    runner: str

    @classmethod
    def gather(
        cls, text: str, given: Sequence[str] | None, rules: RuleSet, runner: str | None
    ) -> _Evidence:
        whole = _clean(text if isinstance(text, str) else str(text))
        if given is None:
            decisive, found_runner = extract_decisive(whole)
            runner = runner or found_runner
        else:
            decisive = [_clean(line) for line in given if isinstance(line, str)]
        decisive = [line[:SCAN_CHARS] for line in decisive if line.strip()]
        window = _window(whole, RULE_HEAD_CHARS, RULE_TAIL_CHARS)
        decisive = _with_messages(decisive, window)
        causes = _CAUSES.search(window, max_lines=_MAX_CAUSES * 4)
        for cause in itertools.islice(causes, _MAX_CAUSES):
            line = cause.line.strip()
            if line not in decisive:
                decisive.append(line)
        return cls(rules, whole, window, decisive, runner or "generic")

    def find(self, where: str, tier: Tier) -> Categorization | None:
        """The first rule of ``tier`` that matches in the decisive lines or the output."""
        return self.in_decisive(tier) if where == "decisive" else self.in_output(tier)

    def in_decisive(self, tier: Tier) -> Categorization | None:
        found = next(self.rules.scanners[tier].search_lines(self.decisive), None)
        if found is None:
            return None
        lines = _around(self.decisive, found.offset)
        line = _strip_line(self.decisive[found.offset])
        return Categorization(found.tag.category, found.tag, lines, line, "decisive", self.runner)

    def in_output(self, tier: Tier) -> Categorization | None:
        text = self.whole if tier is Tier.OVERRIDE else self.window
        hits = self.rules.scanners[tier].search(text, max_lines=MAX_CANDIDATES)
        found = next(hits, None)
        if found is None:
            return None
        context = _lines_from(text, found.offset, 6)
        line = _strip_line(found.line)
        return Categorization(found.tag.category, found.tag, context, line, "output", self.runner)

    def unknown(self) -> Categorization:
        fallback = self.decisive[:8] or [x for x in self.whole.splitlines()[-8:] if x.strip()]
        lines = [_strip_line(x) for x in fallback if x.strip()]
        return Categorization(Category.UNKNOWN, None, lines, "", "none", self.runner)


def _categorize(
    text: str, given: Sequence[str] | None, rules: RuleSet, runner: str | None
) -> Categorization:
    evidence = _Evidence.gather(text, given, rules, runner)
    for where, tier in PRECEDENCE:
        found = evidence.find(where, tier)
        if found is not None:
            return found
    return evidence.unknown()


__all__ = [
    "BUILTIN_RULES",
    "CATEGORY_MEANING",
    "DEFAULT_RULES",
    "PRECEDENCE",
    "Categorization",
    "Category",
    "Rule",
    "RuleSet",
    "Tier",
    "categorize",
    "extract_decisive",
]
