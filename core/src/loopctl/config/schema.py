"""The configuration classes: attrs classes with field docs in their metadata and range checks
that name the offending key."""

from __future__ import annotations

import math
import re
from typing import Any, Literal

import attrs

from loopctl.config.errors import InvalidFields, KeyPath, show

#: Hard cap on ``limits.max_restarts``: a loop that needs more restarts is not converging.
MAX_RESTARTS_CAP = 10

# Upper bounds of the numbers in the config. A bigger value is a typo (milliseconds for seconds,
# an extra zero) rather than a wish, and some would overflow the operating system's timers: a
# wait of more than about 24.8 days (2**31 ms) cannot be given to epoll.

#: Most seconds one agent turn, one idle spell or one test run may take: 7 days.
MAX_STEP_SECONDS = 7 * 24 * 3600.0
#: Most seconds a whole run may take: 30 days.
MAX_RUN_SECONDS = 30 * 24 * 3600.0
#: Most iterations of one run.
MAX_ITERATIONS_CAP = 100_000
#: Most agent crashes retried in a row.
MAX_AGENT_CRASHES_CAP = 1000
#: Most tokens a run's budget may allow (a trillion).
MAX_TOKENS_CAP = 10**12
#: Most US dollars a run's budget may allow.
MAX_COST_CAP = 1_000_000.0
#: Most bytes of output loopctl keeps in memory for one test run (100 MB).
MAX_OUTPUT_BYTES = 100_000_000
#: Most bytes of one agent transcript kept in ``logs/`` (1 GB).
MAX_LOG_BYTES = 1_000_000_000
#: Largest prompt budget in characters (10 million).
MAX_PROMPT_CHARS = 10_000_000
#: Most iterations in a row that may count toward stuck.
MAX_STUCK_WINDOW = 1000
#: Largest context window in tokens a model may be given (100 million).
MAX_CONTEXT_WINDOW = 100_000_000
#: The keys of a ``[prices.MODEL]`` table: US dollars per million tokens of each kind.
PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
#: Most US dollars per million tokens a price may say.
MAX_PRICE_PER_MTOK = 100_000.0

# --- field checks -------------------------------------------------------------------------------


def _doc(text: str, **extra: str) -> dict[str, str]:
    return {"doc": text, **extra}


def _at_least(minimum: int, value: int) -> str | None:
    return None if value >= minimum else f"must be at least {minimum}, got {value}"


def _within(minimum: int, maximum: int, value: int) -> str | None:
    """``minimum <= value <= maximum``, or what is wrong."""
    if value > maximum:
        return f"must be at most {maximum:,}, got {value:,}"
    return _at_least(minimum, value)


def _positive_seconds(value: float, maximum: float = MAX_STEP_SECONDS) -> str | None:
    """A finite number of seconds, more than 0 and at most ``maximum``, or what is wrong."""
    if math.isnan(value) or value <= 0:
        return f"must be a number of seconds greater than 0, got {show(value)}"
    if value > maximum:
        return (
            f"must be at most {maximum:,.0f} seconds ({maximum / 86400:.0f} days), "
            f"got {show(value)}"
        )
    return None


def _raise_problems(problems: list[tuple[KeyPath, str | None]]) -> None:
    found = [(path, message) for path, message in problems if message is not None]
    if found:
        raise InvalidFields(found)


# --- the configuration classes ------------------------------------------------------------------


@attrs.define(kw_only=True)
class Limits:
    """Bounds on one run; reaching any of them ends the loop with its own status."""

    max_iterations: int = attrs.field(
        default=20, metadata=_doc("Most agent turns in one run (1 to 100,000).")
    )
    max_restarts: int = attrs.field(
        default=3,
        metadata=_doc(
            "Most fresh-session restarts in one run (0 to 10; 10 is a hard cap, since a loop "
            "that needs more is not converging)."
        ),
    )
    agent_timeout_s: float = attrs.field(
        default=1800.0,
        metadata=_doc(
            "Seconds one agent turn may take before it is ended (more than 0, at most 7 days)."
        ),
    )
    idle_timeout_s: float = attrs.field(
        default=300.0,
        metadata=_doc(
            "Seconds the agent may go without any output before its turn is ended (more "
            "than 0, at most 7 days)."
        ),
    )
    agent_exit_grace_s: float = attrs.field(
        default=2.0,
        metadata=_doc(
            "Seconds an agent CLI may take to exit once its turn is over: after its final "
            "result line (Claude Code waits for a command the agent left running in the "
            "background before it exits), or after it exited while a process it started still "
            "holds its output. Then its process group is ended and the tests run (more than 0, "
            "at most 7 days)."
        ),
    )
    wall_clock_s: float = attrs.field(
        default=14400.0,
        metadata=_doc("Seconds the whole run may take (more than 0, at most 30 days)."),
    )
    test_timeout_s: float = attrs.field(
        default=900.0,
        metadata=_doc(
            "Seconds one run of the test command may take (more than 0, at most 7 days)."
        ),
    )
    max_tokens: int | None = attrs.field(
        default=None,
        metadata=_doc("Stop when the run has used this many tokens (unset: no cap; 1 to 10^12)."),
    )
    max_cost_usd: float | None = attrs.field(
        default=None,
        metadata=_doc(
            "Stop when the run's reported cost reaches this many US dollars (more than 0, at "
            "most 1,000,000)."
        ),
    )
    max_agent_crashes: int = attrs.field(
        default=3,
        metadata=_doc(
            "Agent crashes retried with a fresh session before the run stops with agent_error "
            "(0 to 1,000)."
        ),
    )
    test_output_bytes: int = attrs.field(
        default=1_000_000,
        metadata=_doc(
            "How much of the test command's output is kept (its first fifth and its tail), in "
            "bytes (1 to 100,000,000)."
        ),
    )
    agent_log_bytes: int = attrs.field(
        default=5_000_000,
        metadata=_doc(
            "How much of the agent's raw output one iteration keeps in logs/ (its start), in "
            "bytes (0 to 1,000,000,000); a last line in the file says how much was cut."
        ),
    )

    def __attrs_post_init__(self) -> None:
        restarts: str | None = None
        if self.max_restarts > MAX_RESTARTS_CAP:
            restarts = (
                f"must be at most {MAX_RESTARTS_CAP} ({MAX_RESTARTS_CAP} is a hard cap on "
                f"restarts), got {self.max_restarts}"
            )
        elif self.max_restarts < 0:
            restarts = f"must be 0 or more, got {self.max_restarts}"
        cost = self.max_cost_usd
        _raise_problems(
            [
                (("max_iterations",), _within(1, MAX_ITERATIONS_CAP, self.max_iterations)),
                (("max_restarts",), restarts),
                (("agent_timeout_s",), _positive_seconds(self.agent_timeout_s)),
                (("idle_timeout_s",), _positive_seconds(self.idle_timeout_s)),
                (("agent_exit_grace_s",), _positive_seconds(self.agent_exit_grace_s)),
                (("wall_clock_s",), _positive_seconds(self.wall_clock_s, MAX_RUN_SECONDS)),
                (("test_timeout_s",), _positive_seconds(self.test_timeout_s)),
                (
                    ("max_tokens",),
                    None
                    if self.max_tokens is None
                    else _within(1, MAX_TOKENS_CAP, self.max_tokens),
                ),
                (("max_cost_usd",), None if cost is None else _positive_dollars(cost)),
                (
                    ("max_agent_crashes",),
                    _within(0, MAX_AGENT_CRASHES_CAP, self.max_agent_crashes),
                ),
                (("test_output_bytes",), _within(1, MAX_OUTPUT_BYTES, self.test_output_bytes)),
                (("agent_log_bytes",), _within(0, MAX_LOG_BYTES, self.agent_log_bytes)),
            ]
        )


def _positive_dollars(cost: float) -> str | None:
    if math.isnan(cost) or cost <= 0:
        return f"must be greater than 0, got {show(cost)}"
    if cost > MAX_COST_CAP:
        return f"must be at most {MAX_COST_CAP:,.0f}, got {show(cost)}"
    return None


@attrs.define(kw_only=True)
class Stuck:
    """When the loop counts as stuck: the same failure, iteration after iteration."""

    enabled: bool = attrs.field(default=True, metadata=_doc("Detect stuck loops at all."))
    window: int = attrs.field(
        default=3,
        metadata=_doc(
            "Iterations in a row with the same error fingerprint or failing-test set and no "
            "progress that count as stuck (2 to 1,000)."
        ),
    )
    exempt: list[str] = attrs.field(
        factory=list,
        metadata=_doc(
            "Regular expressions for error lines that are expected to repeat: lines matching "
            "any of them never count toward stuck."
        ),
    )

    def __attrs_post_init__(self) -> None:
        problems: list[tuple[KeyPath, str | None]] = [
            (("window",), _within(2, MAX_STUCK_WINDOW, self.window))
        ]
        for index, pattern in enumerate(self.exempt):
            try:
                re.compile(pattern)
            except (re.error, OverflowError, RecursionError, ValueError) as exc:
                problems.append(
                    (("exempt", index), f"invalid regular expression {show(pattern)}: {exc}")
                )
        _raise_problems(problems)

    def exempt_patterns(self) -> list[re.Pattern[str]]:
        """The ``exempt`` expressions, compiled (they are known to compile)."""
        return [re.compile(pattern) for pattern in self.exempt]


@attrs.define(kw_only=True)
class PromptConfig:
    """How the agent prompt is put together."""

    budget_chars: int = attrs.field(
        default=24000,
        metadata=_doc(
            "Size budget of the prompt in characters (500 to 10,000,000); over it, the "
            "lowest-priority sections are trimmed first. The goal may take at most half of it."
        ),
    )

    def __attrs_post_init__(self) -> None:
        _raise_problems([(("budget_chars",), _within(500, MAX_PROMPT_CHARS, self.budget_chars))])


#: The keys of ``[plugins]`` that are settings; every other key is a plugin's own section.
PLUGINS_SETTING_KEYS = ("enable", "disable", "strict")


@attrs.define(kw_only=True)
class PluginsConfig:
    """Which plugins run, and their own sections (``[plugins.NAME]``)."""

    enable: list[str] | None = attrs.field(
        default=None,
        metadata=_doc("Allow-list of plugin names to load; unset loads every installed plugin."),
    )
    disable: list[str] = attrs.field(
        factory=list, metadata=_doc("Plugin names never to load, even if installed or enabled.")
    )
    strict: bool = attrs.field(
        default=False,
        metadata=_doc(
            "Let plugin errors end the run instead of being reported and skipped "
            "(for plugin authors)."
        ),
    )
    sections: dict[str, dict[str, Any]] = attrs.field(
        factory=dict,
        metadata=_doc(
            "A plugin's own settings: every other table under [plugins], named after the "
            "plugin and checked by it.",
            doc_path="<plugin>",
            doc_type="table",
        ),
    )


@attrs.define(kw_only=True)
class LoopctlConfig:
    """Everything loopctl reads from its configuration sources."""

    agent: str | None = attrs.field(
        default=None,
        metadata=_doc(
            "The agent adapter to run: claude, codex, gemini, aider, command, scripted, or one "
            "a plugin adds."
        ),
    )
    agent_cmd: str | None = attrs.field(
        default=None,
        metadata=_doc("Any command line to run as the agent; selects the `command` adapter."),
    )
    test_cmd: str | None = attrs.field(
        default=None,
        metadata=_doc("The command that decides success: the loop is done when it exits 0."),
    )
    test_report: str | None = attrs.field(
        default=None,
        metadata=_doc(
            "A JUnit XML report the test command writes (a path or a glob such as "
            "'build/test-results/**/*.xml', relative to the project): its failing tests and "
            "counts are read before the output. Unset: pytest commands get --junitxml (into a "
            "temporary directory); 'off': the output only."
        ),
    )
    session: Literal["fresh", "resume"] = attrs.field(
        default="fresh",
        metadata=_doc(
            "`fresh` starts a new agent session every iteration; `resume` continues the last one."
        ),
    )
    state_dir: str = attrs.field(
        default=".loopctl",
        metadata=_doc("Where run records are kept, relative to the project directory."),
    )
    completion_signal: str | None = attrs.field(
        default=None,
        metadata=_doc(
            "When set (e.g. LOOPCTL_DONE), success also needs this text as a whole line of the "
            "agent's final message."
        ),
    )
    test_first: bool = attrs.field(
        default=True,
        metadata=_doc(
            "Run the test command once before the first agent turn of a new run (not on "
            "resume): its failure goes into the first prompt, a failure that passes on one "
            "immediate re-run counts as flaky, and tests that already pass end the run "
            "complete with no agent turn (unless completion_signal is set)."
        ),
    )
    required_plugins: list[str] = attrs.field(
        factory=list,
        metadata=_doc(
            "Plugins the project needs, as requirement strings such as 'context-monitor>=0.1'."
        ),
    )
    withhold_env: list[str] = attrs.field(
        factory=list,
        metadata=_doc(
            "Environment variables the agent, the test command and every other process "
            "loopctl starts never see, by name or shell-style pattern ('GITHUB_TOKEN', "
            "'AWS_*'): secrets loopctl's plugins need but the agent should not read. The test "
            "command is included because the agent writes the tests and reads their output. "
            "Their values are also masked in everything loopctl writes or prints."
        ),
    )
    limits: Limits = attrs.field(
        factory=Limits, metadata=_doc("Bounds on iterations, restarts, time, tokens and cost.")
    )
    stuck: Stuck = attrs.field(factory=Stuck, metadata=_doc("Stuck-loop detection."))
    prompt: PromptConfig = attrs.field(
        factory=PromptConfig, metadata=_doc("How the agent prompt is put together.")
    )
    plugins: PluginsConfig = attrs.field(
        factory=PluginsConfig, metadata=_doc("Which plugins run, and their own sections.")
    )
    agents: dict[str, dict[str, Any]] = attrs.field(
        factory=dict,
        metadata=_doc(
            "Settings of one agent adapter ([agents.NAME]), checked by that adapter.",
            doc_path="agents.<agent>",
            doc_type="table",
        ),
    )
    models: dict[str, int] = attrs.field(
        factory=dict,
        metadata=_doc(
            "Context window in tokens of a model, by model name; extends or overrides the "
            "built-in table.",
            doc_path="models.<model>",
            doc_type="int",
        ),
    )
    model: str | None = attrs.field(
        default=None,
        metadata=_doc(
            "The model the agent should use, whichever adapter runs (`--model`); wins over "
            "`[agents.NAME] model`."
        ),
    )
    prices: dict[str, dict[str, float]] = attrs.field(
        factory=dict,
        metadata=_doc(
            "Prices of a model in US dollars per million tokens (`input`, `output`, and "
            "optionally `cache_read`, `cache_write`), by model name: they price the tokens of "
            "agents that report no cost, before the `genai-prices` table (`loopctl-core[prices]`).",
            doc_path="prices.<model>",
            doc_type="table",
        ),
    )

    def __attrs_post_init__(self) -> None:
        texts = ("agent", "agent_cmd", "test_cmd", "test_report", "state_dir")
        _raise_problems(
            [
                *(((name,), _not_blank(getattr(self, name))) for name in texts),
                (("completion_signal",), _one_line(self.completion_signal)),
                *_requirement_problems(self.required_plugins),
                *(
                    (("withhold_env", index), _variable_pattern(pattern))
                    for index, pattern in enumerate(self.withhold_env)
                ),
                *(
                    (("models", model), _context_window(window))
                    for model, window in self.models.items()
                ),
                (("model",), _not_blank(self.model)),
                *(
                    problem
                    for model, table in self.prices.items()
                    for problem in _price_problems(model, table)
                ),
            ]
        )


def _not_blank(text: str | None) -> str | None:
    return "must not be empty" if text is not None and not text.strip() else None


def _one_line(text: str | None) -> str | None:
    if text is not None and (not text.strip() or "\n" in text or "\r" in text):
        return f"must be one non-empty line of text, got {show(text)}"
    return None


def _requirement_problems(requirements: list[str]) -> list[tuple[KeyPath, str | None]]:
    if not requirements:
        return []  # packaging is slow to import; most configs need none
    from packaging.requirements import InvalidRequirement, Requirement

    problems: list[tuple[KeyPath, str | None]] = []
    for index, requirement in enumerate(requirements):
        try:
            Requirement(requirement)
        except InvalidRequirement as exc:
            problems.append(
                (
                    ("required_plugins", index),
                    f"invalid requirement {show(requirement)} (expected something like "
                    f"'context-monitor>=0.1'): {str(exc).splitlines()[0]}",
                )
            )
    return problems


def _variable_pattern(pattern: str) -> str | None:
    if not pattern.strip() or "=" in pattern:
        return f"must be a variable name or a pattern such as 'AWS_*', got {show(pattern)}"
    return None


def _price_problems(model: str, table: dict[str, float]) -> list[tuple[KeyPath, str | None]]:
    problems: list[tuple[KeyPath, str | None]] = []
    for key, value in table.items():
        if key not in PRICE_KEYS:
            problems.append((("prices", model, key), f"unknown price; use {', '.join(PRICE_KEYS)}"))
        elif math.isnan(value) or not 0 <= value <= MAX_PRICE_PER_MTOK:
            problems.append(
                (
                    ("prices", model, key),
                    f"must be US dollars per million tokens (0 to {MAX_PRICE_PER_MTOK:,.0f}), "
                    f"got {show(value)}",
                )
            )
    for key in ("input", "output"):
        if key not in table:
            problems.append((("prices", model), f"needs `{key}` (US dollars per million tokens)"))
    return problems


def _context_window(window: int) -> str | None:
    if window < 1 or window > MAX_CONTEXT_WINDOW:
        return f"must be a context window in tokens (1 to {MAX_CONTEXT_WINDOW:,}), got {window:,}"
    return None


for _cls in (Limits, Stuck, PromptConfig, PluginsConfig, LoopctlConfig):
    attrs.resolve_types(_cls)
