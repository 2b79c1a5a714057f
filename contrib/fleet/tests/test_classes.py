"""Every way a loop can end has a class, and each class's policy is what the guide says."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loopctl import StopStatus
from loopctl_fleet.classes import (
    EXIT_STATUSES,
    STATUS_CLASSES,
    FailureClass,
    RetryPolicy,
    class_of,
    policy_for,
)


def test_every_stop_status_but_complete_and_interrupted_has_a_class() -> None:
    assert set(STATUS_CLASSES) == set(StopStatus) - {StopStatus.COMPLETE, StopStatus.INTERRUPTED}


def test_every_stop_status_has_its_documented_exit_code() -> None:
    assert set(EXIT_STATUSES.values()) == set(StopStatus)


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        ("complete", 0, None),
        ("stuck", 12, FailureClass.STUCK),
        ("agent_error", 13, FailureClass.AGENT_CRASH),
        ("usage_error", 2, FailureClass.CONFIG),
        ("disk_full", 18, FailureClass.INFRASTRUCTURE),
        (None, 15, FailureClass.BUDGET),  # the loop wrote no status: its exit code says
        (None, 0, None),
        (None, 137, FailureClass.INFRASTRUCTURE),  # killed by a signal
        ("interrupted", 130, FailureClass.INFRASTRUCTURE),  # not by the fleet: the worker's side
        ("my_plugin_stop", 17, FailureClass.PLUGIN),
    ],
)
def test_class_of(status: str | None, code: int, expected: FailureClass | None) -> None:
    assert class_of(status, code) is expected


def test_only_infrastructure_and_agent_crashes_are_retried_by_default() -> None:
    retried = {cls for cls in FailureClass if policy_for(cls).max_attempts > 1}
    assert retried == {FailureClass.INFRASTRUCTURE, FailureClass.AGENT_CRASH}


def test_a_tasks_policy_replaces_the_default() -> None:
    mine = RetryPolicy(max_attempts=9)
    assert policy_for(FailureClass.STUCK, {"stuck": mine}) is mine
    assert policy_for(FailureClass.AUTH, {"stuck": mine}).max_attempts == 1


@given(st.integers(1, 50), st.floats(0, 100), st.floats(1, 4), st.floats(0, 1000))
def test_backoff_grows_and_never_passes_its_maximum(
    attempt: int, first: float, backoff: float, most: float
) -> None:
    policy = RetryPolicy(
        max_attempts=3, initial_interval_s=first, backoff=backoff, max_interval_s=most
    )
    assert 0 <= policy.delay_s(attempt) <= most
    assert policy.delay_s(attempt) <= policy.delay_s(attempt + 1) or policy.delay_s(attempt) == most
