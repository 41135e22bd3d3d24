"""CoordinatorModel on synthetic records: counts, replay, pending markers, revoke, decode errors."""

from __future__ import annotations

import logging

from exporter.codec import DecodeError
from exporter.codec.value import TAGGED_FIELDS
from exporter.contracts.events import (
    PartitionAssigned,
    PartitionProgress,
    PartitionReplayed,
    PartitionRevoked,
    SourceStatus,
    UndecodableRecord,
)
from exporter.model import CoordinatorModel, ObservationSinks
from tests.model.builders import S, log_event, pending_markers, snapshot

# Tags the codec does not name: a newer Kafka's, above the highest it names.
NEXT_TAG = TAGGED_FIELDS[-1].tag + 1
LATER_TAG = NEXT_TAG + 5


class ListSink:
    def __init__(self) -> None:
        self.values: list[int] = []
        self.transactions: list[tuple[str, int]] = []  # (transactional id, producer id) per value

    def record(self, value_ms: int, now_ms: int, transactional_id: str, producer_id: int) -> None:
        self.values.append(value_ms)
        self.transactions.append((transactional_id, producer_id))


def new_model() -> tuple[CoordinatorModel, list[ListSink], ListSink, ListSink]:
    append = [ListSink() for _ in range(6)]
    commit, abort = ListSink(), ListSink()
    model = CoordinatorModel(ObservationSinks(append, commit, abort))
    return model, append, commit, abort


def records_by_state(append: list[ListSink]) -> list[int]:
    """Live records per target state: each is one append-latency observation."""
    return [len(sink.values) for sink in append]


def live_partition(model: CoordinatorModel, partition: int = 0) -> None:
    model.apply(PartitionAssigned(partition))
    model.apply(PartitionReplayed(partition))


def test_live_records_are_counted_per_target_state_with_their_latency():
    model, append, _, _ = new_model()
    live_partition(model)
    model.apply(log_event("a", S.ONGOING, timestamp_ms=1000, received_ms=1007))
    model.apply(log_event("a", S.PREPARE_COMMIT, timestamp_ms=1010, received_ms=1012))
    model.apply(log_event("b", S.ONGOING, timestamp_ms=1020, received_ms=1020))

    assert records_by_state(append) == [0, 2, 1, 0, 0, 0]
    assert append[S.ONGOING].values == [7, 0]
    assert append[S.PREPARE_COMMIT].values == [2]
    assert list(snapshot(model).transactions_by_state) == [0, 1, 1, 0, 0, 0]


def test_replayed_records_build_state_but_are_neither_counted_nor_timed():
    model, append, commit, _ = new_model()
    model.apply(PartitionAssigned(0))
    model.apply(log_event("a", S.PREPARE_COMMIT, timestamp_ms=1000, replay=True))
    model.apply(log_event("b", S.ONGOING, timestamp_ms=1000, replay=True))
    # Not reported before the replay ends...
    assert list(snapshot(model).transactions_by_state) == [0] * 6
    assert pending_markers(model) == (0, None)
    model.apply(PartitionReplayed(0))
    # ...then the state is there, without counts or latencies from history.
    assert list(snapshot(model).transactions_by_state) == [0, 1, 1, 0, 0, 0]
    assert pending_markers(model) == (1, 1000)
    assert records_by_state(append) == [0] * 6
    # A completion whose prepare was replayed is not a marker completion duration.
    model.apply(log_event("a", S.COMPLETE_COMMIT, timestamp_ms=2000))
    assert commit.values == []
    assert append[S.COMPLETE_COMMIT].values == [5]


def test_a_completion_pairs_with_a_prepare_another_exporter_counted() -> None:
    """A coordinator moved between the prepare and the complete: the new leader's exporter replays
    the prepare (the old one's exporter counted it) and counts the completion, as it counts the
    complete record; a prepare from before the exporters counted is history."""
    model, _, commit, _ = new_model()
    model.apply(PartitionAssigned(0, counting_since_ms=1500))
    model.apply(log_event("old", S.PREPARE_COMMIT, timestamp_ms=1000, replay=True))
    model.apply(log_event("moved", S.PREPARE_COMMIT, timestamp_ms=2000, replay=True))
    model.apply(PartitionReplayed(0))
    model.apply(log_event("old", S.COMPLETE_COMMIT, timestamp_ms=2010))
    model.apply(log_event("moved", S.COMPLETE_COMMIT, timestamp_ms=2040))
    assert commit.values == [40]


def test_pending_markers_go_up_and_down_and_the_oldest_prepare_is_tracked():
    model, _, commit, abort = new_model()
    live_partition(model, 0)
    live_partition(model, 1)
    model.apply(log_event("a", S.ONGOING, timestamp_ms=900))
    model.apply(log_event("a", S.PREPARE_COMMIT, timestamp_ms=1000))
    model.apply(log_event("b", S.PREPARE_ABORT, partition=1, timestamp_ms=1500))
    model.apply(log_event("c", S.PREPARE_COMMIT, timestamp_ms=2000))
    assert pending_markers(model) == (3, 1000)

    model.apply(log_event("a", S.COMPLETE_COMMIT, timestamp_ms=1040))
    assert pending_markers(model) == (2, 1500)
    assert commit.values == [40]

    model.apply(log_event("b", S.COMPLETE_ABORT, partition=1, timestamp_ms=1600))
    assert abort.values == [100]
    model.apply(log_event("c", S.COMPLETE_COMMIT, timestamp_ms=2003))
    assert pending_markers(model) == (0, None)
    assert commit.values == [40, 3]
    assert list(snapshot(model).transactions_by_state) == [0, 0, 0, 0, 2, 1]


def test_a_new_prepare_after_completion_restarts_the_pending_age():
    model, _, _, _ = new_model()
    live_partition(model)
    for state, ts in ((S.PREPARE_COMMIT, 1000), (S.COMPLETE_COMMIT, 1010), (S.ONGOING, 5000), (S.PREPARE_ABORT, 6000)):
        model.apply(log_event("a", state, timestamp_ms=ts))
    assert pending_markers(model) == (1, 6000)


def test_tombstones_drop_the_id_and_are_counted_apart_from_target_states():
    model, append, _, _ = new_model()
    live_partition(model)
    model.apply(log_event("a", S.COMPLETE_COMMIT))
    model.apply(log_event("a", None))
    model.apply(log_event("never-seen", None))
    assert list(snapshot(model).transactions_by_state) == [0] * 6
    assert snapshot(model).tombstones == 2
    assert records_by_state(append) == [0, 0, 0, 0, 1, 0]


def test_states_brokers_never_write_are_applied_as_what_brokers_write_and_counted_apart():
    model, append, _, _ = new_model()
    live_partition(model)
    model.apply(log_event("a", S.ONGOING))
    model.apply(log_event("a", S.PREPARE_EPOCH_FENCE, timestamp_ms=2000))
    assert list(snapshot(model).transactions_by_state) == [0, 0, 0, 1, 0, 0]
    assert pending_markers(model) == (1, 2000)
    model.apply(log_event("b", S.EMPTY))
    model.apply(log_event("b", S.DEAD))
    assert list(snapshot(model).transactions_by_state) == [0, 0, 0, 1, 0, 0]
    assert snapshot(model).unwritten_states == {S.DEAD: 1, S.PREPARE_EPOCH_FENCE: 1}
    assert records_by_state(append) == [1, 1, 0, 0, 0, 0]
    assert snapshot(model).tombstones == 0


def test_revoke_drops_all_state_of_the_partition():
    model, append, _, _ = new_model()
    live_partition(model, 0)
    live_partition(model, 7)
    model.apply(log_event("a", S.PREPARE_COMMIT, partition=0, timestamp_ms=1000))
    model.apply(log_event("b", S.PREPARE_COMMIT, partition=7, timestamp_ms=500))
    model.apply(log_event("c", S.ONGOING, partition=7))
    model.apply(PartitionRevoked(7))
    assert [row.partition for row in snapshot(model).partitions] == [0]
    assert pending_markers(model) == (1, 1000)
    assert list(snapshot(model).transactions_by_state) == [0, 0, 1, 0, 0, 0]
    # Observations are cumulative: a revoke does not take back what was counted.
    assert records_by_state(append) == [0, 1, 2, 0, 0, 0]


def test_reassignment_starts_a_fresh_replay():
    model, _, _, _ = new_model()
    live_partition(model)
    model.apply(log_event("a", S.ONGOING))
    model.apply(PartitionAssigned(0))
    assert list(snapshot(model).transactions_by_state) == [0] * 6
    assert model.tracked_id("a") is None


def test_decode_errors_are_counted_by_reason_and_advance_the_offset():
    model, _, _, _ = new_model()
    model.apply(PartitionAssigned(0))
    model.apply(UndecodableRecord(0, 41, DecodeError("unknown_key_version", "key version 3")))
    model.apply(UndecodableRecord(0, 42, DecodeError("truncated", "value of 1 bytes")))
    model.apply(UndecodableRecord(0, 43, DecodeError("truncated", "value of 1 bytes")))
    assert snapshot(model).decode_errors["truncated"] == 2
    assert snapshot(model).decode_errors["unknown_key_version"] == 1
    assert set(snapshot(model).decode_errors) == set(DecodeError.REASONS)
    model.apply(PartitionProgress(0, position=40, high_watermark=50))
    assert snapshot(model).partitions[0].consumer_lag == 6  # read up to 43


def test_consumer_lag_from_progress_and_records():
    model, _, _, _ = new_model()
    model.apply(PartitionAssigned(3))
    assert snapshot(model).partitions[0].consumer_lag is None
    model.apply(PartitionProgress(3, position=10, high_watermark=25))
    assert snapshot(model).partitions[0].consumer_lag == 15
    model.apply(log_event("a", S.ONGOING, partition=3, offset=19, replay=True))
    (row,) = snapshot(model).partitions
    assert (row.partition, row.consumer_lag, row.last_record_timestamp_ms) == (3, 5, 1_000_000)


def test_source_status():
    model, _, _, _ = new_model()
    assert snapshot(model).source_up is False
    model.apply(SourceStatus(True))
    assert snapshot(model).source_up is True


def test_apply_batch_equals_apply_one_by_one():
    events = [PartitionAssigned(0), PartitionReplayed(0)] + [
        log_event(f"t{i % 7}", state, offset=i, timestamp_ms=1000 + i)
        for i, state in enumerate([S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT] * 10)
    ]
    one, one_append, _, _ = new_model()
    for event in events:
        one.apply(event)
    batch, batch_append, _, _ = new_model()
    batch.apply_batch(events)
    assert records_by_state(one_append) == records_by_state(batch_append) == [0, 10, 10, 0, 10, 0]
    assert snapshot(one) == snapshot(batch)


def _with_tags(tid: str, offset: int, unknown: tuple[tuple[int, bytes], ...], replay: bool = False):
    from exporter.codec import TransactionLogValue, decode_record, encode_key, encode_value
    from exporter.contracts.events import TransactionLogRecords

    value = TransactionLogValue(
        version=1,
        producer_id=4000,
        producer_epoch=2,
        transaction_timeout_ms=60_000,
        state=S.ONGOING,
        partitions={"orders": [0]},
        last_update_timestamp_ms=1_000_000,
        start_timestamp_ms=1_000_000,
        next_producer_epoch=3,
        unknown_tagged_fields=unknown,
    )
    record = decode_record(encode_key(tid), encode_value(value), offset, 1_000_000, partitions=False)
    return TransactionLogRecords(0, [record], 1_000_005, replay)


def test_records_with_unknown_tagged_fields_are_counted_by_tag_and_each_tag_warned_of_once(caplog):
    model, append, _, _ = new_model()
    live_partition(model)
    with caplog.at_level(logging.WARNING, logger="exporter.model"):
        model.apply(_with_tags("a", 0, ((NEXT_TAG, b"\x7f\xfe"),)))
        model.apply(_with_tags("b", 1, ((NEXT_TAG, b"\x00\x01"), (LATER_TAG, b""))))
        model.apply(_with_tags("c", 2, ((NEXT_TAG, b"\x00\x02"),), replay=True))  # replayed: counted too
        model.apply(_with_tags("d", 3, ((1000, b"x"), (2**20, b"y"))))  # beyond 63: one label
        model.apply(_with_tags("e", 4, ()))
    assert snapshot(model).unknown_tagged_fields == {str(NEXT_TAG): 3, str(LATER_TAG): 1, "other": 1}
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 3 and all(r.levelno == logging.WARNING for r in caplog.records)
    assert warnings[0].startswith(
        f"__transaction_state partition 0 offset 0 (transactional id 'a'): tagged field {NEXT_TAG}"
    )
    assert f'kafka_transaction_state_log_unknown_tagged_fields_total{{tag="{NEXT_TAG}"}}' in warnings[0]
    assert "tagged field 1000 " in warnings[2] and '{tag="other"}' in warnings[2]
    assert records_by_state(append)[S.ONGOING] == 4  # the records themselves count as any other


def test_a_value_version_above_1_is_a_counted_decode_error_warned_of_once(caplog):
    model, _, _, _ = new_model()
    live_partition(model)
    with caplog.at_level(logging.WARNING, logger="exporter.model"):
        for offset, version in enumerate((2, 2, 3)):
            model.apply(UndecodableRecord(0, offset, DecodeError("unknown_value_version", f"value version {version}")))
        model.apply(UndecodableRecord(0, 3, DecodeError("truncated", "value of 1 bytes")))
    assert snapshot(model).decode_errors["unknown_value_version"] == 3
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning.startswith("__transaction_state partition 0 offset 0: value version 2")
    assert 'kafka_transaction_state_log_decode_errors_total{reason="unknown_value_version"}' in warning
