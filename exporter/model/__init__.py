"""The coordinator model: pure state rebuilt from source events, no Prometheus, no I/O.

API:
    sinks = ObservationSinks(append_latency=[...6 DurationSink by state id...],
                             marker_completion_commit=..., marker_completion_abort=...)
        (exporter.metrics.LatencyRecorders.sinks() builds one)
    model = CoordinatorModel(sinks)
    model.apply(event) / model.apply_batch(events)       # writer thread; apply_batch takes model.lock
    with model.lock:                                     # reader (the collector)
        model.tombstones, model.decode_errors, model.unknown_tagged_fields, model.unwritten_states,
        model.source_up, model.partitions(), model.transactions_by_state(), model.pending_markers(),
        model.append_errors, model.marker_retries, model.marker_failures,
        model.complete_append_retries, model.broker_log,         # from the broker log
        model.timeouts, model.producer_id_rotations, model.late_transactions(now_ms, padding_ms),
        model.hanging_scan, model.hanging_scan_errors,           # from exporter.sources.hanging
        model.in_flight()                                        # InFlight tuples (exporter.view)

See exporter.model.coordinator for the counting rules (live-only, tombstones, unwritten states,
timeout aborts: exporter.lifecycle.is_timeout_abort, shared with the Spark pipeline).
"""

from exporter.model.coordinator import CoordinatorModel, Event
from exporter.model.partition import TRACKED_STATES, InFlight, PartitionState
from exporter.model.sinks import DurationSink, ObservationSinks

__all__ = [
    "TRACKED_STATES",
    "CoordinatorModel",
    "DurationSink",
    "Event",
    "InFlight",
    "ObservationSinks",
    "PartitionState",
]
