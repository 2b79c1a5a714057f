"""The loopctl hooks of loopctl-github (entry point ``github``).

Cheap to import (``loopctl plugins list`` imports it): everything else is imported inside the
hooks. No hook here touches the network: the comment is posted from a background thread, and
only ``on_loop_end`` waits for it, bounded by ``flush_timeout_s``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl import hookimpl

if TYPE_CHECKING:
    from loopctl import Loop, LoopOutcome, RunOption

NAME = "github"


@hookimpl
def register_config() -> dict[str, type]:
    from loopctl_github.config import GitHubConfig

    return {NAME: GitHubConfig}


@hookimpl
def register_event_schemas() -> dict[str, dict[str, Any]]:
    from loopctl_github.events import event_schemas

    return event_schemas()


@hookimpl
def register_run_options() -> list[RunOption]:
    from loopctl import RunOption

    return [
        RunOption(
            "--github-issue",
            f"plugins.{NAME}.issue",
            help="Post the context-error report on this GitHub issue or pull request number.",
            metavar="N",
        ),
        RunOption(
            "--github-comment-key",
            f"plugins.{NAME}.comment_key",
            help="Which loopctl comment to update (tells apart loops with the same goal).",
            metavar="KEY",
        ),
    ]


@hookimpl
def on_loop_start(loop: Loop) -> None:
    from loopctl_github import runtime

    runtime.start(loop)


@hookimpl(optionalhook=True)
def context_errors_report(loop: Loop, report: Any) -> None:
    """loopctl-context-errors' hook: a failed iteration's report, to post in the background."""
    from loopctl_github import runtime

    runtime.on_report(loop, report)


@hookimpl
def before_iteration(loop: Loop) -> None:
    from loopctl_github import runtime

    runtime.drain(loop)


@hookimpl
def after_iteration(loop: Loop) -> None:
    """Every iteration ends here, however it ended: emit what the poster did meanwhile."""
    from loopctl_github import runtime

    runtime.drain(loop)


@hookimpl
def on_loop_end(loop: Loop, outcome: LoopOutcome) -> None:
    from loopctl_github import runtime

    runtime.end(loop, outcome)
