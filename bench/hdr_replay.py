"""What the hdrhistogram package would cost at scrape time, at bench/scrape_time.py's default
cardinality (5 minutes of latencies in every recorder's window): each window's sparse counts replayed
into an `HdrHistogram` for the quantiles instead of LatencyRecorder's own walk, and each window's
standard encoded histogram (compressed V2, base64: what any HdrHistogram library decodes), as
`/transactions`' JSON could offer it. The recording path is the same either way: replayed at scrape,
the package costs the records nothing.

    .venv/bin/python bench/hdr_replay.py [--scrapes 200]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hdrh.histogram import HdrHistogram
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

from bench.scrape_time import build
from exporter.metrics import TransactionCollector
from exporter.metrics.hdr_layout import HIGHEST_TRACKABLE_MS
from exporter.metrics.latency import LatencyRecorder, LatencySnapshot


def window(recorder: LatencyRecorder) -> dict[int, int]:
    """The recorder's window, {key: count}, merged as its snapshot merges it."""
    merged = dict(recorder._closed_total)
    for key, count in recorder._current.items():
        merged[key] = merged.get(key, 0) + count
    return merged


def replayed(counts: dict[int, int]) -> HdrHistogram:
    histogram = HdrHistogram(1, HIGHEST_TRACKABLE_MS, 3)
    for key, count in counts.items():
        histogram.record_value(key, count)
    return histogram


def cpu_ms(fn: Callable[[], object]) -> float:
    """The CPU time of one call, in ms: this thread's, so that other work on the machine counts less."""
    start = time.thread_time()
    fn()
    return (time.thread_time() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    model, recorders, now_ms = build(random.Random(3))
    registry = CollectorRegistry()
    registry.register(TransactionCollector(model, recorders, clock=lambda: now_ms / 1000))
    every = [*recorders.append_latency, *recorders.marker_completion.values(), *recorders.transaction_duration.values()]
    held = [recorder for recorder in every if window(recorder)]
    own_snapshot = LatencyRecorder.snapshot

    def replaying_snapshot(self: LatencyRecorder, now: int, quantiles: Sequence[float]) -> LatencySnapshot:
        snapshot = own_snapshot(self, now, ())
        counts = window(self)
        if not counts:
            return dataclasses.replace(snapshot, quantiles=tuple(math.nan for _ in quantiles))
        histogram = replayed(counts)
        values = tuple(histogram.get_value_at_percentile(q * 100) / 1000 for q in quantiles)
        return dataclasses.replace(snapshot, quantiles=values)

    def replaying_scrape() -> None:
        LatencyRecorder.snapshot = replaying_snapshot  # type: ignore[method-assign, assignment]
        try:
            generate_latest(registry)
        finally:
            LatencyRecorder.snapshot = own_snapshot  # type: ignore[method-assign]

    # Each kind in turn, scrape by scrape, so that the machine's other work weighs on each alike.
    kinds: dict[str, Callable[[], object]] = {
        "scrape": lambda: generate_latest(registry),
        "replaying scrape": replaying_scrape,
        "windows merged": lambda: [window(recorder) for recorder in held],
        "windows encoded": lambda: [replayed(window(recorder)).encode() for recorder in held],
    }
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(args.scrapes):
        for kind, fn in kinds.items():
            times[kind].append(cpu_ms(fn))
    scrape, replaying, merged, encoded = (statistics.median(times[kind]) for kind in kinds)
    # The replaying scrape merges each window twice (its snapshot's, then the replay's): one taken out.
    extra = replaying - merged - scrape
    print(f"{len(held)} recorders with a window, {sum(len(window(r)) for r in held):,} distinct keys in all;")
    print(f"medians of {args.scrapes} scrapes each, CPU time:")
    print(f"  a scrape (Prometheus text), quantiles as now: {scrape:.2f} ms")
    print(f"  quantiles by replay instead:                  {extra:+.2f} ms, {extra / scrape:+.0%}")
    print(f"  every window encoded (V2, compressed):        {encoded:.2f} ms, {encoded / scrape:.0%} of a scrape")


if __name__ == "__main__":
    main()
