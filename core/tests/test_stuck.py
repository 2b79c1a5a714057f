import pytest

from loopctl.model import AgentSummary, IterationRecord
from loopctl.stuck import Escalation, StuckDetector


def failing(i, fingerprint="fp", tests=("t1",), tree="tree", commit="c"):
    return IterationRecord(
        iteration=i,
        error_fingerprint=fingerprint,
        failing_tests=list(tests),
        tree_hash=tree,
        commit=commit,
    )


def feed(detector, records, infra=(), fresh=False):
    return [
        detector.observe(
            r,
            error_lines=["AssertionError: 1 != 2"],
            infrastructure=r.iteration in infra,
            fresh=fresh,
        )
        for r in records
    ]


def test_a_fresh_session_loop_is_nudged_then_stopped_without_a_restart():
    """session = "fresh": a restart would give the agent what every iteration gets anyway."""
    changed = failing(1)
    changed.changed_files = ["calc.py"]
    got = feed(StuckDetector(window=3), [changed] + [failing(i) for i in range(2, 5)], fresh=True)
    assert got == [Escalation.NONE, Escalation.NONE, Escalation.NUDGE, Escalation.STOP]


def test_a_fresh_session_loop_that_changes_nothing_stops_after_the_window():
    detector = StuckDetector(window=3)
    got = feed(detector, [failing(i) for i in range(1, 4)], fresh=True)
    assert got == [Escalation.NONE, Escalation.NONE, Escalation.STOP]
    assert detector.idle == 3


def test_escalates_nudge_restart_stop_over_repeated_failures():
    detector = StuckDetector(window=3)
    got = feed(detector, [failing(i) for i in range(1, 6)])
    assert got == [
        Escalation.NONE,
        Escalation.NONE,
        Escalation.NUDGE,
        Escalation.RESTART,
        Escalation.STOP,
    ]


@pytest.mark.parametrize(
    "progress",
    [
        {"tree": "changed"},
        {"commit": "new-commit"},
        {"tests": ()},  # fewer failing tests
    ],
    ids=["tree-changed", "new-commit", "fewer-failures"],
)
def test_progress_resets_the_streak(progress):
    detector = StuckDetector(window=3)
    feed(detector, [failing(1), failing(2)])
    assert feed(detector, [failing(3, **progress)]) == [Escalation.NONE]
    assert detector.streak == 1
    assert detector.level is Escalation.NONE


def test_a_different_failure_is_not_a_repeat():
    detector = StuckDetector(window=2)
    got = feed(
        detector, [failing(1, "a", ("x",)), failing(2, "b", ("y",)), failing(3, "c", ("z",))]
    )
    assert got == [Escalation.NONE] * 3


def test_same_failing_tests_with_different_fingerprints_still_repeat():
    detector = StuckDetector(window=2)
    got = feed(detector, [failing(1, "a"), failing(2, "b")])
    assert got == [Escalation.NONE, Escalation.NUDGE]


def test_infrastructure_errors_never_count_as_stuck():
    detector = StuckDetector(window=2)
    got = feed(detector, [failing(i) for i in range(1, 8)], infra=set(range(1, 8)))
    assert got == [Escalation.NONE] * 7
    assert detector.streak == 0


def test_exempt_patterns_are_expected_repetition():
    detector = StuckDetector(window=2, exempt=[r"AssertionError"])
    assert feed(detector, [failing(i) for i in range(1, 5)]) == [Escalation.NONE] * 4


def test_restore_rebuilds_the_streak_after_resume():
    history = [failing(i) for i in range(1, 4)]
    for record in history:
        record.agent = AgentSummary()
    detector = StuckDetector(window=3)
    detector.restore(history, level=int(Escalation.NUDGE))
    assert detector.streak == 3
    assert feed(detector, [failing(4)]) == [Escalation.RESTART]
