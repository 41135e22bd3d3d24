"""Memory per tracked transactional id, measured with tracemalloc, at 1M ids over 50 partitions.

    .venv/bin/python bench/model_memory.py [--tids 1000000] [--ongoing-percent 5] [--pending-percent 1]

Ids are loaded the way the exporter meets them: a replay of each partition (one record per id,
decoded from its own bytes as the live source decodes them, without TransactionPartitions), then
live traffic. The state mix is that of an idle-ish cluster: most ids completed, 5% ongoing, 1%
waiting for markers. Counted: everything the model and the latency recorders hold after the events
are gone (dict tables, id strings, pending index, and for the in-flight ids their last record with
its value's bytes, 2 topics x 3 partitions, which the transactions view decodes when it shows them).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import PARTITIONS, partition_of
from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.contracts.events import PartitionAssigned, PartitionReplayed, TransactionLogRecords
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel

S = TransactionState
START_MS = 1_700_000_000_000


def state_of(i: int, ongoing_percent: int, pending_percent: int) -> TransactionState:
    share = i % 100
    if share < pending_percent:
        return S.PREPARE_COMMIT
    if share < pending_percent + ongoing_percent:
        return S.ONGOING
    return S.COMPLETE_COMMIT if i % 3 else S.EMPTY


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tids", type=int, default=1_000_000)
    parser.add_argument("--ongoing-percent", type=int, default=5)
    parser.add_argument("--pending-percent", type=int, default=1)
    args = parser.parse_args()

    # Encoded values are built once per state, then copied per record: each record has its own bytes.
    touched = {"orders": [0, 1, 2], "ledger": [3, 4, 5]}
    values = {
        s: encode_value(
            TransactionLogValue(
                version=1,
                producer_id=7,
                producer_epoch=0,
                transaction_timeout_ms=60_000,
                state=s,
                partitions=touched if s < S.COMPLETE_COMMIT else {},
                last_update_timestamp_ms=START_MS,
                start_timestamp_ms=START_MS,
            )
        )
        for s in (S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    }
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    recorders = LatencyRecorders(now_ms=START_MS)
    model = CoordinatorModel(recorders.sinks())
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
    started = time.perf_counter()
    for i in range(args.tids):
        tid = f"payments-service-{i:07d}"
        state = state_of(i, args.ongoing_percent, args.pending_percent)
        value = bytes(bytearray(values[state]))
        record = decode_record(encode_key(tid), value, i, START_MS + i // 1000, partitions=False)
        model.apply(TransactionLogRecords(partition_of(tid), [record], START_MS + i // 1000 + 2, True))
    for p in range(PARTITIONS):
        model.apply(PartitionReplayed(p))
    loaded = time.perf_counter() - started
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()

    taken, _ = model.snapshot(START_MS, 0, lambda: None)
    tracked = sum(taken.transactions_by_state)
    pending = taken.pending_markers
    in_flight = model.in_flight_transactions(None, 1, 0, START_MS).matching
    print(
        f"{tracked:,} transactional ids tracked ({in_flight:,} in flight, {pending:,} of them pending) over"
        f" {PARTITIONS} partitions"
    )
    print(f"traced memory: {used / 2**20:,.1f} MiB = {used / tracked:.0f} bytes per tracked transactional id")
    print(f"(load took {loaded:.1f} s under tracemalloc)")


if __name__ == "__main__":
    main()
