"""The exporter's Python CPU per transaction in the clock mode (--broker-log, the coordinator's DEBUG
`succeeded` lines) and in the fetch-timed mode, without a broker, by stage; one core, CPU time.

    .venv/bin/python bench/clock_path.py [--rate 1500] [--seconds 20] [--runs 3] [--profile]
    valgrind --tool=callgrind .venv/bin/python bench/clock_path.py --seconds 2 --runs 3 --modes clock   # less --runs 1

A transaction's work as `txn-exporter run` does it beside one broker: the mix of bench/synthetic.py
(3 records a transaction, as the paced load of bench/sidecar_cost.py writes), each record's
`succeeded` line as 4.4.0 writes it (about 560 bytes). Each second of traffic: the lines appended to
a file and read by BrokerLogFollower (the read and the parser), the line events applied to the model
(the line-record join), the records handed to TransactionLogTail's loop as librdkafka's consume()
would (fetched twice a second) and applied to the model (decode, model, the join, the histograms),
then the model's expiry; the cyclic collector set as the exporter sets it. The fetch-timed mode: the
same records, no log. librdkafka's own threads, the fetches and the HTTP server are not here
(bench/sidecar_cost.py has them). Instructions (callgrind): a run's are the difference of 3 runs and 1.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Consumer

from bench.model_throughput import POLL_RECORDS, _Delivering, as_fetched, as_polls, live_tail_and_model
from bench.synthetic import PARTITIONS, RawRecord, transaction_cycles
from exporter.app import GC_FIRST_GENERATION
from exporter.codec import decode_record
from exporter.sources.broker_log_tail import BrokerLogFollower

STAGES = ("log read + parse", "lines -> model", "records: tail loop", "records -> model", "expiry")
_LOGGER = b" (kafka.coordinator.transaction.TransactionStateManager)"


def succeeded_line(record: RawRecord) -> bytes:
    """The coordinator's `succeeded` line of `record`'s append, as 4.4.0 writes it, 1 ms after its
    last update (the log's times in UTC)."""
    decoded = decode_record(record.key, record.value, record.offset, record.timestamp_ms, True)
    value = decoded.value
    assert value is not None
    tid = decoded.transactional_id
    named = value.partitions or {}
    assert isinstance(named, dict)  # (decoded with its partitions)
    partitions = ", ".join(f"{t}-{p}" for t, ps in named.items() for p in ps)
    at = datetime.fromtimestamp((value.last_update_timestamp_ms + 1) / 1000, UTC)
    time_text = at.strftime("%Y-%m-%d %H:%M:%S,") + f"{at.microsecond // 1000:03d}"
    meta = (
        f"TxnTransitMetadata[producerId={value.producer_id}, prevProducerId={value.producer_id}, "
        f"nextProducerId=-1, producerEpoch={value.producer_epoch}, lastProducerEpoch=-1, "
        f"txnTimeoutMs={value.transaction_timeout_ms}, txnState={value.state.name}, topicPartitions=[{partitions}], "
        f"txnStartTimestamp={value.start_timestamp_ms}, txnLastUpdateTimestamp={value.last_update_timestamp_ms}, "
        f"clientTransactionVersion=TV_{value.client_transaction_version}]"
    )
    text = (
        f"[{time_text}] DEBUG [Transaction State Manager 1]: Updating {tid}'s transaction state to {meta} "
        f"with coordinator epoch 0 for {tid} succeeded"
    )
    return text.encode() + _LOGGER


def traffic(rate: int, seconds: int) -> list[list[RawRecord]]:
    """`seconds` seconds of records at `rate` transactions a second, by second of their timestamps."""
    start_ms = 1_700_000_000_000
    records = list(transaction_cycles(500, rate * seconds, start_ms=start_ms))
    # transaction_cycles spaces records 1 ms apart: respaced to the rate, 3 records a transaction.
    per_second = 3 * rate
    by_second: list[list[RawRecord]] = [[] for _ in range(len(records) // per_second + 1)]
    for n, record in enumerate(records):
        ms = start_ms + n * 1000 // per_second
        record.timestamp_ms = ms
        by_second[n // per_second].append(record)
    return [s for s in by_second if s]


def run(seconds_of_traffic: list[list[RawRecord]], clock_mode: bool, tmp: Path) -> dict[str, float]:
    """CPU seconds by stage over the whole traffic, in one mode."""
    model, delivering, tail = live_tail_and_model(seconds_of_traffic[0][0].timestamp_ms, coordinator_log=clock_mode)
    # The fetch pattern at these rates: fresh while the coordinator's clock times the appends, else busy;
    # neither notes each PREPARE_* for nudges, as the idle one does.
    fetch = tail._fetch
    fetch._idle = cast(Consumer, _Delivering({}))  # (not the one delivering)
    if clock_mode:
        fetch._fresh = cast(Consumer, delivering)
    path = tmp / "server.log"
    path.write_bytes(b"")
    follower = BrokerLogFollower(path, from_start=True)
    spent = dict.fromkeys(STAGES, 0.0)
    clock = time.process_time
    with path.open("ab", buffering=0) as log:
        for records in seconds_of_traffic:
            end_ms = records[-1].timestamp_ms + 5
            # Fetched twice a second (the fresh fetch; the busy one's, every resolution, bring the
            # same records in smaller runs: the record path's cost per record moves little).
            halves = (records[: len(records) // 2], records[len(records) // 2 :])
            for half in halves:
                polls = as_polls(as_fetched(half, max(1, len(half) // PARTITIONS)))
                delivering.polls = polls
                for _ in range(len(polls)):
                    events: list = []
                    t0 = clock()
                    tail._consume(events, 0, POLL_RECORDS)
                    t1 = clock()
                    model.apply_batch(events)
                    spent["records: tail loop"] += t1 - t0
                    spent["records -> model"] += clock() - t1
            if clock_mode:
                log.write(b"\n".join(succeeded_line_cache[id(r)] for r in records) + b"\n")
                t0 = clock()
                line_events = follower.poll()
                t1 = clock()
                model.apply_batch(line_events)
                spent["log read + parse"] += t1 - t0
                spent["lines -> model"] += clock() - t1
            t0 = clock()
            model.apply_batch([], end_ms)
            spent["expiry"] += clock() - t0
    follower.close()
    if clock_mode:  # every record timed by its line, none left waiting
        timed = sum(model._append_clock.coordinator_timed)
        assert timed == sum(map(len, seconds_of_traffic)), (timed, model._append_clock.waiting)
    return spent


succeeded_line_cache: dict[int, bytes] = {}


def best(runs: int, measure: Callable[[], dict[str, float]]) -> dict[str, float]:
    results = [measure() for _ in range(runs)]
    return min(results, key=lambda spent: sum(spent.values()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=1500, help="transactions a second")
    parser.add_argument("--seconds", type=int, default=20, help="seconds of traffic")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile the clock mode's run instead")
    parser.add_argument(
        "--modes",
        type=lambda s: [m for m in s.split(",") if m != "none"],
        default=["clock", "fetch"],
        help="clock, fetch, or none (the traffic made, nothing run: callgrind's baseline)",
    )
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    traffic_ = traffic(args.rate, args.seconds)
    for second in traffic_:
        for record in second:
            succeeded_line_cache[id(record)] = succeeded_line(record)
    transactions = sum(map(len, traffic_)) / 3
    gc.freeze()  # (the traffic made here: not the exporter's)
    gc.set_threshold(GC_FIRST_GENERATION, *gc.get_threshold()[1:])  # as `txn-exporter run` serves
    with tempfile.TemporaryDirectory(prefix="clock_path_") as tmp:
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            run(traffic_, True, Path(tmp))
            profiler.disable()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
            return
        print(f"{args.rate} transactions/s for {args.seconds} s, one core, best of {args.runs}; us a transaction:")
        for name, mode in (("clock", "clock mode"), ("fetch", "fetch-timed mode")):
            if name not in args.modes:
                continue
            spent = best(args.runs, functools.partial(run, traffic_, name == "clock", Path(tmp)))
            total = sum(spent.values())
            stages = ", ".join(f"{stage} {s / transactions * 1e6:.1f}" for stage, s in spent.items() if s)
            print(
                f"{mode:<17} {total / transactions * 1e6:6.1f} us ({total / args.seconds:.4f} cores at "
                f"{args.rate}/s): {stages}"
            )


if __name__ == "__main__":
    main()
