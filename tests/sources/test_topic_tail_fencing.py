"""Fencing by leader epoch (exporter.sources.topic_tail): a live record appended by a newer leader of
its partition than the last record's is taken only once ownership has been read again and this
exporter's broker leads the partition still; refetched from that record then, or dropped with the
partition. The race it closes, both exporters counting a moved partition's records until the old
one's next ownership read, is tests/integration/test_rolling_upgrade.py's (no record counted twice)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from exporter.contracts.events import PartitionRevoked, TransactionLogRecords
from tests.sources.test_topic_tail_readiness import scripted_tail
from tests.sources.test_topic_tail_runs import DeliveringConsumer, Message


class Refetching(DeliveringConsumer):
    """Drops a partition's queued messages when it is unassigned (as librdkafka does) and notes
    where each assignment starts."""

    def __init__(self, settings: dict) -> None:
        super().__init__(settings)
        self.assigned_from: list[tuple[int, int]] = []

    def incremental_unassign(self, tps):
        super().incremental_unassign(tps)
        gone = {tp.partition for tp in tps}
        self.queued = [m for m in self.queued if m.partition() not in gone]

    def incremental_assign(self, tps):
        super().incremental_assign(tps)
        self.assigned_from += [(tp.partition, tp.offset) for tp in tps]


@pytest.fixture
def live():
    """A tail following four empty partitions live, whose partition 0 took offsets 0-1 in epoch 3."""
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 0, epoch=3), Message(0, 1, epoch=3)]
    assert taken(tail.poll(timeout=0)) == [0, 1]
    consumer.assigned_from.clear()
    return tail, consumer, clock


def taken(events, partition=0):
    return [
        r.offset for e in events if isinstance(e, TransactionLogRecords) for r in e.records if e.partition == partition
    ]


def test_a_record_of_a_newer_leader_waits_for_ownership_and_is_refetched_when_still_led(live):
    tail, consumer, _clock = live
    consumer.queued = [Message(1, 0, epoch=1), Message(0, 2, epoch=4), Message(0, 3, epoch=4), Message(1, 1, epoch=1)]
    events = tail.poll(timeout=0)
    assert taken(events) == [] and taken(events, 1) == [0, 1]  # the other partitions go on
    # The next poll reads ownership first: broker 1 leads partition 0 still, so it is refetched.
    tail.poll(timeout=0)
    assert consumer.assigned_from == [(0, 2)]
    consumer.queued = [Message(0, 2, epoch=4), Message(0, 3, epoch=4), Message(0, 4, epoch=4)]
    assert taken(tail.poll(timeout=0)) == [2, 3, 4]


def test_a_record_of_a_newer_leader_on_another_broker_is_never_taken(live):
    tail, consumer, _clock = live
    consumer.queued = [Message(0, 2, epoch=4), Message(0, 3, epoch=4)]
    assert taken(tail.poll(timeout=0)) == []
    consumer.leaders[0] = 2  # moved: the other broker's exporter counts it
    consumer.queued = [Message(0, 4, epoch=4)]  # fetched before the ownership read drops it
    events = tail.poll(timeout=0)
    assert any(isinstance(e, PartitionRevoked) and e.partition == 0 for e in events)
    assert taken(events) == [] and 0 not in consumer.assigned


def test_a_failed_ownership_read_keeps_the_fence_and_asks_again_within_a_second(live, monkeypatch):
    tail, consumer, clock = live
    consumer.queued = [Message(0, 2, epoch=4)]
    tail.poll(timeout=0)

    def unanswered(topic, timeout):
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    monkeypatch.setattr(consumer, "list_topics", unanswered)
    consumer.queued = [Message(0, 2, epoch=4)]
    assert taken(tail.poll(timeout=0)) == []
    monkeypatch.undo()
    clock.now += 0.5
    tail.poll(timeout=0)
    assert consumer.assigned_from == []  # not asked again yet
    clock.now += 0.6
    tail.poll(timeout=0)
    assert consumer.assigned_from == [(0, 2)]


def test_the_replayed_records_set_the_epoch_a_live_record_is_held_to():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    consumer.high = {0: 2, 1: 0, 2: 0, 3: 0}
    tail.poll(timeout=0)
    # Replayed in epoch 5, then live in epoch 5: taken without another ownership read.
    consumer.queued = [Message(0, 0, epoch=4), Message(0, 1, epoch=5), Message(0, 2, epoch=5)]
    assert taken(tail.poll(timeout=0)) == [0, 1, 2]
    consumer.queued = [Message(0, 3, epoch=6)]
    assert taken(tail.poll(timeout=0)) == []


def test_records_without_a_leader_epoch_are_taken():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 0, epoch=None), Message(0, 1, epoch=None)]  # type: ignore[arg-type]
    assert taken(tail.poll(timeout=0)) == [0, 1]
