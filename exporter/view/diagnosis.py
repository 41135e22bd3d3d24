"""Why a transaction is stuck and what to do: pure rules over a view row and the cluster's state.

Input: a row of the transactions view (exporter.view.query: state, timeout, data partitions, the
marker errors the broker log showed per data partition, the `__transaction_state` append errors on
its coordinator's partition) and a ClusterSnapshot (exporter.sources.cluster_state: leader,
replicas, ISR and min.insync.replicas of those partitions, the live brokers, DescribeProducers of a
late ONGOING transaction's partitions). Output: a JSON-ready `diagnosis` with, per data partition
with trouble, its leader, replicas, ISR and the min.insync.replicas in force, and one line of cause
in an operator's words per error; the same for the coordinator's partition; for a late ONGOING
transaction, what the partitions' producer state says (did the client stop?); a one-line summary;
the runbook section (alerts/runbooks.md) and the Kafka commands that confirm or fix it.

Which rows get one (`needs_diagnosis`): a PREPARE_* with marker errors or stuck (in that state
longer than its own timeout plus the padding), a late ONGOING, or a row whose coordinator partition
shows append errors. Other in-flight transactions are normal traffic.

Nothing here does I/O or reads a clock: `now_ms` is given, so the tests cover every error name.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import cast

from exporter.broker_log.errors import ERRORS, UNKNOWN
from exporter.codec.states import PREPARE_STATES
from exporter.contracts.cluster import (
    BROKER,
    DEFAULT,
    TOPIC,
    TRANSACTION_STATE_TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    ProducerState,
)
from exporter.contracts.groups import CONSUMER_OFFSETS_TOPIC, OffsetsPartitionGroups
from exporter.contracts.runbooks import APPEND_ERRORS, HANGING, LATE, MARKER_FAILURES, MARKERS_PENDING, RUNBOOK_URL
from exporter.view.document import (
    AppendError,
    AppendErrorCause,
    Command,
    CoordinatorPart,
    DiagnosedPartition,
    Diagnosis,
    Document,
    GroupWait,
    HangingAdvice,
    HangingRow,
    MarkerError,
    OffsetsGroups,
    PartitionFacts,
    Producer,
    Runbook,
    TransactionRow,
)
from exporter.view.wording import age

PREPARES = tuple(state.name for state in PREPARE_STATES)
# Bounds on a view's diagnosis, whatever is stuck: the oldest MAX_DIAGNOSED_ROWS rows needing one get
# it; of each, the first MAX_EXAMINED_PARTITIONS data partitions (those with marker errors first) are
# looked up, and at most MAX_SHOWN_PARTITIONS of those with something to say are detailed (the rest
# counted). DescribeProducers is asked for at most MAX_PRODUCER_PARTITIONS_PER_ROW partitions of a
# late transaction.
MAX_DIAGNOSED_ROWS = 100
MAX_EXAMINED_PARTITIONS = 50
MAX_SHOWN_PARTITIONS = 10
MAX_PRODUCER_PARTITIONS_PER_ROW = 10
# `__consumer_offsets` partitions whose consumer groups a view looks up, at most (of the rows shown).
MAX_OFFSETS_PARTITIONS = 50
# Topics whose commands a row shows, at most (a transaction over many troubled topics: the first ones).
MAX_COMMAND_TOPICS = 3

CONFIRM, FIX, LAST_RESORT = "confirm", "fix", "last resort"

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

_CODES = {name: code for code, name, _ in ERRORS}
_ISR_ERRORS = ("NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")

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


# --- what to look up ----------------------------------------------------------------------------


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
    for row in _diagnosed(rows):
        parsed = [p for p in map(split_partition, _data_partitions(row)) if p is not None]
        topics.update(t for t, _ in parsed)
        if row["state"] == "ONGOING" and row.get("late"):
            producers += parsed[:MAX_PRODUCER_PARTITIONS_PER_ROW]
    return topics, producers


def _diagnosed(rows: Iterable[TransactionRow]) -> list[TransactionRow]:
    """The rows that get a diagnosis: the first MAX_DIAGNOSED_ROWS that need one (the view lists
    the oldest first)."""
    return [row for row in rows if needs_diagnosis(row)][:MAX_DIAGNOSED_ROWS]


def _data_partitions(row: TransactionRow) -> list[str]:
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


# --- the diagnosis ------------------------------------------------------------------------------


def attach(
    doc: Document,
    snapshot: ClusterSnapshot,
    bootstrap_servers: str,
    own_broker: int | None = None,
    groups: Mapping[int, Fact[OffsetsPartitionGroups]] | None = None,
) -> None:
    """Fills in each transaction row of the view's document: its coordinator broker (the leader of
    its `__transaction_state` partition, else `own_broker`: the broker whose partitions the exporter
    follows), the consumer groups pending on its `__consumer_offsets-N` partitions (`groups`, as
    exporter.sources.consumer_groups looked them up: see attach_groups) and, for the rows that need
    one, its diagnosis."""
    for row in doc["transactions"]:
        row["coordinator_broker"] = coordinator_broker(snapshot, row["coordinator_partition"], own_broker)
    if groups is not None:
        attach_groups(doc, groups)
    diagnosed = _diagnosed(doc["transactions"])
    for row in diagnosed:
        row["diagnosis"] = diagnose(row, snapshot, doc["now_ms"], bootstrap_servers, doc["broker_log"])
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
    causes = _Causes()
    more = 0
    for name in _data_partitions(row):
        parsed = split_partition(name)
        errors = errors_by_partition.get(name, [])
        facts = _PartitionFacts.of(snapshot, parsed, brokers) if parsed else _PartitionFacts.missing("not topic-N")
        trouble = facts.trouble()
        producer = None
        if state == "ONGOING" and row.get("late") and parsed in snapshot.producers:
            producer = _producer(snapshot.producers[parsed], row, now_ms)  # type: ignore[index]
        if not errors and trouble is None and producer is None:
            continue  # a healthy partition with nothing to say: left out
        if len(partitions) == MAX_SHOWN_PARTITIONS:
            more += 1
            continue
        if errors and facts.under_min_isr() and all(e["error"] in _ISR_ERRORS for e in errors):
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
    summary, runbook = _summary(row, partitions, coordinator, broker_log)
    waits = group_waits(row)
    if waits:
        summary += "; " + _groups_line(waits)
    diagnosis: Diagnosis = {
        "summary": summary,
        "runbook": runbook_link(runbook),
        "partitions": partitions,
        # Partitions with something to say beyond MAX_SHOWN_PARTITIONS (not detailed).
        "partitions_not_shown": more,
        "coordinator": coordinator,
        "commands": _commands(row, partitions, coordinator, bootstrap_servers),
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
        diagnosis["commands"] += _group_commands(waits, bootstrap_servers, diagnosis["commands"])
    return diagnosis


# --- the consumer groups of a row's __consumer_offsets partitions ---------------------------------


def offsets_partitions(rows: Iterable[TransactionRow]) -> list[int]:
    """The `__consumer_offsets` partitions (by number) of the rows shown, in order, at most
    MAX_OFFSETS_PARTITIONS: whose consumer groups the view looks up."""
    found: dict[int, None] = {}
    for row in rows:
        for n in _offsets_partitions(row):
            found.setdefault(n)
    return list(found)[:MAX_OFFSETS_PARTITIONS]


def _offsets_partitions(row: TransactionRow) -> list[int]:
    parsed = (split_partition(p) for p in row.get("partitions") or ())
    return [p[1] for p in parsed if p is not None and p[0] == CONSUMER_OFFSETS_TOPIC]


def attach_groups(doc: Document, groups: Mapping[int, Fact[OffsetsPartitionGroups]]) -> None:
    """Adds `consumer_groups` to each row with a `__consumer_offsets-N` partition that was looked up:
    per such partition, the groups whose transactional offsets are pending there (or why unknown)."""
    for row in doc["transactions"]:
        entries = [offsets_groups(n, groups[n]) for n in _offsets_partitions(row) if n in groups]
        if entries:
            row["consumer_groups"] = entries


def offsets_groups(partition: int, fact: Fact[OffsetsPartitionGroups]) -> OffsetsGroups:
    name = f"{CONSUMER_OFFSETS_TOPIC}-{partition}"
    found = fact.value
    if found is None:
        return {
            "partition": name,
            "pending_groups": None,
            "groups_checked": None,
            "groups_not_checked": None,
            "unknown_groups": {},
            "as_of_ms": fact.as_of_ms,
            "unknown": fact.problem or "not looked up",
        }
    return {
        "partition": name,
        "pending_groups": [{"group_id": g.group_id, "coordinator": g.coordinator} for g in found.pending],
        "groups_checked": found.checked,
        "groups_not_checked": found.not_checked,
        "unknown_groups": dict(found.unknown),
        "as_of_ms": fact.as_of_ms,
        # A stale answer is shown with why its refresh failed.
        "unknown": fact.problem,
    }


def group_waits(row: TransactionRow) -> list[GroupWait]:
    """The groups whose committed offsets wait behind this transaction (its `consumer_groups`)."""
    waits: list[GroupWait] = []
    for entry in row.get("consumer_groups") or ():
        for g in entry.get("pending_groups") or ():
            coordinator = "an unknown broker" if g["coordinator"] is None else f"broker {g['coordinator']}"
            waits.append(
                {
                    "group_id": g["group_id"],
                    "coordinator": g["coordinator"],
                    "partition": entry["partition"],
                    "cause": f"consumer group {g['group_id']}'s committed offsets wait behind this transaction: its "
                    f"offsets sent to it stay pending on {entry['partition']} until the transaction's marker is written "
                    "there, and a consumer of the group that fetches its offsets with require_stable (Kafka's Java "
                    "client does under read_committed) after a restart or rebalance is answered "
                    f"UNSTABLE_OFFSET_COMMIT and waits; {coordinator} coordinates the group",
                }
            )
    return waits


def _groups_line(waits: Sequence[GroupWait]) -> str:
    names = ", ".join(
        f"{w['group_id']} (coordinator: {'?' if w['coordinator'] is None else 'broker ' + str(w['coordinator'])})"
        for w in waits
    )
    return f"the committed offsets of consumer group{'s' if len(waits) > 1 else ''} {names} wait behind it"


def _group_commands(waits: Sequence[GroupWait], bootstrap_servers: str, shown: Sequence[Command]) -> list[Command]:
    b = shlex.quote(bootstrap_servers)
    commands = [
        _command(
            CONFIRM,
            f"kafka-consumer-groups.sh --bootstrap-server {b} --describe --group {shlex.quote(w['group_id'])}",
            "the group's coordinator, members and committed offsets (its pending ones appear once the transaction "
            "completes)",
        )
        for w in waits[:MAX_COMMAND_TOPICS]
    ]
    seen = {c["command"] for c in shown}
    return [c for c in commands if c["command"] not in seen]


def runbook_link(section: str) -> Runbook:
    return {"section": section, "url": f"{RUNBOOK_URL}#{section.lower()}"}


def hanging_advice(row: HangingRow, bootstrap_servers: str) -> HangingAdvice:
    """For a hanging transaction of the data-partition scan: its runbook and the commands (the abort
    command is the row's own `abort_command`, exporter.contracts.hanging_rules)."""
    b = shlex.quote(bootstrap_servers)
    topic, partition = row["topic"], row["partition"]
    return {
        "runbook": runbook_link(HANGING),
        "commands": [
            _command(
                CONFIRM,
                f"kafka-transactions.sh --bootstrap-server {b} describe-producers --topic "
                f"{shlex.quote(topic)} --partition {partition}",
                f"the open transaction at offset {row['start_offset']}: producer {row['producer_id']}, "
                f"epoch {row['epoch']}",
            ),
            _command(
                FIX,
                row["abort_command"],
                "writes an abort marker at that start offset; only an open transaction starting exactly "
                "there is aborted",
            ),
        ],
    }


# --- partitions ---------------------------------------------------------------------------------


class _PartitionFacts:
    """What the snapshot says of one partition, with None for what is unknown."""

    __slots__ = ("as_of_ms", "brokers", "exists", "metadata", "min_isr", "unknown")

    def __init__(
        self,
        metadata: PartitionMetadata | None,
        min_isr: MinInsyncReplicas | None,
        brokers: Brokers | None,
        as_of_ms: int | None,
        unknown: str | None,
        exists: bool = True,
    ) -> None:
        self.metadata = metadata
        self.min_isr = min_isr
        self.brokers = brokers
        self.as_of_ms = as_of_ms
        self.unknown = unknown
        self.exists = exists

    @classmethod
    def of(cls, snapshot: ClusterSnapshot, tp: tuple[str, int], brokers: Fact[Brokers]) -> _PartitionFacts:
        fact = snapshot.partition(*tp)
        min_isr = snapshot.min_insync_replicas.get(tp[0], Fact(None, problem="not looked up"))
        exists = fact.problem != "UNKNOWN_TOPIC_OR_PARTITION"
        unknown = []
        if exists:
            unknown += [f"metadata: {f.problem}" for f in (fact,) if f.value is None]
            unknown += [f"min.insync.replicas: {f.problem}" for f in (min_isr,) if f.value is None]
            unknown += [f"brokers: {f.problem}" for f in (brokers,) if f.value is None]
        return cls(fact.value, min_isr.value, brokers.value, fact.as_of_ms, "; ".join(unknown) or None, exists)

    @classmethod
    def missing(cls, why: str) -> _PartitionFacts:
        return cls(None, None, None, None, why)

    def json(self) -> PartitionFacts:
        m = self.metadata
        return {
            "leader": None if m is None else m.leader,
            "replicas": None if m is None else list(m.replicas),
            "isr": None if m is None else list(m.isr),
            "out_of_isr": None if m is None else self.out_of_isr(),
            "brokers_down": None if m is None or self.brokers is None else self.down(m.replicas),
            "min_insync_replicas": None if self.min_isr is None else self.min_isr.value,
            "min_insync_replicas_source": None if self.min_isr is None else self.min_isr.source,
            "exists": self.exists,
            "as_of_ms": self.as_of_ms,
            "unknown": self.unknown,  # what could not be learned, and why (the row shows regardless)
        }

    def out_of_isr(self) -> list[int]:
        m = self.metadata
        return [] if m is None else [r for r in m.replicas if r not in m.isr]

    def down(self, ids: Iterable[int]) -> list[int]:
        """Of `ids`, the brokers not registered and unfenced (DescribeCluster)."""
        return [] if self.brokers is None else [i for i in ids if i not in self.brokers.live]

    def broker_state(self, broker: int) -> str:
        if self.brokers is None:
            return f"broker {broker}"
        if broker in self.brokers.fenced:
            return f"broker {broker} (fenced: the controller lost its heartbeats; down, hung or cut off)"
        if broker not in self.brokers.live:
            return f"broker {broker} (not in the cluster: down)"
        return f"broker {broker} (in the cluster: slow, stalled, or stopped less than broker.session.timeout.ms ago)"

    def min_isr_text(self) -> str:
        if self.min_isr is None:
            return "min.insync.replicas (unknown)"
        where = {TOPIC: "the topic's own setting", BROKER: "the brokers' setting", DEFAULT: "Kafka's default"}
        return f"min.insync.replicas={self.min_isr.value} ({where.get(self.min_isr.source, self.min_isr.source)})"

    def under_min_isr(self) -> bool | None:
        if self.metadata is None or self.min_isr is None:
            return None
        return len(self.metadata.isr) < self.min_isr.value

    def isr_text(self) -> str:
        m = self.metadata
        assert m is not None
        # Sorted: membership is what counts here (the facts keep Kafka's order, the preferred leader first).
        return f"ISR {_ids(sorted(m.isr))} of replicas {_ids(sorted(m.replicas))}"

    def trouble(self) -> str | None:
        """What is wrong with the partition itself, whatever error was seen: None when nothing."""
        if not self.exists:
            return "the topic or partition does not exist (deleted?): the coordinator skips markers for a deleted partition"
        m = self.metadata
        if m is None:
            return None
        if m.leader is None:
            isr_down = self.down(m.isr)
            return (
                f"no leader: {self.isr_text()}"
                + (f", {', '.join(self.broker_state(b) for b in isr_down)}" if isr_down else "")
                + "; the coordinator keeps the markers queued for a leader (UnknownDestinationQueueSize), "
                "nothing is logged per retry"
            )
        if self.brokers is not None and m.leader not in self.brokers.live:
            return (
                f"its leader, {self.broker_state(m.leader)}, cannot be reached: the coordinator's requests "
                f"to it fail or time out (no partition error is logged)"
            )
        if self.under_min_isr():
            return (
                f"{self.isr_text()} is below {self.min_isr_text()}; out of the ISR: "
                f"{', '.join(self.broker_state(b) for b in self.out_of_isr())}"
            )
        return None


def _ids(ids: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, ids)) + "]"


class _Causes:
    """marker_cause, remembered for one diagnosis: a topic's partitions usually share their facts
    (leader aside, the ISR, replicas and setting alike), so their causes are one string, made once."""

    def __init__(self) -> None:
        self._made: dict[tuple[object, ...], str] = {}

    def get(self, error: str, facts: _PartitionFacts) -> str:
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


def marker_cause(error: str, facts: _PartitionFacts) -> str:
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


def append_cause(error: str, facts: _PartitionFacts) -> str:
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


def _producer(fact: Fact[tuple[ProducerState, ...]], row: TransactionRow, now_ms: int) -> Producer:
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


# --- the coordinator ----------------------------------------------------------------------------


def _coordinator_part(
    row: TransactionRow, snapshot: ClusterSnapshot, brokers: Fact[Brokers], now_ms: int
) -> CoordinatorPart:
    partition = row["coordinator_partition"]
    facts = _PartitionFacts.of(snapshot, (TRANSACTION_STATE_TOPIC, partition), brokers)
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


def _append_error(e: AppendError, facts: _PartitionFacts) -> AppendErrorCause:
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


# --- summary, runbook, commands -------------------------------------------------------------------


def _summary(
    row: TransactionRow, partitions: list[DiagnosedPartition], coordinator: CoordinatorPart, broker_log: bool
) -> tuple[str, str]:
    """(one line: the likeliest cause, the runbook section)."""
    state = row["state"]
    append_trouble = coordinator["append_errors"] or coordinator["cause"]
    if state in PREPARES:
        errored = [p for p in partitions if p["errors"]]
        if errored:
            first = max(errored, key=lambda p: p["errors"][0]["last_seen_ms"])
            error = first["errors"][0]
            section = MARKER_FAILURES if error["error"] in MARKER_PERMANENT else MARKERS_PENDING
            more = f" (and {len(errored) - 1} more partitions)" if len(errored) > 1 else ""
            return f"{first['partition']}{more}: {error['error']}: {_first_sentence(error['cause'])}", section
        troubled = [p for p in partitions if p["cause"]]
        if troubled:
            return f"{troubled[0]['partition']}: {troubled[0]['cause']}", MARKERS_PENDING
        if append_trouble:
            return (
                f"its markers may all be written, but the coordinator cannot append the final COMPLETE_* record: "
                f"{_coordinator_line(coordinator)}",
                APPEND_ERRORS,
            )
        if not broker_log:
            return (
                "no marker error is known: the exporter does not follow the coordinator's log (--broker-log); "
                "the partitions' leaders and ISRs look healthy",
                MARKERS_PENDING,
            )
        return (
            "no marker error read and the partitions look healthy: the coordinator may not reach their leaders "
            "(disconnects, `Cancelled in-flight WRITE_TXN_MARKERS request` in its log), or its final append is "
            "being retried (KafkaTransactionCompleteAppendRetries)",
            MARKERS_PENDING,
        )
    # ONGOING
    if row.get("late"):
        head = (
            "ONGOING past its own timeout: the coordinator should have aborted it "
            "(transaction.abort.timed.out.transaction.cleanup.interval.ms)"
        )
        if append_trouble:
            return f"{head}, but cannot append its PREPARE_ABORT: {_coordinator_line(coordinator)}", APPEND_ERRORS
        return f"{head}; {client_verdict(partitions, row)}", LATE
    if append_trouble:
        return f"its coordinator cannot append state changes: {_coordinator_line(coordinator)}", APPEND_ERRORS
    return "nothing wrong found", MARKERS_PENDING


def _first_sentence(text: str) -> str:
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def _coordinator_line(coordinator: CoordinatorPart) -> str:
    if coordinator["append_errors"]:
        e = coordinator["append_errors"][0]
        return f"{coordinator['partition']}: {e['error']}: {e['cause']}"
    return f"{coordinator['partition']}: {coordinator['cause']}"


def _command(purpose: str, command: str, why: str) -> Command:
    return {"purpose": purpose, "command": command, "why": why}


def _commands(
    row: TransactionRow, partitions: list[DiagnosedPartition], coordinator: CoordinatorPart, bootstrap_servers: str
) -> list[Command]:
    b = shlex.quote(bootstrap_servers)
    commands = [
        _command(
            CONFIRM,
            f"kafka-transactions.sh --bootstrap-server {b} describe --transactional-id "
            f"{shlex.quote(row['transactional_id'])}",
            "the coordinator's view: state, start time, timeout, partitions (TransactionDurationMs: since start)",
        ),
    ]
    topics: list[str] = []
    for p in partitions:
        parsed = split_partition(p["partition"])
        if parsed is None:
            continue
        if parsed[0] not in topics:
            if len(topics) == MAX_COMMAND_TOPICS:
                continue
            topics.append(parsed[0])
        topic, index = shlex.quote(parsed[0]), parsed[1]
        errors = {e["error"] for e in p["errors"]}
        if p["errors"] or p["cause"]:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-topics.sh --bootstrap-server {b} --describe --topic {topic}",
                    "the leader, replicas and ISR of each of the topic's partitions",
                )
            )
        if errors & {"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT"} or (
            p["cause"] and "min.insync.replicas" in p["cause"]
        ):
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-configs.sh --bootstrap-server {b} --describe --entity-type topics --entity-name "
                    f"{topic} --all",
                    "the min.insync.replicas in force (and where it is set)",
                )
            )
            commands += _lower_min_isr(p, b, topic)
        if "KAFKA_STORAGE_ERROR" in errors and p["leader"] is not None:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-log-dirs.sh --bootstrap-server {b} --describe --broker-list {p['leader']} "
                    f"--topic-list {topic}",
                    "the leader's log directories: which one is offline",
                )
            )
        if "NOT_LEADER_OR_FOLLOWER" in errors:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-reassign-partitions.sh --bootstrap-server {b} --list",
                    "reassignments in progress (leadership moving)",
                )
            )
        if "producer" in p:
            commands.append(
                _command(
                    CONFIRM,
                    f"kafka-transactions.sh --bootstrap-server {b} describe-producers --topic {topic} "
                    f"--partition {index}",
                    "the producer's last write, epoch and open transaction there",
                )
            )
    if coordinator["append_errors"] or coordinator["cause"]:
        commands.append(
            _command(
                CONFIRM,
                f"kafka-topics.sh --bootstrap-server {b} --describe --topic {TRANSACTION_STATE_TOPIC} "
                f"--under-min-isr-partitions",
                f"{coordinator['partition']} among the partitions short of ISR",
            )
        )
    # One of each, in order: partitions of one topic share its commands.
    seen: set[str] = set()
    return [c for c in commands if not (c["command"] in seen or seen.add(c["command"]))]  # type: ignore[func-returns-value]


def _lower_min_isr(p: DiagnosedPartition, b: str, topic: str) -> list[Command]:
    """The last-resort fix of a partition whose ISR stays below min.insync.replicas: lower it to the
    ISR's size for the topic, and how to restore it."""
    isr, min_isr = p["isr"], p["min_insync_replicas"]
    if not isr or min_isr is None or len(isr) >= min_isr:
        return []
    restore = (
        f"--add-config min.insync.replicas={min_isr}"
        if p["min_insync_replicas_source"] == TOPIC
        else "--delete-config min.insync.replicas"
    )
    return [
        _command(
            LAST_RESORT,
            f"kafka-configs.sh --bootstrap-server {b} --alter --entity-type topics --entity-name {topic} "
            f"--add-config min.insync.replicas={len(isr)}",
            f"lets the markers through with {len(isr)} in-sync replica(s), losing the durability min.insync.replicas="
            f"{min_isr} gives every write to the topic; restore it after (--alter ... {restore})",
        )
    ]
