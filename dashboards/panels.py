"""The dashboards' panels as data, and what builds them: `Query`, `Panel`, `Row` and `Dashboard`;
`gauge`, `rate` and `quantile`, which make a panel from a metric's name; the metric names the
panels graph, the label filters their queries share, and why a panel may be empty. The two
dashboards are built of these (dashboards/overview.py, dashboards/drilldown.py) and rendered to
Grafana's JSON by dashboards/generate.py.

Every panel's queries name metrics through `queries.metrics.series`/`ref` (catalogue or BROKER_JMX
only) and the cluster label as `CLUSTER` (queries.placeholders: the mixin's `_config` sets both),
its unit and description come from the catalogue unless given. `expected_empty` says why a panel
may show no data on a healthy cluster (the end-to-end test, tests/dashboards/test_end_to_end.py,
asserts every other panel returns data).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from exporter.metrics import catalogue
from queries.metrics import grafana_unit, help_of, series
from queries.placeholders import CLUSTER, expand

# The dashboards' uids: their files' names, and their links to each other and from the alerts.
OVERVIEW_UID = "kafka-txn-overview"
DRILLDOWN_UID = "kafka-txn-drilldown"

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
TAKEOVERS_ONLY = "a partition moving between brokers while the exporters run (a failover, an election)"
JMX_ONLY = "broker JMX metrics: only where the brokers' jmx_exporter is scraped too"
NO_LOADS = "a coordinator loads a partition when elected its leader: a quiet cluster has no load in the window"

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
TAKEN_OVER = catalogue.PARTITIONS_TAKEN_OVER.name
TAKEOVER_REPLAY = catalogue.TAKEOVER_REPLAY.name
DRAINS = catalogue.PARTITION_DRAINS.name
LAST_RECORD = catalogue.PARTITION_LAST_RECORD_TIMESTAMP.name
BUILD_INFO = catalogue.BUILD_INFO.name
BROKER_INFO = catalogue.BROKER_INFO.name
KNOWN_BUGS = catalogue.KNOWN_BUG_MATCHES.name
LOG_LINES = catalogue.BROKER_LOG_LINES.name
LOG_SKIPPED = catalogue.BROKER_LOG_SKIPPED_LINES.name
LOG_TRUNCATED = catalogue.BROKER_LOG_TRUNCATED_LINES.name
LOG_ROTATIONS = catalogue.BROKER_LOG_ROTATIONS.name
HANGING_SCAN_ERRORS = catalogue.HANGING_SCAN_ERRORS.name
HTTP_REJECTED = catalogue.HTTP_REJECTED_CONNECTIONS.name
CLOCK = catalogue.APPEND_LATENCY_CLOCK.name
TRANSITIONS = catalogue.APPEND_LATENCY_TRANSITIONS.name
LOADING = catalogue.PARTITIONS_LOADING.name
LOAD_AGE = catalogue.LOAD_OLDEST_AGE.name
LOAD_DURATION = catalogue.LOAD_DURATION.name
RELOADS = catalogue.LOADS_WITHOUT_LEADER_CHANGE.name
NEAR_EXHAUSTION = catalogue.IDS_NEAR_EPOCH_EXHAUSTION.name
EPOCH_MAX = catalogue.PRODUCER_EPOCH_MAX.name
# The exporter's own process (queries.metrics.PROCESS: series() selects them by the exporter's job).
CPU = "process_cpu_seconds_total"
RSS = "process_resident_memory_bytes"
SCRAPE_DURATION = "scrape_duration_seconds"
# Counters whose series appear with their first event (labelled by error/reason, or --broker-log).
FAULT_COUNTERS = frozenset({APPEND_ERRORS, MARKER_RETRIES, MARKER_FAILURES, COMPLETE_RETRIES, DECODE_ERRORS})


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
