"""loopctl's own plugin: the built-in agent adapters and the core prompt sections.

It is loaded by the same mechanism as every other plugin (it implements ordinary hooks) but
cannot be disabled: without it there is no goal in the prompt and no agent to run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl.hookspecs import hookimpl

if TYPE_CHECKING:
    from loopctl.engine import Loop
    from loopctl.model import PromptSection

MAX_FAILING_TESTS_SHOWN = 20
MAX_ERROR_LINES_SHOWN = 20


@hookimpl(trylast=True)
def register_agents() -> list[type[Any]]:
    from loopctl.agents.aider import AiderAgent
    from loopctl.agents.claude import ClaudeAgent
    from loopctl.agents.codex import CodexAgent
    from loopctl.agents.command import CommandAgent
    from loopctl.agents.gemini import GeminiAgent
    from loopctl.agents.scripted import ScriptedAgent

    return [ClaudeAgent, CodexAgent, GeminiAgent, AiderAgent, CommandAgent, ScriptedAgent]


@hookimpl(trylast=True)
def compose_prompt(loop: Loop) -> list[PromptSection]:
    from loopctl.model import PromptSection  # imported here: `plugins list` loads this module

    sections = [
        PromptSection("Your Goal", loop.original_goal, priority=100, protected=True),
        PromptSection("Loop Status", _status(loop), priority=40),
    ]
    nudge = loop.get_value("stuck_nudge")
    if nudge:
        sections.append(
            PromptSection(
                "Try a Different Approach",
                "The last iterations failed in exactly the same way:\n\n"
                f"    {nudge}\n\n"
                "Repeating the same change will not help. Re-read the error and the code it points "
                "to, question your assumption about the cause, and try a different fix.",
                priority=90,
            )
        )
    if loop.failed_approaches:
        sections.append(
            PromptSection(
                "Approaches That Did Not Work",
                "\n".join(f"- {text}" for text in loop.failed_approaches),
                priority=85,
            )
        )
    failures = _last_failures(loop)
    if failures:
        sections.append(PromptSection("Last Test Run", failures, priority=70))
    return sections


def _status(loop: Loop) -> str:
    config = loop.config
    lines = [
        f"This is iteration {loop.iteration + 1 if loop.iteration == 0 else loop.iteration} "
        f"of at most {loop.iteration + loop.remaining_iterations}"
        + (f", after {loop.generation} session restart(s)." if loop.generation else "."),
        f"After your turn, loopctl runs `{config.test_cmd}` in `{loop.workdir}`; the loop ends "
        "when it passes.",
    ]
    if config.completion_signal:
        lines.append(
            "When the goal is fully met, end your reply with this line on its own: "
            f"{config.completion_signal}"
        )
    return "\n".join(lines)


def _last_failures(loop: Loop) -> str:
    run = loop.last_test_run
    if run is None or run.passed:
        return ""
    lines = [
        f"`{run.command}` failed"
        + (" (timed out)." if run.timed_out else f" with exit code {run.exit_code}.")
    ]
    if run.failing_tests:
        lines.append("\nFailing tests:")
        lines += [f"- {test}" for test in run.failing_tests[:MAX_FAILING_TESTS_SHOWN]]
        if len(run.failing_tests) > MAX_FAILING_TESTS_SHOWN:
            lines.append(f"- … and {len(run.failing_tests) - MAX_FAILING_TESTS_SHOWN} more")
    if run.error_lines:
        lines.append("\nErrors:")
        lines += [f"    {line}" for line in run.error_lines[:MAX_ERROR_LINES_SHOWN]]
    return "\n".join(lines)
