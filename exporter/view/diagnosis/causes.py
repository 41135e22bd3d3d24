"""The causes: one line per marker error (WriteTxnMarkers) and per `__transaction_state` append
error, specific to what the cluster shows of the partition; and, for a late ONGOING transaction,
what its partitions' producer state says of its client (did it stop?)."""

from __future__ import annotations

from collections.abc import Sequence

from exporter.contracts.cluster import Fact, ProducerState
from exporter.view.diagnosis.meanings import meaning
from exporter.view.diagnosis.partition_facts import SnapshotFacts
from exporter.view.document import DiagnosedPartition, Producer, TransactionRow
from exporter.view.wording import age

# Errors the marker path returns (TransactionMarkerRequestCompletionHandler, 3.6 to 4.4): retried
# at once, given up for the partition, or treated as a bug (IllegalStateException).
MARKER_RETRIABLE = (
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_LEADER_OR_FOLLOWER",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "KAFKA_STORAGE_ERROR",
    "REQUEST_TIMED_OUT",
)
MARKER_PERMANENT = (
    "INVALID_PRODUCER_EPOCH",
    "TRANSACTION_COORDINATOR_FENCED",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT",
    "UNSUPPORTED_VERSION",
)
MARKER_FATAL = ("CORRUPT_MESSAGE", "MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "INVALID_REQUIRED_ACKS")
# Errors whose cause names the ISR below min.insync.replicas itself (the partition's own cause is then left out).
ISR_ERRORS = ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")


class Causes:
    """marker_cause, remembered for one diagnosis: a topic's partitions usually share their facts
    (leader aside, the ISR, replicas and setting alike), so their causes are one string, made once."""

    def __init__(self) -> None:
        self._made: dict[tuple[object, ...], str] = {}

    def get(self, error: str, facts: SnapshotFacts) -> str:
        m = facts.metadata
        key = (
            error,
            facts.exists,
            None if m is None else (m.leader, tuple(sorted(m.isr)), tuple(sorted(m.replicas))),
            facts.min_isr,
            facts.brokers,
        )
        made = self._made.get(key)
        if made is None:
            made = self._made[key] = marker_cause(error, facts)
        return made


def marker_cause(error: str, facts: SnapshotFacts) -> str:
    """One line of cause for a WriteTxnMarkers partition error, specific to what the cluster shows
    (`facts`); every name gets one."""
    m = facts.metadata
    leader = "the leader" if m is None or m.leader is None else f"leader {m.leader}"
    if error in ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND"):
        when = (
            " (not written)" if error == "NOT_ENOUGH_REPLICAS" else " after writing it, the ISR having shrunk meanwhile"
        )
        under = facts.under_min_isr()
        if under is None:
            return (
                f"{leader} refuses the marker{when}: markers are written with acks=all, which needs "
                f"min.insync.replicas replicas in sync. Check the partition's ISR against it (commands below)."
            )
        assert m is not None
        if under:
            out = ", ".join(facts.broker_state(b) for b in facts.out_of_isr()) or "none"
            return (
                f"{leader} refuses the marker{when}: {facts.isr_text()} is below {facts.min_isr_text()}, and "
                f"markers are written with acks=all. Out of the ISR: {out}. Bring it back into the ISR (or "
                f"reassign the partition); the coordinator retries by itself."
            )
        return (
            f"{leader} refused the marker{when} (acks=all needs min.insync.replicas in sync), but "
            f"{facts.isr_text()} meets {facts.min_isr_text()} now: the next retry should succeed (a replica "
            f"rejoined, or the ISR shrank only for a moment)."
        )
    if error == "NOT_LEADER_OR_FOLLOWER":
        now = "" if m is None else (" (now no leader)" if m.leader is None else f" (now broker {m.leader})")
        return (
            f"the broker the coordinator sent the marker to was no longer the partition's leader: leadership "
            f"moved{now} by a restart, a reassignment or a leader election, and the coordinator or that broker "
            f"had not caught up with the change yet. The coordinator looks the leader up again on every retry: "
            f"brief and harmless; if it lasts, leadership keeps moving (kafka-reassign-partitions.sh --list)."
        )
    if error == "UNKNOWN_TOPIC_OR_PARTITION":
        if not facts.exists:
            return "the topic or partition no longer exists (deleted): the coordinator drops a deleted partition's markers."
        return (
            f"{leader} does not host the partition: it is being created, moved or deleted, or that broker's "
            f"metadata lags; retried at once. If it lasts, compare kafka-topics.sh --describe with the brokers' logs."
        )
    if error == "KAFKA_STORAGE_ERROR":
        return (
            f"{leader}'s log directory holding the partition is offline (a disk error, or the disk is full): it "
            f"cannot append. Fix the disk or move the partition's leadership and replicas off it (kafka-log-dirs.sh)."
        )
    if error == "REQUEST_TIMED_OUT":
        return (
            f"{leader} wrote the marker, but its in-sync followers did not acknowledge it in time: a follower is "
            f"slow (disk, network, GC) yet still in the ISR. It drops out after replica.lag.time.max.ms; "
            f"NOT_ENOUGH_REPLICAS follows if the ISR then falls below min.insync.replicas."
        )
    if error == "INVALID_PRODUCER_EPOCH":
        return (
            "the partition has seen a newer epoch of this producer (fenced by a new instance, or a timeout abort "
            "bumped it): the coordinator stops sending this marker; the newer epoch's transaction completes the "
            "partition. Usually harmless; if the partition stays open, it is hanging."
        )
    if error == "TRANSACTION_COORDINATOR_FENCED":
        return (
            "the partition has seen markers from a newer coordinator epoch: the coordinator moved, this one gave "
            "up; the new coordinator completes the transaction."
        )
    if error in ("UNSUPPORTED_FOR_MESSAGE_FORMAT", "UNSUPPORTED_VERSION"):
        return (
            "the partition cannot take transaction markers (a message format older than v2, or an old broker): "
            "the coordinator drops it from the transaction. Upgrade the broker or the topic's message format."
        )
    if error in MARKER_FATAL:
        return (
            f"{meaning(error)}: the coordinator treats this answer to a marker as a bug (IllegalStateException "
            f"in its log, `Uncaught error in request completion`); the coordinator's log has the details."
        )
    return f"{error}: {meaning(error)}."


def append_cause(error: str, facts: SnapshotFacts) -> str:
    """One line of cause for a failed `__transaction_state` append on the coordinator's partition."""
    m = facts.metadata
    if error in ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "COORDINATOR_NOT_AVAILABLE"):
        head = (
            "the coordinator cannot append the transaction's state changes: its __transaction_state partition "
            "needs transaction.state.log.min.isr (its min.insync.replicas) replicas in sync"
        )
        if error == "COORDINATOR_NOT_AVAILABLE":
            head = (
                "the coordinator's append failed with NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT or "
                "UNKNOWN_TOPIC_OR_PARTITION underneath (its DEBUG log line names which); " + head
            )
        under = facts.under_min_isr()
        if under:
            out = ", ".join(facts.broker_state(b) for b in facts.out_of_isr()) or "none"
            return f"{head}: {facts.isr_text()} is below {facts.min_isr_text()}; out of the ISR: {out}."
        if under is False:
            return f"{head}; the {facts.isr_text()} meets {facts.min_isr_text()} now: appends should succeed again."
        return head + "."
    if error in ("NOT_LEADER_OR_FOLLOWER", "NOT_COORDINATOR", "UNKNOWN_TOPIC_OR_PARTITION"):
        now = "" if m is None or m.leader is None else f" (its leader now: broker {m.leader})"
        return (
            f"the coordinator lost its __transaction_state partition{now}: it moved to another broker, which "
            f"loads it and becomes the coordinator; clients find it again (FindCoordinator)."
        )
    if error == "KAFKA_STORAGE_ERROR":
        return "the coordinator's log directory holding __transaction_state is offline (disk): fix the disk."
    if error == "REQUEST_TIMED_OUT":
        return (
            "the __transaction_state followers did not acknowledge the append in time (the producer's "
            "transaction timeout): a slow follower still in the ISR."
        )
    if error in ("MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE", "UNKNOWN_SERVER_ERROR"):
        return (
            "the transaction's state record is too large for __transaction_state (too many partitions in one "
            "transaction for its max.message.bytes): raise it, or use fewer partitions per transaction."
        )
    return f"{error}: {meaning(error)}."


def producer_of(fact: Fact[tuple[ProducerState, ...]], row: TransactionRow, now_ms: int) -> Producer:
    """What DescribeProducers on one of a late transaction's partitions says of its producer."""
    if fact.value is None:
        return {"unknown": fact.problem}
    mine = [p for p in fact.value if p.producer_id == row["producer_id"]]
    if not mine:
        return {"found": False, "as_of_ms": fact.as_of_ms}
    p = max(mine, key=lambda p: p.last_timestamp_ms)
    return {
        "found": True,
        "producer_epoch": p.producer_epoch,
        "last_timestamp_ms": p.last_timestamp_ms,
        "last_write_seconds_ago": round(max(0, now_ms - p.last_timestamp_ms) / 1000, 3),
        "coordinator_epoch": p.coordinator_epoch,
        "transaction_start_offset": p.transaction_start_offset,
        "as_of_ms": fact.as_of_ms,
    }


def client_verdict(partitions: Sequence[DiagnosedPartition], row: TransactionRow) -> str:
    """Whether the client of a late ONGOING transaction stopped, from its partitions' producer state."""
    producers = [p["producer"] for p in partitions if "producer" in p]
    found = [p for p in producers if p.get("found")]
    if found:
        last = min(p["last_write_seconds_ago"] for p in found)
        timeout = row["transaction_timeout_ms"] / 1000
        open_ = [p for p in found if p["transaction_start_offset"] >= 0]
        if last > timeout:
            return (
                f"the client stopped: its last write to these partitions was {age(last)} ago, longer than its own "
                f"{timeout:g} s timeout" + ("" if open_ else "; no open transaction of it there any more")
            )
        return f"the client is alive: it wrote {age(last)} ago"
    if producers and all(p.get("found") is False for p in producers):
        return (
            "DescribeProducers shows no state of producer "
            f"{row['producer_id']} on its partitions: it never wrote there (only AddPartitionsToTxn), or its "
            f"state expired"
        )
    if producers:
        return (
            "the partitions' producer state is unknown ("
            + "; ".join(str(p.get("unknown")) for p in producers if p.get("unknown"))
            + ")"
        )
    return "the partitions' producer state was not looked up"
