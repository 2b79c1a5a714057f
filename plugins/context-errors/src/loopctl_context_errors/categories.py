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
   diff, as :func:`loopctl.testoutput.extract` finds them, or the lines the caller gives) are
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
import re
from collections.abc import Iterable, Sequence

import attrs

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

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


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
        return _compile(self.pattern, self.flags)


_COMPILED: dict[tuple[str, int], re.Pattern[str]] = {}


def _compile(pattern: str, flags: int) -> re.Pattern[str]:
    key = (pattern, flags)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = re.compile(pattern, flags)
    return found


def _exc(*names: str) -> str:
    """An exception name as it appears on an exception line (optionally package-qualified)."""
    return r"(?<![\w$])(?:" + "|".join(names) + r")\b(?![(\w])"


R = Rule
O_, C, S, W, H = Tier.OVERRIDE, Tier.CAUSE, Tier.SYMPTOM, Tier.WEAK, Tier.HINT
FA, FN, SY, AS, TY = (
    Category.FILE_ACCESS,
    Category.FUNCTION_ERROR,
    Category.SYNTAX_ERROR,
    Category.ASSERTION_FAILURE,
    Category.TYPE_ERROR,
)
TO, ME, NE, RE_, UN = (
    Category.TIMEOUT,
    Category.MEMORY_ERROR,
    Category.NETWORK_ERROR,
    Category.RESOURCE_ERROR,
    Category.UNKNOWN,
)

#: The built-in rules, in precedence order within each tier.
BUILTIN_RULES: tuple[Rule, ...] = (
    # --- tier 0: overriding ----------------------------------------------------------------
    R(
        "loopctl.test-command-timeout",
        TO,
        r"the test command timed out",
        ("timed out",),
        O_,
        "loopctl stopped the test command at its time limit",
    ),
    R(
        "memory.out-of-memory",
        ME,
        _exc("MemoryError", "OutOfMemoryError", "OutOfMemoryException")
        + r"|heap out of memory|[Oo]ut of memory|memory allocation of \d+ bytes failed"
        r"|[Cc]annot allocate memory|\bENOMEM\b|std::bad_alloc|Reached heap limit",
        ("memory",),
        O_,
        "memory ran out",
    ),
    R(
        "memory.stack-overflow",
        ME,
        _exc("RecursionError", "StackOverflowError")
        + r"|maximum recursion depth|Maximum call stack size exceeded|stack overflow"
        r"|has overflowed its stack|too much recursion",
        ("recursion", "overflow", "call stack"),
        O_,
        "the stack ran out, usually runaway recursion",
    ),
    R(
        "memory.crash",
        ME,
        r"Segmentation fault|\bSIGSEGV\b|\bsegfault\b|\bBus error\b|\bSIGBUS\b|double free"
        r"|heap-buffer-overflow|stack smashing detected|AddressSanitizer",
        ("seg", "bus error", "double free", "overflow", "smashing"),
        O_,
        "the process crashed on a bad memory access",
    ),
    # --- tier 1: causes --------------------------------------------------------------------
    # Specific forms that later, more general rules would misread come first.
    R(
        "network.fetch-failed",
        NE,
        r"\bfetch failed\b",
        ("fail",),
        C,
        "fetch() could not reach the server (Node reports it as a TypeError)",
    ),
    R(
        "type.null-dereference",
        TY,
        r"'NoneType' object has no attribute|Cannot (?:read|set) propert(?:y|ies) of (?:undefined|null)"
        r"|"
        + _exc("NullPointerException", "NullReferenceException")
        + r"|null pointer dereference|\bis possibly '(?:null|undefined)'|Object is possibly"
        r"|Item \"None\" of|called `Option::unwrap\(\)` on a `None` value",
        ("no ", "not ", "exception", "error", "null", "unwrap"),
        C,
        "a null, None or undefined value was used as if it were an object",
    ),
    R(
        "function.not-callable",
        FN,
        r"\bis not a function\b|\bis not a constructor\b|object is not callable"
        r"|This expression is not callable",
        ("not ",),
        C,
        "something that is not a function was called",
    ),
    R(
        "mypy.syntax",
        SY,
        r": error: .*\[syntax\]\s*$",
        ("error",),
        C,
        "mypy could not parse the file",
    ),
    R(
        "mypy.union-attr",
        TY,
        r": error: .*\[union-attr\]\s*$",
        ("error",),
        C,
        "an attribute used on a union (often Optional) that one member lacks",
    ),
    R(
        "mypy.missing-name",
        FN,
        r": error: .*\[(?:name-defined|attr-defined|has-type)\]\s*$",
        ("error",),
        C,
        "mypy: a name or attribute that does not exist",
    ),
    R(
        "mypy.missing-import",
        RE_,
        r": error: .*\[(?:import-not-found|import-untyped|import)\]\s*$",
        ("error",),
        C,
        "mypy: a module that is not installed",
    ),
    R(
        "timeout.timed-out",
        TO,
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
        r"|\bTIMEOUT\b|RecvTimeoutError::Timeout|Elapsed\(\(\)\)",
        ("timeout", "timed out", "deadline", "elapsed", "unavailable", "error", "exception"),
        C,
        "an operation or a test hit its time limit",
    ),
    R(
        "network.connection",
        NE,
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
        ("connect", "reset", "error", "exception", "fail", "no "),
        C,
        "a connection could not be made or was cut",
    ),
    R(
        "network.dns",
        NE,
        _exc("UnknownHostException", "gaierror")
        + r"|Name or service not known|nodename nor servname|Temporary failure in name resolution"
        r"|Could not resolve host|\bENOTFOUND\b|\bEAI_AGAIN\b|getaddrinfo \w+|no such host"
        r"|failed to lookup address",
        ("not ", "no ", "fail", "getaddrinfo", "error", "exception"),
        C,
        "a host name could not be resolved",
    ),
    R(
        "network.tls",
        NE,
        _exc("SSLError", "SSLHandshakeException", "CertificateError")
        + r"|certificate verify failed|self[- ]signed certificate|unable to get local issuer"
        r"|\bCERT_[A-Z_]+\b|\bERR_TLS_[A-Z_]+\b|TLS handshake",
        ("error", "exception", "fail", "certificate"),
        C,
        "a TLS connection failed (certificates, handshake)",
    ),
    R(
        "resource.disk-full",
        RE_,
        r"No space left on device|\bENOSPC\b|Disk quota exceeded|\bEDQUOT\b|[Dd]isk full",
        ("no ", "error", "quota"),
        C,
        "the disk is full",
    ),
    R(
        "resource.open-files",
        RE_,
        r"[Tt]oo many open files|\bEMFILE\b|\bENFILE\b",
        ("too many", "error"),
        C,
        "the process ran out of file descriptors",
    ),
    R(
        "resource.address-in-use",
        RE_,
        r"[Aa]ddress already in use|\bEADDRINUSE\b|\bAddrInUse\b|" + _exc("BindException"),
        ("in use", "error", "exception"),
        C,
        "a port or address is already taken",
    ),
    R(
        "resource.busy",
        RE_,
        r"Resource temporarily unavailable|\bEAGAIN\b|Device or resource busy|\bEBUSY\b"
        r"|Text file busy|[Cc]annot fork|fork: retry",
        ("unavailable", "busy", "error", "not "),
        C,
        "a system limit or a busy resource",
    ),
    R(
        "module.relative-missing",
        FA,
        r"Cannot find module '(?:\.{1,2}/|/)[^']*'|Cannot find module \"(?:\.{1,2}/|/)[^\"]*\"",
        ("not ",),
        C,
        "a module given by path (./x, ../x, /x) does not exist",
    ),
    R(
        "resource.missing-python-module",
        RE_,
        _exc("ModuleNotFoundError", "PackageNotFoundError")
        + r"|No module named\b|No package metadata was found",
        ("error", "no "),
        C,
        "a Python module is not installed (or not on the path)",
    ),
    R(
        "resource.missing-js-package",
        RE_,
        r"Cannot find (?:module|package) '[^'./][^']*'|Cannot find (?:module|package) \"[^\"./][^\"]*\""
        r"|\bERR_MODULE_NOT_FOUND\b",
        ("not ", "error"),
        C,
        "a JavaScript package is not installed",
    ),
    R(
        "resource.missing-crate",
        RE_,
        r"unresolved module or unlinked crate|can't find crate|cannot find module or crate"
        r"|use of undeclared crate|no matching package named|failed to select a version"
        r"|could not find `\w+` in the list of imported crates",
        ("crate", "no ", "fail"),
        C,
        "a Rust crate is not a dependency (or not available offline)",
    ),
    R(
        "resource.missing-java-class",
        RE_,
        r"error: package [\w.]+ does not exist|"
        + _exc("ClassNotFoundException", "NoClassDefFoundError")
        + r"|Could not find or load main class",
        ("not ", "error", "exception"),
        C,
        "a Java package or class is not on the classpath",
    ),
    R(
        "function.shell-undefined",
        FN,
        r"(?:^|[\s:])[a-z][a-z0-9]*_[a-z0-9_]+: command not found",
        ("not ",),
        C,
        "an undefined shell function (a snake_case name reads as a function, not a program)",
    ),
    R(
        "resource.missing-command",
        RE_,
        r": command not found|: not found\s*$|is not recognized as an internal or external command"
        r"|executable file not found|No such file or directory \(os error 2\).*spawn"
        r"|\bspawn \S+ ENOENT\b",
        ("not ", "error"),
        C,
        "a program is not installed or not on PATH",
    ),
    R(
        "file.not-found",
        FA,
        _exc("FileNotFoundError", "FileNotFoundException", "NoSuchFileException")
        + r"|No such file or directory|\bENOENT\b|kind: NotFound\b|cannot stat"
        r"|The system cannot find the (?:file|path) specified|error TS6053:",
        ("no ", "error", "exception", "notfound", "not "),
        C,
        "a file or directory does not exist",
    ),
    R(
        "file.permission",
        FA,
        _exc("PermissionError", "AccessDeniedException", "UnauthorizedAccessException")
        + r"|Permission denied|\bEACCES\b|\bEPERM\b|Operation not permitted"
        r"|Read-only file system|\bEROFS\b|kind: PermissionDenied\b",
        ("denied", "error", "exception", "not "),
        C,
        "the file system refused access",
    ),
    R(
        "file.wrong-kind",
        FA,
        _exc("IsADirectoryError", "NotADirectoryError")
        + r"|\bEISDIR\b|\bENOTDIR\b|Is a directory|Not a directory|kind: IsADirectory\b",
        ("error", "is a directory", "not "),
        C,
        "a path is a directory where a file was expected, or the reverse",
    ),
    R(
        "syntax.exception",
        SY,
        _exc("SyntaxError", "IndentationError", "TabError", "ParseError", "ParserError")
        + r"|\binvalid syntax\b|^invalid-syntax:|Jest encountered an unexpected token",
        ("error", "invalid", "expect"),
        C,
        "the source code does not parse",
    ),
    R(
        "syntax.data",
        SY,
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
        ("error", "exception", "not ", "expect", "invalid", "fail"),
        C,
        "a data file or string does not parse",
    ),
    R(
        "syntax.shell",
        SY,
        r"syntax error near unexpected token|syntax error: unexpected end of file"
        r"|unexpected EOF while looking for matching|: syntax error\b|Syntax error:",
        ("error", "expect"),
        C,
        "a shell script does not parse",
    ),
    R(
        "syntax.compiler",
        SY,
        r"^error(?:\[E0(?:765|758|766|762|763)\])?: (?:expected|unexpected"
        r"|mismatched closing delimiter|unclosed delimiter"
        r"|this file contains an unclosed delimiter|unterminated|unknown start of token)"
        r"|\.java:\d+: error: (?:'.+' expected|reached end of file while parsing"
        r"|illegal start of|class, interface, enum, or record expected|<identifier> expected"
        r"|not a statement|unclosed (?:string|character) literal|orphaned)"
        r"|error TS1\d{3}:|: error: expected (?:';'|'\)'|'\}'|expression|identifier)",
        ("error", "expect"),
        C,
        "the compiler could not parse the source",
    ),
    R(
        "function.undefined-name",
        FN,
        _exc("NameError", "UnboundLocalError", "ReferenceError")
        + r"|\bis not defined\b|Undefined name\b|undefined reference to|undefined symbol"
        r"|implicit declaration of function|use of undeclared identifier",
        ("error", "not ", "undefined"),
        C,
        "a name that was never defined",
    ),
    R(
        "function.missing-member",
        FN,
        _exc("AttributeError", "NoSuchMethodError", "NoSuchFieldError", "MissingMethodException")
        + r"|has no attribute\b|does not exist on type|has no member named|\bno method named\b"
        r"|no function or associated item named|\bno field `|cannot import name\b"
        r"|has no exported member|does not provide an export named"
        r"|^error\[E0603\]: \w+ `[^`]+` is private|is private and only accessible"
        r"|has private access in",
        ("error", "no ", "not ", "exception"),
        C,
        "an attribute, method or export that does not exist or is not visible",
    ),
    R(
        "function.missing-symbol",
        FN,
        r"cannot find (?:function|value|symbol|macro|method|type|struct|trait)\b"
        r"|error: cannot find symbol|Cannot find name '|error TS2304:|error TS2339:|error TS2551:"
        r"|not found in this scope|unresolved (?:name|reference)",
        ("not ", "error", "unresolved"),
        C,
        "a compiler could not find a function or symbol",
    ),
    R(
        "function.pytest-fixture",
        FN,
        r"fixture '[^']+' not found",
        ("not ",),
        C,
        "a pytest fixture that does not exist",
    ),
    R(
        "function.missing-script",
        FN,
        r"Missing script:|missing script:",
        ("error",),
        C,
        "a package script that does not exist",
    ),
    # --- tier 2: symptoms ------------------------------------------------------------------
    R(
        "type.conversion",
        TY,
        r"invalid literal for (?:int|float)\(\)|could not convert string to|"
        + _exc("NumberFormatException", "ParseIntError", "ParseFloatError", "InvalidCastException")
        + r"|invalid digit found in string|integer expression expected|cannot be converted to"
        r"|[Cc]annot convert\b|value too great for base|invalid number",
        ("invalid", "not ", "error", "exception", "expect"),
        S,
        "a value could not be converted to the type needed",
    ),
    R(
        "type.checker",
        TY,
        r"^error\[E\d{4}\]|error TS[2-9]\d{3}:|^\S+:\d+(?::\d+)?: error: .*\[[a-z][a-z-]*\]\s*$"
        r"|error: incompatible types|error: bad operand types|cannot be applied to given types"
        r"|cannot be dereferenced|\bmismatched types\b|is not assignable to",
        ("error",),
        S,
        "the type checker or compiler rejected the types",
    ),
    R(
        "type.exception",
        TY,
        _exc("TypeError", "ClassCastException", "ArrayStoreException", "TypeMismatchError")
        + r"|\btype mismatch\b",
        ("error", "exception"),
        S,
        "a TypeError (or the language's equivalent)",
    ),
    R(
        "assertion.failed",
        AS,
        _exc("AssertionError", "AssertionFailedError", "ComparisonFailure", "AssertionException")
        + r"|\bERR_ASSERTION\b|[Aa]ssertion (?:`[^`]*` )?failed|assertion failed"
        r"|Assertion .* failed",
        ("assert", "error", "exception"),
        S,
        "an assertion did not hold",
    ),
    R(
        "assertion.pytest",
        AS,
        r"^E\s+assert\b|^E\s+Failed: DID NOT (?:RAISE|WARN)|^FAILED \S+ - assert\b"
        r"|Failed: DID NOT (?:RAISE|WARN)",
        ("assert", "not "),
        S,
        "a pytest assertion did not hold",
    ),
    R(
        "assertion.expectation",
        AS,
        r"expect\((?:received|jest\.fn\(\)|[^)]*)\)\.(?:not\.)?\w+\(|^\s*Expected(?: \w+)*:\s"
        r"|^\s*Received(?: \w+)*:\s|Received function did not throw|Error Trace:"
        r"|Expected values to be (?:strictly |loosely )?(?:deep-)?equal",
        ("expect", "not "),
        S,
        "an expectation (jest, node:assert, testify) did not hold",
    ),
    # --- tier 3: weak signals --------------------------------------------------------------
    R(
        "assertion.test-panic",
        AS,
        r"thread '(?!main')[^']+'(?: \(\d+\))? panicked at",
        ("panic",),
        W,
        "a panic inside a Rust test (how assert! and friends fail)",
    ),
    R(
        "exception.uncategorized",
        UN,
        r"^(?:E\s+)?(?:[\w$]+\.)*[A-Z]\w*(?:Error|Exception)\b(?: \[\w+\])?(?::|\s*$)"
        r"|Exception in thread|panicked at|^Error: |^(?:FAILED|ERROR) \S+ - [\w.]+:",
        ("error", "exception", "panic", "fail"),
        W,
        "an exception or panic the rules have no category for",
    ),
    # --- tier 4: hints ---------------------------------------------------------------------
    R(
        "timeout.hint",
        TO,
        r"\b[Tt]ime-?out\b|\bTIMEOUT\b|\btimed out\b",
        ("timeout", "time-out", "timed out"),
        H,
        "the output mentions a timeout",
    ),
    R(
        "assertion.tests-failed",
        AS,
        r"^FAIL\b|--- FAIL:|^not ok \d+|\b\d+ failed\b|^FAILED\b|test result: FAILED|✕|✗"
        r"|Tests:\s+\d+ failed",
        ("fail", "not "),
        H,
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
    """Rules in precedence order, grouped by tier, with what the scan needs to be fast: each
    tier's needles, and one combined expression per tier that rejects most lines at C speed
    before the rules are tried one by one, in order."""

    def __init__(self, rules: Iterable[Rule], *, use_needles: bool = True) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        names = [rule.name for rule in self.rules]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"rule names must be unique; repeated: {', '.join(duplicates)}")
        #: False only in tests: every rule runs on every line (to check the needles change
        #: nothing but speed).
        self.use_needles = use_needles
        self.by_tier: dict[Tier, tuple[tuple[Rule, re.Pattern[str]], ...]] = {
            tier: tuple((r, r.compiled()) for r in self.rules if r.tier == tier) for tier in Tier
        }
        self.needles_by_tier: dict[Tier, tuple[str, ...]] = {
            tier: tuple(sorted({n for r in self.rules if r.tier == tier for n in r.needles}))
            for tier in Tier
        }
        self.combined: dict[Tier, re.Pattern[str] | None] = {
            tier: _combine(self.by_tier[tier]) for tier in Tier
        }

    @classmethod
    def with_extra(cls, extra: Sequence[Rule]) -> RuleSet:
        """Plugin rules first within each tier, then the built-ins (a stable sort by tier)."""
        ordered = sorted([*extra, *BUILTIN_RULES], key=lambda rule: int(rule.tier))
        return cls(ordered)

    def first_match(self, line: str, tier: Tier) -> Rule | None:
        """The first rule of ``tier``, in order, that matches ``line``."""
        combined = self.combined[tier]
        if combined is not None and combined.search(line) is None:
            return None
        lowered = line.lower()
        for rule, pattern in self.by_tier[tier]:
            if self.use_needles and not any(needle in lowered for needle in rule.needles):
                continue
            if pattern.search(line):
                return rule
        return None


def _combine(rules: Sequence[tuple[Rule, re.Pattern[str]]]) -> re.Pattern[str] | None:
    """One alternation of a tier's patterns (None when flags differ or it will not compile)."""
    if not rules or any(rule.flags for rule, _ in rules):
        return None
    try:
        return re.compile("|".join(f"(?:{rule.pattern})" for rule, _ in rules))
    except re.error:
        return None


DEFAULT_RULES = RuleSet(BUILTIN_RULES)


# --- scanning ----------------------------------------------------------------------------------


class _Output:
    """Output text searched lazily: needles → candidate lines, in output order."""

    def __init__(self, text: str = "", *, data: bytes | None = None, lowered: bytes | None = None):
        self.data = text.encode("utf-8", "surrogatepass") if data is None else data
        # ASCII-only lowercasing: byte offsets stay the same
        self.lowered = self.data.lower() if lowered is None else lowered
        self.seen_needles: set[str] = set()
        self.spans: dict[int, int] = {}  # line start → line end (byte offsets)
        self._decoded: dict[int, str] = {}

    def add_needles(self, needles: Iterable[str]) -> None:
        data, spans = self.lowered, self.spans
        for needle in needles:
            if needle in self.seen_needles:
                continue
            self.seen_needles.add(needle)
            raw = needle.encode("utf-8")
            position = data.find(raw)
            while position != -1 and len(spans) < MAX_CANDIDATES:
                start = data.rfind(b"\n", 0, position) + 1
                end = data.find(b"\n", position)
                if end == -1:
                    end = len(data)
                spans[start] = end
                position = data.find(raw, end + 1)

    def lines_with(self, needles: Iterable[str], limit: int = 20) -> list[str]:
        """Lines containing any of ``needles`` (lowercase), in output order, at most ``limit``."""
        starts: dict[int, int] = {}
        for needle in needles:
            raw = needle.encode("utf-8")
            position = self.lowered.find(raw)
            while position != -1 and len(starts) < limit * 4:
                start = self.lowered.rfind(b"\n", 0, position) + 1
                end = self.lowered.find(b"\n", position)
                end = len(self.lowered) if end == -1 else end
                starts[start] = end
                position = self.lowered.find(raw, end + 1)
        found = []
        for start in sorted(starts)[:limit]:
            end = min(starts[start], start + SCAN_CHARS)
            found.append(self.data[start:end].decode("utf-8", "replace").strip())
        return found

    def window(self, head: int, tail: int) -> _Output:
        """The first ``head`` and last ``tail`` bytes, cut at line ends (the same object when
        the output is not longer than both)."""
        if len(self.data) <= head + tail:
            return self
        first_end = self.data.rfind(b"\n", 0, head) + 1 or head
        last_start = self.data.find(b"\n", len(self.data) - tail) + 1 or len(self.data) - tail
        data = self.data[:first_end] + b"\n" + self.data[last_start:]
        lowered = self.lowered[:first_end] + b"\n" + self.lowered[last_start:]
        return _Output(data=data, lowered=lowered)

    def lines(self) -> list[tuple[int, str]]:
        """Candidate lines so far, in output order: (byte offset, text)."""
        out = []
        decoded = self._decoded
        for start in sorted(self.spans):
            line = decoded.get(start)
            if line is None:
                end = min(self.spans[start], start + SCAN_CHARS * 4)
                line = self.data[start:end].decode("utf-8", "replace").rstrip("\r")[:SCAN_CHARS]
                decoded[start] = line
            out.append((start, line))
        return out

    def context_after(self, offset: int, count: int) -> list[str]:
        """Up to ``count`` non-blank lines starting at the line at ``offset``."""
        found: list[str] = []
        position = offset
        data = self.data
        while len(found) < count and position < len(data):
            end = data.find(b"\n", position)
            if end == -1:
                end = len(data)
            line = data[position : min(end, position + SCAN_CHARS)].decode("utf-8", "replace")
            if line.strip():
                found.append(line.rstrip())
            position = end + 1
        return found


_CAUSE_NEEDLES = ("[cause]", "caused by:", "cause:")
_CAUSE_LINE = re.compile(r"^(?:\[cause\]|Caused by|Cause):\s*\S", re.IGNORECASE)


def _clean(text: str) -> str:
    if "\x1b" in text:
        text = _ANSI.sub("", text)
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
    """The decisive lines and the runner, from :func:`loopctl.testoutput.extract`."""
    from loopctl.testoutput import extract

    found = extract(_window(text), max_lines=40)
    return list(found.error_lines), found.runner


def _strip_line(line: str) -> str:
    return line.strip()[:LINE_CHARS]


def _around(lines: Sequence[str], index: int, before: int = 2, after: int = 5) -> list[str]:
    picked = [_strip_line(line) for line in lines[max(0, index - before) : index + after + 1]]
    return [line for line in picked if line]


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


def _categorize(
    text: str, given: Sequence[str] | None, rules: RuleSet, runner: str | None
) -> Categorization:
    text = _clean(text if isinstance(text, str) else str(text))
    if given is None:
        decisive, found_runner = extract_decisive(text)
        runner = runner or found_runner
    else:
        decisive = [_clean(line) for line in given if isinstance(line, str)]
    runner = runner or "generic"
    decisive = [line[:SCAN_CHARS] for line in decisive if line.strip()]
    whole = _Output(text)  # overriding rules read all of it
    window = whole.window(RULE_HEAD_CHARS, RULE_TAIL_CHARS)
    # The cause of a wrapped error ("[cause]: …", "Caused by: …") is decisive too.
    for line in window.lines_with(_CAUSE_NEEDLES):
        if _CAUSE_LINE.match(line) and line not in decisive:
            decisive.append(line)

    def in_decisive(tier: Tier) -> Categorization | None:
        for index, line in enumerate(decisive):
            rule = rules.first_match(line, tier)
            if rule is not None:
                return Categorization(
                    rule.category,
                    rule,
                    _around(decisive, index),
                    _strip_line(line),
                    "decisive",
                    runner,
                )
        return None

    def in_output(tier: Tier) -> Categorization | None:
        output = whole if tier is Tier.OVERRIDE else window
        output.add_needles(rules.needles_by_tier[tier] if rules.use_needles else ("",))
        for offset, line in output.lines():
            rule = rules.first_match(line, tier)
            if rule is not None:
                context = [_strip_line(x) for x in output.context_after(offset, 6)]
                return Categorization(
                    rule.category,
                    rule,
                    [x for x in context if x],
                    _strip_line(line),
                    "output",
                    runner,
                )
        return None

    # 1. overriding rules, anywhere (the decisive lines first: they are the better evidence)
    found = in_decisive(Tier.OVERRIDE) or in_output(Tier.OVERRIDE)
    # 2. causes, symptoms, weak signals in the decisive lines, then 3. in the output
    for scope in (in_decisive, in_output):
        for tier in (Tier.CAUSE, Tier.SYMPTOM, Tier.WEAK):
            if found is None:
                found = scope(tier)
    # 4. hints anywhere
    if found is None:
        found = in_decisive(Tier.HINT) or in_output(Tier.HINT)
    if found is not None:
        return found
    fallback = decisive[:8] or [line for line in text.splitlines()[-8:] if line.strip()]
    return Categorization(
        Category.UNKNOWN, None, [_strip_line(x) for x in fallback if x.strip()], "", "none", runner
    )


__all__ = [
    "BUILTIN_RULES",
    "CATEGORY_MEANING",
    "DEFAULT_RULES",
    "Categorization",
    "Category",
    "Rule",
    "RuleSet",
    "Tier",
    "categorize",
    "extract_decisive",
]
