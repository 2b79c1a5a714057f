"""The landing queue's names: a follow-up task's id is its task's, its number and its task's run."""

from __future__ import annotations

import uuid

from loopctl_fleet.lander import follow_up_id
from loopctl_fleet.landing import FOLLOW_UP_ID


def test_follow_ups_of_two_runs_of_one_task_never_share_an_id() -> None:
    first, again = str(uuid.uuid4()), str(uuid.uuid4())  # `fleet retry` makes another run
    ids = {follow_up_id("fix-1", n, run) for n in (1, 2) for run in (first, again)}
    assert len(ids) == 4
    one = follow_up_id("fix-1", 1, first)
    assert one == f"fix-1.land1-{first.replace('-', '')[:8]}"
    assert follow_up_id("loopctl-task-fix-1", 1, first).endswith(one.removeprefix("fix-1"))


def test_a_follow_up_is_known_by_its_id_and_a_task_named_like_one_is_not() -> None:
    assert FOLLOW_UP_ID.search(follow_up_id("fix-1", 3, str(uuid.uuid4())))
    assert FOLLOW_UP_ID.search("fix-1.land1")  # queued by an older worker
    assert not FOLLOW_UP_ID.search("fix-1")
    assert not FOLLOW_UP_ID.search("island1")
