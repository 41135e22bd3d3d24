"""The exporter's memory beside a real broker (issue 22, item 4): flat whatever the backlog it replays,
and bounded by the live transactional ids under id churn.

1. Backlog: a 4.4.0 broker (50 `__transaction_state` partitions) given a synthetic backlog of N
   records (bench/synthetic.py's mix, recent timestamps) over the same K transactional ids, one
   segment per partition; then `txn-exporter run` (as a user runs it) replays it: RSS at /readyz, then
   with live transactions beside it (RSS at the end of the window, and the peak). N = 1M and 5M by
   default: the same ids, so the same state; only what the replay read differs.
2. Churn: a broker whose transactional ids expire fast (`transactional.id.expiration.ms`), new ids
   (one transaction each) for a while, then none: the exporter's RSS and tracked ids (the sum of
   `kafka_transactions`) sampled beside the coordinator's own ids (ListTransactions, kafka-python's
   admin client), until the last id expired.

    .venv/bin/python bench/sidecar_memory.py                     # both; this checkout's exporter
    .venv/bin/python bench/sidecar_memory.py --backlog 1000000,5000000 --churn-seconds 0
    .venv/bin/python bench/sidecar_memory.py --exporter ../before/.venv/bin/txn-exporter   # another version

The backlog segments are cached under bench/data/ (gitignored).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.decode_segment import DATA
from bench.exporter_process import VENV_BIN, Exporter
from bench.proc_stats import rss_mib
from bench.synthetic import PARTITIONS, transaction_cycles
from bench.txn_load import Load, add_load_arguments
from txn_workshop.record_batches import encode_batch

TOPIC = "__transaction_state"
KAFKA = "4.4.0"


def backlog(records: int, ids: int) -> Path:
    """The cached backlog: one segment per `__transaction_state` partition (50), `records` records of
    the mix over `ids` ids, timestamps ending now-ish (recent enough not to expire)."""
    root = DATA / f"transaction_state-50-partitions-{records}-{ids}-ids"
    if (root / "done").exists():
        return root
    print(f"generating {records:,} records over {ids} ids in {PARTITIONS} partitions", flush=True)
    started = time.perf_counter()
    shutil.rmtree(root, ignore_errors=True)
    files = []
    for p in range(PARTITIONS):
        (root / f"{TOPIC}-{p}").mkdir(parents=True)
        files.append(open(root / f"{TOPIC}-{p}" / "00000000000000000000.log", "wb"))  # noqa: SIM115
    chunks = [bytearray() for _ in range(PARTITIONS)]
    start_ms = int(time.time() * 1000) - records  # 1 ms apart, the last one now
    for r in transaction_cycles(ids, (records - ids) // 3, start_ms=start_ms):
        chunk = chunks[r.partition]
        chunk += encode_batch(r.offset, [(r.key, r.value, r.timestamp_ms)])
        if len(chunk) >= 1 << 22:
            files[r.partition].write(chunk)
            chunk.clear()
    for f, chunk in zip(files, chunks, strict=True):
        f.write(chunk)
        f.close()
    (root / "done").write_text("")
    print(f"generated in {time.perf_counter() - started:.0f} s", flush=True)
    return root


def broker_with_backlog(workdir: Path, source: Path, **options):
    """A started 4.4.0 broker whose 50 `__transaction_state` partitions are `source`'s segments."""
    from txn_workshop.harness.admin import create_internal_topics
    from txn_workshop.harness.broker import KafkaBroker

    broker = KafkaBroker(KAFKA, 2, workdir=workdir, jmx=False, **options)
    broker.start()
    create_internal_topics(broker.bootstrap_servers)
    broker.stop()
    for p in range(PARTITIONS):
        partition_dir = broker.log_dirs / f"{TOPIC}-{p}"
        for f in partition_dir.iterdir():
            if f.suffix in (".log", ".index", ".timeindex", ".snapshot"):
                f.unlink()
        shutil.copyfile(
            source / f"{TOPIC}-{p}" / "00000000000000000000.log", partition_dir / "00000000000000000000.log"
        )
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint", "log-start-offset-checkpoint"):
        (broker.log_dirs / name).unlink(missing_ok=True)
    broker.start()
    return broker


def run_backlog(args: argparse.Namespace) -> None:
    from txn_workshop.harness.admin import create_topic
    from txn_workshop.harness.processes import free_port

    print(f"\n== backlog: {args.exporter}")
    print("| backlog (records, over the same ids) | ready in | RSS at ready | RSS after live load | peak RSS |")
    print("|---|---|---|---|---|")
    for records in args.backlog:
        source = backlog(records, args.ids)
        workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
        broker = broker_with_backlog(workdir / "broker", source)
        try:
            create_topic(broker.bootstrap_servers, "load", partitions=8)
            exporter = Exporter(args.exporter, broker.bootstrap_servers, free_port(), [], workdir / "exporter.log")
            try:
                ready_s = exporter.wait_ready(600)
                ready_rss, _ = rss_mib(exporter.proc.pid)
                load = Load(broker.bootstrap_servers, args.live_rate, 1, 8, "live")
                try:
                    time.sleep(args.live_seconds)
                finally:
                    load.stop()
                rss, peak = rss_mib(exporter.proc.pid)
            finally:
                exporter.stop()
        finally:
            broker.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        print(
            f"| {records:,} records, {args.ids} ids | {ready_s:.1f} s | {ready_rss:.0f} MiB | {rss:.0f} MiB "
            f"({args.live_rate} txn/s for {args.live_seconds:.0f} s) | {peak:.0f} MiB |",
            flush=True,
        )


def churn_main(args: argparse.Namespace) -> None:
    """A churn process: `threads` threads, each making new transactional ids (one committed transaction
    each) at rate/threads a second, until SIGTERM."""
    import signal

    from confluent_kafka import Producer

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    made = [0] * args.threads

    def run(index: int) -> None:
        interval = args.threads / args.rate
        due = time.monotonic()
        while not stop.is_set():
            tid = f"{args.prefix}-{index}-{made[index]}"
            producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": tid})
            producer.init_transactions(60)
            producer.begin_transaction()
            producer.produce("load", b"x", partition=index % 8)
            producer.commit_transaction(60)
            made[index] += 1
            due += interval
            time.sleep(max(0.0, due - time.monotonic()))

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    while not stop.wait(1.0):
        print(sum(made), flush=True)
    for thread in threads:
        thread.join(30)
    print(sum(made), flush=True)


def run_churn(args: argparse.Namespace) -> None:
    from kafka.admin import KafkaAdminClient

    from txn_workshop.harness.admin import create_topic
    from txn_workshop.harness.broker import KafkaBroker
    from txn_workshop.harness.processes import free_port

    expiration_ms = int(args.expiration_seconds * 1000)
    workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
    broker = KafkaBroker(
        KAFKA,
        2,
        workdir=workdir / "broker",
        broker_properties={
            "transactional.id.expiration.ms": str(expiration_ms),
            "transaction.remove.expired.transaction.cleanup.interval.ms": "1000",
        },
    )
    broker.start()
    admin = None
    try:
        create_topic(broker.bootstrap_servers, "load", partitions=8)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        exporter = Exporter(args.exporter, broker.bootstrap_servers, free_port(), [], workdir / "exporter.log")
        try:
            exporter.wait_ready(120)
            print(f"\n== churn: {args.exporter}")
            print(
                f"new ids at {args.churn_rate}/s for {args.churn_seconds:.0f} s, each expiring "
                f"{args.expiration_seconds:.0f} s after its transaction"
            )
            print("| t (s) | ids made | coordinator's ids (ListTransactions) | exporter's tracked ids | exporter RSS |")
            print("|---|---|---|---|---|")
            churn = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "churn",
                    "--bootstrap",
                    broker.bootstrap_servers,
                    "--rate",
                    str(args.churn_rate),
                    "--threads",
                    "8",
                    "--prefix",
                    "churn",
                ],
                stdout=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            made = [0]
            lines = churn.stdout
            assert lines is not None  # (started with a pipe)
            threading.Thread(target=lambda: [made.__setitem__(0, int(line)) for line in lines], daemon=True).start()
            start = time.monotonic()
            stopped = False
            while True:
                elapsed = time.monotonic() - start
                if not stopped and elapsed >= args.churn_seconds:
                    churn.terminate()
                    churn.wait(60)
                    stopped = True
                coordinator = sum(
                    1
                    for listings in admin.list_transactions().values()
                    for t in listings
                    if t.transactional_id.startswith("churn")
                )
                tracked = _tracked_ids(exporter.metrics())
                rss, _ = rss_mib(exporter.proc.pid)
                print(f"| {elapsed:.0f} | {made[0]} | {coordinator} | {tracked} | {rss:.0f} MiB |", flush=True)
                if stopped and coordinator == 0 and tracked == 0:
                    break
                if elapsed > args.churn_seconds + 10 * args.expiration_seconds + 60:
                    print("not all expired in time")
                    break
                time.sleep(args.sample_seconds)
        finally:
            exporter.stop()
    finally:
        if admin is not None:
            admin.close()
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _tracked_ids(metrics_text: str) -> int:
    from prometheus_client.parser import text_string_to_metric_families

    return round(
        sum(
            s.value
            for f in text_string_to_metric_families(metrics_text)
            if f.name == "kafka_transactions"
            for s in f.samples
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    add_load_arguments(sub.add_parser("churn"))
    parser.add_argument("--backlog", type=lambda s: [int(x) for x in s.split(",")], default=[1_000_000, 5_000_000])
    parser.add_argument("--ids", type=int, default=100, help="transactional ids of the backlog")
    parser.add_argument("--live-rate", type=int, default=200, help="transactions/s beside the exporter once ready")
    parser.add_argument("--live-seconds", type=float, default=30.0)
    parser.add_argument("--churn-rate", type=float, default=20.0, help="new transactional ids a second")
    parser.add_argument("--churn-seconds", type=float, default=60.0, help="0: no churn run")
    parser.add_argument("--expiration-seconds", type=float, default=15.0)
    parser.add_argument("--sample-seconds", type=float, default=5.0)
    parser.add_argument("--exporter", type=Path, default=VENV_BIN / "txn-exporter")
    args = parser.parse_args()
    if args.command == "churn":
        churn_main(args)
        return
    if args.backlog and args.backlog != [0]:
        run_backlog(args)
    if args.churn_seconds > 0:
        run_churn(args)


if __name__ == "__main__":
    main()
