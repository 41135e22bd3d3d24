"""Cost of one latency observation: the hdrhistogram package vs LatencyRecorder.record.

.venv/bin/python bench/latency_record.py
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hdrh.histogram import HdrHistogram

from exporter.metrics.catalogue import APPEND_LATENCY
from exporter.metrics.hdr_layout import HIGHEST_TRACKABLE_MS, HdrLayout
from exporter.metrics.latency import LatencyRecorder


def per_call_ns(record, values: list[int]) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for v in values:
            record(v, 0, "orders-7", 4000)
        best = min(best, time.perf_counter() - start)
    return best / len(values) * 1e9


def main() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    rng = random.Random(5)
    values = [int(rng.lognormvariate(1.6, 1.2)) for _ in range(500_000)]
    hdr = HdrHistogram(1, HIGHEST_TRACKABLE_MS, 3)
    recorder = LatencyRecorder(HdrLayout(APPEND_LATENCY.buckets), 300_000, 5)
    print(
        f"hdrh HdrHistogram.record_value: {per_call_ns(lambda v, *_: hdr.record_value(v), values):6.0f} ns/observation"
    )
    print(f"LatencyRecorder.record:         {per_call_ns(recorder.record, values):6.0f} ns/observation")


if __name__ == "__main__":
    main()
