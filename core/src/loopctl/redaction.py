"""The one redactor: nothing secret leaves loopctl in clear.

Everything loopctl writes or prints passes through :func:`redact`: the state files (through the
atomic writers and :class:`~loopctl.state.JsonlAppender`), the logs (the agent's transcript is
redacted line by line as it streams, see :class:`StreamRedactor`), the events (redacted once,
when emitted, so views, plugins, OpenTelemetry and GitHub get the redacted data), the prompt sent
to the agent's model, the run report, ``loopctl classify`` and ``loopctl errors``, ``config
show``, the failure memory. A secret is replaced by ``[REDACTED]``; the rest of the line stays,
so an error stays readable.

What is recognised. The shapes follow the maintained rule sets of two secret scanners, read as
the reference and written anew here: gitleaks (``config/gitleaks.toml``, generated from
``cmd/generate/config/rules/*.go``) and Yelp's detect-secrets (``detect_secrets/plugins/*.py``):

* values of the variables named in ``withhold_env`` / ``LOOPCTL_WITHHOLD_ENV``, and of variables
  whose names say they hold a secret (``*_TOKEN``, ``*_API_KEY``, …), wherever they appear;
* private key blocks (gitleaks ``private-key``; detect-secrets ``private_key.py``), also without
  their END line, a bare key body line, and with JSON-escaped newlines;
* ``Authorization:`` headers, ``Bearer``/``Basic`` credentials (gitleaks ``curl-auth-header``);
* passwords in URLs, ``scheme://user:password@host`` (detect-secrets ``basic_auth.py``);
* AWS access key ids ``AKIA``/``ASIA``/``ABIA``/``ACCA``/``A3T…`` (gitleaks ``aws-access-token``)
  and secret keys: 40 characters after ``aws``, ``secret``, or a ``…_secret_access_key=``
  (detect-secrets ``aws.py``);
* GitHub ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_``/``github_pat_`` (gitleaks ``github-*``);
  GitLab ``glpat-``, ``gldt-``, ``glptt-``, ``glrt-``, … and runner registration tokens
  (``gitlab-*``); Slack ``xox?-``, ``xapp-`` and webhook URLs (``slack-*``); Stripe
  ``sk_/rk_/pk_live|test|prod_`` (``stripe-access-token``); Google ``AIza…`` (``gcp-api-key``);
  JWTs (``jwt``); PyPI ``pypi-AgE…`` (``pypi-upload-token``, detect-secrets ``pypi_token.py``);
  SendGrid ``SG.….…`` (``sendgrid-api-token``); Twilio ``SK``/``AC`` + 32 hex (detect-secrets
  ``twilio.py``); Telegram bot tokens (``telegram-bot-api-token``, detect-secrets
  ``telegram_token.py``); Databricks ``dapi…`` (``databricks-api-token``); Hugging Face ``hf_``
  and ``api_org_`` (``huggingface-*``); OpenAI and Anthropic ``sk-…`` (``openai-api-key``,
  ``anthropic-api-key``); npm ``npm_…`` (``npm-access-token``);
* assignments: ``password=``, ``secret:``, ``api_key =``, ``"token": "…"``, ``--password x``
  (detect-secrets ``keyword.py``, gitleaks ``generic-api-key``). ``token``, ``auth`` and ``key``
  alone are common words in error messages ("unexpected token: ')'"), so after them only a long
  value with a digit counts.

Not attempted: entropy-only detection of arbitrary strings (commit hashes and fingerprints would
drown in it), and secrets cut in two by the writer itself (a line longer than
:data:`MAX_PENDING_LINE` while streaming).

Every pattern is JSON-safe: a match never spans a quote or a backslash (except the ``\\n`` of a
JSON-escaped key block, consumed whole), so redacting serialized JSON leaves valid JSON. Redacting
is idempotent (redacting redacted text changes nothing), which the state files rely on: a file
read back and rewritten stays the same. Each pattern runs only when the text holds one of its
cheap literal hints; ``benchmarks/bench_redact.py`` measures the cost.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from loopctl.lazyre import LazyPattern, alternation, lazy_compile
from loopctl.withhold import SECRET_NAME, secret_values

#: What a secret is replaced by.
MARK = "[REDACTED]"
_MARK = MARK.encode()
#: While streaming, a line longer than this is redacted and written without waiting for its end.
MAX_PENDING_LINE = 1 << 20
#: Up to this size a finder first checks that one of its literals is in the text at all (cheap
#: on short strings); a longer text is scanned by the finder's own literal search at once.
_CHECK_LITERALS_UP_TO = 4096

Span = tuple[int, int]
_Resolve = Callable[["re.Match[bytes]", bytes, bytes], Iterator[Span]]


class _Finder(NamedTuple):
    """A rule. ``pattern`` starts with a literal, so the regex engine scans for it at memchr-like
    speed (a leading ``\\b`` or case-insensitive flag would make it try every position); it runs
    on the lowered text when ``lower``. ``resolve`` turns each match into the spans to mask.
    ``literals``: on a short text the rule runs only when one of them occurs.

    Rules run on the text's UTF-8 bytes: one byte per ASCII character whatever else the text
    holds, and ``bytes.lower()`` changes ASCII letters only, so the lowered text's positions
    are the text's."""

    literals: tuple[bytes, ...]
    #: Compiled when a text first holds one of ``literals``: most texts need few of the rules.
    pattern: LazyPattern[bytes]
    lower: bool
    resolve: _Resolve


def _whole(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    yield match.span()


def _not_word(data: bytes, at: int) -> bool:
    """No letter, digit or underscore just before ``at`` (or a JSON escape: ``\\n``)."""
    if at == 0 or not (data[at - 1 : at].isalnum() or data[at - 1] == 95):
        return True
    return at >= 2 and data[at - 2] == 92 and data[at - 1] in b"nrt"


def _after(literal: bytes) -> bytes:
    """A lookbehind, placed right after ``literal``: no letter or digit before it, or a JSON
    escape (``\\n``, ``\\t``) that only looks like one."""
    escaped = re.escape(literal)
    return rb"(?:(?<![A-Za-z0-9]" + escaped + rb")|(?<=\\[nrt]" + escaped + rb"))"


# --- private keys -------------------------------------------------------------------------------

_PEM_BEGIN = rb"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = rb"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
_PEM_NEWLINE = rb"(?:\r?\n|\\r\\n|\\n)"
#: What a log may put before each line of a key: ``E   `` (pytest), a time stamp, ``> ``.
_PEM_PREFIX = rb"(?:[^\r\n\\\"]{0,40}?[ \t>|:#])?"
_PRIVATE_KEY = lazy_compile(
    _PEM_BEGIN
    # the body, line by line: base64 (a short run only as the last line before END), or the
    # Proc-Type/DEK-Info headers of an encrypted key, each line maybe after a log's prefix;
    # or long base64 runs on the BEGIN line itself. It ends at the END line or where the key's
    # lines end (a block cut from its END still loses all of its body). A newline may be a
    # JSON-escaped one (\n); a quote ends the block.
    + rb"(?:"
    + _PEM_NEWLINE
    + _PEM_PREFIX
    + rb"[ \t]*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z0-9+/=]{1,15}(?="
    + _PEM_NEWLINE
    + _PEM_PREFIX
    + rb"[ \t]*-----END)|Proc-Type:[^\r\n\\\"]*|DEK-Info:[^\r\n\\\"]*)?[ \t]*(?="
    + _PEM_NEWLINE
    + rb"|\Z|[\"'`])"
    + rb"|[ \t]+[A-Za-z0-9+/=]{16,})*"
    + rb"(?:(?:"
    + _PEM_NEWLINE
    + _PEM_PREFIX
    + rb"|[ \t]*)"
    + _PEM_END
    + rb")?"
)
_PEM_BEGIN_RE = lazy_compile(_PEM_BEGIN)
_PEM_END_RE = lazy_compile(_PEM_END)
_KEY_BODY_LINE = lazy_compile(_PEM_PREFIX + rb"[ \t]*(?P<run>[A-Za-z0-9+/=]+)[ \t\r]*")
_PREFIX_ONLY = lazy_compile(_PEM_PREFIX + rb"[ \t]*")


def _line_start(data: bytes, at: int) -> int:
    """Where the line holding ``at`` starts (after a newline or a JSON-escaped one)."""
    newline, escaped = data.rfind(b"\n", 0, at), data.rfind(b"\\n", 0, at)
    return max(newline + 1 if newline >= 0 else 0, escaped + 2 if escaped >= 0 else 0)


def _key_body_start(data: bytes, end: int) -> int:
    """Where the base64 lines just before ``end`` (an END marker) begin: a key block cut from
    its BEGIN line (the tail of a long output) still loses its body. Lines may carry a log's
    prefix; all but the last must be long runs, so the walk stops at ordinary text."""
    start = _line_start(data, end)
    if end - start > 48 or not _PREFIX_ONLY.fullmatch(data, start, end):
        start = end  # more than a log's prefix before the END marker: take the marker alone
    last = True
    for _ in range(1000):
        if data.endswith(b"\\n", 0, start):
            separator = start - 2
        elif data.endswith(b"\n", 0, start):
            separator = start - 1
        else:
            break
        line_start = _line_start(data, separator)
        line = _KEY_BODY_LINE.fullmatch(data, line_start, separator)
        if line is None or (not last and len(line.group("run")) < 16):
            break
        start, last = line_start, False
    return start


def _private_key(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    at = match.start()
    block = _PRIVATE_KEY.match(data, at)
    if block is not None:
        yield block.span()
        return
    end = _PEM_END_RE.match(data, at)
    if end is not None:
        yield _key_body_start(data, at), end.end()


# --- shapes that need a look around the match ----------------------------------------------------


def _stripe(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    start = match.start()  # at "k_"; the key starts one before, with sk/rk/pk
    if start >= 1 and data[start - 1] in b"srp" and _not_word(data, start - 1):
        yield start - 1, match.end()


def _colon(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    """``://user:password@`` and ``://token@`` in URLs; Telegram bot tokens (``123456:A…``)."""
    if match.group("password") is not None:
        yield match.span("password")
    elif match.group("token") is not None:
        yield match.span("token")
    elif match.group("bot") is not None:
        colon = match.start()
        start = colon
        while start > 0 and colon - start < 17 and 48 <= data[start - 1] <= 57:
            start -= 1
        if 5 <= colon - start <= 16 and _not_word(data, start) and data[start - 1 : start] != b":":
            yield start, match.end()


_RANDOM = lazy_compile(rb"[\w.~+/=-]*?(?:\d|[a-z][A-Z]|[A-Z][a-z]*[A-Z])")


def _credential(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    """``Bearer xyz``, ``Basic xyz``: only a value that looks generated (a digit or an inner
    capital), so "Bearer authentication required" stays."""
    start, end = match.span("value")
    if _not_word(data, match.start()) and _RANDOM.match(data, start, end):
        yield start, end


# --- assignments ---------------------------------------------------------------------------------

#: Before "key"/"token": the names that make it a secret for sure (api_key, access-token …).
_STRONG_KEY = lazy_compile(rb"(?:api|access|private|secret|client)[_-]?\Z")
_STRONG_TOKEN = lazy_compile(rb"(?:auth|access|refresh|session|api|bearer|private)[_-]?\Z")
#: Before a keyword: it is a command-line flag (``--password``, ``-token``).
_FLAG = lazy_compile(rb"(?:\A|[^\w-])--?[\w-]*\Z")
_WEAK_VALUE = lazy_compile(rb"[A-Za-z0-9_\-./+=]{16,}")
#: A value that names a secret instead of holding one: a variable (``"apiKeySource":
#: "ANTHROPIC_API_KEY"``, ``password=$DB_PASSWORD``), as gitleaks' generic rule allows.
_A_NAME = lazy_compile(rb"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
_DIGIT = lazy_compile(rb"\d")
_AWS_SECRET = lazy_compile(
    rb"(?:(?<![A-Za-z0-9+/=])|(?<=\\[nrt]))[A-Za-z0-9/+]{40}(?![A-Za-z0-9+/=])"
)
#: The value after an assignment or, for a flag, after spaces: never a quote, a backslash or
#: whitespace (so a match never leaves a JSON string).
_ASSIGNED = (
    rb"(?=[\w.-]{0,30}(?:(?P<assign>[\"']?[ \t]*(?:=|:=|:|=>)[ \t]*[\"']?)|[ \t]+)"
    rb"(?P<value>[^\s\"'`\\&,;<>]+))?"
)


#: Values that hold no secret: JSON's and Python's empty and boolean literals.
_NO_VALUE = frozenset((b"null", b"none", b"true", b"false"))


def _aws_secret(data: bytes, after: int) -> Iterator[Span]:
    """A bare AWS secret access key (40 base64 characters, mixed case with a digit) within 40
    characters after ``after``, on the same line."""
    window_end = min(len(data), after + 81)
    newline = data.find(b"\n", after, window_end)
    for found in _AWS_SECRET.finditer(data[: newline if newline >= 0 else window_end], after):
        key = found.group()
        if key.lower() != key and key.upper() != key and _DIGIT.search(key):
            yield found.span()


def _assignment(keyword: bytes, *, strong: bool, flag: bool, aws: bool = False) -> _Resolve:
    """The resolver of a keyword: ``KEYWORD…=value`` (``:``, ``:=``, ``=>``; quoted or not),
    ``--KEYWORD value`` when ``flag``. A strong keyword masks any value of 3 characters or
    more; a weak one ("token", "key", "auth": common words in error messages) only a long value
    with a digit, unless a name before it makes it strong (``api_key``, ``access_token``)."""
    names = _STRONG_KEY if keyword == b"key" else _STRONG_TOKEN if keyword == b"token" else None

    def resolve(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
        at = match.start()
        if aws:
            yield from _aws_secret(data, match.end())
        start, end = match.span("value")
        if start < 0 or lowered.startswith(b"[redacted]", start):
            return
        assign = match.group("assign")
        if assign is not None and assign[:1] in b"\"'":  # a quoted key: JSON or a dict's repr
            while end > start and data[end - 1] in b"}]":  # the value's end, not the object's
                end -= 1
        if _A_NAME.fullmatch(data, start, end) or lowered[start:end] in _NO_VALUE:
            return
        is_strong = strong or bool(names and names.search(lowered, max(0, at - 9), at))
        if match.group("assign") is not None:
            if is_strong:
                if end - start >= 3:
                    yield start, end
                return
            weak = _WEAK_VALUE.match(data, start, end)
            if weak is not None and _DIGIT.search(weak.group()):
                yield weak.span()
        elif (
            (flag or is_strong)
            and end - start >= 3
            and data[start] != 45  # not "-x": the next flag
            and _FLAG.search(lowered, max(0, at - 40), at)
        ):
            yield start, end

    return resolve


def _keyword(keyword: str, *, strong: bool, flag: bool = False, aws: bool = False) -> _Finder:
    word = keyword.encode()
    return _Finder(
        (word,),
        lazy_compile(re.escape(word) + _ASSIGNED),
        True,
        _assignment(word, strong=strong, flag=flag, aws=aws),
    )


def _pass(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    return _PASS(match, data, lowered)


_PASS = _assignment(b"pass", strong=True, flag=True)


def _auth(match: re.Match[bytes], data: bytes, lowered: bytes) -> Iterator[Span]:
    """``Authorization:`` headers (their whole value), else ``auth…=value`` (weak)."""
    if match.group("header") is not None:
        start, end = match.span("header")
        if not lowered.startswith(b"[redacted]", start):
            yield start, end
    else:
        yield from _AUTH(match, data, lowered)


_AUTH = _assignment(b"auth", strong=False, flag=False)


def _shape(literals: tuple[str, ...], pattern: bytes, resolve: _Resolve = _whole) -> _Finder:
    return _Finder(tuple(x.encode() for x in literals), lazy_compile(pattern), False, resolve)


#: Every rule. Shapes that share a first letter share one scan; a lookbehind right after the
#: literal checks the character before it.
_FINDERS: tuple[_Finder, ...] = (
    _shape(("-----",), rb"-----(?=BEGIN|END)", _private_key),
    _shape(
        ("AKIA", "ASIA", "ABIA", "ACCA", "A3T", "AIza", "AC"),
        b"A"
        + _after(b"A")
        + rb"(?:(?:KIA|SIA|BIA|CCA|3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])"
        + rb"|Iza[\w-]{35}|C[0-9a-fA-F]{32}(?![A-Za-z0-9]))",
    ),
    _shape(
        ("SK", "SG."),
        b"S"
        + _after(b"S")
        + rb"(?:K[0-9a-fA-F]{32}(?![A-Za-z0-9])|G\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{16,64})",
    ),
    _shape(
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "gl"),
        b"g"
        + _after(b"g")
        + rb"(?:h[pousr]_[A-Za-z0-9]{30,255}|ithub_pat_\w{22,255}"
        + rb"|l(?:(?:pat|dt|ptt|rt|soat|ffct|ft|imt|agent|oas)-[\w-]{20,}(?:\.[0-9a-z]{9})?"
        + rb"|cbt-[0-9a-zA-Z]{1,5}_[\w-]{20,}))",
    ),
    _shape(("GR1348941",), rb"GR1348941[\w-]{20,}"),
    _shape(
        ("xox", "xapp-"),
        b"x"
        + _after(b"x")
        + rb"(?:oxe\.xox[bp]-[A-Za-z0-9-]{10,}|ox[abposre]-[A-Za-z0-9-]{10,}"
        + rb"|app-\d-[A-Za-z0-9-]{10,})",
    ),
    _shape(
        ("hf_", "hooks.slack.com/"),
        rb"h(?:f_"
        + _after(b"hf_")
        + rb"[A-Za-z]{34}(?![A-Za-z0-9])"
        + rb"|ooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{16,})",
    ),
    _shape(("k_test_", "k_live_", "k_prod_"), rb"k_(?:test|live|prod)_[A-Za-z0-9]{10,}", _stripe),
    _shape(("sk-",), b"sk-" + _after(b"sk-") + rb"[A-Za-z0-9_-]{20,}"),
    _shape(
        ("eyJ",),
        b"eyJ" + _after(b"eyJ") + rb"[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]*",
    ),
    _shape(("pypi-AgE",), rb"pypi-AgE[A-Za-z0-9_-]{50,}"),
    _shape(("dapi",), b"dapi" + _after(b"dapi") + rb"[a-f0-9]{32}(?:-\d)?(?![A-Za-z0-9])"),
    _shape(("api_org_",), b"api_org_" + _after(b"api_org_") + rb"[A-Za-z]{34}(?![A-Za-z0-9])"),
    _shape(("npm_",), b"npm_" + _after(b"npm_") + rb"[A-Za-z0-9]{36}(?![A-Za-z0-9])"),
    _shape(
        ("://", ":A"),
        rb":(?://(?:[^\s:/@\"'`<>\\]*:(?!\[REDACTED\])(?P<password>[^\s@/\"'`<>\\]+)"
        rb"|(?=[\w.~-]*\d)(?P<token>[\w.~-]{20,}))(?=@)"
        rb"|(?P<bot>A[\w-]{32,40})(?![\w-]))",
        _colon,
    ),
    _shape(("Basic",), rb"Basic(?=[ \t]+(?P<value>[A-Za-z0-9+/]{12,}={0,2}))", _credential),
    _Finder(
        (b"bearer",),
        lazy_compile(rb"bearer(?=[ \t]+(?P<value>[a-z0-9._~+/=-]{12,}))"),
        True,
        _credential,
    ),
    _Finder(
        (b"auth",),
        lazy_compile(
            rb"auth(?:orization(?=[\"']?[ \t]*[:=][ \t]*[\"']?(?:(?:bearer|basic|token|digest"
            rb"|negotiate|ntlm|aws4-hmac-sha256|apikey|api-key)[ \t]+)?"
            rb"(?P<header>[^\"'`\r\n\\]+))|" + _ASSIGNED + rb")"
        ),
        True,
        _auth,
    ),
    _Finder(
        (b"passw", b"passphrase", b"db_pass"),
        lazy_compile(rb"pass(?:w|phrase|(?<=db_pass))" + _ASSIGNED),
        True,
        _pass,
    ),
    _keyword("pwd", strong=True),
    _keyword("secret", strong=True, flag=True, aws=True),
    _keyword("credential", strong=True),
    _keyword("token", strong=False, flag=True),
    _keyword("key", strong=False),
    _keyword("aws", strong=False, aws=True),
)


class _Gate(NamedTuple):
    """The literals of the rules that run on the text (``lower`` False) or on the lowered text,
    in one pattern. ``runs``: for each literal, the rules it lets run (those with a literal
    that it starts with, so a literal that ends inside a longer one is not lost)."""

    pattern: LazyPattern[bytes]
    lower: bool
    runs: dict[bytes, tuple[int, ...]]


def _gate(lower: bool) -> _Gate:
    owned = [
        (literal, index)
        for index, finder in enumerate(_FINDERS)
        if finder.lower == lower
        for literal in finder.literals
    ]
    words = {literal for literal, _ in owned}
    runs = {
        word: tuple(sorted({index for literal, index in owned if word.startswith(literal)}))
        for word in words
    }
    source = alternation([word.decode("latin-1") for word in words]).encode("latin-1")
    return _Gate(lazy_compile(source), lower, runs)


@functools.cache
def _gates() -> tuple[_Gate, _Gate]:
    """Every rule's literals in two patterns (case as written, lowered): on a text up to
    :data:`_CHECK_LITERALS_UP_TO`, a search or two finds which rules can match at all, instead
    of about 45 substring checks, one per literal. Made on first use (0.4 ms: not at import)."""
    return _gate(False), _gate(True)


#: Past this many literals found in one text, every rule's own literal check decides instead.
_MAX_GATE_HITS = 16


def _wanted(data: bytes, lowered: bytes) -> set[int] | None:
    """The indices of the rules whose literals occur in the text (None: too many to say)."""
    wanted: set[int] = set()
    hits = 0
    for gate in _gates():
        haystack = lowered if gate.lower else data
        search = gate.pattern.search
        found = search(haystack)
        while found is not None:
            hits += 1
            if hits > _MAX_GATE_HITS:
                return None
            wanted.update(gate.runs[found.group()])
            found = search(haystack, found.start() + 1)  # literals may overlap
    return wanted


def _find_spans(data: bytes) -> list[Span]:
    lowered = data.lower()
    wanted = _wanted(data, lowered) if len(data) <= _CHECK_LITERALS_UP_TO else None
    if wanted is not None and not wanted:
        return []
    check = wanted is None and len(data) <= _CHECK_LITERALS_UP_TO
    spans: list[Span] = []
    for index, finder in enumerate(_FINDERS):
        if wanted is not None and index not in wanted:
            continue
        haystack = lowered if finder.lower else data
        if check:
            for literal in finder.literals:
                if literal in haystack:
                    break
            else:
                continue
        for match in finder.pattern.finditer(haystack):
            for span in finder.resolve(match, data, lowered):
                if span[1] > span[0]:
                    spans.append(span)
    return spans


def _splice(data: bytes, spans: list[Span]) -> bytes:
    spans.sort()
    pieces: list[bytes] = []
    kept = 0  # data[:kept] is decided
    start, end = spans[0]
    for next_start, next_end in spans[1:]:
        if next_start <= end:
            end = max(end, next_end)
            continue
        pieces += [data[kept:start], _MARK]
        kept = end
        start, end = next_start, next_end
    pieces += [data[kept:start], _MARK, data[end:]]
    return b"".join(pieces)


def _redact_bytes(data: bytes) -> bytes:
    spans = _find_spans(data)
    return _splice(data, spans) if spans else data


def _literal_forms(value: str) -> list[str]:
    """``value`` as it may appear: plain, URL-quoted, and JSON-escaped."""
    from urllib.parse import quote

    forms = {value, quote(value, safe=""), json.dumps(value)[1:-1]}
    return sorted((f for f in forms if f and f not in MARK), key=len, reverse=True)


#: Texts up to this long are remembered with what they became: a loop redacts the same short
#: strings (a goal, a test id, a suggestion) several times an iteration.
_MEMO_CHARS = 512
#: How many are remembered (then all are forgotten at once).
_MEMO_SIZE = 1024


class Redactor:
    """Replaces secrets in text by :attr:`MARK` (``[REDACTED]``): what :func:`loopctl.redact`
    masks, and the ``values`` given here (a token a plugin holds).

    A Redactor never raises: if redacting fails, the text is replaced by the mark whole."""

    #: What a secret is replaced by.
    MARK = MARK

    def __init__(self, values: Iterable[str] = (), *, withheld: bool = True) -> None:
        self._own = tuple(v for v in values if isinstance(v, str) and len(v) >= 4)
        self._withheld = withheld
        self._cached_for: tuple[str, ...] | None = None
        self._literals: tuple[str, ...] = ()
        self._byte_literals: tuple[bytes, ...] = ()
        #: Recent short texts and what they became, each with the literals it was redacted
        #: against (a result made before the withheld values changed is never used after).
        self._memo: dict[str, tuple[tuple[str, ...], str]] = {}

    def with_values(self, values: Iterable[str]) -> Redactor:
        """A redactor that also masks ``values``."""
        return Redactor((*self._own, *values), withheld=self._withheld)

    def _literal_values(self) -> tuple[str, ...]:
        current = secret_values() if self._withheld else ()
        if current is not self._cached_for:
            forms = {form for value in (*self._own, *current) for form in _literal_forms(value)}
            self._literals = tuple(sorted(forms, key=len, reverse=True))
            self._byte_literals = tuple(f.encode("utf-8", "surrogatepass") for f in self._literals)
            self._cached_for = current
        return self._literals

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by :attr:`MARK`."""
        if not isinstance(text, str):
            return "" if text is None else self.redact(str(text))
        if not text:
            return text
        try:
            literals = self._literal_values()
            if len(text) <= _MEMO_CHARS:
                known = self._memo.get(text)
                if known is not None and known[0] is literals:
                    return known[1]
            original = text
            for literal in literals:
                if literal in text:
                    text = text.replace(literal, MARK)
            data = text.encode("utf-8", "surrogatepass")
            spans = _find_spans(data)
            result = _splice(data, spans).decode("utf-8", "surrogatepass") if spans else text
        except Exception:  # noqa: BLE001 - a redactor that fails must not leak: drop the text
            return MARK
        if len(original) <= _MEMO_CHARS:
            if len(self._memo) >= _MEMO_SIZE:
                self._memo.clear()
            self._memo[original] = (literals, result)
        return result

    def redact_bytes(self, data: bytes) -> bytes:
        """:meth:`redact` for bytes (UTF-8 or not: other bytes pass through as they are)."""
        if not data:
            return data
        try:
            self._literal_values()
            for literal in self._byte_literals:
                if literal in data:
                    data = data.replace(literal, _MARK)
            return _redact_bytes(data)
        except Exception:  # noqa: BLE001 - a redactor that fails must not leak: drop the text
            return _MARK

    __call__ = redact

    def redact_data(self, data: Any, *, by_name: bool = False, mark: str = MARK) -> Any:
        """``data`` (JSON-like: mappings, lists, strings) with every string redacted, returned
        as it is when nothing was. With ``by_name``, a string whose key says it is a secret (a
        token, secret, password, credential or API key; any ``*KEY*`` in an ``env`` table) is
        replaced by ``mark`` whole; ``*_env`` keys name a variable, they do not hold one.

        Without ``by_name``, the data is redacted as one JSON text (one pass instead of one per
        string, and ``"password": "…"`` is seen as an assignment); data that has something to
        redact comes back as plain JSON data (tuples as lists, other objects as strings)."""
        if by_name:
            return self._data(data, by_name, mark, "", False)
        try:
            text = json.dumps(data, ensure_ascii=False, default=str)
        except (TypeError, ValueError, RecursionError):
            return self._data(data, False, mark, "", False)
        clean = self.redact(text)
        if clean == text:
            return data
        try:
            return json.loads(clean)
        except ValueError:  # never expected: every pattern stays inside one JSON string
            return self._data(data, False, mark, "", False)

    def _data(self, data: Any, by_name: bool, mark: str, name: str, in_env: bool) -> Any:
        if isinstance(data, str):
            if not data:
                return data
            if (
                by_name
                and not name.lower().endswith("_env")
                and (SECRET_NAME.search(name) or (in_env and "key" in name.lower()))
            ):
                return mark
            return self.redact(data)
        if isinstance(data, Mapping):
            inside = in_env or name == "env"
            return {
                key: self._data(value, by_name, mark, str(key), inside)
                for key, value in data.items()
            }
        if isinstance(data, (list, tuple)):
            return [self._data(item, by_name, mark, name, in_env) for item in data]
        return data

    def stream(self) -> StreamRedactor:
        """A :class:`StreamRedactor` for text that arrives in chunks."""
        return StreamRedactor(self)


class StreamRedactor:
    """Redacts bytes that arrive in chunks (an agent's output, streamed to its transcript):
    only whole lines are redacted and handed on, the rest waits for its newline, so a secret
    split across two chunks is still caught; a private key block spread over several chunks is
    masked from its BEGIN line to its END line. Bytes that are not UTF-8 pass through as they
    were. Call :meth:`finish` at the end for the last, unterminated line."""

    def __init__(self, redactor: Redactor | None = None) -> None:
        self._redactor = redactor or DEFAULT
        self._pending = b""
        self._in_key = False

    def feed(self, chunk: bytes) -> bytes:
        """The redacted bytes of the lines ``chunk`` completes (``b""`` when none)."""
        if not chunk:
            return b""
        data = self._pending + chunk
        cut = data.rfind(b"\n")
        if cut < 0:
            if len(data) <= MAX_PENDING_LINE:
                self._pending = data
                return b""
            cut = len(data) - 1
        self._pending = data[cut + 1 :]
        return self._lines(data[: cut + 1])

    def finish(self) -> bytes:
        """What is still pending, redacted."""
        data, self._pending = self._pending, b""
        return self._lines(data, final=True) if data else b""

    def _lines(self, data: bytes, *, final: bool = False) -> bytes:
        out = b""
        if self._in_key:  # the BEGIN line came in an earlier chunk, the mark is out already
            at, state = _skip_key_lines(data, 0, final=final)
            if state != "ended":
                self._pending = data[at:] + self._pending  # an undecided last line waits
                return b""
            self._in_key = False
            out, data = (b"" if data.startswith(b"-----", at - 5) else b"\n"), data[at:]
        begins = list(_PEM_BEGIN_RE.finditer(data))
        if begins and _PEM_END_RE.search(data, begins[-1].end()) is None:
            begin = begins[-1]
            line_end = data.find(b"\n", begin.end())
            after = len(data) if line_end < 0 else line_end + 1
            at, state = _skip_key_lines(data, after, final=final)
            if state != "ended":  # the key goes on in the next chunk: mask from its BEGIN on
                self._in_key = True
                self._pending = data[at:] + self._pending
                return out + self._redactor.redact_bytes(data[: begin.start()]) + _MARK
        return out + self._redactor.redact_bytes(data)


_KEY_HEADER_LINE = lazy_compile(_PEM_PREFIX + rb"[ \t]*(?:Proc-Type|DEK-Info):[^\r\n]*")


def _skip_key_lines(data: bytes, at: int, *, final: bool = False) -> tuple[int, str]:
    """Past the key body lines from ``at`` (a line start): ``(where, "ended")`` at the END
    marker's end or at the start of a line that is no key's; ``(len, "open")`` when the data
    ends inside the key; ``(where, "undecided")`` when its last line is a short run that is the
    key's last line only if the END line follows (not known yet; ``final``: it does not)."""
    while at < len(data):
        newline = data.find(b"\n", at)
        line_end = len(data) if newline < 0 else newline
        marker = _PEM_END_RE.search(data, at, line_end)
        if marker is not None and _PREFIX_ONLY.fullmatch(data, at, marker.start()):
            return marker.end(), "ended"
        body = _KEY_BODY_LINE.fullmatch(data, at, line_end)
        if body is not None and len(body.group("run")) < 16:
            following = newline + 1 if 0 <= newline < len(data) - 1 else -1
            if following < 0:
                return (at, "ended") if final else (at, "undecided")
            next_end = data.find(b"\n", following)
            marker = _PEM_END_RE.search(data, following, len(data) if next_end < 0 else next_end)
            if marker is None or not _PREFIX_ONLY.fullmatch(data, following, marker.start()):
                body = None
        blank = not data[at:line_end].strip()
        if not (blank or body is not None or _KEY_HEADER_LINE.fullmatch(data, at, line_end)):
            return at, "ended"
        if newline < 0:
            break
        at = newline + 1
    return len(data), "open"


#: The redactor of this process: the recognised shapes and the withheld variables' values.
DEFAULT = Redactor()


def redact(text: str) -> str:
    """``text`` with every secret replaced by ``[REDACTED]``: the shapes of gitleaks' and
    detect-secrets' rule sets (keys, tokens, credentials in headers, URLs and assignments) and
    the values of the variables in ``withhold_env``. Idempotent; never raises."""
    return DEFAULT.redact(text)


def redact_data(data: Any, *, by_name: bool = False, mark: str = MARK) -> Any:
    """:meth:`Redactor.redact_data` with the process's redactor."""
    return DEFAULT.redact_data(data, by_name=by_name, mark=mark)


def redact_lines(lines: Sequence[str]) -> list[str]:
    return [DEFAULT.redact(line) for line in lines]


__all__ = [
    "DEFAULT",
    "MARK",
    "MAX_PENDING_LINE",
    "Redactor",
    "StreamRedactor",
    "redact",
    "redact_data",
    "redact_lines",
]
