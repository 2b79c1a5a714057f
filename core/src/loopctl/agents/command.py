"""The ``command`` adapter: any executable as a coding agent.

For tools loopctl has no adapter for: the prompt goes in (as an argument or on stdin), plain text
comes out, the exit code says whether the turn worked. Nothing is known about tokens, so usage is
reported as unknown (no requests, ``context_tokens`` None), never as zero.
"""

from __future__ import annotations

import shlex
from collections import deque
from typing import ClassVar

import attrs

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.model import AgentMessage, ErrorKind, MessageKind, TurnOutcome, TurnResult

#: The placeholder replaced by the prompt in any argument of the command line.
PROMPT_PLACEHOLDER = "{prompt}"
#: How much of the agent's output is kept as the turn's final text (the tail).
FINAL_TEXT_LIMIT = 64 * 1024
#: How much of stderr goes into a failed outcome's message (the tail).
_MESSAGE_LIMIT = 4000


#: The variable that tells the command which model to use (``--model``, ``[agents.command]
#: model``); not set when no model is named.
MODEL_ENV = "LOOPCTL_MODEL"


@attrs.define
class CommandSettings(AgentSettings):
    """``[agents.command]``: ``command`` is a shell-style command line, split with :mod:`shlex`.

    If an argument contains ``{prompt}`` it is replaced by the prompt; otherwise the prompt is
    written to the command's stdin. ``extra_args`` are appended (placeholders work there too).
    A ``model`` reaches the command as the ``LOOPCTL_MODEL`` environment variable.
    """


class CommandAgent(AgentAdapter):
    name: ClassVar[str] = "command"
    description: ClassVar[str] = "Any executable: prompt as {prompt} argument or on stdin, text out"
    settings_class: ClassVar[type[AgentSettings]] = CommandSettings

    def invocation(self, request: TurnRequest) -> Invocation:
        command = self.settings.command
        if not command or not command.strip():
            raise ValueError(
                'the command agent needs a command line: set [agents.command] command = "my-agent '
                '--prompt {prompt}" (or leave out {prompt} to pass the prompt on stdin)'
            )
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(
                f"[agents.command] command = {command!r} is not a valid command line ({exc}); "
                "check its quotes"
            ) from None
        argv += [str(arg) for arg in self.settings.extra_args]
        model = self.settings.model
        env: dict[str, str | None] = {MODEL_ENV: model} if model else {}
        uses_placeholder = any(PROMPT_PLACEHOLDER in arg for arg in argv)
        if uses_placeholder:
            argv = [arg.replace(PROMPT_PLACEHOLDER, request.prompt) for arg in argv]
            return Invocation(argv=argv, stdin=None, env=env)
        return Invocation(
            argv=argv, stdin=request.prompt.encode("utf-8", errors="replace"), env=env
        )

    def new_parser(self) -> StreamParser:
        return CommandParser(self.name)


class CommandParser(StreamParser):
    """Every stdout line is a text message; the exit code decides the outcome."""

    def __init__(self, agent_name: str = "command") -> None:
        self.agent_name = agent_name
        self._tail: deque[str] = deque()
        self._tail_chars = 0

    def feed(self, line: bytes) -> list[AgentMessage]:
        text = bytes(line).decode("utf-8", errors="replace").rstrip("\r")
        self._keep(text)
        return [AgentMessage(kind=MessageKind.TEXT, text=text, raw_type="line")]

    def _keep(self, text: str) -> None:
        """Remember the output's tail without ever holding more than about the limit."""
        if len(text) > FINAL_TEXT_LIMIT:
            text = text[-FINAL_TEXT_LIMIT:]
        self._tail.append(text)
        self._tail_chars += len(text) + 1
        # drop the oldest line while the rest still joins to at least the limit
        while self._tail_chars - len(self._tail[0]) - 1 > FINAL_TEXT_LIMIT:
            self._tail_chars -= len(self._tail.popleft()) + 1

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        final_text = "\n".join(self._tail)[-FINAL_TEXT_LIMIT:]
        if exit_code == 0:
            outcome = TurnOutcome()
        else:
            outcome = TurnOutcome(ErrorKind.CRASHED, self._failure_message(exit_code, stderr))
        return TurnResult(outcome=outcome, final_text=final_text, exit_code=exit_code)

    def _failure_message(self, exit_code: int | None, stderr: str) -> str:
        tail = stderr.strip()
        if tail:
            return tail[-_MESSAGE_LIMIT:]
        if exit_code is None:
            return f"the {self.agent_name} agent was ended before it exited"
        return f"the {self.agent_name} agent exited with code {exit_code}"
