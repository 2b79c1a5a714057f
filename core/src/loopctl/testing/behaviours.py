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
    and ends the turn without a change. ``attempts_per_turn`` lets it try more than one idea in
    a turn; ``reads_first`` names files it reads at the start of every turn before anything else
    (a habit that fills a long session's context).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from loopctl.config.errors import InvalidFields
from loopctl.testing.conversation import AgentRequest, ToolExchange, normalise
from loopctl.testing.model_server import Reply, bash, edit, read, text

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
    """One idea for the fix: in ``file`` (relative to the project), ``old`` becomes ``new``."""

    file: str
    old: str
    new: str = attrs.field()

    @new.validator
    def _differs(self, attribute: attrs.Attribute[str], value: str) -> None:
        if normalise(value) == normalise(self.old):
            raise InvalidFields([(("new",), f"the same as old ({value!r}): not a change")])


def _at_least_one(instance: Any, attribute: attrs.Attribute[Any], value: Sequence[Any]) -> None:
    if not value:
        raise InvalidFields([((attribute.name,), "must hold at least one item")])


def _positive(instance: Any, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise InvalidFields([((attribute.name,), f"must be at least 1, got {value}")])


@attrs.define
class Fixer:
    """The competent agent with a list of ideas; see the module's docstring for its rules."""

    #: The command it runs to see whether the tests pass (its exact Bash command line).
    test_cmd: str
    #: The candidate changes, in the order it would try them.
    ideas: list[Change] = attrs.field(validator=_at_least_one)
    #: How many ideas it tries in one turn before ending the turn.
    attempts_per_turn: int = attrs.field(default=1, validator=_positive)
    #: Files (relative to the project) it reads at the start of every turn.
    reads_first: list[str] = attrs.Factory(list)

    def __call__(self, request: AgentRequest) -> Reply:
        turn = request.exchanges
        for name in self.reads_first:
            if not any(e.name == "Read" and e.file == request.path(name) for e in turn):
                return read(request.path(name), say=f"First, {name}.")
        tests = [e for e in turn if self.is_test(e)]
        if not tests:
            return bash(self.test_cmd, say="Let me run the tests.")
        last = turn[-1]
        if self.is_test(last):
            return self._after_tests(request, last, first=len(tests) == 1)
        if last.name in ("Edit", "Write"):
            return bash(self.test_cmd, say="Now the tests again.")
        idea = self.choose(request)
        if idea is None:
            return text("I have no other idea for this failure.")
        if last.name == "Read" and last.file == request.path(idea.file):
            return self._change(request, idea)
        return read(request.path(idea.file))

    def is_test(self, exchange: ToolExchange) -> bool:
        """A run of the test command."""
        return exchange.name == "Bash" and normalise(exchange.command) == normalise(self.test_cmd)

    def choose(self, request: AgentRequest) -> Change | None:
        """The first idea it does not know to have failed (None: all of them failed)."""
        return next((idea for idea in self.ideas if not failed(request, idea, self.is_test)), None)

    def _after_tests(self, request: AgentRequest, run: ToolExchange, *, first: bool) -> Reply:
        if not run.is_error:
            return text("The tests pass." if first else "Fixed: the tests pass now.")
        made = [e for e in request.exchanges if e.name in ("Edit", "Write")]
        if len(made) >= self.attempts_per_turn:
            return text(_report(made[-1], self.test_cmd, run))
        idea = self.choose(request)
        if idea is None:
            return text(f"I have no other idea; `{self.test_cmd}` fails: {error_line(run.result)}")
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
    """The request shows that ``idea`` failed: its change is in a prompt, or the conversation
    made the change and a test run after it failed."""
    if request.told(idea.new):
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


#: The behaviour models a scenario can name, by name.
BEHAVIOURS: Mapping[str, type[Any]] = {"fixer": Fixer}


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


__all__ = [
    "BEHAVIOURS",
    "Change",
    "Fixer",
    "error_line",
    "failed",
    "known_content",
    "make_behaviour",
]
