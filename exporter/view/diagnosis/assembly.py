"""Why a transaction is stuck and what to do: each diagnosed row's diagnosis assembled from the
partitions' facts, the causes, the summary and the commands, and attached to the view's document.

Input: a row of the transactions view (exporter.view.query: state, timeout, data partitions, the
marker errors the broker log showed per data partition, the `__transaction_state` append errors on
its coordinator's partition) and a ClusterSnapshot (exporter.sources.cluster_state: leader,
replicas, ISR and min.insync.replicas of those partitions, the live brokers, DescribeProducers of a
late ONGOING transaction's partitions). Output: a JSON-ready `diagnosis` with, per data partition
with trouble, its leader, replicas, ISR and the min.insync.replicas in force, and one line of cause
in an operator's words per error; the same for the coordinator's partition; for a late ONGOING
transaction, what the partitions' producer state says (did the client stop?); a one-line summary;
the runbook section (alerts/runbooks.md) and the Kafka commands that confirm or fix it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from exporter.contracts.bug_facts import BugContext
from exporter.contracts.cluster import TRANSACTION_STATE_TOPIC, Brokers, ClusterSnapshot, Fact
from exporter.contracts.groups import OffsetsPartitionGroups
from exporter.view.diagnosis import known_bugs
from exporter.view.diagnosis.causes import ISR_ERRORS, Causes, append_cause, producer_of
from exporter.view.diagnosis.commands import group_commands, row_commands, runbook_link
from exporter.view.diagnosis.consumer_groups import attach_groups, group_waits, waits_line
from exporter.view.diagnosis.partition_facts import SnapshotFacts
from exporter.view.diagnosis.selection import (
    MAX_SHOWN_PARTITIONS,
    coordinator_broker,
    data_partitions,
    diagnosed_rows,
    needs_diagnosis,
    split_partition,
)
from exporter.view.diagnosis.summary import summarize
from exporter.view.document import (
    AppendError,
    AppendErrorCause,
    CoordinatorPart,
    DiagnosedPartition,
    Diagnosis,
    Document,
    MarkerError,
    TransactionRow,
)


def attach(
    doc: Document,
    snapshot: ClusterSnapshot,
    bootstrap_servers: str,
    own_broker: int | None = None,
    groups: Mapping[int, Fact[OffsetsPartitionGroups]] | None = None,
    bugs: BugContext | None = None,
) -> None:
    """Fills in each transaction row of the view's document: its coordinator broker (the leader of
    its `__transaction_state` partition, else `own_broker`: the broker whose partitions the exporter
    follows), the consumer groups pending on its `__consumer_offsets-N` partitions (`groups`, as
    exporter.sources.consumer_groups looked them up: see attach_groups) and, for the rows that need
    one, its diagnosis; with `bugs`, the known Kafka bugs each diagnosed and hanging row matches
    (exporter.view.diagnosis.known_bugs) and the versions they were held against."""
    for row in doc["transactions"]:
        row["coordinator_broker"] = coordinator_broker(snapshot, row["coordinator_partition"], own_broker)
    if groups is not None:
        attach_groups(doc, groups)
    diagnosed = diagnosed_rows(doc["transactions"])
    for row in diagnosed:
        diagnosis = diagnose(row, snapshot, doc["now_ms"], bootstrap_servers, doc["broker_log"])
        if bugs is not None:
            known_bugs.attach_to_diagnosis(diagnosis, row, bugs, doc["now_ms"])
        row["diagnosis"] = diagnosis
    if bugs is not None:
        for hanging in doc["hanging"]:
            fact = snapshot.partition(hanging["topic"], hanging["partition"])
            leader = None if fact.value is None else fact.value.leader
            known_bugs.attach_to_hanging(hanging, leader, bugs, doc["now_ms"])
        doc["kafka_versions"] = {str(b): known_bugs.version_seen(v) for b, v in sorted(bugs.versions.items())}
    # Rows that need a diagnosis beyond MAX_DIAGNOSED_ROWS (their "diagnosis" stays None).
    doc["diagnoses_omitted"] = sum(map(needs_diagnosis, doc["transactions"])) - len(diagnosed)


def diagnose(
    row: TransactionRow, snapshot: ClusterSnapshot, now_ms: int, bootstrap_servers: str, broker_log: bool
) -> Diagnosis:
    """The diagnosis of one in-flight transaction's row (see the module docstring)."""
    state = row["state"]
    brokers = snapshot.brokers
    coordinator = _coordinator_part(row, snapshot, brokers, now_ms)
    errors_by_partition: dict[str, list[MarkerError]] = {}
    for error in row.get("marker_errors") or ():
        errors_by_partition.setdefault(error["partition"], []).append(error)
    partitions: list[DiagnosedPartition] = []
    causes = Causes()
    more = 0
    for name in data_partitions(row):
        parsed = split_partition(name)
        errors = errors_by_partition.get(name, [])
        facts = SnapshotFacts.of(snapshot, parsed, brokers) if parsed else SnapshotFacts.missing("not topic-N")
        trouble = facts.trouble()
        producer = None
        if state == "ONGOING" and row.get("late") and parsed in snapshot.producers:
            producer = producer_of(snapshot.producers[parsed], row, now_ms)  # type: ignore[index]
        if not errors and trouble is None and producer is None:
            continue  # a healthy partition with nothing to say: left out
        if len(partitions) == MAX_SHOWN_PARTITIONS:
            more += 1
            continue
        if errors and facts.under_min_isr() and all(e["error"] in ISR_ERRORS for e in errors):
            trouble = None  # each error's cause says it already
        # The keys in this order: the partition, its facts, its errors and cause, then its producer.
        entry = cast(DiagnosedPartition, {"partition": name, **facts.json()})
        entry["errors"] = [
            {
                "error": e["error"],
                "count": e["count"],
                "last_seen_ms": e["last_seen_ms"],
                "cause": causes.get(e["error"], facts),
            }
            for e in sorted(errors, key=lambda e: -e["last_seen_ms"])
        ]
        entry["cause"] = trouble
        if producer is not None:
            entry["producer"] = producer
        partitions.append(entry)
    summary, runbook = summarize(row, partitions, coordinator, broker_log)
    waits = group_waits(row)
    if waits:
        summary += "; " + waits_line(waits)
    diagnosis: Diagnosis = {
        "summary": summary,
        "runbook": runbook_link(runbook),
        "partitions": partitions,
        # Partitions with something to say beyond MAX_SHOWN_PARTITIONS (not detailed).
        "partitions_not_shown": more,
        "coordinator": coordinator,
        "commands": row_commands(row, partitions, coordinator, bootstrap_servers),
        "abort": {
            "allowed": False,
            "why": "Kafka's abort (kafka-transactions.sh abort) is for hanging transactions, which no coordinator "
            "will complete; this one's coordinator still holds it and completes it by itself once the cause is "
            "fixed"
            + (
                ", and aborting a partition of a PREPARE_COMMIT would drop data its consumers are meant to see"
                if state == "PREPARE_COMMIT"
                else ""
            ),
        },
    }
    if waits:
        diagnosis["consumer_groups"] = waits
        diagnosis["commands"] += group_commands(waits, bootstrap_servers, diagnosis["commands"])
    return diagnosis


# --- the coordinator ----------------------------------------------------------------------------


def _coordinator_part(
    row: TransactionRow, snapshot: ClusterSnapshot, brokers: Fact[Brokers], now_ms: int
) -> CoordinatorPart:
    partition = row["coordinator_partition"]
    facts = SnapshotFacts.of(snapshot, (TRANSACTION_STATE_TOPIC, partition), brokers)
    errors = sorted(row.get("append_errors") or (), key=lambda e: -e["last_seen_ms"])
    m = facts.metadata
    trouble = None
    if m is not None and (m.leader is None or facts.under_min_isr()):
        trouble = facts.trouble()
    return {
        "broker": row.get("coordinator_broker", None if m is None else m.leader),
        "partition": f"{TRANSACTION_STATE_TOPIC}-{partition}",
        **facts.json(),
        "append_errors": [_append_error(e, facts) for e in errors],
        "cause": trouble,
    }


def _append_error(e: AppendError, facts: SnapshotFacts) -> AppendErrorCause:
    cause = append_cause(e["error"], facts)
    if "target_state" in e:
        return {
            "error": e["error"],
            "count": e["count"],
            "last_seen_ms": e["last_seen_ms"],
            "target_state": e["target_state"],
            "cause": cause,
        }
    return {"error": e["error"], "count": e["count"], "last_seen_ms": e["last_seen_ms"], "cause": cause}
