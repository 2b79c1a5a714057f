"""Keeping secrets out of sight: hidden in ``loopctl config show``, withheld from the agent."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any


def withheld_environment(patterns: Sequence[str]) -> dict[str, str]:
    """``os.environ`` without the variables whose names match one of ``patterns``
    (``withhold_env``): the environment the agent and the test command start from."""
    from fnmatch import fnmatchcase

    return {
        name: value
        for name, value in os.environ.items()
        if not any(fnmatchcase(name, pattern) for pattern in patterns)
    }


#: Setting names whose text values are secrets (an API key an agent's env table sets, say).
_SECRET_NAME = re.compile(r"(?i)token|secret|passw(or)?d|credential|api_?key|private_?key")
#: Shown instead of a secret by ``loopctl config show``.
HIDDEN = "<hidden>"


def hide_secrets(data: Any, name: str = "", in_env: bool = False) -> Any:
    """``data`` (from :func:`config_to_dict`) with secret-looking text values replaced by
    :data:`HIDDEN`, for printing: a value is hidden when its setting's name says it is a
    token, secret, password, credential or API key, or, in an ``env`` table, a key
    (``OPENAI_KEY``). ``*_env`` settings name a variable, they do not hold one."""
    if isinstance(data, dict):
        inside = in_env or name == "env"
        return {key: hide_secrets(value, str(key), inside) for key, value in data.items()}
    if isinstance(data, list):
        return [hide_secrets(item, name, in_env) for item in data]
    if not isinstance(data, str) or not data or name.lower().endswith("_env"):
        return data
    if _SECRET_NAME.search(name) or (in_env and re.search(r"(?i)key", name)):
        return HIDDEN
    return data
