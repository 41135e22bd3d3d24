"""The overview dashboard: is anything wrong with Kafka transactions right now? Its rows, from
what the brokers' exporters say now to Kafka's own JMX and the exporters' health; each panel made
of dashboards/panels.py's parts, over the catalogue's metrics (and the brokers' own, BROKER_JMX).
"""

from __future__ import annotations

from dashboards.panels import (
    APPEND_ERRORS,
    APPEND_LATENCY,
    APPEND_QUANTILE,
    BROKER_LOG_ONLY,
    COMPLETE_RETRIES,
    COMPLETION,
    DECODE_ERRORS,
    DRILLDOWN_UID,
    DURATION,
    EPOCH_MAX,
    FOLLOWED,
    HANGING,
    HANGING_SCAN_ERRORS,
    HTTP_REJECTED,
    JMX_ONLY,
    JMX_SEL,
    LAG,
    LATE,
    LATE_PARTITIONS,
    LOAD_AGE,
    LOAD_DURATION,
    LOADING,
    LOG_LINES,
    LOG_ROTATIONS,
    LOG_SKIPPED,
    LOG_TRUNCATED,
    MARKER_FAILURES,
    MARKER_RETRIES,
    NEAR_EXHAUSTION,
    NO_LOADS,
    OLDEST,
    OVERVIEW_UID,
    P99,
    PENDING,
    RATE,
    RECORDS,
    RELOADS,
    ROTATIONS,
    SEL,
    SOURCE_UP,
    STUCK,
    TIMEOUTS,
    TOMBSTONES,
    TRANSACTIONS,
    Dashboard,
    Panel,
    Query,
    Row,
    exporter_cpu,
    gauge,
    quantile,
    rate,
)
from queries.metrics import help_of, ref, series

NOW_ROW = Row(
    "Is anything wrong with transactions right now?",
    (
        gauge(
            "Transactions waiting for markers",
            PENDING,
            "Now, all selected brokers. More than a few for long means markers are not being written.",
            kind="stat",
            width=4,
            height=5,
            thresholds=((1, "orange"), (10, "red")),
        ),
        gauge(
            "Oldest pending markers",
            OLDEST,
            "Now, the oldest across the selected brokers. Tens of seconds: a data partition cannot take markers"
            " (read_committed consumers of it are stuck).",
            agg="max",
            kind="stat",
            width=4,
            height=5,
            thresholds=((5, "orange"), (30, "red")),
        ),
        rate(
            "Append errors",
            APPEND_ERRORS,
            "__transaction_state append failures, all target states.",
            kind="stat",
            width=4,
            height=5,
            thresholds=((0.001, "red"),),
        ),
        rate(
            "Marker retries",
            MARKER_RETRIES,
            "WriteTxnMarkers retries, all errors.",
            kind="stat",
            width=4,
            height=5,
            thresholds=((0.001, "orange"), (1, "red")),
        ),
        gauge(
            "Late transactions",
            LATE,
            "Now, all selected brokers.",
            kind="stat",
            width=4,
            height=5,
            thresholds=((1, "red"),),
        ),
        gauge(
            "Hanging transactions",
            HANGING,
            "Now, all selected brokers.",
            kind="stat",
            width=4,
            height=5,
            thresholds=((1, "red"),),
        ),
        gauge(
            "Transactions with pending markers, by broker",
            PENDING,
            "By broker (exporter instance).",
            by="instance",
            width=8,
        ),
        gauge(
            "Oldest pending markers age, by broker",
            OLDEST,
            "By broker (exporter instance).",
            agg="max",
            by="instance",
            width=8,
            thresholds=((30, "red"),),
        ),
        quantile(
            "p99 append latency by target state",
            APPEND_LATENCY,
            "99th percentile over the rate interval, from the histogram, all selected brokers.",
            by="target_state",
            width=8,
        ),
        rate(
            "Append errors by target state and error",
            APPEND_ERRORS,
            "__transaction_state append failures.",
            by="target_state, error",
            width=8,
        ),
        rate(
            "Marker retries by error",
            MARKER_RETRIES,
            "WriteTxnMarkers retries by Kafka error name.",
            by="error",
            width=8,
        ),
        rate(
            "Marker failures by error",
            MARKER_FAILURES,
            "WriteTxnMarkers permanent failures by Kafka error.",
            by="error",
            width=8,
        ),
    ),
)

APPENDS_ROW = Row(
    "__transaction_state appends and markers",
    (
        gauge(
            "Exact p99 append latency (exporter window)",
            APPEND_QUANTILE,
            "p99 by target state as the exporter's HdrHistogram computes it over its sliding window.",
            agg="max",
            by="target_state",
            sel=SEL + P99,
            width=8,
        ),
        rate(
            "State transitions by target state",
            RECORDS,
            "__transaction_state records read live.",
            by="target_state",
            width=8,
            stacked=True,
        ),
        quantile(
            "p99 prepare-to-complete by result",
            COMPLETION,
            "99th percentile of marker fan-out plus the final append, by result.",
            by="result",
            width=8,
        ),
        rate(
            "Final COMPLETE_* append retries",
            COMPLETE_RETRIES,
            "Retries of the final append after the markers were written.",
            width=8,
        ),
        gauge(
            "Transactional ids by state",
            TRANSACTIONS,
            "Current state of every transactional id.",
            by="state",
            width=8,
            stacked=True,
        ),
        rate("Expired transactional ids", TOMBSTONES, "Tombstones: ids the coordinator expired.", width=8),
    ),
)

HANGING_ROW = Row(
    "Late and hanging transactions",
    (
        Panel(
            "Late ONGOING and stuck PREPARE_* transactions by broker",
            (
                Query(f"sum by (instance) ({series(LATE, SEL)})", "late {{instance}}"),
                Query(f"sum by (instance) ({series(STUCK, SEL)})", "stuck {{instance}}"),
            ),
            f"By broker (exporter instance). Late: {help_of(LATE)} Stuck: {help_of(STUCK)}",
            width=8,
        ),
        gauge("Hanging transactions by broker", HANGING, "By broker (exporter instance).", by="instance", width=8),
        gauge(
            "Partitions with late transactions",
            LATE_PARTITIONS,
            "By broker (exporter instance).",
            by="instance",
            width=8,
        ),
        rate("Coordinator timeouts", TIMEOUTS, "Transactions aborted on timeout.", by="instance", width=8),
        quantile(
            "p99 transaction duration by result",
            DURATION,
            "99th percentile, all selected brokers.",
            by="result",
            width=8,
        ),
        rate("Producer id rotations", ROTATIONS, "Producer id rotations.", by="instance", width=8),
    ),
)

COORDINATOR_ROW = Row(
    "Coordinator health",
    (
        gauge(
            "__transaction_state partitions loading",
            LOADING,
            "By broker (exporter instance).",
            by="instance",
            width=6,
        ),
        gauge(
            "Oldest load still running",
            LOAD_AGE,
            "By broker (exporter instance). Over 5 minutes: KafkaTransactionStateLoadStuck.",
            agg="max",
            by="instance",
            width=6,
            thresholds=((60, "orange"), (300, "red")),
        ),
        Panel(
            "Partition loads, by broker",
            (
                Query(f"sum by (instance) (rate({series(LOAD_DURATION + '_count', SEL)}[{RATE}]))", "{{instance}}"),
                Query(
                    f"sum by (instance) (rate({series(RELOADS, SEL)}[{RATE}]))",
                    "without a leadership change {{instance}}",
                ),
            ),
            "Per second, by broker (exporter instance): every finished load, and the loads without a"
            f" leadership change. {help_of(RELOADS)}",
            unit="ops",
            width=6,
        ),
        Panel(
            "p99 partition load time",
            (
                Query(
                    f"histogram_quantile(0.99, sum by (instance, le) (rate({series(LOAD_DURATION + '_bucket', SEL)}"
                    f"[{RATE}])))",
                    "{{instance}}",
                ),
            ),
            f"99th percentile over the rate interval, by broker (exporter instance). {help_of(LOAD_DURATION)}",
            unit="s",
            expected_empty=NO_LOADS,
            width=6,
        ),
        gauge(
            "Transactional ids near producer-epoch exhaustion",
            NEAR_EXHAUSTION,
            "Now, by transaction version, all selected brokers.",
            by="transaction_version",
            width=12,
        ),
        gauge(
            "Highest producer epoch",
            EPOCH_MAX,
            "By transaction version, the highest across the selected brokers.",
            agg="max",
            by="transaction_version",
            width=12,
            thresholds=((31767, "orange"), (32766, "red")),
        ),
    ),
)

# The brokers' own (queries.metrics.BROKER_JMX).
JMX_LATE_PARTITIONS = "kafka_server_replicamanager_partitionswithlatetransactionscount"
JMX_RETRY_QUEUE = "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize"
JMX_UNKNOWN_DESTINATION = "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
JMX_VERIFICATION_FAILURES = "kafka_server_addpartitionstotxnmanager_verificationfailurerate_count"
JMX_VERIFICATION_TIME = "kafka_server_addpartitionstotxnmanager_verificationtimems"

JMX_ROW = Row(
    "Kafka's own transaction metrics (broker JMX, if scraped)",
    (
        Panel(
            "Partitions with late transactions (broker)",
            (Query(f"sum by (instance) ({series(JMX_LATE_PARTITIONS, JMX_SEL)})", "{{instance}}"),),
            "Kafka's ReplicaManager PartitionsWithLateTransactionsCount, per broker JMX target: partitions with"
            " an open transaction older than transaction.max.timeout.ms + 5 min. Beside our late/hanging"
            " panels. Empty when the brokers' JMX is not scraped.",
            expected_empty=JMX_ONLY,
            width=8,
        ),
        Panel(
            "Final append retry queue vs ours",
            (Query(f"sum by (instance) ({series(JMX_RETRY_QUEUE, JMX_SEL)})", "broker {{instance}}"),),
            "Kafka's TransactionMarkerChannelManager LogAppendRetryQueueSize (needs jmx_exporter's"
            " kafka.coordinator rule; Strimzi's default rules do not export it). Compare with 'Final COMPLETE_*"
            " append retries'. Empty when the brokers' JMX is not scraped.",
            expected_empty=JMX_ONLY,
            width=8,
        ),
        Panel(
            "Markers waiting for an unknown leader",
            (Query(f"sum by (instance) ({series(JMX_UNKNOWN_DESTINATION, JMX_SEL)})", "{{instance}}"),),
            "Kafka's TransactionMarkerChannelManager UnknownDestinationQueueSize: markers whose data partition"
            " has no known leader. Empty when the brokers' JMX is not scraped.",
            expected_empty=JMX_ONLY,
            width=8,
        ),
        Panel(
            "Transaction verification failures (KIP-890)",
            (
                Query(
                    f'sum by (instance) (rate({{__name__=~"{ref(JMX_VERIFICATION_FAILURES)}(_total)?", {JMX_SEL}}}'
                    f"[{RATE}]))",
                    "{{instance}}",
                ),
            ),
            "Kafka's AddPartitionsToTxnManager VerificationFailureRate, per second: produce requests to a"
            " partition the transaction did not add (3.6+). Empty when the brokers' JMX is not scraped.",
            unit="ops",
            expected_empty=JMX_ONLY,
            width=12,
        ),
        Panel(
            "Transaction verification time p99 (KIP-890)",
            (Query(f"max by (instance) ({series(JMX_VERIFICATION_TIME, JMX_SEL + P99)})", "{{instance}}"),),
            "Kafka's AddPartitionsToTxnManager VerificationTimeMs 99th percentile (Yammer, ms). Empty when the"
            " brokers' JMX is not scraped.",
            unit="ms",
            expected_empty=JMX_ONLY,
            width=12,
        ),
    ),
    collapsed=False,
)

EXPORTER_ROW = Row(
    "Exporter health",
    (
        gauge("Source up", SOURCE_UP, "Per exporter.", agg="min", by="instance", width=6),
        gauge("Partitions followed by phase", FOLLOWED, "All selected exporters.", by="phase", width=6, stacked=True),
        gauge("Consumer lag (records)", LAG, "Sum over partitions, per exporter.", by="instance", width=6),
        rate("Decode errors by reason", DECODE_ERRORS, "Records skipped.", by="reason", width=6),
        exporter_cpu(width=8),
        rate(
            "Hanging-transaction scan failures",
            HANGING_SCAN_ERRORS,
            "Failed DescribeProducers/ListTransactions/DescribeTransactions rounds, per exporter.",
            by="instance",
            width=8,
        ),
        rate(
            "HTTP connections shed",
            HTTP_REJECTED,
            "Connections closed to stay within the HTTP server's limit, per exporter: a flood of idle or slow"
            " clients (or too many scrapers) on the metrics port.",
            by="instance",
            width=8,
        ),
        rate(
            "Broker log lines read",
            LOG_LINES,
            "Lines of the broker's server.log read (--broker-log).",
            by="instance",
            width=8,
            expected_empty=BROKER_LOG_ONLY,
        ),
        rate(
            "Broker log lines skipped by reason",
            LOG_SKIPPED,
            "Lines not understood (--broker-log).",
            by="instance, reason",
            width=8,
            expected_empty=BROKER_LOG_ONLY,
        ),
        Panel(
            "Broker log truncations and rotations",
            (
                Query(
                    f"sum by (instance) (increase({series(LOG_TRUNCATED, SEL)}[$__range]))", "truncated {{instance}}"
                ),
                Query(
                    f"sum by (instance) (increase({series(LOG_ROTATIONS, SEL)}[$__range]))", "rotations {{instance}}"
                ),
            ),
            "Over the dashboard's time range, per exporter: " + help_of(LOG_TRUNCATED) + " / " + help_of(LOG_ROTATIONS),
            width=8,
            expected_empty=BROKER_LOG_ONLY,
        ),
    ),
)

OVERVIEW = Dashboard(
    OVERVIEW_UID,
    "Kafka transactions: overview",
    "Is anything wrong with Kafka transactions right now? From kafka-txn-exporter (one per broker).",
    (NOW_ROW, APPENDS_ROW, HANGING_ROW, COORDINATOR_ROW, JMX_ROW, EXPORTER_ROW),
    links_to=((DRILLDOWN_UID, "Drill down by broker and partition"),),
)
