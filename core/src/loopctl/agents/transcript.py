"""Reading a recorded agent transcript back: ``loopctl agents parse AGENT FILE``.

:func:`parse_transcript` streams a transcript (an agent's raw stdout, as the supervisor saves it)
line by line through any adapter's parser, in bounded memory, and collects what a person needs
to answer "why did loopctl restart my agent?": the context fill after every model request
against the window, the tool calls, and how the turn ended. :func:`render_summary` turns that
into text, :func:`summary_to_json` into plain data.

The second half of the module holds small helpers the line-oriented adapters share: decoding a
JSON line without ever raising, reading token counts, classifying a CLI's error words, and
finding "try again in 20s" / "try again at 3:05 PM" in them.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import msgspec

from loopctl.agents.base import AgentAdapter
from loopctl.model import AgentMessage, ErrorKind, MessageKind, ToolCall, TurnResult, Usage

#: Lines longer than this are dropped (and counted) instead of being held in memory.
DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 1 << 16
_FINAL_TEXT_SHOWN = 2000


# --- the summary ---------------------------------------------------------------------------------


@attrs.define
class UsageRow:
    """One model request seen in a transcript."""

    index: int
    input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    output_tokens: int = 0
    #: Context fill after this request (main thread only; None for sub-agents or when unknown).
    context_tokens: int | None = None
    sidechain: bool = False


@attrs.define
class TranscriptSummary:
    """What one transcript says about its turn."""

    agent: str
    path: str
    lines: int = 0
    #: Lines that gave the parser nothing it could use (blank, unknown, invalid or oversized).
    skipped_lines: int = 0
    #: Non-empty lines that are not valid JSON (cut off, binary, prose in a JSON stream).
    invalid_lines: int = 0
    #: Lines longer than the size limit, dropped unread.
    oversized_lines: int = 0
    messages: int = 0
    session_id: str | None = None
    model: str | None = None
    rows: list[UsageRow] = attrs.Factory(list)
    context_window: int | None = None
    context_tokens: int | None = None
    tool_calls: list[ToolCall] = attrs.Factory(list)
    ok: bool = True
    error_kind: str | None = None
    message: str = ""
    retry_at: float | None = None
    cost_usd: float | None = None
    exit_code: int | None = None
    final_text: str = ""

    @property
    def fill_ratio(self) -> float | None:
        if self.context_tokens is None or not self.context_window:
            return None
        return self.context_tokens / self.context_window


def parse_transcript(
    adapter: AgentAdapter,
    path: Path,
    *,
    exit_code: int | None = 0,
    stderr: str = "",
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> TranscriptSummary:
    """Feed ``path`` through ``adapter``'s parser and summarise the turn.

    ``exit_code`` and ``stderr`` are what the agent process ended with, when known (a transcript
    holds stdout only; the default assumes a normal exit). Never raises for what the file holds;
    raises ``OSError`` when it cannot be read.
    """
    path = Path(path)
    parser = adapter.new_parser()
    summary = TranscriptSummary(agent=adapter.name, path=str(path), exit_code=exit_code)
    window: int | None = None
    with open(path, "rb") as handle:
        for line in _lines(handle, max_line_bytes, summary):
            summary.lines += 1
            try:
                messages = parser.feed(line) or []
            except Exception:  # noqa: BLE001 - a parser bug is counted, never raised
                messages = []
            if not messages:
                summary.skipped_lines += 1
                if line.strip() and not _is_json(line):
                    summary.invalid_lines += 1
            summary.messages += len(messages)
            for message in messages:
                window = _note_message(summary, message, window)
    try:
        result = parser.finish(exit_code, stderr)
    except Exception as exc:  # noqa: BLE001 - same as the supervisor: a result, not a crash
        result = TurnResult()
        result.outcome.error_kind = ErrorKind.INVALID_OUTPUT
        result.outcome.message = f"the {adapter.name} parser failed: {exc!r}"
    _note_result(summary, result, window)
    return summary


def _lines(handle: Any, limit: int, summary: TranscriptSummary) -> Iterator[bytes]:
    """Complete lines without their newline; lines over ``limit`` bytes are counted and dropped."""
    buffer = bytearray()
    dropping = False
    while True:
        chunk = handle.read(_READ_CHUNK)
        if not chunk:
            break
        buffer += chunk
        start = 0
        while True:
            newline = buffer.find(b"\n", start)
            if newline < 0:
                break
            if dropping:
                dropping = False
            else:
                yield bytes(buffer[start:newline])
            start = newline + 1
        del buffer[:start]
        if len(buffer) > limit:
            if not dropping:
                summary.oversized_lines += 1
                summary.lines += 1
                summary.skipped_lines += 1
            buffer.clear()
            dropping = True
    if buffer and not dropping:
        yield bytes(buffer)


def _is_json(line: bytes) -> bool:
    try:
        msgspec.json.decode(line)
    except Exception:  # noqa: BLE001
        return False
    return True


def _note_message(
    summary: TranscriptSummary, message: AgentMessage, window: int | None
) -> int | None:
    if message.context_window:
        window = message.context_window
    if message.session_id:
        summary.session_id = message.session_id
    if message.model:
        summary.model = message.model
    if message.kind is MessageKind.USAGE and message.usage is not None:
        usage = message.usage
        summary.rows.append(
            UsageRow(
                index=len(summary.rows) + 1,
                input_tokens=usage.input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                output_tokens=usage.output_tokens,
                context_tokens=None if message.sidechain else usage.context_tokens,
                sidechain=message.sidechain,
            )
        )
    return window


def _note_result(summary: TranscriptSummary, result: TurnResult, window: int | None) -> None:
    if not any(not row.sidechain for row in summary.rows) and result.requests:
        # the adapter only knew the turn's totals (or learned the rows at the end)
        last, first = len(result.requests), len(summary.rows)
        summary.rows += [
            UsageRow(
                index=first + index,
                input_tokens=usage.input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                output_tokens=usage.output_tokens,
                context_tokens=result.context_tokens if index == last else None,
            )
            for index, usage in enumerate(result.requests, 1)
        ]
    summary.session_id = result.session_id or summary.session_id
    summary.model = result.model or summary.model
    summary.context_window = result.context_window or window
    summary.context_tokens = result.context_tokens
    summary.tool_calls = list(result.tool_calls)
    outcome = result.outcome
    summary.ok = outcome.error_kind is None
    summary.error_kind = None if outcome.error_kind is None else outcome.error_kind.value
    summary.message = outcome.message
    summary.retry_at = outcome.retry_at
    summary.cost_usd = result.cost_usd
    summary.final_text = result.final_text


def summary_to_json(summary: TranscriptSummary) -> dict[str, Any]:
    """Plain data for ``--json``: every field, tool calls and rows as dicts."""
    data: dict[str, Any] = attrs.asdict(summary, recurse=True)
    data["fill_ratio"] = summary.fill_ratio
    data["final_text"] = summary.final_text[-_FINAL_TEXT_SHOWN:]
    return data


def render_summary(summary: TranscriptSummary) -> str:
    """Readable text: each request's context fill against the window, then how the turn ended."""
    window = summary.context_window
    lines = [f"{summary.agent} transcript {summary.path}"]
    if summary.session_id or summary.model:
        lines.append(f"  session {summary.session_id or '?'}, model {summary.model or '?'}")
    lines.append(
        f"  {summary.lines} line(s), {summary.messages} message(s); skipped {summary.skipped_lines}"
        f" (invalid {summary.invalid_lines}, oversized {summary.oversized_lines})"
    )
    lines.append(f"  context window: {_tokens(window) if window else 'unknown'}")
    lines.append("")
    if summary.rows:
        lines.append("  req   input  cached  c.write  output    context fill")
        for row in summary.rows:
            lines.append(
                f"  {row.index:>3} {row.input_tokens:>7} {row.cache_read_input_tokens:>7}"
                f" {row.cache_creation_input_tokens:>8} {row.output_tokens:>7}    "
                + _fill(row.context_tokens, window, row.sidechain)
            )
    else:
        lines.append("  no token usage reported")
    lines.append("")
    lines.append(f"  context fill at the end: {_fill(summary.context_tokens, window, False)}")
    lines.append(f"  tool calls: {len(summary.tool_calls)}" + _failed_calls(summary.tool_calls))
    if summary.cost_usd is not None:
        lines.append(f"  cost: ${summary.cost_usd:.4f}")
    lines.append("")
    lines.append("  outcome: " + _outcome(summary))
    return "\n".join(lines) + "\n"


def _tokens(count: int) -> str:
    return f"{count:,}"


def _fill(tokens: int | None, window: int | None, sidechain: bool) -> str:
    if sidechain:
        return "(sub-agent, not counted)"
    if tokens is None:
        return "unknown"
    if not window:
        return f"{_tokens(tokens)} tokens"
    ratio = tokens / window
    bar = "#" * min(20, round(ratio * 20))
    return f"{_tokens(tokens)} / {_tokens(window)} ({ratio:.0%}) [{bar:<20}]"


def _failed_calls(calls: list[ToolCall]) -> str:
    failed = sum(1 for call in calls if call.is_error)
    return f" ({failed} failed)" if failed else ""


def _outcome(summary: TranscriptSummary) -> str:
    if summary.ok:
        return "success" + (f": {summary.message}" if summary.message else "")
    text = f"{summary.error_kind}: {summary.message or '(no message)'}"
    if summary.retry_at is not None:
        when = _dt.datetime.fromtimestamp(summary.retry_at).isoformat(timespec="seconds")
        text += f"\n  retry after: {when}"
    if summary.error_kind == ErrorKind.CONTEXT_OVERFLOW.value:
        text += "\n  the agent ran out of context: loopctl restarts it with a fresh session"
    return text


# --- helpers shared by the line-oriented adapters ---------------------------------------------------


def decode_object(line: bytes) -> dict[str, Any] | None:
    """The JSON object on ``line``, or None for anything else (never raises)."""
    try:
        data = msgspec.json.decode(bytes(line))
    except Exception:  # noqa: BLE001 - DecodeError, RecursionError…: not a line we can use
        return None
    return data if isinstance(data, dict) else None


def text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def count(value: object) -> int:
    """A token count: a non-negative int (or integral float); anything else counts as 0."""
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value == value and 0 <= value < 1e15:
        return int(value)
    return 0


def usage_from_openai_counts(
    input_tokens: int, cached: int, cache_write: int, output_tokens: int
) -> Usage:
    """OpenAI-style counts (cached and cache-write tokens are part of ``input_tokens``)."""
    cached = min(cached, input_tokens)
    cache_write = min(cache_write, input_tokens - cached)
    return Usage(
        input_tokens=input_tokens - cached - cache_write,
        output_tokens=output_tokens,
        cache_creation_input_tokens=cache_write,
        cache_read_input_tokens=cached,
    )


def bounded_tail(parts: list[str], limit: int) -> str:
    return "\n".join(parts)[-limit:]


_AUTH = re.compile(
    r"\b401\b|\b403\b|unauthori[sz]ed|forbidden|invalid[_ ]api[_ ]key|incorrect api key|"
    r"api key not valid|authenticat|missing environment variable|not logged in|log ?in again|"
    r"please (?:re-?)?log ?in|permission_denied|unauthenticated|token (?:has )?expired|"
    r"refresh token|credentials",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"context window|context[_ ]length|maximum context|token limit|too many tokens|"
    r"prompt is too long|input token count .* exceeds|exceeds the maximum number of tokens|"
    r"ContextWindowExceeded",
    re.IGNORECASE,
)
_PLAN_LIMIT = re.compile(r"usage limit|daily quota|quota on this model", re.IGNORECASE)
_BILLING = re.compile(
    r"insufficient[_ ]quota|exceeded your current quota|billing|credit balance|"
    r"out of credits|spend cap|payment required|\b402\b",
    re.IGNORECASE,
)
_RATE = re.compile(
    r"rate[_ ]?limit|\b429\b|too many requests|resource[_ ]exhausted|quota", re.IGNORECASE
)
_NETWORK = re.compile(
    r"stream disconnected|error sending request|connection (?:failed|refused|reset|error)|"
    r"network|timed? ?out|dns|lookup address|\b50[0-4]\b|internal server error|"
    r"service unavailable|bad gateway|overloaded|high demand|temporar|econnre|socket hang up|"
    r"fetch failed|APIConnectionError|ServiceUnavailable|InternalServerError",
    re.IGNORECASE,
)


def classify_error_text(text: str) -> ErrorKind:
    """The error kind a CLI's error words describe, most specific first; UNKNOWN if none fits."""
    if _CONTEXT.search(text):
        return ErrorKind.CONTEXT_OVERFLOW
    if _PLAN_LIMIT.search(text):
        return ErrorKind.RATE_LIMIT
    if _BILLING.search(text):
        return ErrorKind.BILLING
    if _RATE.search(text):
        return ErrorKind.RATE_LIMIT
    if _AUTH.search(text):
        return ErrorKind.AUTH
    if _NETWORK.search(text):
        return ErrorKind.NETWORK
    return ErrorKind.UNKNOWN


_DELAY = re.compile(
    r"(?:try again|retry|retrying|reset[s]?|available again)\s+in\s+"
    r"((?:\d+(?:\.\d+)?\s*(?:ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|"
    r"d|days?)(?![a-z])[\s,]*(?:and\s+)?)+)",
    re.IGNORECASE,
)
_DELAY_PART = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]+)", re.IGNORECASE)
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_RETRY_DELAY_FIELD = re.compile(r'retryDelay\\?"\s*:\s*\\?"(\d+(?:\.\d+)?)s', re.IGNORECASE)
_AT_TIME = re.compile(
    r"try again at\s+(?:(?P<month>[A-Z][a-z]{2})\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?,\s+"
    r"(?P<year>\d{4})\s+)?(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<ampm>[AP]M)",
    re.IGNORECASE,
)
_MONTHS = {
    name: index
    for index, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}


def retry_at_from_text(text: str, now: Callable[[], float] = time.time) -> float | None:
    """When the words say to try again (epoch seconds), or None.

    Understands delays ("try again in 20s", "in 1m30.5s", "in 2 hours", a ``retryDelay`` of
    "2s") counted from ``now()``, and local clock times ("try again at 3:05 PM", "try again at
    Nov 22nd, 2026 12:44 AM"); a bare time already past today means tomorrow.
    """
    try:
        delay = _delay_seconds(text)
        if delay is not None:
            return now() + delay
        return _clock_time(text, now())
    except (ValueError, OverflowError, OSError):
        return None


def _delay_seconds(text: str) -> float | None:
    match = _DELAY.search(text)
    if match is not None:
        total = 0.0
        for number, unit in _DELAY_PART.findall(match.group(1)):
            key = unit.lower()
            key = "ms" if key.startswith("ms") or key.startswith("milli") else key[0]
            total += float(number) * _UNIT_SECONDS.get(key, 1.0)
        return total
    field = _RETRY_DELAY_FIELD.search(text)
    if field is not None:
        return float(field.group(1))
    return None


def _clock_time(text: str, now: float) -> float | None:
    match = _AT_TIME.search(text)
    if match is None:
        return None
    hour = int(match.group("hour")) % 12 + (12 if match.group("ampm").upper() == "PM" else 0)
    minute = int(match.group("minute"))
    today = _dt.datetime.fromtimestamp(now)
    if match.group("month"):
        month = _MONTHS.get(match.group("month").lower())
        if month is None:
            return None
        moment = _dt.datetime(
            int(match.group("year")), month, int(match.group("day")), hour, minute
        )
        return moment.timestamp()
    moment = today.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment.timestamp() < now - 60:
        moment += _dt.timedelta(days=1)
    return moment.timestamp()


def key_input_of(arguments: Mapping[str, Any], keys: tuple[str, ...], limit: int = 500) -> str:
    """The first string argument among ``keys``: the path, command or pattern naming a call."""
    for key in keys:
        value = arguments.get(key)
        if isinstance(value, str) and value:
            return value[:limit]
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)[:limit]
    return ""
