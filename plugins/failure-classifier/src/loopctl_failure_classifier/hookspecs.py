"""The failure classifier's own hooks, added to loopctl's plugin manager through
``add_hookspecs``. Any installed plugin can implement them with ``@loopctl.hookimpl``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl import hookspec

if TYPE_CHECKING:
    from loopctl_failure_classifier.model import Classification, Evidence


@hookspec
def classify_failure(evidence: Evidence) -> Classification | Any | None:
    """Propose a failure mode for a failed iteration (or a suspicious pass).

    :param evidence: a frozen :class:`loopctl_failure_classifier.Evidence`: the test output and
        its decisive error lines, failing tests, the iteration history, the agent's outcome,
        recent events, restart archives, a confirmation rerun when one was made, the working
        directory.

    Return ``None`` (no opinion), a :class:`loopctl_failure_classifier.Classification`, a
    mapping with the same keys (``mode``, ``confidence``, ``evidence``, ``priority``,
    ``detector``), or a list of those. ``mode`` may be a built-in mode (to override a built-in
    detector: give a higher ``priority``) or a mode of your own (declare it with
    ``register_failure_modes`` so it has a recovery).

    Results: collected from every plugin, then arbitrated with the built-in detectors' by
    priority, then confidence, then detector name (see :mod:`loopctl_failure_classifier.arbitration`).
    Answers below ``min_confidence`` are dropped; malformed answers are reported and skipped; an
    implementation that raises is reported as a ``plugin.error`` and skipped.
    """


@hookspec
def register_failure_modes() -> dict[str, Any] | list[Any] | None:
    """Declare custom failure modes and their recovery.

    Return ``{"mode_name": FailureMode(...) or mapping}`` or a list of
    :class:`loopctl_failure_classifier.FailureMode`. A mapping takes the FailureMode fields:
    ``description``, ``action``, ``args``, ``max_retries_override``, ``prompt`` (a note for the
    agent's next prompt), ``command`` (run as recovery only with
    ``run_custom_recovery_commands = true``), ``restart``, ``not_agents_fault``,
    ``max_recoveries``. Built-in mode names cannot be redeclared; a name declared by two plugins
    keeps the first and reports the second.
    """
