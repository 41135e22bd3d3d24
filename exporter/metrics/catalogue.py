"""The one catalogue of metrics: names, types, units, labels, help, KIP-1344 mapping, buckets.

Every sink (the Prometheus collector and, through it, OTLP) and every generated file (dashboards,
alerts, the mixin, docs/metrics.md's metric table: `make generate`, generators/run.py) reads names from here
so nothing drifts. A counter or gauge the model counts names its snapshot field (`reads`) and is
rendered from it with no code of its own. `name` is the exposed sample name exactly as users query
it (counters with their `_total`, info with `_info`); units are OpenMetrics units and always the
name's suffix.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from exporter.codec.errors import DecodeError
from exporter.codec.states import TransactionState
from exporter.model.coordinator_loads import LOAD_BUCKETS_MS
from exporter.model.partition import EFFECTIVE_STATE_OF_UNWRITTEN, EPOCH_HEADROOM, MAX_PRODUCER_EPOCH, TRACKED_STATES


class MetricType(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    type: MetricType
    help: str
    unit: str = ""
    labels: tuple[str, ...] = ()
    # The KIP-1344 (KAFKA-20407) metric this one implements from the outside, if any.
    kip1344: str | None = None
    buckets: tuple[float, ...] = ()
    # A counter or gauge the model counts: the field of its snapshot (exporter.model.ModelSnapshot)
    # that the sinks render as it is: a number, or for a labelled metric a mapping from the label's
    # value to a number. Metrics without it are rendered by code of their own (histograms, ...).
    reads: str = ""

    @property
    def family_name(self) -> str:
        """The name without the sample suffix a type adds (prometheus_client's family name)."""
        suffix = {MetricType.COUNTER: "_total", MetricType.INFO: "_info"}.get(self.type, "")
        return self.name.removesuffix(suffix)


# Label values. `target_state`/`state` use the 4.1+ enum names, as KIP-1344's target-state does.
TARGET_STATES: tuple[str, ...] = tuple(TransactionState(i).name for i in range(TRACKED_STATES))
UNWRITTEN_STATES: tuple[str, ...] = tuple(s.name for s in EFFECTIVE_STATE_OF_UNWRITTEN)
DECODE_ERROR_REASONS: tuple[str, ...] = DecodeError.REASONS
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99, 0.999, 1.0)
PARTITION_PHASES = ("replaying", "live")
BROKER_LOG_SKIP_REASONS = ("malformed", "unrecognized")

# 1 ms to 60 s; the ms-resolution record timestamps make finer bounds meaningless.
DURATION_BUCKETS: tuple[float, ...] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)

# Transactions last longer than appends: 10 ms to 15 min (transaction.max.timeout.ms's default).
TRANSACTION_DURATION_BUCKETS: tuple[float, ...] = (
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    900.0,
)
DEFAULT_QUANTILE_WINDOW_SLICES = 5

_RECEIVE_CAVEAT = (
    " Live records only. Timed by the coordinator's own clock where --broker-log brings its DEBUG"
    " `succeeded` lines (the line's time minus the record's timestamp: exact to the ms), else by the"
    " fetch (the exporter's receipt minus the record's timestamp: an upper bound, looser by at most"
    " --latency-resolution-ms in steady state); txn_exporter_append_latency_clock_info says which."
)

APPEND_LATENCY = MetricSpec(
    "kafka_transaction_state_log_append_latency_seconds",
    MetricType.HISTOGRAM,
    "Time from a transaction coordinator submitting a state transition to __transaction_state to"
    " the record being readable, by target state." + _RECEIVE_CAVEAT,
    unit="seconds",
    labels=("target_state",),
    kip1344="transaction-state-log-append-latency-ms",
    buckets=DURATION_BUCKETS,
)
APPEND_LATENCY_QUANTILE = MetricSpec(
    "kafka_transaction_state_log_append_latency_quantile_seconds",
    MetricType.GAUGE,
    "Exact quantiles (3 significant digits, HdrHistogram) of the __transaction_state append latency"
    " over a sliding window (default 5 minutes), by target state; NaN when the window is empty. Timed"
    " by the clock txn_exporter_append_latency_clock_info names (exact, or an upper bound).",
    unit="seconds",
    labels=("target_state", "quantile"),
    kip1344="transaction-state-log-append-latency-ms",
)
PENDING_MARKERS = MetricSpec(
    "kafka_transactions_with_pending_markers",
    MetricType.GAUGE,
    "Transactions whose last __transaction_state record is PREPARE_COMMIT or PREPARE_ABORT, i.e."
    " waiting for their markers. With --broker-log, those whose final COMPLETE_* append is in the"
    " coordinator's retry queue are excluded, as KIP-1344 does; without it they are included.",
    kip1344="TransactionsWithPendingMarkersCount",
    reads="pending_markers",
)
PENDING_MARKERS_OLDEST_AGE = MetricSpec(
    "kafka_transaction_pending_markers_oldest_age_seconds",
    MetricType.GAUGE,
    "Age at scrape time of the oldest PREPARE_COMMIT/PREPARE_ABORT record still without its"
    " COMPLETE_* record; 0 when none is pending.",
    unit="seconds",
)
TRANSACTIONS = MetricSpec(
    "kafka_transactions",
    MetricType.GAUGE,
    "Transactional ids in __transaction_state by the state of their last record (expired ids,"
    " i.e. tombstoned, are not counted).",
    labels=("state",),
)
MARKER_COMPLETION = MetricSpec(
    "kafka_transaction_marker_completion_seconds",
    MetricType.HISTOGRAM,
    "Time from a PREPARE_COMMIT/PREPARE_ABORT record to its COMPLETE_COMMIT/COMPLETE_ABORT record"
    " (both broker timestamps): marker fan-out plus the final append's submission, including any"
    " coordinator failover in between. Only when both records were read live.",
    unit="seconds",
    labels=("result",),
    buckets=DURATION_BUCKETS,
)
RECORDS = MetricSpec(
    "kafka_transaction_state_log_records_total",
    MetricType.COUNTER,
    "Live __transaction_state records by target state (replayed records are not counted): the append"
    " latency histogram's count plus the records left untimed.",
    labels=("target_state",),
)
TOMBSTONES = MetricSpec(
    "kafka_transaction_state_log_tombstones_total",
    MetricType.COUNTER,
    "Live __transaction_state tombstones: transactional ids the coordinator expired.",
    reads="tombstones",
)
DECODE_ERRORS = MetricSpec(
    "kafka_transaction_state_log_decode_errors_total",
    MetricType.COUNTER,
    "__transaction_state records the exporter could not decode and skipped, by reason.",
    labels=("reason",),
    reads="decode_errors",
)
UNKNOWN_TAGGED_FIELDS = MetricSpec(
    "kafka_transaction_state_log_unknown_tagged_fields_total",
    MetricType.COUNTER,
    "__transaction_state records carrying a tagged field the exporter does not know (a newer Kafka's),"
    " by tag (above 63: other); they are decoded without it. Replayed and live records alike.",
    labels=("tag",),
    reads="unknown_tagged_fields",
)

_BROKER_LOG = " From the broker's log file (--broker-log)."
APPEND_ERRORS = MetricSpec(
    "kafka_transaction_state_log_append_errors_total",
    MetricType.COUNTER,
    "Failed __transaction_state appends of a state transition, by target state and Kafka error"
    " name: the raw append error (e.g. NOT_ENOUGH_REPLICAS) when the broker logs"
    " kafka.coordinator.transaction.TransactionStateManager at DEBUG, else the error the coordinator"
    " maps it to (e.g. COORDINATOR_NOT_AVAILABLE); UNKNOWN for a name that is not Kafka's." + _BROKER_LOG,
    labels=("target_state", "error"),
    kip1344="transaction-state-log-append-errors-total",
)
MARKER_RETRIES = MetricSpec(
    "kafka_transaction_marker_retries_total",
    MetricType.COUNTER,
    "Partition-level retriable errors in WriteTxnMarkers responses (the marker is resent), once per"
    " partition per response, by Kafka error name; disconnects are not counted." + _BROKER_LOG,
    labels=("error",),
    kip1344="TransactionMarkerRetriesPerSec",
    reads="marker_retries",
)
MARKER_FAILURES = MetricSpec(
    "kafka_transaction_marker_failures_total",
    MetricType.COUNTER,
    "Partition-level permanent errors in WriteTxnMarkers responses (sending cancelled, or the"
    " partition dropped from the transaction) and fatal ones, by Kafka error name." + _BROKER_LOG,
    labels=("error",),
    reads="marker_failures",
)
COMPLETE_APPEND_RETRIES = MetricSpec(
    "kafka_transaction_state_log_complete_append_retries_total",
    MetricType.COUNTER,
    "Final COMPLETE_COMMIT/COMPLETE_ABORT appends that failed after every marker was written and"
    " went to the coordinator's retry queue (LogAppendRetryQueueSize), one per attempt." + _BROKER_LOG,
    reads="complete_append_retries",
)

PARTITIONS_LOADING = MetricSpec(
    "kafka_transaction_state_log_partitions_loading",
    MetricType.GAUGE,
    "__transaction_state partitions the coordinator is loading into its cache now (its `Loading"
    " transaction metadata` line read, its `Finished loading` line not yet): their transactional ids"
    " get COORDINATOR_LOAD_IN_PROGRESS meanwhile. A load that never finishes is KAFKA-17941's (fixed in"
    " 3.9.2 and 4.0.0)." + _BROKER_LOG,
)
LOAD_OLDEST_AGE = MetricSpec(
    "kafka_transaction_state_log_load_oldest_age_seconds",
    MetricType.GAUGE,
    "Age at scrape time of the oldest __transaction_state load still running (since its `Loading` line"
    " was read); 0 when none is." + _BROKER_LOG,
    unit="seconds",
)
LOAD_DURATION = MetricSpec(
    "kafka_transaction_state_log_load_duration_seconds",
    MetricType.HISTOGRAM,
    "Time each finished __transaction_state partition load took, as its `Finished loading` line says:"
    " from the load's scheduling at the coordinator's election to the end of its read, the time Kafka's"
    " own partition-load-time-max/avg (transaction-coordinator-metrics) records, to the ms." + _BROKER_LOG,
    unit="seconds",
    buckets=tuple(bound / 1000 for bound in LOAD_BUCKETS_MS),
)
LOADS_WITHOUT_LEADER_CHANGE = MetricSpec(
    "kafka_transaction_state_log_loads_without_leader_change_total",
    MetricType.COUNTER,
    "__transaction_state partition loads at the same coordinator epoch as the partition's previous load"
    " on this broker, with no resignation between: a reload without a leadership change, which KRaft"
    " brokers before 3.8.0 did on every ISR change (KAFKA-15468's reload storm). A load at a new epoch is"
    " a leadership change and not counted, even with the same leader." + _BROKER_LOG,
)

TRANSACTIONS_LATE = MetricSpec(
    "kafka_transactions_late",
    MetricType.GAUGE,
    "ONGOING transactions older than their own transaction timeout plus a padding (default 5 minutes,"
    " --late-transaction-padding-seconds): KIP-664's lateness rule applied at the coordinator, with"
    " each transaction's timeout instead of transaction.max.timeout.ms. The coordinator should have"
    " aborted them (KIP-588).",
    reads="late_transactions",
)
TRANSACTIONS_STUCK_IN_PREPARE = MetricSpec(
    "kafka_transactions_stuck_in_prepare",
    MetricType.GAUGE,
    "PREPARE_COMMIT/PREPARE_ABORT transactions in that state longer than their own transaction timeout"
    " plus the same padding (--late-transaction-padding-seconds): a coordinator writes the markers within"
    " milliseconds and retries them without end, and no timeout ends a PREPARE_*, so these are held up"
    " (a data partition refusing the markers, or the final append failing). The transactions view"
    " (/transactions) names them and says why.",
    reads="stuck_prepares",
)
TIMEOUTS = MetricSpec(
    "kafka_transaction_timeouts_total",
    MetricType.COUNTER,
    "Transactions the coordinator aborted on timeout (KIP-588): a PREPARE_ABORT after ONGOING with"
    " the same producer id, the epoch bumped by one, written after start + timeout; live records only.",
    reads="timeouts",
)
PRODUCER_ID_ROTATIONS = MetricSpec(
    "kafka_transaction_producer_id_rotations_total",
    MetricType.COUNTER,
    "Records of a transactional id carrying another producer id than its previous record (epoch"
    " exhaustion, KIP-890 / KIP-360); live records only, expired-and-reused ids not counted.",
    reads="producer_id_rotations",
)
IDS_NEAR_EPOCH_EXHAUSTION = MetricSpec(
    "kafka_transactional_ids_near_epoch_exhaustion",
    MetricType.GAUGE,
    f"Transactional ids whose last record's producer epoch is within {EPOCH_HEADROOM:,} of the last one,"
    f" {MAX_PRODUCER_EPOCH:,}, by transaction_version (the records' ClientTransactionVersion; 0 where they"
    " carry none). Under transaction version 2 a producer spends an epoch a transaction and its producer"
    " id is rotated at the top, which is normal; affected Kafka versions mishandle the top (KAFKA-20090:"
    " 4.0.0 to 4.2.x leave a transaction ONGOING).",
    labels=("transaction_version",),
    reads="ids_near_epoch_exhaustion",
)
PRODUCER_EPOCH_MAX = MetricSpec(
    "kafka_transaction_producer_epoch_max",
    MetricType.GAUGE,
    "The highest producer epoch of the __transaction_state records read (replayed and live, of the"
    " partitions followed), by transaction_version as above: a high-water mark, which a rotation to a"
    " new producer id does not lower.",
    labels=("transaction_version",),
    reads="highest_producer_epoch",
)
TRANSACTION_DURATION = MetricSpec(
    "kafka_transaction_duration_seconds",
    MetricType.HISTOGRAM,
    "Time from a transaction's start (its first ONGOING record's start timestamp) to its"
    " PREPARE_COMMIT/PREPARE_ABORT record, by result (commit, abort, timeout: the coordinator's"
    " timeout abort); live records only.",
    unit="seconds",
    labels=("result",),
    buckets=TRANSACTION_DURATION_BUCKETS,
)
_HANGING_SCAN = (
    " From the periodic DescribeProducers scan of the data partitions this broker leads"
    " (--hanging-scan-interval-seconds); absent until a scan completed."
)
PARTITIONS_WITH_LATE_TRANSACTIONS = MetricSpec(
    "kafka_partitions_with_late_transactions",
    MetricType.GAUGE,
    "Data partitions with an open transaction whose last write is older than"
    " --hanging-max-transaction-timeout-seconds (transaction.max.timeout.ms) plus the padding: the"
    " broker's PartitionsWithLateTransactionsCount (KIP-664), from the outside." + _HANGING_SCAN,
)
HANGING_TRANSACTIONS = MetricSpec(
    "kafka_hanging_transactions",
    MetricType.GAUGE,
    "Late open transactions on data partitions that their coordinator does not expect to complete"
    " (no transactional id for the producer id, unknown to the coordinator, or the partition not in"
    " its transaction), by KIP-664's find-hanging rule: they block the last stable offset until"
    " aborted." + _HANGING_SCAN,
)
HANGING_SCAN_ERRORS = MetricSpec(
    "txn_exporter_hanging_scan_errors_total",
    MetricType.COUNTER,
    "Hanging-transaction scans that failed (the gauges keep the last completed scan's values).",
    reads="hanging_scan_errors",
)

SOURCE_UP = MetricSpec(
    "txn_exporter_source_up",
    MetricType.GAUGE,
    "1 when the exporter's __transaction_state consumer can read from Kafka, else 0.",
    reads="source_up",
)
PARTITIONS_FOLLOWED = MetricSpec(
    "txn_exporter_partitions_followed",
    MetricType.GAUGE,
    "__transaction_state partitions the exporter follows, by phase (replaying history or live).",
    labels=("phase",),
)
PARTITIONS_TAKEN_OVER = MetricSpec(
    "txn_exporter_partitions_taken_over_total",
    MetricType.COUNTER,
    "__transaction_state partitions this exporter's broker took over since the exporter started (an"
    " epoch of its broker's that began after the start), replayed and followed live.",
    reads="partitions_taken_over",
)
TAKEOVER_REPLAY = MetricSpec(
    "txn_exporter_takeover_replay_seconds_total",
    MetricType.COUNTER,
    "Time the takeovers' replays took, from the partition's assignment to following it live, summed:"
    " over txn_exporter_partitions_taken_over_total, the mean. The takeover's own records are counted"
    " and timed meanwhile; its gauges and /transactions rows wait for it.",
    unit="seconds",
    reads="takeover_replay_seconds",
)
PARTITION_DRAINS = MetricSpec(
    "txn_exporter_partition_drains_total",
    MetricType.COUNTER,
    "Partitions this exporter's broker stopped leading, read on to the end of its epochs there and let"
    " go, by how the drain ended: read_to_end, or cut (no leader let it end within 120 s: its last"
    " records are counted by no exporter).",
    labels=("outcome",),
    reads="partition_drains",
)
PARTITION_CONSUMER_LAG = MetricSpec(
    "txn_exporter_partition_consumer_lag_records",
    MetricType.GAUGE,
    "Records between the exporter's consumer position and the high watermark, per partition.",
    labels=("partition",),
)
PARTITION_LAST_RECORD_TIMESTAMP = MetricSpec(
    "txn_exporter_partition_last_record_timestamp_seconds",
    MetricType.GAUGE,
    "Timestamp (Unix seconds) of the last decoded record read from each partition.",
    unit="seconds",
    labels=("partition",),
)
UNWRITTEN_STATE_RECORDS = MetricSpec(
    "txn_exporter_unwritten_state_records_total",
    MetricType.COUNTER,
    "Records carrying a state brokers never write (DEAD, PREPARE_EPOCH_FENCE); applied as the"
    " tombstone / PREPARE_ABORT a broker writes instead, and not counted as a target state.",
    labels=("state",),
)
BROKER_LOG_LINES = MetricSpec(
    "txn_exporter_broker_log_lines_total",
    MetricType.COUNTER,
    "Lines read from the broker log files (--broker-log).",
)
BROKER_LOG_SKIPPED_LINES = MetricSpec(
    "txn_exporter_broker_log_skipped_lines_total",
    MetricType.COUNTER,
    "Transaction-coordinator lines of the broker log skipped, by reason: malformed (not the default"
    " `[%d] %p %m (%c)` layout), unrecognized (a kind of line the exporter reads, in an unknown format).",
    labels=("reason",),
)
BROKER_LOG_TRUNCATED_LINES = MetricSpec(
    "txn_exporter_broker_log_truncated_lines_total",
    MetricType.COUNTER,
    "Broker log lines longer than the limit (64 KiB): their middle was dropped, head and tail parsed.",
)
BROKER_LOG_ROTATIONS = MetricSpec(
    "txn_exporter_broker_log_rotations_total",
    MetricType.COUNTER,
    "Rotations of the broker log files seen (renamed, or truncated in place by copytruncate).",
)
BROKER_LOG_UNPLACED_LINES = MetricSpec(
    "txn_exporter_broker_log_unplaced_lines_total",
    MetricType.COUNTER,
    "The coordinator's `succeeded` lines whose time is in no layout the exporter reads (`yyyy-MM-dd"
    " HH:mm:ss,SSS`, or epoch ms): they time no append.",
)
BROKER_LOG_UTC_OFFSET = MetricSpec(
    "txn_exporter_broker_log_utc_offset_seconds",
    MetricType.GAUGE,
    "The broker log's local time minus UTC, learned from its `succeeded` lines (each names a UTC time"
    " of its transition) and re-learned when it changes (DST); absent until one is read.",
    unit="seconds",
)
APPEND_LATENCY_CLOCK = MetricSpec(
    "txn_exporter_append_latency_clock_info",
    MetricType.INFO,
    "The clock timing the append latency: coordinator (its DEBUG `succeeded` lines in the broker"
    " log, while they come) or fetch (the exporter's receipt: an upper bound).",
    labels=("clock",),
)
APPEND_LATENCY_TRANSITIONS = MetricSpec(
    "txn_exporter_append_latency_transitions_total",
    MetricType.COUNTER,
    "Live __transaction_state records by target state and the clock that timed their append:"
    " coordinator, fetch, or untimed (the coordinator's clock in force, and the record's `succeeded`"
    " line not read within 30 s). They add up to kafka_transaction_state_log_records_total.",
    labels=("target_state", "clock"),
)
APPEND_CLOCK_UNMATCHED = MetricSpec(
    "txn_exporter_append_clock_unmatched_total",
    MetricType.COUNTER,
    "Live records and `succeeded` lines that waited for each other in vain, by kind (record, line)"
    " and reason: expired (the other not read within 30 s, a line 60 s), append_failed (a record whose append the"
    " coordinator logged as failed: a leader stepping down, a follower keeping the record),"
    " leadership_lost (a record read after its broker lost the partition, never acknowledged: e.g. the"
    " broker killed), evicted (over 16384 waiting), already_timed (a line whose record the fetch clock"
    " had timed, as the coordinator's clock came back).",
    labels=("kind", "reason"),
)
APPEND_LATENCY_NEGATIVE = MetricSpec(
    "txn_exporter_append_latency_negative_total",
    MetricType.COUNTER,
    "Appends the coordinator's clock timed below 0 ms (its line's time before the record's"
    " timestamp: the broker's clock stepped back), recorded as 0.",
)
HTTP_REJECTED_CONNECTIONS = MetricSpec(
    "txn_exporter_http_rejected_connections_total",
    MetricType.COUNTER,
    "HTTP connections the exporter closed to stay within its connection limit (64): the one idle"
    " longest (no complete request yet: slow or idle clients) when all were taken, or a new one when"
    " every connection was answering a request.",
)
KNOWN_BUG_MATCHES = MetricSpec(
    "kafka_transactions_matching_known_bug",
    MetricType.GAUGE,
    "In-flight (stuck or late) and hanging transactions whose /transactions diagnosis names a known"
    " Kafka bug, by its JIRA id (docs/known-bugs.md): their facts match it on the version of the broker"
    " it lives on, that version has no fix, and no ordinary cause (the ISR below min.insync.replicas, a"
    " broker down) explains them; counted every 30 s, as the view diagnoses them. 0 for every other bug"
    " of the table.",
    labels=("bug",),
    reads="known_bug_matches",
)
BROKER_INFO = MetricSpec(
    "txn_exporter_broker_info",
    MetricType.INFO,
    "The Kafka version of the broker the exporter runs beside, and how it was learned (source): log"
    " (its startup line `Kafka version: X`, exact), api_versions (its ApiVersions answer held against"
    " the pinned Kafka versions': a range, e.g. 3.9.x), or none (version=unknown: not learned yet). A"
    " string that is no Apache Kafka release (a vendor's, e.g. 7.7.1-ccs) is shown as written; the"
    " known bugs are not matched on it.",
    labels=("version", "source"),
)
BUILD_INFO = MetricSpec(
    "txn_exporter_build_info",
    MetricType.INFO,
    "The exporter's version and Python runtime.",
    labels=("version", "python_version"),
)

BROKER_AFFECTED = MetricSpec(
    "txn_exporter_broker_affected_by_known_bug",
    MetricType.GAUGE,
    "1 for each known Kafka bug (docs/known-bugs.md) whose affected versions include the version of the"
    " broker the exporter runs beside (txn_exporter_broker_info), or may include it where its patch is"
    " unknown; 0 where that version has the fix or was never affected; no series while the version is"
    " unknown. For alerts that warn before a bug bites, such as KafkaTransactionalIdsNearEpochExhaustion.",
    labels=("bug",),
)

CATALOGUE: tuple[MetricSpec, ...] = (
    APPEND_LATENCY,
    APPEND_LATENCY_QUANTILE,
    PENDING_MARKERS,
    PENDING_MARKERS_OLDEST_AGE,
    TRANSACTIONS,
    MARKER_COMPLETION,
    RECORDS,
    TOMBSTONES,
    DECODE_ERRORS,
    UNKNOWN_TAGGED_FIELDS,
    APPEND_ERRORS,
    MARKER_RETRIES,
    MARKER_FAILURES,
    COMPLETE_APPEND_RETRIES,
    PARTITIONS_LOADING,
    LOAD_OLDEST_AGE,
    LOAD_DURATION,
    LOADS_WITHOUT_LEADER_CHANGE,
    TRANSACTIONS_LATE,
    TRANSACTIONS_STUCK_IN_PREPARE,
    TIMEOUTS,
    PRODUCER_ID_ROTATIONS,
    IDS_NEAR_EPOCH_EXHAUSTION,
    PRODUCER_EPOCH_MAX,
    TRANSACTION_DURATION,
    PARTITIONS_WITH_LATE_TRANSACTIONS,
    HANGING_TRANSACTIONS,
    KNOWN_BUG_MATCHES,
    HANGING_SCAN_ERRORS,
    SOURCE_UP,
    PARTITIONS_FOLLOWED,
    PARTITIONS_TAKEN_OVER,
    TAKEOVER_REPLAY,
    PARTITION_DRAINS,
    PARTITION_CONSUMER_LAG,
    PARTITION_LAST_RECORD_TIMESTAMP,
    UNWRITTEN_STATE_RECORDS,
    BROKER_LOG_LINES,
    BROKER_LOG_SKIPPED_LINES,
    BROKER_LOG_TRUNCATED_LINES,
    BROKER_LOG_ROTATIONS,
    BROKER_LOG_UNPLACED_LINES,
    BROKER_LOG_UTC_OFFSET,
    APPEND_LATENCY_CLOCK,
    APPEND_LATENCY_TRANSITIONS,
    APPEND_CLOCK_UNMATCHED,
    APPEND_LATENCY_NEGATIVE,
    HTTP_REJECTED_CONNECTIONS,
    BROKER_INFO,
    BROKER_AFFECTED,
    BUILD_INFO,
)
