"""OTLP push: every metric of /metrics, same names, units and labels, to an OTLP/HTTP receiver.

The pusher does not keep a second set of instruments: at each interval it collects the Prometheus
collector (exporter.metrics.prometheus, which reads the catalogue and the model under the model's
lock), converts each family to opentelemetry-sdk metric data, and hands it to
opentelemetry-exporter-otlp-proto-http's OTLPMetricExporter, which reads the standard
OTEL_EXPORTER_OTLP_* variables (endpoint, headers, timeout, compression, certificates).

- names: the sample names users query on /metrics (counters keep `_total`, so a receiver that adds
  suffixes, e.g. Prometheus's OTLP endpoint, leaves them as they are); units in UCUM ("s" for
  seconds, which Prometheus's OTLP translation maps back to `_seconds`); labels as attributes;
- counters: cumulative monotonic sums; gauges: gauges; the info metric: a gauge of 1 with its labels;
- histograms: `explicit` sends the catalogue's buckets as they are on /metrics; `exponential` sends
  base-2 exponential histograms (scale 3: buckets 9% wide) recorded beside the explicit ones from the
  same observations (ExponentialRecorders tees the model's sinks), with exact min and max. Both carry
  the exemplars of /metrics' OpenMetrics buckets (transactional_id and producer_id as filtered
  attributes, no trace or span id).
  A histogram with no sink to tee (the coordinator's loads, counted in buckets by the model) goes
  explicit in both modes.

    recorders = LatencyRecorders(); exponential = ExponentialRecorders.tee(recorders)  # optional
    model = CoordinatorModel(exponential.sinks() if exponential else recorders.sinks())
    pusher = OtlpPusher(collector, endpoint="http://collector:4318", exponential=exponential)
    pusher.start(); ...; pusher.stop()
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import TYPE_CHECKING, TypedDict
from urllib.parse import urlsplit

from prometheus_client.metrics_core import Metric as PromMetric
from prometheus_client.registry import Collector

from exporter import __version__, defaults
from exporter.metrics import catalogue as c
from exporter.metrics.recorders import LatencyRecorders
from exporter.model.sinks import DurationSink, ObservationSinks

if TYPE_CHECKING:  # the SDK is imported when a pusher is made, not with this module
    from opentelemetry.sdk.metrics import Exemplar
    from opentelemetry.sdk.metrics.export import ExponentialHistogram, Histogram, Metric, MetricExporter, MetricsData

log = logging.getLogger("txn_exporter.otlp")

HISTOGRAM_KINDS = ("explicit", "exponential")
EXPONENTIAL_SCALE = 3
_UCUM = {"seconds": "s", "bytes": "By", "": ""}
_SIGNAL_PATH = "/v1/metrics"


class ExponentialCounts:
    """A cumulative base-2 exponential histogram of durations in ms, reported in seconds, at a fixed
    scale (OTLP: bucket i holds (base**i, base**(i+1)], base = 2**(2**-scale))."""

    __slots__ = ("count", "counts", "max_ms", "min_ms", "sum_ms", "zero_count")

    _FACTOR = 2**EXPONENTIAL_SCALE

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.zero_count = 0
        self.count = 0
        self.sum_ms = 0
        self.min_ms = math.inf
        self.max_ms = -math.inf

    def record(self, value_ms: int, now_ms: int, transactional_id: str, producer_id: int) -> None:
        value_ms = max(value_ms, 0)  # the exporter's clock behind the broker's, as the recorders do
        self.count += 1
        self.sum_ms += value_ms
        if value_ms < self.min_ms:
            self.min_ms = value_ms
        if value_ms > self.max_ms:
            self.max_ms = value_ms
        if value_ms == 0:
            self.zero_count += 1
            return
        index = math.ceil(math.log2(value_ms / 1000) * self._FACTOR) - 1
        self.counts[index] = self.counts.get(index, 0) + 1


class _Tee:
    __slots__ = ("_first", "_second")

    def __init__(self, first: DurationSink, second: DurationSink) -> None:
        self._first, self._second = first, second

    def record(self, value_ms: int, now_ms: int, transactional_id: str, producer_id: int) -> None:
        self._first.record(value_ms, now_ms, transactional_id, producer_id)
        self._second.record(value_ms, now_ms, transactional_id, producer_id)


class ExponentialRecorders:
    """ExponentialCounts for every histogram series of LatencyRecorders, keyed as the collector
    labels them: (family name, label values)."""

    def __init__(self, recorders: LatencyRecorders) -> None:
        self._recorders = recorders
        self.series: dict[tuple[str, tuple[str, ...]], ExponentialCounts] = {}
        self._append = [self._new(c.APPEND_LATENCY, s) for s in c.TARGET_STATES]
        self._completion = {r: self._new(c.MARKER_COMPLETION, r) for r in recorders.marker_completion}
        self._duration = [self._new(c.TRANSACTION_DURATION, r) for r in recorders.transaction_duration]
        # The families recorded here; any other histogram is sent explicit.
        self.families = {name for name, _ in self.series}

    def _new(self, spec: c.MetricSpec, label: str) -> ExponentialCounts:
        counts = self.series[(spec.family_name, (label,))] = ExponentialCounts()
        return counts

    def sinks(self) -> ObservationSinks:
        """The recorders' sinks, each teed into its exponential counts."""
        base = self._recorders.sinks()
        return ObservationSinks(
            append_latency=[_Tee(a, b) for a, b in zip(base.append_latency, self._append)],
            marker_completion_commit=_Tee(base.marker_completion_commit, self._completion["commit"]),
            marker_completion_abort=_Tee(base.marker_completion_abort, self._completion["abort"]),
            transaction_duration=[_Tee(a, b) for a, b in zip(base.transaction_duration, self._duration)],
        )


def metrics_endpoint(endpoint: str | None, environ: dict[str, str] | None = None) -> str | None:
    """The URL to POST to: `endpoint` (like OTEL_EXPORTER_OTLP_ENDPOINT, a base URL to which
    /v1/metrics is appended unless it already ends so), else None to let the OTLP exporter read
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT itself."""
    if not endpoint:
        return None
    path = urlsplit(endpoint).path
    return endpoint if path.endswith(_SIGNAL_PATH) else endpoint.rstrip("/") + _SIGNAL_PATH


def enabled_by_environment(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    return bool(environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


class _Times(TypedDict):
    """A data point's times, as its keyword arguments."""

    start_time_unix_nano: int
    time_unix_nano: int


class _Series(TypedDict):
    """One histogram series of a family, gathered from its samples."""

    bounds: list[float]
    cumulative: list[int]
    sum: float
    count: int
    exemplars: list[Exemplar]


class OtlpPusher:
    def __init__(
        self,
        collector: Collector,
        endpoint: str | None = None,
        exponential: ExponentialRecorders | None = None,
        interval_seconds: float = defaults.OTLP_INTERVAL_SECONDS,
        exporter: MetricExporter | None = None,
    ) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        self._collector = collector
        self._exponential = exponential
        self._interval = interval_seconds
        self._exporter = exporter or OTLPMetricExporter(endpoint=metrics_endpoint(endpoint))
        # OTEL_RESOURCE_ATTRIBUTES / OTEL_SERVICE_NAME are merged in by Resource.create.
        self._resource = Resource.create({"service.name": "kafka-txn-exporter", "service.version": __version__})
        self._scope = InstrumentationScope("kafka-txn-exporter", __version__)
        self._start_ns = time.time_ns()
        self._specs = {spec.family_name: spec for spec in c.CATALOGUE}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pushes = 0
        self.failures = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="otlp-push", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stops the thread after one last push, then shuts the exporter down."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.push()
        self._exporter.shutdown()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.push()

    def push(self) -> bool:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        try:
            result = self._exporter.export(self.collect(), timeout_millis=10_000)
        except Exception:  # the receiver's problem must not stop the exporter
            log.warning("OTLP push failed", exc_info=True)
            result = None
        ok = result is MetricExportResult.SUCCESS
        self.pushes += 1
        self.failures += not ok
        return ok

    def collect(self) -> MetricsData:
        from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics, ScopeMetrics

        now_ns = time.time_ns()
        metrics = [m for family in self._collector.collect() if (m := self._convert(family, now_ns))]
        scope = ScopeMetrics(scope=self._scope, metrics=metrics, schema_url="")
        return MetricsData(
            resource_metrics=[ResourceMetrics(resource=self._resource, scope_metrics=[scope], schema_url="")]
        )

    def _convert(self, family: PromMetric, now_ns: int) -> Metric | None:
        from opentelemetry.sdk.metrics.export import AggregationTemporality, Gauge, Metric, NumberDataPoint, Sum

        spec = self._specs.get(family.name)
        if spec is None:
            return None  # not ours (cannot happen with TransactionCollector)
        times: _Times = {"start_time_unix_nano": self._start_ns, "time_unix_nano": now_ns}
        unit = _UCUM.get(spec.unit, spec.unit)
        data: Histogram | ExponentialHistogram | Sum | Gauge
        if spec.type is c.MetricType.HISTOGRAM:
            data = self._histogram(family, times)
        else:
            points = []
            for sample in family.samples:
                if sample.name != spec.name:
                    continue  # _created
                value = 1 if spec.type is c.MetricType.INFO else sample.value
                points.append(NumberDataPoint(attributes=dict(sample.labels), value=value, **times))
            if spec.type is c.MetricType.COUNTER:
                data = Sum(points, AggregationTemporality.CUMULATIVE, is_monotonic=True)
            else:
                data = Gauge(points)
        return Metric(name=spec.name, description=spec.help, unit=unit, data=data)

    def _histogram(self, family: PromMetric, times: _Times) -> Histogram | ExponentialHistogram:
        from opentelemetry.sdk.metrics import Exemplar
        from opentelemetry.sdk.metrics._internal.point import Buckets
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            ExponentialHistogram,
            ExponentialHistogramDataPoint,
            Histogram,
            HistogramDataPoint,
        )

        series: dict[tuple[tuple[str, str], ...], _Series] = {}
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "le"))
            entry = series.setdefault(labels, {"bounds": [], "cumulative": [], "sum": 0.0, "count": 0, "exemplars": []})
            suffix = sample.name[len(family.name) :]
            if suffix == "_bucket":
                if sample.labels["le"] != "+Inf":
                    entry["bounds"].append(float(sample.labels["le"]))
                entry["cumulative"].append(int(sample.value))
                if (kept := sample.exemplar) is not None:
                    # (TransactionCollector's exemplars have their observation's time; one without
                    # would take the collection's.)
                    at = times["time_unix_nano"] if kept.timestamp is None else round(float(kept.timestamp) * 1e9)
                    entry["exemplars"].append(Exemplar(dict(kept.labels), kept.value, at))
            elif suffix == "_sum":
                entry["sum"] = sample.value
            elif suffix == "_count":
                entry["count"] = int(sample.value)
        if self._exponential is not None and family.name in self._exponential.families:
            exponential_points = []
            for labels, entry in series.items():
                counts = self._exponential.series[(family.name, tuple(v for _, v in labels))]
                positive = Buckets(offset=0, bucket_counts=[])
                if counts.counts:
                    low, high = min(counts.counts), max(counts.counts)
                    positive = Buckets(
                        offset=low, bucket_counts=[counts.counts.get(i, 0) for i in range(low, high + 1)]
                    )
                empty = counts.count == 0
                exponential_points.append(
                    ExponentialHistogramDataPoint(
                        attributes=dict(labels),
                        count=counts.count,
                        sum=counts.sum_ms / 1000,
                        scale=EXPONENTIAL_SCALE,
                        zero_count=counts.zero_count,
                        positive=positive,
                        negative=Buckets(offset=0, bucket_counts=[]),
                        flags=0,
                        min=0.0 if empty else counts.min_ms / 1000,
                        max=0.0 if empty else counts.max_ms / 1000,
                        exemplars=entry["exemplars"],
                        **times,
                    )
                )
            return ExponentialHistogram(exponential_points, AggregationTemporality.CUMULATIVE)
        points = []
        for labels, entry in series.items():
            cumulative = entry["cumulative"]
            per_bucket = [b - a for a, b in zip([0, *cumulative[:-1]], cumulative)]
            points.append(
                HistogramDataPoint(
                    attributes=dict(labels),
                    count=entry["count"],
                    sum=entry["sum"],
                    bucket_counts=per_bucket,
                    explicit_bounds=entry["bounds"],
                    # None: OTLP's min and max are optional and /metrics' buckets carry neither; the
                    # SDK's encoder leaves None unset, though its type says float.
                    min=None,  # type: ignore[arg-type]  # because optional in OTLP (above)
                    max=None,  # type: ignore[arg-type]  # because optional in OTLP (above)
                    exemplars=entry["exemplars"],
                    **times,
                )
            )
        return Histogram(points, AggregationTemporality.CUMULATIVE)


def describe(pusher_endpoint: str | None) -> str:
    """Where pushes go, for the startup log line."""
    return metrics_endpoint(pusher_endpoint) or (
        os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        or (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").rstrip("/") + _SIGNAL_PATH)
    )


__all__ = [
    "HISTOGRAM_KINDS",
    "ExponentialCounts",
    "ExponentialRecorders",
    "OtlpPusher",
    "enabled_by_environment",
    "metrics_endpoint",
]
