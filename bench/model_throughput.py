"""Transitions/s through codec (decode_record) + event + CoordinatorModel + latency recording, one core.

    .venv/bin/python bench/model_throughput.py [--transactions 200000] [--tids 100000] [--run-length 20]

The records reach the model as the live source hands them over: the codec called without building
TransactionPartitions, which the model never reads (exporter.codec.PARTITIONS_SKIPPED), and each
partition's records in runs (TransactionLogRecords), as a consumer fetches them. `--run-length` is
the run size: the default 20 is the source's 1,000 records per poll spread evenly over 50 busy
partitions, the least a saturated exporter sees; 1 (every record from another partition than the
one before) is printed too, as the floor. The full decode is printed for scale. Each figure is for
the realistic mix of bench/synthetic.py, with the old uniform shape on the line below it.

"live path" is the whole of it as `txn-exporter run` does it: the source's own loop
(TransactionLogTail, building the runs from confluent-kafka Message objects, 1,000 per poll) and
the model's apply_batch, with a stand-in for the consumer that hands over prebuilt messages (the
fetch itself is librdkafka's and is left out). Targets (issue 14): >= 300k transitions/s on the mix,
>= 250k with runs of 1.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer

from bench.synthetic import PARTITIONS, SHAPES, RawRecord, transaction_cycles
from exporter.codec import decode_record
from exporter.contracts.events import PartitionAssigned, PartitionReplayed, TransactionLogRecords
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources import topic_tail

POLL_RECORDS = 1000  # what `txn-exporter run` asks of each poll (TransactionLogTail.poll's default)


def as_fetched(records: list[RawRecord], run_length: int) -> list[list[RawRecord]]:
    """The records regrouped as a consumer receives them: per partition in offset order, `run_length`
    at a time, partitions taking turns."""
    by_partition: dict[int, list[RawRecord]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(r)
    runs: list[list[RawRecord]] = []
    for start in range(0, max(len(rs) for rs in by_partition.values()), run_length):
        runs.extend(rs[start : start + run_length] for rs in by_partition.values() if rs[start : start + run_length])
    return runs


def run_full(runs: list[list[RawRecord]]) -> float:
    first = runs[0][0].timestamp_ms
    recorders = LatencyRecorders(now_ms=first)
    model = CoordinatorModel(recorders.sinks())
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
        model.apply(PartitionReplayed(p))
    apply = model.apply
    start = time.perf_counter()
    for run in runs:
        # Received 3 ms after the last record of the run was appended.
        decoded = [decode_record(r.key, r.value, r.offset, r.timestamp_ms, False) for r in run]
        apply(TransactionLogRecords(run[0].partition, decoded, run[-1].timestamp_ms + 3, False))
    return time.perf_counter() - start


class _Delivering:
    """Stands in for confluent_kafka.Consumer inside TransactionLogTail: each poll's messages are
    handed over as librdkafka would, the first by poll(), the rest by consume()."""

    def __init__(self, settings: dict) -> None:
        self.polls: list[list] = []
        self._rest: list = []
        self.now_s = 0.0  # the tail's clock: 3 ms after the poll's last record was appended

    def poll(self, timeout: float):
        if not self.polls:
            return None
        first, *self._rest = messages = self.polls.pop()
        self.now_s = (messages[-1].timestamp()[1] + 3) / 1000
        return first

    def consume(self, n: int, timeout: float) -> list:
        return self._rest


def as_polls(runs: list[list[RawRecord]]) -> list[list]:
    """confluent-kafka Messages, POLL_RECORDS per poll, in reverse order (popped from the end)."""
    from confluent_kafka import Message

    messages = [
        Message(
            topic="__transaction_state",
            partition=r.partition,
            offset=r.offset,
            key=r.key,
            value=r.value,
            timestamp=(1, r.timestamp_ms),
        )
        for run in runs
        for r in run
    ]
    return [messages[i : i + POLL_RECORDS] for i in range(0, len(messages), POLL_RECORDS)][::-1]


def live_tail_and_model(
    first_ms: int, coordinator_log: bool = False
) -> tuple[CoordinatorModel, _Delivering, topic_tail.TransactionLogTail]:
    """A model and a tail of every partition, each followed and live as after replay (the tail's own
    ownership logic is skipped), the tail's consumer a _Delivering to hand it the polls."""
    recorders = LatencyRecorders(now_ms=first_ms)
    model = CoordinatorModel(recorders.sinks(), coordinator_log=coordinator_log)
    delivering = _Delivering({})
    tail = topic_tail.TransactionLogTail(
        "bench:0",
        all_partitions=True,
        clock=lambda: delivering.now_s,
        consumer_factory=lambda settings: cast(Consumer, delivering),
    )
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
        model.apply(PartitionReplayed(p))
    tail._followed = dict.fromkeys(range(PARTITIONS))
    return model, delivering, tail


def run_live_path(polls: list[list], first_ms: int) -> float:
    """The source's loop and the model, on messages already fetched."""
    model, delivering, tail = live_tail_and_model(first_ms)
    delivering.polls = list(polls)
    consume, apply_batch = tail._consume, model.apply_batch
    start = time.perf_counter()
    for _ in range(len(polls)):
        events: list = []
        consume(events, 0, POLL_RECORDS)
        apply_batch(events)
    return time.perf_counter() - start


def run_decode_only(records: list[RawRecord], partitions: bool) -> float:
    start = time.perf_counter()
    for r in records:
        decode_record(r.key, r.value, r.offset, r.timestamp_ms, partitions)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--transactions", type=int, default=200_000)
    parser.add_argument("--tids", type=int, default=100_000)
    parser.add_argument("--run-length", type=int, default=20)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

    # The realistic mix first; the old uniform shape as each figure's second line (bench/synthetic.py).
    figures = {shape: measure(args, shape) for shape in SHAPES}
    n = figures["mix"]["records"]
    print(
        f"{n} records ({args.transactions} transactions over {args.tids} transactional ids, {PARTITIONS} partitions), one core, best of {args.runs}"
    )
    for label, key, unit in (
        ("decode_record, partitions built: ", "decode_all", "records/s    "),
        ("decode_record as the source does:", "decode", "records/s    "),
        ("decode + event + model + metrics:", "full", "transitions/s"),
        ("  the same, runs of 1:           ", "single", "transitions/s"),
        ("live path (source loop + model): ", "live", "transitions/s"),
        ("  the same, runs of 1:           ", "live_single", "transitions/s"),
    ):
        for shape in SHAPES:
            f = figures[shape]
            seconds, count = f[key], f["records"]
            print(
                f"{label if shape == 'mix' else '':<34} {count / seconds:>10,.0f} {unit}  ({seconds / count * 1e6:.2f} us/record)  {shape}"
            )
    for shape in SHAPES:
        f = figures[shape]
        print(
            f"model + metrics share, {shape}: {(f['full'] - f['decode']) / f['records'] * 1e6:.2f} us/record (runs of {args.run_length})"
        )


def measure(args: argparse.Namespace, shape: str) -> dict[str, float]:
    records = list(transaction_cycles(args.tids, args.transactions, shape=shape))
    fetched = as_fetched(records, args.run_length)
    one_by_one = as_fetched(records, 1)
    first_ms = records[0].timestamp_ms
    polls, polls_single = as_polls(fetched), as_polls(one_by_one)
    # A live source streams records; keep the pre-built input out of the garbage collector's way.
    gc.freeze()
    try:
        return {
            "records": len(records),
            "decode_all": min(run_decode_only(records, True) for _ in range(args.runs)),
            "decode": min(run_decode_only(records, False) for _ in range(args.runs)),
            "full": min(run_full(fetched) for _ in range(args.runs)),
            "single": min(run_full(one_by_one) for _ in range(args.runs)),
            "live": min(run_live_path(polls, first_ms) for _ in range(args.runs)),
            "live_single": min(run_live_path(polls_single, first_ms) for _ in range(args.runs)),
        }
    finally:
        gc.unfreeze()


if __name__ == "__main__":
    main()
