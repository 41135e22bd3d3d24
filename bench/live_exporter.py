"""The live exporter's benchmarks against a real broker (issue "Live exporter", item 8):

  1. throughput: transitions/s through consume + codec + model + metrics on one core, against the raw
     confluent-kafka consume rate of the same 1M records in the same run;
  2. replay: a real `txn-exporter run` process from start to /readyz over 1M records;
  3. freshness: from a record's append (its timestamp) to the count showing on /metrics, p50/p99.

The 1M records are the real segment bench/decode_segment.py --source broker generates (a 4.4.0 broker, TV2, one
`__transaction_state` partition), placed into a fresh broker's log dir, which rebuilds its indexes.

    .venv/bin/python bench/live_exporter.py [--latency-resolution-ms 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.exporter_process import VENV_BIN, Exporter
from exporter.codec import TransactionState, decode_record
from exporter.contracts.events import TransactionLogRecords
from exporter.metrics.recorders import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources.topic_tail import TransactionLogTail
from exporter.sources.topic_tail.fetch_pattern import DEFAULT_SETTINGS
from txn_workshop.harness.admin import create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.processes import free_port
from txn_workshop.harness.workload import _producer

SEGMENT = Path(__file__).parent / "data" / "transaction_state-4.4.0-1000000" / "00000000000000000000.log"
TOPIC = "__transaction_state"


def broker_with_segment(workdir: Path, segment: Path = SEGMENT, **options) -> KafkaBroker:
    """A started one-partition 4.4.0 broker whose `__transaction_state-0` is a copy of `segment`
    (recovered from the segment itself at this start). `options`: more KafkaBroker arguments;
    their `broker_properties` are added to the one-segment setting."""
    properties = {"transaction.state.log.segment.bytes": str(1 << 30), **options.pop("broker_properties", {})}
    broker = KafkaBroker(
        "4.4.0", 2, transaction_state_partitions=1, broker_properties=properties, workdir=workdir, **options
    )
    broker.start()
    _producer(broker.bootstrap_servers, "bench-init").init_transactions(60)  # creates the topic
    broker.stop()
    partition_dir = broker.log_dirs / f"{TOPIC}-0"
    for f in partition_dir.iterdir():
        if f.suffix in (".log", ".index", ".timeindex", ".snapshot"):
            f.unlink()
    shutil.copyfile(segment, partition_dir / segment.name)
    # The checkpoints still name the tiny log: recovery rebuilds from the segment itself.
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint", "log-start-offset-checkpoint"):
        (broker.log_dirs / name).unlink(missing_ok=True)
    broker.start()
    return broker


def raw_consume_rate(bootstrap: str, total: int) -> float:
    # The fetch settings the exporter's source uses, so both read the same way.
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False, **DEFAULT_SETTINGS}
    )
    consumer.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    n, start = 0, time.perf_counter()
    while n < total:
        n += sum(1 for m in consumer.consume(1000, 1.0) if m.error() is None)
    elapsed = time.perf_counter() - start
    consumer.close()
    return n / elapsed


def pipeline_rate(bootstrap: str, total: int) -> tuple[float, float]:
    """Consume + decode + model + metrics in process; returns (records/s wall, records/s of CPU)."""
    recorders = LatencyRecorders()
    model = CoordinatorModel(recorders.sinks())
    tail = TransactionLogTail(bootstrap, all_partitions=True, metadata_refresh_seconds=3600)
    # Every record live, as the source takes a new cluster's partition (one created after time 0):
    # a replay would decode only each id's last record.
    tail._ownership.created_since_ms[0] = 0
    n, start, cpu = 0, time.perf_counter(), time.process_time()
    while n < total:
        events = tail.poll(timeout=1.0, max_records=5000)
        model.apply_batch(events)
        n += sum(len(e.records) for e in events if isinstance(e, TransactionLogRecords))
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    tail.close()
    return n / wall, n / cpu


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    with urllib.request.urlopen(url, timeout=5) as response:
        body = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(body)
        for s in f.samples
    }


def _records_total(url: str, line_prefix: str) -> float:
    """One sample of /metrics, found by its line: a full parse costs ~5 ms of this core per scrape,
    which would coarsen the poll below."""
    with urllib.request.urlopen(url, timeout=5) as response:
        body = response.read().decode()
    start = body.find(line_prefix)
    return 0.0 if start < 0 else float(body[start + len(line_prefix) : body.index("\n", start)])


def _prepare_commit_timestamps(bootstrap: str, transactional_id: str, from_offset: int) -> list[int]:
    """The record timestamps of the id's PREPARE_COMMIT records from `from_offset`, in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.assign([TopicPartition(TOPIC, 0, from_offset)])
    stamps, position = [], from_offset
    while position < high:
        for m in consumer.consume(1000, 1.0):
            if m.error() is not None:
                continue
            offset, key = m.offset(), m.key()
            assert offset is not None and key is not None  # (a record: no error)
            position = offset + 1
            record = decode_record(key, m.value(), offset, m.timestamp()[1])
            if (
                record.transactional_id == transactional_id
                and record.value is not None
                and record.value.state == TransactionState.PREPARE_COMMIT
            ):
                stamps.append(record.timestamp_ms)
    consumer.close()
    return stamps


def freshness_ms(bootstrap: str, exporter_url: str, transactions: int) -> list[float]:
    """Per transaction: from the coordinator's timestamp on its PREPARE_COMMIT record (stamped when
    it submits the append, so the append itself is included) to the end of the first scrape of
    /metrics that counts it (so a scrape's own duration is included too): an upper bound of append
    -> /metrics, on the broker's and this process's one clock."""
    url = exporter_url + "/metrics"
    line = 'kafka_transaction_state_log_records_total{target_state="PREPARE_COMMIT"} '
    create_topic(bootstrap, "fresh", partitions=1)
    producer = _producer(bootstrap, "freshness")
    producer.init_transactions(30)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench"})
    _, start_offset = consumer.get_watermark_offsets(TopicPartition(TOPIC, 0), timeout=10)
    consumer.close()
    seen_ms = []
    for _ in range(transactions):
        before = _records_total(url, line)
        producer.begin_transaction()
        producer.produce("fresh", b"x")
        producer.commit_transaction(30)  # returns after PREPARE_COMMIT is appended
        while _records_total(url, line) <= before:
            pass
        seen_ms.append(time.time() * 1000)
    stamps = _prepare_commit_timestamps(bootstrap, "freshness", start_offset)
    assert len(stamps) == transactions, (len(stamps), transactions)
    return [seen - stamp for seen, stamp in zip(seen_ms, stamps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--freshness-transactions", type=int, default=300)
    parser.add_argument(
        "--latency-resolution-ms",
        type=int,
        help="the exporter's (default: its own): in the fetch-timed mode a fetch waits up to it, so freshness follows it",
    )
    args = parser.parse_args()
    if not SEGMENT.exists():
        raise SystemExit(f"{SEGMENT} is missing: run bench/decode_segment.py --generate-only first")
    with tempfile.TemporaryDirectory(prefix="bench-live-") as tmp:
        # The broker's JVM inherits the affinity it is started with: core 1 for it, then core 0 for
        # this process and what it starts (its consumers' threads, the `txn-exporter run` process).
        os.sched_setaffinity(0, {1})
        broker = broker_with_segment(Path(tmp) / "broker")
        os.sched_setaffinity(0, {0})
        try:
            total = 1_000_000
            raw = raw_consume_rate(broker.bootstrap_servers, total)
            ours, ours_cpu = pipeline_rate(broker.bootstrap_servers, total)
            flags = ["--all-partitions"]
            if args.latency_resolution_ms is not None:
                flags += ["--latency-resolution-ms", str(args.latency_resolution_ms)]
            exporter = Exporter(
                VENV_BIN / "txn-exporter", broker.bootstrap_servers, free_port(), flags, Path(tmp) / "exporter.log"
            )
            try:
                replay_s = exporter.wait_ready()
                delays = freshness_ms(broker.bootstrap_servers, exporter.url, args.freshness_transactions)
                measured_p99 = _scrape(exporter.url + "/metrics")[
                    (
                        "kafka_transaction_state_log_append_latency_quantile_seconds",
                        (("quantile", "0.99"), ("target_state", "PREPARE_COMMIT")),
                    )
                ]
            finally:
                exporter.stop()
        finally:
            broker.stop()
    q = statistics.quantiles(delays, n=100)
    print(f"records                        {total:,} (real 4.4.0 segment, one partition)")
    print(f"raw confluent-kafka consume    {raw:,.0f} records/s")
    print(
        f"consume+decode+model+metrics   {ours:,.0f} records/s wall, {ours_cpu:,.0f}/s of CPU  ({ours / raw:.2f} of raw)"
    )
    print(f"replay to /readyz (process)    {replay_s:.1f} s")
    print(
        f"freshness append->/metrics     p50 {q[49]:.1f} ms, p99 {q[98]:.1f} ms, max {max(delays):.1f} ms "
        f"({len(delays)} transactions)"
    )
    print(
        f"exporter's own p99 append latency (PREPARE_COMMIT, record timestamp -> receipt) {measured_p99 * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
