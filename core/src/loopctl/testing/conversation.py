"""What one Messages API request really holds, read the way the model would read it.

A reactive model server (:class:`loopctl.testing.model_server.ScriptedModelServer` with a
``behaviour``) hands each conversation request to a behaviour model as an :class:`AgentRequest`:
the user's words of each turn (with the CLI's ``<system-reminder>`` blocks left out), the tool
calls the model made and the results the CLI sent back, the conversation's size, and the working
directory the CLI announced. A behaviour decides from these facts only, so any harness that passes
the same facts gets the same behaviour.

A *turn* starts at a user message holding words (the ``-p`` prompt, or the next prompt of a
continued session) and runs through the tool calls and results that follow it; the last turn is
the one the model is answering now.

Sizes are estimated, as the API's own rough figure, at :data:`CHARS_PER_TOKEN` characters a token
of the request's ``system`` and ``messages`` (as compact JSON): :func:`request_tokens`. The tool
definitions are left out: every harness that drives the same CLI sends the same ones with every
request, so they would add the same amount per request and say nothing about the harness.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import attrs

#: Characters per token in the size estimate (the API's rough figure for English and code).
CHARS_PER_TOKEN = 4

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
#: How the CLIs announce the working directory: Claude Code in its system prompt, Codex in its
#: ``<environment_context>``.
_WORKDIR = re.compile(r"Primary working directory: (\S+)|<cwd>([^<\s]+)</cwd>")
_SPACES = re.compile(r"\s+")


def request_tokens(body: Any) -> int:
    """The estimated input tokens of a request: its ``system`` and ``messages`` as compact JSON,
    :data:`CHARS_PER_TOKEN` characters a token (at least 1)."""
    if not isinstance(body, Mapping):
        return 1
    size = sum(
        len(json.dumps(body.get(key), ensure_ascii=False, separators=(",", ":")))
        for key in ("system", "messages")
        if body.get(key) is not None
    )
    return max(1, size // CHARS_PER_TOKEN)


def text_tokens(*texts: str) -> int:
    """The estimated tokens of some text the model writes (at least 1)."""
    return max(1, sum(len(t) for t in texts) // CHARS_PER_TOKEN)


def normalise(text: str) -> str:
    """``text`` with every run of white space made one space (how facts are compared)."""
    return _SPACES.sub(" ", text).strip()


def without_reminders(text: str) -> str:
    """``text`` without the CLI's ``<system-reminder>…</system-reminder>`` blocks."""
    return _REMINDER.sub("", text).strip()


@attrs.frozen
class ToolExchange:
    """One tool call of the model and the result the CLI sent back for it."""

    name: str
    input: Mapping[str, Any]
    id: str
    #: The result's text (reminders left out); "" while no result came back.
    result: str = ""
    #: The CLI marked the result as an error (a failed Bash command, a refused Edit).
    is_error: bool = False
    answered: bool = False

    @property
    def command(self) -> str:
        """A ``Bash`` call's command line ("" for other tools)."""
        value = self.input.get("command", "") if self.name == "Bash" else ""
        return value if isinstance(value, str) else ""

    @property
    def file(self) -> str:
        """The ``file_path`` of a Read, Edit or Write call ("" for other tools)."""
        value = self.input.get("file_path", "")
        return value if isinstance(value, str) else ""

    @property
    def written(self) -> str:
        """What an Edit or Write call put into its file (``new_string`` / ``content``)."""
        value = self.input.get("new_string", self.input.get("content", ""))
        return value if isinstance(value, str) else ""


@attrs.frozen
class Turn:
    """The user's words that began a turn and what happened in it since."""

    prompt: str
    exchanges: tuple[ToolExchange, ...] = ()
    #: What the model said in the turn (its text blocks), oldest first.
    said: tuple[str, ...] = ()


@attrs.frozen
class AgentRequest:
    """One conversation request, as a behaviour model sees it."""

    #: Every turn of the conversation, oldest first; the last is being answered.
    turns: tuple[Turn, ...]
    #: The system prompt's text.
    system: str = ""
    #: The estimated input tokens (:func:`request_tokens`).
    tokens: int = 1
    #: How many messages the conversation holds.
    message_count: int = 0
    #: The working directory the CLI announced ("" when it did not).
    workdir: str = ""
    #: The model the CLI asked for.
    model: str = ""
    #: How many conversation requests this server answered before this one (every run).
    number: int = 0
    #: Seconds since the server started.
    elapsed_s: float = 0.0

    @classmethod
    def from_body(cls, body: Any, *, number: int = 0, elapsed_s: float = 0.0) -> AgentRequest:
        """Read a Messages API request body (anything not shaped like one reads as empty)."""
        data: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
        messages = data.get("messages")
        messages = messages if isinstance(messages, list) else []
        system = system_text(data.get("system"))
        everything = "\n".join([system, *(_raw_texts(messages))])
        found = _WORKDIR.search(everything)
        model = data.get("model")
        return cls(
            turns=tuple(_turns(messages)),
            system=system,
            tokens=request_tokens(data),
            message_count=len(messages),
            workdir=(found.group(1) or found.group(2)) if found else "",
            model=model if isinstance(model, str) else "",
            number=number,
            elapsed_s=elapsed_s,
        )

    @property
    def turn(self) -> Turn:
        """The turn being answered (an empty one for a request without messages)."""
        return self.turns[-1] if self.turns else Turn(prompt="")

    @property
    def prompt(self) -> str:
        """The user's words that began the current turn."""
        return self.turn.prompt

    @property
    def exchanges(self) -> tuple[ToolExchange, ...]:
        """The tool calls of the current turn, oldest first."""
        return self.turn.exchanges

    @property
    def history(self) -> tuple[ToolExchange, ...]:
        """The tool calls of the whole conversation (earlier turns of a continued session too)."""
        return tuple(exchange for turn in self.turns for exchange in turn.exchanges)

    def told(self, fact: str) -> bool:
        """``fact`` is in the user's words of some turn (white space compared loosely): what the
        user, or the harness speaking for the user, said, not what a tool showed."""
        wanted = normalise(fact)
        return bool(wanted) and any(wanted in normalise(turn.prompt) for turn in self.turns)

    def seen(self, fact: str) -> bool:
        """``fact`` is anywhere the model can read it: a prompt, a tool result, its own words."""
        wanted = normalise(fact)
        if not wanted:
            return False
        return self.told(fact) or any(
            wanted in normalise(text)
            for turn in self.turns
            for text in (*turn.said, *(exchange.result for exchange in turn.exchanges))
        )

    def path(self, relative: str) -> str:
        """``relative`` under the announced working directory (as is when none was announced, or
        when it is absolute already): the CLIs' file tools want absolute paths."""
        if not self.workdir or relative.startswith("/"):
            return relative
        return f"{self.workdir.rstrip('/')}/{relative}"


def system_text(system: Any) -> str:
    """The text of a request's ``system`` field (a string, or a list of text blocks)."""
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "\n".join(
            str(block.get("text", "")) for block in system if isinstance(block, Mapping)
        )
    return ""


def _blocks(message: Any) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [block for block in content if isinstance(block, Mapping)]
    return []


def _raw_texts(messages: Sequence[Any]) -> Iterator[str]:
    for message in messages:
        for block in _blocks(message):
            if block.get("type") == "text":
                yield str(block.get("text", ""))


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return without_reminders(content)
    if isinstance(content, list):
        return without_reminders(
            "\n".join(
                str(part.get("text", ""))
                for part in content
                if isinstance(part, Mapping) and part.get("type") == "text"
            )
        )
    return ""


@attrs.define
class _OpenTurn:
    prompt: str
    exchanges: list[ToolExchange] = attrs.Factory(list)
    said: list[str] = attrs.Factory(list)

    def close(self) -> Turn:
        return Turn(self.prompt, tuple(self.exchanges), tuple(self.said))


def _turns(messages: Sequence[Any]) -> Iterator[Turn]:
    current: _OpenTurn | None = None
    for message in messages:
        role = message.get("role") if isinstance(message, Mapping) else None
        blocks = _blocks(message)
        if role == "assistant":
            current = current or _OpenTurn(prompt="")
            _add_assistant(current, blocks)
            continue
        words = "\n".join(
            text
            for block in blocks
            if block.get("type") == "text"
            for text in [without_reminders(str(block.get("text", "")))]
            if text
        )
        results = {
            str(block.get("tool_use_id")): block
            for block in blocks
            if block.get("type") == "tool_result"
        }
        if current is not None and results:
            current.exchanges = [_answered(exchange, results) for exchange in current.exchanges]
        if words and not results:
            if current is not None:
                yield current.close()
            current = _OpenTurn(prompt=words)
    if current is not None:
        yield current.close()


def _add_assistant(turn: _OpenTurn, blocks: Sequence[Mapping[str, Any]]) -> None:
    for block in blocks:
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            turn.said.append(str(block["text"]))
        elif kind == "tool_use":
            tool_input = block.get("input")
            turn.exchanges.append(
                ToolExchange(
                    name=str(block.get("name", "")),
                    input=dict(tool_input) if isinstance(tool_input, Mapping) else {},
                    id=str(block.get("id", "")),
                )
            )


def _answered(exchange: ToolExchange, results: Mapping[str, Mapping[str, Any]]) -> ToolExchange:
    block = results.get(exchange.id)
    if block is None or exchange.answered:
        return exchange
    return attrs.evolve(
        exchange, result=_result_text(block), is_error=bool(block.get("is_error")), answered=True
    )


__all__ = [
    "CHARS_PER_TOKEN",
    "AgentRequest",
    "ToolExchange",
    "Turn",
    "normalise",
    "request_tokens",
    "system_text",
    "text_tokens",
    "without_reminders",
]
