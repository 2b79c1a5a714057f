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
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
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

    command: str | None = attrs.field(
        default=None,
        metadata={
            "doc": "The executable (or a whole command line) to run instead of the CLI on PATH."
        },
    )
    extra_args: list[str] = attrs.field(
        factory=list, metadata={"doc": "Arguments added to the end of every invocation."}
    )
    model: str | None = attrs.field(
        default=None,
        metadata={
            "doc": "The model to ask for (`--model` and the top-level `model` setting win over it)."
        },
    )
    env: dict[str, str] = attrs.field(
        factory=dict, metadata={"doc": "Environment variables for the agent process."}
    )


SettingsT = TypeVar("SettingsT", bound=AgentSettings)


@attrs.define
class TurnRequest:
    """What the engine asks of one agent turn."""

    prompt: str
    workdir: Path
    iteration: int
    #: Resume this session; None starts a fresh one.
    session_id: str | None = None
    #: False when no later turn will resume this turn's session (a fresh-session run): an
    #: adapter whose CLI can avoid storing the session then asks it not to.
    keep_session: bool = True
    #: What is left of the run's cost budget in US dollars (None: no budget). An adapter whose
    #: CLI can stop itself at a spend limit passes it, so a turn cannot overrun the budget.
    budget_usd: float | None = None
    #: What loopctl has recorded as the cost of the session being resumed so far (0 for a fresh
    #: one): for CLIs that report a resumed session's running total instead of the turn's cost.
    session_cost_usd: float = 0.0


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
    #: Paths, relative to the working directory, where the CLI keeps files of its own (caches):
    #: never counted as the agent's changes.
    private_paths: ClassVar[tuple[str, ...]] = ()
    #: The CLI's options (and config keys) that carry a setting, mapped to the setting's name:
    #: when the CLI rejects one at start, the usage error names the setting to fix.
    option_settings: ClassVar[Mapping[str, str]] = {}

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

    def rejected_command_line(self, stderr: str, argv: Sequence[str] = ()) -> str | None:
        """The usage error to report when the CLI rejected its command line at start, or None.

        Called by the supervisor for a turn that printed nothing on stdout and exited non-zero,
        with its stderr and the command line it ran. The default reads the error wording of the
        usual option parsers (commander, clap, yargs, argparse; see
        :func:`command_line_error`) and names the setting behind the option
        (:attr:`option_settings`), ``extra_args``, or the option loopctl passed itself."""
        found = command_line_error(stderr)
        if found is None:
            return None
        section = f"[agents.{self.name}]"
        words = found.message
        setting = self._setting_for(found.option)
        if setting is not None:
            value: object = getattr(self.settings, setting, None)
            return f"{section} {setting} = {_shown(value)}: the {self.name} CLI rejects it: {words}"
        listed = self._list_setting_with(found.option)
        if listed is not None:
            return f"{section} {listed}: the {self.name} CLI rejects {found.option}: {words}"
        if found.option and any(_is_option(str(arg), found.option) for arg in argv):
            return (
                f"the installed {self.name} CLI does not accept {found.option}, which loopctl "
                f"passes to it; update the CLI ({words})"
            )
        return (
            f"the {self.name} CLI refused to start: {words} (check {section} command and "
            "extra_args, and the CLI's own configuration)"
        )

    def _list_setting_with(self, option: str | None) -> str | None:
        """The setting whose list (``extra_args``, a list of ``key=value`` overrides) or command
        line (``command``) holds ``option``, if one does."""
        if not option:
            return None
        settings = self.settings
        if not attrs.has(type(settings)):
            return None
        for field in attrs.fields(type(settings)):
            name: str = field.name
            value = getattr(settings, name, None)
            if isinstance(value, str) and name == "command":
                try:
                    value = shlex.split(value)
                except ValueError:
                    continue
            if isinstance(value, list) and any(_is_option(str(item), option) for item in value):
                return name
        return None

    def _setting_for(self, option: str | None) -> str | None:
        if not option:
            return None
        wanted = option.lstrip("-")
        for name, setting in self.option_settings.items():
            if name.lstrip("-") == wanted:
                return setting
        return None

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


# --- a CLI that rejects its command line ----------------------------------------------------------


@attrs.frozen
class CommandLineError:
    """An option parser's refusal of a command line, as the CLI printed it."""

    #: The parser's own words (the error line and the lines that belong to it).
    message: str
    #: The option (``--permission-mode``) or config key (``sandbox_mode``) it names, if any.
    option: str | None = None
    #: The value it refused, if it says.
    value: str | None = None


_OPTION = r"(?P<option>-{1,2}[\w-]+)"
#: The first line of each parser's refusal. Each names its option (and value) by group name.
_REJECTIONS = [
    # commander (Claude Code)
    re.compile(rf"^error: unknown option '{_OPTION}'"),
    re.compile(rf"^error: option '{_OPTION}[^']*' argument '(?P<value>[^']*)' is invalid"),
    re.compile(rf"^error: option '{_OPTION}[^']*' argument missing"),
    re.compile(rf"^error: required option '{_OPTION}[^']*' not specified"),
    re.compile(r"^error: (?:missing required argument|too many arguments|unknown command)\b"),
    # clap (Codex)
    re.compile(rf"^error: unexpected argument '{_OPTION}'"),
    re.compile(r"^error: unexpected argument '(?P<value>[^']*)' found"),
    re.compile(rf"^error: invalid value '(?P<value>[^']*)' for '{_OPTION}"),
    re.compile(rf"^error: a value is required for '{_OPTION}"),
    re.compile(rf"^error: the argument '{_OPTION}[^']*' cannot be used"),
    re.compile(r"^error: (?:the following required arguments|unrecognized subcommand)\b"),
    # Codex refusing a ``-c key=value`` override (the key follows on the next line)
    re.compile(r"^Error loading config(?:\.toml)?: (?P<rest>.+)"),
    # yargs (Gemini CLI)
    re.compile(r"^Unknown arguments?: (?P<option>[\w-]+)"),
    re.compile(r"^Invalid values?:\s*$"),
    re.compile(r"^(?:Missing required arguments?|Not enough arguments following): "),
    re.compile(r"^Arguments? .+ (?:are|is) mutually exclusive"),
    # argparse and configargparse (aider)
    re.compile(rf"^\S+: error: unrecognized arguments: {_OPTION}"),
    re.compile(
        rf"^\S+: error: argument {_OPTION}(?:/[\w/-]+)?: "
        r"(?:invalid choice: '(?P<value>[^']*)'|invalid \w+ value: '(?P<value2>[^']*)'|expected)"
    ),
    re.compile(r"^\S+: error: the following arguments are required\b"),
]
#: A continuation line of a refusal: clap's ``[possible values: …]``, yargs's ``Argument: …``,
#: Codex's ``in `sandbox_mode```.
_CONTINUATION = re.compile(r"^(?:\s+\S|in `)")
_YARGS_VALUE = re.compile(r'Argument: (?P<option>[\w-]+), Given: "(?P<value>[^"]*)"')
_CONFIG_KEY = re.compile(r"^in `(?P<option>[\w.-]+)`")
#: Most stderr lines looked at: a refusal comes first (or after a few warnings), not after
#: pages of output.
_REJECTION_SCAN_LINES = 200
_REJECTION_MESSAGE_LIMIT = 2000


def command_line_error(stderr: str) -> CommandLineError | None:
    """The option parser's refusal in ``stderr``, or None when it holds none.

    Knows the wording of commander (Claude Code: ``error: option '--permission-mode <mode>'
    argument 'x' is invalid. Allowed choices are …``), clap (Codex: ``error: invalid value 'x'
    for '--sandbox <MODE>'`` and its ``[possible values: …]``), Codex's own refusal of a config
    override (``Error loading config.toml: unknown variant …``), yargs (Gemini CLI:
    ``Unknown argument: x``, ``Invalid values:``) and argparse (aider: ``aider: error:
    unrecognized arguments: --x``). Only meaningful for a process that printed nothing on
    stdout and failed: these words in the middle of a session mean something else."""
    lines = stderr.splitlines()[:_REJECTION_SCAN_LINES]
    for index, line in enumerate(lines):
        text = line.rstrip()
        for pattern in _REJECTIONS:
            match = pattern.match(text)
            if match is None:
                continue
            parts = [text.strip()]
            for following in lines[index + 1 : index + 4]:
                if not following.strip() or not _CONTINUATION.match(following):
                    break
                parts.append(following.strip())
            groups = match.groupdict()
            option = groups.get("option")
            if option and not option.startswith("-"):  # yargs names it without its dashes
                option = ("-" if len(option) == 1 else "--") + option
            value = groups.get("value") or groups.get("value2")
            for extra in parts[1:]:
                given = _YARGS_VALUE.search(extra)
                key = _CONFIG_KEY.match(extra)
                if given is not None and option is None:
                    option, value = "--" + given.group("option"), given.group("value")
                elif key is not None and option is None:
                    option = key.group("option")
            message = " ".join(parts)[:_REJECTION_MESSAGE_LIMIT]
            return CommandLineError(message=message, option=option, value=value)
    return None


def _is_option(arg: str, option: str) -> bool:
    """``arg`` is ``option`` (``--x``, ``--x=v``), or a config override of key ``option``
    (``key=value``, as Codex's ``-c`` takes)."""
    return arg == option or arg.startswith(option + "=")


def _shown(value: object) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(item) for item in value) + "]"
    return repr(value)
