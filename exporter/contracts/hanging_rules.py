"""KIP-664's rules for late and hanging transactions on data partitions; pure, no I/O.

Inputs are what the three KIP-664 APIs return: DescribeProducers (open transactions on a partition,
from its leader), ListTransactions (producer id -> transactional id) and DescribeTransactions (the
coordinator's view of a transactional id). exporter.sources.hanging_scan fetches them.

- late: an open transaction (the producer has a current transaction start offset) whose last write
  is older than `max_timeout_ms + padding_ms`. This is the broker's PartitionsWithLateTransactionsCount
  rule (ProducerStateManager.hasLateTransaction: now - lastTimestamp > transaction.max.timeout.ms +
  5 min); a partition counts once however many late transactions it has. Kafka's
  `kafka-transactions.sh find-hanging` uses the same age (now - lastTimestamp) against
  `--max-transaction-timeout` (minutes, default 15) without padding.
- hanging (find-hanging's filterHangingTransactions): a late transaction whose producer id no
  coordinator lists, whose transactional id its coordinator does not know (TRANSACTIONAL_ID_NOT_FOUND),
  or whose partition is not among the partitions the coordinator's transaction holds (ongoing, or
  still waiting for markers in PREPARE_*). Otherwise the coordinator still expects to write the
  marker: the transaction is late, not hanging (e.g. markers held back by an unavailable partition).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LATE = "late"
HANGING = "hanging"


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """One active producer with an open transaction on a data partition (DescribeProducers)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    start_offset: int
    last_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class CoordinatorTransaction:
    """A transactional id as its coordinator describes it (DescribeTransactions)."""

    transactional_id: str
    coordinator_id: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: frozenset[tuple[str, int]]


@dataclass(frozen=True, slots=True)
class Finding:
    transaction: OpenTransaction
    age_ms: int
    verdict: str  # LATE or HANGING
    # None: no coordinator lists the producer id (or the transactional id is unknown to it).
    transactional_id: str | None
    coordinator_id: int | None
    reason: str


def is_late(txn: OpenTransaction, now_ms: int, max_timeout_ms: int, padding_ms: int) -> bool:
    return now_ms - txn.last_timestamp_ms > max_timeout_ms + padding_ms


def late_transactions(
    open_transactions: Iterable[OpenTransaction], now_ms: int, max_timeout_ms: int, padding_ms: int
) -> list[OpenTransaction]:
    return [t for t in open_transactions if is_late(t, now_ms, max_timeout_ms, padding_ms)]


def partitions_with_late_transactions(late: Iterable[OpenTransaction]) -> int:
    return len({(t.topic, t.partition) for t in late})


def judge(
    late: Iterable[OpenTransaction],
    transactional_ids: Mapping[int, str],
    descriptions: Mapping[str, CoordinatorTransaction | None],
    now_ms: int,
) -> list[Finding]:
    """A verdict for each late transaction. `transactional_ids`: producer id -> transactional id
    (ListTransactions filtered on the late producer ids); `descriptions`: transactional id ->
    description, None when the coordinator answered TRANSACTIONAL_ID_NOT_FOUND."""
    findings = []
    for txn in late:
        age = now_ms - txn.last_timestamp_ms
        tid = transactional_ids.get(txn.producer_id)
        if tid is None:
            findings.append(Finding(txn, age, HANGING, None, None, "no coordinator lists the producer id"))
            continue
        description = descriptions.get(tid)
        if description is None:
            findings.append(Finding(txn, age, HANGING, tid, None, "transactional id unknown to its coordinator"))
        elif (txn.topic, txn.partition) not in description.partitions:
            findings.append(
                Finding(
                    txn,
                    age,
                    HANGING,
                    tid,
                    description.coordinator_id,
                    f"partition not in the coordinator's {description.state} transaction",
                )
            )
        else:
            findings.append(
                Finding(
                    txn,
                    age,
                    LATE,
                    tid,
                    description.coordinator_id,
                    f"the coordinator's {description.state} transaction still holds the partition",
                )
            )
    return findings


def abort_command(bootstrap_servers: str, txn: OpenTransaction) -> str:
    """Kafka's own tool invocation that aborts `txn` (TransactionsCommand `abort`, by start offset:
    it describes the producer on the partition and writes an abort marker with coordinator epoch -1)."""
    return (
        f"kafka-transactions.sh --bootstrap-server {bootstrap_servers} abort"
        f" --topic {txn.topic} --partition {txn.partition} --start-offset {txn.start_offset}"
    )


def finding_row(finding: Finding, age_ms: int | None = None) -> dict[str, object]:
    """One finding as `txn-exporter hanging --json` and the transactions view show it (age: the
    scan's, or `age_ms` when given)."""
    t = finding.transaction
    return {
        "topic": t.topic,
        "partition": t.partition,
        "producer_id": t.producer_id,
        "epoch": t.producer_epoch,
        "start_offset": t.start_offset,
        "transactional_id": finding.transactional_id,
        "coordinator": finding.coordinator_id,
        "age_seconds": round((finding.age_ms if age_ms is None else age_ms) / 1000, 3),
        "verdict": finding.verdict,
        "reason": finding.reason,
        "last_timestamp_ms": t.last_timestamp_ms,
        "coordinator_epoch": t.coordinator_epoch,
    }
