"""The reactive model server: behaviour models that answer from what a request really holds,
usage measured from the request's size, and a simulated context window. Plain HTTP requests
shaped like Claude Code's (the real CLI drives it in e2e/test_reactive_e2e.py)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl import ConfigError
from loopctl.testing import model_server as ms
from loopctl.testing.behaviours import (
    ApiOutage,
    Change,
    Crash,
    Fixer,
    WithFaults,
    make_behaviour,
    make_fault,
)
from loopctl.testing.conversation import AgentRequest, request_tokens

TOOLS = [{"name": "Read", "input_schema": {"type": "object"}}]
WORKDIR = "/work/project"
REMINDER = (
    "<system-reminder>\n# Environment\n - Primary working directory: "
    f"{WORKDIR}\n - Is a git repository: true\n</system-reminder>"
)
TEST_CMD = "python -m pytest -q"
FAILING = "Exit code 1\nE       assert 17.0 == 16.99\n1 failed in 0.01s"
PRICING = "1\tdef total(prices):\n2\t    return round(sum(prices))\n3\t"
WRONG = Change("pricing.py", "return round(sum(prices))", "return float(round(sum(prices)))")
RIGHT = Change("pricing.py", "return round(sum(prices))", "return round(sum(prices), 2)")


def post(
    server: ms.ScriptedModelServer, body: dict[str, Any], path: str = "/v1/messages"
) -> tuple[int, dict[str, Any]]:
    """POST ``body`` (non-streaming) and return the status and the JSON answer."""
    req = urllib.request.Request(
        server.url + path,
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


class Conversation:
    """Builds Claude Code-shaped request bodies: a first user message of reminders and the
    prompt, then the model's tool calls and the CLI's results."""

    def __init__(
        self, prompt: str = "Make the tests pass.", system: str = "You are an agent."
    ) -> None:
        self.system = system
        self.messages: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": [{"type": "text", "text": REMINDER}, {"type": "text", "text": prompt}],
            }
        ]
        self._ids = 0

    def call(
        self, name: str, tool_input: dict[str, Any], result: str, *, error: bool = False
    ) -> Conversation:
        self._ids += 1
        tool_id = f"toolu_{self._ids}"
        self.messages.append(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}],
            }
        )
        block: dict[str, Any] = {
            "type": "tool_result",
            "tool_use_id": tool_id,
            "content": result
            + "\n\n<system-reminder>\n<total_tokens>9 left</total_tokens>\n</system-reminder>",
        }
        if error:
            block["is_error"] = True
        self.messages.append({"role": "user", "content": [block]})
        return self

    def tests(self, output: str = FAILING, *, passed: bool = False) -> Conversation:
        return self.call("Bash", {"command": TEST_CMD}, output, error=not passed)

    def read(self, relative: str, content: str) -> Conversation:
        return self.call("Read", {"file_path": f"{WORKDIR}/{relative}"}, content)

    def edit(self, change: Change) -> Conversation:
        tool_input = {
            "file_path": f"{WORKDIR}/{change.file}",
            "old_string": change.old,
            "new_string": change.new,
        }
        return self.call("Edit", tool_input, "The file has been updated successfully.")

    def said(self, words: str) -> Conversation:
        self.messages.append({"role": "assistant", "content": [{"type": "text", "text": words}]})
        return self

    def prompt(self, words: str) -> Conversation:
        """The next turn of a continued session."""
        self.messages.append({"role": "user", "content": words})
        return self

    def body(self) -> dict[str, Any]:
        return {
            "model": "claude-sonnet-4-5",
            "max_tokens": 100,
            "system": [{"type": "text", "text": self.system}],
            "tools": TOOLS,
            "messages": list(self.messages),
        }

    def request(self) -> AgentRequest:
        return AgentRequest.from_body(self.body())


# --- reading a request ------------------------------------------------------------------------


def test_a_request_reads_as_turns_of_prompts_tool_calls_and_results() -> None:
    conversation = (
        Conversation("Fix pricing.")
        .tests()
        .read("pricing.py", PRICING)
        .said("I will change the rounding.")
        .prompt("Try again: fix pricing.")
        .tests(passed=True, output="1 passed")
    )
    request = conversation.request()
    first, _ = request.turns
    assert first.prompt == "Fix pricing."  # the CLI's reminders are not the user's words
    assert [e.name for e in first.exchanges] == ["Bash", "Read"]
    bash, read = first.exchanges
    assert (bash.command, bash.is_error, bash.answered) == (TEST_CMD, True, True)
    assert bash.result == FAILING  # the reminder in the result is left out
    assert read.file == f"{WORKDIR}/pricing.py"
    assert not read.is_error
    assert first.said == ("I will change the rounding.",)
    assert request.prompt == "Try again: fix pricing."
    assert [e.is_error for e in request.exchanges] == [False]
    assert len(request.history) == 3
    assert request.workdir == WORKDIR
    assert request.path("pricing.py") == f"{WORKDIR}/pricing.py"
    assert request.path("/abs/x.py") == "/abs/x.py"
    assert request.message_count == len(conversation.messages)
    assert request.tokens == request_tokens(conversation.body())


def test_told_is_the_users_words_and_seen_is_anything_the_model_can_read() -> None:
    request = (
        Conversation("Fix it. Tried before:   return  float(round(sum(prices)))")
        .read("pricing.py", PRICING)
        .request()
    )
    assert request.told("return float(round(sum(prices)))")  # white space compared loosely
    assert not request.told("return round(sum(prices))\n3")
    assert request.seen("def total(prices):")  # in a tool result only
    assert not request.told("def total(prices):")
    assert not request.seen("")
    assert not request.told("   ")


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "messages",
                        "role",
                        "content",
                        "type",
                        "text",
                        "tool_use_id",
                        "id",
                        "name",
                        "input",
                        "is_error",
                        "system",
                        "model",
                        "tool_result",
                        "tool_use",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=30,
    )
)
def test_any_json_reads_as_a_request_without_raising(body: Any) -> None:
    request = AgentRequest.from_body(body)
    assert request.tokens >= 1
    assert isinstance(request.prompt, str)
    assert all(isinstance(e.result, str) for e in request.history)


# --- the server ---------------------------------------------------------------------------------


def test_the_behaviour_answers_once_the_scenario_is_used_up_and_sees_each_request() -> None:
    seen: list[AgentRequest] = []

    def echo(request: AgentRequest) -> ms.Reply:
        seen.append(request)
        return ms.text(f"you said {request.prompt}")

    with ms.ScriptedModelServer([ms.text("scripted")], behaviour=echo) as server:
        _, first = post(server, Conversation("one").body())
        _, second = post(server, Conversation("two").body())
        _, third = post(server, Conversation("three").body())
        indexes = [r.reply_index for r in server.main_requests]
    assert [first["content"][0]["text"], second["content"][0]["text"]] == [
        "scripted",
        "you said two",
    ]
    assert third["content"][0]["text"] == "you said three"
    assert [r.number for r in seen] == [1, 2]  # requests answered before each
    assert seen[1].elapsed_s >= seen[0].elapsed_s >= 0
    assert indexes == [0, None, None]


def test_measured_usage_follows_the_requests_size_and_the_replys() -> None:
    small = Conversation("fix").body()
    big = Conversation("fix", system="x" * 40_000).body()
    replies = [ms.text("ok"), ms.text("y" * 400), ms.auth_error()]
    with ms.ScriptedModelServer(replies, measured_usage=True) as server:
        _, small_answer = post(server, small)
        _, big_answer = post(server, big)
        status, _ = post(server, small)
        totals = server.usage_totals()
    assert small_answer["usage"]["input_tokens"] == request_tokens(small)
    assert big_answer["usage"]["input_tokens"] == request_tokens(big)
    assert big_answer["usage"]["input_tokens"] >= small_answer["usage"]["input_tokens"] + 9_900
    assert small_answer["usage"]["output_tokens"] == 1  # "ok": at least one token
    assert big_answer["usage"]["output_tokens"] == 100  # 400 characters
    assert small_answer["usage"]["cache_read_input_tokens"] == 0
    assert status == 401
    assert totals == {
        "input_tokens": request_tokens(small) + request_tokens(big),
        "output_tokens": 101,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "requests": 2,  # the error answer is not billed
    }


def test_without_measured_usage_the_replies_figures_are_reported() -> None:
    reply = ms.text("ok", usage={"input_tokens": 40_000, "output_tokens": 7})
    with ms.ScriptedModelServer([reply]) as server:
        _, answer = post(server, Conversation().body())
        assert server.usage_totals()["input_tokens"] == 40_000
    assert answer["usage"]["output_tokens"] == 7


def test_a_request_over_the_window_gets_prompt_too_long_and_keeps_the_scenario() -> None:
    fits = Conversation("fix").body()
    window = request_tokens(fits) + 10
    over = Conversation("fix", system="x" * 400).body()
    compact = Conversation("fix", system="x" * 400)
    compact.prompt("Your task is to create a detailed summary of the conversation so far.")
    with ms.ScriptedModelServer(
        [ms.text("first")], context_window=window, measured_usage=True
    ) as server:
        too_long_status, too_long = post(server, over)
        compact_status, _ = post(server, compact.body())
        ok_status, ok = post(server, fits)
        kinds = [(r.kind, r.status, r.usage) for r in server.requests]
    assert too_long_status == 400
    assert too_long["error"] == {
        "type": "invalid_request_error",
        "message": f"prompt is too long: {request_tokens(over)} tokens > {window} maximum",
    }
    assert compact_status == 400
    assert (ok_status, ok["content"][0]["text"]) == (200, "first")
    assert kinds[0] == ("main", 400, {})
    assert kinds[1] == ("compact", 400, {})
    assert kinds[2][:2] == ("main", 200)
    with pytest.raises(ValueError, match="context_window"):
        ms.ScriptedModelServer(context_window=0)


def test_a_behaviour_that_raises_is_an_api_error_and_is_kept() -> None:
    def broken(request: AgentRequest) -> ms.Reply:
        raise KeyError("nope")

    with ms.ScriptedModelServer(behaviour=broken) as server:
        status, answer = post(server, Conversation().body())
        errors = server.behaviour_errors
    assert status == 500
    assert answer["error"]["message"] == "behaviour failed: KeyError: 'nope'"
    assert [type(e) for e in errors] == [KeyError]


# --- the fixer -------------------------------------------------------------------------------------


def tool_of(reply: ms.Reply) -> tuple[str, dict[str, Any]]:
    (call,) = reply.tool_calls
    return call.name, call.input


def fixer(*ideas: Change, **options: Any) -> Fixer:
    return Fixer(test_cmd=TEST_CMD, ideas=list(ideas or (WRONG, RIGHT)), **options)


def test_the_fixer_runs_the_tests_reads_changes_and_runs_them_again() -> None:
    agent = fixer()
    conversation = Conversation()
    assert tool_of(agent(conversation.request())) == (
        "Bash",
        {"command": TEST_CMD, "description": "run a command"},
    )
    conversation.tests()
    assert tool_of(agent(conversation.request())) == (
        "Read",
        {"file_path": f"{WORKDIR}/pricing.py"},
    )
    conversation.read("pricing.py", PRICING)
    name, edit = tool_of(agent(conversation.request()))
    assert (name, edit["old_string"], edit["new_string"]) == ("Edit", WRONG.old, WRONG.new)
    conversation.edit(WRONG)
    assert tool_of(agent(conversation.request()))[0] == "Bash"
    conversation.tests()
    last = agent(conversation.request())
    assert not last.tool_calls  # one attempt a turn: it ends the turn saying what it did
    assert last.text == (
        f"In pricing.py I replaced `{WRONG.old}` with `{WRONG.new}`, "
        f"but `{TEST_CMD}` still fails: E       assert 17.0 == 16.99"
    )


def test_the_fixer_says_the_tests_pass_when_they_do() -> None:
    request = Conversation().tests(passed=True, output="1 passed").request()
    assert fixer()(request).text == "The tests pass."


def test_a_fresh_fixer_that_finds_its_change_in_place_repeats_its_first_idea() -> None:
    changed = PRICING.replace(WRONG.old, WRONG.new)
    request = Conversation().tests().read("pricing.py", changed).request()
    reply = fixer()(request)
    assert not reply.tool_calls
    assert reply.text is not None
    assert "already has `return float(round(sum(prices)))`" in reply.text


def test_told_that_the_first_change_failed_the_fixer_takes_the_next_idea() -> None:
    """The fact is the change itself: said anywhere in the prompt, in any words around it."""
    changed = PRICING.replace(WRONG.old, WRONG.new)
    prompt = f"Make the tests pass.\n\nEarlier: `{WRONG.new}` and the tests failed."
    request = Conversation(prompt).tests().read("pricing.py", changed).request()
    name, edit = tool_of(fixer()(request))
    assert (name, edit["old_string"], edit["new_string"]) == ("Edit", WRONG.new, RIGHT.new)


def test_told_only_which_file_changed_the_fixer_repeats_itself() -> None:
    changed = PRICING.replace(WRONG.old, WRONG.new)
    prompt = "Make the tests pass.\n\nEarlier: changing pricing.py; the tests kept failing."
    request = Conversation(prompt).tests().read("pricing.py", changed).request()
    assert not fixer()(request).tool_calls


def test_a_continued_session_remembers_its_own_failed_change() -> None:
    conversation = (
        Conversation()
        .tests()
        .read("pricing.py", PRICING)
        .edit(WRONG)
        .tests()
        .said("It still fails.")
        .prompt("Make the tests pass.")
        .tests()
    )
    assert tool_of(fixer()(conversation.request()))[0] == "Read"
    conversation.call(
        "Read", {"file_path": f"{WORKDIR}/pricing.py"}, "File unchanged since last read."
    )
    name, edit = tool_of(fixer()(conversation.request()))
    # the content it knows is its earlier read with its own edit applied
    assert (name, edit["old_string"], edit["new_string"]) == ("Edit", WRONG.new, RIGHT.new)


def test_with_more_attempts_a_turn_the_fixer_tries_the_next_idea_at_once() -> None:
    conversation = Conversation().tests().read("pricing.py", PRICING).edit(WRONG).tests()
    agent = fixer(attempts_per_turn=2)
    assert tool_of(agent(conversation.request()))[0] == "Read"
    conversation.read("pricing.py", PRICING.replace(WRONG.old, WRONG.new)).edit(
        Change("pricing.py", WRONG.new, RIGHT.new)
    ).tests()
    assert agent(conversation.request()).text is not None  # two attempts made: turn ends
    alone = Conversation().tests().read("pricing.py", PRICING).edit(WRONG).tests()
    assert fixer(WRONG, attempts_per_turn=2)(alone.request()).text == (
        f"I have no idea left; `{TEST_CMD}` fails: E       assert 17.0 == 16.99"
    )


def test_the_fixer_reads_its_habitual_files_first_each_turn() -> None:
    agent = fixer(reads_first=["NOTES.md"])
    conversation = Conversation()
    assert tool_of(agent(conversation.request())) == ("Read", {"file_path": f"{WORKDIR}/NOTES.md"})
    conversation.read("NOTES.md", "1\tnotes")
    assert tool_of(agent(conversation.request()))[0] == "Bash"


# --- naming a behaviour in a scenario -------------------------------------------------------------


def test_make_behaviour_structures_the_parameters() -> None:
    params = {
        "test_cmd": TEST_CMD,
        "ideas": [{"file": "pricing.py", "old": "a", "new": "b"}],
        "attempts_per_turn": 2,
    }
    made = make_behaviour("fixer", params, source="s.toml", prefix="agent.params")
    assert made == Fixer(TEST_CMD, [Change("pricing.py", "a", "b")], attempts_per_turn=2)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("fxer", {}, "s.toml: unknown behaviour 'fxer' (known: fixer)"),
        (
            "fixer",
            {"test_cmd": "t", "ideas": [], "atempts": 1},
            "agent.params: unknown key 'atempts'",
        ),
        (
            "fixer",
            {"test_cmd": "t", "attempts_per_turn": 0},
            "agent.params.attempts_per_turn: must",
        ),
        (
            "fixer",
            {"test_cmd": "t", "ideas": [{"file": "f", "old": "a"}]},
            "agent.params.ideas[0].new",
        ),
        (
            "fixer",
            {"test_cmd": "t", "ideas": [{"file": "f", "old": "a", "new": " a"}]},
            "not a change",
        ),
        ("fixer", {"ideas": [{"file": "f", "old": "a", "new": "b"}]}, "agent.params.test_cmd"),
    ],
)
def test_a_bad_behaviour_is_an_error_naming_the_file_and_key(
    name: str, params: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        make_behaviour(name, params, source="s.toml", prefix="agent.params")
    assert message in str(caught.value)
    assert "s.toml" in str(caught.value)


# --- ideas that answer one failing test -------------------------------------------------------


def test_an_idea_for_a_test_is_taken_only_while_that_test_fails() -> None:
    first = Change("calc.py", "a - b", "a + b", test="test_add")
    second = Change("calc.py", "a / b", "a * b", test="test_mul")
    agent = fixer(first, second)
    both = "Exit code 1\nFAILED test_calc.py::test_add\nFAILED test_calc.py::test_mul"
    only_mul = "Exit code 1\nFAILED test_calc.py::test_mul"
    assert agent.choose(Conversation().tests(both).request()) == first
    assert agent.choose(Conversation().tests(only_mul).request()) == second
    # fixing test_add while test_mul still fails is not a failure of the first idea
    after = Conversation().tests(both).read("calc.py", "1\ta - b").edit(first).tests(only_mul)
    assert agent.choose(after.request()) == second
    assert not fixer(second).choose(Conversation().tests("FAILED test_x.py::test_y").request())


def test_with_no_idea_for_what_it_sees_the_fixer_says_so() -> None:
    output = "Exit code 1\nE   ModuleNotFoundError: No module named 'yaml_lite'"
    reply = Fixer(test_cmd=TEST_CMD)(Conversation().tests(output).request())
    assert (
        reply.text == f"I have no idea left; `{TEST_CMD}` fails: {output.splitlines()[1].strip()}"
    )


# --- faults ---------------------------------------------------------------------------------------


def request_at(number: int, elapsed_s: float) -> AgentRequest:
    return AgentRequest.from_body(Conversation().body(), number=number, elapsed_s=elapsed_s)


def test_an_outage_answers_every_request_for_its_seconds_from_its_start() -> None:
    outage = ApiOutage(status=429, after=2, seconds=10)
    assert outage(request_at(1, 5.0)) is None
    started = outage(request_at(2, 6.0))
    assert started is not None
    assert started.error is not None
    assert (started.error.status, started.error.type) == (429, "rate_limit_error")
    assert started.error.headers == {"retry-after": "10"}
    later = outage(request_at(3, 12.5))
    assert later is not None
    assert later.error is not None
    assert later.error.headers == {"retry-after": "4"}  # what is left, rounded up
    assert outage(request_at(4, 16.0)) is None
    forever = ApiOutage(status=401, seconds=float("inf"))
    answer = forever(request_at(0, 1e6))
    assert answer is not None
    assert answer.error is not None
    assert (answer.error.status, answer.error.headers) == (401, {})


def test_a_crash_kills_the_cli_once_at_its_request() -> None:
    crash = Crash(at=1)
    assert crash(request_at(0, 0)) is None
    reply = crash(request_at(1, 0))
    assert reply is not None
    assert tool_of(reply) == ("Bash", {"command": "kill -9 $PPID", "description": "run a command"})
    assert crash(request_at(2, 0)) is None


def test_faults_take_over_before_the_behaviour() -> None:
    agent = WithFaults(fixer(), [Crash(at=0), ApiOutage(status=529, after=1, seconds=1)])
    assert tool_of(agent(request_at(0, 0)))[1]["command"] == "kill -9 $PPID"
    overloaded = agent(request_at(1, 0))
    assert overloaded.error is not None
    assert overloaded.error.status == 529
    assert tool_of(agent(request_at(2, 5)))[1]["command"] == TEST_CMD


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"kind": "flood"},
            "s.toml: agent.faults[0].kind: must be one of api-outage, crash, got 'flood'",
        ),
        ({}, "agent.faults[0].kind: must be one of"),
        ({"kind": "api-outage", "status": 418}, "agent.faults[0].status: must be one of 401, 429"),
        ({"kind": "api-outage", "seconds": 0}, "agent.faults[0].seconds: must be more than 0"),
        ({"kind": "crash", "when": 1}, "agent.faults[0]: unknown key 'when'"),
    ],
)
def test_a_bad_fault_is_an_error_naming_the_key(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        make_fault(spec, source="s.toml", prefix="agent.faults[0]")
    assert message in str(caught.value)


def test_make_fault_builds_the_named_fault() -> None:
    made = make_fault({"kind": "api-outage", "status": 401, "seconds": 5}, source="s", prefix="f")
    assert made == ApiOutage(status=401, seconds=5)
    assert make_fault({"kind": "crash", "at": 3}, source="s", prefix="f") == Crash(at=3)


def test_a_fixer_with_a_background_habit_starts_it_once_the_tests_pass() -> None:
    agent = fixer(background="sleep 600")
    conversation = Conversation().tests(passed=True, output="1 passed")
    name, tool_input = tool_of(agent(conversation.request()))
    assert (name, tool_input["command"], tool_input["run_in_background"]) == (
        "Bash",
        "sleep 600",
        True,
    )
    conversation.call("Bash", {"command": "sleep 600"}, "Command running in background with ID: b1")
    assert agent(conversation.request()).text == (
        "Fixed: the tests pass now; I left it running in the background."
    )
    assert fixer()(Conversation().tests(passed=True).request()).text == "The tests pass."


# --- exploring, batches, notes, requirements and recalled fixes ----------------------------------

FAILED_ID = "FAILED test_pricing.py::test_total - assert 17.0 == 16.99\n1 failed"


def test_given_only_the_goal_the_fixer_explores_the_failing_tests_file_first() -> None:
    agent = fixer()
    conversation = Conversation().tests(FAILED_ID)
    assert tool_of(agent(conversation.request()))[1] == {"file_path": f"{WORKDIR}/test_pricing.py"}
    conversation.read("test_pricing.py", "1\tdef test_total(): ...")
    assert tool_of(agent(conversation.request()))[1] == {"file_path": f"{WORKDIR}/pricing.py"}


def test_told_where_the_tests_fail_the_fixer_goes_straight_to_the_code() -> None:
    prompt = f"Make the tests pass.\n\nLast run:\n{FAILED_ID}"
    reply = fixer()(Conversation(prompt).request())
    assert tool_of(reply) == ("Read", {"file_path": f"{WORKDIR}/pricing.py"})
    assert tool_of(fixer()(Conversation().request()))[0] == "Bash"  # not told: runs them


UNITS = Change("units.py", "0.3\n", "0.3048\n", test="test_to_metres")
LABEL = Change("report.py", "} ft", "} m", test="test_line")
BOTH = "FAILED test_units.py::test_to_metres\nFAILED test_report.py::test_line\n2 failed"


def test_a_batch_fixer_changes_every_file_before_it_runs_the_tests_again() -> None:
    agent = fixer(UNITS, LABEL, batch=True)
    conversation = Conversation(f"Fix it.\n{BOTH}").read("units.py", "1\tF = 0.3\n").edit(UNITS)
    assert tool_of(agent(conversation.request()))[1] == {"file_path": f"{WORKDIR}/report.py"}
    conversation.read("report.py", "1\treturn f'{x} ft'\n").edit(LABEL)
    assert tool_of(agent(conversation.request()))[0] == "Bash"
    # a fresh session with half the change in the tree learns from the failure what is left
    left = Conversation().tests("FAILED test_report.py::test_line\n1 failed")
    left.read("test_report.py", "1\tdef test_line(): ...")
    assert tool_of(agent(left.request()))[1] == {"file_path": f"{WORKDIR}/report.py"}


def test_a_fixer_with_notes_appends_a_line_before_it_ends_each_turn() -> None:
    agent = fixer(notes="NOTES.md")
    conversation = Conversation().tests(passed=True, output="1 passed")
    reply = agent(conversation.request())
    assert tool_of(reply) == (
        "Bash",
        {"command": "echo '- The tests pass.' >> NOTES.md", "description": "run a command"},
    )
    conversation.said("The tests pass.").call("Bash", tool_of(reply)[1], "")
    assert agent(conversation.request()).text == "The tests pass."


HALF_UP = Change("invoice.py", "round(s[1:], 2)", "half_up(s)", requires="rounded half up")
PLAIN = Change("invoice.py", "round(s[1:], 2)", "round(s, 2)")
INVOICE = "1\treturn round(s[1:], 2)\n"


def test_a_requirement_is_met_only_while_the_prompt_carries_it_within_attention() -> None:
    def change(prompt: str) -> str:
        request = Conversation(prompt).tests().read("invoice.py", INVOICE).request()
        return str(tool_of(fixer(HALF_UP, PLAIN, attention=100)(request))[1]["new_string"])

    assert change("Fix the total; amounts are rounded half up.") == "half_up(s)"
    assert change("Fix the total.") == "round(s, 2)"
    assert change("notes " * 30 + "Fix the total; amounts are rounded half up.") == "round(s, 2)"


SORTED = Change("export.py", "dumps(r)", "dumps(r, sort_keys=True)", test="not JSON serializable")
RECALLED = Change("export.py", "dumps(r)", "dumps(r, default=str)", recalled=True)


def test_a_recalled_fix_shown_in_the_prompt_is_applied_at_once() -> None:
    agent = fixer(SORTED, RECALLED)
    shown = Conversation("Make the tests pass.\nBefore: json.dumps(r, default=str) fixed it.")
    assert tool_of(agent(shown.request())) == ("Read", {"file_path": f"{WORKDIR}/export.py"})
    shown.read("export.py", "1\treturn json.dumps(r)\n")
    assert tool_of(agent(shown.request()))[1]["new_string"] == RECALLED.new
    plain = (
        Conversation().tests("TypeError: not JSON serializable").read("export.py", "1\tdumps(r)")
    )
    assert tool_of(agent(plain.request()))[1]["new_string"] == SORTED.new
