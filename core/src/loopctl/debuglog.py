"""Debug output through the standard library's :mod:`logging`, free until ``-v`` asks for it.

``loopctl -v COMMAND`` shows the debug records of loopctl (loggers ``loopctl`` and
``loopctl.*``) and of plugins (loggers of modules named ``loopctl_*``: a plugin's
``logging.getLogger(__name__)``) on stderr; ``-vv`` shows every library's too. Without ``-v``
nothing is configured and nothing is printed. :func:`debug` does not import :mod:`logging`
(about 5 ms at start-up): when no module has imported it, nobody can be listening.
"""

from __future__ import annotations

import sys
from typing import Any


def debug(logger: str, message: str, *args: Any) -> None:
    """``logging.getLogger(logger).debug(message, *args)``, if :mod:`logging` is in use."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger(logger).debug(message, *args)


def is_ours(name: str) -> bool:
    """Whether logger ``name`` is loopctl's or a plugin's (module ``loopctl_*``)."""
    return name == "loopctl" or name.startswith(("loopctl.", "loopctl_"))
