"""The hooks this plugin adds: teach it new categorization rules, and receive each report.

Registered through ``add_hookspecs``; implement it with ``@loopctl.hookimpl``::

    from loopctl import hookimpl
    from loopctl_context_errors import Rule

    @hookimpl
    def context_errors_rules():
        return [Rule("terraform.state-lock", "RESOURCE_ERROR", r"Error acquiring the state lock",
                     needles=("state lock",), tier=1, description="another run holds the lock")]

A plugin's rules are tried before the built-in rules of the same tier.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl import hookspec

if TYPE_CHECKING:
    from loopctl import Loop
    from loopctl_context_errors.categories import Rule
    from loopctl_context_errors.report import ErrorReport


@hookspec
def context_errors_rules() -> list[Rule] | None:
    """Extra :class:`~loopctl_context_errors.categories.Rule` objects for the categorizer.

    Results: collected from every plugin. Anything that is not a ``Rule`` is ignored, and so is
    a rule whose name is already taken.

    .. versionadded:: 0.1
    """


@hookspec
def context_errors_report(loop: Loop, report: ErrorReport) -> None:
    """Called once per failed iteration, after the report is built and
    ``context-errors.context_generated`` (:data:`~loopctl_context_errors.CONTEXT_GENERATED`)
    is emitted: the place to send the report elsewhere (a pull
    request comment, a chat channel).

    :param loop: the running loop.
    :param report: the :class:`~loopctl_context_errors.report.ErrorReport`; render it with
        ``render_github``, ``render_markdown``, ``render_plain`` or ``render_json``.

    Results: ignored. Implementations run on the loop's path, so keep them quick or hand the
    work to a thread. One that raises is reported as ``plugin.error`` and the loop goes on.
    Implement it with ``@hookimpl(optionalhook=True)`` when your plugin should also load
    without this one installed.

    .. versionadded:: 0.1
    """


__all__ = ["context_errors_report", "context_errors_rules"]
