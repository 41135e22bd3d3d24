"""The model's in-flight transactions (CoordinatorModel.in_flight_transactions), for the transactions
view: kept only while ONGOING or PREPARE_*, with when they entered that state, and marker errors noted
per partition."""

from __future__ import annotations

from exporter.codec import TransactionLogValue, decode_record, encode_key, encode_value
from exporter.contracts.events import (
    MarkerWriteFailed,
    MarkerWriteRetried,
    PartitionAssigned,
    PartitionReplayed,
    PartitionRevoked,
    TransactionLogAppendFailed,
    TransactionLogRecords,
)
from exporter.metrics import LatencyRecorders
from exporter.model import AppendErrorRow, CoordinatorModel, MarkerErrorRow
from tests.model.builders import S, in_flight, log_event, snapshot


def live_model(*partitions: int) -> CoordinatorModel:
    model = CoordinatorModel(LatencyRecorders(now_ms=1_000_000).sinks())
    for p in partitions:
        model.apply(PartitionAssigned(p))
        model.apply(PartitionReplayed(p))
    return model


def test_kept_while_ongoing_or_pending_with_state_entry_times():
    model = live_model(0)
    model.apply(log_event("t", S.EMPTY, timestamp_ms=1_000))
    assert in_flight(model) == {}
    model.apply(log_event("t", S.ONGOING, timestamp_ms=2_000))  # start timestamp: 1_950 (builders)
    model.apply(log_event("t", S.ONGOING, timestamp_ms=2_500))  # partitions added: same transaction
    (entry,) = in_flight(model).values()
    assert entry.state_entered_ms == 2_450 and entry.coordinator_partition == 0
    assert (entry.state, entry.producer_id, entry.producer_epoch) == (S.ONGOING, 4000, 2)
    assert entry.partitions == ("orders-0", "orders-1") and entry.marker_errors == ()
    model.apply(log_event("t", S.PREPARE_COMMIT, timestamp_ms=3_000))
    entry = in_flight(model)["t"]
    assert entry.state_entered_ms == 3_000 and entry.state == S.PREPARE_COMMIT
    model.apply(log_event("t", S.COMPLETE_COMMIT, timestamp_ms=3_100))
    assert in_flight(model) == {}


def test_selected_by_state_and_moved_with_each_transition():
    model = live_model(0, 1)
    model.apply(log_event("ongoing", S.ONGOING, partition=0))
    model.apply(log_event("commit", S.ONGOING, partition=1))
    model.apply(log_event("commit", S.PREPARE_COMMIT, partition=1))
    model.apply(log_event("fenced", S.PREPARE_COMMIT, partition=0))
    model.apply(log_event("fenced", S.PREPARE_ABORT, partition=0))  # an epoch fence turns it around

    def ids(*states):
        return sorted(in_flight(model, *states))

    assert ids(S.ONGOING) == ["ongoing"]
    assert ids(S.PREPARE_COMMIT) == ["commit"]
    assert ids(S.PREPARE_ABORT) == ["fenced"]
    assert ids(S.ONGOING, S.PREPARE_ABORT) == ["fenced", "ongoing"]
    assert sorted(in_flight(model)) == ["commit", "fenced", "ongoing"]


def test_only_live_partitions_and_revoked_ones_forgotten():
    model = live_model(0)
    model.apply(PartitionAssigned(1))  # replaying: its state is partial
    model.apply(log_event("a", S.ONGOING, partition=0))
    model.apply(log_event("b", S.ONGOING, partition=1, replay=True))
    assert set(in_flight(model)) == {"a"}
    model.apply(PartitionReplayed(1))
    assert set(in_flight(model)) == {"a", "b"}
    model.apply(PartitionRevoked(0))
    assert set(in_flight(model)) == {"b"}


def test_tombstone_and_timeout_abort_leave_in_flight():
    model = live_model(0)
    model.apply(log_event("gone", S.ONGOING))
    model.apply(log_event("gone", None))
    model.apply(log_event("aborted", S.ONGOING))
    model.apply(log_event("aborted", S.PREPARE_ABORT, timestamp_ms=1_200_000))
    assert set(in_flight(model)) == {"aborted"}
    model.apply(log_event("aborted", S.COMPLETE_ABORT, timestamp_ms=1_200_010))
    assert in_flight(model) == {}


def test_records_decoded_without_partitions_list_them_when_read():
    """The live source decodes without TransactionPartitions (the hot path); the model decodes them
    from the bytes it keeps, only for the rows a reader asks for."""
    model = live_model(0)
    raw = encode_value(
        TransactionLogValue(
            version=1,
            producer_id=7,
            producer_epoch=0,
            transaction_timeout_ms=60_000,
            state=S.ONGOING,
            partitions={"orders": [3, 4]},
            last_update_timestamp_ms=5,
            start_timestamp_ms=5,
        )
    )
    record = decode_record(encode_key("lazy"), raw, 0, 10, partitions=False)
    model.apply(TransactionLogRecords(0, [record], 12, False))
    entry = in_flight(model)["lazy"]
    assert entry.partitions == ("orders-3", "orders-4") and entry.partitions_error is None


def test_marker_errors_noted_per_partition_on_pending_transactions_only():
    model = live_model(0, 1)
    model.apply(log_event("held", S.ONGOING, partition=1))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-1", 5_000))  # not pending yet
    assert in_flight(model)["held"].marker_errors == ()
    model.apply(log_event("held", S.PREPARE_COMMIT, partition=1))
    before = in_flight(model)["held"]
    for seen in (6_000, 7_000):
        model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-1", seen))
    model.apply(MarkerWriteFailed("INVALID_PRODUCER_EPOCH", "held", "orders-0", 7_500))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "unknown", "orders-1", 8_000))
    model.apply(MarkerWriteFailed("CORRUPT_MESSAGE", "held", None, 8_000))  # fatal: no partition
    assert in_flight(model)["held"].marker_errors == (
        MarkerErrorRow("orders-0", "INVALID_PRODUCER_EPOCH", 1, 7_500),
        MarkerErrorRow("orders-1", "NOT_ENOUGH_REPLICAS", 2, 7_000),
    )
    assert before.marker_errors == ()  # a row read earlier is never changed
    assert snapshot(model).marker_retries == {"NOT_ENOUGH_REPLICAS": 4}  # the counters count them all
    model.apply(log_event("held", S.COMPLETE_COMMIT, partition=1))
    assert in_flight(model) == {}


def test_every_error_a_partition_answered_is_kept_the_latest_first():
    """A leader that moved (NOT_LEADER_OR_FOLLOWER) and then an ISR too small (NOT_ENOUGH_REPLICAS):
    both stay on the row, so the view can explain each."""
    model = live_model(0)
    model.apply(log_event("held", S.PREPARE_COMMIT))
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-1", 5_000))
    model.apply(MarkerWriteRetried("NOT_LEADER_OR_FOLLOWER", "held", "orders-1", 6_000))
    for seen in (7_000, 8_000):
        model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", "held", "orders-1", seen))
    assert in_flight(model)["held"].marker_errors == (
        MarkerErrorRow("orders-1", "NOT_ENOUGH_REPLICAS", 3, 8_000),
        MarkerErrorRow("orders-1", "NOT_LEADER_OR_FOLLOWER", 1, 6_000),
    )


def test_append_errors_noted_on_the_coordinator_partition_since_each_transaction_entered_its_state():
    model = live_model(0, 1)
    model.apply(log_event("old", S.ONGOING, partition=1, timestamp_ms=1_000))  # entered at 950
    model.apply(log_event("new", S.ONGOING, partition=1, timestamp_ms=5_000))  # entered at 4_950
    model.apply(log_event("elsewhere", S.ONGOING, partition=0, timestamp_ms=1_000))
    before = in_flight(model)["old"]
    model.apply(TransactionLogAppendFailed(S.PREPARE_ABORT, "NOT_ENOUGH_REPLICAS", "old", 2_000))
    model.apply(TransactionLogAppendFailed(S.PREPARE_ABORT, "NOT_ENOUGH_REPLICAS", "old", 6_000))
    model.apply(TransactionLogAppendFailed(S.PREPARE_COMMIT, "REQUEST_TIMED_OUT", "new", 7_000))
    model.apply(TransactionLogAppendFailed(S.ONGOING, "NOT_ENOUGH_REPLICAS", "untracked", 7_000))  # counted only
    model.apply(TransactionLogAppendFailed(S.ONGOING, "NOT_ENOUGH_REPLICAS"))  # no id: counted only
    rows = in_flight(model)
    assert rows["old"].append_errors == (
        AppendErrorRow(S.PREPARE_COMMIT, "REQUEST_TIMED_OUT", 1, 7_000),
        AppendErrorRow(S.PREPARE_ABORT, "NOT_ENOUGH_REPLICAS", 2, 6_000),
    )
    # Since it started (4_950): the partition's errors last seen at 6_000 and 7_000, with their totals.
    assert rows["new"].append_errors == rows["old"].append_errors
    model.apply(log_event("newest", S.ONGOING, partition=1, timestamp_ms=6_550))  # entered at 6_500
    assert in_flight(model)["newest"].append_errors == (
        AppendErrorRow(S.PREPARE_COMMIT, "REQUEST_TIMED_OUT", 1, 7_000),
    )
    assert rows["elsewhere"].append_errors == () and before.append_errors == ()
    assert sum(snapshot(model).append_errors.values()) == 5


def test_stuck_prepares_counted_past_their_timeout_plus_the_padding():
    model = live_model(0)
    model.apply(log_event("stuck", S.PREPARE_COMMIT, timestamp_ms=1_000))  # 60 s timeout (builders)
    model.apply(log_event("aborting", S.PREPARE_ABORT, timestamp_ms=50_000))
    model.apply(log_event("open", S.ONGOING, timestamp_ms=1_000))  # ONGOING: late, never stuck
    assert snapshot(model, now_ms=61_000, late_padding_ms=0).stuck_prepares == 0
    assert snapshot(model, now_ms=61_001, late_padding_ms=0).stuck_prepares == 1
    assert snapshot(model, now_ms=71_001, late_padding_ms=10_000).stuck_prepares == 1
    assert snapshot(model, now_ms=120_001, late_padding_ms=10_000).stuck_prepares == 2
    model.apply(log_event("stuck", S.COMPLETE_COMMIT, timestamp_ms=120_000))
    assert snapshot(model, now_ms=120_001, late_padding_ms=10_000).stuck_prepares == 1
