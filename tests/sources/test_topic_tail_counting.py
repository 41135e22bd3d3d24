"""Each record counted once by the exporters of a cluster, through failovers (exporter.sources.topic_tail's
counting.py): by the exporter whose broker led the partition in the batch's leader epoch, in a
takeover's replay too; the exporter whose broker lost a partition drains it to the end of its epochs;
a partition taken back counts nothing twice. The same through real brokers killed, stopped and moved:
tests/integration/test_failover_counting.py."""

from __future__ import annotations

from types import SimpleNamespace

from exporter.contracts.events import PartitionDraining, PartitionRevoked
from exporter.sources.topic_tail import drains
from tests.sources.test_topic_tail_fencing import Refetching, applied_uncounted, taken
from tests.sources.test_topic_tail_readiness import scripted_tail
from tests.sources.test_topic_tail_runs import Message


def revoked(events) -> list[str | None]:
    """How the drains of partition 0 revoked in `events` ended."""
    return [e.drain for e in events if isinstance(e, PartitionRevoked) and e.partition == 0]


def move(tail, consumer, clock, leader: int, epoch: int):
    """Partition 0 now led by `leader` in `epoch`; the next poll reads ownership."""
    consumer.leaders[0], consumer.leader_epochs[0] = leader, epoch
    tail.refresh_ownership_soon()
    clock.now += 0.1
    return tail.poll(timeout=0)


def test_a_partition_moving_away_is_drained_to_the_end_of_this_brokers_epoch(live):
    """Broker 2 took partition 0 in epoch 4 before this exporter read offsets 2-3, which broker 1
    appended in epoch 3: counted here, in the drain; broker 2's first record ends it."""
    tail, consumer, clock = live
    consumer.high[0] = 4
    events = move(tail, consumer, clock, leader=2, epoch=4)
    assert PartitionDraining(0) in events and not revoked(events)  # its watermark not read to
    consumer.queued = [Message(0, 2, epoch=3), Message(0, 3, epoch=3), Message(0, 4, epoch=4)]
    events = tail.poll(timeout=0)
    assert taken(events) == [2, 3] and applied_uncounted(events) == []
    assert revoked(events) == ["read_to_end"] and 0 not in consumer.assigned


def test_an_idle_drain_ends_when_the_new_leader_answers_a_watermark_read_to(live):
    tail, consumer, clock = live
    consumer.high[0] = 3
    move(tail, consumer, clock, leader=2, epoch=4)
    consumer.queued = [Message(0, 2, epoch=3)]
    assert taken(tail.poll(timeout=0)) == [2]
    clock.now += 1.1  # the next check of the drain: broker 2 answers in epoch 4 at offset 3, read to
    assert revoked(tail.poll(timeout=0)) == ["read_to_end"]


def test_a_drain_no_leader_lets_end_is_cut_after_its_limit(live):
    tail, consumer, clock = live
    move(tail, consumer, clock, leader=-1, epoch=3)  # leaderless: nobody answers a newer epoch
    clock.now += drains.LIMIT_SECONDS / 2
    assert not revoked(tail.poll(timeout=0))
    clock.now += drains.LIMIT_SECONDS
    assert revoked(tail.poll(timeout=0)) == ["cut"]


def test_a_takeover_counts_this_brokers_epoch_in_its_replay_and_nothing_twice_when_taken_back(live):
    """Broker 2 leads epoch 4 (offset 2), broker 1 takes partition 0 back in epoch 5 (offsets 3-4,
    appended before this exporter read ownership): the replay counts 3-4, not 0-1 (counted before
    the drain) nor 2 (broker 2's); the elected line's epoch makes a later record counted at once."""
    tail, consumer, clock = live
    consumer.high[0] = 3
    move(tail, consumer, clock, leader=2, epoch=4)
    consumer.queued = [Message(0, 2, epoch=4)]
    assert revoked(tail.poll(timeout=0)) == ["read_to_end"]
    consumer.high[0] = 5
    move(tail, consumer, clock, leader=1, epoch=5)
    consumer.queued = [Message(0, o, epoch=e) for o, e in ((0, 3), (1, 3), (2, 4), (3, 5), (4, 5))]
    events = tail.poll(timeout=0)
    assert taken(events) == [3, 4] and applied_uncounted(events) == [0, 1, 2]
    tail.coordinator_elected(0, 6)  # (a bumped epoch, no move: ZooKeeper mode)
    consumer.queued = [Message(0, 5, epoch=6)]
    assert taken(tail.poll(timeout=0)) == [5]


def test_following_every_partition_counts_every_epoch_once():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(
        Refetching, all_partitions=True, metadata_refresh_seconds=30, clock=lambda: clock.now
    )
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 0, epoch=0), Message(0, 1, epoch=1), Message(0, 2, epoch=7)]
    assert taken(tail.poll(timeout=0)) == [0, 1, 2]


def test_a_partition_taken_back_within_a_second_counts_its_undrained_records_once(live):
    """Two moves within a second: broker 2 leads epoch 4, broker 1 epoch 5 again before the drain of
    epoch 3 ended. Followed afresh from its beginning: epoch 3's records this exporter had not read yet
    (offset 2) are counted in the replay, epoch 4's are not, epoch 5's are."""
    tail, consumer, clock = live
    consumer.high[0] = 5
    move(tail, consumer, clock, leader=2, epoch=4)
    events = move(tail, consumer, clock, leader=1, epoch=5)
    assert revoked(events) == [None]  # (taken back, not drained: followed afresh below)
    consumer.queued = [Message(0, o, epoch=e) for o, e in ((0, 3), (1, 3), (2, 3), (3, 4), (4, 5))]
    events = tail.poll(timeout=0)
    assert taken(events) == [2, 4] and applied_uncounted(events) == [0, 1, 3]


def test_an_epoch_bumped_twice_without_a_move_is_this_brokers_by_its_logs_silence(live):
    """ZooKeeper mode bumps a leader's epoch when a follower leaves its ISR, with no elected line.
    Broker 1 answers in epoch 5 for a record of epoch 4: once its log has been read past that record
    without a resignation or a restart since epoch 3, epoch 4 was its own too."""
    tail, consumer, clock = live
    tail.broker_log_read(int(clock.now * 1000) - 1)  # a log is read, not yet past the record below
    consumer.queued = [Message(0, 2, epoch=4)]
    assert taken(tail.poll(timeout=0)) == []
    consumer.assigned_from.clear()
    consumer.leader_epochs[0] = 5
    tail.poll(timeout=0)
    assert consumer.assigned_from == []  # still fenced: the log may yet show a resignation
    tail.broker_log_read(int(clock.now * 1000) + 1)
    clock.now += 1.1
    tail.poll(timeout=0)
    assert consumer.assigned_from == [(0, 2)]
    consumer.queued = [Message(0, 2, epoch=4), Message(0, 3, epoch=5)]
    assert taken(tail.poll(timeout=0)) == [2, 3]


def test_a_resignation_in_the_log_leaves_the_epochs_between_to_another_broker(live):
    tail, consumer, clock = live
    tail.coordinator_resigned(0)
    tail.broker_log_read(int(clock.now * 1000) + 10_000)
    consumer.queued = [Message(0, 2, epoch=4)]
    tail.poll(timeout=0)
    consumer.leader_epochs[0] = 5
    tail.poll(timeout=0)
    consumer.queued = [Message(0, 2, epoch=4), Message(0, 3, epoch=5)]
    events = tail.poll(timeout=0)
    assert taken(events) == [3] and applied_uncounted(events) == [2]
