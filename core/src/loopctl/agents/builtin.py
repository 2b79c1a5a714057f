"""loopctl's own agent adapters, each registered as its own default plugin.

``loopctl plugins list`` shows each one (origin ``builtin``), and ``plugins.disable = ["aider"]``
removes one adapter without touching the others. An adapter's module is imported only when
its ``register_agents`` hook is called, so listing plugins imports none of them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from loopctl.markers import hookimpl

if TYPE_CHECKING:  # annotation only: listing plugins must not import the adapter machinery
    from loopctl.agents.base import AgentAdapter

#: Plugin name → ``module:class`` of the adapter it registers.
BUILTIN_ADAPTERS = {
    "claude": "loopctl.agents.claude:ClaudeAgent",
    "codex": "loopctl.agents.codex:CodexAgent",
    "gemini": "loopctl.agents.gemini:GeminiAgent",
    "aider": "loopctl.agents.aider:AiderAgent",
    "command": "loopctl.agents.command:CommandAgent",
    "scripted": "loopctl.agents.scripted:ScriptedAgent",
}


class AdapterPlugin:
    """The plugin of one built-in adapter: it registers that adapter and nothing else."""

    def __init__(self, target: str) -> None:
        #: ``module:class`` of the adapter.
        self.target = target

    @hookimpl(trylast=True)
    def register_agents(self) -> list[type[AgentAdapter]]:
        module_name, _, class_name = self.target.partition(":")
        adapter: type[AgentAdapter] = getattr(importlib.import_module(module_name), class_name)
        return [adapter]

    def __repr__(self) -> str:
        return f"AdapterPlugin({self.target!r})"
