"""The hook this plugin adds, so other plugins can teach it new categorization rules.

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

from loopctl.hookspecs import hookspec

if TYPE_CHECKING:
    from loopctl_context_errors.categories import Rule


@hookspec
def context_errors_rules() -> list[Rule] | None:
    """Extra :class:`~loopctl_context_errors.categories.Rule` objects for the categorizer.

    Results: collected from every plugin. Anything that is not a ``Rule`` is ignored, and so is
    a rule whose name is already taken.

    .. versionadded:: 0.1
    """


__all__ = ["context_errors_rules"]
