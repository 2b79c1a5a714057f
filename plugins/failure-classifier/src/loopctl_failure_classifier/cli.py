"""``loopctl classify``: name why a loop failed, from its state directory or from raw logs.

The command is a :class:`loopctl.CliCommand` (:data:`CLASSIFY`): described here, run without
typer; registering it imports nothing but this module, and the classifier is imported when the
command runs.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loopctl import CliArgument, CliCommand, CliOption

if TYPE_CHECKING:
    from loopctl_failure_classifier.config import FailureClassifierConfig
    from loopctl_failure_classifier.offline import OfflineResult

#: :data:`loopctl_failure_classifier.arbitration.FAILURE_MODE_FILE`, named here without importing
#: the classifier (a test checks that they agree).
FAILURE_MODE_FILE = "failure-mode.json"

HELP = (
    "Classify why a loop is failing: dependency_issue, test_flakiness, infinite_loop, "
    "context_exhaustion, code_error (or a custom mode), with the evidence, the classifier that "
    "decided, and the recovery strategy to apply to the next `loopctl run`."
)
EXAMPLES = (
    "\b\nExamples:\n  loopctl classify\n  loopctl classify --log run1.log --log run2.log --json"
)


def _environment(workdir: Path) -> tuple[Any, FailureClassifierConfig, int, int, list[str]]:
    """The project (its hook relay serves the custom classifiers), this plugin's config, the
    restart limit and how much of a test log a loop keeps; a broken config or plugin setup
    degrades to the built-in classifiers and the defaults (and a None project), with a
    warning."""
    import attrs

    from loopctl_failure_classifier.config import PLUGIN_NAME, FailureClassifierConfig
    from loopctl_failure_classifier.offline import DEFAULT_OUTPUT_BYTES

    warnings: list[str] = []
    config = FailureClassifierConfig()
    max_restarts = 3
    output_bytes = DEFAULT_OUTPUT_BYTES
    project = None
    try:
        from loopctl import load_project

        project = load_project(workdir)
        max_restarts = project.max_restarts
        output_bytes = project.test_output_bytes
        try:
            section = project.plugin_config(PLUGIN_NAME, FailureClassifierConfig)
            config = attrs.evolve(section, force_mode=None)
        except Exception as exc:  # noqa: BLE001 - classify with the defaults instead
            warnings.append(f"[plugins.{PLUGIN_NAME}] ignored: {exc}")
    except Exception as exc:  # noqa: BLE001 - the built-in classifiers still work
        warnings.append(f"custom classifiers unavailable: {exc}")
    return project, config, max_restarts, output_bytes, warnings


def _crashed(project: Any, before: int) -> list[str]:
    """The classifiers (and other hook implementations) that raised since ``before`` failures
    had been counted: they were skipped, and the output says so."""
    if project is None:
        return []
    return [f"skipped after an error: {failure}" for failure in project.plugin_failures[before:]]


def no_failure(result: OfflineResult) -> bool:
    """Whether there is nothing to classify: the last test run passed and no detector (nor a
    custom classifier) found anything wrong with that pass (a pass on unchanged code after a
    failure is still flakiness)."""
    return result.evidence.tests_passed and result.verdict.detector == "builtin.default"


def _passed_text(result: OfflineResult) -> str:
    evidence = result.evidence
    where = f"in iteration {evidence.iteration}" if evidence.iteration else "in the last run"
    status = f" (the loop's status: {evidence.loop_status})" if evidence.loop_status else ""
    return f"the tests passed {where}{status}"


def render_no_failure(result: OfflineResult, failures: list[str]) -> str:
    """What ``classify`` prints when the tests passed: that there is no failure, and why."""
    lines = [f"no failure: {_passed_text(result)}; there is nothing to classify."]
    problems = [*result.evidence.problems, *result.problems, *result.verdict.rejected, *failures]
    if problems:
        lines.append("problems:")
        lines += [f"  - {p}" for p in problems]
    return "\n".join(lines) + "\n"


def no_failure_json(result: OfflineResult, failures: list[str]) -> dict[str, Any]:
    """``--json`` when the tests passed: ``failure`` false, ``mode`` and ``recovery`` null."""
    data = result.to_json()
    return {
        "failure": False,
        "mode": None,
        "confidence": None,
        "evidence": [_passed_text(result)],
        "detector": None,
        "timestamp": data["timestamp"],
        "iteration": data["iteration"],
        "forced": False,
        "candidates": [],
        "recovery": None,
        "problems": [*data["problems"], *failures],
    }


def render(result: OfflineResult, failures: list[str]) -> str:
    verdict, recovery = result.verdict, result.recovery
    lines = [
        f"mode:        {verdict.mode}",
        f"confidence:  {verdict.confidence:.2f}",
        f"detector:    {verdict.detector}",
        "evidence:",
        *[f"  - {line}" for line in verdict.evidence],
        "recovery:",
        f"  action:      {recovery.action}",
        f"  args:        {' '.join(recovery.args) or '(none)'}",
        f"  description: {recovery.description}",
        f"  max_retries_override: {recovery.max_retries_override}",
    ]
    others = [c for c in verdict.candidates[1:] if c.detector != "builtin.default"]
    if others:
        lines.append("also considered:")
        lines += [
            f"  - {c.mode} ({c.detector}, priority {c.priority}, confidence {c.confidence:.2f})"
            for c in others
        ]
    problems = [*result.evidence.problems, *result.problems, *verdict.rejected, *failures]
    if problems:
        lines.append("problems:")
        lines += [f"  - {p}" for p in problems]
    return "\n".join(lines) + "\n"


CLASSIFY = CliCommand(
    "classify",
    "loopctl_failure_classifier.cli:classify_command",
    help=HELP,
    params=[
        CliArgument(
            "artifacts_dir",
            type=Path,
            default=None,
            help="A loop's state directory (default: .loopctl); ignored with --log.",
            show_default=False,
        ),
        CliOption(
            "log",
            "--log",
            type=Path,
            multiple=True,
            help="A test log; repeat for several runs, in iteration order. Read as a loop keeps "
            "a test run's output: its first fifth and its end, within limits.test_output_bytes.",
        ),
        CliOption(
            "rerun_log",
            "--rerun-log",
            type=Path,
            help="The log of re-running the last log's failing tests.",
        ),
        CliOption(
            "same_code",
            "--same-code",
            flag=True,
            help="The logs come from the same, unchanged code.",
        ),
        CliOption(
            "workdir",
            "--workdir",
            type=Path,
            help="The project directory (tells its own modules from packages; default: the one "
            "the state records, or the current directory with --log).",
        ),
        CliOption(
            "json_output", "--json", flag=True, help="Print machine-readable JSON instead of text."
        ),
        CliOption(
            "write",
            "--write",
            flag=True,
            help=f"Also write {FAILURE_MODE_FILE} into ARTIFACTS_DIR (not when the tests "
            "passed: there is no failure).",
        ),
    ],
    epilog=EXAMPLES,
)


def _error(message: str, *, kind: str = "error") -> None:
    """``loopctl: error: …`` on stderr; a path in it may hold terminal control: sanitised."""
    import loopctl

    print(f"loopctl: {kind}: {loopctl.sanitize(loopctl.redact(message))}", file=sys.stderr)


def classify_command(
    *,
    artifacts_dir: Path | None,
    log: list[Path] | None,
    rerun_log: Path | None,
    same_code: bool,
    workdir: Path | None,
    json_output: bool,
    write: bool,
) -> int:
    """``loopctl classify`` (:data:`CLASSIFY`)."""
    import loopctl

    logs = list(log or [])
    target = artifacts_dir or Path(".loopctl")
    if not logs and not target.is_dir():
        _error(
            f"{target} is not a loop state directory; give one, or raw test logs with --log FILE"
        )
        return 2
    missing = [p for p in [*logs, *([rerun_log] if rerun_log else [])] if not p.is_file()]
    if missing:
        _error(f"no such log file: {missing[0]}")
        return 2
    import json

    from loopctl_failure_classifier.arbitration import write_failure_mode
    from loopctl_failure_classifier.offline import classify_offline

    project, config, max_restarts, output_bytes, warnings = _environment(Path.cwd())
    for warning in warnings:
        _error(warning, kind="warning")
    hook = project.hook if project is not None else None
    before = len(project.plugin_failures) if project is not None else 0
    result = classify_offline(
        state_dir=None if logs else target,
        logs=logs,
        rerun_log=rerun_log,
        same_code=same_code,
        workdir=workdir or (Path.cwd() if logs else None),
        hook=hook,
        config=config,
        max_restarts=max_restarts,
        output_bytes=output_bytes,
    )
    failures = _crashed(project, before)
    passed = no_failure(result)
    if write and not logs and not passed:
        write_failure_mode(target, result.verdict, result.recovery.to_json())
    if json_output:
        if passed:
            data = no_failure_json(result, failures)
        else:
            data = result.to_json()
            data["failure"] = True
            data["problems"] = [*data["problems"], *failures]
        text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        text = render_no_failure(result, failures) if passed else render(result, failures)
    # evidence lines come from test logs: no secret and no terminal control may reach
    # the screen (C1 controls, which JSON leaves raw, are removed from JSON output too)
    sys.stdout.write(loopctl.sanitize(loopctl.redact(text)))
    return 0
