"""The one sanitiser for text that reaches a terminal or a Markdown file.

Text from outside (an agent's stderr and final message, test output, a goal, a plugin's note)
can carry terminal control: an OSC 52 sequence writes the user's clipboard, OSC 0/2 sets the
window title, ``ESC[2J`` clears the screen, the C1 control U+009B is a one-character CSI, a
carriage return or a backspace lets a line overwrite itself. :func:`sanitize` removes all of it:

* escape sequences whole: CSI (``ESC [`` or U+009B, parameters, final byte), OSC (``ESC ]`` or
  U+009D, up to BEL or ST), DCS, SOS, PM and APC (up to ST), and every other ``ESC`` sequence;
* the C0 controls except tab and newline (so also CR, BS, BEL, NUL), DEL, and the C1 controls
  U+0080–U+009F.

Every print path uses it: the views, ``loopctl status``, the run's final summary, errors and
warnings, ``report.md`` and the other Markdown files, ``loopctl classify`` and ``loopctl
errors``. JSON output keeps text exact instead: every control character in it is written as a
``\\u`` escape (:func:`json_for_terminal`), which a terminal shows as text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from loopctl.lazyre import lazy_compile

#: An escape sequence, in its 7-bit (ESC …) or 8-bit (C1) form, removed whole.
_SEQUENCE = lazy_compile(
    # CSI: ESC [ or U+009B, parameter and intermediate bytes, the final byte
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    # OSC, DCS, SOS, PM, APC: a string up to BEL or ST (ESC \ or U+009C), or to the line's end
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"
    # every other escape sequence (ESC, intermediate bytes, final byte), or a lone ESC
    r"|\x1b[ -/]*[0-~]?"
)
#: Control characters left after the sequences: C0 but tab and newline, DEL, C1.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]+")
_NOT_PRINTABLE_RUN = lazy_compile("[\x7f-\x9f\u2028\u2029]+")


def sanitize(text: str) -> str:
    """``text`` without terminal control: escape sequences removed whole, then every control
    character but tab and newline (CR, BS, BEL, DEL, C1 …). Idempotent; text without control
    characters is returned as it is."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


def sanitize_line(text: str) -> str:
    """:func:`sanitize`, and tabs and newlines made spaces: one line of text."""
    return " ".join(sanitize(text).split())


def _escape(match: re.Match[str]) -> str:
    return "".join(f"\\u{ord(char):04x}" for char in match.group())


def json_for_terminal(data: Any, **dumps_kwargs: Any) -> str:
    """``json.dumps(data, ensure_ascii=False)``, with the controls JSON leaves raw (DEL, C1,
    U+2028/U+2029) written as ``\\u`` escapes too: the same JSON, safe to print."""
    text = json.dumps(data, ensure_ascii=False, **dumps_kwargs)
    return _NOT_PRINTABLE_RUN.sub(_escape, text)


__all__ = ["json_for_terminal", "sanitize", "sanitize_line"]
