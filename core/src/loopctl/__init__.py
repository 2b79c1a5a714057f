"""loopctl: run a coding agent in a loop until the goal is met, and keep the loop healthy.

The names plugins need are importable from here: ``hookimpl`` (the marker), ``Loop``,
``Decision``, ``PromptSection`` and the rest of :mod:`loopctl.model`. They are loaded on first
use, so ``loopctl --version`` imports nothing but this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl._version import __version__

if TYPE_CHECKING:
    from loopctl.agents.base import AgentAdapter, AgentSettings, StreamParser, TurnRequest
    from loopctl.config import InvalidFields
    from loopctl.engine import Loop, LoopOutcome, Restart
    from loopctl.fingerprint import normalize_line
    from loopctl.hookspecs import hookimpl
    from loopctl.model import (
        AgentMessage,
        Decision,
        ErrorKind,
        Event,
        IterationRecord,
        MessageKind,
        PromptSection,
        RunOption,
        TestRun,
        ToolCall,
        TurnOutcome,
        TurnResult,
        Usage,
    )
    from loopctl.scan import ScanMatch, Scanner, ScanRule, strip_ansi
    from loopctl.testoutput import ParsedTestOutput, parse_test_output

_LAZY = {
    "hookimpl": "loopctl.hookspecs",
    "Loop": "loopctl.engine",
    "LoopOutcome": "loopctl.engine",
    "Restart": "loopctl.engine",
    "AgentAdapter": "loopctl.agents.base",
    "AgentSettings": "loopctl.agents.base",
    "StreamParser": "loopctl.agents.base",
    "TurnRequest": "loopctl.agents.base",
    "InvalidFields": "loopctl.config",
    "ScanMatch": "loopctl.scan",
    "ScanRule": "loopctl.scan",
    "Scanner": "loopctl.scan",
    "strip_ansi": "loopctl.scan",
    "ParsedTestOutput": "loopctl.testoutput",
    "parse_test_output": "loopctl.testoutput",
    "normalize_line": "loopctl.fingerprint",
    **{
        name: "loopctl.model"
        for name in (
            "AgentMessage",
            "Decision",
            "ErrorKind",
            "Event",
            "IterationRecord",
            "MessageKind",
            "PromptSection",
            "RunOption",
            "TestRun",
            "ToolCall",
            "TurnOutcome",
            "TurnResult",
            "Usage",
        )
    },
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'loopctl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


__all__ = [
    "AgentAdapter",
    "AgentMessage",
    "AgentSettings",
    "Decision",
    "ErrorKind",
    "Event",
    "InvalidFields",
    "IterationRecord",
    "Loop",
    "LoopOutcome",
    "MessageKind",
    "ParsedTestOutput",
    "PromptSection",
    "Restart",
    "RunOption",
    "ScanMatch",
    "ScanRule",
    "Scanner",
    "StreamParser",
    "TestRun",
    "ToolCall",
    "TurnOutcome",
    "TurnRequest",
    "TurnResult",
    "Usage",
    "__version__",
    "hookimpl",
    "normalize_line",
    "parse_test_output",
    "strip_ansi",
]
