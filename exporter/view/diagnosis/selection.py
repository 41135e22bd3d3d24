"""Which rows of the transactions view get a diagnosis, and what of the cluster their diagnoses need
looked up (and within which bounds).

Which rows get one (`needs_diagnosis`): a PREPARE_* with marker errors or stuck (in that state
longer than its own timeout plus the padding), a late ONGOING, or a row whose coordinator partition
shows append errors. Other in-flight transactions are normal traffic.
"""

from __future__ import annotations

from collections.abc import Iterable

from exporter.contracts.cluster import TRANSACTION_STATE_TOPIC, ClusterSnapshot
from exporter.view.document import TransactionRow

# Bounds on a view's diagnosis, whatever is stuck: the oldest MAX_DIAGNOSED_ROWS rows needing one get
# it; of each, the first MAX_EXAMINED_PARTITIONS data partitions (those with marker errors first) are
# looked up, and at most MAX_SHOWN_PARTITIONS of those with something to say are detailed (the rest
# counted). DescribeProducers is asked for at most MAX_PRODUCER_PARTITIONS_PER_ROW partitions of a
# late transaction.
MAX_DIAGNOSED_ROWS = 100
MAX_EXAMINED_PARTITIONS = 50
MAX_SHOWN_PARTITIONS = 10
MAX_PRODUCER_PARTITIONS_PER_ROW = 10


def needs_diagnosis(row: TransactionRow) -> bool:
    return bool(row.get("marker_errors") or row.get("stuck") or row.get("late") or row.get("append_errors"))


def split_partition(name: str) -> tuple[str, int] | None:
    """`topic-N` as the broker prints it (topic names may hold dashes: N follows the last)."""
    topic, _, index = name.rpartition("-")
    return (topic, int(index)) if topic and index.isdigit() else None


def wanted(rows: Iterable[TransactionRow]) -> tuple[set[str], list[tuple[str, int]]]:
    """(topics whose metadata and min.insync.replicas the rows' diagnoses need, partitions whose
    DescribeProducers they need): the coordinators' topic, the data partitions of the rows that need
    a diagnosis; producers for the late ONGOING ones only (at most MAX_PRODUCER_PARTITIONS_PER_ROW each)."""
    rows = list(rows)
    topics: set[str] = {TRANSACTION_STATE_TOPIC} if rows else set()
    producers: list[tuple[str, int]] = []
    for row in diagnosed_rows(rows):
        parsed = [p for p in map(split_partition, data_partitions(row)) if p is not None]
        topics.update(t for t, _ in parsed)
        if row["state"] == "ONGOING" and row.get("late"):
            producers += parsed[:MAX_PRODUCER_PARTITIONS_PER_ROW]
    return topics, producers


def diagnosed_rows(rows: Iterable[TransactionRow]) -> list[TransactionRow]:
    """The rows that get a diagnosis: the first MAX_DIAGNOSED_ROWS that need one (the view lists
    the oldest first)."""
    return [row for row in rows if needs_diagnosis(row)][:MAX_DIAGNOSED_ROWS]


def data_partitions(row: TransactionRow) -> list[str]:
    """The row's data partitions examined: those with marker errors first, MAX_EXAMINED_PARTITIONS at most."""
    errored = list(dict.fromkeys(e["partition"] for e in row.get("marker_errors") or ()))
    listed = set(errored)
    return (errored + [p for p in row.get("partitions") or () if p not in listed])[:MAX_EXAMINED_PARTITIONS]


def coordinator_broker(snapshot: ClusterSnapshot, partition: int, fallback: int | None = None) -> int | None:
    """The coordinator of a `__transaction_state` partition: its leader, else `fallback` (the broker
    the exporter follows, when it follows only its own partitions)."""
    fact = snapshot.partition(TRANSACTION_STATE_TOPIC, partition)
    if fact.value is not None and fact.value.leader is not None:
        return fact.value.leader
    return fallback
