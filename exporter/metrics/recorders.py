"""The latency recorders behind the catalogue's two histograms, handed to the model as its sinks."""

from __future__ import annotations

from exporter import defaults
from exporter.contracts.lifecycle import TRANSACTION_RESULTS
from exporter.metrics.catalogue import (
    APPEND_LATENCY,
    DEFAULT_QUANTILE_WINDOW_SLICES,
    MARKER_COMPLETION,
    TARGET_STATES,
    TRANSACTION_DURATION,
)
from exporter.metrics.hdr_layout import HdrLayout
from exporter.metrics.latency import LatencyRecorder
from exporter.model.sinks import ObservationSinks


class LatencyRecorders:
    def __init__(
        self,
        window_seconds: float = defaults.LATENCY_WINDOW_SECONDS,
        slices: int = DEFAULT_QUANTILE_WINDOW_SLICES,
        now_ms: int = 0,
    ) -> None:
        window_ms = int(window_seconds * 1000)
        append_layout = HdrLayout(APPEND_LATENCY.buckets)
        completion_layout = HdrLayout(MARKER_COMPLETION.buckets)
        # Indexed by target state id, in TARGET_STATES order.
        self.append_latency: tuple[LatencyRecorder, ...] = tuple(
            LatencyRecorder(append_layout, window_ms, slices, now_ms) for _ in TARGET_STATES
        )
        self.marker_completion: dict[str, LatencyRecorder] = {
            "commit": LatencyRecorder(completion_layout, window_ms, slices, now_ms),
            "abort": LatencyRecorder(completion_layout, window_ms, slices, now_ms),
        }
        duration_layout = HdrLayout(TRANSACTION_DURATION.buckets)
        # In TRANSACTION_RESULTS order, as the model indexes them.
        self.transaction_duration: dict[str, LatencyRecorder] = {
            result: LatencyRecorder(duration_layout, window_ms, slices, now_ms) for result in TRANSACTION_RESULTS
        }

    def sinks(self) -> ObservationSinks:
        return ObservationSinks(
            append_latency=self.append_latency,
            marker_completion_commit=self.marker_completion["commit"],
            marker_completion_abort=self.marker_completion["abort"],
            transaction_duration=tuple(self.transaction_duration.values()),
        )
