"""The plugin's config section, ``[plugins.failure-classifier]``."""

from __future__ import annotations

from typing import Any

import attrs

from loopctl_failure_classifier.model import BUILTIN_MODES, valid_mode_name

PLUGIN_NAME = "failure-classifier"

#: How many times per run each built-in mode's recovery may be applied before the loop stops
#: with that mode as the reason; 0 means no limit (a code error's recovery is the loop itself).
DEFAULT_MAX_RECOVERIES: dict[str, int] = {
    "dependency_issue": 2,
    "test_flakiness": 3,
    "infinite_loop": 2,
    "context_exhaustion": 3,
    "code_error": 0,
    "broken_test_command": 0,
}


def _check_force_mode(instance: Any, attribute: Any, value: str | None) -> None:
    if value is not None and not valid_mode_name(value):
        raise ValueError(
            f"{value!r} is not a failure mode name; use one of {', '.join(BUILTIN_MODES)} "
            "or a mode a custom classifier declares"
        )


def _check_unit(instance: Any, attribute: Any, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"must be between 0 and 1, got {value}")


def _check_positive(instance: Any, attribute: Any, value: float) -> None:
    if value <= 0:
        raise ValueError(f"must be more than 0, got {value}")


def _check_recoveries(instance: Any, attribute: Any, value: dict[str, int]) -> None:
    for mode, limit in value.items():
        if not valid_mode_name(mode):
            raise ValueError(f"{mode!r} is not a failure mode name")
        if limit < 0:
            raise ValueError(f"{mode}: must be 0 (no limit) or more, got {limit}")


@attrs.define(kw_only=True)
class FailureClassifierConfig:
    """``[plugins.failure-classifier]`` in ``loopctl.toml``."""

    #: Skip classification and treat every failure as this mode (``--failure-mode``): for
    #: testing a recovery, not for production runs (a ``loop.failure_mode_forced`` event says so).
    force_mode: str | None = attrs.field(default=None, validator=_check_force_mode)
    #: Confirm suspected flakiness by re-running only the failing tests, with no code change.
    rerun_failed_tests: bool = True
    #: The rerun command, when the automatic one (pytest ``--lf``, unittest ids, or the whole
    #: test command) does not fit; ``{tests}`` is replaced by the failing test ids.
    rerun_cmd: str | None = None
    #: Whether a pass that comes only on rerun completes the loop (it is reported as flaky either
    #: way). Default: it does not, and the next prompt names the flaky tests.
    flaky_pass_completes: bool = False
    #: K: the same failure this many iterations in a row, with no progress, is an infinite loop.
    loop_window: int = attrs.field(default=3, validator=attrs.validators.ge(2))
    #: Infinite-loop recovery: the remaining iteration budget is cut to at most this.
    loop_max_remaining: int = attrs.field(default=10, validator=attrs.validators.ge(1))
    #: Opt in to running the project's dependency reinstall command as recovery.
    run_reinstall: bool = False
    #: The reinstall command; unset: detected from the lock files (npm ci, uv sync, …).
    reinstall_cmd: str | None = None
    #: Opt in to running the ``command`` a custom mode declares as its recovery.
    run_custom_recovery_commands: bool = False
    #: Seconds a reinstall or custom recovery command may take.
    recovery_timeout_s: float = attrs.field(default=600.0, validator=_check_positive)
    #: Per-mode limits on recoveries per run (0: no limit), merged over the defaults.
    max_recoveries: dict[str, int] = attrs.field(factory=dict, validator=_check_recoveries)
    #: Custom classifications less confident than this are ignored.
    min_confidence: float = attrs.field(default=0.5, validator=_check_unit)

    def recovery_limit(self, mode: str, declared: int | None = None) -> int:
        if mode in self.max_recoveries:
            return self.max_recoveries[mode]
        if mode in DEFAULT_MAX_RECOVERIES:
            return DEFAULT_MAX_RECOVERIES[mode]
        return 3 if declared is None else declared
