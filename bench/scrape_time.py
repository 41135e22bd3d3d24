"""Scrape time of TransactionCollector at default cardinality: 50 partitions, 6 target states,
5 quantiles, 15 buckets; 100k transactional ids, 2,000 pending, and 5 minutes of latencies
(lognormal around 5 ms with a tail to seconds, so the windows hold many distinct values).

    .venv/bin/python bench/scrape_time.py [--scrapes 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from bench.synthetic import PARTITIONS, transaction_cycles
from exporter.codec import decode_record
from exporter.contracts.events import (
    PartitionAssigned,
    PartitionProgress,
    PartitionReplayed,
    SourceStatus,
    TransactionLogRecords,
)
from exporter.metrics import LatencyRecorders, TransactionCollector
from exporter.model import CoordinatorModel

START_MS = 1_700_000_000_000
WINDOW_MS = 300_000


def build(rng: random.Random) -> tuple[CoordinatorModel, LatencyRecorders, int]:
    recorders = LatencyRecorders(now_ms=START_MS)
    model = CoordinatorModel(recorders.sinks())
    model.apply(SourceStatus(True))
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
        model.apply(PartitionReplayed(p))
        model.apply(PartitionProgress(p, 0, 1_000_000))
    # 100k ids through full cycles, then 2,000 of them left pending.
    for r in transaction_cycles(100_000, 100_000, start_ms=START_MS):
        record = decode_record(r.key, r.value, r.offset, r.timestamp_ms)
        model.apply(TransactionLogRecords(r.partition, [record], r.timestamp_ms + 3, False))
    pending = 0
    for r in transaction_cycles(2_000, 2_000, start_ms=START_MS + 200_000, seed=2):
        record = decode_record(r.key, r.value, r.offset, r.timestamp_ms)
        assert record.value is not None  # (the cycles write no tombstone)
        if record.value.state in (1, 2, 3):
            model.apply(TransactionLogRecords(r.partition, [record], r.timestamp_ms + 3, False))
            pending += record.value.state in (2, 3)
    # Five minutes of append latencies and marker completions.
    for i in range(600_000):
        now = START_MS + i * WINDOW_MS // 600_000
        latency = int(rng.lognormvariate(1.6, 1.2))
        recorders.append_latency[i % 6].record(latency, now, "orders-7", i)
        if i % 3 == 0:
            recorders.marker_completion["commit" if i % 50 else "abort"].record(latency * 4, now, "orders-7", i)
    return model, recorders, START_MS + WINDOW_MS


def timed(fn, scrapes: int) -> tuple[float, float]:
    times = []
    for _ in range(scrapes):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times) * 1000, times[int(len(times) * 0.99) - 1] * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scrapes", type=int, default=200)
    args = parser.parse_args()
    model, recorders, now_ms = build(random.Random(3))
    registry = CollectorRegistry()
    registry.register(TransactionCollector(model, recorders, clock=lambda: now_ms / 1000))

    text = generate_latest(registry)
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    print(f"{series} series, {len(text):,} bytes of Prometheus text")
    for name, fn in (
        ("collect() only", lambda: list(registry.collect())),
        ("Prometheus text", lambda: generate_latest(registry)),
        ("OpenMetrics", lambda: generate_openmetrics(registry)),
    ):
        median, p99 = timed(fn, args.scrapes)
        print(f"{name:<16} median {median:.2f} ms, p99 {p99:.2f} ms over {args.scrapes} scrapes")


if __name__ == "__main__":
    main()
