"""LatencyRecorder: buckets exact against a reference count, quantiles exact within HdrHistogram
precision against a sorted reference and equal to the hdrhistogram package's."""

from __future__ import annotations

import math
import random

from hdrh.histogram import HdrHistogram
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.metrics.catalogue import DURATION_BUCKETS, QUANTILES
from exporter.metrics.hdr_layout import HIGHEST_TRACKABLE_MS, HdrLayout
from exporter.metrics.latency import LatencyRecorder

LAYOUT = HdrLayout(DURATION_BUCKETS)
WINDOW_MS = 300_000
TXN = {"transactional_id": "t", "producer_id": 1}  # the transaction every observation here is of


def reference_buckets(values_ms: list[int]) -> list[int]:
    """Cumulative count of values <= each bound (seconds), then all."""
    return [sum(1 for v in values_ms if v / 1000 <= b) for b in DURATION_BUCKETS] + [len(values_ms)]


def reference_quantile(values_ms: list[int], q: float) -> int:
    ordered = sorted(values_ms)
    return ordered[max(1, int(q * len(ordered) + 0.5)) - 1]


def record_all(values_ms: list[int], now_ms: int = 0) -> LatencyRecorder:
    recorder = LatencyRecorder(LAYOUT, WINDOW_MS, 5, now_ms)
    for v in values_ms:
        recorder.record(v, now_ms, **TXN)
    return recorder


# Values around every bucket bound (where an unsplit HdrHistogram would misfile them), plus spread.
BOUNDARY_VALUES = [max(0, int(b * 1000) + d) for b in DURATION_BUCKETS for d in (-2, -1, 0, 1, 2)]
durations_ms = st.lists(st.one_of(st.sampled_from(BOUNDARY_VALUES), st.integers(0, 120_000)), min_size=1, max_size=300)


@given(durations_ms)
@settings(max_examples=200, deadline=None)
def test_bucket_counts_match_a_reference_count(values):
    snapshot = record_all(values).snapshot(0, QUANTILES)
    assert list(snapshot.cumulative_buckets) == reference_buckets(values)
    assert snapshot.sum_seconds == sum(values) / 1000


@given(durations_ms)
@settings(max_examples=200, deadline=None)
def test_quantiles_are_exact_within_three_significant_digits(values):
    snapshot = record_all(values).snapshot(0, QUANTILES)
    for q, got in zip(QUANTILES, snapshot.quantiles):
        want = reference_quantile(values, q)
        # HdrHistogram reports the highest value indistinguishable from the true one.
        assert want <= round(got * 1000) <= want + want // 1000, (q, want, got)


def test_quantiles_equal_the_hdrhistogram_package_away_from_bucket_bounds():
    rng = random.Random(7)
    values = [int(rng.lognormvariate(3, 1.5)) for _ in range(20_000)]
    values = [v for v in values if all(abs(v - b) > 40 for b in LAYOUT.bounds_ms)]
    hdr = HdrHistogram(1, HIGHEST_TRACKABLE_MS, 3)
    for v in values:
        hdr.record_value(v)
    snapshot = record_all(values).snapshot(0, QUANTILES)
    for q, got in zip(QUANTILES, snapshot.quantiles):
        assert round(got * 1000) == hdr.get_value_at_percentile(q * 100), q


def test_sub_millisecond_precision_is_exact_below_two_seconds():
    snapshot = record_all(list(range(1, 1001))).snapshot(0, QUANTILES)
    assert snapshot.quantiles == (0.5, 0.9, 0.99, 0.999, 1.0)


def test_window_slides_but_buckets_stay_cumulative():
    recorder = LatencyRecorder(LAYOUT, window_ms=300_000, slices=5, now_ms=0)
    for _ in range(10):
        recorder.record(1000, now_ms=0, **TXN)  # minute 0
    recorder.record(5, now_ms=250_000, **TXN)  # minute 4
    in_window = recorder.snapshot(299_999, QUANTILES)
    assert in_window.window_count == 11
    assert in_window.quantiles[0] == 1.0

    slid = recorder.snapshot(300_000, QUANTILES)  # minute 0 left the window
    assert slid.window_count == 1
    assert slid.quantiles == (0.005,) * 5
    assert slid.cumulative_buckets == in_window.cumulative_buckets
    assert slid.cumulative_buckets[-1] == 11

    idle = recorder.snapshot(10_000_000, QUANTILES)
    assert idle.window_count == 0
    assert all(math.isnan(q) for q in idle.quantiles)
    assert idle.cumulative_buckets == in_window.cumulative_buckets


def test_a_clock_going_back_keeps_filling_the_current_slice():
    recorder = LatencyRecorder(LAYOUT, 300_000, 5, now_ms=120_000)
    recorder.record(3, now_ms=120_000, **TXN)
    recorder.record(4, now_ms=1_000, **TXN)
    assert recorder.snapshot(120_000, QUANTILES).window_count == 2


def test_out_of_range_values_are_clamped():
    snapshot = record_all([-20, HIGHEST_TRACKABLE_MS * 10]).snapshot(0, (0.5, 1.0))
    assert snapshot.cumulative_buckets[0] == 1  # -20 ms counts as 0 ms
    assert snapshot.cumulative_buckets[-1] == 2
    assert snapshot.quantiles[0] == 0.0
    assert HIGHEST_TRACKABLE_MS <= snapshot.quantiles[1] * 1000 <= HIGHEST_TRACKABLE_MS * 1.001
    assert snapshot.sum_seconds == HIGHEST_TRACKABLE_MS / 1000


def test_sum_and_count_survive_slices_leaving_the_window():
    recorder = LatencyRecorder(LAYOUT, window_ms=300_000, slices=5, now_ms=0)
    values = [3, 2_501, 70_001, -4]
    for minute, v in enumerate(values):
        recorder.record(v, now_ms=minute * 60_000, **TXN)
    late = recorder.snapshot(3_600_000, QUANTILES)
    assert late.window_count == 0
    assert late.cumulative_buckets == tuple(reference_buckets([3, 2_501, 70_001, 0]))
    assert late.sum_seconds == (3 + 2_501 + 70_001) / 1000
