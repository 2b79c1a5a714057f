"""Classifying outside a loop: a finished (or running) loop's state directory, or raw test logs.
This is what ``loopctl classify`` and the accuracy measurement call.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from loopctl_failure_classifier.arbitration import (
    Classifier,
    classify,
    forced_verdict,
    hook_classifiers,
    hook_modes,
)
from loopctl_failure_classifier.config import FailureClassifierConfig
from loopctl_failure_classifier.detectors import Settings
from loopctl_failure_classifier.evidence import from_logs, from_state_dir
from loopctl_failure_classifier.model import Evidence, FailureMode, RecoveryStrategy, Verdict
from loopctl_failure_classifier.recovery import strategy


class OfflineResult(NamedTuple):
    """What :func:`classify_offline` found (a NamedTuple: cheaper to define than an attrs
    class, on the start-up of ``loopctl classify``)."""

    verdict: Verdict
    recovery: RecoveryStrategy
    evidence: Evidence
    #: Custom modes refused, classifiers that failed: reported, never fatal.
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        data = self.verdict.to_json()
        data["recovery"] = self.recovery.to_json()
        data["problems"] = [*self.evidence.problems, *self.problems, *self.verdict.rejected]
        return data


#: ``limits.test_output_bytes`` by default: how much of a test run's output a loop keeps.
DEFAULT_OUTPUT_BYTES = 1_000_000


def read_log(path: Path, limit: int = DEFAULT_OUTPUT_BYTES) -> tuple[str, str | None]:
    """A log's text as a loop keeps a test run's output: the whole of it up to ``limit`` bytes,
    else its first fifth and its end with a line saying how much was left out between them (a
    10 MB log is classified in the time of 1 MB, and as the loop would have classified it);
    ``("", why)`` when it cannot be read."""
    try:
        with open(path, "rb") as stream:
            size = stream.seek(0, 2)
            stream.seek(0)
            if size <= limit:
                return stream.read().decode("utf-8", errors="replace"), None
            head = stream.read(limit // 5)
            stream.seek(size - (limit - len(head)))
            tail = stream.read()
    except OSError as exc:
        return "", f"{path}: cannot read it ({exc.strerror or exc})"
    omitted = size - len(head) - len(tail)
    return (
        head.decode("utf-8", errors="replace")
        + f"\n... [{omitted} bytes omitted] ...\n"
        + tail.decode("utf-8", errors="replace"),
        None,
    )


def classify_offline(
    *,
    state_dir: Path | None = None,
    logs: Sequence[Path] = (),
    rerun_log: Path | None = None,
    same_code: bool = False,
    workdir: Path | None = None,
    hook: Any = None,
    config: FailureClassifierConfig | None = None,
    max_restarts: int = 3,
    output_bytes: int = DEFAULT_OUTPUT_BYTES,
) -> OfflineResult:
    """Classify a state directory (when ``logs`` is empty) or ``logs`` in iteration order, each
    read as a loop keeps ``output_bytes`` of a test run's output (:func:`read_log`)."""
    config = config or FailureClassifierConfig()
    problems: list[str] = []
    if logs:
        texts = []
        for path in logs:
            text, why = read_log(path, output_bytes)
            texts.append(text)
            if why:
                problems.append(why)
        rerun_text = None
        if rerun_log is not None:
            rerun_text, why = read_log(rerun_log, output_bytes)
            if why:
                problems.append(why)
                rerun_text = None
        evidence = from_logs(
            texts, same_code=same_code, rerun_log=rerun_text, workdir=workdir, problems=problems
        )
        problems = []
    else:
        evidence = from_state_dir(state_dir or Path(".loopctl"), workdir=workdir)
    classifiers: list[Classifier] = []
    modes: dict[str, FailureMode] = {}
    if hook is not None:
        classifiers = hook_classifiers(hook)
        modes, refused = hook_modes(hook)
        problems.extend(f"custom mode refused: {p}" for p in refused)
    if config.force_mode:
        verdict = forced_verdict(config.force_mode, evidence, source="force_mode")
    else:
        verdict = classify(
            evidence,
            classifiers=classifiers,
            settings=Settings(loop_window=config.loop_window),
            min_confidence=config.min_confidence,
        )
    recovery = strategy(verdict.mode, modes, max_restarts=max_restarts)
    return OfflineResult(verdict, recovery, evidence, tuple(problems))
