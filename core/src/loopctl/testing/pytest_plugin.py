"""loopctl's pytest fixtures (``loopctl_project``, ``run_loop``), under the module name they had
in 0.2. They are defined in :mod:`loopctl.pytest_plugin`, the ``pytest11`` entry point, which
pytest loads by itself wherever loopctl is installed; naming this module in ``-p`` or
``pytest_plugins`` is not needed."""

from __future__ import annotations

from loopctl.pytest_plugin import loopctl_project, run_loop

__all__ = ["loopctl_project", "run_loop"]
