"""The sources' tests' shared fixture."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.sources.test_topic_tail_fencing import Refetching, taken
from tests.sources.test_topic_tail_readiness import scripted_tail
from tests.sources.test_topic_tail_runs import Message


@pytest.fixture
def live():
    """A tail beside broker 1 following four empty partitions live, whose partition 0 was taken from
    its leader in epoch 3 and took offsets 0-1 in that epoch (its clock at 1000 s)."""
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    consumer.leader_epochs[0] = 3
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 0, epoch=3), Message(0, 1, epoch=3)]
    assert taken(tail.poll(timeout=0)) == [0, 1]
    consumer.assigned_from.clear()
    return tail, consumer, clock
