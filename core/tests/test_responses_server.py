"""The reactive Responses API server: Codex's requests read as the behaviours' facts, the
behaviours' replies answered as Responses events Codex executes (over real HTTP on 127.0.0.1)."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl.testing.behaviours import ApiOutage, Change, Fixer
from loopctl.testing.conversation import AgentRequest
from loopctl.testing.model_server import ToolUse, bash, edit, read, text
from loopctl.testing.responses_server import (
    ResponsesModelServer,
    as_messages,
    codex_command,
    codex_config,
)

TEST_CMD = "python -m pytest -q"
CONTEXT = (
    "<environment_context>\n  <cwd>/work/proj</cwd>\n  <shell>bash</shell>\n</environment_context>"
)


def _message(role: str, words: str) -> dict[str, Any]:
    return {"type": "message", "role": role, "content": [{"type": "input_text", "text": words}]}


def _call(call_id: str, cmd: str) -> dict[str, Any]:
    arguments = json.dumps({"cmd": cmd})
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "exec_command",
        "arguments": arguments,
    }


def _output(call_id: str, code: int, out: str) -> dict[str, Any]:
    """A ``function_call_output`` as Codex 0.169 sends it."""
    text = (
        f"Chunk ID: 1f44d0\nWall time: 0.1280 seconds\nProcess exited with code {code}\n"
        f"Original token count: 5\nOutput:\n{out}"
    )
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _body(*items: dict[str, Any]) -> dict[str, Any]:
    start = [_message("developer", "You are Codex."), _message("user", CONTEXT)]
    return {"model": "gpt-5.5", "stream": True, "tools": [{"type": "function", "name": "exec_command"}],
            "input": [*start, *items]}  # fmt: skip


def test_a_codex_request_reads_as_the_same_facts_as_a_messages_request() -> None:
    body = _body(
        _message("user", "Make the failing tests pass."),
        _call("c1", TEST_CMD),
        _output("c1", 1, "FAILED test_calc.py::test_add - assert -1 == 5\n"),
        _call("c2", "cat -n -- /work/proj/calc.py"),
        _output("c2", 0, "     1\tdef add(a, b):\n     2\t    return a - b\n"),
    )
    request = AgentRequest.from_body(
        as_messages(body, {"c2": ToolUse("Read", {"file_path": "/work/proj/calc.py"}, "c2")})
    )
    assert request.workdir == "/work/proj"
    assert [turn.prompt for turn in request.turns] == ["Make the failing tests pass."]
    run, shown = request.exchanges
    assert (run.name, run.command, run.is_error) == ("Bash", TEST_CMD, True)
    assert run.result == "FAILED test_calc.py::test_add - assert -1 == 5"
    assert (shown.name, shown.file, shown.is_error) == ("Read", "/work/proj/calc.py", False)
    assert "You are Codex." in request.system
    assert "<cwd>" in request.system


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.sampled_from(["type", "role", "content", "input", "call_id",
                                                       "output", "arguments", "name", "text"]),
                                      inner, max_size=5),
                    max_leaves=20))  # fmt: skip
def test_reading_never_raises_on_any_json(body: Any) -> None:
    AgentRequest.from_body(as_messages(body))
    AgentRequest.from_body(as_messages({"input": [body]}))


@pytest.mark.slow
def test_the_behaviours_tools_run_as_shell_commands(tmp_path: Path) -> None:
    target = tmp_path / "calc.py"
    target.write_text("def add(a, b):\n    return a - b\n")

    def run(call: ToolUse) -> subprocess.CompletedProcess[str]:
        command = codex_command(call)
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True, check=False)

    assert (
        run(read(str(target)).tool_calls[0]).stdout
        == "     1\tdef add(a, b):\n     2\t    return a - b\n"
    )
    assert run(edit(str(target), "return a - b", "return a + b").tool_calls[0]).returncode == 0
    assert target.read_text() == "def add(a, b):\n    return a + b\n"
    refused = run(edit(str(target), "a", "b").tool_calls[0])  # occurs more than once
    assert refused.returncode != 0
    assert "not once" in refused.stderr
    assert target.read_text() == "def add(a, b):\n    return a + b\n"
    quoted = "it's $HOME `x`\n"
    written = ToolUse("Write", {"file_path": str(tmp_path / "new" / "f.txt"), "content": quoted})
    assert run(written).returncode == 0
    assert (tmp_path / "new" / "f.txt").read_text() == quoted
    assert run(bash("echo hi").tool_calls[0]).stdout == "hi\n"


def _post(server: ResponsesModelServer, body: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """POST ``body``; the status and the events (or the error JSON as one event)."""
    request = urllib.request.Request(
        f"{server.base_url}/responses",
        json.dumps(body).encode(),
        {"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            raw = answer.read().decode()
            return answer.status, [
                json.loads(line[len("data: ") :])
                for line in raw.splitlines()
                if line.startswith("data: ")
            ]
    except urllib.error.HTTPError as error:
        return error.code, [json.loads(error.read())]


def _done_items(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


def test_the_behaviour_answers_and_its_calls_read_back_as_its_own_tools() -> None:
    fixer = Fixer(test_cmd=TEST_CMD, ideas=[Change("calc.py", "return a - b", "return a + b")])
    prompt = _message("user", "Make the failing tests pass.")
    with ResponsesModelServer(behaviour=fixer, measured_usage=True) as server:
        status, events = _post(server, _body(prompt))
        assert status == 200
        assert events[-1]["type"] == "response.completed"
        said, call = _done_items(events)
        assert said["content"][0]["text"] == "Let me run the tests."
        assert json.loads(call["arguments"])["cmd"] == TEST_CMD
        failing = _output(call["call_id"], 1, "FAILED test_calc.py::test_add - assert -1 == 5\n")
        _, events = _post(server, _body(prompt, call, failing))
        reading = _done_items(events)[-1]
        assert json.loads(reading["arguments"])["cmd"] == "cat -n -- /work/proj/test_calc.py"
        shown = _output(reading["call_id"], 0, "     1\tfrom calc import add\n")
        _, events = _post(server, _body(prompt, call, failing, reading, shown))
        assert (
            json.loads(_done_items(events)[-1]["arguments"])["cmd"]
            == "cat -n -- /work/proj/calc.py"
        )
        usage = events[-1]["response"]["usage"]
        recorded = server.main_requests[-1].usage
    assert usage["input_tokens"] == recorded["input_tokens"] > 0
    assert usage["output_tokens"] == recorded["output_tokens"] > 0
    assert server.behaviour_errors == []


def test_a_longer_conversation_is_billed_more() -> None:
    with ResponsesModelServer(scenario=[text("a"), text("b")], measured_usage=True) as server:
        _post(server, _body(_message("user", "short")))
        _post(server, _body(_message("user", "long " * 500)))
        first, second = (r.usage["input_tokens"] for r in server.main_requests)
    assert second > first + 400


def test_faults_answer_as_the_responses_api_errors_codex_knows() -> None:
    with ResponsesModelServer(behaviour=ApiOutage(status=401, seconds=float("inf"))) as server:
        status, (error,) = _post(server, _body(_message("user", "go")))
    assert status == 401
    assert error["error"]["code"] == "invalid_api_key"
    assert server.usage_totals()["requests"] == 0  # errors are not billed
    with ResponsesModelServer(behaviour=ApiOutage(status=429, seconds=30)) as server:
        status, (error,) = _post(server, _body(_message("user", "go")))
    assert status == 429
    assert error["error"]["code"] == "rate_limit_exceeded"


def test_a_request_over_the_window_fails_in_the_stream() -> None:
    with ResponsesModelServer(scenario=[text("never")], context_window=50) as server:
        status, events = _post(server, _body(_message("user", "x" * 1000)))
    assert status == 200
    assert events[-1]["type"] == "response.failed"
    assert events[-1]["response"]["error"]["code"] == "context_length_exceeded"
    assert server.remaining == 1


def test_cli_env_points_codex_home_at_the_server(tmp_path: Path) -> None:
    with ResponsesModelServer() as server:
        env = server.cli_env(tmp_path / "home")
        config = (Path(env["CODEX_HOME"]) / "config.toml").read_text()
        assert config == codex_config(server.base_url)
        assert f'base_url = "{server.base_url}"' in config
        assert server.base_url.startswith("http://127.0.0.1:")
