"""Export failures: noted on the exporters' threads, reported once by the loop thread.

Two sources feed a :class:`FailureLog`: the exporters themselves (a failed export, and the
warnings they log while retrying, which say that an export is failing long before its retries
give up) and the HTTP session the OTLP exporters post with, which sees the actual cause (the
connection was refused, HTTP 401). The report names the cause when it is known.
"""

from __future__ import annotations

import re
import threading

#: ``[Errno 111] Connection refused`` and the like, inside requests' and urllib3's messages.
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"()\]\[]{1,120})")
_HINTS = {
    "connection refused": "is an OTLP collector listening there?",
    "name or service not known": "check the host name in the endpoint",
    "temporary failure in name resolution": "check the host name in the endpoint",
    "timed out": "is the endpoint reachable from here?",
}


def describe_error(text: str) -> str:
    """A short, plain reason from an exception's or a log line's text (never raises)."""
    flat = " ".join(str(text).split())
    match = _ERRNO.search(flat)
    if match:
        reason = match.group(1).strip().rstrip(".").lower()
    elif re.search(r"timed out|read timeout|connect timeout", flat, re.IGNORECASE):
        reason = "timed out"
    else:
        return flat[:300] or "unknown error"
    hint = next((h for key, h in _HINTS.items() if key in reason), "")
    return f"{reason} ({hint})" if hint else reason


def describe_exception(exc: BaseException) -> str:
    """What went wrong with a request, in a few words."""
    name = type(exc).__name__
    if "Timeout" in name:
        return describe_error("timed out")
    text = describe_error(str(exc))
    return text if text != "unknown error" else name


def is_decisive(text: str) -> bool:
    """A described cause no retry can fix: nothing listens there, the name does not resolve,
    or the collector refused the request itself (HTTP 4xx other than 408 and 429)."""
    if text.startswith(("connection refused", "name or service not known")):
        return True
    if text.startswith("temporary failure in name resolution"):
        return True
    parts = text.split()
    return (
        len(parts) > 1
        and parts[0] == "HTTP"
        and parts[1].isdigit()
        and 400 <= int(parts[1]) < 500
        and int(parts[1]) not in (408, 429)
    )


def describe_status(code: int, reason: str | None) -> str:
    words = f"HTTP {code} {reason or ''}".strip()
    if code in (401, 403):
        return f"{words} (check the headers, e.g. an API key)"
    if code == 404:
        return f"{words} (does the collector take this signal there? the endpoint is the base URL)"
    return words


class FailureLog:
    """Export problems seen on the exporters' threads, for the loop thread to report."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._messages: dict[str, str] = {}
        self._causes: dict[str, str] = {}
        self._failed: list[str] = []
        self._count = 0
        self._counts: dict[str, int] = {}
        self._decisive: dict[str, int] = {}
        #: Set whenever a failure is noted (the end of the loop waits on it).
        self.wake = threading.Event()

    @property
    def count(self) -> int:
        """How many failures were noted so far (each failed export, each retry warning)."""
        return self._count

    def count_of(self, signal: str) -> int:
        """How many failures of ``signal`` were noted so far, and decisive causes seen (a
        refused connection: no retry will do better; the end of the loop stops waiting)."""
        with self._lock:
            return self._counts.get(signal, 0) + self._decisive.get(signal, 0)

    def note(self, signal: str, message: str | None = None) -> None:
        """An export of ``signal`` failed (``message``: the exporter's words, if any)."""
        with self._lock:
            self._count += 1
            self._counts[signal] = self._counts.get(signal, 0) + 1
            if signal not in self._failed:
                self._failed.append(signal)
            if message and signal not in self._messages:
                self._messages[signal] = " ".join(message.split())[:500]
        self.wake.set()

    def cause(self, signal: str, text: str, *, decisive: bool = False) -> None:
        """What the HTTP layer saw go wrong for ``signal`` (kept, the latest wins). An export
        may still succeed on a retry, so this alone is not a failure; a ``decisive`` cause (no
        retry can help) ends the wait at the end of the loop early."""
        with self._lock:
            self._causes[signal] = text[:300]
            if decisive:
                self._decisive[signal] = self._decisive.get(signal, 0) + 1
        if decisive:
            self.wake.set()

    def snapshot(self) -> dict[str, str]:
        """Every signal that failed so far, in order, with the best reason known for it."""
        with self._lock:
            found = {}
            for signal in self._failed:
                cause = self._causes.get(signal)
                message = self._messages.get(signal)
                if cause:
                    found[signal] = cause
                elif message:
                    found[signal] = describe_error(message)
                else:
                    found[signal] = "the exporter reported a failure"
            return found
