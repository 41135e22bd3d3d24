"""The Prometheus recording and alerting rules, as data: `RECORDING` (the recording rules) and
`ALERTS`, each an `Alert` with its query, threshold (`above`), `for`, labels and annotations.
alerts/generate.py renders them to alerts/kafka-txn-exporter.rules.yml (step 2 of `make
generate`); deploy/generate.py wraps the same rules in a PrometheusRule and mixin/generate.py makes
them jsonnet.

Metric names go through queries.metrics.series/ref (catalogue or BROKER_JMX only), the cluster
label, `up`'s job and thresholds through queries.placeholders (the mixin's `_config`); an alert's
dashboard is one of the dashboards' uids; each runbook_url points at the alert's section of
alerts/runbooks.md (the tests check the section exists); a transaction alert's transactions_url
(also at the end of its description) is the exporter's /transactions view of the instance that
fired, filtered to the transactions the alert is about. Labels every alert carries:
severity (critical pages, warning makes a ticket), team (who owns it: alertmanager routes on it)
and component (exporter alerts inhibit `component="transactions"` symptoms of the same instance).
"""

from __future__ import annotations

from dataclasses import dataclass

from dashboards.panels import DRILLDOWN_UID, OVERVIEW_UID
from exporter.codec.states import PREPARE_STATES
from exporter.contracts import runbooks
from exporter.metrics import catalogue
from queries.metrics import series
from queries.placeholders import CLUSTER, JOB, THRESHOLD, expand

TEAM_KAFKA = "kafka"  # owns the brokers and the transaction coordinator
TEAM_OBSERVABILITY = "observability"  # owns the exporter and the monitoring pipeline

# -- recording rules -----------------------------------------------------------------------------

P99_APPEND = "cluster_instance_target_state:kafka_transaction_state_log_append_latency_seconds:p99_rate5m"
P99_COMPLETION = "cluster_instance_result:kafka_transaction_marker_completion_seconds:p99_rate5m"
RETRIES_RATE = "cluster_instance_error:kafka_transaction_marker_retries:rate5m"
APPEND_ERRORS_RATE = "cluster_instance_target_state_error:kafka_transaction_state_log_append_errors:rate5m"
LAG_SUM = "cluster_instance:txn_exporter_partition_consumer_lag_records:sum"

RECORDING: tuple[tuple[str, str], ...] = (
    (
        P99_APPEND,
        f"histogram_quantile(0.99, sum by ({CLUSTER}, instance, target_state, le) (rate("
        f"{series('kafka_transaction_state_log_append_latency_seconds_bucket')}[5m])))",
    ),
    (
        P99_COMPLETION,
        f"histogram_quantile(0.99, sum by ({CLUSTER}, instance, result, le) (rate("
        f"{series('kafka_transaction_marker_completion_seconds_bucket')}[5m])))",
    ),
    (
        RETRIES_RATE,
        f"sum by ({CLUSTER}, instance, error) (rate({series('kafka_transaction_marker_retries_total')}[5m]))",
    ),
    (
        APPEND_ERRORS_RATE,
        f"sum by ({CLUSTER}, instance, target_state, error) (rate("
        f"{series('kafka_transaction_state_log_append_errors_total')}[5m]))",
    ),
    (LAG_SUM, f"sum by ({CLUSTER}, instance) ({series('txn_exporter_partition_consumer_lag_records')})"),
)
RECORDING_NAMES = frozenset(name for name, _ in RECORDING)

# -- alerts --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    name: str
    query: str  # what is compared with the threshold; placeholders (queries.placeholders)
    for_: str
    severity: str  # critical | warning
    team: str
    component: str  # transactions | exporter
    summary: str
    description: str
    dashboard: str = OVERVIEW_UID
    # Why the e2e test may find this alert's inputs empty on a healthy cluster (None: must have data).
    expected_empty: str | None = None
    # The query string of the exporter's /transactions view listing the transactions the alert is
    # about (filters: state, comma-separated, HANGING for the scan's findings; min_age); None: no view.
    transactions: str | None = None
    above: float | None = None  # the threshold: fires while the query is above it (the mixin's thresholds)

    @property
    def anchor(self) -> str:
        return self.name.lower()

    @property
    def template(self) -> str:
        """The rule's expression with its placeholders."""
        return self.query if self.above is None else f"{self.query} > {THRESHOLD}"

    @property
    def expr(self) -> str:
        """The rule's expression in the committed rules (the default `_config`)."""
        return expand(self.template, threshold=self.above)


# In an annotation: the alert's cluster label's value; in a query of `_q`, the matchers of its cluster and instance.
THE_CLUSTER = "{{ $labels." + CLUSTER + " }}"
SAME = f'{CLUSTER}="%s", instance="%s"'
REPLAYING = 'phase="replaying"'
TV2 = 'transaction_version="2"'
EPOCH_BUG = 'bug="KAFKA-20090"'  # the one that leaves a transaction ONGOING at the top (4.0.0 to 4.2.x)


def _q(expr: str, unit: str = "", suffix: str = "", label: str = "") -> str:
    """A Go-template query in an annotation: the first sample's value, humanized (``unit="s"``: as
    a duration; ``unit="exact"``: every digit), or its ``label``'s value, or "none". ``expr`` has ``SAME``
    among its matchers where the alert's cluster and instance go."""
    value = {"s": "humanizeDuration", "exact": 'printf "%.0f"'}.get(unit, "humanize")
    shown = f'label "{label}"' if label else f"value | {value}"
    return (
        f"{{{{ with printf `{expr}` $labels.{CLUSTER} $labels.instance | query }}}}"
        f"{{{{ . | first | {shown} }}}}{suffix}{{{{ else }}}}none{{{{ end }}}}"
    )


RATE_VALUE = '{{ $value | printf "%.2f" }}/s'


BROKER_LOG_FAULT = "needs --broker-log; counter series appear with the first event (a fault)"


PENDING = catalogue.PENDING_MARKERS.name
PREPARES = ",".join(state.name for state in PREPARE_STATES)  # the view's states of transactions waiting for markers
OLDEST = catalogue.PENDING_MARKERS_OLDEST_AGE.name

ALERTS: tuple[Alert, ...] = (
    Alert(
        runbooks.MARKERS_PENDING,
        f"max by ({CLUSTER}, instance) ({series(OLDEST)})",
        "1m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "Transaction markers pending for {{ $value | humanizeDuration }} on {{ $labels.instance }}",
        "The oldest prepared transaction coordinated by {{ $labels.instance }} (cluster " + THE_CLUSTER + ")"
        " has waited {{ $value | humanizeDuration }} for its commit/abort markers; "
        + _q(f"sum({series(PENDING, SAME)})")
        + " transactions are waiting. Until the markers are written the"
        " last stable offset of their data partitions does not advance: read_committed consumers of those"
        " partitions are stuck. Marker retries: " + _q(f"sum({RETRIES_RATE}{{{SAME}}})", suffix="/s") + ".",
        transactions=f"?state={PREPARES}&min_age=30",
        above=30,
    ),
    Alert(
        "KafkaTransactionMarkerRetriesSustained",
        RETRIES_RATE,
        "10m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "WriteTxnMarkers retried " + RATE_VALUE + " with {{ $labels.error }} on {{ $labels.instance }}",
        "The transaction coordinator on {{ $labels.instance }} (cluster " + THE_CLUSTER + ") has been"
        " retrying transaction markers with {{ $labels.error }} at " + RATE_VALUE + " for 10 minutes."
        " Transactions waiting for markers: "
        + _q(f"sum({series(PENDING, SAME)})")
        + ", the oldest for "
        + _q(f"max({series(OLDEST, SAME)})", "s")
        + ".",
        expected_empty=BROKER_LOG_FAULT,
        transactions=f"?state={PREPARES}",
        above=0.1,
    ),
    Alert(
        runbooks.MARKER_FAILURES,
        f"sum by ({CLUSTER}, instance, error) (increase({series('kafka_transaction_marker_failures_total')}[10m]))",
        "0m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "Transaction markers permanently failed with {{ $labels.error }} on {{ $labels.instance }}",
        "{{ $value | humanize }} partition-level WriteTxnMarkers failures with {{ $labels.error }} in the last"
        " 10 minutes on {{ $labels.instance }} (cluster " + THE_CLUSTER + "): the coordinator gave up"
        " sending those markers (fenced, epoch changed, or an unsupported partition).",
        expected_empty=BROKER_LOG_FAULT,
        transactions=f"?state={PREPARES},HANGING",
        above=0,
    ),
    Alert(
        runbooks.APPEND_ERRORS,
        APPEND_ERRORS_RATE,
        "5m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "__transaction_state appends of {{ $labels.target_state }} failing with {{ $labels.error }} on"
        " {{ $labels.instance }}",
        "For 5 minutes the coordinator on {{ $labels.instance }} (cluster " + THE_CLUSTER + ") has failed to"
        " append {{ $labels.target_state }} transitions to __transaction_state with {{ $labels.error }}, at"
        " " + RATE_VALUE + ". Producers see COORDINATOR_NOT_AVAILABLE/NOT_COORDINATOR and cannot"
        " begin, commit or abort transactions coordinated there.",
        expected_empty=BROKER_LOG_FAULT,
        transactions="",
        above=0,
    ),
    Alert(
        "KafkaTransactionCompleteAppendRetries",
        f"sum by ({CLUSTER}, instance) (rate("
        f"{series('kafka_transaction_state_log_complete_append_retries_total')}[5m]))",
        "10m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "Final COMPLETE_* appends retrying on {{ $labels.instance }}",
        "For 10 minutes the coordinator on {{ $labels.instance }} (cluster " + THE_CLUSTER + ") has been"
        " retrying the final COMPLETE_COMMIT/COMPLETE_ABORT append of transactions whose markers are written"
        " (" + RATE_VALUE + "). Those transactional ids cannot start a new transaction"
        " (CONCURRENT_TRANSACTIONS).",
        expected_empty=BROKER_LOG_FAULT,
        transactions=f"?state={PREPARES}",
        above=0,
    ),
    Alert(
        "KafkaTransactionStateLogAppendLatencyHigh",
        P99_APPEND,
        "10m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "p99 __transaction_state append latency of {{ $labels.target_state }} is {{ $value | humanizeDuration }}"
        " on {{ $labels.instance }}",
        "The 99th percentile of the time from submitting a {{ $labels.target_state }} transition to"
        " __transaction_state to the record being readable has been above 1 s for 10 minutes on"
        " {{ $labels.instance }} (cluster " + THE_CLUSTER + "): {{ $value | humanizeDuration }}. EndTxn and"
        " AddPartitionsToTxn wait for these appends. p99 prepare-to-complete: "
        + _q(f"max({P99_COMPLETION}{{{SAME}}})", "s")
        + ". The slowest appends' transactional ids are the"
        " exemplars of the latency panels.",
        transactions="",
        above=1,
    ),
    Alert(
        "KafkaTransactionStateLoadStuck",
        f"max by ({CLUSTER}, instance) ({series(catalogue.LOAD_OLDEST_AGE.name)})",
        "0m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "A __transaction_state load has run for {{ $value | humanizeDuration }} on {{ $labels.instance }}",
        "The transaction coordinator on {{ $labels.instance }} (cluster " + THE_CLUSTER + ") began loading a"
        " __transaction_state partition {{ $value | humanizeDuration }} ago and has not finished: every"
        " transactional id of that partition gets COORDINATOR_LOAD_IN_PROGRESS, so its producers cannot"
        " begin, commit or abort. Partitions loading: "
        + _q(f"sum({series(catalogue.PARTITIONS_LOADING.name, SAME)})")
        + ". A load that never ends is KAFKA-17941 (Kafka before 3.9.2 and 4.0.0).",
        transactions="",
        above=300,
    ),
    Alert(
        "KafkaTransactionalIdsNearEpochExhaustion",
        f"(sum by ({CLUSTER}, instance) ({series(catalogue.IDS_NEAR_EPOCH_EXHAUSTION.name, TV2)}) > 0) and on"
        f" ({CLUSTER}, instance) (max by ({CLUSTER}, instance)"
        f" ({series(catalogue.BROKER_AFFECTED.name, EPOCH_BUG)}) == 1)",
        "15m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "{{ $value }} transactional ids near the top of the producer epoch on {{ $labels.instance }}, whose"
        " Kafka mishandles it",
        "{{ $value }} transactional ids coordinated by {{ $labels.instance }} (cluster " + THE_CLUSTER + ") run"
        " transaction version 2 within 1,000 of the last producer epoch, 32,767 (the highest: "
        + _q(f"max({series(catalogue.PRODUCER_EPOCH_MAX.name, SAME + ', ' + TV2)})", "exact")
        + "), and the broker's Kafka version ("
        + _q(f"{series(catalogue.BROKER_INFO.name, SAME)}", label="version")
        + ") has KAFKA-20090: a transaction that times out at the top is never aborted and stays ONGOING."
        " A TV2 producer spends an epoch a transaction and is given a new producer id at the top, which"
        " is normal where the bug is fixed (4.3.0).",
        expected_empty="needs transaction version 2 records (KIP-890 clients: Kafka's Java client 4.x) and the"
        " broker's version known",
        transactions="?state=ONGOING",
    ),
    Alert(
        runbooks.LATE,
        f"sum by ({CLUSTER}, instance) ({series('kafka_transactions_late')})",
        "5m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "{{ $value }} transactions outlived their timeout on {{ $labels.instance }}",
        "{{ $value }} open transactions coordinated by {{ $labels.instance }} (cluster " + THE_CLUSTER + ")"
        " are older than their transaction timeout: the coordinator should have aborted them. Data partitions"
        " with late transactions: " + _q(f"sum({series('kafka_partitions_with_late_transactions', SAME)})") + ".",
        transactions="?state=ONGOING",
        above=0,
    ),
    Alert(
        runbooks.HANGING,
        f"sum by ({CLUSTER}, instance) ({series('kafka_hanging_transactions')})",
        "5m",
        "critical",
        TEAM_KAFKA,
        "transactions",
        "{{ $value }} hanging transactions seen by {{ $labels.instance }}",
        "{{ $value }} transactions are open on data partitions while their coordinator no longer has them"
        " ongoing ({{ $labels.instance }}, cluster " + THE_CLUSTER + "). They hold the last stable offset:"
        " read_committed consumers of those partitions make no progress and compaction stops there, until"
        " the transactions are aborted (kafka-transactions.sh --find-hanging / abort).",
        transactions="?state=HANGING",
        above=0,
    ),
    Alert(
        runbooks.KNOWN_BUG,
        f"max by ({CLUSTER}, instance, bug) ({series(catalogue.KNOWN_BUG_MATCHES.name)})",
        "5m",
        "warning",
        TEAM_KAFKA,
        "transactions",
        "{{ $value }} transactions on {{ $labels.instance }} match the known Kafka bug {{ $labels.bug }}",
        "The /transactions diagnosis of {{ $value }} stuck, late or hanging transactions of {{ $labels.instance }}"
        " (cluster " + THE_CLUSTER + ") names {{ $labels.bug }} (https://issues.apache.org/jira/browse/{{"
        " $labels.bug }}): their facts match it on the Kafka version of the broker it lives on, which has no fix,"
        " and no ordinary cause (the ISR below min.insync.replicas, a broker down) explains them. Each row's"
        " diagnosis gives the workaround and the release that fixes it.",
        transactions="",
        above=0,
    ),
    Alert(
        "TxnExporterDown",
        f"up{{{JOB}}} == 0",
        "2m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} is not scraped",
        "Prometheus has failed to scrape kafka-txn-exporter at {{ $labels.instance }} (cluster"
        " " + THE_CLUSTER + ") for 2 minutes: transactions coordinated by that broker are not monitored.",
        dashboard=DRILLDOWN_UID,
    ),
    Alert(
        "TxnExporterSourceDown",
        f"{series('txn_exporter_source_up')} == 0",
        "2m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} cannot read __transaction_state",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster " + THE_CLUSTER + ") has not been able to"
        " read __transaction_state from Kafka for 2 minutes; its transaction metrics are frozen (the oldest"
        " pending-markers age keeps growing).",
        dashboard=DRILLDOWN_UID,
    ),
    Alert(
        "TxnExporterLagging",
        LAG_SUM,
        "10m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} is {{ $value | humanize }} records behind",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster " + THE_CLUSTER + ") has been more than 1000"
        " records behind the high watermark of its __transaction_state partitions for 10 minutes"
        " ({{ $value | humanize }}); its gauges describe the past. Partitions still replaying: "
        + _q(f"sum({series('txn_exporter_partitions_followed', SAME + ', ' + REPLAYING)})")
        + ".",
        dashboard=DRILLDOWN_UID,
        above=1000,
    ),
    Alert(
        "TxnExporterCpuHigh",
        f"sum by ({CLUSTER}, instance) (rate({series('process_cpu_seconds_total')}[5m]))",
        "15m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} uses {{ $value | humanizePercentage }} of a core",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster " + THE_CLUSTER + ") has used more than a"
        " quarter of a CPU core for 15 minutes ({{ $value | humanizePercentage }}); it needs well under 1% idle"
        " and about 5% of its broker's CPU at 200 transactions a second. A sidecar this busy takes CPU from"
        " its broker and falls behind. Consumer lag: "
        + _q(f"sum({series('txn_exporter_partition_consumer_lag_records', SAME)})")
        + " records.",
        dashboard=DRILLDOWN_UID,
        above=0.25,
    ),
    Alert(
        "TxnExporterReplayStuck",
        f"{series('txn_exporter_partitions_followed', REPLAYING)}",
        "15m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} has partitions replaying for 15 minutes",
        "{{ $value }} __transaction_state partitions of kafka-txn-exporter at {{ $labels.instance }} (cluster"
        " " + THE_CLUSTER + ") have not caught up with their history for 15 minutes; until they do their"
        " transactions are not counted live.",
        dashboard=DRILLDOWN_UID,
        above=0,
    ),
    Alert(
        "TxnExporterDecodeErrors",
        f"sum by ({CLUSTER}, instance, reason) "
        f"(increase({series('kafka_transaction_state_log_decode_errors_total')}[10m]))",
        "0m",
        "warning",
        TEAM_OBSERVABILITY,
        "exporter",
        "kafka-txn-exporter {{ $labels.instance }} skipped records it could not decode ({{ $labels.reason }})",
        "kafka-txn-exporter at {{ $labels.instance }} (cluster " + THE_CLUSTER + ") skipped"
        " {{ $value | humanize }} __transaction_state records in 10 minutes ({{ $labels.reason }}): a Kafka"
        " version writing a format it does not know, or corruption. Its transaction counts may be wrong.",
        dashboard=DRILLDOWN_UID,
        expected_empty="counter series appear with the first decode error (a fault)",
        above=0,
    ),
)
