"""The ``scripted`` adapter: an offline, deterministic fake agent that follows a scenario file.

It exists so loops, plugins and the demo can be exercised without a model: every turn really
edits files and runs commands in the working directory, and reports the same kinds of parsed
messages (text, tool calls and results, per-request usage, a result line) as a real adapter.

A scenario is TOML or JSON::

    repeat_last = true            # reuse the last turn when iterations outnumber turns
    completion_signal = "LOOPCTL_DONE"
    [[turns]]                     # turn k is used for iteration k
    actions = [
      { say = "I will fix the add function" },
      { replace = "src/calc.py", old = "a - b", new = "a + b" },
      { run = "python -m pytest -q" },
      { usage = { input_tokens = 1200, output_tokens = 300 } },
      { done = true },
    ]

The process side is :mod:`loopctl.agents.scripted_runner`; this module holds the adapter, the
stream parser, and the scenario format (:func:`load_scenario`, :func:`write_scenario`).
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs

from loopctl.agents.base import AgentAdapter, AgentSettings, Invocation, StreamParser, TurnRequest
from loopctl.model import (
    AgentMessage,
    ErrorKind,
    MessageKind,
    ToolCall,
    TurnOutcome,
    TurnResult,
    Usage,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_COMPLETION_SIGNAL = "LOOPCTL_DONE"
DEFAULT_CONTEXT_WINDOW = 200_000
RUNNER_MODULE = "loopctl.agents.scripted_runner"

_FINAL_TEXT_LIMIT = 64 * 1024
_EXCERPT_LIMIT = 1000
_KEY_INPUT_LIMIT = 500
_MESSAGE_LIMIT = 4000


# --- the adapter ----------------------------------------------------------------------------------


@attrs.define
class ScriptedSettings(AgentSettings):
    """``[agents.scripted]``: ``scenario`` is the scenario file (relative to the working dir)."""

    scenario: str | None = attrs.field(
        default=None,
        metadata={"doc": "The scenario file (TOML or JSON), relative to the project."},
    )


class ScriptedAgent(AgentAdapter):
    name: ClassVar[str] = "scripted"
    description: ClassVar[str] = "Offline fake agent that follows a scenario file (tests, demos)"
    settings_class: ClassVar[type[AgentSettings]] = ScriptedSettings

    def invocation(self, request: TurnRequest) -> Invocation:
        scenario = getattr(self.settings, "scenario", None)
        if not scenario:
            raise ValueError(
                "the scripted agent needs a scenario file: set "
                '[agents.scripted] scenario = "path/to/scenario.toml" in the config'
            )
        workdir = Path(request.workdir)
        path = Path(scenario).expanduser()
        if not path.is_absolute():
            path = workdir / path
        if self.settings.command:
            argv = shlex.split(self.settings.command)
        else:
            argv = [sys.executable, "-m", RUNNER_MODULE]
        argv += [str(path), "--turn", str(request.iteration), "--workdir", str(workdir)]
        if request.session_id:
            argv += ["--resume", request.session_id]
        if self.settings.model:
            argv += ["--model", self.settings.model]
        argv += [str(arg) for arg in self.settings.extra_args]
        return Invocation(argv=argv, stdin=request.prompt.encode("utf-8", errors="replace"))

    def new_parser(self) -> StreamParser:
        return ScriptedParser()

    def resolved_executable(self) -> str | None:
        if self.settings.command:
            return super().resolved_executable()
        return sys.executable

    def version(self) -> str | None:
        from loopctl._version import __version__

        return f"scripted (loopctl {__version__})"


# --- the parser ----------------------------------------------------------------------------------


class ScriptedParser(StreamParser):
    """Maps the runner's JSON lines to messages and a TurnResult; skips anything else."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.model: str | None = None
        self.texts: list[str] = []
        self.text_chars = 0
        self.tool_calls: list[ToolCall] = []
        self.calls_by_id: dict[str, ToolCall] = {}
        self.requests: list[Usage] = []
        self.context_tokens: int | None = None
        self.context_window: int | None = None
        self.result: dict[str, Any] | None = None

    @property
    def done(self) -> bool:
        return self.result is not None

    def feed(self, line: bytes) -> list[AgentMessage]:
        try:
            data = json.loads(bytes(line))
        except Exception:  # noqa: BLE001 - ValueError, RecursionError…: not our line, skip it
            return []
        if not isinstance(data, dict):
            return []
        handler = self._handlers.get(str(data.get("type")))
        if handler is None:
            return []
        try:
            return handler(self, data)
        except Exception:  # noqa: BLE001 - a surprise in one line must not end the turn
            return []

    def _on_init(self, data: dict[str, Any]) -> list[AgentMessage]:
        self.session_id = _str(data.get("session_id")) or self.session_id
        self.model = _str(data.get("model")) or self.model
        return [
            AgentMessage(
                kind=MessageKind.INIT, session_id=self.session_id, model=self.model, raw_type="init"
            )
        ]

    def _on_text(self, data: dict[str, Any]) -> list[AgentMessage]:
        text = _str(data.get("text"))
        if text is None:
            return []
        self.texts.append(text[-_FINAL_TEXT_LIMIT:])
        self.text_chars += len(self.texts[-1]) + 1
        # drop the oldest text while the rest still joins to at least the limit
        while len(self.texts) > 1 and self.text_chars - len(self.texts[0]) - 1 > _FINAL_TEXT_LIMIT:
            self.text_chars -= len(self.texts.pop(0)) + 1
        return [AgentMessage(kind=MessageKind.TEXT, text=text, raw_type="text")]

    def _on_tool_call(self, data: dict[str, Any]) -> list[AgentMessage]:
        tool_input = data.get("input")
        call = ToolCall(
            name=_str(data.get("name")) or "unknown",
            key_input=_key_input(tool_input if isinstance(tool_input, dict) else {}),
            id=_str(data.get("id")) or "",
        )
        self.tool_calls.append(call)
        if call.id:
            self.calls_by_id[call.id] = call
        return [AgentMessage(kind=MessageKind.TOOL_CALL, tool_call=call, raw_type="tool_call")]

    def _on_tool_result(self, data: dict[str, Any]) -> list[AgentMessage]:
        call_id = _str(data.get("id")) or ""
        call = self.calls_by_id.get(call_id) or ToolCall(name="", id=call_id)
        output = _str(data.get("output"))
        call.result_excerpt = None if output is None else output[:_EXCERPT_LIMIT]
        is_error = data.get("is_error")
        call.is_error = is_error if isinstance(is_error, bool) else None
        call.exit_code = _int_or_none(data.get("exit_code"))
        return [AgentMessage(kind=MessageKind.TOOL_RESULT, tool_call=call, raw_type="tool_result")]

    def _on_usage(self, data: dict[str, Any]) -> list[AgentMessage]:
        raw = data.get("usage")
        if not isinstance(raw, dict):
            return []
        usage = Usage(
            input_tokens=_count(raw.get("input_tokens")),
            output_tokens=_count(raw.get("output_tokens")),
            cache_creation_input_tokens=_count(raw.get("cache_creation_input_tokens")),
            cache_read_input_tokens=_count(raw.get("cache_read_input_tokens")),
        )
        window = _int_or_none(data.get("context_window"))
        if window is not None and window > 0:
            self.context_window = window
        self.requests.append(usage)
        self.context_tokens = usage.context_tokens
        return [
            AgentMessage(
                kind=MessageKind.USAGE,
                usage=usage,
                context_window=self.context_window,
                session_id=self.session_id,
                raw_type="usage",
            )
        ]

    def _on_result(self, data: dict[str, Any]) -> list[AgentMessage]:
        self.result = data
        self.session_id = _str(data.get("session_id")) or self.session_id
        return [
            AgentMessage(
                kind=MessageKind.RESULT,
                text=_str(data.get("message")) or "",
                session_id=self.session_id,
                raw_type="result",
            )
        ]

    _handlers: ClassVar[
        dict[str, Callable[[ScriptedParser, dict[str, Any]], list[AgentMessage]]]
    ] = {
        "init": _on_init,
        "text": _on_text,
        "tool_call": _on_tool_call,
        "tool_result": _on_tool_result,
        "usage": _on_usage,
        "result": _on_result,
    }

    def finish(self, exit_code: int | None, stderr: str) -> TurnResult:
        return TurnResult(
            outcome=self._outcome(exit_code, stderr),
            session_id=self.session_id,
            final_text="\n".join(self.texts)[-_FINAL_TEXT_LIMIT:],
            tool_calls=list(self.tool_calls),
            requests=list(self.requests),
            context_tokens=self.context_tokens,
            context_window=self.context_window,
            model=self.model,
            exit_code=exit_code,
        )

    def _outcome(self, exit_code: int | None, stderr: str) -> TurnOutcome:
        tail = stderr.strip()[-_MESSAGE_LIMIT:]
        if self.result is None:
            if exit_code != 0:
                how = "was ended" if exit_code is None else f"exited with code {exit_code}"
                words = f"the scripted agent {how} before its result line"
                return TurnOutcome(ErrorKind.CRASHED, f"{words}: {tail}" if tail else words)
            return TurnOutcome(
                ErrorKind.INVALID_OUTPUT, "the scripted agent exited without a result line"
            )
        message = _str(self.result.get("message")) or ""
        kind_name = _str(self.result.get("error_kind"))
        if self.result.get("is_error") is not True and kind_name is None:
            return TurnOutcome(message=message)
        try:
            kind = ErrorKind(kind_name)
        except ValueError:
            kind = ErrorKind.UNKNOWN
        retry_at = self.result.get("retry_at")
        return TurnOutcome(
            kind,
            message or tail,
            retry_at=float(retry_at) if isinstance(retry_at, (int, float)) else None,
        )


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _count(value: object) -> int:
    """A token count: a non-negative int, anything else counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _key_input(tool_input: Mapping[str, Any]) -> str:
    for key in ("file_path", "path", "command", "pattern"):
        value = tool_input.get(key)
        if isinstance(value, str):
            return value[:_KEY_INPUT_LIMIT]
    return ""


# --- scenarios -----------------------------------------------------------------------------------


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the bad part."""


#: Each action's keys: the first is the one that names the action, the rest are its options.
ACTIONS: dict[str, tuple[str, ...]] = {
    "say": ("say",),
    "read": ("read",),
    "write": ("write", "content"),
    "replace": ("replace", "old", "new"),
    "run": ("run", "timeout"),
    "usage": ("usage", "context_window"),
    "sleep": ("sleep",),
    "error": ("error", "message", "retry_after"),
    "hang": ("hang",),
    "exit": ("exit",),
    "done": ("done",),
}
_REQUIRED = {"write": ("content",), "replace": ("old", "new")}
_USAGE_KEYS = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_TOP_LEVEL = (
    "turns",
    "repeat_last",
    "completion_signal",
    "context_window",
    "model",
    "record_prompts",
)


@attrs.define
class Scenario:
    """A loaded, validated scenario. Actions are plain dicts, one action key each."""

    path: Path
    turns: list[list[dict[str, Any]]]
    repeat_last: bool = True
    completion_signal: str = DEFAULT_COMPLETION_SIGNAL
    context_window: int = DEFAULT_CONTEXT_WINDOW
    model: str = "scripted"
    #: A file (relative to the scenario's directory) that each turn's prompt is appended to.
    record_prompts: str | None = None

    def actions_for(self, turn: int) -> list[dict[str, Any]]:
        """The actions of turn ``turn`` (1-based); the last turn again if ``repeat_last``."""
        if turn < 1:
            raise ScenarioError(f"scenario {self.path}: turn numbers start at 1, got {turn}")
        if turn <= len(self.turns):
            return self.turns[turn - 1]
        if self.repeat_last:
            return self.turns[-1]
        raise ScenarioError(
            f"scenario {self.path} has no turn {turn}: it has {len(self.turns)} turn(s) and "
            "repeat_last = false"
        )


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; raises :class:`ScenarioError` naming what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc}") from None
    data = _parse_scenario_text(path, text)
    return _validate_scenario(path, data)


def _parse_scenario_text(path: Path, text: str) -> dict[str, Any]:
    suffix = path.suffix.lower()
    formats = ["json"] if suffix == ".json" else ["toml"] if suffix == ".toml" else ["toml", "json"]
    problems: list[str] = []
    for name in formats:
        try:
            data: Any = json.loads(text) if name == "json" else tomllib.loads(text)
        except (ValueError, RecursionError) as exc:
            problems.append(f"not valid {name.upper()}: {exc}")
            continue
        if not isinstance(data, dict):
            raise ScenarioError(f"scenario {path}: the top level must be a table/object")
        return data
    raise ScenarioError(f"scenario {path} is {'; '.join(problems)}")


def _validate_scenario(path: Path, data: dict[str, Any]) -> Scenario:
    where = f"scenario {path}"
    unknown = sorted(set(data) - set(_TOP_LEVEL))
    if unknown:
        raise ScenarioError(
            f"{where}: unknown key {unknown[0]!r} (expected one of: {', '.join(_TOP_LEVEL)})"
        )
    raw_turns = data.get("turns")
    if not isinstance(raw_turns, list) or not raw_turns:
        raise ScenarioError(f"{where}: 'turns' must be a non-empty list of [[turns]] tables")
    turns = [_validate_turn(where, number, raw) for number, raw in enumerate(raw_turns, 1)]
    scenario = Scenario(path=path, turns=turns)
    scenario.repeat_last = _typed(where, data, "repeat_last", bool, scenario.repeat_last)
    scenario.completion_signal = _typed(
        where, data, "completion_signal", str, scenario.completion_signal
    )
    scenario.context_window = _typed(where, data, "context_window", int, scenario.context_window)
    scenario.model = _typed(where, data, "model", str, scenario.model)
    scenario.record_prompts = _typed(where, data, "record_prompts", str, None)
    if scenario.context_window <= 0:
        raise ScenarioError(f"{where}: 'context_window' must be a positive integer")
    return scenario


def _typed(where: str, data: Mapping[str, Any], key: str, kind: type[Any], default: Any) -> Any:
    if key not in data:
        return default
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ScenarioError(f"{where}: {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _validate_turn(where: str, number: int, raw: object) -> list[dict[str, Any]]:
    here = f"{where}: turn {number}"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{here} must be a table with an 'actions' list")
    extra = sorted(set(raw) - {"actions"})
    if extra:
        raise ScenarioError(f"{here}: unknown key {extra[0]!r} (a turn only has 'actions')")
    actions = raw.get("actions", [])
    if not isinstance(actions, list):
        raise ScenarioError(f"{here}: 'actions' must be a list of action tables")
    return [_validate_action(f"{here}, action {index}", a) for index, a in enumerate(actions, 1)]


def _validate_action(here: str, action: object) -> dict[str, Any]:
    if not isinstance(action, dict):
        raise ScenarioError(f'{here} must be a table like {{ say = "…" }}, got {action!r}')
    names = [key for key in action if key in ACTIONS]
    if len(names) != 1:
        found = ", ".join(repr(key) for key in (names or list(action))) or "nothing"
        raise ScenarioError(
            f"{here}: needs exactly one action key out of {', '.join(ACTIONS)} (found {found})"
        )
    name = names[0]
    allowed = (*ACTIONS[name], "once")
    if not isinstance(action.get("once", False), bool):
        raise ScenarioError(f"{here} ({name}): 'once' must be true or false")
    extra = sorted(set(action) - set(allowed))
    if extra:
        raise ScenarioError(f"{here} ({name}): unknown key {extra[0]!r} (allowed: {allowed})")
    for key in _REQUIRED.get(name, ()):
        if key not in action:
            raise ScenarioError(f"{here} ({name}): missing key {key!r}")
    problem = _action_problem(name, action)
    if problem:
        raise ScenarioError(f"{here} ({name}): {problem}")
    return dict(action)


def _action_problem(name: str, action: Mapping[str, Any]) -> str | None:
    value = action[name]
    if name in ("say", "read", "write", "replace", "run"):
        if not isinstance(value, str):
            return f"{name!r} must be a string"
        strings = [k for k in ("content", "old", "new") if k in action]
        bad = [k for k in strings if not isinstance(action[k], str)]
        if bad:
            return f"{bad[0]!r} must be a string"
        if name == "replace" and action["old"] == "":
            return "'old' must not be empty"
        if "timeout" in action and not _is_positive_number(action["timeout"]):
            return "'timeout' must be a positive number of seconds"
        return None
    if name == "usage":
        if not isinstance(value, dict):
            return "'usage' must be a table of token counts"
        unknown = sorted(set(value) - set(_USAGE_KEYS))
        if unknown:
            return f"unknown usage key {unknown[0]!r} (allowed: {', '.join(_USAGE_KEYS)})"
        if any(not _is_int(v) or v < 0 for v in value.values()):
            return "token counts must be non-negative integers"
        window = action.get("context_window", 1)
        return None if _is_int(window) and window > 0 else "'context_window' must be positive"
    if name == "sleep":
        ok = _is_int(value) or isinstance(value, float)
        return None if ok and value >= 0 and math.isfinite(value) else "must be seconds >= 0"
    if name == "error":
        kinds = [kind.value for kind in ErrorKind]
        if value not in kinds:
            return f"unknown error kind {value!r} (one of: {', '.join(kinds)})"
        if not isinstance(action.get("message", ""), str):
            return "'message' must be a string"
        retry = action.get("retry_after", 0)
        ok = (_is_int(retry) or isinstance(retry, float)) and retry >= 0 and math.isfinite(retry)
        return None if ok else "'retry_after' must be seconds >= 0"
    if name == "exit":
        return None if _is_int(value) and 0 <= value <= 255 else "must be an exit code 0-255"
    # hang, done
    return None if value is True else f"{name!r} must be true"


def _is_positive_number(value: object) -> bool:
    return (
        (_is_int(value) or isinstance(value, float))
        and math.isfinite(value)  # type: ignore[arg-type]
        and value > 0  # type: ignore[operator]
    )


def write_scenario(
    path: str | Path, turns: Sequence[Sequence[Mapping[str, Any]]], **top_level: Any
) -> Path:
    """Write a scenario file: JSON when ``path`` ends in ``.json``, TOML otherwise.

    ``turns`` is one list of action dicts per turn, e.g.
    ``write_scenario(p, [[{"say": "hi"}, {"done": True}]], repeat_last=False)``.
    """
    path = Path(path)
    turn_tables = [{"actions": [dict(action) for action in actions]} for actions in turns]
    if path.suffix.lower() == ".json":
        text = json.dumps({**top_level, "turns": turn_tables}, indent=2) + "\n"
    else:
        lines = [f"{_toml_key(key)} = {_toml_value(value)}" for key, value in top_level.items()]
        for table in turn_tables:
            lines += ["", "[[turns]]", "actions = ["]
            lines += [f"  {_toml_value(action)}," for action in table["actions"]]
            lines.append("]")
        text = "\n".join(lines).lstrip("\n") + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


_BARE_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOML_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f"}
_TOML_ESCAPES["\r"] = "\\r"


def _toml_key(key: str) -> str:
    return key if key and set(key) <= _BARE_KEY_CHARS else _toml_string(key)


def _toml_string(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _TOML_ESCAPES:
            out.append(_TOML_ESCAPES[char])
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"cannot write a lone surrogate (U+{code:04X}) to a TOML scenario")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{_toml_key(str(k))} = {_toml_value(v)}" for k, v in value.items())
        return f"{{ {items} }}" if items else "{}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise ValueError(f"cannot write {value!r} ({type(value).__name__}) to a TOML scenario")
