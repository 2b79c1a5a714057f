"""The example classifier's hooks. Two hooks of loopctl-failure-classifier:

* ``register_failure_modes`` declares the ``lint_failure`` mode and its recovery;
* ``classify_failure`` proposes that mode when a failure is only lint.

Both take and return plain data (a mapping instead of a ``Classification``), so this module
imports nothing from the failure classifier; its hooks run only when that plugin is installed
(``optionalhook=True``: without it, they are simply never called).
"""

from __future__ import annotations

from typing import Any

from loopctl import hookimpl

MODE = "lint_failure"


@hookimpl(optionalhook=True)
def register_failure_modes() -> dict[str, dict[str, Any]]:
    return {
        MODE: {
            "description": "Fix the reported lint rules; the tests themselves are not failing",
            "action": "autofix_lint",
            "args": ["--max-iterations", "3"],
            "max_retries_override": 2,
            "prompt": (
                "The test command failed on lint or formatting only, not on behaviour. Fix the "
                "reported rules without changing what the code does (run the linter's fixer, "
                "e.g. `ruff check --fix .` and `ruff format .`, if the project uses ruff)."
            ),
            "command": "ruff check --fix --quiet . ; ruff format --quiet .",
            "max_recoveries": 3,
        }
    }


@hookimpl(optionalhook=True)
def classify_failure(evidence: Any) -> dict[str, Any] | None:
    from loopctl_example_classifier.lint import find_lint_failure

    if getattr(evidence, "tests_passed", False):
        return None
    finding = find_lint_failure(
        getattr(evidence, "output", "") or "", getattr(evidence, "error_lines", ()) or ()
    )
    if finding is None:
        return None
    return {
        "mode": MODE,
        "confidence": finding.confidence,
        "evidence": [f"{finding.linter} reported:", *finding.lines],
        "detector": "example-classifier.lint",
        # Above flakiness, loops and code errors (250 is the default for custom classifiers),
        # below missing dependencies (300): a lint run that cannot import a plugin is not lint.
        "priority": 260,
    }
