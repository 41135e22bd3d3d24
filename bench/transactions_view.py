"""Cost of the transactions view (GET /transactions): the top `--limit` of `--in-flight` in-flight
transactions, and how long it holds the model's lock. Target: top 100 of 100k in <= 20 ms, the lock
held a few ms at most.

    .venv/bin/python bench/transactions_view.py [--in-flight 100000] [--tracked 1000000] [--limit 100]

The model is loaded as the live source loads it (values decoded without their partitions, the
bytes kept for the in-flight ones), over 50 partitions, with `--tracked` ids in all (the rest
completed). Timed, `--repeat` times each: the JSON document (lock, selection, rows), its JSON
encoding, and the HTML page; with no filter and with a state + minimum-age filter. The lock's hold
time is measured on the model's own lock, around the code that really holds it.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import PARTITIONS, partition_of
from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.contracts.events import PartitionAssigned, PartitionReplayed, TransactionLogRecords
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.view import page
from exporter.view.query import document, parse_query

S = TransactionState
START_MS = 1_700_000_000_000


class TimedLock:
    """The model's lock, recording how long each holder kept it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.held: list[float] = []

    def __enter__(self) -> None:
        self._lock.acquire()
        self._since = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.held.append(time.perf_counter() - self._since)
        self._lock.release()


def load(tracked: int, in_flight: int) -> CoordinatorModel:
    model = CoordinatorModel(LatencyRecorders(now_ms=START_MS).sinks())
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
    every = max(1, tracked // in_flight)
    touched = {"orders": [0, 1, 2], "ledger": [3]}
    for i in range(tracked):
        tid = f"payments-service-{i:07d}"
        ts = START_MS + i
        if i % every == 0 and i // every < in_flight:
            state = S.PREPARE_COMMIT if i % 3 == 0 else S.ONGOING
            value = TransactionLogValue(
                version=1,
                producer_id=1000 + i,
                producer_epoch=3,
                transaction_timeout_ms=60_000,
                state=state,
                partitions=touched,
                last_update_timestamp_ms=ts,
                start_timestamp_ms=ts - 20,
            )
        else:
            value = TransactionLogValue(
                version=1,
                producer_id=1000 + i,
                producer_epoch=3,
                transaction_timeout_ms=60_000,
                state=S.COMPLETE_COMMIT,
                partitions={},
                last_update_timestamp_ms=ts,
                start_timestamp_ms=ts - 20,
            )
        record = decode_record(encode_key(tid), encode_value(value), i, ts, partitions=False)
        model.apply(TransactionLogRecords(partition_of(tid), [record], ts + 2, True))
    for p in range(PARTITIONS):
        model.apply(PartitionReplayed(p))
    return model


def ms(seconds: list[float]) -> str:
    ordered = sorted(seconds)
    return f"median {statistics.median(ordered) * 1000:6.2f} ms, max {ordered[-1] * 1000:6.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-flight", type=int, default=100_000)
    parser.add_argument("--tracked", type=int, default=1_000_000)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()

    started = time.perf_counter()
    model = load(max(args.tracked, args.in_flight), args.in_flight)
    count = model.in_flight_transactions(None, 1, 0, 0).matching
    print(
        f"{count:,} in flight of {max(args.tracked, args.in_flight):,} tracked ids over {PARTITIONS} partitions"
        f" (loaded in {time.perf_counter() - started:.1f} s)"
    )
    # How long readers hold the model's lock (a private of the model's: timed here only).
    lock = model._lock = TimedLock()  # type: ignore[assignment]  # because a timing stand-in for the model's lock
    now_ms = START_MS + max(args.tracked, args.in_flight) + 60_000
    gc.collect()
    for label, query_string in (("no filter", ""), ("state + min_age", "state=PREPARE_COMMIT&min_age=30s")):
        query = parse_query(f"{query_string}&limit={args.limit}".lstrip("&"))
        lock.held.clear()
        answer, encode, html = [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            doc = document(model, query, now_ms, 300_000, "kafka:9092", broker_log=True)
            t1 = time.perf_counter()
            json.dumps(doc)
            t2 = time.perf_counter()
            page.render(doc, query)
            t3 = time.perf_counter()
            answer.append(t1 - t0)
            encode.append(t2 - t1)
            html.append(t3 - t2)
        print(
            f"\n{label} ({query_string or 'all states'}), top {len(doc['transactions'])} of {doc['in_flight_matching']:,},"
            f" {args.repeat} times:"
        )
        print(f"  lock held:            {ms(lock.held)}")
        print(f"  document (the query): {ms(answer)}")
        print(f"  + JSON encoding:      {ms([a + e for a, e in zip(answer, encode)])}")
        print(f"  + HTML page instead:  {ms([a + h for a, h in zip(answer, html)])}")


if __name__ == "__main__":
    main()
