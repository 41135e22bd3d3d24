"""Kafka's meaning of each error name a marker write or a `__transaction_state` append can meet, in
an operator's words; any other name gets its code."""

from __future__ import annotations

from exporter.broker_log.errors import ERRORS, UNKNOWN

_CODES = {name: code for code, name, _ in ERRORS}

# Kafka's meaning of each error, in an operator's words (Errors.java's table, paraphrased), for the
# errors a marker write or a __transaction_state append can meet; any other name gets its code.
MEANINGS: dict[str, str] = {
    "NOT_ENOUGH_REPLICAS": "the leader refused the write: fewer in-sync replicas than min.insync.replicas",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "the leader wrote it, but the ISR shrank below min.insync.replicas "
    "before enough replicas had it",
    "NOT_LEADER_OR_FOLLOWER": "the broker asked is not the partition's leader (leadership moved)",
    "UNKNOWN_TOPIC_OR_PARTITION": "the broker asked does not host the partition",
    "KAFKA_STORAGE_ERROR": "the leader's log directory holding the partition is offline (disk failure)",
    "REQUEST_TIMED_OUT": "the in-sync followers did not acknowledge the write within the request timeout",
    "LEADER_NOT_AVAILABLE": "the partition has no leader right now (an election is under way)",
    "BROKER_NOT_AVAILABLE": "the broker is not available",
    "REPLICA_NOT_AVAILABLE": "a replica of the partition is not available",
    "NETWORK_EXCEPTION": "the broker disconnected before answering",
    "INVALID_PRODUCER_EPOCH": "the partition has seen a newer epoch of the producer: it was fenced",
    "PRODUCER_FENCED": "a newer instance of the producer (same transactional id) fenced this one",
    "TRANSACTION_COORDINATOR_FENCED": "the partition has seen markers from a newer coordinator epoch: "
    "the coordinator moved",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": "the partition's message format is older than v2, which transactions need",
    "UNSUPPORTED_VERSION": "the broker does not support the request's version",
    "CORRUPT_MESSAGE": "the broker found the record batch corrupt",
    "MESSAGE_TOO_LARGE": "the record is larger than the topic's max.message.bytes",
    "RECORD_LIST_TOO_LARGE": "the batch is larger than the topic's segment size",
    "INVALID_REQUIRED_ACKS": "the request asked for an acks value the broker rejects",
    "COORDINATOR_NOT_AVAILABLE": "the coordinator cannot serve the request (for an append: NOT_ENOUGH_REPLICAS, "
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT or UNKNOWN_TOPIC_OR_PARTITION underneath)",
    "NOT_COORDINATOR": "the broker is not the coordinator of the id (for an append: NOT_LEADER_OR_FOLLOWER or "
    "KAFKA_STORAGE_ERROR underneath: its __transaction_state partition moved or its disk failed)",
    "COORDINATOR_LOAD_IN_PROGRESS": "the coordinator is still loading its __transaction_state partition",
    "UNKNOWN_SERVER_ERROR": "an unexpected error on the broker (for an append: MESSAGE_TOO_LARGE or "
    "RECORD_LIST_TOO_LARGE underneath)",
    "CONCURRENT_TRANSACTIONS": "the producer's previous transaction is still completing",
    "INVALID_TXN_STATE": "the request does not fit the transaction's current state",
    "INVALID_PRODUCER_ID_MAPPING": "the producer id does not belong to the transactional id",
    "INVALID_TRANSACTION_TIMEOUT": "the transaction timeout exceeds transaction.max.timeout.ms",
    "UNKNOWN_PRODUCER_ID": "the broker no longer has state for the producer id",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "the principal may not use the transactional id",
    "CLUSTER_AUTHORIZATION_FAILED": "the principal lacks a cluster right (WriteTxnMarkers needs ClusterAction)",
    "TOPIC_AUTHORIZATION_FAILED": "the principal may not write the topic",
    "TRANSACTION_ABORTABLE": "the transaction hit an error it can only abort from",
    "INVALID_TIMESTAMP": "the record's timestamp is outside the range the topic accepts",
    "INVALID_RECORD": "the broker rejected the record (a topic policy, e.g. compaction without a key)",
    "THROTTLING_QUOTA_EXCEEDED": "a quota throttled the request",
    UNKNOWN: "an error the exporter could not name",
}


def meaning(error: str) -> str:
    """Kafka's meaning of `error` in a few words; for a name outside MEANINGS, its code."""
    if error in MEANINGS:
        return MEANINGS[error]
    if error in _CODES:
        return f"Kafka error {_CODES[error]}, not one the marker or append path is known to return"
    return "not a Kafka error name"
