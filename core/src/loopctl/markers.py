"""The hook markers, in a module of their own so that a plugin's ``from loopctl import
hookimpl`` imports nothing but pluggy: ``loopctl plugins list`` imports every enabled plugin."""

from __future__ import annotations

import pluggy

#: The project name shared by the spec and implementation markers and the entry-point group.
PROJECT_NAME = "loopctl"

#: Marks a hook specification (loopctl's own, or a plugin's in ``add_hookspecs``).
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Marks a plugin's hook implementation: ``@loopctl.hookimpl``.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)

__all__ = ["PROJECT_NAME", "hookimpl", "hookspec"]
