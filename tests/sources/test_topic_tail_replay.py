"""Replay decodes only each transactional id's last record (of a bounded window) and still leaves the
model exactly as applying every record would; a new cluster's first records, which nobody can have
seen, are live. Driven by the scripted client of the runs tests; the
real broker tests are in tests/integration/test_live_exporter.py (restart, partition moves)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError

from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.contracts.events import (
    PartitionDraining,
    PartitionReplayed,
    SourceStatus,
    TransactionLogRecords,
)
from exporter.metrics.recorders import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources.topic_tail import replay
from tests.model.builders import snapshot
from tests.sources.test_topic_tail_readiness import scripted_tail
from tests.sources.test_topic_tail_runs import DeliveringConsumer, Message, shape

S = TransactionState
CORRUPT = b"\x00\x09"  # an unknown value version


def value(state: TransactionState, producer_id: int = 7, epoch: int = 0, start_ms: int = 4) -> bytes:
    partitions = {"orders": [0, 1]} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else {}
    return encode_value(
        TransactionLogValue(
            version=1,
            producer_id=producer_id,
            producer_epoch=epoch,
            transaction_timeout_ms=60_000,
            state=state,
            partitions=partitions,
            last_update_timestamp_ms=start_ms + 1,
            start_timestamp_ms=start_ms,
        )
    )


def tail_replaying(records: int):
    """(a tail following partition 0, which holds `records` records to replay; its consumer; its clock)."""
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(DeliveringConsumer, metadata_refresh_seconds=3600, clock=lambda: clock.now)
    consumer.high = {0: records, 1: 0, 2: 0, 3: 0}
    tail.poll(timeout=0)
    return tail, consumer, clock


def test_only_the_last_record_of_each_id_is_decoded_and_handed_over_in_offset_order(monkeypatch):
    tail, consumer, _clock = tail_replaying(5)
    a, b, c = (encode_key(t) for t in "abc")
    consumer.queued = [
        Message(0, 0, CORRUPT, key=a),  # superseded by offset 3: never decoded, so not an error
        Message(0, 1, value(S.ONGOING), key=b),
        Message(0, 2, value(S.ONGOING), key=c),
        Message(0, 3, value(S.ONGOING), key=a),
        Message(0, 4, CORRUPT, key=c),  # c's last record: undecodable
    ]
    events = tail.poll(timeout=0)
    assert shape(events) == [("undecodable", 0, 4), ("records", 0, [1, 3], True), ("replayed", 0)]


def test_a_replay_of_many_ids_is_handed_over_in_bounded_windows(monkeypatch):
    monkeypatch.setattr(replay, "WINDOW_IDS", 2)
    tail, consumer, _clock = tail_replaying(5)
    consumer.queued = [Message(0, offset) for offset in range(5)]  # five ids
    events = tail.poll(timeout=0)
    assert shape(events) == [
        ("records", 0, [0, 1], True),
        ("records", 0, [2, 3], True),
        ("records", 0, [4], True),
        ("replayed", 0),
    ]


def test_a_replay_ending_below_its_target_hands_over_its_window_first(monkeypatch):
    """The replay's target (the high watermark at assignment, 5) is never reached: the records below
    it gone, the watermark of the next fetch response at 2. The progress report ends the replay."""
    tail, consumer, clock = tail_replaying(5)
    consumer.queued = [Message(0, 0), Message(0, 1)]
    assert shape(tail.poll(timeout=0)) == []
    consumer.high[0] = 2
    clock.now = 5000.0  # the next progress report sees position 2 >= high watermark 2
    assert shape(tail.poll(timeout=0)) == [("records", 0, [0, 1], True), ("replayed", 0)]


def model_state(model: CoordinatorModel, tids: set[str]) -> tuple:
    """Everything the model answers about partition 0 once live, comparable across runs: its
    counters and gauges (the late ones all, far in the future), its in-flight rows, each id's state."""
    model.apply(PartitionReplayed(0))
    return (
        snapshot(model, now_ms=2**40),
        model.in_flight_transactions(None, 10**6, 0, 0),
        {tid: model.tracked_id(tid) for tid in sorted(tids)},
    )


@pytest.mark.parametrize("seed", range(20))
def test_replaying_last_records_leaves_the_model_as_replaying_every_record_does(monkeypatch, seed):
    """Random histories of a few ids (every state, tombstones, producer id and epoch changes) with
    windows of 3 ids: the model ends the same as when every record is applied in order."""
    rng = random.Random(seed)
    monkeypatch.setattr(replay, "WINDOW_IDS", 3)
    history = []
    for offset in range(rng.randrange(1, 80)):
        tid = f"tid-{rng.randrange(6)}"
        state = rng.choice([*list(S)[:6], None])
        raw = None if state is None else value(state, rng.randrange(3), rng.randrange(3), rng.randrange(10**6))
        history.append((offset, tid, raw))

    every = CoordinatorModel(LatencyRecorders().sinks())
    records = [decode_record(encode_key(tid), raw, offset, 1000 + offset, False) for offset, tid, raw in history]
    every.apply(TransactionLogRecords(0, records, 0, True))

    tail, consumer, _clock = tail_replaying(len(history))
    consumer.queued = [TombstoneAware(0, offset, raw, key=encode_key(tid)) for offset, tid, raw in history]
    last = CoordinatorModel(LatencyRecorders().sinks())
    last.apply_batch(e for e in tail.poll(timeout=0) if isinstance(e, TransactionLogRecords))
    tids = {tid for _, tid, _ in history}
    assert model_state(last, tids) == model_state(every, tids)


class TombstoneAware(Message):
    """The runs tests' Message, with a None value kept as a tombstone."""

    def __init__(self, partition: int, offset: int, value: bytes | None, key: bytes) -> None:
        super().__init__(partition, offset, b"", key)
        self._value = value


class TimedMessage(Message):
    """The runs tests' Message with a timestamp of its own (ms)."""

    def __init__(self, partition: int, offset: int, timestamp_ms: int, epoch: int = 0) -> None:
        super().__init__(partition, offset, epoch=epoch)
        self._timestamp_ms = timestamp_ms

    def timestamp(self):
        return (1, self._timestamp_ms)


def unled_tail(broker_id: int | None = None):
    """A tail at clock 1000 s whose cluster has __transaction_state partition 0 only."""
    clock = SimpleNamespace(now=1000.0)
    tail, consumer = scripted_tail(
        DeliveringConsumer, broker_id=broker_id, metadata_refresh_seconds=30, clock=lambda: clock.now
    )
    consumer.leaders = {0: 1}
    consumer.high = {0: 0}
    return tail, consumer, clock


def test_a_topic_created_after_the_exporter_looked_is_live_from_its_first_record(monkeypatch):
    """Nobody can have counted the first records of a new cluster: they are live, not history."""
    tail, consumer, clock = unled_tail()
    consumer.topic_error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert tail.poll(timeout=0) == [SourceStatus(True)] and tail.not_ready is None  # ready: nothing to follow
    clock.now += 1.0  # asked again a second later, not 30: the topic is absent
    consumer.topic_error = None
    consumer.high = {0: 2}  # written meanwhile, at 1000.2 s and 1000.9 s
    consumer.queued = [TimedMessage(0, 0, 1_000_200), TimedMessage(0, 1, 1_000_900)]
    assert shape(tail.poll(timeout=0)) == [("replayed", 0), ("records", 0, [0, 1], False)]


def test_with_the_topic_absent_a_poll_waits_for_the_next_metadata_read_a_second_at_most():
    """Before a cluster's first transaction there is nothing to follow: a poll waits for the metadata
    read a second later (a loop turn a second, not five), never past it, whatever the timeout asked."""
    tail, consumer, clock = unled_tail()
    waits: list[float] = []
    consumer.poll = lambda timeout: waits.append(timeout)
    consumer.topic_error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
    tail.poll(timeout=0.2)  # reads the metadata (absent): the next read is due a second later
    clock.now += 0.25
    tail.poll(timeout=0.2)
    clock.now += 0.75
    tail.poll(timeout=0.2)  # due now: read at once, then a second again
    assert waits == [1.0, 0.75, 1.0]


def test_a_topic_said_absent_by_a_starting_broker_is_history_when_it_holds_older_records(monkeypatch):
    """Exporter and broker starting together: if the broker says the topic does not exist, records
    from before that say it did, and other exporters may have counted them: replayed whole."""
    tail, consumer, clock = unled_tail()
    consumer.topic_error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
    tail.poll(timeout=0)
    clock.now += 1
    consumer.topic_error = None
    consumer.high = {0: 2}
    consumer.queued = [TimedMessage(0, 0, 900_000), TimedMessage(0, 1, 1_000_500)]
    assert shape(tail.poll(timeout=0)) == [("records", 0, [0, 1], True), ("replayed", 0)]


def test_a_partition_back_from_a_time_without_leader_counts_only_this_brokers_epochs(monkeypatch):
    """Leaderless, the partition drains (no leader answers its end yet); back, it is replayed from
    its beginning: what predates the exporter is history, what this broker appended in its new epoch
    is counted, here only (a rolling-upgrade run once counted such a record twice)."""
    tail, consumer, clock = unled_tail()
    consumer.high = {0: 1}
    consumer.queued = [TimedMessage(0, 0, 900_000)]
    tail.poll(timeout=0)  # followed and replayed
    clock.now += 30
    consumer.leaders = {0: -1}
    assert [type(e) for e in tail.poll(timeout=0)] == [PartitionDraining]
    clock.now += 1  # asked again a second later, not 30: a partition is leaderless
    consumer.leaders, consumer.leader_epochs = {0: 1}, {0: 1}
    consumer.high = {0: 2}
    consumer.queued = [TimedMessage(0, 0, 900_000), TimedMessage(0, 1, 1_030_500, epoch=1)]
    assert shape(tail.poll(timeout=0)) == [("records", 0, [0], True), ("records", 0, [1], False), ("replayed", 0)]


def test_a_topic_absent_after_it_was_seen_is_no_new_cluster(monkeypatch):
    """A restarting broker may answer that the topic does not exist: that is no new cluster, and
    the record it appends meanwhile is counted by its epoch, this broker's."""
    tail, consumer, clock = unled_tail()
    tail.poll(timeout=0)  # seen, empty
    clock.now += 30
    consumer.topic_error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
    tail.poll(timeout=0)
    clock.now += 1
    consumer.topic_error = None
    consumer.high, consumer.leader_epochs = {0: 1}, {0: 1}
    consumer.queued = [TimedMessage(0, 0, 1_030_500, epoch=1)]
    assert shape(tail.poll(timeout=0)) == [("records", 0, [0], False), ("replayed", 0)]


def test_a_partition_moving_in_from_another_broker_counts_its_own_epoch_in_the_replay(monkeypatch):
    """What its previous coordinator appended (epoch 0), the exporter beside that broker counted;
    what this broker appended as its new leader (epoch 1) before the exporter took the partition,
    this one counts, in the replay."""
    tail, consumer, clock = unled_tail(broker_id=1)  # this exporter runs beside broker 1
    consumer.leaders = {0: -1}
    consumer.topic_error = None
    tail.poll(timeout=0)  # leaderless at start: not known yet
    clock.now += 1
    consumer.leaders = {0: 2}  # led by broker 2
    tail.poll(timeout=0)
    clock.now += 30
    consumer.leaders, consumer.leader_epochs = {0: 1}, {0: 1}  # moved here
    consumer.high = {0: 2}
    consumer.queued = [TimedMessage(0, 0, 1_000_500), TimedMessage(0, 1, 1_020_000, epoch=1)]
    assert shape(tail.poll(timeout=0)) == [("records", 0, [0], True), ("records", 0, [1], False), ("replayed", 0)]
