"""TransactionCollector: renders the model and its latency recorders as Prometheus metric families.

Register it with a prometheus_client registry; the HTTP layer's content negotiation then serves
Prometheus text or OpenMetrics. Nothing Prometheus-typed touches the hot path: `collect()` asks the
model for a snapshot (the recorders it feeds read at the same instant) and builds families from it
at scrape time.

Histogram buckets carry exemplars: each bucket's slowest observation of the recorders' window
(exporter.metrics.latency), labelled `transactional_id` and `producer_id`, timestamped when it was
observed. prometheus_client writes them in OpenMetrics only; the Prometheus text format has no
exemplars and stays as it was.

Transactional ids are untrusted, and Prometheus rejects a whole scrape over one bad exemplar, so
their labels are made safe for every parser: a character the text format would escape (double
quote, backslash, newline) and the other control characters (C0, DEL, C1) are shown as U+FFFD.
Escapes are not read back alike: prometheus_client's parser misreads an escaped quote in exemplar
labels, and Prometheus 2.42 stores them escaped, counting the escapes against the 128 characters
(a longer exemplar is dropped). As OpenMetrics caps an exemplar's labels at 128 characters (names
and values, in code points), a longer transactional id is cut to fit, its last kept character
replaced by "…" so a cut id is never mistaken for a whole one.

    recorders = LatencyRecorders(window_seconds=300)
    model = CoordinatorModel(recorders.sinks())
    registry.register(TransactionCollector(model, recorders))
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Iterable, Iterator, Mapping

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Exemplar
from prometheus_client.utils import floatToGoString

from exporter import __version__, defaults
from exporter.contracts.kafka_versions import NOT, BrokerVersion, coverage
from exporter.contracts.known_bugs import KNOWN_BUGS
from exporter.metrics import catalogue as c
from exporter.metrics.latency import LatencyRecorder, LatencySnapshot, Observation
from exporter.metrics.recorders import LatencyRecorders
from exporter.model import AppendClockRow, CoordinatorLoadsRow, CoordinatorModel, ModelSnapshot

_QUANTILE_LABELS = tuple(floatToGoString(q) for q in c.QUANTILES)
_LOAD_BOUNDS = (*(floatToGoString(b) for b in c.LOAD_DURATION.buckets), "+Inf")

# OpenMetrics: "The combined length of the label names and values of an Exemplar's LabelSet MUST NOT
# exceed 128 UTF-8 character code points" (Prometheus and prometheus_client's parser reject more).
EXEMPLAR_LABELS_MAX = 128
TRUNCATED = "…"
REPLACED = "\ufffd"
_UNSAFE = dict.fromkeys([*range(0x20), ord('"'), ord("\\"), *range(0x7F, 0xA0)], REPLACED)
_ID_BUDGET = EXEMPLAR_LABELS_MAX - len("transactional_id") - len("producer_id")


def _family(spec: c.MetricSpec) -> Metric:
    """An empty family of any type (describe())."""
    if spec.type is c.MetricType.HISTOGRAM:
        return _histogram(spec)
    if spec.type is c.MetricType.INFO:
        return _info(spec)
    return _scalar(spec)


def _scalar(spec: c.MetricSpec) -> CounterMetricFamily | GaugeMetricFamily:
    """A counter's or a gauge's family: one value per label set."""
    if spec.type is c.MetricType.COUNTER:
        return CounterMetricFamily(spec.family_name, spec.help, labels=spec.labels, unit=spec.unit)
    if spec.type is c.MetricType.GAUGE:
        return GaugeMetricFamily(spec.family_name, spec.help, labels=spec.labels, unit=spec.unit)
    raise ValueError(f"{spec.name} is a {spec.type}, not a counter or a gauge")


def _histogram(spec: c.MetricSpec) -> HistogramMetricFamily:
    if spec.type is not c.MetricType.HISTOGRAM:
        raise ValueError(f"{spec.name} is a {spec.type}, not a histogram")
    return HistogramMetricFamily(spec.family_name, spec.help, labels=spec.labels, unit=spec.unit)


def _info(spec: c.MetricSpec) -> InfoMetricFamily:
    if spec.type is not c.MetricType.INFO:
        raise ValueError(f"{spec.name} is a {spec.type}, not an info metric")
    # An info metric's labels are the keys of the value it is given.
    return InfoMetricFamily(spec.family_name, spec.help)


class TransactionCollector(Collector):
    def __init__(
        self,
        model: CoordinatorModel,
        recorders: LatencyRecorders,
        clock: Callable[[], float] = time.time,
        late_padding_seconds: float = defaults.LATE_TRANSACTION_PADDING_SECONDS,
        http_rejected_connections: Callable[[], int] = lambda: 0,
    ) -> None:
        self._model = model
        self._http_rejected_connections = http_rejected_connections  # the HTTP server's, not the model's
        self._late_padding_ms = int(late_padding_seconds * 1000)
        self._recorders = recorders
        self._clock = clock
        self._bucket_bounds = (*tuple(floatToGoString(b) for b in c.DURATION_BUCKETS), "+Inf")
        self._duration_bounds = (*tuple(floatToGoString(b) for b in c.TRANSACTION_DURATION_BUCKETS), "+Inf")

    def describe(self) -> Iterator[Metric]:
        # Lets the registry check names without a scrape.
        for spec in c.CATALOGUE:
            yield _family(spec)

    def collect(self) -> Iterator[Metric]:
        now_ms = int(self._clock() * 1000)
        model, (histograms, observed) = self._model.snapshot(
            now_ms, self._late_padding_ms, lambda: self._histograms(now_ms)
        )
        yield from histograms
        yield from _append_clock_families(model.append_clock, observed)
        yield from self._model_families(model, now_ms)
        yield _single(c.HTTP_REJECTED_CONNECTIONS, self._http_rejected_connections())
        yield _broker_info(model.broker_version)
        yield _broker_affected(model.broker_version)
        yield self._build_info()

    def _histograms(self, now_ms: int) -> tuple[list[Metric], list[int]]:
        """The recorders' families, and the append-latency observations by target state id; read
        inside the model's snapshot, as the model writes them."""
        latency = _histogram(c.APPEND_LATENCY)
        quantiles = _scalar(c.APPEND_LATENCY_QUANTILE)
        observed = []
        for state, recorder in zip(c.TARGET_STATES, self._recorders.append_latency):
            snapshot = self._add_histogram(latency, (state,), recorder, now_ms)
            for label, value in zip(_QUANTILE_LABELS, snapshot.quantiles):
                quantiles.add_metric((state, label), value)
            observed.append(snapshot.cumulative_buckets[-1])

        completion = _histogram(c.MARKER_COMPLETION)
        for result, recorder in self._recorders.marker_completion.items():
            self._add_histogram(completion, (result,), recorder, now_ms)

        duration = _histogram(c.TRANSACTION_DURATION)
        for result, recorder in self._recorders.transaction_duration.items():
            self._add_histogram(duration, (result,), recorder, now_ms, self._duration_bounds)
        return [latency, quantiles, completion, duration], observed

    @staticmethod
    def _model_families(model: ModelSnapshot, now_ms: int) -> list[Metric]:
        # Counters and gauges read straight from the snapshot, in the catalogue's order.
        families = [_read(spec, getattr(model, spec.reads)) for spec in c.CATALOGUE if spec.reads]
        scan = model.hanging_scan
        if scan is not None:
            families.append(_single(c.PARTITIONS_WITH_LATE_TRANSACTIONS, scan.partitions_with_late_transactions))
            families.append(_single(c.HANGING_TRANSACTIONS, scan.hanging_transactions))
        oldest_prepare_ms = model.oldest_prepare_ms
        oldest_age = 0.0 if oldest_prepare_ms is None else max(0, now_ms - oldest_prepare_ms) / 1000
        families.append(_single(c.PENDING_MARKERS_OLDEST_AGE, oldest_age))
        families.append(_labelled(c.TRANSACTIONS, zip(c.TARGET_STATES, model.transactions_by_state)))
        families += _load_families(model.coordinator_loads, now_ms)
        families.append(_labelled(c.UNWRITTEN_STATE_RECORDS, ((s.name, n) for s, n in model.unwritten_states.items())))
        append_errors = _scalar(c.APPEND_ERRORS)
        for (state, error), count in sorted(model.append_errors.items()):
            append_errors.add_metric((c.TARGET_STATES[state], error), count)
        families.append(append_errors)
        broker_log = model.broker_log
        families.append(_single(c.BROKER_LOG_LINES, broker_log.lines))
        skipped = {"malformed": broker_log.malformed, "unrecognized": broker_log.unrecognized}
        families.append(_labelled(c.BROKER_LOG_SKIPPED_LINES, ((r, skipped[r]) for r in c.BROKER_LOG_SKIP_REASONS)))
        families.append(_single(c.BROKER_LOG_TRUNCATED_LINES, broker_log.truncated))
        families.append(_single(c.BROKER_LOG_ROTATIONS, broker_log.rotations))
        families.append(_single(c.BROKER_LOG_UNPLACED_LINES, broker_log.unplaced))
        if broker_log.utc_offset_ms is not None:
            families.append(_single(c.BROKER_LOG_UTC_OFFSET, broker_log.utc_offset_ms / 1000))

        phases = dict.fromkeys(c.PARTITION_PHASES, 0)
        lag = _scalar(c.PARTITION_CONSUMER_LAG)
        last_record = _scalar(c.PARTITION_LAST_RECORD_TIMESTAMP)
        for row in model.partitions:
            phases["live" if row.live else "replaying"] += 1
            label = (str(row.partition),)
            if row.consumer_lag is not None:
                lag.add_metric(label, row.consumer_lag)
            if row.last_record_timestamp_ms is not None:
                last_record.add_metric(label, row.last_record_timestamp_ms / 1000)
        families += (_labelled(c.PARTITIONS_FOLLOWED, phases.items()), lag, last_record)
        return families

    def _add_histogram(
        self,
        family: HistogramMetricFamily,
        labels: tuple[str, ...],
        recorder: LatencyRecorder,
        now_ms: int,
        bounds: tuple[str, ...] | None = None,
    ) -> LatencySnapshot:
        snapshot = recorder.snapshot(now_ms, c.QUANTILES)
        bounds = bounds or self._bucket_bounds
        buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = [
            (bound, count) if kept is None else (bound, count, exemplar(kept))
            for bound, count, kept in zip(bounds, snapshot.cumulative_buckets, snapshot.exemplars)
        ]
        family.add_metric(labels, buckets, snapshot.sum_seconds)
        return snapshot

    @staticmethod
    def _build_info() -> Metric:
        info = _info(c.BUILD_INFO)
        info.add_metric((), {"version": __version__, "python_version": platform.python_version()})
        return info


def _broker_info(version: BrokerVersion | None) -> Metric:
    info = _info(c.BROKER_INFO)
    if version is None:
        info.add_metric((), {"version": "unknown", "source": "none"})
    else:
        info.add_metric((), {"version": version.text, "source": version.source})
    return info


def _broker_affected(version: BrokerVersion | None) -> Metric:
    """Which known bugs the broker's version has (possibly, where its patch is unknown): none shown
    while the version is unknown."""
    affected = _scalar(c.BROKER_AFFECTED)
    if version is not None and version.known:
        for bug in KNOWN_BUGS:
            affected.add_metric((bug.jira,), int(coverage(version, bug.intervals) != NOT))
    return affected


def _append_clock_families(row: AppendClockRow, observed: list[int]) -> list[Metric]:
    """Which clock times the appends, the records each timed and the untimed (their sum by target
    state: the records count), the records and lines that waited in vain, the negative ones."""
    clock = _info(c.APPEND_LATENCY_CLOCK)
    clock.add_metric((), {"clock": row.clock})
    transitions = _scalar(c.APPEND_LATENCY_TRANSITIONS)
    records = _scalar(c.RECORDS)
    for state, name in enumerate(c.TARGET_STATES):
        coordinator, untimed = row.coordinator_timed[state], row.untimed[state]
        transitions.add_metric((name, "coordinator"), coordinator)
        transitions.add_metric((name, "fetch"), observed[state] - coordinator)
        transitions.add_metric((name, "untimed"), untimed)
        records.add_metric((name,), observed[state] + untimed)
    unmatched = _scalar(c.APPEND_CLOCK_UNMATCHED)
    for (kind, reason), count in row.unmatched.items():
        unmatched.add_metric((kind, reason), count)
    return [clock, transitions, records, unmatched, _single(c.APPEND_LATENCY_NEGATIVE, row.negative)]


def _load_families(row: CoordinatorLoadsRow, now_ms: int) -> list[Metric]:
    """The coordinator's loads: counted by the model in the catalogue's buckets (no exemplars: a load
    is a partition's, not a transaction's)."""
    oldest_ms = row.oldest_load_started_ms
    durations = _histogram(c.LOAD_DURATION)
    durations.add_metric((), list(zip(_LOAD_BOUNDS, row.duration_buckets)), row.duration_sum_ms / 1000)
    return [
        _single(c.PARTITIONS_LOADING, row.loading),
        _single(c.LOAD_OLDEST_AGE, 0.0 if oldest_ms is None else max(0, now_ms - oldest_ms) / 1000),
        durations,
        _single(c.LOADS_WITHOUT_LEADER_CHANGE, row.reloads_without_leader_change),
    ]


def exemplar(kept: Observation) -> Exemplar:
    """The observation as an exemplar whose labels any parser reads and fit in 128 characters."""
    producer_id = str(kept.producer_id)
    labels = {
        "transactional_id": fit(kept.transactional_id.translate(_UNSAFE), _ID_BUDGET - len(producer_id)),
        "producer_id": producer_id,
    }
    return Exemplar(labels, kept.value_ms / 1000, kept.observed_at_ms / 1000)


def fit(value: str, limit: int) -> str:
    """`value` if it has at most `limit` code points, else its first `limit - 1` and TRUNCATED.
    Slicing a str cuts between code points, so the result is always valid UTF-8."""
    return value if len(value) <= limit else value[: limit - 1] + TRUNCATED


def _single(spec: c.MetricSpec, value: float) -> Metric:
    family = _scalar(spec)
    family.add_metric((), value)
    return family


def _read(spec: c.MetricSpec, value: float | Mapping[str, float]) -> Metric:
    """A counter or gauge from its snapshot field: a number, or label value -> number."""
    if isinstance(value, Mapping):
        return _labelled(spec, sorted(value.items()))
    return _single(spec, int(value) if isinstance(value, bool) else value)  # a flag is 0 or 1


def _labelled(spec: c.MetricSpec, values: Iterable[tuple[str, float]]) -> Metric:
    family = _scalar(spec)
    for label, value in values:
        family.add_metric((label,), value)
    return family
