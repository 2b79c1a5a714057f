"""Numbers for people: one formatting for the console, ``progress.md``, ``report.md`` and
``loopctl status``, so the same count never reads ``75000`` in one place and ``75,000`` or
``75.0k`` in another; and "unknown" where a number was never reported (a ``command`` agent's
tokens), never ``0``.

JSON keeps numbers as numbers (and unknown as ``null``); only text for people comes from here.
"""

from __future__ import annotations

import math
from typing import Any

#: What a count that was never reported reads as.
UNKNOWN = "unknown"


def finite(value: Any) -> float | None:
    """``value`` as a finite number; None for anything else (text, a bool, NaN, a huge int)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def count(value: Any, default: str = "?") -> str:
    """A count with thousands separators (``75,000``; ``1,234.50`` for a fraction);
    ``default`` for what is not a finite number. Astronomical values stay short (``1.2e+18``)."""
    number = finite(value)
    if number is None:
        return default
    if abs(number) >= 1e15:
        return f"{number:.3g}"
    return f"{number:,.0f}" if number == int(number) else f"{number:,.2f}"


def tokens(value: Any) -> str:
    """A token count, or ``unknown`` when it was never reported (None)."""
    return UNKNOWN if value is None else count(value)
