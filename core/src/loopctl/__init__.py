"""loopctl: run a coding agent in a loop until the goal is met, and keep the loop healthy.

This module is loopctl's public API: every name in ``__all__`` (``hookimpl``, ``Loop``,
``Decision``, ``PromptSection``, ``StashKey``, ``load_project`` …) is documented, tested and
versioned (docs/reference/loop.md says how). Everything in its submodules is private and may
change in any release; plugins import from ``loopctl`` (and ``loopctl.testing`` in their tests)
only. The names are loaded on first use, so ``loopctl --version`` imports nothing but this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl._version import __version__

if TYPE_CHECKING:
    from loopctl.agents.base import AgentAdapter, AgentSettings, StreamParser, TurnRequest
    from loopctl.clicommand import CliArgument, CliCommand, CliOption
    from loopctl.config import InvalidFields
    from loopctl.configfile import ConfigError
    from loopctl.events import EventField, define_event
    from loopctl.fingerprints import fingerprint, normalize_line
    from loopctl.lazyre import LazyPattern
    from loopctl.loop import Loop, LoopOutcome, ReportSection, Restart
    from loopctl.markers import hookimpl, hookspec
    from loopctl.model import (
        AgentMessage,
        CompletionVeto,
        Decision,
        ErrorKind,
        Event,
        IterationEnd,
        IterationRecord,
        MessageKind,
        NotAgentsFault,
        PromptSection,
        RunOption,
        StopStatus,
        TestRun,
        ToolCall,
        TurnOutcome,
        TurnResult,
        Usage,
    )
    from loopctl.procgroup import ending_descendants
    from loopctl.project import Project, SavedRun, check_settings, load_project
    from loopctl.redaction import Redactor, redact
    from loopctl.scan import ScanMatch, Scanner, ScanRule, strip_ansi
    from loopctl.stash import Stash, StashKey
    from loopctl.state import (
        JsonlAppender,
        LoopState,
        StateError,
        atomic_write_text,
        read_jsonl,
        tail_jsonl,
    )
    from loopctl.stuck import is_infrastructure_failure, made_progress, same_failure
    from loopctl.terminal import sanitize
    from loopctl.testbroken import BrokenTestCommand, agent_may_have_caused, broken_test_command
    from loopctl.testoutput import ParsedTestOutput, parse_test_output
    from loopctl.trust import UntrustedConfig
    from loopctl.withhold import child_environment
    from loopctl.workspace import Snapshot, Workspace

_LAZY = {
    "hookimpl": "loopctl.markers",
    "hookspec": "loopctl.markers",
    "Loop": "loopctl.loop",
    "LoopOutcome": "loopctl.loop",
    "Restart": "loopctl.loop",
    "ReportSection": "loopctl.loop",
    "Stash": "loopctl.stash",
    "ConfigError": "loopctl.configfile",
    "Project": "loopctl.project",
    "SavedRun": "loopctl.project",
    "load_project": "loopctl.project",
    "check_settings": "loopctl.project",
    "ending_descendants": "loopctl.procgroup",
    "JsonlAppender": "loopctl.state",
    "LoopState": "loopctl.state",
    "StateError": "loopctl.state",
    "atomic_write_text": "loopctl.state",
    "read_jsonl": "loopctl.state",
    "tail_jsonl": "loopctl.state",
    "is_infrastructure_failure": "loopctl.stuck",
    "made_progress": "loopctl.stuck",
    "same_failure": "loopctl.stuck",
    "BrokenTestCommand": "loopctl.testbroken",
    "agent_may_have_caused": "loopctl.testbroken",
    "broken_test_command": "loopctl.testbroken",
    "Snapshot": "loopctl.workspace",
    "Workspace": "loopctl.workspace",
    "StashKey": "loopctl.stash",
    "EventField": "loopctl.events",
    "define_event": "loopctl.events",
    "AgentAdapter": "loopctl.agents.base",
    "AgentSettings": "loopctl.agents.base",
    "StreamParser": "loopctl.agents.base",
    "TurnRequest": "loopctl.agents.base",
    "InvalidFields": "loopctl.config",
    "CliArgument": "loopctl.clicommand",
    "CliCommand": "loopctl.clicommand",
    "CliOption": "loopctl.clicommand",
    "LazyPattern": "loopctl.lazyre",
    "ScanMatch": "loopctl.scan",
    "ScanRule": "loopctl.scan",
    "Scanner": "loopctl.scan",
    "strip_ansi": "loopctl.scan",
    "ParsedTestOutput": "loopctl.testoutput",
    "parse_test_output": "loopctl.testoutput",
    "normalize_line": "loopctl.fingerprints",
    "fingerprint": "loopctl.fingerprints",
    "Redactor": "loopctl.redaction",
    "redact": "loopctl.redaction",
    "sanitize": "loopctl.terminal",
    "UntrustedConfig": "loopctl.trust",
    "child_environment": "loopctl.withhold",
    **{
        name: "loopctl.model"
        for name in (
            "AgentMessage",
            "CompletionVeto",
            "Decision",
            "ErrorKind",
            "Event",
            "IterationEnd",
            "IterationRecord",
            "MessageKind",
            "NotAgentsFault",
            "PromptSection",
            "RunOption",
            "StopStatus",
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
    "BrokenTestCommand",
    "CliArgument",
    "CliCommand",
    "CliOption",
    "CompletionVeto",
    "ConfigError",
    "Decision",
    "ErrorKind",
    "Event",
    "EventField",
    "InvalidFields",
    "IterationEnd",
    "IterationRecord",
    "JsonlAppender",
    "LazyPattern",
    "Loop",
    "LoopOutcome",
    "LoopState",
    "MessageKind",
    "NotAgentsFault",
    "ParsedTestOutput",
    "Project",
    "PromptSection",
    "Redactor",
    "ReportSection",
    "Restart",
    "RunOption",
    "SavedRun",
    "ScanMatch",
    "ScanRule",
    "Scanner",
    "Snapshot",
    "Stash",
    "StashKey",
    "StateError",
    "StopStatus",
    "StreamParser",
    "TestRun",
    "ToolCall",
    "TurnOutcome",
    "TurnRequest",
    "TurnResult",
    "UntrustedConfig",
    "Usage",
    "Workspace",
    "__version__",
    "agent_may_have_caused",
    "atomic_write_text",
    "broken_test_command",
    "check_settings",
    "child_environment",
    "define_event",
    "ending_descendants",
    "fingerprint",
    "hookimpl",
    "hookspec",
    "is_infrastructure_failure",
    "load_project",
    "made_progress",
    "normalize_line",
    "parse_test_output",
    "read_jsonl",
    "redact",
    "same_failure",
    "sanitize",
    "strip_ansi",
    "tail_jsonl",
]
