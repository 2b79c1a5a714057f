"""An example third-party classifier for loopctl-failure-classifier: the ``lint_failure`` mode."""

from __future__ import annotations

__version__ = "0.2.0"
