"""The Grafana dashboards, built from the metric catalogue (grafana-foundation-sdk, pinned): step 1
of `make generate` (generate/__init__.py), which writes mixin/dashboards/*.json, the one copy that
Grafana users, kustomize (deploy/monitoring) and the mixin read.

Every panel is a `Panel` below: its queries name metrics through `queries.metrics.series`/`ref`
(catalogue or BROKER_JMX only) and the cluster label as `CLUSTER` (queries.placeholders: the
mixin's `_config` sets both), its unit and description come from the catalogue unless given.
`expected_empty` says why a panel may show no data on a healthy cluster (the end-to-end test,
tests/dashboards/test_end_to_end.py, asserts every other panel returns data).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from grafana_foundation_sdk.builders import common as common_b
from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.builders import prometheus as prom_b
from grafana_foundation_sdk.builders import stat as stat_b
from grafana_foundation_sdk.builders import timeseries as ts_b
from grafana_foundation_sdk.cog import builder as cogbuilder
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as common_m
from grafana_foundation_sdk.models import dashboard as dash_m

from exporter.metrics import catalogue
from exporter.metrics.catalogue import CATALOGUE, MetricType
from queries.metrics import grafana_unit, help_of, ref, series
from queries.placeholders import CLUSTER, expand, expand_all

OUT_DIR = Path(__file__).resolve().parents[1] / "mixin" / "dashboards"
OWNED = ("mixin/dashboards/*.json",)  # every JSON there is a generated dashboard
OVERVIEW_UID = "kafka-txn-overview"
DRILLDOWN_UID = "kafka-txn-drilldown"
TAGS = ["kafka", "transactions", "kafka-txn-exporter"]

# Label filters of every exporter query; JMX queries filter on the cluster only (other targets).
CLUSTER_SEL = f'{CLUSTER}=~"$cluster"'
SEL = CLUSTER_SEL + ', instance=~"$instance"'
SEL_PARTITION = SEL + ', partition=~"$partition"'
JMX_SEL = CLUSTER_SEL
RATE = "$__rate_interval"
P99 = ', quantile="0.99"'

# Reasons a panel may be empty on a healthy cluster with the exporter as the test runs it.
FAULT_ONLY = "counter series exist only after the first such event (a fault)"
BROKER_LOG_FAULT = "with --broker-log only, and " + FAULT_ONLY
BROKER_LOG_ONLY = "with --broker-log only (the exporter follows the broker's server.log)"
JMX_ONLY = "broker JMX metrics: only where the brokers' jmx_exporter is scraped too"


@dataclass(frozen=True)
class Query:
    template: str  # PromQL with placeholders (queries.placeholders)
    legend: str = ""

    @property
    def expr(self) -> str:
        """The PromQL of the committed dashboards (the default `_config`)."""
        return expand(self.template)


@dataclass(frozen=True)
class Panel:
    title: str
    queries: tuple[Query, ...]
    description: str
    unit: str = "short"
    kind: str = "timeseries"  # or "stat"
    expected_empty: str | None = None
    width: int = 12
    height: int = 8
    thresholds: tuple[tuple[float, str], ...] = ()
    stacked: bool = False
    exemplars: bool = False  # ask Prometheus for the exemplars of the query's histogram buckets too


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]
    collapsed: bool = False


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    rows: tuple[Row, ...]
    variables: tuple[str, ...] = ("cluster", "instance")
    links_to: tuple[tuple[str, str], ...] = field(default=())

    def panels(self) -> Iterator[Panel]:
        for row in self.rows:
            yield from row.panels


# -- panel helpers -------------------------------------------------------------------------------


def _empty_reason(name: str, fault_only: bool = False) -> str | None:
    """Why a query over this metric may be empty on a healthy cluster."""
    if fault_only:
        return FAULT_ONLY if name == DECODE_ERRORS else BROKER_LOG_FAULT
    return None


def _describe(name: str, what: str) -> str:
    return f"{what} {help_of(name)}"


def gauge(
    title: str,
    name: str,
    what: str,
    *,
    agg: str = "sum",
    by: str = "",
    sel: str = SEL,
    kind: str = "timeseries",
    legend: str = "",
    **kw,
) -> Panel:
    by_clause = f" by ({by})" if by else ""
    expr = f"{agg}{by_clause} ({series(name, sel)})"
    kw.setdefault("expected_empty", _empty_reason(name))
    return Panel(title, (Query(expr, legend or _legend(by)),), _describe(name, what), grafana_unit(name), kind, **kw)


def rate(
    title: str,
    name: str,
    what: str,
    *,
    by: str = "",
    sel: str = SEL,
    kind: str = "timeseries",
    legend: str = "",
    fault_only: bool | None = None,
    **kw,
) -> Panel:
    if fault_only is None:
        fault_only = name in FAULT_COUNTERS
    by_clause = f" by ({by})" if by else ""
    expr = f"sum{by_clause} (rate({series(name, sel)}[{RATE}]))"
    kw.setdefault("expected_empty", _empty_reason(name, fault_only=fault_only))
    return Panel(
        title, (Query(expr, legend or _legend(by)),), _describe(name, what + " Per second."), "ops", kind, **kw
    )


# On a panel of the exporter's histograms: what the exemplar dots are (exporter.metrics.latency).
EXEMPLARS_NOTE = (
    " Dots: exemplars, each bucket's slowest observation of the exporter's latency window"
    " (--latency-window-seconds, 5 minutes by default), labelled with its transactional_id and producer_id"
    " (needs Prometheus' exemplar storage)."
)


def quantile(
    title: str,
    histogram: str,
    what: str,
    *,
    by: str,
    q: float = 0.99,
    sel: str = SEL,
    kind: str = "timeseries",
    legend: str = "",
    outer: str = "",
    **kw,
) -> Panel:
    inner = f"histogram_quantile({q}, sum by ({by}, le) (rate({series(histogram + '_bucket', sel)}[{RATE}])))"
    expr = f"{outer}({inner})" if outer else inner
    kw.setdefault("expected_empty", _empty_reason(histogram))
    return Panel(
        title,
        (Query(expr, legend or _legend(by)),),
        _describe(histogram, what) + EXEMPLARS_NOTE,
        grafana_unit(histogram),
        kind,
        exemplars=True,
        **kw,
    )


def exporter_cpu(width: int) -> Panel:
    """The exporter's own CPU, per exporter, as a share of one core."""
    return Panel(
        "Exporter CPU (share of a core)",
        (Query(f"sum by (instance) (rate({series(CPU, SEL)}[{RATE}]))", "{{instance}}"),),
        "The exporter process's own CPU, per exporter, in cores (100% is one core), from its"
        " process_cpu_seconds_total on the exporter's job (a broker's JMX agent exports the same name)."
        " Idle it takes well under 1%; TxnExporterCpuHigh fires above 25% for 15 minutes.",
        "percentunit",
        width=width,
    )


def _legend(by: str) -> str:
    labels = [label.strip() for label in by.split(",") if label.strip()]
    return " ".join("{{" + label + "}}" for label in labels) if labels else "__auto"


# -- the overview --------------------------------------------------------------------------------

# Metric names, from the catalogue (one definition: a renamed metric renames its panels).
PENDING = catalogue.PENDING_MARKERS.name
OLDEST = catalogue.PENDING_MARKERS_OLDEST_AGE.name
APPEND_ERRORS = catalogue.APPEND_ERRORS.name
MARKER_RETRIES = catalogue.MARKER_RETRIES.name
MARKER_FAILURES = catalogue.MARKER_FAILURES.name
COMPLETE_RETRIES = catalogue.COMPLETE_APPEND_RETRIES.name
APPEND_LATENCY = catalogue.APPEND_LATENCY.name
APPEND_QUANTILE = catalogue.APPEND_LATENCY_QUANTILE.name
COMPLETION = catalogue.MARKER_COMPLETION.name
RECORDS = catalogue.RECORDS.name
TRANSACTIONS = catalogue.TRANSACTIONS.name
LATE = catalogue.TRANSACTIONS_LATE.name
STUCK = catalogue.TRANSACTIONS_STUCK_IN_PREPARE.name
HANGING = catalogue.HANGING_TRANSACTIONS.name
LATE_PARTITIONS = catalogue.PARTITIONS_WITH_LATE_TRANSACTIONS.name
TIMEOUTS = catalogue.TIMEOUTS.name
DURATION = catalogue.TRANSACTION_DURATION.name
ROTATIONS = catalogue.PRODUCER_ID_ROTATIONS.name
DECODE_ERRORS = catalogue.DECODE_ERRORS.name
TOMBSTONES = catalogue.TOMBSTONES.name
SOURCE_UP = catalogue.SOURCE_UP.name
FOLLOWED = catalogue.PARTITIONS_FOLLOWED.name
LAG = catalogue.PARTITION_CONSUMER_LAG.name
LAST_RECORD = catalogue.PARTITION_LAST_RECORD_TIMESTAMP.name
BUILD_INFO = catalogue.BUILD_INFO.name
LOG_LINES = catalogue.BROKER_LOG_LINES.name
LOG_SKIPPED = catalogue.BROKER_LOG_SKIPPED_LINES.name
LOG_TRUNCATED = catalogue.BROKER_LOG_TRUNCATED_LINES.name
LOG_ROTATIONS = catalogue.BROKER_LOG_ROTATIONS.name
HANGING_SCAN_ERRORS = catalogue.HANGING_SCAN_ERRORS.name
HTTP_REJECTED = catalogue.HTTP_REJECTED_CONNECTIONS.name
CLOCK = catalogue.APPEND_LATENCY_CLOCK.name
TRANSITIONS = catalogue.APPEND_LATENCY_TRANSITIONS.name
# The exporter's own process (queries.metrics.PROCESS: series() selects them by the exporter's job).
CPU = "process_cpu_seconds_total"
RSS = "process_resident_memory_bytes"
SCRAPE_DURATION = "scrape_duration_seconds"
# Counters whose series appear with their first event (labelled by error/reason, or --broker-log).
FAULT_COUNTERS = frozenset({APPEND_ERRORS, MARKER_RETRIES, MARKER_FAILURES, COMPLETE_RETRIES, DECODE_ERRORS})

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
    (NOW_ROW, APPENDS_ROW, HANGING_ROW, JMX_ROW, EXPORTER_ROW),
    links_to=((DRILLDOWN_UID, "Drill down by broker and partition"),),
)

# -- the drill-down ------------------------------------------------------------------------------

BROKER_ROW = Row(
    "By broker ($instance)",
    (
        gauge("Pending markers", PENDING, "Per broker.", by="instance", width=8),
        gauge("Oldest pending markers age", OLDEST, "Per broker.", agg="max", by="instance", width=8),
        quantile(
            "p99 append latency by broker and target state",
            APPEND_LATENCY,
            "99th percentile per broker.",
            by="instance, target_state",
            width=8,
        ),
        rate(
            "Append errors by broker",
            APPEND_ERRORS,
            "Per broker, target state and error.",
            by="instance, target_state, error",
            width=8,
        ),
        rate("Marker retries by broker", MARKER_RETRIES, "Per broker and error.", by="instance, error", width=8),
        rate("Complete append retries by broker", COMPLETE_RETRIES, "Per broker.", by="instance", width=8),
        rate(
            "State transitions by broker", RECORDS, "Per broker and target state.", by="instance, target_state", width=8
        ),
        quantile(
            "p99 prepare-to-complete by broker",
            COMPLETION,
            "99th percentile per broker and result.",
            by="instance, result",
            width=8,
        ),
        gauge("Late transactions by broker", LATE, "Per broker.", by="instance", width=8),
    ),
)

PARTITION_ROW = Row(
    "By __transaction_state partition ($partition)",
    (
        gauge(
            "Consumer lag by partition",
            LAG,
            "Per partition of __transaction_state the exporters follow.",
            by="instance, partition",
            sel=SEL_PARTITION,
            width=12,
        ),
        Panel(
            "Time since the last record, by partition",
            (
                Query(
                    f"max by (instance, partition) (time() - {series(LAST_RECORD, SEL_PARTITION)})",
                    "{{instance}} p{{partition}}",
                ),
            ),
            "Seconds since the timestamp of the last record the exporter read from each partition. Grows on"
            " idle partitions too; compare with the consumer lag: lag > 0 and growing age means the exporter is"
            " stuck. " + help_of(LAST_RECORD),
            unit="s",
            width=12,
        ),
        gauge(
            "Partitions followed by broker and phase",
            FOLLOWED,
            "Per exporter and phase.",
            by="instance, phase",
            width=12,
        ),
        gauge(
            "Transactional ids by broker and state",
            TRANSACTIONS,
            "Per exporter and state.",
            by="instance, state",
            width=12,
        ),
    ),
)


ITSELF_ROW = Row(
    "The exporter itself ($instance)",
    (
        exporter_cpu(width=6),
        gauge(
            "Exporter memory (RSS)",
            RSS,
            "Per exporter, from its process_resident_memory_bytes on the exporter's job (60-90 MiB is usual,"
            " flat whatever the backlog).",
            by="instance",
            width=6,
        ),
        gauge(
            "Scrape duration",
            SCRAPE_DURATION,
            "Per exporter, as Prometheus times its scrapes of /metrics (the exporter renders its model at each):"
            " near the scrape timeout, samples go missing.",
            agg="max",
            by="instance",
            width=6,
        ),
        gauge(
            "Source lag (records)",
            LAG,
            "Per exporter, over its __transaction_state partitions: how far its reading is behind the"
            " partitions' high watermarks (TxnExporterLagging above 1000 for 10 minutes).",
            by="instance",
            width=6,
        ),
        gauge(
            "Which clock times the appends",
            CLOCK,
            "Per exporter: coordinator (its DEBUG `succeeded` lines in the broker log: the append latency"
            " exact to the ms) or fetch (the exporter's receipt: an upper bound, looser by the resolution)."
            " Fetch with --broker-log means the lines stopped (the logger not at DEBUG, the file unreadable).",
            agg="max",
            by="instance, clock",
            legend="{{instance}} {{clock}}",
            width=12,
        ),
        rate(
            "Transitions by the clock that timed them",
            TRANSITIONS,
            "Live __transaction_state records a second, by clock: coordinator, fetch, or untimed (the"
            " coordinator's clock in force and the record's line not read within 10 s).",
            by="clock",
            legend="{{clock}}",
            width=12,
            fault_only=False,
        ),
    ),
)


def _graphed(rows: tuple[Row, ...]) -> str:
    return "\n".join(query.template for row in rows for panel in row.panels for query in panel.queries)


def other_metrics_row(rows: tuple[Row, ...]) -> Row:
    """A panel for each counter and gauge of the catalogue that no panel of `rows` queries, so a new
    metric is on a dashboard as soon as it is in the catalogue (a panel of its own can come later)."""
    graphed = _graphed(rows)
    panels = []
    for spec in CATALOGUE:
        if spec.name in graphed or spec.type not in (MetricType.COUNTER, MetricType.GAUGE):
            continue
        by = ", ".join(("instance", *spec.labels))
        title = spec.family_name.replace("_", " ")
        empty = "a metric without a panel of its own: may be empty on a healthy cluster"
        make = rate if spec.type is MetricType.COUNTER else gauge
        panels.append(make(title, spec.name, "Per broker.", by=by, width=8, expected_empty=empty))
    return Row("Other metrics (each one the dashboards graph nowhere else)", tuple(panels), collapsed=True)


DRILLDOWN_ROWS = (BROKER_ROW, PARTITION_ROW, ITSELF_ROW)
DRILLDOWN = Dashboard(
    DRILLDOWN_UID,
    "Kafka transactions: by broker and partition",
    "Drill-down of kafka-txn-exporter's metrics by broker (exporter instance) and __transaction_state partition.",
    (*DRILLDOWN_ROWS, other_metrics_row((*OVERVIEW.rows, *DRILLDOWN_ROWS))),
    variables=("cluster", "instance", "partition"),
    links_to=((OVERVIEW_UID, "Overview"),),
)

DASHBOARDS = (OVERVIEW, DRILLDOWN)

# -- rendering with the SDK ----------------------------------------------------------------------

DATASOURCE = dash_m.DataSourceRef(type_val="prometheus", uid="${datasource}")


def _variables(names: tuple[str, ...]) -> list[cogbuilder.Builder[dash_m.VariableModel]]:
    out: list[cogbuilder.Builder[dash_m.VariableModel]] = [
        dash_b.DatasourceVariable("datasource").label("Data source").type("prometheus")
    ]
    queries = {
        "cluster": f"label_values({series(BUILD_INFO)}, {CLUSTER})",
        "instance": f"label_values({series(BUILD_INFO, CLUSTER_SEL)}, instance)",
        "partition": f"label_values({series(LAG, SEL)}, partition)",
    }
    labels = {"cluster": "Cluster", "instance": "Broker (exporter)", "partition": "Partition"}
    for name in names:
        out.append(  # noqa: PERF401 (a builder chain per variable)
            dash_b.QueryVariable(name)
            .label(labels[name])
            .datasource(DATASOURCE)
            .query({"query": queries[name], "refId": f"{name}-variable", "qryType": 1})
            .refresh(dash_m.VariableRefresh.ON_TIME_RANGE_CHANGED)
            .sort(
                dash_m.VariableSort.NATURAL_ASC
                if hasattr(dash_m.VariableSort, "NATURAL_ASC")
                else dash_m.VariableSort.ALPHABETICAL_ASC
            )
            .multi(True)
            .include_all(True)
            .all_value(".*")
            .current(dash_m.VariableOption(selected=True, text="All", value="$__all"))
        )
    return out


def _thresholds(steps: tuple[tuple[float, str], ...]) -> dash_b.ThresholdsConfig:
    return (
        dash_b.ThresholdsConfig()
        .mode(dash_m.ThresholdsMode.ABSOLUTE)
        .steps([dash_m.Threshold(value=None, color="green"), *(dash_m.Threshold(value=v, color=c) for v, c in steps)])
    )


def _panel(spec: Panel, panel_id: int) -> stat_b.Panel | ts_b.Panel:
    builder: stat_b.Panel | ts_b.Panel
    if spec.kind == "stat":
        builder = (
            stat_b.Panel()
            .graph_mode(common_m.BigValueGraphMode.AREA)
            .color_mode(common_m.BigValueColorMode.BACKGROUND)
            .reduce_options(common_b.ReduceDataOptions().calcs(["lastNotNull"]).values(False))
        )
    else:
        timeseries = (
            ts_b.Panel()
            .line_width(1)
            .fill_opacity(10 if not spec.stacked else 60)
            .legend(
                common_b.VizLegendOptions()
                .display_mode(common_m.LegendDisplayMode.LIST)
                .placement(common_m.LegendPlacement.BOTTOM)
                .show_legend(True)
            )
            .tooltip(
                common_b.VizTooltipOptions().mode(common_m.TooltipDisplayMode.MULTI).sort(common_m.SortOrder.DESCENDING)
            )
        )
        if spec.stacked:
            timeseries = timeseries.stacking(common_b.StackingConfig().mode(common_m.StackingMode.NORMAL))
        builder = timeseries
    builder = (
        builder.id(panel_id)
        .title(spec.title)
        .description(spec.description)
        .datasource(DATASOURCE)
        .unit(spec.unit)
        .span(spec.width)
        .height(spec.height)
        .no_value("No data")
    )
    if spec.thresholds:
        builder = builder.thresholds(_thresholds(spec.thresholds))
    for i, query in enumerate(spec.queries):
        target = (
            prom_b.Dataquery()
            .expr(query.template)
            .legend_format(query.legend)
            .ref_id(chr(ord("A") + i))
            .datasource(DATASOURCE)
            .range()
        )
        builder = builder.with_target(target.exemplar(True) if spec.exemplars else target)
    return builder


def build(spec: Dashboard) -> dict:
    """The dashboard's JSON, its queries with the placeholders (the mixin's templates)."""
    builder = (
        dash_b.Dashboard(spec.title)
        .uid(spec.uid)
        .description(spec.description)
        .tags(TAGS)
        .editable()
        .tooltip(dash_m.DashboardCursorSync.CROSSHAIR)
        .time("now-1h", "now")
        .refresh("30s")
        .timezone("browser")
        .variables(_variables(spec.variables))
    )
    for uid, title in spec.links_to:
        builder = builder.link(
            dash_b.DashboardLink(title)
            .type(dash_m.DashboardLinkType.LINK)
            .url(f"/d/{uid}")
            .include_vars(True)
            .keep_time(True)
            .icon("dashboard")
        )
    panel_id = 1
    for row in spec.rows:
        row_builder = dash_b.Row(row.title).id(panel_id).collapsed(row.collapsed)
        panel_id += 1
        builder = builder.with_row(row_builder)
        for panel in row.panels:
            builder = builder.with_panel(_panel(panel, panel_id))
            panel_id += 1
    return json.loads(json.dumps(builder.build(), cls=JSONEncoder))


def render(spec: Dashboard) -> str:
    """The committed JSON: the default `_config`."""
    return json.dumps(expand_all(build(spec)), indent=2, sort_keys=True) + "\n"


def path_of(spec: Dashboard) -> Path:
    return OUT_DIR / f"{spec.uid}.json"


def outputs() -> dict[Path, str]:
    return {path_of(spec): render(spec) for spec in DASHBOARDS}
