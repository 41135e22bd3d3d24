"""CoordinatorModel on broker-log events: counters, and the final-append retry queue taken out of
the pending-markers count until the COMPLETE_* record arrives."""

from __future__ import annotations

import pytest

from exporter.contracts.events import (
    BrokerLogStats,
    CompleteAppendRetried,
    CoordinatorChanged,
    MarkerWriteFailed,
    MarkerWriteRetried,
    PartitionAssigned,
    PartitionRevoked,
    TransactionLogAppendFailed,
)
from tests.model.builders import S, log_event, pending_markers, snapshot
from tests.model.test_coordinator import live_partition, new_model


def test_counters_by_labels():
    model, *_ = new_model()
    for event in (
        TransactionLogAppendFailed(S.PREPARE_COMMIT, "NOT_ENOUGH_REPLICAS"),
        TransactionLogAppendFailed(S.PREPARE_COMMIT, "NOT_ENOUGH_REPLICAS"),
        TransactionLogAppendFailed(S.COMPLETE_ABORT, "COORDINATOR_NOT_AVAILABLE"),
        MarkerWriteRetried("NOT_ENOUGH_REPLICAS"),
        MarkerWriteRetried("REQUEST_TIMED_OUT"),
        MarkerWriteFailed("INVALID_PRODUCER_EPOCH"),
        CompleteAppendRetried("nobody"),
        CoordinatorChanged(3, True),
        BrokerLogStats(lines=10, malformed=1),
        BrokerLogStats(lines=5, unrecognized=2, truncated=1, rotations=1),
    ):
        model.apply(event)
    assert snapshot(model).append_errors == {
        (S.PREPARE_COMMIT, "NOT_ENOUGH_REPLICAS"): 2,
        (S.COMPLETE_ABORT, "COORDINATOR_NOT_AVAILABLE"): 1,
    }
    assert snapshot(model).marker_retries == {"NOT_ENOUGH_REPLICAS": 1, "REQUEST_TIMED_OUT": 1}
    assert snapshot(model).marker_failures == {"INVALID_PRODUCER_EPOCH": 1}
    assert snapshot(model).complete_append_retries == 1
    assert snapshot(model).broker_log == BrokerLogStats(lines=15, truncated=1, malformed=1, unrecognized=2, rotations=1)


@pytest.mark.parametrize("complete", [S.COMPLETE_COMMIT, None])
def test_a_retried_final_append_is_not_pending_until_it_lands(complete):
    model, *_ = new_model()
    live_partition(model, 0)
    live_partition(model, 1)
    model.apply(log_event("a", S.PREPARE_COMMIT, partition=1, timestamp_ms=1000))
    model.apply(log_event("b", S.PREPARE_COMMIT, partition=0, timestamp_ms=2000))
    assert pending_markers(model) == (2, 1000)

    model.apply(CompleteAppendRetried("a"))
    model.apply(CompleteAppendRetried("a"))  # each retry is logged again
    assert snapshot(model).complete_append_retries == 2
    # Out of the count; still the oldest prepare without its complete record.
    assert pending_markers(model) == (1, 1000)

    if complete is None:  # the partition moves away: its state goes, the retry mark with it
        model.apply(PartitionRevoked(1))
    else:
        model.apply(log_event("a", complete, partition=1, timestamp_ms=3000))
    assert pending_markers(model) == (1, 2000)
    # The next transaction of the same id is pending again.
    if complete is not None:
        model.apply(log_event("a", S.ONGOING, partition=1, timestamp_ms=4000))
        model.apply(log_event("a", S.PREPARE_ABORT, partition=1, timestamp_ms=5000))
        assert pending_markers(model) == (2, 2000)


def test_a_retry_of_an_id_not_pending_changes_no_gauge():
    model, *_ = new_model()
    live_partition(model)
    model.apply(log_event("a", S.ONGOING))
    model.apply(CompleteAppendRetried("a"))  # read before its PREPARE_COMMIT record
    model.apply(log_event("a", S.PREPARE_COMMIT))
    assert pending_markers(model)[0] == 1
    model.apply(PartitionAssigned(0))  # a reassignment replays from scratch
    assert pending_markers(model)[0] == 0


def test_unknown_events_are_still_refused():
    model, *_ = new_model()
    with pytest.raises(TypeError):
        model.apply(object())  # type: ignore[arg-type]  # because no event: what the test gives it
