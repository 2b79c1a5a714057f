"""What the agent did, from its tool calls: the latest few in detail, older ones reduced by type.

The reduction follows the per-type pruning the analysis recommends (OPENDEV, CMV): a file read
becomes its path, a command its command line and exit code, an edit the file it touched. Memory is
bounded by the retention settings, never by run length: the detailed list holds
``recent_tool_calls`` entries and each reduced table at most ``activity_retention`` distinct keys
(least recently seen dropped first).
"""

from __future__ import annotations

import re
from collections import OrderedDict, deque

from loopctl import ToolCall

#: Longest target (path, command, pattern) kept for one call.
TARGET_CHARS = 160
#: Longest key line kept from a command's output.
KEY_LINE_CHARS = 120

KINDS = ("edit", "command", "read", "search", "other")

_EDIT_NAMES = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "file_change",
        "apply_patch",
        "replace",
        "write_file",
        "edit_file",
        "create_file",
        "str_replace_editor",
    }
)
_READ_NAMES = frozenset({"read", "read_file", "read_many_files", "view", "cat", "notebookread"})
_COMMAND_NAMES = frozenset(
    {"bash", "shell", "run_shell_command", "command_execution", "exec", "local_shell_call"}
)
_SEARCH_NAMES = frozenset(
    {
        "grep",
        "glob",
        "ls",
        "list_directory",
        "search_file_content",
        "web_search",
        "websearch",
        "webfetch",
        "web_fetch",
        "find",
    }
)
_KIND_CACHE: dict[str, str] = {}
_NOTEWORTHY = re.compile(r"error|fail|exception|traceback|passed|ok\b", re.IGNORECASE)


def tool_kind(name: str) -> str:
    """``edit``, ``command``, ``read``, ``search`` or ``other``, from the tool's name in any CLI."""
    kind = _KIND_CACHE.get(name)
    if kind is not None:
        return kind
    lower = name.lower()
    if "todo" in lower:  # TodoWrite keeps a task list; it edits no file
        kind = "other"
    elif lower in _EDIT_NAMES or any(w in lower for w in ("edit", "write", "patch")):
        kind = "edit"
    elif lower in _COMMAND_NAMES or any(w in lower for w in ("shell", "bash", "command")):
        kind = "command"
    elif lower in _READ_NAMES or lower.startswith("read"):
        kind = "read"
    elif lower in _SEARCH_NAMES or any(w in lower for w in ("search", "grep", "glob")):
        kind = "search"
    else:
        kind = "other"
    if len(_KIND_CACHE) < 512:
        _KIND_CACHE[name] = kind
    return kind


def one_line(text: str, limit: int = TARGET_CHARS) -> str:
    """``text`` on one line, whitespace folded, at most ``limit`` characters (… marks a cut)."""
    folded = " ".join(text.split())
    if len(folded) > limit:
        return folded[: limit - 1].rstrip() + "…"
    return folded


def key_line(output: str | None) -> str:
    """The line of a command's output worth keeping: the last one that names an error, a failure
    or a pass; else the last non-empty line."""
    if not output:
        return ""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return ""
    for line in reversed(lines):
        if _NOTEWORTHY.search(line):
            return one_line(line, KEY_LINE_CHARS)
    return one_line(lines[-1], KEY_LINE_CHARS)


class Call:
    """One tool call kept in detail."""

    __slots__ = ("exit_code", "failed", "id", "key_line", "kind", "name", "target")

    def __init__(self, name: str, target: str, call_id: str) -> None:
        self.name = one_line(name, 60) or "unknown"
        self.kind = tool_kind(self.name)
        self.target = target
        self.id = call_id
        self.exit_code: int | None = None
        self.failed: bool | None = None
        self.key_line = ""

    def line(self) -> str:
        target = f" `{self.target}`" if self.target else ""
        if self.kind == "edit":
            text = f"- edited{target}"
        elif self.kind == "read":
            text = f"- read{target}"
        elif self.kind == "search":
            text = f"- searched{target}"
        elif self.kind == "command":
            text = f"- ran{target}"
            if self.exit_code is not None:
                text += f" → exit {self.exit_code}"
            elif self.failed:
                text += " → failed"
            if self.key_line:
                text += f": {self.key_line}"
            return text
        else:
            text = f"- {self.name}{target}"
        if self.failed:
            text += " (failed)"
        return text


class ActivityLog:
    """Tool calls seen in ``on_agent_message``, bounded by the retention settings."""

    def __init__(self, recent: int = 10, retention: int = 200, root: str = "") -> None:
        #: Paths under this directory (the working directory) are shown relative to it.
        self.root = root.rstrip("/") + "/" if root else ""
        self.recent_limit = max(0, recent)
        self.retention = max(0, retention)
        self.recent: deque[Call] = deque()
        self._by_id: dict[str, Call] = {}
        self.older: dict[str, OrderedDict[str, int]] = {kind: OrderedDict() for kind in KINDS}
        #: How many calls were seen in all (the reduced tables may have dropped some).
        self.total = 0
        self.dropped = 0

    def note_call(self, call: ToolCall) -> None:
        self.total += 1
        target = call.key_input or ""
        if self.root and target.startswith(self.root):
            target = target[len(self.root) :]
        entry = Call(call.name or "unknown", one_line(target), call.id or "")
        if call.result_excerpt is not None or call.exit_code is not None:
            self._apply_result(entry, call)
        self.recent.append(entry)
        if entry.id:
            self._by_id[entry.id] = entry
        while len(self.recent) > self.recent_limit:
            self._fold(self.recent.popleft())

    def note_result(self, call: ToolCall) -> None:
        entry = self._by_id.get(call.id or "")
        if entry is not None:
            self._apply_result(entry, call)

    @staticmethod
    def _apply_result(entry: Call, call: ToolCall) -> None:
        if call.exit_code is not None:
            entry.exit_code = call.exit_code
        if call.is_error is not None:
            entry.failed = call.is_error
        if entry.kind == "command":
            entry.key_line = key_line(call.result_excerpt)

    def _fold(self, entry: Call) -> None:
        if entry.id:
            self._by_id.pop(entry.id, None)
        kind = entry.kind
        if kind == "command":
            key = f"`{entry.target}`" + (
                f" → exit {entry.exit_code}" if entry.exit_code is not None else ""
            )
        elif kind == "other":
            key = entry.name
        else:
            key = f"`{entry.target}`" if entry.target else entry.name
        table = self.older[kind]
        table[key] = table.pop(key, 0) + 1  # re-inserted: most recent at the end
        while len(table) > self.retention:
            table.popitem(last=False)
            self.dropped += 1

    def recent_lines(self) -> list[str]:
        """The detailed calls, newest first (so a budget cut drops the oldest)."""
        return [entry.line() for entry in reversed(self.recent)]

    def older_lines(self) -> list[str]:
        """Older calls reduced by type: edits, then commands, reads, searches, the rest; the most
        recently seen first within each."""
        verbs = {"edit": "edited", "command": "ran", "read": "read", "search": "searched"}
        lines: list[str] = []
        for kind in KINDS:
            verb = verbs.get(kind)
            for key, count in reversed(self.older[kind].items()):
                times = f" ({count}×)" if count > 1 else ""
                lines.append(f"- {verb} {key}{times}" if verb else f"- {key}{times}")
        if self.dropped:
            lines.append(f"- … and {self.dropped} older distinct calls not kept")
        return lines
