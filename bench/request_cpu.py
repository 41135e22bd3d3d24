"""The broker's CPU per request it serves the exporter, by type (issue 52, item 1): the factor
bench/cluster_cost.py's in-place bill multiplies each type's extra requests a second by.

In the deployment shape a fetch-timed exporter sends its broker 10-90 FetchConsumer requests a second
and a few ListOffsets nudges; what serving them costs is far below the noise of a difference of two
windows' CPU there. Here one broker (4.4.0 by default, KRaft, JMX on) under a steady paced
transactional load serves the same requests at a rate that stands out of the noise, in ABBA blocks of
windows against the broker with the load alone. The broker has --partitions (17) `__transaction_state`
partitions: as many as each broker of the deployment shape leads, so that a reader's fetch names as
many partitions as an exporter's there (a librdkafka fetch names each partition it follows: no fetch
sessions), each partition as busy at the same transactions a second. (Replicated once: a fetch waits
for the append, not for a follower's fetch to move the high watermark; the same work, served sooner.)
The kinds:
- `fetch`: --readers bare readers (bench/bare_consumer.py: the exporter's own fetch pattern, in
  librdkafka, at --resolution-ms), all of `__transaction_state`;
- `list-offsets`: one process asking the high watermark of a `__transaction_state` partition
  --list-offsets-rate times a second, as the exporter's nudge does (librdkafka's
  query_watermark_offsets: a ListOffsets request).
Per block: the broker's extra cores (/proc) over its extra requests a second of the kind's type
(Kafka's RequestMetrics RequestsPerSec, read with JmxTool before and after each window); the median
over the blocks, with its min..max, in µs of CPU a request. (The readers' own CPU is not the broker's:
only its JVM's is counted.)

    .venv/bin/python bench/request_cpu.py --json request-cpu.json     # 50 transactions/s, 6 blocks
    .venv/bin/python bench/cluster_cost.py --request-cpu request-cpu.json ...
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bare_consumer import TOPIC, Bare, fetch_pattern
from bench.proc_stats import loadavg, measure
from bench.three_broker_cluster import requests_served
from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC, Load, settle_commits_rate

# The fetch kind's readers fetch at the finest resolution users ask for: 8 of them then send the broker
# about 740 fetches a second, a cost well out of the noise (at the exporter's default, 100 ms, 80).
RESOLUTION_MS = 10
# The request type each kind adds, as RequestMetrics names it.
TYPES = {"fetch": "FetchConsumer", "list-offsets": "ListOffsets"}


def list_offsets_main(args: argparse.Namespace) -> None:
    """The `list-offsets` kind's process: a ListOffsets request every 1/rate s until SIGTERM."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": args.bootstrap, "group.id": "bench-request-cpu"})
    stop: list[bool] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    partition = TopicPartition(TOPIC, 0)
    print("READY", flush=True)
    due = time.monotonic()
    while not stop:
        consumer.get_watermark_offsets(partition, timeout=1)
        due += 1 / args.rate
        time.sleep(max(due - time.monotonic(), 0))
    consumer.close()


class Kind:
    """The processes of one kind's window, started before it and stopped after it."""

    def __init__(self, kind: str, bootstrap: str, args: argparse.Namespace) -> None:
        self.procs: list[subprocess.Popen] = []
        self.bares: list[Bare] = []
        if kind == "fetch":
            pattern = fetch_pattern(
                argparse.Namespace(kafka_config=[], before=False, latency_resolution_ms=args.resolution_ms)
            )
            self.bares = [Bare(bootstrap, pattern) for _ in range(args.readers)]
        elif kind == "list-offsets":
            proc = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "list-offsets",
                    "--bootstrap",
                    bootstrap,
                    "--rate",
                    str(args.list_offsets_rate),
                ],
                stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
            )
            assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
            self.procs.append(proc)

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        for bare in self.bares:
            bare.stop()
        for proc in self.procs:
            terminate(proc, 20)


def window(broker, pid: int, load: Load, seconds: float) -> dict:
    """The broker's cores, its requests a second by type and the transactions a second over `seconds`."""
    t0, before = requests_served([broker])[0]
    w = measure({"broker": pid}, seconds, load)
    t1, after = requests_served([broker])[0]
    # The counters are read by JmxTool, each at its own time: the rates over the reads' own interval.
    return {
        "cores": w.cpu["broker"] / w.seconds,
        "requests_per_s": {t: (after[t] - before.get(t, 0.0)) / (t1 - t0) for t in after},
        "transactions_per_s": w.commits / w.seconds,
    }


def per_request(windows: list[dict], kind: str) -> dict:
    """µs of broker CPU a request of the kind's type: each block's extra cores over its extra requests."""
    kind_type = TYPES[kind]
    blocks = sorted({w["pair"] for w in windows})
    values, extra_rates = [], []
    for pair in blocks:
        (base,) = [w for w in windows if w["pair"] == pair and w["kind"] == "without"]
        (with_,) = [w for w in windows if w["pair"] == pair and w["kind"] == kind]
        extra = with_["requests_per_s"].get(kind_type, 0.0) - base["requests_per_s"].get(kind_type, 0.0)
        extra_rates.append(extra)
        values.append((with_["cores"] - base["cores"]) / extra * 1e6 if extra > 0 else float("nan"))
    return {
        "type": kind_type,
        "us_per_request": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "extra_requests_per_s": statistics.median(extra_rates),
        "blocks": values,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    lo = sub.add_parser("list-offsets", help="(the list-offsets kind's process)")
    lo.add_argument("--bootstrap", required=True)
    lo.add_argument("--rate", type=float, required=True)
    parser.add_argument("--kafka", default="4.4.0")
    parser.add_argument("--rate", type=int, default=50, help="the load's transactions/s")
    parser.add_argument("--kinds", default="fetch,list-offsets", help=f"of {', '.join(TYPES)}")
    parser.add_argument("--partitions", type=int, default=17, help="the broker's __transaction_state partitions")
    parser.add_argument("--readers", type=int, default=8, help="the fetch kind's bare readers")
    parser.add_argument(
        "--resolution-ms",
        type=int,
        default=RESOLUTION_MS,
        help="the fetch kind's readers' resolution (not the exporter's default: their fetches must be many)",
    )
    parser.add_argument("--list-offsets-rate", type=float, default=400.0)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after a kind's processes started")
    parser.add_argument("--warmup", type=float, default=30.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.command == "list-offsets":
        list_offsets_main(args)
        return

    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = shlex.join([sys.executable, *sys.argv])
    print("command:", command, flush=True)
    kinds = args.kinds.split(",")
    workdir = Path(tempfile.mkdtemp(prefix="bench-request-cpu-"))
    broker = KafkaBroker(args.kafka, workdir=workdir / "broker", jmx=True, transaction_state_partitions=args.partitions)
    broker.start()
    load = None
    try:
        create_topic(broker.bootstrap_servers, DATA_TOPIC, partitions=DATA_PARTITIONS)
        create_internal_topics(broker.bootstrap_servers)
        load = Load(broker.bootstrap_servers, args.rate, 2, 8, "request-cpu")
        time.sleep(args.warmup)
        print(f"load {settle_commits_rate(load):.0f} txn/s; load average {loadavg():.2f}", flush=True)
        assert broker._proc is not None
        pid = broker._proc.pid
        windows = []
        for pair in range(1, args.pairs + 1):
            order = ["without", *kinds]
            for kind in order if pair % 2 else order[::-1]:
                procs = Kind(kind, broker.bootstrap_servers, args)
                try:
                    time.sleep(args.settle if kind != "without" else 1.0)
                    w = {"pair": pair, "kind": kind, **window(broker, pid, load, args.window)}
                finally:
                    procs.stop()
                windows.append(w)
                shown = {t: round(w["requests_per_s"].get(t, 0.0)) for t in TYPES.values()}
                print(
                    f"  pair {pair} {kind:>12}: broker {w['cores']:.4f} cores; {w['transactions_per_s']:.0f} txn/s;"
                    f" requests/s {shown}",
                    flush=True,
                )
        results = {
            "command": command,
            "kafka": args.kafka,
            "rate": args.rate,
            "readers": args.readers,
            "partitions": args.partitions,
            "resolution_ms": args.resolution_ms,
            "per_request": {TYPES[k]: per_request(windows, k) for k in kinds},
            "windows": windows,
        }
        for t, r in results["per_request"].items():
            print(
                f"{t}: {r['us_per_request']:.0f} µs of broker CPU a request ({r['min']:.0f}..{r['max']:.0f}),"
                f" at {r['extra_requests_per_s']:.0f} extra requests/s",
                flush=True,
            )
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    finally:
        if load is not None:
            load.stop()
        broker.stop()


if __name__ == "__main__":
    main()
