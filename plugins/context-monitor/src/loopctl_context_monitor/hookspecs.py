"""The context monitor's own hook, so another plugin can enrich or replace the briefing.

Added to the run's plugin manager through ``add_hookspecs``; implement it like any loopctl hook::

    from loopctl import hookimpl

    @hookimpl
    def context_monitor_briefing(loop, briefing):
        return briefing.text + "\\n\\n### Notes\\n- …"
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl import hookspec

if TYPE_CHECKING:
    from loopctl import Loop
    from loopctl_context_monitor.briefing import Briefing


@hookspec(firstresult=True)
def context_monitor_briefing(loop: Loop, briefing: Briefing) -> str | None:
    """Enrich or replace the briefing a fresh session starts from after a context restart.

    :param briefing: the deterministic :class:`loopctl_context_monitor.briefing.Briefing`
        (``text``, ``sections``, ``trimmed``, ``budget``, ``trigger``).

    Return the text to use instead (it is cut to ``summary_budget_chars`` at a line boundary if
    longer), or ``None`` to keep the deterministic one. The first non-``None`` answer wins. The
    call is time-boxed by ``briefing_hook_timeout_s``: an implementation that raises, returns
    nothing usable or takes too long is ignored (with a ``context-monitor.briefing_fallback`` event)
    and the deterministic briefing is used.

    .. versionadded:: 0.1
    """
