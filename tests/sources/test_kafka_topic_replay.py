"""Replay decodes only each transactional id's last record (of a bounded window) and still leaves the
model exactly as applying every record would. Driven by the scripted client of the runs tests; the
real broker tests are in tests/integration/test_live_exporter.py (restart, partition moves)."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

import exporter.sources.kafka_topic as kafka_topic
from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.metrics.recorders import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources.events import TransactionLogRecords
from tests.sources.test_kafka_topic_runs import DeliveringConsumer, Message, shape

S = TransactionState
CORRUPT = b"\x00\x09"  # an unknown value version


def value(state: TransactionState, producer_id: int = 7, epoch: int = 0, start_ms: int = 4) -> bytes:
    partitions = {"orders": [0, 1]} if state in (S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT) else {}
    return encode_value(TransactionLogValue(1, producer_id, epoch, 60_000, state, partitions, start_ms + 1, start_ms))


def tail_replaying(monkeypatch, records: int) -> kafka_topic.TransactionLogTail:
    """A tail following partition 0, which holds `records` records to replay."""
    monkeypatch.setattr(kafka_topic, "Consumer", DeliveringConsumer)
    clock = SimpleNamespace(now=1000.0)
    tail = kafka_topic.TransactionLogTail("127.0.0.1:9092", metadata_refresh_seconds=3600, clock=lambda: clock.now)
    tail._consumer.high = {0: records, 1: 0, 2: 0, 3: 0}
    tail.poll(timeout=0)
    return tail


def test_only_the_last_record_of_each_id_is_decoded_and_handed_over_in_offset_order(monkeypatch):
    tail = tail_replaying(monkeypatch, 5)
    a, b, c = (encode_key(t) for t in "abc")
    tail._consumer.queued = [
        Message(0, 0, CORRUPT, key=a),  # superseded by offset 3: never decoded, so not an error
        Message(0, 1, value(S.ONGOING), key=b),
        Message(0, 2, value(S.ONGOING), key=c),
        Message(0, 3, value(S.ONGOING), key=a),
        Message(0, 4, CORRUPT, key=c),  # c's last record: undecodable
    ]
    events = tail.poll(timeout=0)
    assert shape(events) == [("undecodable", 0, 4), ("records", 0, [1, 3], True), ("replayed", 0)]


def test_a_replay_of_many_ids_is_handed_over_in_bounded_windows(monkeypatch):
    monkeypatch.setattr(kafka_topic, "_REPLAY_WINDOW_IDS", 2)
    tail = tail_replaying(monkeypatch, 5)
    tail._consumer.queued = [Message(0, offset) for offset in range(5)]  # five ids
    events = tail.poll(timeout=0)
    assert shape(events) == [
        ("records", 0, [0, 1], True),
        ("records", 0, [2, 3], True),
        ("records", 0, [4], True),
        ("replayed", 0),
    ]


def test_a_replay_ending_below_the_watermark_hands_over_its_window_first(monkeypatch):
    tail = tail_replaying(monkeypatch, 5)
    tail._consumer.queued = [Message(0, 0), Message(0, 1)]  # offsets 2-4 compacted away
    assert shape(tail.poll(timeout=0)) == []
    tail._clock = lambda: 5000.0  # the next progress report sees position 5 >= high watermark 5
    tail._next_offset[0] = 5
    assert shape(tail.poll(timeout=0)) == [("records", 0, [0, 1], True), ("replayed", 0)]


def model_state(model: CoordinatorModel) -> list:
    """Everything the model holds per partition, comparable across runs."""
    return [
        (
            number,
            part.states,
            part.pending,
            part.ongoing,
            [{tid: entry[:4] + (entry[4].offset,) for tid, entry in states.items()} for states in part.inflight if states is not None],
            part.state_counts[:6],
            part.last_record.offset,
        )
        for number, part in model.partitions()
    ]


@pytest.mark.parametrize("seed", range(20))
def test_replaying_last_records_leaves_the_model_as_replaying_every_record_does(monkeypatch, seed):
    """Random histories of a few ids (every state, tombstones, producer id and epoch changes) with
    windows of 3 ids: the model ends the same as when every record is applied in order."""
    rng = random.Random(seed)
    monkeypatch.setattr(kafka_topic, "_REPLAY_WINDOW_IDS", 3)
    history = []
    for offset in range(rng.randrange(1, 80)):
        tid = f"tid-{rng.randrange(6)}"
        state = rng.choice([*list(S)[:6], None])
        raw = None if state is None else value(state, rng.randrange(3), rng.randrange(3), rng.randrange(10**6))
        history.append((offset, tid, raw))

    every = CoordinatorModel(LatencyRecorders().sinks())
    records = [decode_record(encode_key(tid), raw, offset, 1000 + offset, False) for offset, tid, raw in history]
    every.apply(TransactionLogRecords(0, records, 0, True))

    tail = tail_replaying(monkeypatch, len(history))
    tail._consumer.queued = [TombstoneAware(0, offset, raw, key=encode_key(tid)) for offset, tid, raw in history]
    last = CoordinatorModel(LatencyRecorders().sinks())
    last.apply_batch(e for e in tail.poll(timeout=0) if isinstance(e, TransactionLogRecords))
    assert model_state(last) == model_state(every)


class TombstoneAware(Message):
    """The runs tests' Message, with a None value kept as a tombstone."""

    def __init__(self, partition: int, offset: int, value: bytes | None, key: bytes) -> None:
        super().__init__(partition, offset, b"", key)
        self._value = value
