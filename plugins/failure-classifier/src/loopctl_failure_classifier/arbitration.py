"""Arbitration: the built-in detectors and every custom classifier each propose a mode; one wins.

Ordering and tie-break, in full:

1. A forced mode (``--failure-mode`` / ``force_mode``) wins outright; nothing else runs.
2. Custom classifications below ``min_confidence`` are dropped (built-ins are never dropped).
3. The candidate with the highest ``priority`` wins; among equal priorities, the highest
   ``confidence``; among equal confidences, the detector whose name sorts first. The result
   never depends on the order in which plugins were installed or loaded.
4. The built-in ``code_error`` candidate (priority 0) is always present, so there is always a
   verdict, and missing or malformed inputs end there with evidence that says what was wrong.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

import loopctl
from loopctl_failure_classifier.detectors import Settings, builtin_classifications
from loopctl_failure_classifier.model import (
    BUILTIN_MODES,
    BUILTIN_PRIORITY,
    Classification,
    Evidence,
    FailureMode,
    Verdict,
)

FAILURE_MODE_FILE = "failure-mode.json"

#: A custom classifier as the arbitration sees it: its name and a function of the evidence.
Classifier = tuple[str, Callable[[Evidence], object]]


def _order(candidate: Classification) -> tuple[int, float, str]:
    return (-candidate.priority, -candidate.confidence, candidate.detector)


def arbitrate(
    candidates: Sequence[Classification],
    *,
    iteration: int = 0,
    rejected: Sequence[str] = (),
    now: float | None = None,
) -> Verdict:
    """The winning candidate as a :class:`Verdict`; ``candidates`` must not be empty."""
    ranked = sorted(candidates, key=_order)
    winner = ranked[0]
    return Verdict(
        mode=winner.mode,
        confidence=winner.confidence,
        evidence=winner.evidence,
        detector=winner.detector,
        timestamp=round(time.time() if now is None else now, 3),
        iteration=iteration,
        priority=winner.priority,
        candidates=tuple(ranked),
        rejected=tuple(rejected),
    )


def forced_verdict(mode: str, evidence: Evidence, *, source: str) -> Verdict:
    return Verdict(
        mode=mode,
        confidence=1.0,
        evidence=(f"forced by {source}: classification skipped (for testing recoveries)",),
        detector="override",
        timestamp=round(time.time(), 3),
        iteration=evidence.iteration,
        priority=BUILTIN_PRIORITY.get(mode, 0),
        forced=True,
    )


def run_custom(
    classifiers: Iterable[Classifier], evidence: Evidence, *, min_confidence: float
) -> tuple[list[Classification], list[str]]:
    """Call each custom classifier; return the usable classifications and, for each unusable
    answer, why it was skipped. A classifier that raises is skipped here too (in a loop the
    plugin host has already reported it and turned it into None)."""
    found: list[Classification] = []
    rejected: list[str] = []
    for name, function in classifiers:
        try:
            answer = function(evidence)
        except Exception as exc:  # noqa: BLE001 - one broken classifier must not stop the rest
            rejected.append(f"{name}: raised {type(exc).__name__}: {exc}")
            continue
        answers = answer if isinstance(answer, (list, tuple)) else [answer]
        for item in answers:
            classification, why = Classification.coerce(item, detector=name)
            if classification is None:
                if why:
                    rejected.append(f"{name}: {why}")
                continue
            if classification.confidence < min_confidence:
                continue
            found.append(classification)
    return found, rejected


def classify(
    evidence: Evidence,
    *,
    classifiers: Iterable[Classifier] = (),
    settings: Settings | None = None,
    min_confidence: float = 0.5,
    force_mode: str | None = None,
    builtin: list[Classification] | None = None,
) -> Verdict:
    """Classify one failure: built-in detectors plus ``classifiers``, then arbitration.
    ``builtin``: the built-in detectors' classifications of this very ``evidence`` with these
    ``settings``, when the caller has made them already."""
    if force_mode:
        return forced_verdict(force_mode, evidence, source="--failure-mode")
    candidates = builtin_classifications(evidence, settings) if builtin is None else builtin
    custom, rejected = run_custom(classifiers, evidence, min_confidence=min_confidence)
    return arbitrate([*candidates, *custom], iteration=evidence.iteration, rejected=rejected)


# --- plugins' classifiers and modes ----------------------------------------------------------------


def hook_classifiers(hook: Any) -> list[Classifier]:
    """The ``classify_failure`` implementations of every plugin, each named after its plugin.

    Implementations are called one by one (not through pluggy's call loop) so every answer can
    be credited to its plugin; the plugin host's isolation wrapper still turns an exception into
    a reported ``plugin.error`` and None.
    """
    caller = getattr(hook, "classify_failure", None)
    if caller is None:
        return []
    found: list[Classifier] = []
    for impl in caller.get_hookimpls():
        function = impl.function
        argnames = tuple(getattr(impl, "argnames", ("evidence",)))

        def call(
            evidence: Evidence, function: Callable[..., object] = function, args: Any = argnames
        ) -> object:
            return function(*[evidence if name == "evidence" else None for name in args])

        found.append((impl.plugin_name, call))
    return found


def hook_modes(hook: Any) -> tuple[dict[str, FailureMode], list[str]]:
    """Custom modes declared through ``register_failure_modes``, and why any were refused."""
    caller = getattr(hook, "register_failure_modes", None)
    modes: dict[str, FailureMode] = {}
    problems: list[str] = []
    if caller is None:
        return modes, problems
    for impl in caller.get_hookimpls():
        try:
            declared = impl.function()
        except Exception as exc:  # noqa: BLE001 - reported like any broken declaration
            problems.append(f"{impl.plugin_name}: register_failure_modes raised {exc!r}")
            continue
        items: Iterable[tuple[object, object]]
        if isinstance(declared, Mapping):
            items = declared.items()
        elif isinstance(declared, (list, tuple)):
            items = ((getattr(m, "name", None), m) for m in declared)
        elif declared is None:
            continue
        else:
            problems.append(f"{impl.plugin_name}: declared modes as {type(declared).__name__}")
            continue
        for name, value in items:
            mode, why = FailureMode.coerce(name, value, source=impl.plugin_name)
            if mode is None:
                problems.append(f"{impl.plugin_name}: {why}")
            elif mode.name in BUILTIN_MODES:
                problems.append(f"{impl.plugin_name}: {mode.name} is a built-in mode")
            elif mode.name in modes:
                problems.append(
                    f"{impl.plugin_name}: {mode.name} is already declared by {modes[mode.name].source}"
                )
            else:
                modes[mode.name] = mode
    return modes, problems


# --- failure-mode.json ------------------------------------------------------------------------------


def failure_mode_text(verdict: Verdict, recovery: Mapping[str, Any] | None = None) -> str:
    """The text of ``failure-mode.json``: the verdict, and the recovery applied when known."""
    data = verdict.to_json()
    if recovery is not None:
        data["recovery"] = dict(recovery)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_failure_mode(
    state_dir: Path, verdict: Verdict, recovery: Mapping[str, Any] | None = None
) -> Path:
    """Write ``failure-mode.json`` atomically (a reader sees the old or the new verdict)."""
    path = Path(state_dir) / FAILURE_MODE_FILE
    loopctl.atomic_write_text(path, failure_mode_text(verdict, recovery))
    return path


def with_evidence(verdict: Verdict, *lines: str) -> Verdict:
    return attrs.evolve(verdict, evidence=(*verdict.evidence, *lines))
