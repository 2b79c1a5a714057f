"""``loop-state.md``: the :class:`LoopState` front matter that lets a loop resume, written by
loopctl and also read from files of the bash predecessor."""

from __future__ import annotations

import contextlib
import datetime
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from loopctl.state.encoding import json_one_line, to_jsonable
from loopctl.state.files import atomic_write_text
from loopctl.state.frontmatter import Entry, read_entries, short_repr
from loopctl.state.layout import StateError

# --- loop-state.md -------------------------------------------------------------------------------


@attrs.define
class RunSettings:
    """Everything a run was started with, recorded in the first write of ``loop-state.md`` so
    that ``loopctl resume`` continues under the same rules (it changes one only when told to)."""

    #: The effective configuration after the config file, the ``LOOPCTL_*`` variables and the
    #: flags, laid out like ``loopctl.toml``; secret-looking values are ``"<hidden>"`` (resume
    #: reads them again). None in a file of loopctl 0.1, which did not record it.
    config: dict[str, Any] | None = None
    #: The config file that was read (absolute), if any.
    config_file: str | None = None
    #: The agent adapter chosen (``--agent``, the config, or Claude Code found on PATH).
    agent: str = ""
    #: The command that replaced the adapter's own (``--agent-cmd`` or ``agent_cmd``).
    agent_cmd: str | None = None
    #: ``--no-plugins``: only the built-in plugins were loaded.
    no_plugins: bool = False
    #: The ``LOOPCTL_*`` variables that are not settings but are read as they are (by loopctl,
    #: like ``LOOPCTL_DISABLE_PLUGIN_AUTOLOAD``, or by plugins), but not secret-looking ones.
    env: dict[str, str] = attrs.Factory(dict)
    #: Where each setting that is not a default came from, by dotted key (the file's name,
    #: ``env LOOPCTL_X``, ``command line``), so resume can tell which ones the config file and
    #: the environment set.
    origins: dict[str, str] = attrs.Factory(dict)


@attrs.define
class LoopState:
    """The front matter of ``loop-state.md``: enough to resume or report on a loop."""

    #: The working goal (plugins may append notes).
    goal: str
    #: The user's goal exactly as written; "" in a legacy file until a plugin recovers it.
    original_goal: str
    #: The last iteration started.
    iteration: int = 0
    #: running | complete | max_iterations | stuck | interrupted | …
    status: str = "running"
    reason: str = ""
    #: How many session restarts so far.
    restarts: int = 0
    session_id: str | None = None
    session_mode: str = "fresh"
    agent: str = ""
    test_cmd: str = ""
    started_at: float = 0.0
    updated_at: float = 0.0
    start_commit: str | None = None
    workdir: str = ""
    pid: int | None = None
    loopctl_version: str = ""
    #: The loop's id: made by ``loopctl run``, kept by ``resume`` (None: a loop of loopctl 0.2
    #: or earlier), so plugins tell their records from an earlier loop's (``loop.run_id``).
    run_id: str | None = None
    max_iterations: int = 0
    #: When plugins' decisions lowered ``max_iterations``: ``{"from": the limit before the
    #: first cut, "to": the limit now, "by": [the plugins], "reason": the last cut's reason}``,
    #: so the stop line can say who cut the budget. None: the limit is the one the run was given.
    iteration_limit_cut: dict[str, Any] | None = None
    #: The protected list of approaches that did not work (``loop.failed_approaches``).
    failed_approaches: list[str] = attrs.Factory(list)
    #: The repeated failure a stuck nudge quotes, until the next restart.
    stuck_nudge: str | None = None
    #: How far stuck detection has escalated (0 none, 1 nudged, 2 restarted).
    stuck_level: int = 0
    #: ``[process group, start time]`` of the running agent, so a later loopctl can end it.
    agent_process: list[int] | None = None
    #: The same for the running test command.
    test_process: list[int] | None = None
    #: Rate-limit waits so far (the backoff grows with them).
    rate_limit_waits: int = 0
    #: Wall-clock seconds used by the earlier runs of a resumed loop.
    wall_clock_used_s: float = 0.0
    #: While ``status`` is ``restarting``: the restart's reason and message.
    restart_reason: str = ""
    restart_message: str = ""
    #: What the run was started with (None: not recorded, a loop of loopctl 0.1).
    settings: RunSettings | None = None
    #: The running summary of ``iterations.jsonl`` (:class:`loopctl.history.RunTotals`):
    #: totals and how much of the journal they cover, so ``resume`` and the report never
    #: re-read the whole journal. Kept as read; None in a file of an earlier loopctl.
    summary: dict[str, Any] | None = None
    #: Plugins' small values (``loop.set_value``), written as one ``extra:`` object.
    extra: dict[str, Any] = attrs.Factory(dict)


#: How each front-matter key of :class:`LoopState` is read back.
FIELD_KINDS: dict[str, str] = {
    "goal": "str",
    "original_goal": "str",
    "iteration": "int",
    "status": "str",
    "reason": "str",
    "restarts": "int",
    "session_id": "str?",
    "session_mode": "str",
    "agent": "str",
    "test_cmd": "str",
    "started_at": "time",
    "updated_at": "time",
    "start_commit": "str?",
    "workdir": "str",
    "pid": "int?",
    "loopctl_version": "str",
    "run_id": "str?",
    "max_iterations": "int",
    "iteration_limit_cut": "any?",
    "failed_approaches": "str_list",
    "stuck_nudge": "str?",
    "stuck_level": "int",
    "agent_process": "process?",
    "test_process": "process?",
    "rate_limit_waits": "int",
    "wall_clock_used_s": "num",
    "restart_reason": "str",
    "restart_message": "str",
    "settings": "settings?",
    "summary": "any?",
    "extra": "dict",
}
#: Older names of fields, read as the new ones.
RENAMED_FIELDS = {"generation": "restarts"}


def default_body(state: LoopState) -> str:
    of_max = f" of {state.max_iterations}" if state.max_iterations else ""
    lines = [
        "# loopctl loop state",
        "",
        f"- status: {state.status}" + (f" ({state.reason})" if state.reason else ""),
        f"- iteration: {state.iteration}{of_max}, restarts: {state.restarts}",
    ]
    if state.agent:
        lines.append(f"- agent: {state.agent}")
    if state.test_cmd:
        lines.append(f"- tests: {state.test_cmd}")
    lines += ["", "## Goal", "", state.goal, ""]
    if state.original_goal and state.original_goal != state.goal:
        lines += ["## Original goal", "", state.original_goal, ""]
    return "\n".join(lines)


def render_loop_state(state: LoopState, body: str = "") -> str:
    """The text of ``loop-state.md``: ``---``, one ``key: <JSON>`` line per field, ``---``, body.

    JSON scalars are valid YAML, so this is ordinary YAML front matter. With no ``body`` a short
    human-readable summary is written instead."""
    lines = ["---"]
    for field in attrs.fields(LoopState):
        value = getattr(state, field.name)
        if isinstance(value, RunSettings):
            text = _settings_text(value)
        else:
            if attrs.has(type(value)):
                value = to_jsonable(value)
            text = json_one_line(value, default=str)
        lines.append(f"{field.name}: {text}")
    lines.append("---")
    return "\n".join(lines) + "\n" + (body or default_body(state))


def _settings_text(settings: RunSettings) -> str:
    """The ``settings:`` line's JSON, encoded once per :class:`RunSettings` object: a run's
    settings are replaced, never changed in place, and their encoding was half of each
    rewrite of loop-state.md (three a loop iteration)."""
    if _last_settings and _last_settings[0][0] is settings:
        return _last_settings[0][1]
    text = json_one_line(to_jsonable(settings), default=str)
    _last_settings[:] = [(settings, text)]
    return text


#: The last settings encoded, and their text (one entry at most).
_last_settings: list[tuple[RunSettings, str]] = []


def write_loop_state(path: Path, state: LoopState, body: str = "") -> None:
    """Write ``loop-state.md`` atomically."""
    atomic_write_text(path, render_loop_state(state, body))


def _type_error(entry: Entry, source: str, expected: str) -> StateError:
    return StateError(
        f"{source}: line {entry.line}: `{entry.key}` should be {expected}, found "
        f"{short_repr(entry.raw)}; fix the value or delete the line to use the default"
    )


def _as_int(entry: Entry, source: str) -> int:
    value = entry.value
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return int(value.strip())
    raise _type_error(entry, source, "a whole number")


_ISO_TIME = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)(?:[Tt ](\d\d):(\d\d)(?::(\d\d)(?:[.,](\d+))?)?)?"
    r"[ \t]*(?:([Zz])|([+-])(\d\d):?(\d\d))?"
)


def _parse_iso_time(text: str) -> float | None:
    """Epoch seconds of an ISO 8601 date or time (any fraction digits, as Python 3.10's
    ``fromisoformat`` cannot); a time without an offset is local time."""
    match = _ISO_TIME.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, fraction, utc, sign, off_h, off_m = match.groups()
    try:
        zone: datetime.tzinfo | None = None
        if utc:
            zone = datetime.timezone.utc
        elif sign:
            offset = datetime.timedelta(hours=int(off_h), minutes=int(off_m))
            zone = datetime.timezone(-offset if sign == "-" else offset)
        moment = datetime.datetime(
            int(year),
            int(month),
            int(day),
            int(hour or 0),
            int(minute or 0),
            int(second or 0),
            int((fraction or "0")[:6].ljust(6, "0")),
            tzinfo=zone,
        )
        return moment.timestamp()
    except (ValueError, OverflowError, OSError):
        return None


def _as_time(entry: Entry, source: str) -> float:
    """Epoch seconds; the bash tool may have written ISO 8601 dates."""
    value = entry.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        with contextlib.suppress(OverflowError):
            return float(value)
    if isinstance(value, str):
        text = value.strip()
        with contextlib.suppress(ValueError, OverflowError):
            return float(text)
        parsed = _parse_iso_time(text)
        if parsed is not None:
            return parsed
    raise _type_error(entry, source, "a time (epoch seconds or an ISO 8601 date)")


def _as_str(entry: Entry, source: str) -> str:
    value = entry.value
    if isinstance(value, str):
        return value
    if not entry.quoted and isinstance(value, (bool, int, float)):
        return entry.raw  # `test_cmd: 42` means the text "42", spelled as written
    raise _type_error(entry, source, "text")


def _as_num(entry: Entry, source: str) -> float:
    value = entry.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise _type_error(entry, source, "a number")


def _as_str_list(entry: Entry, source: str) -> list[str]:
    value = entry.value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return list(value)
    raise _type_error(entry, source, "a list of texts")


def _as_process(entry: Entry, source: str) -> list[int]:
    value = entry.value
    if (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return list(value)
    raise _type_error(entry, source, "[process group, start time]")


def _as_settings(entry: Entry, source: str) -> RunSettings:
    """The recorded :class:`RunSettings`: an object whose known keys have their types (keys a
    later version may add are ignored; a missing one takes its default)."""
    value = entry.value
    if not isinstance(value, dict):
        raise _type_error(entry, source, "a JSON object")
    checks: dict[str, Callable[[Any], bool]] = {
        "config": lambda v: v is None or isinstance(v, dict),
        "config_file": lambda v: v is None or isinstance(v, str),
        "agent": lambda v: isinstance(v, str),
        "agent_cmd": lambda v: v is None or isinstance(v, str),
        "no_plugins": lambda v: isinstance(v, bool),
        "env": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "origins": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
    }
    for key, valid in checks.items():
        if key in value and not valid(value[key]):
            raise StateError(
                f"{source}: line {entry.line}: `settings` has a bad `{key}` "
                f"({short_repr(json_one_line(value[key], default=str))}); fix it or delete the "
                "line (resume then reads the config file and the environment as they are now)"
            )
    return RunSettings(**{key: value[key] for key in checks if key in value})


#: How each kind in :data:`FIELD_KINDS` (but ``dict``) is read; ``?`` kinds may also be null.
_READERS: dict[str, Callable[[Entry, str], Any]] = {
    "str": _as_str,
    "str?": _as_str,
    "int": _as_int,
    "int?": _as_int,
    "num": _as_num,
    "time": _as_time,
    "str_list": _as_str_list,
    "process?": _as_process,
    "settings?": _as_settings,
    "any?": lambda entry, source: entry.value,  # checked by its reader (damaged: rebuilt)
}


def read_loop_state(path: Path) -> LoopState:
    """Read ``loop-state.md`` (also one written by the bash predecessor).

    Missing keys take their defaults, except ``goal``; a legacy file without ``original_goal``
    gives ``""``. Unknown keys with scalar values are kept in ``extra``. Raises
    :class:`StateError` naming the file and line when the file cannot be a loop-state file."""
    source = str(path)
    entries, _body = read_entries(_read_text(Path(path)), source)
    values, extra = _values_of(entries, source)
    if "goal" not in values:
        raise StateError(
            f"{source}: the front matter has no `goal`, so this is not a loop-state file "
            f'(or it was damaged); add a line like `goal: "…"` after the first ---, or move the '
            f"file away to start a fresh loop"
        )
    values.setdefault("original_goal", "")
    _lift_engine_keys(values, extra, source)
    _lift_remembered_command_line(values, extra)
    return LoopState(**values, extra=extra)


def _lift_engine_keys(values: dict[str, Any], extra: dict[str, Any], source: str) -> None:
    """Files written before the engine's own state had typed fields kept it in ``extra``:
    move those keys to their fields (a value of the wrong type is dropped: it was never
    valid there either)."""
    for key in [k for k in extra if k in FIELD_KINDS and k not in ("extra", "settings", "summary")]:
        raw = extra.pop(key)
        if key in values:
            continue
        entry = Entry(key=key, value=raw, raw=json_one_line(raw, default=str), line=0, quoted=False)
        with contextlib.suppress(StateError):
            values[key] = _READERS[FIELD_KINDS[key]](entry, source)


#: Where loopctl 0.1 remembered, in ``extra``, the two flags its resume could not do without.
LEGACY_AGENT_CMD = "cli_agent_cmd"
LEGACY_CONFIG_FILE = "cli_config_file"


def _lift_remembered_command_line(values: dict[str, Any], extra: dict[str, Any]) -> None:
    """loopctl 0.1 kept ``--agent-cmd`` and ``--config`` in ``extra``: read them as the
    :class:`RunSettings` they are (without ``config``, which 0.1 did not record)."""
    agent_cmd, config_file = extra.pop(LEGACY_AGENT_CMD, None), extra.pop(LEGACY_CONFIG_FILE, None)
    if "settings" in values or (agent_cmd is None and config_file is None):
        return
    values["settings"] = RunSettings(
        agent=values.get("agent", ""),
        agent_cmd=agent_cmd if isinstance(agent_cmd, str) and agent_cmd else None,
        config_file=config_file if isinstance(config_file, str) and config_file else None,
    )


def _renamed(entry: Entry) -> Entry:
    new = RENAMED_FIELDS.get(entry.key)
    return entry if new is None else attrs.evolve(entry, key=new)


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except FileNotFoundError:
        raise StateError(
            f"{path} does not exist: no loop has run in this state directory; start one with "
            f"`loopctl run` or point --state-dir at the right directory"
        ) from None
    except OSError as exc:
        raise StateError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def _values_of(entries: list[Entry], source: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(LoopState field values, extra)`` from the front matter: the ``extra`` object wins over
    unknown keys with scalar values, which are kept there too."""
    values: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for entry in entries:
        entry = _renamed(entry)
        kind = FIELD_KINDS.get(entry.key)
        if kind is None:
            if isinstance(entry.value, (str, bool, int, float)):
                unknown[entry.key] = entry.value
        elif entry.value is None:  # null means "the default"
            values.pop(entry.key, None)
            if kind == "dict":
                extra = {}
        elif kind == "dict":
            if not isinstance(entry.value, dict):
                raise _type_error(entry, source, "a JSON object")
            extra = entry.value
        else:
            values[entry.key] = _READERS[kind](entry, source)
    return values, {**unknown, **extra}
