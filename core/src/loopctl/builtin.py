"""loopctl's core plugin: the prompt sections every loop needs (the goal, the loop's status,
the stuck nudge, the failed approaches and the last test run).

It is loaded by the same mechanism as every other plugin and uses only the public API, but it
cannot be disabled: without it the agent would not see its goal. The built-in agent adapters
are plugins of their own (:mod:`loopctl.agents.builtin`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl.markers import hookimpl

if TYPE_CHECKING:  # annotation only: every command that loads plugins imports this module
    from loopctl.loop import Loop
    from loopctl.model import PromptSection, TestRun

MAX_FAILING_TESTS_SHOWN = 20
MAX_ERROR_LINES_SHOWN = 20


@hookimpl(trylast=True)
def compose_prompt(loop: Loop) -> list[PromptSection]:
    from loopctl.approaches import bullet
    from loopctl.model import PromptSection

    sections = [
        PromptSection("Your Goal", loop.original_goal, priority=100, protected=True),
        PromptSection("Loop Status", _status(loop), priority=40),
    ]
    nudge = loop.stuck_nudge
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
                "\n".join(bullet(text) for text in loop.failed_approaches),
                priority=85,
            )
        )
    failures = _last_failures(loop)
    if failures:
        sections.append(PromptSection("Last Test Run", failures, priority=70))
    return sections


def _status(loop: Loop) -> str:
    lines = [
        f"This is iteration {loop.iteration + 1 if loop.iteration == 0 else loop.iteration} "
        f"of at most {loop.iteration + loop.remaining_iterations}"
        + (f", after {loop.restarts} session restart(s)." if loop.restarts else "."),
        f"After your turn, loopctl runs `{loop.test_command}` in `{loop.workdir}`; the loop ends "
        "when it passes.",
    ]
    if loop.completion_signal:
        lines.append(
            "When the goal is fully met, end your reply with this line on its own: "
            f"{loop.completion_signal}"
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
    lines += [_rerun_line(rerun) for rerun in loop.reruns]
    return "\n".join(lines)


def _rerun_line(run: TestRun) -> str:
    """A plugin's re-run of the same iteration, beside the iteration's own result."""
    if run.passed:
        verdict = "passed"
    elif run.timed_out:
        verdict = "timed out"
    else:
        verdict = f"failed with exit code {run.exit_code}"
    return f"\nRe-run by a plugin ({run.label}): `{run.command}` {verdict}."
