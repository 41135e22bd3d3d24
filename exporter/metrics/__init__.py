"""Metric sinks: the catalogue, the latency recorders the model feeds, and the Prometheus collector.

API:
    recorders = LatencyRecorders(window_seconds=300.0, slices=5)
    model = CoordinatorModel(recorders.sinks())             # exporter.model
    collector = TransactionCollector(model, recorders, clock=time.time)
    prometheus_client.REGISTRY.register(collector)
"""

from exporter.metrics.catalogue import CATALOGUE, MetricSpec, MetricType
from exporter.metrics.prometheus import TransactionCollector
from exporter.metrics.recorders import LatencyRecorders

__all__ = ["CATALOGUE", "LatencyRecorders", "MetricSpec", "MetricType", "TransactionCollector"]
