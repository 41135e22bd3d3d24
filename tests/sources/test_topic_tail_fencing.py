"""Fencing by leader epoch (exporter.sources.topic_tail, ownership.py's "Fencing"): a partition's
records are held to the epoch its leader answered in when it was taken. A live record of an earlier
epoch (the leader before) is applied, not counted; one of a newer epoch is taken only once ownership
has been read again and this exporter's broker leads the partition still, in that epoch (refetched
from the record), or followed afresh if its leader is in a newer one still, or dropped with the
partition. The races they close, two exporters counting a moved partition's records, are
tests/integration/test_rolling_upgrade.py's (no record counted twice)."""

from __future__ import annotations

from types import SimpleNamespace

from confluent_kafka import KafkaError, KafkaException

from exporter.contracts.events import PartitionAssigned, PartitionRevoked, TransactionLogRecords
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


def taken(events, partition=0):
    """The offsets counted: those of live runs."""
    return [
        r.offset
        for e in events
        if isinstance(e, TransactionLogRecords) and not e.replay
        for r in e.records
        if e.partition == partition
    ]


def applied_uncounted(events, partition=0):
    return [
        r.offset
        for e in events
        if isinstance(e, TransactionLogRecords) and e.replay
        for r in e.records
        if e.partition == partition
    ]


def test_a_record_of_a_newer_leader_waits_for_ownership_and_is_refetched_when_its_leader_answers_in_that_epoch(live):
    tail, consumer, _clock = live
    consumer.queued = [Message(1, 0, epoch=0), Message(0, 2, epoch=4), Message(0, 3, epoch=4), Message(1, 1, epoch=0)]
    events = tail.poll(timeout=0)
    assert taken(events) == [] and taken(events, 1) == [0, 1]  # the other partitions go on
    # The next poll reads ownership first: broker 1 leads partition 0 still, in epoch 4: refetched.
    consumer.leader_epochs[0] = 4
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


def test_a_fenced_partition_whose_leader_moved_on_since_counts_only_its_brokers_epochs(live):
    """Broker 1 leads partition 0 again, but in epoch 5: epoch 4, the fenced record's, may have been
    another broker's (its exporter counted what it appended): refetched from the record, epoch 4's
    records are applied uncounted and epoch 5's counted."""
    tail, consumer, _clock = live
    consumer.queued = [Message(0, 2, epoch=4)]
    assert taken(tail.poll(timeout=0)) == []
    consumer.leader_epochs[0], consumer.high[0] = 5, 4
    events = tail.poll(timeout=0)
    assert not [e for e in events if isinstance(e, (PartitionRevoked, PartitionAssigned)) and e.partition == 0]
    assert consumer.assigned_from == [(0, 2)]
    consumer.queued = [Message(0, 2, epoch=4), Message(0, 3, epoch=4), Message(0, 4, epoch=5)]
    events = tail.poll(timeout=0)
    assert applied_uncounted(events) == [2, 3] and taken(events) == [4]


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
    consumer.leader_epochs[0] = 4
    clock.now += 0.5
    tail.poll(timeout=0)
    assert consumer.assigned_from == []  # not asked again yet
    clock.now += 0.6
    tail.poll(timeout=0)
    assert consumer.assigned_from == [(0, 2)]


def test_a_leader_not_answering_keeps_the_fence_and_is_asked_again_within_a_second(live):
    tail, consumer, clock = live
    consumer.queued = [Message(0, 2, epoch=4)]
    tail.poll(timeout=0)
    consumer.not_leader = {0}  # its leader still loading, say
    consumer.queued = [Message(0, 2, epoch=4)]
    assert taken(tail.poll(timeout=0)) == [] and consumer.assigned_from == []
    consumer.not_leader, consumer.leader_epochs[0] = set(), 4
    clock.now += 1.1
    tail.poll(timeout=0)
    assert consumer.assigned_from == [(0, 2)]


def test_a_record_of_the_leader_before_is_applied_uncounted():
    """The race of a partition taken over empty: its first record, appended by the leader before (in
    epoch 0, counted by that leader's exporter), reaches this exporter too, whose broker's leader
    answered in epoch 2 when the partition was taken."""
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    consumer.leader_epochs[0] = 2
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 0, epoch=0), Message(0, 1, epoch=2), Message(0, 2, epoch=2)]
    events = tail.poll(timeout=0)
    assert applied_uncounted(events) == [0] and taken(events) == [1, 2]


def test_a_replayed_partition_is_held_to_the_epoch_its_leader_answered_in():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    consumer.high = {0: 2, 1: 0, 2: 0, 3: 0}
    consumer.leader_epochs[0] = 5
    tail.poll(timeout=0)
    # Replayed in epochs 4 and 5, then live in epoch 5: taken without another ownership read.
    consumer.queued = [Message(0, 0, epoch=4), Message(0, 1, epoch=5), Message(0, 2, epoch=5)]
    assert taken(tail.poll(timeout=0)) == [2]
    consumer.queued = [Message(0, 3, epoch=6)]
    assert taken(tail.poll(timeout=0)) == []


def test_records_without_a_leader_epoch_are_taken():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 0, epoch=None), Message(0, 1, epoch=None)]  # type: ignore[arg-type]
    assert taken(tail.poll(timeout=0)) == [0, 1]


def test_a_leader_that_answers_no_epoch_has_its_records_epoch_taken_once_ownership_is_read_again():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(Refetching, metadata_refresh_seconds=30, clock=lambda: clock.now)
    consumer.leader_epochs[0] = None
    tail.poll(timeout=0)
    consumer.assigned_from.clear()
    consumer.queued = [Message(0, 0, epoch=7), Message(0, 1, epoch=7)]
    assert taken(tail.poll(timeout=0)) == []
    tail.poll(timeout=0)  # ownership read: this broker leads it still, answering no epoch: the record's
    assert consumer.assigned_from == [(0, 0)]
    consumer.queued = [Message(0, 0, epoch=7), Message(0, 1, epoch=7), Message(0, 2, epoch=8)]
    assert taken(tail.poll(timeout=0)) == [0, 1]
