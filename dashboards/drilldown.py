"""The drill-down dashboard: the exporters' metrics by broker (exporter instance) and
__transaction_state partition, the exporter itself, and a last row that graphs every counter and
gauge of the catalogue no other panel of either dashboard queries.
"""

from __future__ import annotations

from dashboards.overview import OVERVIEW
from dashboards.panels import (
    APPEND_ERRORS,
    APPEND_LATENCY,
    BROKER_INFO,
    CLOCK,
    COMPLETE_RETRIES,
    COMPLETION,
    DRAINS,
    DRILLDOWN_UID,
    FOLLOWED,
    KNOWN_BUGS,
    LAG,
    LAST_RECORD,
    LATE,
    MARKER_RETRIES,
    OLDEST,
    OVERVIEW_UID,
    PENDING,
    RATE,
    RECORDS,
    RSS,
    SCRAPE_DURATION,
    SEL,
    SEL_PARTITION,
    TAKEN_OVER,
    TAKEOVER_REPLAY,
    TAKEOVERS_ONLY,
    TRANSACTIONS,
    TRANSITIONS,
    Dashboard,
    Panel,
    Query,
    Row,
    exporter_cpu,
    gauge,
    quantile,
    rate,
)
from exporter.metrics.catalogue import CATALOGUE, MetricType
from queries.metrics import help_of, series

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
        gauge(
            "Transactions matching a known Kafka bug",
            KNOWN_BUGS,
            "Per broker and bug (its JIRA id): the /transactions diagnosis names the bug, its workaround"
            " and the release that fixes it (KafkaTransactionsMatchingKnownBug).",
            by="instance, bug",
            legend="{{instance}} {{bug}}",
            width=12,
        ),
        gauge(
            "Kafka version by broker",
            BROKER_INFO,
            "Per exporter: its broker's Kafka version and how it was learned (log: its startup line;"
            " api_versions: its ApiVersions answer, a range), which the known bugs are matched on.",
            agg="max",
            by="instance, version, source",
            legend="{{instance}} {{version}} ({{source}})",
            width=12,
        ),
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
        Panel(
            "Partitions taken over and drained, by broker",
            (
                Query(f"sum by (instance) (rate({series(TAKEN_OVER, SEL)}[{RATE}]))", "{{instance}} taken over"),
                Query(
                    f"sum by (instance, outcome) (rate({series(DRAINS, SEL)}[{RATE}]))",
                    "{{instance}} drained {{outcome}}",
                ),
            ),
            "Failovers as each exporter saw them: partitions its broker took over, and those it stopped"
            " leading, read to the end of its epochs (a cut drain's last records are counted by no"
            " exporter). Per second.",
            "ops",
            expected_empty=TAKEOVERS_ONLY,
        ),
        Panel(
            "Takeover replay time, mean, by broker",
            (
                Query(
                    f"sum by (instance) (rate({series(TAKEOVER_REPLAY, SEL)}[{RATE}]))"
                    f" / sum by (instance) (rate({series(TAKEN_OVER, SEL)}[{RATE}]))",
                    "{{instance}}",
                ),
            ),
            "How long a partition taken over took to be followed live (its gauges and /transactions rows"
            " wait for it; its records are counted meanwhile). " + help_of(TAKEOVER_REPLAY),
            unit="s",
            expected_empty=TAKEOVERS_ONLY,
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
