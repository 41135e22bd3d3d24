"""Transitions/s through codec (decode_record) + event + CoordinatorModel + latency recording, one core.

    .venv/bin/python bench/model_throughput.py [--transactions 200000] [--tids 100000]
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import PARTITIONS, transaction_cycles  # noqa: E402
from exporter.codec import decode_record  # noqa: E402
from exporter.metrics import LatencyRecorders  # noqa: E402
from exporter.model import CoordinatorModel  # noqa: E402
from exporter.sources.events import PartitionAssigned, PartitionReplayed, TransactionLogEvent  # noqa: E402


def run_full(records) -> float:
    recorders = LatencyRecorders(now_ms=records[0].timestamp_ms)
    model = CoordinatorModel(recorders.sinks())
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
        model.apply(PartitionReplayed(p))
    apply = model.apply
    start = time.perf_counter()
    for r in records:
        # Received 3 ms after the append was submitted.
        apply(TransactionLogEvent(r.partition, decode_record(r.key, r.value, r.offset, r.timestamp_ms), r.timestamp_ms + 3, False))
    return time.perf_counter() - start


def run_decode_only(records) -> float:
    start = time.perf_counter()
    for r in records:
        decode_record(r.key, r.value, r.offset, r.timestamp_ms)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=200_000)
    parser.add_argument("--tids", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    records = list(transaction_cycles(args.tids, args.transactions))
    # A live source streams records; keep the pre-built input out of the garbage collector's way.
    gc.freeze()
    n = len(records)
    print(f"{n} records ({args.transactions} transactions over {args.tids} transactional ids, {PARTITIONS} partitions), one core, best of {args.runs}")
    decode = min(run_decode_only(records) for _ in range(args.runs))
    full = min(run_full(records) for _ in range(args.runs))
    print(f"decode_record only:               {n / decode:>10,.0f} records/s  ({decode / n * 1e6:.2f} us/record)")
    print(f"decode + event + model + metrics: {n / full:>10,.0f} transitions/s  ({full / n * 1e6:.2f} us/record)")
    print(f"model + metrics share:            {(full - decode) / n * 1e6:.2f} us/record")


if __name__ == "__main__":
    main()
