"""How the tail hands records to the model: each partition's consecutive records as one
TransactionLogRecords run, cut where the partition changes, where a record is undecodable and where
replay ends (records after it are live). Driven by the scripted client of the readiness tests; the
real broker tests are in tests/integration/test_live_exporter.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from exporter.codec import PARTITIONS_SKIPPED, TransactionLogValue, TransactionState, encode_key, encode_value
from exporter.contracts.events import PartitionReplayed, TransactionLogRecords, UndecodableRecord
from tests.sources.test_topic_tail_readiness import ScriptedConsumer, scripted_tail


class Message:
    def __init__(
        self, partition: int, offset: int, value: bytes | None = None, key: bytes | None = None, epoch: int = 0
    ) -> None:
        self._partition, self._offset, self._epoch = partition, offset, epoch
        self._key = encode_key(f"tid-{partition}-{offset}") if key is None else key
        self._value = (
            value
            if value is not None
            else encode_value(
                TransactionLogValue(
                    version=1,
                    producer_id=7,
                    producer_epoch=0,
                    transaction_timeout_ms=60_000,
                    state=TransactionState.ONGOING,
                    partitions={"orders": [0, 1]},
                    last_update_timestamp_ms=5,
                    start_timestamp_ms=4,
                )
            )
        )

    def error(self):
        return None

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def timestamp(self):
        return (1, 1000 + self._offset)

    def leader_epoch(self):
        return self._epoch


class DeliveringConsumer(ScriptedConsumer):
    """Delivers the queued messages in one poll: the first from poll(), the rest from consume()."""

    def __init__(self, settings: dict) -> None:
        super().__init__(settings)
        self.queued: list[Message] = []

    def poll(self, timeout):
        return self.queued.pop(0) if self.queued else None

    def consume(self, n, timeout):
        taken, self.queued = self.queued[:n], self.queued[n:]
        return taken


@pytest.fixture
def tail_and_consumer():
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(DeliveringConsumer, metadata_refresh_seconds=3600, clock=lambda: clock.now)
    consumer.high = {0: 3, 1: 0, 2: 0, 3: 0}  # partition 0 holds 3 records to replay
    tail.poll(timeout=0)  # takes ownership of the four partitions
    return tail, consumer


def shape(events):
    out = []
    for e in events:
        if isinstance(e, TransactionLogRecords):
            out.append(("records", e.partition, [r.offset for r in e.records], e.replay))
        elif isinstance(e, UndecodableRecord):
            out.append(("undecodable", e.partition, e.offset))
        elif isinstance(e, PartitionReplayed):
            out.append(("replayed", e.partition))
    return out


def test_runs_are_cut_by_partition_undecodable_records_and_the_end_of_replay(tail_and_consumer):
    tail, consumer = tail_and_consumer
    consumer.queued = [
        Message(1, 0),
        Message(1, 1),
        Message(0, 0),
        Message(0, 1),
        Message(0, 2),  # offset 2 is partition 0's last replayed
        Message(0, 3),
        Message(0, 4, value=b"\x00\x09"),  # an unknown value version
        Message(0, 5),
        Message(1, 2),
    ]
    events = tail.poll(timeout=0)
    assert shape(events) == [
        ("records", 1, [0, 1], False),
        ("records", 0, [0, 1, 2], True),
        ("replayed", 0),
        ("records", 0, [3], False),
        ("undecodable", 0, 4),
        ("records", 0, [5], False),
        ("records", 1, [2], False),
    ]


def test_records_reach_the_model_without_their_partitions_decoded(tail_and_consumer):
    tail, consumer = tail_and_consumer
    consumer.queued = [Message(2, 0)]
    (run,) = [e for e in tail.poll(timeout=0) if isinstance(e, TransactionLogRecords)]
    assert run.records[0].transactional_id == "tid-2-0"
    assert run.records[0].value.partitions is PARTITIONS_SKIPPED
