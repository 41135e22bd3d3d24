"""Single-line parsers on the formats of Kafka 3.6 to 4.x (Kafka's source), one case per kind."""

from __future__ import annotations

import pytest

from exporter.broker_log.errors import ERROR_NAMES, UNKNOWN, error_name
from exporter.broker_log.lines import (
    MALFORMED,
    UNRECOGNIZED,
    AppendFailureLine,
    parse_entry,
    parse_fatal_continuation,
)
from exporter.codec.states import TransactionState as S
from exporter.contracts.events import CompleteAppendRetried, CoordinatorChanged, MarkerWriteFailed, MarkerWriteRetried

TS = "[2026-11-21 07:23:25,279]"
TSM = "(kafka.coordinator.transaction.TransactionStateManager)"
HANDLER = "(kafka.coordinator.transaction.TransactionMarkerRequestCompletionHandler)"
META_3 = (
    "TxnTransitMetadata(producerId=2, lastProducerId=2, producerEpoch=0, lastProducerEpoch=-1, txnTimeoutMs=60000,"
    " txnState={}, topicPartitions=Set(a-1, a-0), txnStartTimestamp=1, txnLastUpdateTimestamp=2)"
)
META_40 = (
    "TxnTransitMetadata(producerId=2, previousProducerId=2, nextProducerId=-1, producerEpoch=0, lastProducerEpoch=-1,"
    " txnTimeoutMs=60000, txnState={}, topicPartitions=Set(a-0), txnStartTimestamp=1, txnLastUpdateTimestamp=2,"
    " clientTransactionVersion=TV_2)"
)
META_41 = (
    "TxnTransitMetadata[producerId=2, prevProducerId=2, nextProducerId=-1, producerEpoch=0, lastProducerEpoch=-1,"
    " txnTimeoutMs=60000, txnState={}, topicPartitions=[a-1, a-0], txnStartTimestamp=1, txnLastUpdateTimestamp=2,"
    " clientTransactionVersion=TV_2]"
)


def info_line(meta: str, error: str = "COORDINATOR_NOT_AVAILABLE", tid: str = "t-1") -> str:
    return (
        f"{TS} INFO [Transaction State Manager 1]: TransactionalId {tid} append transaction log for {meta} transition"
        f" failed due to {error}, resetting pending state from Some(PrepareCommit), aborting state transition and"
        f" returning {error} in the callback {TSM}"
    )


def debug_line(
    meta: str, exception: str = "org.apache.kafka.common.errors.NotEnoughReplicasException", tid: str = "t-1"
) -> str:
    return f"{TS} DEBUG [Transaction State Manager 1]: Appending {tid}'s new metadata {meta} failed due to {exception} {TSM}"


@pytest.mark.parametrize("meta", [META_3, META_40])
@pytest.mark.parametrize(
    ("display", "state"),
    [
        ("Empty", S.EMPTY),
        ("Ongoing", S.ONGOING),
        ("PrepareCommit", S.PREPARE_COMMIT),
        ("PrepareAbort", S.PREPARE_ABORT),
        ("CompleteCommit", S.COMPLETE_COMMIT),
        ("CompleteAbort", S.COMPLETE_ABORT),
        ("PrepareEpochFence", S.PREPARE_ABORT),
    ],
)
def test_display_names_of_3x_and_4_0_map_to_enum_names(meta, display, state):
    assert parse_entry(info_line(meta.format(display))) == AppendFailureLine(
        "t-1", state, "COORDINATOR_NOT_AVAILABLE", False
    )


@pytest.mark.parametrize("state", [s for s in S if s <= S.COMPLETE_ABORT])
def test_enum_names_of_4_1_and_later(state):
    assert parse_entry(debug_line(META_41.format(state.name))) == AppendFailureLine(
        "t-1", state, "NOT_ENOUGH_REPLICAS", True
    )


def test_every_ending_of_the_info_line_and_odd_transactional_ids():
    meta = META_41.format("PREPARE_ABORT")
    for ending in (
        "not resetting pending state Some(PrepareAbort) but just returning the error in the callback to let"
        " the caller retry",
        "aborting state transition and returning the error in the callback since"
        " retrieving metadata returned NOT_COORDINATOR",
    ):
        line = (
            f"{TS} INFO [Transaction State Manager 1]: TransactionalId a b (c) append transaction log for {meta}"
            f" transition failed due to NOT_COORDINATOR, {ending} {TSM}"
        )
        assert parse_entry(line) == AppendFailureLine("a b (c)", S.PREPARE_ABORT, "NOT_COORDINATOR", False)


def test_errors_outside_kafkas_table_become_unknown():
    assert parse_entry(info_line(META_3.format("Ongoing"), error="SOMETHING_NEW")).error == UNKNOWN
    assert (
        parse_entry(debug_line(META_3.format("Ongoing"), exception="java.lang.NullPointerException")).error == UNKNOWN
    )
    assert error_name("org.apache.kafka.common.errors.TimeoutException") == "REQUEST_TIMED_OUT"
    assert error_name("RecordTooLargeException") == "MESSAGE_TOO_LARGE"
    assert error_name("org.apache.kafka.common.errors.KafkaStorageException") == "KAFKA_STORAGE_ERROR"
    assert {"NOT_ENOUGH_REPLICAS", "TRANSACTION_ABORTABLE", "UNKNOWN_SERVER_ERROR"} <= ERROR_NAMES
    assert "NONE" not in ERROR_NAMES


def test_marker_errors_retriable_permanent_and_removed():
    prefix = f"{TS} INFO [Transaction Marker Request Completion Handler 1]: Sending t-1's transaction marker"
    retry = (
        f"{prefix} for partition orders-3 has failed with error"
        f" org.apache.kafka.common.errors.NotLeaderOrFollowerException, retrying with current coordinator epoch 4 {HANDLER}"
    )
    permanent = (
        f"{prefix} for partition orders-3 has permanently failed with error"
        f" org.apache.kafka.common.errors.InvalidProducerEpochException with the current coordinator epoch 4;"
        f" cancel sending any more transaction markers TxnMarkerEntry{{...}} to the brokers {HANDLER}"
    )
    removed = (
        f"{prefix} from partition orders-3 has failed with  UNSUPPORTED_FOR_MESSAGE_FORMAT. This partition will"
        f" be removed from the set of partitions waiting for completion {HANDLER}"
    )
    assert parse_entry(retry) == MarkerWriteRetried("NOT_LEADER_OR_FOLLOWER", "t-1", "orders-3")
    assert parse_entry(permanent) == MarkerWriteFailed("INVALID_PRODUCER_EPOCH", "t-1", "orders-3")
    assert parse_entry(removed) == MarkerWriteFailed("UNSUPPORTED_FOR_MESSAGE_FORMAT", "t-1", "orders-3")
    fenced = permanent.replace("InvalidProducerEpochException", "TransactionCoordinatorFencedException")
    assert parse_entry(fenced) == MarkerWriteFailed("TRANSACTION_COORDINATOR_FENCED", "t-1", "orders-3")
    # An id with the marker text in it, and a topic with dashes: the id ends at the last "'s transaction".
    odd = retry.replace("t-1's", "a's transaction marker for partition x-1 has b's").replace("orders-3", "my-orders-12")
    assert parse_entry(odd) == MarkerWriteRetried(
        "NOT_LEADER_OR_FOLLOWER", "a's transaction marker for partition x-1 has b", "my-orders-12"
    )


def test_fatal_marker_error_from_the_stack_trace():
    line = (
        "java.lang.IllegalStateException: Received fatal error org.apache.kafka.common.errors.CorruptRecordException"
        " while sending txn marker for t-1"
    )
    assert parse_fatal_continuation(line) == MarkerWriteFailed("CORRUPT_MESSAGE", "t-1")
    assert parse_fatal_continuation("\tat kafka.coordinator.transaction.X.onComplete(X.scala:1)") is None


@pytest.mark.parametrize("open_", ["(", "["])
def test_final_append_retry_3x_and_4x(open_):
    close = ")" if open_ == "(" else "]"
    line = (
        f"{TS} INFO [Transaction Marker Channel Manager 1]: Not available to append PendingCompleteTxn{open_}"
        f"transactionalId=t, 1, coordinatorEpoch=0, txnMetadata=TransactionMetadata(transactionalId=t, 1), "
        f"newMetadata=...{close}: possible causes include UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,"
        f" NOT_ENOUGH_REPLICAS_AFTER_APPEND and REQUEST_TIMED_OUT; retry appending"
        f" (kafka.coordinator.transaction.TransactionMarkerChannelManager)"
    )
    assert parse_entry(line) == CompleteAppendRetried("t, 1")


def test_coordinator_elected_and_resigned():
    logger = "(kafka.coordinator.transaction.TransactionCoordinator)"
    elected = (
        f"{TS} INFO [TransactionCoordinator id=1] Elected as the txn coordinator for partition 7 at epoch 3 {logger}"
    )
    resigned = f"{TS} INFO [TransactionCoordinator id=1] Resigned as the txn coordinator for partition 7 at epoch Some(3) {logger}"
    # The epoch is the partition's leader epoch, which its batches carry (failover accounting).
    assert parse_entry(elected) == CoordinatorChanged(7, True, 3)
    assert parse_entry(resigned) == CoordinatorChanged(7, False, 3)
    assert parse_entry(resigned.replace("Some(3)", "None")) == CoordinatorChanged(7, False, None)


def test_other_lines_malformed_and_unrecognized():
    other = f"{TS} INFO [TransactionCoordinator id=1] Initialized transactionalId t with producerId 4 (kafka.coordinator.transaction.TransactionCoordinator)"
    assert parse_entry(other) is None
    assert parse_entry("[2026-11-21] INFO no logger at the end kafka.coordinator.transaction.X") == MALFORMED
    assert parse_entry(info_line("TxnTransitMetadata(no state here)")) == UNRECOGNIZED
    assert parse_entry(info_line(META_3.format("Dead"))) == UNRECOGNIZED
    changed = f"{TS} INFO [Transaction Marker Request Completion Handler 1]: Sending t's transaction marker failed with a new text {HANDLER}"
    assert parse_entry(changed) == UNRECOGNIZED
    # The same text from another logger is not the coordinator's.
    assert parse_entry(info_line(META_3.format("Ongoing")).replace("TransactionStateManager", "SomethingElse")) is None
