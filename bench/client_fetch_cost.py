"""What one fetch costs librdkafka's client, by the partitions it names (issue 22, item 2).

librdkafka sends no KIP-227 incremental fetch sessions: every fetch request and response names every
partition the consumer holds. This bench isolates that: one broker from the harness with nothing
appended, and a confluent-kafka consumer in a process of its own holding N `__transaction_state`
partitions with the exporter's busy fetch settings (a `fetch.min.bytes` never reached, held
`--latency-resolution-ms`), so every fetch returns empty after the interval. Its CPU (utime + stime of
the whole process) over the window, divided by the fetches it sent (librdkafka's statistics), is
the client's cost of one fetch of N partitions; each N is measured twice, interleaved.

    .venv/bin/python bench/client_fetch_cost.py                 # 50, 8 and 1 partitions
    .venv/bin/python bench/client_fetch_cost.py --partitions 50,17 --window 30
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# The consumer, in a process of its own so that its CPU is its fetching alone.
_CLIENT = r"""
import json, os, sys, time
from confluent_kafka import Consumer, TopicPartition

bootstrap, partitions, interval_ms, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
fetches = {}

def on_stats(text):
    brokers = json.loads(text)["brokers"].values()
    fetches["sent"] = sum(b["req"].get("Fetch", 0) for b in brokers)

consumer = Consumer({
    "bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
    "fetch.min.bytes": 1 << 20, "fetch.wait.max.ms": interval_ms,
    "statistics.interval.ms": 1000, "stats_cb": on_stats,
})
consumer.assign([TopicPartition("__transaction_state", p, 0) for p in range(partitions)])

def run(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        consumer.poll(0.1)

run(3)  # connected, its first statistics in
cpu0, sent0, t0 = os.times(), fetches.get("sent", 0), time.monotonic()
run(window)
cpu1, sent1, t1 = os.times(), fetches.get("sent", 0), time.monotonic()
cpu = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
print(json.dumps({"cores": cpu / (t1 - t0), "fetches_per_s": (sent1 - sent0) / (t1 - t0), "cpu_s": cpu, "fetches": sent1 - sent0}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", default="4.4.0")
    parser.add_argument("--partitions", type=lambda s: [int(x) for x in s.split(",")], default=[50, 8, 1])
    parser.add_argument("--latency-resolution-ms", type=int, default=3)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from txn_workshop.harness.admin import create_internal_topics
    from txn_workshop.harness.broker import KafkaBroker

    workdir = Path(tempfile.mkdtemp(prefix="bench-fetch-"))
    broker = KafkaBroker(args.kafka, workdir=workdir / "broker")
    broker.start()
    try:
        create_internal_topics(broker.bootstrap_servers)
        for _ in range(args.rounds):
            for partitions in args.partitions:
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        _CLIENT,
                        broker.bootstrap_servers,
                        str(partitions),
                        str(args.latency_resolution_ms),
                        str(args.window),
                    ],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
                r = json.loads(out)
                per_fetch_us = r["cpu_s"] / max(1, r["fetches"]) * 1e6
                print(
                    f"{partitions:3d} partitions: {r['fetches_per_s']:.0f} fetches/s, {r['cores']:.4f} cores, "
                    f"{per_fetch_us:.0f} us of client CPU per fetch",
                    flush=True,
                )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
