"""loopctl-github: the context-error report as one GitHub issue or pull request comment, updated
in place as the loop goes on, and marked resolved when the tests pass.

Kept tiny: ``loopctl plugins list`` imports the plugin module, and with it this package.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
