"""loopctl-failure-classifier: name why a loop is failing, change strategy, and let other plugins
add classifiers.

The names custom classifiers use are importable from here (loaded on first use, so importing
the plugin module stays cheap): :class:`Evidence`, :class:`Classification`, :class:`FailureMode`,
:class:`RecoveryStrategy`, :class:`Verdict`, the mode constants, :func:`classify`, and the
names of the plugin's events (:data:`CLASSIFIED`, :data:`RECOVERY_APPLIED` … from
:mod:`loopctl_failure_classifier.events`), for plugins that subscribe to them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:
    from loopctl_failure_classifier.arbitration import classify
    from loopctl_failure_classifier.events import (
        CLASSIFIED,
        MODE_FORCED,
        RECOVERY_APPLIED,
        RECOVERY_LIMIT,
        RERUN,
        WARNING,
    )
    from loopctl_failure_classifier.model import (
        BROKEN_TEST_COMMAND,
        BUILTIN_MODES,
        BUILTIN_PRIORITY,
        CODE_ERROR,
        CONTEXT_EXHAUSTION,
        DEFAULT_CUSTOM_PRIORITY,
        DEPENDENCY_ISSUE,
        INFINITE_LOOP,
        TEST_FLAKINESS,
        Classification,
        Evidence,
        FailureMode,
        RecoveryStrategy,
        Rerun,
        Verdict,
    )
    from loopctl_failure_classifier.offline import classify_offline
    from loopctl_failure_classifier.recovery import strategy

_MODEL_NAMES = (
    "BUILTIN_MODES",
    "BUILTIN_PRIORITY",
    "BROKEN_TEST_COMMAND",
    "CODE_ERROR",
    "CONTEXT_EXHAUSTION",
    "DEFAULT_CUSTOM_PRIORITY",
    "DEPENDENCY_ISSUE",
    "INFINITE_LOOP",
    "TEST_FLAKINESS",
    "Classification",
    "Evidence",
    "FailureMode",
    "RecoveryStrategy",
    "Rerun",
    "Verdict",
)
_EVENT_NAMES = (
    "CLASSIFIED",
    "MODE_FORCED",
    "RECOVERY_APPLIED",
    "RECOVERY_LIMIT",
    "RERUN",
    "WARNING",
)
_LAZY = {
    **{name: "loopctl_failure_classifier.model" for name in _MODEL_NAMES},
    **{name: "loopctl_failure_classifier.events" for name in _EVENT_NAMES},
    "classify": "loopctl_failure_classifier.arbitration",
    "classify_offline": "loopctl_failure_classifier.offline",
    "strategy": "loopctl_failure_classifier.recovery",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'loopctl_failure_classifier' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


__all__ = [
    "BROKEN_TEST_COMMAND",
    "BUILTIN_MODES",
    "BUILTIN_PRIORITY",
    "CLASSIFIED",
    "CODE_ERROR",
    "CONTEXT_EXHAUSTION",
    "DEFAULT_CUSTOM_PRIORITY",
    "DEPENDENCY_ISSUE",
    "INFINITE_LOOP",
    "MODE_FORCED",
    "RECOVERY_APPLIED",
    "RECOVERY_LIMIT",
    "RERUN",
    "TEST_FLAKINESS",
    "WARNING",
    "Classification",
    "Evidence",
    "FailureMode",
    "RecoveryStrategy",
    "Rerun",
    "Verdict",
    "__version__",
    "classify",
    "classify_offline",
    "strategy",
]
