"""Behaviour models: scripted agents that fail the way real agents fail, for a reactive server.

A behaviour model is a callable that takes an :class:`~loopctl.testing.conversation.AgentRequest`
and returns the next :class:`~loopctl.testing.model_server.Reply`; give it to
:class:`~loopctl.testing.model_server.ScriptedModelServer` as ``behaviour=``. The models here decide
from facts the request holds: the test command's output in a tool result, a file's content, a
change the prompt shows, the conversation's own earlier tool calls. They never look for a
harness's wording (a section title, a phrase), so any harness that passes the same facts gets
the same behaviour, and one that passes fewer facts gets a worse one.

Each model is an attrs class, so a scenario file can name it and give its parameters
(:func:`make_behaviour`); one instance answers one server (a model may keep state, such as when a
fault began). The models:

``fixer`` (:class:`Fixer`)
    A competent agent with a fixed list of *ideas* (candidate changes, the right one somewhere in
    the list). Each turn it runs the tests; if they fail it takes the first idea it does not know
    to have failed, reads the file, makes the change, runs the tests again and ends the turn
    saying what it changed and how the tests ended. It **knows an idea failed** only when

    * the idea's change (its ``new`` text, white space compared loosely) is in the user's words
      of some turn (the prompt: the goal, or what a harness wrote there), or
    * its own conversation shows it making that change and the tests failing afterwards (a
      continued session remembers this; a fresh one does not).

    With one idea it is the control agent any loop succeeds with. With a wrong first idea it is
    the agent that repeats its first idea unless told that idea's change failed: in a fresh
    session it finds its own earlier change already in the file, concludes the code is right,
    and ends the turn without a change. An idea with a ``test`` answers that fact only (a failing
    test's id): it is taken while the latest test output shows it, so an agent with one idea per
    failing test fixes one bug a turn. With no idea for what it sees (a missing module, a broken
    test command) it says so and ends the turn. ``attempts_per_turn`` lets it try more than one
    idea in a turn; ``reads_first`` names files it reads at the start of every turn before
    anything else (a habit that fills a long session's context); ``background`` is a command it
    leaves running in the background once the tests pass (Claude Code prints its result, then
    waits for that command before it exits: a hang after the final result).

    Given only the goal it **explores**: it runs the tests and, when they fail, reads the failing
    test's file (the first ``path.py::test`` the output names) before the file it changes. When
    its prompt already says where the tests fail (a failing test's id, or the fact an idea
    answers) or shows a fix it recalls, it goes straight to the file it changes. ``batch`` makes
    it change every file an answer needs before it runs the tests again (a change a window can
    cut in half); ``notes`` is a file it appends a line to at the end of every turn (it grows);
    an idea's ``requires`` is a requirement of the goal it meets only while its prompt carries
    it (in its first ``attention`` characters); an idea marked ``recalled`` is applied at once
    when the prompt shows its change.

Faults take over some requests of any behaviour (:class:`WithFaults`); a scenario lists them by
``kind``:

``api-outage`` (:class:`ApiOutage`)
    From a given request on, every request gets an API error for some seconds (or for good):
    a rate limit (429, with ``retry-after``), an authentication error (401), an overload (529).

``crash`` (:class:`Crash`)
    One request is answered with a ``Bash`` call that kills the CLI itself (``kill -9 $PPID``):
    the agent process dies in the middle of its turn.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from loopctl.config.errors import InvalidFields
from loopctl.testing.conversation import AgentRequest, ToolExchange, normalise
from loopctl.testing.model_server import (
    Reply,
    ToolUse,
    api_error,
    bash,
    edit,
    read,
    text,
    tools,
)

#: A test's id as pytest prints it (``tests/test_x.py::test_y``): where a test fails.
_TEST_ID = re.compile(r"([\w./-]+\.py)::\w+")
#: A line of a ``Read`` result as the CLI numbers it (``  12\tcode``).
_NUMBERED = re.compile(r"^\s*\d+\t", re.MULTILINE)
#: Lines of test output that say what failed, the most telling kind first: pytest's ``E`` lines,
#: an exception with its message, a failed test's name, any line that says it failed.
_TELLING = (
    re.compile(r"^E\s+\S"),
    re.compile(r"\w(Error|Exception)\b.*:"),
    re.compile(r"^(FAILED|FAIL:|ERROR)\b"),
    re.compile(r"fail|error", re.IGNORECASE),
)


@attrs.frozen
class Change:
    """One idea for the fix: in ``file`` (relative to the project), ``old`` becomes ``new``.

    ``test`` (optional) is a fact the idea answers, such as a failing test's id: the agent takes
    the idea only while the latest test output shows it, and counts it failed only when a test
    run after the change still shows it (so fixing one of several bugs is not a failure).

    ``requires`` (optional) is a fact of the goal the idea depends on (a requirement no test
    output states, such as "half up"): the agent takes the idea only when its current prompt
    holds that fact; without it, it takes the next idea.

    ``recalled`` marks a fix the agent can be reminded of: when its current prompt shows the
    change (its ``new`` text), the agent applies it at once, and being shown it does not count
    as being told it failed (only its own failing test run after making it does).
    """

    file: str
    old: str
    new: str = attrs.field()
    test: str = ""
    requires: str = ""
    recalled: bool = False

    @new.validator
    def _differs(self, attribute: attrs.Attribute[str], value: str) -> None:
        if normalise(value) == normalise(self.old):
            raise InvalidFields([(("new",), f"the same as old ({value!r}): not a change")])


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise InvalidFields([((attribute.name,), f"must be at least 1, got {value}")])


@attrs.define
class Fixer:
    """The competent agent with a list of ideas; see the module's docstring for its rules."""

    #: The command it runs to see whether the tests pass (its exact Bash command line).
    test_cmd: str
    #: The candidate changes, in the order it would try them (none: it can only look).
    ideas: list[Change] = attrs.Factory(list)
    #: How many ideas it tries in one turn before ending the turn.
    attempts_per_turn: int = attrs.field(default=1, validator=_positive)
    #: Files (relative to the project) it reads at the start of every turn.
    reads_first: list[str] = attrs.Factory(list)
    #: A command it starts in the background (Bash's ``run_in_background``) once the tests pass,
    #: before its final answer, as an agent leaves a dev server or a watcher running: Claude Code
    #: prints its result, then waits for the command to end before it exits.
    background: str = ""
    #: Makes every idea that answers the latest test output, one file after another, before it
    #: runs the tests again (a change across files), instead of one idea per test run.
    batch: bool = False
    #: A notes file (relative to the project) it appends a line to at the end of every turn
    #: (what it did and how the tests ended), as agents keep a progress file: it grows each turn.
    notes: str = ""
    #: How many characters from the start of its prompt it takes in when it looks for a
    #: requirement of the goal (an idea's ``requires``): 0 for all of them. A goal whose
    #: requirement sits after that many characters of other text (growing notes) is lost on it.
    attention: int = 0

    def __call__(self, request: AgentRequest) -> Reply:
        turn = request.exchanges
        for name in self.reads_first:
            if not any(e.name == "Read" and e.file == request.path(name) for e in turn):
                return read(request.path(name), say=f"First, {name}.")
        if turn and self._is_note(turn[-1]):
            said = request.turn.said
            return text(said[-1] if said else "Done.")
        answer = self._next(request)
        if self.notes and not answer.tool_calls and answer.text and turn:
            line = f"- {normalise(answer.text)[:300]}"
            return bash(f"echo {shlex.quote(line)} >> {shlex.quote(self.notes)}", say=answer.text)
        return answer

    def _next(self, request: AgentRequest) -> Reply:
        turn = request.exchanges
        tests = [e for e in turn if self.is_test(e)]
        if not tests and not self.knows_failure(request):
            return bash(self.test_cmd, say="Let me run the tests.")
        last = turn[-1] if turn else None
        if last is not None and self.background and _same(last.command, self.background):
            return text("Fixed: the tests pass now; I left it running in the background.")
        if last is not None and self.is_test(last):
            return self._after_tests(request, last, first=len(tests) == 1)
        edits = last is not None and last.name in ("Edit", "Write")
        if edits and not (self.batch and self._pending(request)):
            return bash(self.test_cmd, say="Now the tests again.")
        idea = self._pending(request) if self.batch else self.choose(request)
        if idea is None:
            return text("I have no idea for this failure.")
        if last is not None and last.name == "Read" and last.file == request.path(idea.file):
            return self._change(request, idea)
        return read(request.path(idea.file))

    def _is_note(self, exchange: ToolExchange) -> bool:
        return (
            bool(self.notes)
            and exchange.command.startswith("echo ")
            and (exchange.command.endswith(f">> {shlex.quote(self.notes)}"))
        )

    def knows_failure(self, request: AgentRequest) -> bool:
        """Its current prompt already says where the tests fail (a failing test's id, or the
        fact an idea answers), or shows a fix it recalls: it goes straight to the code instead of
        running the tests first."""
        prompt = request.prompt
        return bool(_TEST_ID.search(prompt)) or any(
            (idea.test and request.told(idea.test)) or self._recalls(request, idea)
            for idea in self.ideas
        )

    def _recalls(self, request: AgentRequest, idea: Change) -> bool:
        return idea.recalled and _told_now(request, idea.new)

    def _pending(self, request: AgentRequest) -> Change | None:
        """In a batch: the next idea answering the latest output that this turn has not made."""
        made = {
            (e.file, normalise(e.written))
            for e in request.exchanges
            if e.name in ("Edit", "Write") and not e.is_error
        }
        return next(
            (
                idea
                for idea in self._candidates(request)
                if (request.path(idea.file), normalise(idea.new)) not in made
                and normalise(idea.new)
                not in normalise(known_content(request, request.path(idea.file)))
            ),
            None,
        )

    def is_test(self, exchange: ToolExchange) -> bool:
        """A run of the test command."""
        return exchange.name == "Bash" and normalise(exchange.command) == normalise(self.test_cmd)

    def choose(self, request: AgentRequest) -> Change | None:
        """The first idea it recalls from its prompt, else the first that answers the latest test
        output of this turn (or, before any run, the failure its prompt shows), that its goal's
        requirement allows, and that it does not know to have failed (None: there is none)."""
        return next(iter(self._candidates(request)), None)

    def _candidates(self, request: AgentRequest) -> list[Change]:
        runs = [e for e in request.exchanges if self.is_test(e)]
        output = runs[-1].result if runs else request.prompt
        usable = [
            idea
            for idea in self.ideas
            if (not idea.test or idea.test in output)
            and (not idea.requires or _told_now(request, idea.requires, self.attention))
            and not failed(request, idea, self.is_test)
        ]
        return sorted(usable, key=lambda idea: not self._recalls(request, idea))

    def _after_tests(self, request: AgentRequest, run: ToolExchange, *, first: bool) -> Reply:
        if not run.is_error and self.background:
            call = ToolUse(
                "Bash",
                {
                    "command": self.background,
                    "description": "keep it running",
                    "run_in_background": True,
                },
            )
            return tools(call, say="The tests pass; I will leave it running.")
        if not run.is_error:
            return text("The tests pass." if first else "Fixed: the tests pass now.")
        turn = request.exchanges
        made = [e for e in turn if e.name in ("Edit", "Write")]
        if made and _attempts(turn, self.is_test) >= self.attempts_per_turn:
            return text(_report(made[-1], self.test_cmd, run))
        idea = self._pending(request) if self.batch else self.choose(request)
        if idea is None:
            return text(f"I have no idea left; `{self.test_cmd}` fails: {error_line(run.result)}")
        where = _failing_file(run.result)
        explored = any(e.name == "Read" and e.file == request.path(where) for e in turn)
        if first and where and not explored and where != idea.file:
            return read(request.path(where), say=f"The tests fail: {error_line(run.result)}")
        return read(request.path(idea.file), say=f"The tests fail: {error_line(run.result)}")

    def _change(self, request: AgentRequest, idea: Change) -> Reply:
        path = request.path(idea.file)
        content = known_content(request, path)
        if normalise(idea.new) in normalise(content):
            return text(
                f"{idea.file} already has `{idea.new.strip()}`, which is the right code; "
                "I see nothing more to change."
            )
        candidates = [idea.old] + [
            other.new for other in self.ideas if other.file == idea.file and other is not idea
        ]
        for old in candidates:
            if content.count(old) == 1:
                return edit(path, old, idea.new)
        return text(f"I could not find the code to change in {idea.file}.")


def failed(request: AgentRequest, idea: Change, is_test: Callable[[ToolExchange], bool]) -> bool:
    """The request shows that ``idea`` failed: its change is in a prompt (unless it is a fix
    the agent recalls), or the conversation made the change and a test run after it failed."""
    if not idea.recalled and request.told(idea.new):
        return True
    history = request.history
    wanted = normalise(idea.new)
    for index, exchange in enumerate(history):
        made = exchange.name in ("Edit", "Write") and wanted in normalise(exchange.written)
        if made and any(is_test(later) and later.is_error for later in history[index + 1 :]):
            return True
    return False


def known_content(request: AgentRequest, path: str) -> str:
    """What the conversation shows of ``path`` now: its latest full Read, with the successful
    edits made after it applied ("" when it was never read)."""
    history = request.history
    start = next(
        (
            index
            for index in range(len(history) - 1, -1, -1)
            if history[index].name == "Read"
            and history[index].file == path
            and not history[index].is_error
            and _NUMBERED.search(history[index].result)
        ),
        None,
    )
    if start is None:
        return ""
    content = _NUMBERED.sub("", history[start].result)
    for exchange in history[start + 1 :]:
        if exchange.name == "Edit" and exchange.file == path and not exchange.is_error:
            old = str(exchange.input.get("old_string", ""))
            content = content.replace(old, exchange.written, 1)
    return content


def _same(command: str, other: str) -> bool:
    return normalise(command) == normalise(other)


def _attempts(turn: tuple[ToolExchange, ...], is_test: Callable[[ToolExchange], bool]) -> int:
    """How many test runs of ``turn`` came after a change (each one tried change or batch)."""
    count, changed = 0, False
    for exchange in turn:
        if exchange.name in ("Edit", "Write"):
            changed = True
        elif changed and is_test(exchange):
            count, changed = count + 1, False
    return count


def _told_now(request: AgentRequest, fact: str, attention: int = 0) -> bool:
    """``fact`` is in the user's words that began the current turn (in their first
    ``attention`` characters, when that is not 0)."""
    wanted = normalise(fact)
    prompt = request.prompt[:attention] if attention else request.prompt
    return bool(wanted) and wanted in normalise(prompt)


def _failing_file(output: str) -> str:
    """The file of the first failing test the output names ("" when it names none)."""
    found = _TEST_ID.search(output)
    return found.group(1) if found else ""


def error_line(output: str) -> str:
    """The line of test output that best says what failed: the first of the most telling kind
    (else the last line), at most 200 characters."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    for pattern in _TELLING:
        found = next((line for line in lines if pattern.search(line)), None)
        if found is not None:
            return found.strip()[:200]
    return lines[-1].strip()[:200] if lines else "no output"


def _report(change: ToolExchange, test_cmd: str, run: ToolExchange) -> str:
    old = str(change.input.get("old_string", "")).strip()
    what = f"replaced `{old}` with `{change.written.strip()}`" if old else "rewrote it"
    name = change.file.rsplit("/", 1)[-1]
    return f"In {name} I {what}, but `{test_cmd}` still fails: {error_line(run.result)}"


# --- faults ----------------------------------------------------------------------------------

#: The API's error type and message for each status an outage can answer with.
OUTAGE_ERRORS = {
    401: ("authentication_error", "invalid x-api-key"),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization. Please try again later.",
    ),
    500: ("api_error", "Internal server error"),
    529: ("overloaded_error", "Overloaded"),
}


@attrs.define
class ApiOutage:
    """From conversation request number ``after`` on, every request gets an API error for
    ``seconds`` seconds (``inf``: for good): a rate limit (429, with ``retry-after`` saying how
    long is left), an authentication error (401), an overload (529) or a server error (500).
    The clock starts at the first request it answers."""

    status: int = attrs.field(default=429)
    after: int = 0
    seconds: float = 20.0
    _since: float | None = attrs.field(default=None, init=False, eq=False)

    @status.validator
    def _known(self, attribute: attrs.Attribute[int], value: int) -> None:
        if value not in OUTAGE_ERRORS:
            known = ", ".join(map(str, OUTAGE_ERRORS))
            raise InvalidFields([(("status",), f"must be one of {known}, got {value}")])

    def __attrs_post_init__(self) -> None:
        if not self.seconds > 0:
            raise InvalidFields([(("seconds",), f"must be more than 0, got {self.seconds}")])
        if self.after < 0:
            raise InvalidFields([(("after",), f"must be 0 or more, got {self.after}")])

    def __call__(self, request: AgentRequest) -> Reply | None:
        if request.number < self.after:
            return None
        if self._since is None:
            self._since = request.elapsed_s
        left = self._since + self.seconds - request.elapsed_s
        if left <= 0:
            return None
        kind, message = OUTAGE_ERRORS[self.status]
        headers = {"retry-after": str(math.ceil(left))} if math.isfinite(left) else {}
        return api_error(self.status, kind, message, headers=headers)


@attrs.define
class Crash:
    """Conversation request number ``at`` is answered with a ``Bash`` call that kills the CLI
    running it (``kill -9 $PPID``): the agent dies in the middle of its turn, once."""

    at: int = 2

    def __call__(self, request: AgentRequest) -> Reply | None:
        if request.number != self.at:
            return None
        return bash("kill -9 $PPID", say="Let me check something.")


#: A fault: an answer for the requests it takes over, None for the others.
Fault = Callable[[AgentRequest], "Reply | None"]


@attrs.define
class WithFaults:
    """``behaviour`` answers every request no fault takes over (the first fault wins)."""

    behaviour: Callable[[AgentRequest], Reply]
    faults: list[Fault] = attrs.Factory(list)

    def __call__(self, request: AgentRequest) -> Reply:
        for fault in self.faults:
            answer = fault(request)
            if answer is not None:
                return answer
        return self.behaviour(request)


#: The behaviour models a scenario can name, by name.
BEHAVIOURS: Mapping[str, type[Any]] = {"fixer": Fixer}
#: The faults a scenario can add to a behaviour, by ``kind``.
FAULTS: Mapping[str, type[Any]] = {"api-outage": ApiOutage, "crash": Crash}


def make_behaviour(name: str, params: Mapping[str, Any], *, source: str, prefix: str) -> Any:
    """The behaviour model ``name`` with ``params``; a bad name or parameter raises
    :class:`loopctl.ConfigError` naming ``source`` and the key (``prefix`` is where ``params``
    sit in it, such as ``agent.params``)."""
    from loopctl.config.structuring import structure
    from loopctl.configfile import ConfigError

    cls = BEHAVIOURS.get(name)
    if cls is None:
        known = ", ".join(sorted(BEHAVIOURS))
        raise ConfigError([f"{source}: unknown behaviour {name!r} (known: {known})"])
    return structure(dict(params), cls, source=source, prefix=prefix)


def make_fault(spec: Mapping[str, Any], *, source: str, prefix: str) -> Fault:
    """The fault ``spec`` describes (its ``kind`` and parameters); bad input raises
    :class:`loopctl.ConfigError` naming ``source`` and the key under ``prefix``."""
    from loopctl.config.structuring import structure
    from loopctl.configfile import ConfigError

    params = dict(spec)
    kind = params.pop("kind", None)
    cls = FAULTS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(sorted(FAULTS))
        raise ConfigError([f"{source}: {prefix}.kind: must be one of {known}, got {kind!r}"])
    fault: Fault = structure(params, cls, source=source, prefix=prefix)
    return fault


__all__ = [
    "BEHAVIOURS",
    "FAULTS",
    "ApiOutage",
    "Change",
    "Crash",
    "Fault",
    "Fixer",
    "WithFaults",
    "error_line",
    "failed",
    "known_content",
    "make_behaviour",
    "make_fault",
]
