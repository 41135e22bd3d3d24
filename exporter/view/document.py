"""The transactions view's document, declared once: what `/transactions` serves as JSON, what the page
renders, what `txn-exporter transactions` reads back and prints as tables.

TypedDicts: the document stays a plain dict (json.dumps writes it as before, key for key, in the order
it is built), and mypy checks every key the query, the diagnosis, the merge and both renderers use.

One exporter's document (exporter.view.query.document, completed by the endpoint) and a merged one
(exporter.view.cluster.merge) have one shape: the keys of both, plus what each adds (NotRequired).
A document read from another exporter is JSON it sent (`received`): its top level is checked, its
rows are taken as they came; the renderers read what an older exporter may leave out with `.get`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NotRequired, TypedDict, cast


class QueryEcho(TypedDict, total=False):
    """The filters the document answers (`states`, `min_age_seconds`, `limit`); when no exporter of a
    merged view answered, the filters asked instead (`txn-exporter transactions`: `states`,
    `min_age` as given, `limit`)."""

    states: list[str]
    min_age_seconds: float
    min_age: str | None
    limit: int


class MarkerError(TypedDict):
    """A WriteTxnMarkers partition error the broker log showed for a data partition."""

    partition: str
    error: str
    count: int
    last_seen_ms: int


class AppendError(TypedDict):
    """A failed `__transaction_state` append on the transaction's coordinator partition."""

    target_state: str
    error: str
    count: int
    last_seen_ms: int


# -- the diagnosis (exporter.view.diagnosis) ------------------------------------------------------


class Runbook(TypedDict):
    section: str
    url: str


class Command(TypedDict):
    purpose: str  # "confirm", "fix" or "last resort"
    command: str
    why: str


class Abort(TypedDict):
    allowed: bool
    why: str


class PartitionFacts(TypedDict):
    """A partition's leader, replicas, ISR and min.insync.replicas as the cluster's state says (None:
    unknown, `unknown` says why)."""

    leader: int | None
    replicas: list[int] | None
    isr: list[int] | None
    out_of_isr: list[int] | None
    brokers_down: list[int] | None
    min_insync_replicas: int | None
    min_insync_replicas_source: str | None  # "topic", "broker" or "default"
    exists: bool
    as_of_ms: int | None
    unknown: str | None


class Producer(TypedDict, total=False):
    """What DescribeProducers says of a late transaction's producer on one partition: `unknown` (why
    it could not be asked), or `found` (False: no state of it there; True: the rest)."""

    unknown: str | None
    found: bool
    producer_epoch: int
    last_timestamp_ms: int
    last_write_seconds_ago: float
    coordinator_epoch: int
    transaction_start_offset: int
    as_of_ms: int | None


class ErrorCause(TypedDict):
    error: str
    count: int
    last_seen_ms: int
    cause: str


class DiagnosedPartition(PartitionFacts):
    partition: str
    errors: list[ErrorCause]
    cause: str | None
    producer: NotRequired[Producer]


class AppendErrorCause(TypedDict):
    error: str
    count: int
    last_seen_ms: int
    target_state: NotRequired[str]
    cause: str


class CoordinatorPart(PartitionFacts):
    broker: int | None
    partition: str
    append_errors: list[AppendErrorCause]
    cause: str | None


class GroupWait(TypedDict):
    """A consumer group whose committed offsets wait behind the transaction's markers, its
    coordinator (None: unknown) and its `__consumer_offsets-N`."""

    group_id: str
    coordinator: int | None
    partition: str
    cause: str


class KnownBugMatch(TypedDict):
    """A known Kafka bug the row's facts match (exporter.contracts.bug_matching): `certain` False
    where the broker's patch is unknown and some of its possible patches have the fix."""

    jira: str
    title: str
    certain: bool
    line: str  # "Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0): ..."
    version: str  # the version it was matched on, as learned
    version_source: str  # "log" (its startup line) or "api_versions"
    fixed_in: list[str]
    signal: str  # what told it from the ordinary cause
    workaround: str
    link: str


class BugNotChecked(TypedDict):
    jira: str
    why: str


class KnownBugs(TypedDict):
    """The row held against the known-bug table (docs/known-bugs.md)."""

    matches: list[KnownBugMatch]
    not_checked: list[BugNotChecked]  # bugs the row could not be held against, and why
    # Set: the ordinary cause explains the row, and no bug was tried.
    ordinary_cause: str | None
    # The version of each broker the bugs live on, by role ("coordinator", "partition leader"), as
    # learned (its text says why where it is unknown); None: not learned.
    versions: dict[str, str | None]


class Diagnosis(TypedDict):
    summary: str
    runbook: Runbook
    partitions: list[DiagnosedPartition]
    partitions_not_shown: int
    coordinator: CoordinatorPart
    commands: list[Command]
    abort: Abort
    consumer_groups: NotRequired[list[GroupWait]]  # rows whose __consumer_offsets-N has pending groups
    known_bugs: NotRequired[KnownBugs]  # absent from an older exporter's diagnoses


class HangingAdvice(TypedDict):
    """A hanging transaction's runbook and commands (its abort command is the row's own)."""

    runbook: Runbook
    commands: list[Command]


# -- rows -------------------------------------------------------------------------------------------


class ExporterRef(TypedDict):
    """A merged row's exporter: its name and its broker's id (None: unknown)."""

    name: str
    broker_id: int | None


class ConsumerGroup(TypedDict):
    """A group with pending transactional offsets, and the broker coordinating it (FindCoordinator;
    None: it did not say)."""

    group_id: str
    coordinator: int | None


class OffsetsGroups(TypedDict):
    """A row's `__consumer_offsets-N` and the groups whose transactional offsets are pending there
    (exporter.sources.consumer_groups): `pending_groups` None when unknown (`unknown` says why); how
    many groups stored there were asked, how many more were not (the bound), the groups whose answer
    was an error (group: error)."""

    partition: str
    pending_groups: list[ConsumerGroup] | None
    groups_checked: int | None
    groups_not_checked: int | None
    unknown_groups: dict[str, str]
    as_of_ms: int | None
    unknown: str | None


class TransactionRow(TypedDict):
    """An in-flight transaction (exporter.view.query.transaction_row)."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    # The records' ClientTransactionVersion: 2 for a KIP-890 (TV2) client; 0 where the records carry
    # none (before 4.0, or a TV0 client). Absent from an older exporter's rows.
    transaction_version: NotRequired[int]
    state_entered_ms: int
    age_seconds: float
    duration_seconds: float
    transaction_start_ms: int
    transaction_timeout_ms: int
    late: bool | None  # None: PREPARE_*
    stuck: bool | None  # None: ONGOING
    coordinator_partition: int
    coordinator_broker: int | None
    partitions: list[str]
    marker_errors: list[MarkerError]
    append_errors: list[AppendError]
    diagnosis: Diagnosis | None
    partitions_error: NotRequired[str]
    exporter: NotRequired[ExporterRef]  # a merged view's
    # One per __consumer_offsets-N of the row, when looked up (exporter.view.diagnosis.consumer_groups).
    consumer_groups: NotRequired[list[OffsetsGroups]]


class HangingRow(TypedDict):
    """A hanging transaction of the last scan: exporter.contracts.hanging_rules.finding_row's fields,
    then the view's (exporter.view.query.hanging_rows)."""

    topic: str
    partition: int
    producer_id: int
    epoch: int
    start_offset: int
    transactional_id: str | None
    coordinator: int | None
    age_seconds: float
    verdict: str
    reason: str
    last_timestamp_ms: int
    coordinator_epoch: int
    abort_command: str
    coordinator_broker: int | None
    runbook: Runbook
    commands: list[Command]
    known_bugs: NotRequired[KnownBugs]
    exporter: NotRequired[ExporterRef]  # a merged view's


# -- the document -----------------------------------------------------------------------------------


class BrokerInfo(TypedDict):
    """Which exporter answers: the broker it sits beside (None until known, and with --all-partitions)."""

    id: int | None
    bootstrap_servers: str


class PrometheusTarget(TypedDict):
    """Prometheus's view of an exporter found among its targets (`txn-exporter transactions --prometheus`)."""

    instance: str
    health: str | None
    last_error: str | None
    last_scrape: str | None


class SourceEntry(TypedDict):
    """An exporter asked for a merged view; `ok` False: it did not answer, `error` says why."""

    name: str
    url: str
    ok: bool
    error: str | None
    broker: BrokerInfo | None
    in_flight_matching: int | None
    hanging_scan: bool | None
    hanging_scan_ms: int | None
    seconds: float
    prometheus: NotRequired[PrometheusTarget]


class KafkaVersionSeen(TypedDict):
    version: str  # "3.7.1", "3.9.x", or why it is unknown
    source: str  # "log" or "api_versions"
    known: bool


class Document(TypedDict):
    """The view: one exporter's, or several merged."""

    now_ms: int
    query: QueryEcho
    late_padding_seconds: float
    broker_log: bool
    hanging_scan_ms: int | None  # when the last hanging-transaction scan completed (None: none says when)
    in_flight_matching: int
    transactions: list[TransactionRow]
    hanging_scan: bool
    hanging_matching: int
    hanging: list[HangingRow]
    # One exporter's: rows needing a diagnosis beyond the bound, which exporter answers, how many
    # peers it has (filled in by the endpoint).
    diagnoses_omitted: NotRequired[int]
    # The Kafka versions of the brokers the rows name, as learned, by broker id (exporter.view.diagnosis
    # .known_bugs): their text, and how they were learned.
    kafka_versions: NotRequired[dict[str, KafkaVersionSeen]]
    broker: NotRequired[BrokerInfo]
    peers: NotRequired[int]
    # A merged view's: the exporters asked, and the rows two of them listed.
    sources: NotRequired[list[SourceEntry]]
    duplicates: NotRequired[int]


class NotAView(ValueError):
    """JSON that is not a transactions view."""


def received(value: object) -> Document:
    """A document another exporter sent (parsed JSON), as the view's: NotAView unless it is an object
    with a `transactions` list; what it holds is taken as it came (untrusted: the renderers escape it)."""
    if not isinstance(value, Mapping) or not isinstance(value.get("transactions"), list):
        raise NotAView("JSON without a 'transactions' list: not a transactions view")
    return cast(Document, value)


def is_merged(document: Document) -> bool:
    """Several exporters' views merged (exporter.view.cluster): rows name their broker."""
    return isinstance(document.get("sources"), list)
