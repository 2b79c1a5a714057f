"""Keeping secrets out of sight in ``loopctl config show``. (What the agent and every other
child process may not see is :mod:`loopctl.withhold`; the redactor is :mod:`loopctl.redaction`.)"""

from __future__ import annotations

from typing import Any

#: Shown instead of a setting whose name says it is a secret, by ``loopctl config show``.
HIDDEN = "<hidden>"


def hide_secrets(data: Any) -> Any:
    """``data`` (from :func:`config_to_dict`) ready to print: a text value whose setting's name
    says it is a token, secret, password, credential or API key, or, in an ``env`` table, a key
    (``OPENAI_KEY``), is :data:`HIDDEN`; any other text is redacted like everything loopctl
    prints (a token inside a command line). ``*_env`` settings name a variable, they do not
    hold one."""
    from loopctl.redaction import redact_data

    return redact_data(data, by_name=True, mark=HIDDEN)
