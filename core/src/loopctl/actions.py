"""How an agent's turn reads in the views while it runs: what it did and what it said.

The adapters parse every agent's output into :class:`~loopctl.model.AgentMessage` objects; the
views (:mod:`loopctl.view`) show them at one of three levels of :data:`DETAILS`:

* ``loop``: none of them (``-q``): the loop's own lines only;
* ``actions`` (the default): one short line per tool call of the main thread as it is made
  (``agent read src/calc.py``, ``agent edited src/calc.py``, ``agent ran `pytest -q```), and
  the first line of the agent's last message when its turn ends (``agent said: …``);
* ``stream`` (``-v``): every message: each line of what the agent wrote, every tool call
  (sub-agents' too) and how it answered, the CLI's own notes and errors.

Every line is redacted (the messages are not events: nothing redacted them before) and made
one line without control codes; the view adds its time stamp.
"""

from __future__ import annotations

from loopctl.model import AgentMessage, MessageKind, ToolCall
from loopctl.redaction import redact
from loopctl.terminal import sanitize_line

DETAILS = ("loop", "actions", "stream")

#: Tool names (lowercased, of every adapter) by what the views say the agent did.
_VERBS = {
    "read": frozenset({"read", "read_file", "read_many_files", "notebookread", "view"}),
    "edited": frozenset(
        {"edit", "multiedit", "notebookedit", "file_change", "replace", "apply_patch"}
    ),
    "wrote": frozenset({"write", "write_file", "create"}),
    "ran": frozenset({"bash", "command_execution", "run_shell_command", "shell", "exec"}),
    "searched": frozenset(
        {"grep", "glob", "search_file_content", "web_search", "google_web_search", "websearch"}
    ),
    "listed": frozenset({"ls", "list_directory"}),
}
_VERB_OF = {name: verb for verb, names in _VERBS.items() for name in names}
#: The longest line a message gives in the compact view, and in the full stream.
_SHORT, _LONG = 160, 500


def _clean(text: str, limit: int) -> str:
    line = sanitize_line(redact(text)).strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def first_line(text: str | None, limit: int = _SHORT) -> str:
    """The first non-blank line of ``text``, redacted, sanitised and cut to ``limit``."""
    for line in (text or "").splitlines():
        if line.strip():
            return _clean(line, limit)
    return ""


def tool_line(call: ToolCall, limit: int = _SHORT) -> str:
    """``read src/calc.py``, ``ran `pytest -q```, ``used WebFetch: https://…``."""
    verb = _VERB_OF.get(call.name.lower())
    what = first_line(call.key_input, limit)
    if verb == "ran":
        return f"ran `{what}`" if what else "ran a command"
    if verb is not None:
        return f"{verb} {what}" if what else f"{verb} files" if verb != "searched" else verb
    name = _clean(call.name, 60) or "a tool"
    return f"used {name}" + (f": {what}" if what else "")


def _result_line(call: ToolCall) -> str:
    if call.exit_code is not None and call.exit_code != 0:
        how = f"exit {call.exit_code}"
    elif call.is_error:
        how = "failed"
    else:
        how = "ok" if call.exit_code is None else "exit 0"
    excerpt = first_line(call.result_excerpt, _LONG)
    return f"  → {how}" + (f": {excerpt}" if excerpt else "")


def message_lines(message: AgentMessage, detail: str) -> list[str]:
    """The lines a message adds to the views at ``detail`` (none for most messages)."""
    if detail == "actions":
        if message.kind is MessageKind.TOOL_CALL and message.tool_call and not message.sidechain:
            return ["agent " + tool_line(message.tool_call)]
        return []
    if detail != "stream":
        return []
    who = "sub-agent" if message.sidechain else "agent"
    call = message.tool_call
    if message.kind is MessageKind.TOOL_CALL and call is not None:
        return [f"{who} {tool_line(call, _LONG)}"]
    if message.kind is MessageKind.TOOL_RESULT and call is not None:
        return [_result_line(call)]
    if message.kind is MessageKind.TEXT:
        lines = [_clean(line, _LONG) for line in (message.text or "").splitlines()]
        return [f"{who} says: {line}" for line in lines if line]
    if message.kind in (MessageKind.SYSTEM, MessageKind.ERROR) and message.text:
        kind = "error" if message.kind is MessageKind.ERROR else "note"
        return [f"{who} {kind}: {first_line(message.text, _LONG)}"]
    return []


def said_line(text: str | None) -> str:
    """``agent said: FIRST LINE`` of the turn's last message, or "" when it wrote nothing."""
    line = first_line(text)
    return f"agent said: {line}" if line else ""
