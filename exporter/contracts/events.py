"""The typed events sources hand to the coordinator model."""

from __future__ import annotations

from dataclasses import dataclass, field

from exporter.codec import DecodeError, TransactionLogRecord
from exporter.contracts.hanging_rules import Finding
from exporter.contracts.kafka_versions import BrokerVersion


@dataclass(slots=True)
class TransactionLogRecords:
    """Consecutive decoded `__transaction_state` records of one partition, as one poll received
    them (a consumer fetches each partition's records in runs). One event per run rather than per
    record: the model then looks its partition up once per run, not once per record."""

    partition: int
    records: list[TransactionLogRecord]  # in offset order, never empty
    # Wall clock (ms) when the consumer received the records, i.e. after their appends completed.
    received_ms: int
    # True while the partition is replayed up to its high watermark after being taken over:
    # the state is rebuilt, but no latency is observed (the appends happened long ago).
    replay: bool


@dataclass(slots=True)
class UndecodableRecord:
    """A record the codec rejected; counted by reason, skipped, and nothing else is lost."""

    partition: int
    offset: int
    error: DecodeError


@dataclass(slots=True)
class PartitionAssigned:
    """The exporter starts following a `__transaction_state` partition (replay begins)."""

    partition: int
    # Whether the exporter's own broker leads it (always, unless --all-partitions): then its
    # coordinator's `succeeded` lines are in the broker log read, and time its appends.
    here: bool = True
    # Wall clock (ms) from which the partition's records were counted by some exporter (this one's
    # start): a prepare appended since pairs with the completion counted here, whichever exporter
    # counted the prepare (a coordinator may move between the two). None: only prepares counted here.
    counting_since_ms: int | None = None


@dataclass(slots=True)
class PartitionDraining:
    """The exporter's broker no longer leads the partition: it is read on, from its new leader, to
    the end of the epochs its broker led there, its records counted, while its gauges and rows are
    left to the new leader's exporter; PartitionRevoked ends it."""

    partition: int


@dataclass(slots=True)
class PartitionReplayed:
    """Replay reached the high watermark seen at assignment: records from here on are live."""

    partition: int
    # A takeover's (an epoch of this exporter's broker that began after its start): how long, in ms,
    # from its assignment to here. None: the partitions led at the start, or following every one.
    takeover_replay_ms: int | None = None


@dataclass(slots=True)
class PartitionRevoked:
    """The partition moved away: its state and every series it fed must go."""

    partition: int
    # How its drain ended (exporter.sources.topic_tail's drains): "read_to_end" or "cut"; None: none.
    drain: str | None = None


@dataclass(slots=True)
class PartitionProgress:
    """Where the consumer stands in a partition, for the lag self-metric; sent as often as the
    source likes (e.g. from librdkafka's stats or after each poll batch)."""

    partition: int
    # Next offset the consumer will read (consumer.position()).
    position: int
    # Offset after the last record visible to consumers.
    high_watermark: int


@dataclass(slots=True)
class SourceStatus:
    """Whether the source can currently read from Kafka (feeds txn_exporter_source_up)."""

    up: bool


# --- Broker log events (exporter.sources.broker_log_tail): what never reaches __transaction_state ---


@dataclass(frozen=True, slots=True)
class TransactionLogAppendFailed:
    """A submitted state transition append to `__transaction_state` failed (counted once, whether the
    broker logged it at INFO only or at DEBUG and INFO)."""

    # TransactionState id, EMPTY (0) .. COMPLETE_ABORT (5).
    target_state: int
    # Kafka error name: the raw append error when the DEBUG line was there, else the coordinator's
    # mapped error of the INFO line; UNKNOWN if neither names a Kafka error.
    error: str
    # Whose transition (the transactions view notes the error on its __transaction_state partition),
    # and the wall clock (ms) when the exporter read the line; not compared: the counters use the
    # target state and the error only.
    transactional_id: str | None = field(default=None, compare=False)
    seen_ms: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class MarkerWriteRetried:
    """A WriteTxnMarkers response carried a retriable error for one partition (the marker is resent)."""

    error: str
    # Whose marker, for which data partition (`topic-N`, as the broker prints it).
    transactional_id: str | None = None
    partition: str | None = None
    # Wall clock (ms) when the exporter read the line: not in the line itself, so not compared.
    seen_ms: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class MarkerWriteFailed:
    """A WriteTxnMarkers response carried a permanent error for one partition (sending is cancelled
    or the partition is dropped from the transaction), or a fatal one."""

    error: str
    # As MarkerWriteRetried's; a fatal error's line names no partition.
    transactional_id: str | None = None
    partition: str | None = None
    seen_ms: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class CompleteAppendRetried:
    """The final COMPLETE_* append of a transaction whose markers are all written failed and went to
    the coordinator's retry queue (LogAppendRetryQueueSize); it stays there until the record lands."""

    transactional_id: str


@dataclass(frozen=True, slots=True)
class CoordinatorChanged:
    """The broker became (elected) or stopped being the transaction coordinator of a partition."""

    partition: int
    elected: bool
    # The coordinator epoch, which is the partition's leader epoch: the one its batches carry, so an
    # elected line says which batches this broker appended (None: a resignation that names none).
    epoch: int | None = None


@dataclass(frozen=True, slots=True)
class CoordinatorStarting:
    """The broker's transaction coordinator is starting up (its `Starting up.` line): the broker
    (re)started, so a load the log showed under way before is over, finished or not."""


@dataclass(frozen=True, slots=True)
class CoordinatorLoadStarted:
    """The coordinator began loading a `__transaction_state` partition into its cache (its INFO
    `Loading transaction metadata from __transaction_state-<n> at epoch <e>`, when the scheduled load
    starts to read); until it finishes, the partition's transactional ids get COORDINATOR_LOAD_IN_PROGRESS."""

    partition: int
    epoch: int
    # Wall clock (ms) when the exporter read the line (the load's age is counted from it).
    seen_ms: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class CoordinatorLoadFinished:
    """The coordinator finished reading a `__transaction_state` partition (its INFO `Finished loading <k>
    transaction metadata from __transaction_state-<n> in <ms> milliseconds, of which <s> milliseconds was
    spent in the scheduler.`): the time Kafka records in its partition-load-time-max/avg, from the load's
    scheduling (the election) to the end of the read."""

    partition: int
    transactions: int
    duration_ms: int
    scheduler_ms: int
    seen_ms: int = field(default=0, compare=False)


@dataclass(slots=True)
class TransitionAppended:
    """The coordinator's own word that a state transition's `__transaction_state` append succeeded:
    its DEBUG `succeeded` line, written in the append's callback once the in-sync replicas have the
    record. The first five fields are the record's own (its key's id, its value's state, producer id
    and epoch, TransactionLastUpdateTimestampMs), so the line pairs with exactly one record. Not
    frozen, as the records' events are not: there is one a transition, thousands a second, and a
    frozen dataclass costs four times as much to make."""

    transactional_id: str
    target_state: int
    producer_id: int
    producer_epoch: int
    last_update_ms: int
    # When the line was written, on the coordinator's clock, as UTC epoch ms (the log's local time
    # placed by exporter.broker_log.local_time).
    appended_ms: int
    # Wall clock (ms) when the exporter read the line.
    seen_ms: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class CoordinatorLogAtDebug:
    """The broker log held the coordinator's `succeeded` lines just before the exporter began to read
    it at its end: TransactionStateManager is at DEBUG, so the coordinator's clock is in force from the
    start, and an idle cluster's tail fetches for freshness only before any transition brings a line."""

    # Wall clock (ms) when the exporter found them.
    seen_ms: int


@dataclass(frozen=True, slots=True)
class BrokerVersionSeen:
    """The broker's startup line `Kafka version: <version>` (AppInfoParser, INFO), in its log as it
    starts or in a file of it from before the exporter's start: the version the known bugs are matched
    on (exporter.contracts.kafka_versions.from_log reads it; a vendor's string is kept as written)."""

    version: str
    # Wall clock (ms) when the exporter read the line (0: found looking back, at the exporter's start).
    seen_ms: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class BrokerVersionAnswered:
    """The broker's version from its ApiVersions answer (exporter.sources.broker_versions: a range,
    such as 3.9.x, or unknown), for an exporter whose log holds no startup line: its log's word, once
    read, is kept over it."""

    version: BrokerVersion


@dataclass(frozen=True, slots=True)
class KnownBugsCounted:
    """How many in-flight and hanging transactions the view's diagnosis matched to each known Kafka
    bug (exporter.contracts.known_bugs), by JIRA id, every bug of the table counted (0 where none)."""

    counts: dict[str, int]


@dataclass(slots=True)
class BrokerLogStats:
    """What the broker-log source read since its previous stats event (deltas, for self-metrics)."""

    lines: int = 0
    # Lines longer than the limit: the middle was dropped, the head and tail were parsed.
    truncated: int = 0
    # Coordinator lines without the `[time] LEVEL message (logger)` frame.
    malformed: int = 0
    # Coordinator lines that looked like one the exporter reads but did not parse.
    unrecognized: int = 0
    rotations: int = 0
    # `succeeded` lines whose time could not be placed in UTC (no time, or not in a layout read here).
    unplaced: int = 0
    # Not a delta: the log's local time minus UTC in force (ms), once learned from its lines.
    utc_offset_ms: int | None = None


@dataclass(frozen=True, slots=True)
class HangingScanCompleted:
    """One round of the data-partition view (exporter.sources.hanging_scan): partitions described, those
    with a late open transaction, and the late transactions found hanging. `ok` False: the round
    failed, the gauges keep the previous round's values."""

    partitions_scanned: int
    partitions_with_late_transactions: int
    hanging_transactions: int
    ok: bool = True
    # The round's verdicts (late and hanging), for the transactions view.
    findings: tuple[Finding, ...] = ()
    # Wall clock (ms) when the round completed (0: not said), for the view's "last scan at".
    completed_ms: int = field(default=0, compare=False)


# What the `__transaction_state` tail (exporter.sources.topic_tail) yields.
TopicEvent = (
    TransactionLogRecords
    | UndecodableRecord
    | PartitionAssigned
    | PartitionDraining
    | PartitionReplayed
    | PartitionRevoked
    | PartitionProgress
    | SourceStatus
)
