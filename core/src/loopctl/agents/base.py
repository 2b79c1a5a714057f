"""The agent adapter interface.

An adapter turns one iteration's prompt into a process invocation (:meth:`AgentAdapter.invocation`)
and that process's stdout into parsed messages and a :class:`~loopctl.model.TurnResult`
(:class:`StreamParser`). The supervisor in :mod:`loopctl.agents.supervisor` owns the process: its
process group, timeouts, grace period and kill; adapters never touch processes themselves.

Adapters are registered through the ``register_agents`` hook, so a third party can add one
without touching loopctl. Each has a ``settings_class``: its ``[agents.NAME]`` config section.
"""

from __future__ import annotations

import abc
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar, TypeVar

import attrs

from loopctl.model import AgentMessage, Decision, TurnResult
from loopctl.withhold import child_environment


@attrs.define
class AgentSettings:
    """Settings every adapter understands; ``[agents.NAME]`` in the config.

    Adapters with more settings subclass this and name the subclass in ``settings_class``.
    """

    #: The executable (or full command line) to run instead of the adapter's default.
    command: str | None = None
    #: Extra arguments appended to every invocation.
    extra_args: list[str] = attrs.Factory(list)
    #: The model to ask for, when the CLI takes one.
    model: str | None = None
    #: Extra environment variables for the agent process.
    env: dict[str, str] = attrs.Factory(dict)


SettingsT = TypeVar("SettingsT", bound=AgentSettings)


@attrs.define
class TurnRequest:
    """What the engine asks of one agent turn."""

    prompt: str
    workdir: Path
    iteration: int
    #: Resume this session; None starts a fresh one.
    session_id: str | None = None


@attrs.define
class Invocation:
    """How to start the agent process for one turn."""

    argv: list[str]
    #: Bytes written to stdin before it is closed; None closes stdin at once.
    stdin: bytes | None = None
    #: Variables added to (or, with value None, removed from) the inherited environment.
    env: dict[str, str | None] = attrs.Factory(dict)


class StreamParser(abc.ABC):
    """Parses one turn's stdout, line by line. A new parser is made for every turn.

    Neither method may raise, whatever the input: garbage, cut-off JSON, binary noise. Anything
    that cannot be understood is skipped (and, if nothing usable arrived, reported through the
    outcome ``invalid_output``).
    """

    @abc.abstractmethod
    def feed(self, line: bytes) -> list[AgentMessage]:
        """Parse one complete stdout line (without its newline); return the messages it holds."""

    @property
    def done(self) -> bool:
        """True once the final result line was seen; the supervisor then allows a short grace
        period for the process to exit before it ends it."""
        return False

    @abc.abstractmethod
    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        """Build the turn's result once the process has ended (``exit_code`` None if killed)."""


class AgentAdapter(abc.ABC):
    """One coding-agent CLI. Subclass, set ``name``, and implement the two abstract methods."""

    #: The name users pick with ``--agent NAME`` and in ``[agents.NAME]``.
    name: ClassVar[str]
    description: ClassVar[str] = ""
    #: The executable looked up on PATH by ``loopctl agents list`` (None: nothing to look up).
    executable: ClassVar[str | None] = None
    settings_class: ClassVar[type[AgentSettings]] = AgentSettings

    def __init__(
        self,
        settings: AgentSettings | None = None,
        *,
        model_windows: Mapping[str, int] | None = None,
    ) -> None:
        self.settings = settings if settings is not None else self.settings_class()
        #: The config's model table (``[models]``): context windows by model name, for CLIs that
        #: do not report their window (see :func:`loopctl.config.context_window_for`).
        self.model_windows: dict[str, int] = dict(model_windows or {})

    @abc.abstractmethod
    def invocation(self, request: TurnRequest) -> Invocation:
        """The command line, stdin and environment for this turn."""

    @abc.abstractmethod
    def new_parser(self) -> StreamParser:
        """A fresh parser for one turn's output."""

    def settings_as(self, settings_class: type[SettingsT]) -> SettingsT:
        """The settings as ``settings_class`` (the adapter's own): plain :class:`AgentSettings`
        given by a caller keep their common fields and get the class's defaults for the rest."""
        settings = self.settings
        if isinstance(settings, settings_class):
            return settings
        return settings_class(
            command=settings.command,
            extra_args=list(settings.extra_args),
            model=settings.model,
            env=dict(settings.env),
        )

    def program(self) -> list[str]:
        """The command line to start: ``[agents.NAME] command`` split like a shell would, or
        the adapter's executable. Raises ValueError naming the setting when it cannot be split."""
        command = self.settings.command
        if not command or not command.strip():
            return [self.executable or self.name]
        try:
            return shlex.split(command)
        except ValueError as exc:
            raise ValueError(
                f"[agents.{self.name}] command = {command!r} is not a valid command line ({exc})"
            ) from None

    def resolved_executable(self) -> str | None:
        """The full path of the executable this adapter would run, or None if it is not found."""
        program = self.settings.command or self.executable
        if not program:
            return None
        first = program.split()[0]
        return shutil.which(first)

    def version(self) -> str | None:
        """The CLI's version as it reports it, or None when it is missing or does not answer."""
        path = self.resolved_executable()
        if path is None:
            return None
        try:
            done = subprocess.run(
                [path, "--version"],
                capture_output=True,
                text=True,
                timeout=10,
                env=child_environment(),
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        text = (done.stdout or done.stderr).strip()
        return text.splitlines()[0] if text else None


#: Called with each parsed message while the agent runs; a Decision ends the turn there.
MessageCallback = Callable[[AgentMessage], "Decision | None"]
