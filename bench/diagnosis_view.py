"""Cost of the transactions view with its diagnosis, on a real cluster: `--stuck` stuck transactions
(PREPARE_COMMIT past their timeout, every data partition refusing the markers) over `--partitions`
data partitions in all, among `--in-flight` in-flight transactions. Target: p99 under 200 ms.

    .venv/bin/python bench/diagnosis_view.py [--stuck 100] [--partitions 1000] [--seconds 60] [--pause]

A real cluster of three brokers (the harness, `--version`, 4.4.0 by default) holds `--topics` topics
of `--partitions / --topics` partitions each (replication factor 2); the exporter's model is loaded in
this process as the live source loads it, the marker errors as the broker-log source notes them. The
view is the exporter's own HTTP server and endpoint, with the composition root's cluster-state source
(kafka-python, cache 5 s, first look waits 0.5 s at most) asking those brokers. Requests come every
`--interval` seconds for `--seconds` (so the cache expires and refreshes many times); timed: each GET of
the JSON and of the page, from a client process of its own, and the first (cold) request on its own. With `--pause`, a
second run with broker 3 paused (SIGSTOP: requests to it hang), which the view must not wait for.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import CollectorRegistry

from bench.synthetic import PARTITIONS, partition_of
from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.contracts.events import (
    MarkerWriteRetried,
    PartitionAssigned,
    PartitionReplayed,
    TransactionLogRecords,
)
from exporter.http_server import MetricsServer
from exporter.logs import kafka_client_logger
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.sources.cluster_state import ClusterStateSource
from exporter.view.endpoint import PATH, TransactionsEndpoint
from txn_workshop.harness.broker import KafkaBroker

S = TransactionState


def load(stuck: int, in_flight: int, topics: list[str], per_topic: int, now_ms: int) -> CoordinatorModel:
    """`stuck` PREPARE_COMMITs, 10 minutes old with a 60 s timeout, each over its own share of the
    data partitions, each partition refusing its markers; the rest of `in_flight` young ONGOINGs."""
    model = CoordinatorModel(LatencyRecorders(now_ms=now_ms).sinks())
    for p in range(PARTITIONS):
        model.apply(PartitionAssigned(p))
    partitions = [(t, p) for t in topics for p in range(per_topic)]
    share = max(1, len(partitions) // max(1, stuck))
    for i in range(in_flight):
        tid = f"payments-service-{i:06d}"
        if i < stuck:
            mine = partitions[i * share : (i + 1) * share]
            listed: dict[str, list[int]] = {}
            for t, p in mine:
                listed.setdefault(t, []).append(p)
            ts = now_ms - 600_000 + i
            value = TransactionLogValue(
                version=1,
                producer_id=1000 + i,
                producer_epoch=3,
                transaction_timeout_ms=60_000,
                state=S.PREPARE_COMMIT,
                partitions=listed,
                last_update_timestamp_ms=ts,
                start_timestamp_ms=ts - 500,
            )
        else:
            mine = []
            ts = now_ms - 1_000 + i % 1000
            value = TransactionLogValue(
                version=1,
                producer_id=1000 + i,
                producer_epoch=3,
                transaction_timeout_ms=60_000,
                state=S.ONGOING,
                partitions={topics[0]: [i % per_topic]},
                last_update_timestamp_ms=ts,
                start_timestamp_ms=ts,
            )
        record = decode_record(encode_key(tid), encode_value(value), i, ts, partitions=False)
        model.apply(TransactionLogRecords(partition_of(tid), [record], ts + 2, True))
        for t, p in mine:
            model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", tid, f"{t}-{p}", now_ms - 100))
    for p in range(PARTITIONS):
        model.apply(PartitionReplayed(p))
    return model


class Timed:
    """The endpoint, recording each answer's wall time and the CPU time of its thread, server side:
    what the exporter spends apart from waiting for a core on a busy machine."""

    def __init__(self, endpoint: TransactionsEndpoint) -> None:
        self._endpoint = endpoint
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __call__(
        self, query_string: str, accept: str, authorization: str | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        wall, cpu = time.perf_counter(), time.thread_time()
        answer = self._endpoint(query_string, accept, authorization)
        self.cpu.append(time.thread_time() - cpu)
        self.wall.append(time.perf_counter() - wall)
        return answer

    def report(self, label: str) -> None:
        for name, values in (("server wall", self.wall), ("server CPU", self.cpu)):
            print(
                f"  {label}, {name} per answer: median {statistics.median(values) * 1000:.1f} ms,"
                f" p99 {percentile(values, 0.99) * 1000:.1f} ms, max {max(values) * 1000:.1f} ms"
            )
        self.wall.clear()
        self.cpu.clear()


def get(url: str, accept: str) -> tuple[float, int]:
    request = urllib.request.Request(url, headers={"Accept": accept})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=30) as response:
        size = len(response.read())
    return time.perf_counter() - started, size


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def client(url: str, seconds: float, interval: float) -> None:
    """The timed requests, in a process of their own (as a browser or the CLI would be): reading a
    1 MB answer in the exporter's process would take the GIL from the server being measured."""
    times: dict[str, list[float]] = {"JSON": [], "page": []}
    sizes = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        took, size = get(url, "application/json")
        times["JSON"].append(took)
        sizes.append(size)
        times["page"].append(get(url, "text/html")[0])
        time.sleep(interval)
    print(json.dumps({"times": times, "size": statistics.median(sizes)}))


def run(url: str, seconds: float, interval: float, label: str) -> None:
    answer = subprocess.run(
        [sys.executable, __file__, "--client", url, "--seconds", str(seconds), "--interval", str(interval)],
        capture_output=True,
        text=True,
        check=True,
    )
    measured = json.loads(answer.stdout)
    for name, times in measured["times"].items():
        print(
            f"  {label}, {name}: {len(times)} requests, median {statistics.median(times) * 1000:.1f} ms,"
            f" p99 {percentile(times, 0.99) * 1000:.1f} ms, max {max(times) * 1000:.1f} ms"
        )
    print(f"  JSON size {measured['size'] / 1024:.0f} KiB; load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stuck", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--interval", type=float, default=0.2)
    parser.add_argument("--version", default="4.4.0")
    parser.add_argument("--pause", action="store_true", help="a second run with broker 3 paused (SIGSTOP)")
    parser.add_argument("--client", metavar="URL", help=argparse.SUPPRESS)  # the timed requests' process
    args = parser.parse_args()
    if args.client:
        client(args.client, args.seconds, args.interval)
        return

    root = Path(tempfile.mkdtemp(prefix="bench-diagnosis-"))
    first = KafkaBroker(args.version, workdir=root / "1", transaction_state_partitions=PARTITIONS)
    brokers = [first] + [KafkaBroker(args.version, workdir=root / str(n), join=first, node_id=n) for n in (2, 3)]
    source = server = None
    try:
        for broker in brokers:
            broker.start()
        per_topic = args.partitions // args.topics
        topics = [f"bench-orders-{n}" for n in range(args.topics)]
        admin = AdminClient({"bootstrap.servers": first.bootstrap_servers}, logger=kafka_client_logger())
        for future in admin.create_topics([NewTopic(t, per_topic, 2) for t in topics], operation_timeout=60).values():
            future.result(120)
        now_ms = int(time.time() * 1000)
        model = load(args.stuck, args.in_flight, topics, per_topic, now_ms)
        source = ClusterStateSource(first.bootstrap_servers)
        source.start()
        endpoint = Timed(
            TransactionsEndpoint(model, 300, first.bootstrap_servers, broker_log=True, cluster_state=source.lookup)
        )
        server = MetricsServer(
            "127.0.0.1", 0, CollectorRegistry(), healthy=lambda: True, ready=lambda: True, routes={PATH: endpoint}
        )
        server.start()
        url = f"http://127.0.0.1:{server.port}{PATH}"
        time.sleep(3)  # the client connected (source.start)
        print(
            f"Kafka {args.version}, 3 brokers; {args.stuck} stuck PREPARE_COMMIT over {args.topics * per_topic}"
            f" partitions ({args.topics} topics), {args.in_flight:,} in flight; a request every {args.interval} s"
            f" for {args.seconds:g} s"
        )
        cold, _ = get(url, "application/json")
        print(f"  first request (cold cache: metadata, configs and brokers fetched): {cold * 1000:.0f} ms")
        # What one cache refresh costs the exporter's process (its worker threads do it every 5 s).
        asked = [*topics, "__transaction_state"]
        wall, cpu = time.perf_counter(), time.process_time()
        for _ in range(5):
            source._metadata(asked)
            source._min_isr(asked)
        print(
            f"  one refresh (Metadata + DescribeCluster + DescribeConfigs of {len(asked)} topics):"
            f" {(time.perf_counter() - wall) / 5 * 1000:.0f} ms, {(time.process_time() - cpu) / 5 * 1000:.0f} ms CPU"
        )
        endpoint.report("cold")
        run(url, args.seconds, args.interval, "warm (cache refreshed every 5 s)")
        endpoint.report("warm")
        if args.pause:
            brokers[2].pause()
            try:
                run(url, args.seconds, args.interval, "broker 3 paused")
                endpoint.report("broker 3 paused")
            finally:
                brokers[2].resume()
    finally:
        if server is not None:
            server.stop()
        if source is not None:
            source.close()
        for broker in reversed(brokers):
            broker.stop()


if __name__ == "__main__":
    main()
