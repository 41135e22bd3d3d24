"""LatencyRecorder: one recording structure per series, read two ways at scrape time.

- Prometheus histogram buckets, cumulative since start (Prometheus histograms are counters);
- exact quantiles (HdrHistogram precision, exporter.metrics.hdr_layout) over a sliding window.

Recording is one dict increment in the current time slice plus a running sum. The window is a ring
of `slices` time slices of `window_ms / slices` each, rotated by the observation's (or scrape's)
wall clock, so quantiles cover the last `window_ms` minus at most one slice, like a Prometheus
summary's max_age/age_buckets. A slice leaving the window is folded into per-bucket all-time
counts, so memory is bounded by the number of distinct keys, not by observations.

Not thread-safe: the model's writer and the collector share the model's lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.metrics.hdr_layout import EXACT_BELOW_MS, HIGHEST_TRACKABLE_MS, HdrLayout


@dataclass(frozen=True, slots=True)
class LatencySnapshot:
    # Cumulative count per bucket bound, then the +Inf bucket (= count of all observations).
    cumulative_buckets: tuple[int, ...]
    sum_seconds: float
    # Quantiles over the window, in seconds, in the order asked for; NaN when the window is empty.
    quantiles: tuple[float, ...]
    window_count: int


class LatencyRecorder:
    __slots__ = (
        "_layout",
        "_slice_ms",
        "_slices",
        "_slice_id",
        "_slice_end_ms",
        "_current",
        "_closed",
        "_closed_total",
        "_retired_buckets",
        "_retired_sum_ms",
        "_coarse_excess_ms",
    )

    def __init__(self, layout: HdrLayout, window_ms: int, slices: int, now_ms: int = 0) -> None:
        if slices < 1 or window_ms < slices:
            raise ValueError(f"window of {window_ms} ms in {slices} slices")
        self._layout = layout
        self._slice_ms = window_ms // slices
        self._slices = slices
        self._slice_id = now_ms // self._slice_ms
        self._slice_end_ms = (self._slice_id + 1) * self._slice_ms
        self._current: dict[int, int] = {}
        # Closed slices still in the window, oldest first, and their merged counts.
        self._closed: deque[dict[int, int]] = deque()
        self._closed_total: dict[int, int] = {}
        # Non-cumulative counts per Prometheus bucket (last = +Inf) of slices that left the window.
        self._retired_buckets = [0] * (len(layout.bounds_ms) + 1)
        # The exact sum is the keys' sum plus what coarse keys dropped: the hot path adds nothing.
        self._retired_sum_ms = 0
        self._coarse_excess_ms = 0

    def record(self, value_ms: int, now_ms: int) -> None:
        if now_ms >= self._slice_end_ms:
            self._advance(now_ms)
        if 0 <= value_ms < EXACT_BELOW_MS:
            current = self._current
            current[value_ms] = current.get(value_ms, 0) + 1
        else:
            self._record_coarse(value_ms)

    def _record_coarse(self, value_ms: int) -> None:
        # Negative (the exporter's clock is behind the broker's) or beyond the exact range.
        value_ms = min(max(value_ms, 0), HIGHEST_TRACKABLE_MS)
        key = self._layout.key(value_ms)
        self._current[key] = self._current.get(key, 0) + 1
        self._coarse_excess_ms += value_ms - key

    def snapshot(self, now_ms: int, quantiles: Sequence[float]) -> LatencySnapshot:
        if now_ms >= self._slice_end_ms:
            self._advance(now_ms)
        window = dict(self._closed_total)
        for key, count in self._current.items():
            window[key] = window.get(key, 0) + count
        keys = sorted(window)

        layout = self._layout
        buckets = list(self._retired_buckets)
        for key in keys:
            buckets[layout.bucket_index(key)] += window[key]
        running = 0
        for i, count in enumerate(buckets):
            running += count
            buckets[i] = running

        window_count = sum(window.values())
        sum_ms = self._retired_sum_ms + self._coarse_excess_ms
        for key, count in window.items():
            sum_ms += key * count
        return LatencySnapshot(
            tuple(buckets),
            sum_ms / 1000,
            tuple(self._quantile(keys, window, window_count, q) for q in quantiles),
            window_count,
        )

    def _quantile(self, keys: list[int], window: dict[int, int], total: int, q: float) -> float:
        # HdrHistogram's getValueAtPercentile: the highest equivalent value of the first key whose
        # cumulative count reaches round(q * total).
        if total == 0:
            return float("nan")
        target = max(1, int(q * total + 0.5))
        running = 0
        for key in keys:
            running += window[key]
            if running >= target:
                return self._layout.highest_equivalent(key) / 1000
        raise AssertionError("unreachable: the target never exceeds the total")

    def _advance(self, now_ms: int) -> None:
        slice_id = now_ms // self._slice_ms
        if slice_id <= self._slice_id:
            return  # the clock went back: keep filling the current slice
        self._close(self._current)
        self._current = {}
        # Slices passed without observations still age the window.
        for _ in range(min(slice_id - self._slice_id, self._slices) - 1):
            self._close({})
        self._slice_id = slice_id
        self._slice_end_ms = (slice_id + 1) * self._slice_ms

    def _close(self, finished: dict[int, int]) -> None:
        total = self._closed_total
        for key, count in finished.items():
            total[key] = total.get(key, 0) + count
        self._closed.append(finished)
        # The window is the current slice plus `slices - 1` closed ones.
        if len(self._closed) >= self._slices:
            leaving = self._closed.popleft()
            retired = self._retired_buckets
            bucket_index = self._layout.bucket_index
            for key, count in leaving.items():
                left = total[key] - count
                if left:
                    total[key] = left
                else:
                    del total[key]
                retired[bucket_index(key)] += count
                self._retired_sum_ms += key * count
