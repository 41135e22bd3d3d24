"""OTLP push over a real socket: a tiny OTLP/HTTP receiver on 127.0.0.1 decodes what arrives
(opentelemetry-proto's ExportMetricsServiceRequest) and it must match /metrics."""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

from exporter.metrics import CATALOGUE, LatencyRecorders, TransactionCollector
from exporter.metrics.otlp import ExponentialRecorders, OtlpPusher, metrics_endpoint
from exporter.model import CoordinatorModel
from tests.metrics.test_prometheus import NOW_MS, feed


class Receiver:
    def __init__(self) -> None:
        self.requests: list[ExportMetricsServiceRequest] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                assert self.headers["Content-Type"] == "application/x-protobuf"
                received.paths.append(self.path)
                received.requests.append(ExportMetricsServiceRequest.FromString(body))
                reply = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def metrics(self) -> dict:
        (request,) = self.requests
        (resource,) = request.resource_metrics
        (scope,) = resource.scope_metrics
        return {m.name: m for m in scope.metrics}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def attrs(point) -> dict[str, str]:
    return {kv.key: kv.value.string_value for kv in point.attributes}


def exemplar_of(exemplar) -> tuple[dict[str, str], float]:
    """An OTLP exemplar's attributes and value; the /metrics exemplar's time, in ns."""
    assert exemplar.time_unix_nano == (NOW_MS - 5_000 + 3_001) * 1_000_000  # feed()'s PREPARE_ABORT
    return {kv.key: kv.value.string_value for kv in exemplar.filtered_attributes}, exemplar.as_double


def build(exponential: bool):
    recorders = LatencyRecorders(now_ms=NOW_MS)
    teed = ExponentialRecorders(recorders) if exponential else None
    model = CoordinatorModel(teed.sinks() if teed else recorders.sinks())
    collector = TransactionCollector(model, recorders, clock=lambda: NOW_MS / 1000)
    feed(model)
    return collector, teed


def test_endpoint_gets_the_signal_path_once():
    assert metrics_endpoint("http://h:4318") == "http://h:4318/v1/metrics"
    assert metrics_endpoint("http://h:4318/v1/metrics") == "http://h:4318/v1/metrics"
    assert metrics_endpoint(None) is None


def test_explicit_push_carries_every_metric_with_the_names_units_and_labels_of_metrics(receiver):
    collector, _ = build(exponential=False)
    pusher = OtlpPusher(collector, endpoint=receiver.url)
    assert pusher.push()
    assert receiver.paths == ["/v1/metrics"]
    got = receiver.metrics()
    assert set(got) == {spec.name for spec in CATALOGUE}
    for spec in CATALOGUE:
        metric = got[spec.name]
        assert metric.unit == ("s" if spec.unit == "seconds" else "")
        assert metric.description == spec.help
        kind = metric.WhichOneof("data")
        assert kind == {"counter": "sum", "gauge": "gauge", "info": "gauge", "histogram": "histogram"}[spec.type]
        points = getattr(metric, kind).data_points
        for point in points:
            assert set(attrs(point)) == set(spec.labels), spec.name
        if kind == "sum":
            assert metric.sum.is_monotonic and metric.sum.aggregation_temporality == 2  # CUMULATIVE

    def value(name: str, **labels: str) -> float:
        metric = got[name]
        points = getattr(metric, metric.WhichOneof("data")).data_points
        (point,) = [p for p in points if attrs(p) == labels]
        return point.as_double if point.HasField("as_double") else point.as_int

    assert value("kafka_transaction_marker_retries_total", error="NOT_ENOUGH_REPLICAS") == 2
    assert value("kafka_transactions_with_pending_markers") == 1
    assert value("kafka_hanging_transactions") == 1
    assert value("kafka_partitions_with_late_transactions") == 2
    (build_info,) = got["txn_exporter_build_info"].gauge.data_points
    assert set(attrs(build_info)) == {"version", "python_version"}

    latency = got["kafka_transaction_state_log_append_latency_seconds"].histogram
    (abort,) = [p for p in latency.data_points if attrs(p) == {"target_state": "PREPARE_ABORT"}]
    assert abort.count == 1 and abort.sum == pytest.approx(2.501)
    assert list(abort.explicit_bounds) == list(CATALOGUE[0].buckets)
    assert len(abort.bucket_counts) == len(abort.explicit_bounds) + 1
    assert abort.bucket_counts[list(abort.explicit_bounds).index(5.0)] == 1  # (2.5, 5]
    assert sum(abort.bucket_counts) == 1
    assert [exemplar_of(e) for e in abort.exemplars] == [({"transactional_id": "b", "producer_id": "4000"}, 2.501)]


def test_exponential_push_has_the_same_series_with_exact_min_max(receiver):
    collector, teed = build(exponential=True)
    assert OtlpPusher(collector, endpoint=receiver.url, exponential=teed).push()
    got = receiver.metrics()
    latency = got["kafka_transaction_state_log_append_latency_seconds"]
    assert latency.WhichOneof("data") == "exponential_histogram"
    points = {attrs(p)["target_state"]: p for p in latency.exponential_histogram.data_points}
    assert set(points) == {"EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT"}
    abort = points["PREPARE_ABORT"]
    assert (abort.count, abort.scale, abort.min, abort.max) == (1, 3, 2.501, 2.501)
    base = 2 ** (2**-3)
    (index,) = [abort.positive.offset + i for i, n in enumerate(abort.positive.bucket_counts) if n]
    assert base**index < 2.501 <= base ** (index + 1)
    assert points["EMPTY"].count == 0
    assert [exemplar_of(e) for e in abort.exemplars] == [({"transactional_id": "b", "producer_id": "4000"}, 2.501)]
    assert got["kafka_transaction_duration_seconds"].WhichOneof("data") == "exponential_histogram"


def test_a_receiver_that_is_down_is_a_failed_push_not_an_exception():
    collector, _ = build(exponential=False)
    pusher = OtlpPusher(collector, endpoint="http://127.0.0.1:9")
    assert not pusher.push()
    assert (pusher.pushes, pusher.failures) == (1, 1)
