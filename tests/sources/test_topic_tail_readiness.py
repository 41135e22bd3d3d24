"""The tail's ownership and readiness state machine, driven by a scripted client (the real broker
tests are in tests/integration/test_live_exporter.py; these pin down orderings a real broker only
produces under load: leaders unknown at start, a leader that answers NOT_LEADER for a while)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

import exporter.sources.topic_tail as kafka_topic
from exporter.contracts.events import PartitionAssigned, PartitionRevoked

PARTITIONS = 4


class ScriptedConsumer:
    """Answers metadata and watermark queries as the test sets them; delivers no records."""

    def __init__(self, settings: dict) -> None:
        self.leaders = {p: 1 for p in range(PARTITIONS)}
        self.topic_error: KafkaError | None = None
        self.not_leader: set[int] = set()
        self.high = {p: 0 for p in range(PARTITIONS)}
        self.assigned: set[int] = set()

    def list_topics(self, topic, timeout):
        partitions = {p: SimpleNamespace(leader=leader) for p, leader in self.leaders.items()}
        return SimpleNamespace(
            brokers={1: SimpleNamespace(id=1, host="127.0.0.1", port=9092)},
            topics={topic: SimpleNamespace(error=self.topic_error, partitions=partitions)},
        )

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        if not cached and tp.partition in self.not_leader:
            raise KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION))
        return 0, self.high[tp.partition]

    def incremental_assign(self, tps):
        self.assigned |= {tp.partition for tp in tps}

    def incremental_unassign(self, tps):
        self.assigned -= {tp.partition for tp in tps}

    def poll(self, timeout):
        return None

    def close(self):
        pass


@pytest.fixture
def tail(monkeypatch):
    monkeypatch.setattr(kafka_topic, "Consumer", ScriptedConsumer)
    clock = SimpleNamespace(now=1000.0)
    tail = kafka_topic.TransactionLogTail("127.0.0.1:9092", metadata_refresh_seconds=1, clock=lambda: clock.now)

    def poll():
        clock.now += 1.5  # every poll refreshes ownership
        return tail.poll(timeout=0)

    tail.step = poll
    return tail


def test_not_ready_before_the_first_poll(tail):
    assert tail.not_ready == "starting"


def test_leaders_unknown_at_start_is_not_ready_and_follows_nothing(tail):
    tail._consumer.leaders = {p: -1 for p in range(PARTITIONS)}
    assert not [e for e in tail.step() if isinstance(e, PartitionAssigned)]
    assert "waiting for the leaders" in tail.not_ready
    tail._consumer.leaders = {p: 1 for p in range(PARTITIONS)}
    tail.step()
    assert tail.not_ready is None and tail._consumer.assigned == set(range(PARTITIONS))


def test_a_leader_answering_not_leader_keeps_it_waiting_until_it_is_followed(tail):
    tail._consumer.not_leader = {2}
    tail.step()
    assert tail.not_ready == "waiting for the leaders of __transaction_state partitions [2]"
    assert tail._consumer.assigned == {0, 1, 3}
    tail._consumer.not_leader = set()
    tail._consumer.high[2] = 5  # records arrived meanwhile: replayed, so still not ready
    tail.step()
    assert tail.not_ready == "replaying __transaction_state partitions [2]"


def test_a_topic_level_error_changes_nothing_and_is_not_ready_at_start(tail):
    tail._consumer.topic_error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
    events = tail.step()
    assert not [e for e in events if isinstance(e, (PartitionAssigned, PartitionRevoked))]
    assert "waiting for the leaders" in tail.not_ready
    tail._consumer.topic_error = None
    tail.step()
    assert tail.not_ready is None
    tail._consumer.topic_error = KafkaError(KafkaError.LEADER_NOT_AVAILABLE)
    assert not [e for e in tail.step() if isinstance(e, PartitionRevoked)]  # a blip revokes nothing


def test_access_denied_is_named(tail):
    tail._consumer.topic_error = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    tail.step()
    assert tail.not_ready.startswith("access denied by Kafka: TOPIC_AUTHORIZATION_FAILED")


def test_leadership_moving_away_revokes(tail):
    tail.step()
    tail._consumer.leaders[3] = 2
    assert PartitionRevoked(3) in tail.step()
    assert tail._consumer.assigned == {0, 1, 2} and tail.not_ready is None
