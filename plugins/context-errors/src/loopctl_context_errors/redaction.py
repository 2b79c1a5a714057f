"""Remove secrets from log text before it reaches a report, an event or the failure memory.

Test output leaks credentials more often than one would hope: a failing HTTP test prints its
request headers, a connection error prints the URL with its password, a config dump prints an
API key. Everything this plugin writes passes through :func:`redact` first, so a secret in a log
never lands in a GitHub comment, in ``events.jsonl`` or in the memory shared across projects.

What is recognised: private-key blocks, ``Authorization:`` header values, passwords in URLs,
``password=``/``token:``/``api_key=``-style assignments, bearer tokens, and the fixed shapes of
common tokens (Anthropic/OpenAI ``sk-…``, GitHub ``ghp_…``/``github_pat_…``, GitLab
``glpat-…``, Slack ``xox…-``, AWS ``AKIA…``, Google ``AIza…``, npm ``npm_…``, Stripe, JWTs).
Each is replaced by ``[REDACTED]`` and the rest of the line is kept, so the error stays readable.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

MARK = "[REDACTED]"

_PRIVATE_KEY = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# A line of nothing but base64 that is long and mixed-case: a key body cut from its BEGIN line.
_BASE64_LINE = re.compile(
    r"^(?=[^\n]*[a-z])(?=[^\n]*[A-Z])(?=[^\n]*\d)[A-Za-z0-9+/]{60,}={0,2}[ \t]*$", re.MULTILINE
)
_AUTH_HEADER = re.compile(
    r"(?i)(\b(?:proxy-)?authorization\b[\"']?\s*[:=]\s*[\"']?)"
    r"(?:(bearer|basic|token|digest|negotiate|ntlm|aws4-hmac-sha256|apikey)\s+)?"
    r"([^\"'\r\n]+)"
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^\s:/@\"'<>]*):([^\s@/\"'<>]+)@")
_URL_TOKEN = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([A-Za-z0-9_\-.~]{20,})@")
_SECRET_KEY_WORDS = (
    r"password|passwd|passphrase|pwd|secret|api[_-]?key|apikey|access[_-]?key|private[_-]?key"
    r"|client[_-]?secret|auth[_-]?token|access[_-]?token|refresh[_-]?token|session[_-]?token"
    r"|secret[_-]?key|credentials?"
)
_STRONG_ASSIGNMENT = re.compile(
    r"(?i)(\b[\w.-]*(?:" + _SECRET_KEY_WORDS + r")[\w.-]*[\"']?\s*(?:=|:|=>)\s*[\"']?)"
    r"([^\s\"'&,;<>]{3,})"
)
_FLAG_ASSIGNMENT = re.compile(
    r"(?i)((?<![\w-])--?[\w-]*(?:password|passwd|token|secret|api-key|apikey)[\w-]*[ =])"
    r"([^\s\"'&,;<>-][^\s\"'&,;<>]{2,})"
)
# "token"/"auth"/"key" alone are common words in error messages ("unexpected token: ')'"):
# only a long value with a digit counts as a secret there.
_WEAK_ASSIGNMENT = re.compile(
    r"(?i)(\b[\w.-]*(?:token|auth|key)[\"']?\s*(?:=|:)\s*[\"']?)"
    r"(?=[^\s\"'&,;<>]*\d)([A-Za-z0-9_\-./+=]{16,})"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]{12,})")
_TOKEN_SHAPES = re.compile(
    r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{30,}"
    r"|\bglpat-[A-Za-z0-9_-]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"
    r"|\bAIza[0-9A-Za-z_-]{35}"
    r"|\bnpm_[A-Za-z0-9]{36}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|hooks\.slack\.com/services/[A-Za-z0-9/]+"
)


def _keep_first(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MARK}"


def _auth(match: re.Match[str]) -> str:
    scheme = f"{match.group(2)} " if match.group(2) else ""
    return f"{match.group(1)}{scheme}{MARK}"


def _url_password(match: re.Match[str]) -> str:
    return f"{match.group(1)}{match.group(2)}:{MARK}@"


_SHAPE_HINTS = (
    "sk-",
    "sk_",
    "pk_",
    "rk_",
    "gh",
    "github_pat",
    "glpat",
    "xox",
    "akia",
    "asia",
    "aiza",
    "npm_",
    "eyj",
    "slack",
)
_KEY_WORDS = ("pass", "pwd", "secret", "key", "token", "auth", "credential")
_Replacement = Callable[[re.Match[str]], str]


def _url_token(match: re.Match[str]) -> str:
    return f"{match.group(1)}{MARK}@"


def _whole(_match: re.Match[str]) -> str:
    return MARK


#: (hints, pattern, replacement): a pattern only runs on a line holding one of its hints.
_LINE_RULES: tuple[tuple[tuple[str, ...], re.Pattern[str], _Replacement], ...] = (
    (("authorization",), _AUTH_HEADER, _auth),
    (("://",), _URL_PASSWORD, _url_password),
    (("://",), _URL_TOKEN, _url_token),
    (_SHAPE_HINTS, _TOKEN_SHAPES, _whole),
    (("bearer",), _BEARER, _keep_first),
    (_KEY_WORDS, _STRONG_ASSIGNMENT, _keep_first),
    (("pass", "token", "secret", "key"), _FLAG_ASSIGNMENT, _keep_first),
    (("token", "auth", "key"), _WEAK_ASSIGNMENT, _keep_first),
)

#: Every hint at once: most texts hold none, and one search at C speed says so.
_ANY_HINT = re.compile("|".join(re.escape(hint) for rule in _LINE_RULES for hint in rule[0]))


def _redact_line(
    line: str, rules: Sequence[tuple[tuple[str, ...], re.Pattern[str], _Replacement]]
) -> str:
    if rules:
        lowered = line.lower()
        for hints, pattern, replacement in rules:
            if any(hint in lowered for hint in hints):
                line = pattern.sub(replacement, line)
                lowered = line.lower()
    if len(line) >= 60 and " " not in line.strip():
        line = _BASE64_LINE.sub(MARK, line)
    return line


def redact(text: str) -> str:
    """``text`` with every recognised secret replaced by ``[REDACTED]``. Never raises.

    Each pattern runs only on the lines that hold one of its cheap hints, and only when the
    text holds one at all (a log excerpt is mostly lines without any), so redacting a report
    costs a few milliseconds.
    """
    if not isinstance(text, str) or not text:
        return text if isinstance(text, str) else ""
    try:
        lowered = text.lower()
        if "-----begin" in lowered:
            text = _PRIVATE_KEY.sub(MARK, text)
        rules = (
            [rule for rule in _LINE_RULES if any(hint in lowered for hint in rule[0])]
            if _ANY_HINT.search(lowered)
            else []
        )
        if not rules and len(text) < 60:
            return text
        return "\n".join(_redact_line(line, rules) for line in text.split("\n"))
    except Exception:  # noqa: BLE001 - redaction failing must not leak: drop the text instead
        return MARK


def redact_lines(lines: list[str]) -> list[str]:
    return [redact(line) for line in lines]


__all__ = ["MARK", "redact", "redact_lines"]
