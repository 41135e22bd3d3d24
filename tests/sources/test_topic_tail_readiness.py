"""The tail's ownership and readiness state machine, driven by a scripted client (the real broker
tests are in tests/integration/test_live_exporter.py; these pin down orderings a real broker only
produces under load: leaders unknown at start, a leader that answers NOT_LEADER for a while)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from exporter.contracts.events import PartitionAssigned, PartitionDraining, PartitionRevoked
from exporter.sources.topic_tail import TransactionLogTail

PARTITIONS = 4


class ScriptedConsumer:
    """Answers metadata and watermark queries as the test sets them; delivers no records."""

    def __init__(self, settings: dict) -> None:
        self.leaders = dict.fromkeys(range(PARTITIONS), 1)
        self.followers: dict[int, list[int]] = {}  # in-sync followers by partition (none: the leader alone)
        self.topic_error: KafkaError | None = None
        self.not_leader: set[int] = set()
        self.high = dict.fromkeys(range(PARTITIONS), 0)
        self.leader_epochs = dict.fromkeys(range(PARTITIONS), 0)  # what each leader answers in
        self.assigned: set[int] = set()
        self.asked: list[list[int]] = []  # the partitions of each offsets_for_times call

    def list_topics(self, topic, timeout):
        partitions = {
            p: SimpleNamespace(leader=leader, isrs=[leader, *self.followers.get(p, [])])
            for p, leader in self.leaders.items()
        }
        return SimpleNamespace(
            brokers={1: SimpleNamespace(id=1, host="127.0.0.1", port=9092)},
            topics={topic: SimpleNamespace(error=self.topic_error, partitions=partitions)},
        )

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return 0, self.high[tp.partition]

    def offsets_for_times(self, tps, timeout=None):
        """The leader's answer for the latest offset (timestamp -1): its high watermark and epoch."""
        assert [tp.offset for tp in tps] == [-1] * len(tps)
        self.asked.append([tp.partition for tp in tps])
        if {tp.partition for tp in tps} & self.not_leader:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        return [
            SimpleNamespace(
                partition=tp.partition,
                offset=self.high[tp.partition],
                leader_epoch=self.leader_epochs[tp.partition],
                error=None,
            )
            for tp in tps
        ]

    def incremental_assign(self, tps):
        self.assigned |= {tp.partition for tp in tps}

    def incremental_unassign(self, tps):
        self.assigned -= {tp.partition for tp in tps}

    def poll(self, timeout):
        return None

    def close(self):
        pass


def scripted_tail(consumer_class: type[ScriptedConsumer] = ScriptedConsumer, **settings):
    """A TransactionLogTail over a scripted consumer of `consumer_class` (returned too, to script). Its
    idle and busy clients are that one consumer (the fetch pattern has tests of its own:
    test_topic_tail_fetching.py)."""
    made: list[ScriptedConsumer] = []

    def factory(config: dict) -> ScriptedConsumer:
        if not made:
            made.append(consumer_class(config))
        return made[0]

    tail = TransactionLogTail("127.0.0.1:9092", consumer_factory=factory, **settings)
    return tail, made[0]


@pytest.fixture
def scripted():
    """The tail, its consumer, and `step()`: a poll 1.5 s after the previous one (ownership re-read)."""
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(metadata_refresh_seconds=1, clock=lambda: clock.now)

    def step():
        clock.now += 1.5
        return tail.poll(timeout=0)

    return SimpleNamespace(tail=tail, consumer=consumer, step=step)


def test_not_ready_before_the_first_poll(scripted):
    tail = scripted.tail
    assert tail.not_ready == "starting"


def test_leaders_unknown_at_start_is_not_ready_and_follows_nothing(scripted):
    tail, consumer, step = scripted.tail, scripted.consumer, scripted.step
    consumer.leaders = dict.fromkeys(range(PARTITIONS), -1)
    assert not [e for e in step() if isinstance(e, PartitionAssigned)]
    assert "waiting for the leaders" in tail.not_ready
    consumer.leaders = dict.fromkeys(range(PARTITIONS), 1)
    step()
    assert tail.not_ready is None and consumer.assigned == set(range(PARTITIONS))


def test_the_leaders_are_asked_for_every_new_partition_in_one_call(scripted):
    # A request per leader, not a round trip per partition.
    scripted.step()
    assert scripted.consumer.asked == [list(range(PARTITIONS))]


def test_a_leader_answering_not_leader_keeps_it_waiting_until_it_is_followed(scripted):
    tail, consumer, step = scripted.tail, scripted.consumer, scripted.step
    consumer.not_leader = {2}
    step()
    assert tail.not_ready == "waiting for the leaders of __transaction_state partitions [2]"
    assert consumer.assigned == {0, 1, 3}
    assert consumer.asked == [[0, 1, 2, 3], [0], [1], [2], [3]]  # refused as a whole, then one by one
    consumer.not_leader = set()
    consumer.high[2] = 5  # records arrived meanwhile: replayed, so still not ready
    step()
    assert tail.not_ready == "replaying __transaction_state partitions [2]"


def test_a_topic_level_error_changes_nothing_and_is_not_ready_at_start(scripted):
    tail, consumer, step = scripted.tail, scripted.consumer, scripted.step
    consumer.topic_error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
    events = step()
    assert not [e for e in events if isinstance(e, (PartitionAssigned, PartitionRevoked))]
    assert "waiting for the leaders" in tail.not_ready
    consumer.topic_error = None
    step()
    assert tail.not_ready is None
    consumer.topic_error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
    assert not [e for e in step() if isinstance(e, PartitionRevoked)]  # a blip revokes nothing


def test_access_denied_is_named(scripted):
    tail, consumer, step = scripted.tail, scripted.consumer, scripted.step
    consumer.topic_error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    step()
    assert tail.not_ready.startswith("access denied by Kafka: TOPIC_AUTHORIZATION_FAILED")


def test_leadership_moving_away_drains_then_revokes(scripted):
    """Read to the end of this broker's epoch there: its new leader answers in a newer epoch, with a
    high watermark the drain has read to (the drains' own tests: test_topic_tail_counting.py)."""
    tail, consumer, step = scripted.tail, scripted.consumer, scripted.step
    step()
    consumer.leaders[3], consumer.leader_epochs[3] = 2, 1
    assert step()[-2:] == [PartitionDraining(3), PartitionRevoked(3, "read_to_end")]
    assert consumer.assigned == {0, 1, 2} and tail.not_ready is None
