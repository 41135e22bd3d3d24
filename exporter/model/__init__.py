"""The coordinator model: pure state rebuilt from source events, no Prometheus, no I/O.

API:
    sinks = ObservationSinks(append_latency=[...6 DurationSink by state id...],
                             marker_completion_commit=..., marker_completion_abort=...)
        (exporter.metrics.LatencyRecorders.sinks() builds one)
    model = CoordinatorModel(sinks)
    model.apply(event) / model.apply_batch(events)       # the writer thread
    model.snapshot(now_ms, late_padding_ms, read_sinks)  # counters and gauges (ModelSnapshot), and
                                                         # the sinks read at the same instant
    model.in_flight_transactions(states, limit, min_age_ms, now_ms)   # InFlightSelection
    model.tracked_id(transactional_id), model.last_hanging_scan()

Readers get the plain rows of exporter.model.reading; each query takes the model's lock itself. See
exporter.model.coordinator for the counting rules (live-only, tombstones, unwritten states, timeout
aborts: exporter.contracts.lifecycle.is_timeout_abort, shared with the Spark pipeline).
"""

from exporter.model.coordinator import CoordinatorModel, Event
from exporter.model.reading import (
    AppendClockRow,
    AppendErrorRow,
    CoordinatorLoadsRow,
    InFlightSelection,
    InFlightTransaction,
    MarkerErrorRow,
    ModelSnapshot,
    PartitionRow,
    TrackedId,
)
from exporter.model.sinks import DurationSink, ObservationSinks

__all__ = [
    "AppendClockRow",
    "AppendErrorRow",
    "CoordinatorLoadsRow",
    "CoordinatorModel",
    "DurationSink",
    "Event",
    "InFlightSelection",
    "InFlightTransaction",
    "MarkerErrorRow",
    "ModelSnapshot",
    "ObservationSinks",
    "PartitionRow",
    "TrackedId",
]
