"""The metric names dashboards and alerts may use, and where each comes from.

Three sources, nothing else (tests/dashboards/test_dashboards.py checks every query and rule against them):

- the exporter's catalogue (exporter.metrics.catalogue.CATALOGUE): the source of truth; a new
  metric goes there first;
- BROKER_JMX: Kafka's own JMX transaction metrics under the names the standard jmx_exporter rules
  give them (see BROKER_JMX's comment);
- PROCESS: what the exporter's process says of itself through the Prometheus client library's
  standard collectors, and the series Prometheus records of each scrape (see PROCESS's comment).

Dashboards and alerts name metrics through `ref()` and `series()`, which fail on any other name.
"""

from __future__ import annotations

from dataclasses import dataclass

from exporter.metrics.catalogue import CATALOGUE, MetricSpec, MetricType
from queries.placeholders import JOB, SELECTOR_BRACES, SELECTOR_COMMA


@dataclass(frozen=True, slots=True)
class JmxMetric:
    name: str
    type: MetricType
    help: str
    mbean: str
    labels: tuple[str, ...] = ()


# Kafka's own transaction metrics as jmx_exporter's example_configs/kafka-2_0_0.yml and Strimzi's
# examples/metrics/kafka-metrics.yaml name them (lowercaseOutputName: true). Both give the same
# names for ReplicaManager and AddPartitionsToTxnManager. kafka.coordinator.* gauges have a rule
# only in jmx_exporter's example (`kafka.coordinator.(\w+)<type=(.+), name=(.+)><>Value` ->
# kafka_coordinator_$1_$2_$3); Strimzi's rules (`kafka.(\w+)<...`) do not match the
# dotted domain, so add that rule there (docs/dashboards-and-alerts.md, "Broker JMX metrics"). Meters' Count becomes
# `<name>_count` (jmx_exporter >= 1.0 may append `_total` to counters: queries accept both).
BROKER_JMX: tuple[JmxMetric, ...] = (
    JmxMetric(
        "kafka_server_replicamanager_partitionswithlatetransactionscount",
        MetricType.GAUGE,
        "Partitions with an open transaction older than transaction.max.timeout.ms + 5 min (KIP-664).",
        "kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount",
    ),
    JmxMetric(
        "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize",
        MetricType.GAUGE,
        "Transactions whose markers are written, waiting to retry their final COMPLETE_* append.",
        "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,name=LogAppendRetryQueueSize",
    ),
    JmxMetric(
        "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
        MetricType.GAUGE,
        "Markers waiting for a data partition's leader to be known.",
        "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,name=UnknownDestinationQueueSize",
    ),
    JmxMetric(
        "kafka_server_addpartitionstotxnmanager_verificationfailurerate_count",
        MetricType.COUNTER,
        "Failed KIP-890 transaction verifications (produce to a partition not in the transaction).",
        "kafka.server:type=AddPartitionsToTxnManager,name=VerificationFailureRate",
    ),
    JmxMetric(
        "kafka_server_addpartitionstotxnmanager_verificationtimems",
        MetricType.GAUGE,
        "KIP-890 transaction verification time in ms, by quantile (Yammer histogram).",
        "kafka.server:type=AddPartitionsToTxnManager,name=VerificationTimeMs",
        labels=("quantile",),
    ),
)


@dataclass(frozen=True, slots=True)
class ProcessMetric:
    name: str
    type: MetricType
    help: str
    unit: str  # the catalogue's units ("seconds", or "" for a count), or "bytes"
    source: str


PROCESS_COLLECTOR = "prometheus_client's ProcessCollector (Linux: /proc/self)"
SCRAPE = "Prometheus, for each scrape of a target"

# The exporter's own process, from the collectors the client library ships and exporter.app
# registers, and Prometheus's record of each scrape. A broker's JMX agent exports process_* under
# the same names, so `series()` selects these by the exporter's job (the mixin's jobSelector), never
# by name alone.
PROCESS: tuple[ProcessMetric, ...] = (
    ProcessMetric(
        "process_cpu_seconds_total",
        MetricType.COUNTER,
        "The exporter process's user and system CPU time.",
        "seconds",
        PROCESS_COLLECTOR,
    ),
    ProcessMetric(
        "process_resident_memory_bytes",
        MetricType.GAUGE,
        "The exporter process's resident memory (RSS).",
        "bytes",
        PROCESS_COLLECTOR,
    ),
    ProcessMetric(
        "scrape_duration_seconds",
        MetricType.GAUGE,
        "How long Prometheus's last scrape of the exporter's /metrics took.",
        "seconds",
        SCRAPE,
    ),
)

_HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")

Metric = MetricSpec | JmxMetric | ProcessMetric


def catalogue() -> dict[str, MetricSpec]:
    return {spec.name: spec for spec in CATALOGUE}


def known() -> dict[str, Metric]:
    """Every usable metric by name."""
    names: dict[str, Metric] = {m.name: m for m in BROKER_JMX}
    names.update((m.name, m) for m in PROCESS)
    names.update(catalogue())
    return names


def ref(name: str) -> str:
    """``name`` if dashboards and alerts may use it (with a histogram's sample suffix), else KeyError."""
    resolve(name)
    return name


def series(name: str, matchers: str = "") -> str:
    """The selector of a metric's series: ``name{matchers}``, to which the mixin's `_config.selector`
    adds its matchers when the exporter exposes it (not the brokers' JMX metrics, scraped elsewhere),
    and its `_config.jobSelector` before them for the process's own metrics (PROCESS)."""
    metric = resolve(name)
    if isinstance(metric, JmxMetric):
        return f"{name}{{{matchers}}}" if matchers else name
    if isinstance(metric, ProcessMetric):
        return f"{name}{{{JOB}{', ' + matchers if matchers else ''}{SELECTOR_COMMA}}}"
    return f"{name}{{{matchers}{SELECTOR_COMMA}}}" if matchers else f"{name}{SELECTOR_BRACES}"


def resolve(sample_name: str) -> Metric:
    """The metric a sample name belongs to (``x_bucket`` of histogram ``x``...)."""
    metrics = known()
    if sample_name in metrics:
        return metrics[sample_name]
    for suffix in _HISTOGRAM_SUFFIXES:
        base = sample_name.removesuffix(suffix)
        if base != sample_name and base in metrics and metrics[base].type is MetricType.HISTOGRAM:
            return metrics[base]
    raise KeyError(f"{sample_name} is in neither the catalogue, BROKER_JMX nor PROCESS (queries/metrics.py)")


def help_of(name: str) -> str:
    return resolve(name).help


GRAFANA_UNITS = {"seconds": "s", "bytes": "bytes", "": "short"}


def grafana_unit(name: str) -> str:
    metric = resolve(name)
    return GRAFANA_UNITS[getattr(metric, "unit", "")]
