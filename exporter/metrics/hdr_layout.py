"""HdrHistogram's counts layout (1 ms unit, 3 significant digits), keyed by value, with the few
sub-buckets that straddle a Prometheus bucket bound split at the bound.

Why not the `hdrhistogram` package itself: its pure-Python `record_value` costs ~1.2 us, a third of
the whole per-record budget (250k records/s), and a histogram per sub-window would still need a
second structure for all-time Prometheus buckets. Instead every observation lands in a dict keyed
by its HdrHistogram *lowest equivalent value* (so a sub-window is `{key: count}`, sparse, and can be
replayed into `hdrh.histogram.HdrHistogram.record_value(key, count)` at any time). Not replayed at
scrape either: +58% a scrape, its encoded histograms 43% (docs/benchmarks.md#latency-observation-cost).

Why split: above 2047 ms an HdrHistogram sub-bucket spans 2..32 ms, so e.g. [2500, 2501] holds a
value on each side of the `le="2.5"` bound. Splitting such a sub-bucket at the bound keeps the
Prometheus bucket counts exact; the split halves are narrower than HdrHistogram's, so quantiles
stay within its precision (they are never less precise than the package's).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence

# Values below this are recorded exactly (HdrHistogram's first bucket: 2048 sub-buckets of 1 ms).
EXACT_BELOW_MS = 2048
_SUB_BUCKET_MAGNITUDE = 11  # log2(EXACT_BELOW_MS)
# Larger values are clamped: an append or marker round more than an hour late is "very late".
HIGHEST_TRACKABLE_MS = 3_600_000


class HdrLayout:
    """Maps a duration in ms to its key, and a key back to its Prometheus bucket and range."""

    __slots__ = ("_split_at", "bounds_ms")

    def __init__(self, bucket_bounds_seconds: Sequence[float]) -> None:
        # `le` is inclusive and values are whole ms, so v <= 2.5 ms means v <= 2 ms.
        self.bounds_ms: tuple[int, ...] = tuple(math.floor(round(b * 1000, 6)) for b in bucket_bounds_seconds)
        # lowest equivalent value of a straddling sub-bucket -> first value above the bound in it.
        self._split_at: dict[int, int] = {}
        for bound in self.bounds_ms:
            low, high = _hdr_range(bound)
            if bound < high:
                self._split_at[low] = bound + 1

    def key(self, value_ms: int) -> int:
        """Key of a value: the lowest value it is indistinguishable from. Clamps to [0, highest]."""
        if value_ms < EXACT_BELOW_MS:
            return value_ms if value_ms > 0 else 0
        if value_ms > HIGHEST_TRACKABLE_MS:
            value_ms = HIGHEST_TRACKABLE_MS
        shift = value_ms.bit_length() - _SUB_BUCKET_MAGNITUDE
        low = (value_ms >> shift) << shift
        split = self._split_at.get(low)
        if split is not None and value_ms >= split:
            return split
        return low

    def highest_equivalent(self, key: int) -> int:
        """Largest value recorded under `key` (HdrHistogram reports quantiles as this value)."""
        low, high = _hdr_range(key)
        split = self._split_at.get(low)
        if split is not None and key < split:
            return split - 1
        return high

    def bucket_index(self, key: int) -> int:
        """Index of the Prometheus bucket (len(bounds_ms) is +Inf) every value under `key` falls in."""
        return bisect_left(self.bounds_ms, key)


def _hdr_range(value_ms: int) -> tuple[int, int]:
    """HdrHistogram's [lowest, highest] equivalent values of `value_ms`."""
    if value_ms < EXACT_BELOW_MS:
        return value_ms, value_ms
    shift = value_ms.bit_length() - _SUB_BUCKET_MAGNITUDE
    low = (value_ms >> shift) << shift
    return low, low + (1 << shift) - 1
