"""The published schema of ``events.jsonl``: every event loopctl writes, and those plugins declare.

Each line is a JSON object with at least ``type`` (string) and ``ts`` (seconds since the epoch),
usually ``iteration``, and the event's own fields. :data:`CORE_EVENTS` describes the engine's
events; plugins add theirs through the ``register_event_schemas`` hook. ``loopctl events schema``
prints the combined JSON Schema (draft 2020-12); events of types nobody declared still validate
against the common part, so a third-party plugin's events never make a file invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

STR = {"type": "string"}
INT = {"type": "integer"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
OPT_STR = {"type": ["string", "null"]}
OPT_INT = {"type": ["integer", "null"]}
OPT_NUM = {"type": ["number", "null"]}
STR_LIST = {"type": "array", "items": STR}
#: Token counts of an agent turn, or null when the agent reported none.
USAGE = {
    "type": ["object", "null"],
    "properties": {
        "input_tokens": INT,
        "output_tokens": INT,
        "cache_creation_input_tokens": INT,
        "cache_read_input_tokens": INT,
    },
    "required": [
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "input_tokens",
        "output_tokens",
    ],
}


#: A setting ``resume`` changed: its value before and after.
CHANGE = {"type": "object", "properties": {"from": {}, "to": {}}, "required": ["from", "to"]}


class EventField:
    """JSON Schema fragments for the fields of an event, for :func:`define_event`."""

    STR = STR
    INT = INT
    NUM = NUM
    BOOL = BOOL
    OPT_STR = OPT_STR
    OPT_INT = OPT_INT
    OPT_NUM = OPT_NUM
    STR_LIST = STR_LIST


def define_event(
    description: str,
    required: Mapping[str, Any],
    optional: Mapping[str, Any] | None = None,
    *,
    line: str | None = None,
) -> dict[str, Any]:
    """The schema of one event type: its description, required and optional fields.

    ``line`` is how the plain and live views show it: a ``str.format`` template over the
    event's fields (``"context {percent}% full"``); ``""`` hides it there (it is still written
    to events.jsonl). None (the default): the views show the event's ``summary`` field, a line
    in words the plugin writes when it emits the event (``loop.emit(TYPE, ..., summary="failure
    classified as a dependency issue")``, ``""`` to hide it), for what a template cannot say;
    an event with neither reads as its name and its fields in words. Every line is sanitised.
    """
    spec: dict[str, Any] = {
        "description": description,
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
    }
    if line is not None:
        spec["line"] = line
    return spec


#: The engine's events, by type.
CORE_EVENTS: dict[str, dict[str, Any]] = {
    "loop.start": define_event(
        "A run begins.",
        {
            "goal": STR,
            "agent": STR,
            "test_cmd": STR,
            "session_mode": STR,
            "max_iterations": INT,
            "plugins": STR_LIST,
        },
    ),
    "loop.resume": define_event(
        "A run continues from its state files (`loopctl resume`), under the settings it was "
        "started with; `changed` holds those `resume` was told to change, by setting "
        "(`limits.max_iterations`, `agent`, `agent_cmd`, `no_plugins`, …), as "
        "`{from, to}`.",
        {
            "goal": STR,
            "agent": STR,
            "test_cmd": STR,
            "session_mode": STR,
            "max_iterations": INT,
            "plugins": STR_LIST,
        },
        {"changed": {"type": "object", "additionalProperties": CHANGE}},
    ),
    "loop.warning": define_event(
        "A config or state problem that did not stop the run.", {"message": STR}
    ),
    "iteration.start": define_event(
        "An iteration begins.", {"restarts": INT, "session_id": OPT_STR}
    ),
    "agent.start": define_event(
        "The agent turn begins.", {"agent": STR, "prompt_chars": INT, "trimmed": STR_LIST}
    ),
    "agent.end": define_event(
        "The agent turn ended. tokens (the turn's total) and usage (by kind) are null when the "
        "agent reported no usage, never 0. cost_estimated is true when cost_usd was estimated "
        "from the token counts (the CLI reported no cost).",
        {
            "outcome": {"enum": ["ok", "error"]},
            "error_kind": OPT_STR,
            "message": STR,
            "tokens": OPT_INT,
            "usage": USAGE,
            "context_tokens": OPT_INT,
            "context_window": OPT_INT,
            "cost_usd": OPT_NUM,
            "tool_calls": INT,
            "duration_s": NUM,
            "interrupted": BOOL,
        },
        {"cost_estimated": BOOL},
    ),
    "agent.turn_stopped": define_event(
        "A plugin ended the turn at a message boundary.", {"reason": STR, "message": STR}
    ),
    "agent.rate_limit_wait": define_event(
        "Waiting out a rate limit before retrying the iteration.",
        {"seconds": NUM, "until": STR, "message": STR},
    ),
    "agent.rate_limit_waiting": define_event(
        "Still waiting out a rate limit.", {"seconds_left": NUM}
    ),
    "tests.start": define_event(
        "The test command starts. label is there when the tests run again: a plugin's "
        "loop.run_tests, or loopctl's own re-run (flaky-check) of a failure before the first "
        "turn; the iteration's own run has none. Before the first turn (test_first) the "
        "iteration is null.",
        {"command": STR},
        {"label": STR},
    ),
    "tests.end": define_event(
        "The test command ended.",
        {
            "command": STR,
            "passed": BOOL,
            "exit_code": OPT_INT,
            "timed_out": BOOL,
            "failing": INT,
            "failing_tests": STR_LIST,
            "error_count": INT,
            "runner": STR,
            "duration_s": NUM,
        },
        {"label": STR},
    ),
    "tests.flaky": define_event(
        "Before the first agent turn the tests failed, then passed on an immediate re-run with "
        "nothing changed: a flaky failure, taken as a pass (failing_tests: the ones that failed).",
        {"command": STR, "failing_tests": STR_LIST, "error_lines": STR_LIST},
    ),
    "iteration.end": define_event(
        "The iteration was recorded in iterations.jsonl.",
        {
            "tests_passed": BOOL,
            "failing": INT,
            "error_fingerprint": STR,
            "decision": {"enum": ["continue", "restart", "stop"]},
            "reason": STR,
            "duration_s": NUM,
        },
    ),
    "loop.stuck": define_event(
        "Stuck detection escalated.",
        {"escalation": {"enum": ["nudge", "restart", "stop"]}, "streak": INT, "fingerprint": STR},
    ),
    "loop.failed_approach": define_event(
        "An approach was added to the protected list of failed approaches, or an entry of it "
        "updated in place (``updated``: the same approach, more iterations).",
        {"text": STR, "source": STR},
        {"updated": BOOL},
    ),
    "loop.not_agents_fault": define_event(
        "An iteration's failure is not counted against the agent.", {"reason": STR, "source": STR}
    ),
    "loop.original_goal_restored": define_event(
        "A plugin's resolve_original_goal put back the original goal the run carries.",
        {"source": STR, "previous_chars": INT, "chars": INT},
    ),
    "loop.working_goal_set": define_event(
        "A plugin set the working goal.", {"source": STR, "chars": INT}
    ),
    "loop.iteration_budget_reduced": define_event(
        "A plugin's decision lowered the iteration limit.",
        {"max_iterations": INT, "reason": STR, "source": STR},
    ),
    "loop.completion_vetoed": define_event(
        "The tests passed but a plugin vetoed completion.", {"reason": STR}
    ),
    "loop.completion_signal_missing": define_event(
        "The tests passed but the agent did not give the completion signal.", {"signal": OPT_STR}
    ),
    "loop.restart": define_event(
        "The agent session was restarted.",
        {"number": INT, "reason": STR, "message": STR, "archive": STR},
    ),
    "plugin.error": define_event(
        "A plugin's hook raised; it was skipped.",
        {"plugin": STR, "hook": STR, "error": STR, "traceback": STR},
    ),
    "plugin.hung": define_event(
        "A plugin's hook was still running at the wall-clock limit; it was stopped, the plugin's "
        "hooks are not called again, and the loop ends with status wall_clock.",
        {"plugin": STR, "hook": STR, "running_s": NUM, "wall_clock_s": NUM},
    ),
    "state.write_error": define_event(
        "A state file could not be written, or a plugin's background task raised.",
        {"error": STR},
    ),
    "loop.end": define_event(
        "The run ended (written after the report, before the final loop-state.md).",
        {
            "status": STR,
            "reason": STR,
            "message": STR,
            "exit_code": INT,
            "iterations": INT,
            "restarts": INT,
        },
    ),
}


def event_schema(extra: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The JSON Schema of an events.jsonl line, for the core's events and ``extra`` ones."""
    events = {**CORE_EVENTS, **(extra or {})}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://loopctl.invalid/schemas/event.json",
        "title": "loopctl event (one line of events.jsonl)",
        "type": "object",
        "required": ["type", "ts"],
        "properties": {
            "type": {"type": "string", "minLength": 1},
            "ts": {"type": "number"},
            "iteration": {"type": ["integer", "null"]},
            "summary": {
                "type": "string",
                "description": "How the event reads to a person (the views' line), written by "
                "the plugin that emitted it; optional.",
            },
        },
        "allOf": [
            {
                "if": {"properties": {"type": {"const": name}}, "required": ["type"]},
                "then": {
                    "description": spec.get("description", ""),
                    "properties": dict(spec.get("properties", {})),
                    "required": list(spec.get("required", [])),
                },
            }
            for name, spec in sorted(events.items())
        ],
    }
