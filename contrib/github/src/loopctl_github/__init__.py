"""loopctl-github: the context-error report as one GitHub issue or pull request comment, updated
in place as the loop goes on, and marked resolved when the tests pass.

Kept tiny: ``loopctl plugins list`` imports the plugin module, and with it this package. The
names of the events it writes are published here (``POSTED``, ``FAILED``, ``DISABLED``,
``EVENT_TYPES``, ``PREFIX``): match on them, never on copies of the strings.
"""

from __future__ import annotations

from loopctl_github.events import DISABLED, EVENT_TYPES, FAILED, POSTED, PREFIX

__version__ = "0.2.0"

__all__ = ["DISABLED", "EVENT_TYPES", "FAILED", "POSTED", "PREFIX", "__version__"]
