"""Fingerprints of error output that stay the same when only the noise changes.

Two runs of a failing test print the same error with different timestamps, temporary
directories, object addresses, durations and line numbers. Stuck detection (and the error
memory) must see those as the same error, so each line is normalised before it is hashed:
volatile parts become placeholders (``<TIME>``, ``<HEX>``, ``<HOST>``, ``<PATH>``, ``<N>``)
while the words of the message and the file names stay, so different errors still differ.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hashlib import sha1 as _sha1
else:
    try:  # CPython's own sha1: the same digest as hashlib's, without loading OpenSSL (about 3 ms
        # of a command's start-up, `loopctl classify` among them)
        from _sha1 import sha1 as _sha1
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import sha1 as _sha1

_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"

# Each pattern is compiled once; they are applied in this order. Every placeholder ends in ">",
# and the patterns refuse to start right after one, so normalising twice changes nothing.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")
_TIMES = (
    # ISO 8601 / RFC 3339 dates and date-times: 2024-05-01, 2024-05-01T12:03:04.5+02:00
    re.compile(
        r"(?<![\w.])\d{4}-\d{2}-\d{2}"
        r"(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}|(?![\w.]))?)?(?![\w.])"
    ),
    # RFC 2822: Tue, 01 May 2024 12:03:04 +0000
    re.compile(
        rf"\b{_DAY},?\s+\d{{1,2}}\s+{_MONTH}\s+\d{{4}}\s+\d{{1,2}}:\d{{2}}(?::\d{{2}})?"
        r"(?:\s+(?:[+-]\d{4}|GMT|UTC)\b)?"
    ),
    # ctime / syslog: Tue May  1 12:03:04 2024, May  1 12:03:04
    re.compile(
        rf"\b(?:{_DAY}\s+)?{_MONTH}\s+\d{{1,2}}\s+\d{{1,2}}:\d{{2}}:\d{{2}}(?:\s+\d{{4}})?(?!\w)"
    ),
    # clock times: 12:03:04, 12:03:04.123
    re.compile(r"(?<![\w.:])\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?(?![\w:])"),
)
_UUID = re.compile(
    r"(?<![\w-])[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}(?![\w-])"
)
_HEX_LITERAL = re.compile(r"(?<![\w.])0[xX][0-9a-fA-F]+(?!\w)")
_URL_HOST = re.compile(
    r"\b([a-zA-Z][a-zA-Z0-9+.-]*://)(?:[^\s/@<>]+@)?([^\s/:?#<>\[\]]+|\[[^\s\]]*\])"
)
_IPV4 = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w.]*\w)")
_NAMED_HOST = re.compile(
    r"\[::1\]|(?<![\w:])::1(?![\w:])|\blocalhost\b"
    r"|(?<![\w.-])(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+"
    r"(?:com|org|net|edu|gov|internal|localdomain)(?![\w-])"
)
_SEGMENT = r"[\w.~+@-]+"
_WINDOWS_NAME = r"[^\s\\/:*?\"'<>|(),=\[\]]+"
# A drive letter only counts after a separator, never inside something else's name.
_WINDOWS_PATH = re.compile(
    rf"(?<![^\s:*?\"'|(),=\[\]])[A-Za-z]:[\\/](?:{_WINDOWS_NAME}[\\/])*({_WINDOWS_NAME})"
)
_POSIX_PATH = re.compile(
    rf"(?<![\w.~+@<>/\\-])(?:(?:/|~/)(?:{_SEGMENT}/)*|(?:{_SEGMENT}/)+)({_SEGMENT})"
)
_LONG_HEX = re.compile(r"(?<![\w.])(?=[0-9a-fA-F]*[a-fA-F])(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{7,}(?!\w)")
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)*(?:[eE][-+]?\d+)?(?:[a-zA-Zµ%]{1,3})?(?!\w)")
_WHITESPACE = re.compile(r"\s+")


def _mask_path(match: re.Match[str]) -> str:
    return f"<PATH>/{match.group(1)}"


def _mask_url(match: re.Match[str]) -> str:
    return f"{match.group(1)}<HOST>"


def _normalize_once(line: str) -> str:
    text = _ANSI.sub("", line).replace("\x1b", "")
    # Paths first: a directory may hold a date, an address or a hash, and all of it must go.
    text = _WINDOWS_PATH.sub(_mask_path, text)
    text = _POSIX_PATH.sub(_mask_path, text)
    for pattern in _TIMES:
        text = pattern.sub("<TIME>", text)
    text = _UUID.sub("<HEX>", text)
    text = _HEX_LITERAL.sub("<HEX>", text)
    text = _URL_HOST.sub(_mask_url, text)
    text = _IPV4.sub("<HOST>", text)
    text = _NAMED_HOST.sub("<HOST>", text)
    text = _LONG_HEX.sub("<HEX>", text)
    text = _NUMBER.sub("<N>", text)
    return _WHITESPACE.sub(" ", text).strip()


def normalize_line(line: str) -> str:
    """Mask the volatile parts of one output line so the same error compares equal across runs.

    Timestamps become ``<TIME>``, addresses, uuids and hashes ``<HEX>``, IPs and host names
    ``<HOST>``, the directory part of a path ``<PATH>`` (the file name stays, so different
    files still differ), other numbers ``<N>``; whitespace runs collapse to one space.
    Never raises; ``normalize_line(normalize_line(x)) == normalize_line(x)``.
    """
    return _normalized(line)


@functools.lru_cache(maxsize=1024)
def _normalized(line: str) -> str:
    """Cached: one failure's lines are normalised by the fingerprint, the stuck check and the
    plugins (about 40 µs a line)."""
    text = _normalize_once(line)
    # One pass is a fixpoint for ordinary text; the loop guards odd inputs where a mask
    # brings two fragments together into something another pattern recognises.
    for _ in range(3):
        again = _normalize_once(text)
        if again == text:
            break
        text = again
    return text


def fingerprint(lines: Iterable[str]) -> str:
    """A short stable hash (16 hex digits of sha1) of the normalised, deduplicated lines, in order.

    Returns "" when there is nothing to fingerprint (no lines, or only blank ones).
    """
    seen: set[str] = set()
    parts: list[str] = []
    for line in lines:
        normalized = normalize_line(line)
        if normalized and normalized not in seen:
            seen.add(normalized)
            parts.append(normalized)
    if not parts:
        return ""
    digest = _sha1("\n".join(parts).encode("utf-8", "surrogatepass"), usedforsecurity=False)
    return digest.hexdigest()[:16]


__all__ = ["fingerprint", "normalize_line"]
