"""LatencyRecorder: one recording structure per series, read two ways at scrape time.

- Prometheus histogram buckets, cumulative since start (Prometheus histograms are counters);
- exact quantiles (HdrHistogram precision, exporter.metrics.hdr_layout) over a sliding window.

Recording is one dict increment in the current time slice plus a running sum. The window is a ring
of `slices` time slices of `window_ms / slices` each, rotated by the observation's (or scrape's)
wall clock, so quantiles cover the last `window_ms` minus at most one slice, like a Prometheus
summary's max_age/age_buckets. A slice leaving the window is folded into per-bucket all-time
counts, so memory is bounded by the number of distinct keys, not by observations.

Each Prometheus bucket also reports its slowest recent observation, with the transactional id and
producer id it was about (rendered as an OpenMetrics exemplar). A slice keeps the first observation
of each key beside its count (an allocation per new key per slice, none per observation); at scrape
time a bucket reports, of its largest key in the window, the first observation of the newest slice
that has it, or nothing when the window has none. So "recent" is the quantiles' window, and
"slowest" is exact below 2,048 ms and within a key's 0.1% above. A spike stays its bucket's exemplar
for a whole window unless a slower one comes, and a bucket's exemplar only ever moves to a later
observation (Prometheus drops an exemplar older than the last one it stored for the series).

Not thread-safe: the model's writer and the collector share the model's lock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from exporter.metrics.hdr_layout import EXACT_BELOW_MS, HIGHEST_TRACKABLE_MS, HdrLayout


class Observation(NamedTuple):
    value_ms: int
    observed_at_ms: int
    transactional_id: str
    producer_id: int


@dataclass(frozen=True, slots=True)
class LatencySnapshot:
    # Cumulative count per bucket bound, then the +Inf bucket (= count of all observations).
    cumulative_buckets: tuple[int, ...]
    sum_seconds: float
    # Quantiles over the window, in seconds, in the order asked for; NaN when the window is empty.
    quantiles: tuple[float, ...]
    window_count: int
    # Per bucket (not cumulative; last = +Inf): its slowest observation of the window, or None.
    exemplars: tuple[Observation | None, ...] = ()


class LatencyRecorder:
    __slots__ = (
        "_closed",
        "_closed_firsts",
        "_closed_total",
        "_coarse_excess_ms",
        "_current",
        "_firsts",
        "_layout",
        "_retired_buckets",
        "_retired_sum_ms",
        "_slice_end_ms",
        "_slice_id",
        "_slice_ms",
        "_slices",
    )

    def __init__(self, layout: HdrLayout, window_ms: int, slices: int, now_ms: int = 0) -> None:
        if slices < 1 or window_ms < slices:
            raise ValueError(f"window of {window_ms} ms in {slices} slices")
        self._layout = layout
        # The first observation of each key of the current slice; of the closed slices in the window.
        self._firsts: dict[int, Observation] = {}
        self._closed_firsts: deque[dict[int, Observation]] = deque()
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

    def record(self, value_ms: int, now_ms: int, transactional_id: str, producer_id: int) -> None:
        if now_ms >= self._slice_end_ms:
            self._advance(now_ms)
        if 0 <= value_ms < EXACT_BELOW_MS:
            current = self._current
            count = current.get(value_ms)
            if count is None:
                current[value_ms] = 1
                self._firsts[value_ms] = Observation(value_ms, now_ms, transactional_id, producer_id)
            else:
                current[value_ms] = count + 1
        else:
            self._record_coarse(value_ms, now_ms, transactional_id, producer_id)

    def _record_coarse(self, value_ms: int, now_ms: int, transactional_id: str, producer_id: int) -> None:
        # Negative (the exporter's clock is behind the broker's) or beyond the exact range.
        value_ms = max(value_ms, 0)
        recorded_ms = min(value_ms, HIGHEST_TRACKABLE_MS)
        key = self._layout.key(recorded_ms)
        count = self._current.get(key)
        if count is None:
            self._current[key] = 1
            # The exemplar keeps the value as observed, beyond the trackable range too (+Inf bucket).
            self._firsts[key] = Observation(value_ms, now_ms, transactional_id, producer_id)
        else:
            self._current[key] = count + 1
        self._coarse_excess_ms += recorded_ms - key

    def snapshot(self, now_ms: int, quantiles: Sequence[float]) -> LatencySnapshot:
        if now_ms >= self._slice_end_ms:
            self._advance(now_ms)
        window = dict(self._closed_total)
        for key, count in self._current.items():
            window[key] = window.get(key, 0) + count
        keys = sorted(window)

        layout = self._layout
        buckets = list(self._retired_buckets)
        largest: dict[int, int] = {}  # bucket index -> its largest key in the window
        for key in keys:
            bucket = layout.bucket_index(key)
            buckets[bucket] += window[key]
            largest[bucket] = key
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
            tuple(self._first_of(largest[b]) if b in largest else None for b in range(len(buckets))),
        )

    def _first_of(self, key: int) -> Observation:
        """The first observation of `key` in the newest slice of the window that has it."""
        first = self._firsts.get(key)
        if first is None:
            for firsts in reversed(self._closed_firsts):
                first = firsts.get(key)
                if first is not None:
                    break
        assert first is not None, "a key in the window was observed in one of its slices"
        return first

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
        self._close(self._current, self._firsts)
        self._current = {}
        self._firsts = {}
        # Slices passed without observations still age the window.
        for _ in range(min(slice_id - self._slice_id, self._slices) - 1):
            self._close({}, {})
        self._slice_id = slice_id
        self._slice_end_ms = (slice_id + 1) * self._slice_ms

    def _close(self, finished: dict[int, int], firsts: dict[int, Observation]) -> None:
        total = self._closed_total
        for key, count in finished.items():
            total[key] = total.get(key, 0) + count
        self._closed.append(finished)
        self._closed_firsts.append(firsts)
        # The window is the current slice plus `slices - 1` closed ones.
        if len(self._closed) >= self._slices:
            leaving = self._closed.popleft()
            self._closed_firsts.popleft()
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
