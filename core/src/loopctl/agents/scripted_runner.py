"""The scripted fake agent process: ``python -m loopctl.agents.scripted_runner SCENARIO --turn N``.

It plays one turn of a scenario (see :mod:`loopctl.agents.scripted`) in the working directory and
prints one JSON line per event on stdout, as a real agent CLI would: ``init``, ``text``,
``tool_call``/``tool_result``, ``usage``, and a final ``result``. Exit codes: 0 after a normal
turn, 1 after an ``error`` action, 2 for an unusable scenario (with a result line saying why),
and whatever an ``exit`` action asks for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from loopctl.agents.scripted import Scenario, ScenarioError, load_scenario

_OUTPUT_LIMIT = 20_000
_DEFAULT_RUN_TIMEOUT_S = 600.0


class _Emitter:
    """Writes one flushed JSON line per event; a closed stdout ends the process quietly."""

    def emit(self, event: dict[str, Any]) -> None:
        try:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
        except (BrokenPipeError, ValueError):
            os._exit(0)


class _Turn:
    """Plays one turn's actions against the working directory."""

    def __init__(self, scenario: Scenario, workdir: Path, session_id: str, out: _Emitter) -> None:
        self.scenario = scenario
        self.workdir = workdir
        self.root = workdir.resolve()
        self.session_id = session_id
        self.out = out
        self.calls = 0

    def play(self, actions: list[dict[str, Any]], turn: int) -> int:
        for index, action in enumerate(actions):
            if action.get("once") is True and not self._first_time(f"{turn}:{index}"):
                continue
            name = next(key for key in action if key in _ACTIONS)
            code = _ACTIONS[name](self, action)
            if code is not None:
                return code
        self.out.emit(self._result(is_error=False, error_kind=None, message=""))
        return 0

    def _first_time(self, key: str) -> bool:
        """For ``once = true`` actions (say, an error that a retry of the same turn must not
        see again): remembered in a file beside the scenario."""
        marker = self.scenario.path.parent / f".{self.scenario.path.name}.once"
        try:
            seen = set(marker.read_text(encoding="utf-8").split())
        except OSError:
            seen = set()
        if key in seen:
            return False
        marker.write_text("\n".join(sorted(seen | {key})) + "\n", encoding="utf-8")
        return True

    def _result(self, *, is_error: bool, error_kind: str | None, message: str) -> dict[str, Any]:
        return {
            "type": "result",
            "is_error": is_error,
            "error_kind": error_kind,
            "message": message,
            "session_id": self.session_id,
        }

    # --- actions (return an exit code to end the turn there) ------------------------------------

    def say(self, action: dict[str, Any]) -> int | None:
        self.out.emit({"type": "text", "text": action["say"]})
        return None

    def done(self, action: dict[str, Any]) -> int | None:
        self.out.emit({"type": "text", "text": self.scenario.completion_signal})
        return None

    def read(self, action: dict[str, Any]) -> int | None:
        raw = action["read"]
        call = self._call("Read", {"file_path": raw})
        path = self._inside(raw)
        if path is None:
            return self._tool_error(call, f"refusing to read {raw}: it is outside the working dir")
        try:
            text = path.read_bytes().decode("utf-8", errors="replace")
        except OSError as exc:
            return self._tool_error(call, f"cannot read {raw}: {exc.strerror or exc}")
        return self._tool_ok(call, text[:_OUTPUT_LIMIT])

    def write(self, action: dict[str, Any]) -> int | None:
        raw, content = action["write"], action["content"]
        call = self._call("Write", {"file_path": raw, "content": content})
        path = self._inside(raw)
        if path is None:
            return self._tool_error(call, f"refusing to write {raw}: it is outside the working dir")
        data = content.encode("utf-8")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        except OSError as exc:
            return self._tool_error(call, f"cannot write {raw}: {exc.strerror or exc}")
        return self._tool_ok(call, f"wrote {len(data)} bytes to {raw}")

    def replace(self, action: dict[str, Any]) -> int | None:
        raw, old, new = action["replace"], action["old"], action["new"]
        call = self._call("Edit", {"file_path": raw, "old_string": old, "new_string": new})
        path = self._inside(raw)
        if path is None:
            return self._tool_error(call, f"refusing to edit {raw}: it is outside the working dir")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return self._tool_error(call, f"cannot edit {raw}: {exc}")
        if old not in text:
            return self._tool_error(call, f"the text to replace was not found in {raw}")
        try:
            path.write_text(text.replace(old, new, 1), encoding="utf-8")
        except OSError as exc:
            return self._tool_error(call, f"cannot write {raw}: {exc.strerror or exc}")
        return self._tool_ok(call, f"edited {raw}")

    def run(self, action: dict[str, Any]) -> int | None:
        command = action["run"]
        call = self._call("Bash", {"command": command})
        timeout = float(action.get("timeout", _DEFAULT_RUN_TIMEOUT_S))
        try:
            done = subprocess.run(
                command,
                shell=True,
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            output = _text(exc.output) + f"\n[timed out after {timeout:g} s]"
            return self._tool_error(call, output[-_OUTPUT_LIMIT:])
        except OSError as exc:
            return self._tool_error(call, f"cannot run {command!r}: {exc}")
        output = _text(done.stdout)[-_OUTPUT_LIMIT:]
        self._tool_result(call, output, is_error=done.returncode != 0, exit_code=done.returncode)
        return None

    def usage(self, action: dict[str, Any]) -> int | None:
        counts = {key: 0 for key in _USAGE_ORDER}
        counts.update(action["usage"])
        window = action.get("context_window", self.scenario.context_window)
        self.out.emit({"type": "usage", "usage": counts, "context_window": window})
        return None

    def sleep(self, action: dict[str, Any]) -> int | None:
        time.sleep(float(action["sleep"]))
        return None

    def error(self, action: dict[str, Any]) -> int | None:
        message = action.get("message", "")
        result = self._result(is_error=True, error_kind=action["error"], message=message)
        if "retry_after" in action:  # a rate limit that names its reset time
            result["retry_at"] = time.time() + float(action["retry_after"])
        self.out.emit(result)
        return 1

    def hang(self, action: dict[str, Any]) -> NoReturn:
        sys.stdout.flush()
        while True:
            time.sleep(3600)

    def exit(self, action: dict[str, Any]) -> int | None:
        sys.stdout.flush()
        os._exit(int(action["exit"]))

    # --- tool plumbing ---------------------------------------------------------------------------

    def _call(self, name: str, tool_input: dict[str, Any]) -> str:
        self.calls += 1
        call_id = f"t{self.calls}"
        self.out.emit({"type": "tool_call", "id": call_id, "name": name, "input": tool_input})
        return call_id

    def _tool_result(
        self, call_id: str, output: str, *, is_error: bool, exit_code: int | None
    ) -> None:
        self.out.emit(
            {
                "type": "tool_result",
                "id": call_id,
                "output": output,
                "is_error": is_error,
                "exit_code": exit_code,
            }
        )

    def _tool_ok(self, call_id: str, output: str) -> int | None:
        """Report success; returns None (go on) so actions can ``return`` it."""
        self._tool_result(call_id, output, is_error=False, exit_code=None)
        return None

    def _tool_error(self, call_id: str, output: str) -> int | None:
        """Report a failed tool call; a failed tool never ends the turn (returns None)."""
        self._tool_result(call_id, output, is_error=True, exit_code=None)
        return None

    def _inside(self, raw: str) -> Path | None:
        """``raw`` resolved against the working dir, or None if it points outside it."""
        path = Path(raw)
        resolved = (path if path.is_absolute() else self.workdir / path).resolve()
        if resolved == self.root or self.root in resolved.parents:
            return resolved
        return None


_USAGE_ORDER = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
_ACTIONS: dict[str, Callable[[_Turn, dict[str, Any]], int | None]] = {
    "say": _Turn.say,
    "read": _Turn.read,
    "write": _Turn.write,
    "replace": _Turn.replace,
    "run": _Turn.run,
    "usage": _Turn.usage,
    "sleep": _Turn.sleep,
    "error": _Turn.error,
    "hang": _Turn.hang,
    "exit": _Turn.exit,
    "done": _Turn.done,
}


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


def _read_prompt() -> str:
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return ""
        return sys.stdin.buffer.read().decode("utf-8", errors="replace")
    except (OSError, ValueError):
        return ""


def _record_prompt(scenario: Scenario, turn: int, session_id: str, prompt: str) -> None:
    if not scenario.record_prompts:
        return
    target = scenario.path.parent / scenario.record_prompts
    line = json.dumps({"turn": turn, "session_id": session_id, "prompt": prompt})
    try:
        with target.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
    except OSError as exc:
        print(f"scripted agent: cannot record the prompt in {target}: {exc}", file=sys.stderr)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m loopctl.agents.scripted_runner",
        description="Play one turn of a loopctl scenario file as a fake coding agent.",
    )
    parser.add_argument("scenario", help="the scenario file (TOML or JSON)")
    parser.add_argument("--turn", type=int, default=1, help="which turn to play (1-based)")
    parser.add_argument("--workdir", default=".", help="the directory the actions act on")
    parser.add_argument("--resume", default=None, help="the session id to continue")
    parser.add_argument("--model", default=None, help="the model name to report")
    arguments, _ignored = parser.parse_known_args(argv)
    return arguments


def main(argv: list[str] | None = None) -> int:
    arguments = _arguments(argv)
    out = _Emitter()
    prompt = _read_prompt()
    session_id = arguments.resume or str(uuid.uuid4())
    workdir = Path(arguments.workdir)
    try:
        scenario = load_scenario(arguments.scenario)
        actions = scenario.actions_for(arguments.turn)
    except ScenarioError as exc:
        print(f"scripted agent: {exc}", file=sys.stderr)
        out.emit(
            {
                "type": "result",
                "is_error": True,
                "error_kind": "unknown",
                "message": str(exc),
                "session_id": session_id,
            }
        )
        return 2
    model = arguments.model or scenario.model
    out.emit({"type": "init", "session_id": session_id, "model": model})
    _record_prompt(scenario, arguments.turn, session_id, prompt)
    return _Turn(scenario, workdir, session_id, out).play(actions, arguments.turn)


if __name__ == "__main__":
    sys.exit(main())
