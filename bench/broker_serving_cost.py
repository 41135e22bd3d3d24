"""What the broker spends serving the exporter (issue 22, item 2): its CPU with the exporter reading
and without, in alternating windows under the same steady load.

bench/sidecar_cost.py compares the broker with both readers against the broker with the load alone
after them, once: on a machine whose broker CPU drifts by a tenth between windows at the same load,
that difference was 0.12-0.48 cores. Here the exporter (`txn-exporter run` as a user runs it) is
stopped (SIGSTOP: no fetch reaches the broker, its connections stay open) and continued (SIGCONT),
window after window, so the drift falls on both sides alike; the median of the paired differences is
the broker's cost of the exporter (its fetches, and the catch-up after each stop, which a window's
first second holds: excluded).

    .venv/bin/python bench/broker_serving_cost.py                       # 1k transactions/s, 8 pairs
    .venv/bin/python bench/broker_serving_cost.py --latency-resolution-ms 10
    .venv/bin/python bench/broker_serving_cost.py --reader bare          # sidecar_cost's bare client, same pattern
    .venv/bin/python bench/broker_serving_cost.py --reader bare-before   # the pattern before issue 22
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bare_consumer import Bare, fetch_pattern
from bench.exporter_process import VENV_BIN, Exporter
from bench.proc_stats import loadavg, measure
from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC, Load
from exporter import defaults


def window(broker_pid: int, reader_pid: int, load: Load, seconds: float) -> tuple[float, float, float]:
    """(broker cores, reader cores, transactions/s) over `seconds`."""
    w = measure({"broker": broker_pid, "reader": reader_pid}, seconds, load)
    return w.cpu["broker"] / w.seconds, w.cpu["reader"] / w.seconds, w.commits / w.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", default="4.4.0")
    parser.add_argument("--rate", type=int, default=1000, help="transactions/s asked")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--window", type=float, default=8.0, help="seconds measured in each window")
    parser.add_argument("--latency-resolution-ms", type=int, help="the exporter's (default: its own)")
    parser.add_argument("--warmup", type=float, default=15.0)
    parser.add_argument(
        "--reader",
        choices=("exporter", "bare", "bare-before"),
        default="exporter",
        help="what reads: the exporter, or sidecar_cost's bare client with its fetch pattern or the one before",
    )
    args = parser.parse_args()

    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker
    from txn_workshop.harness.processes import free_port

    workdir = Path(tempfile.mkdtemp(prefix="bench-serving-"))
    broker = KafkaBroker(args.kafka, workdir=workdir / "broker")
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, DATA_TOPIC, partitions=DATA_PARTITIONS)
        create_internal_topics(broker.bootstrap_servers)
        load = Load(broker.bootstrap_servers, args.rate, 2, 8, "serving")
        extra = ["--latency-resolution-ms", str(args.latency_resolution_ms)] if args.latency_resolution_ms else []
        reader: Exporter | Bare
        if args.reader == "exporter":
            reader = Exporter(
                VENV_BIN / "txn-exporter", broker.bootstrap_servers, free_port(), extra, workdir / "e.log"
            )
            reader.wait_ready()
        else:
            pattern = fetch_pattern(
                argparse.Namespace(
                    kafka_config=[],
                    before=args.reader == "bare-before",
                    latency_resolution_ms=args.latency_resolution_ms or defaults.LATENCY_RESOLUTION_MS,
                )
            )
            reader = Bare(broker.bootstrap_servers, pattern)
        try:
            time.sleep(args.warmup)
            pid = broker._proc.pid
            rows = []
            for n in range(args.pairs):
                # Each pair in both orders by turns, so a drift within a pair cancels over the pairs.
                pair = {}
                for reading in (True, False) if n % 2 == 0 else (False, True):
                    reader.proc.send_signal(signal.SIGCONT if reading else signal.SIGSTOP)
                    time.sleep(1.0)  # the stop's last fetch answered; the catch-up after a continue
                    pair[reading] = window(pid, reader.proc.pid, load, args.window)
                reader.proc.send_signal(signal.SIGCONT)
                (b_on, e_on, r_on), (b_off, _, r_off) = pair[True], pair[False]
                rows.append((b_on, b_off, e_on, r_on, r_off))
                print(
                    f"pair {n + 1}: broker {b_on:.3f} cores with the {args.reader} reading, {b_off:.3f} without "
                    f"(+{b_on - b_off:.3f}); {args.reader} {e_on:.4f}; {r_on:.0f}/{r_off:.0f} txn/s; "
                    f"load average {loadavg():.1f}",
                    flush=True,
                )
        finally:
            reader.proc.send_signal(signal.SIGCONT)
            reader.stop()
            load.stop()
        differences = [on - off for on, off, *_ in rows]
        reader_cores = statistics.median(e for _, _, e, _, _ in rows)
        broker_cores = statistics.median(off for _, off, *_ in rows)
        print(
            f"median over {len(rows)} pairs: the broker spends {statistics.median(differences):+.3f} cores serving the {args.reader} "
            f"(differences {min(differences):+.3f} to {max(differences):+.3f}), "
            f"{statistics.median(differences) / broker_cores:+.1%} of its own {broker_cores:.3f}; "
            f"the {args.reader} itself {reader_cores:.4f} cores"
        )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
