"""P4 under load: the append-latency bound against the coordinator's own clock while the exporter
fetches on its busy pattern (issue 22, item 3), per fetch interval.

tests/integration/broker_truth.py holds P4 on every pinned version at a paced rate, where the
exporter stays on its idle fetch (a record delivered as soon as it is appended). The cost of the
exporter falls on the busy fetch, held `--latency-resolution-ms`, which only load brings; this bench
measures the same excess there: a real broker from the harness, bench/sidecar_cost.py's paced
transactional workload at a set rate, TransactionStateManager at TRACE for the window, and beside it
`txn-exporter run --latency-resolution-ms N --log-level DEBUG` (its receipt of every live record). Every
transition both the coordinator's `succeeded` line and the exporter's receipt name is matched
(txn_workshop/append_latency.py); excess = receipt minus `succeeded`, whole ms of this host's clock.

    .venv/bin/python bench/latency_under_load.py                          # 1k transactions/s; 3, 5, 10 ms
    .venv/bin/python bench/latency_under_load.py --rate 500 --intervals 3
    .venv/bin/python bench/latency_under_load.py --intervals 3 --rounds 3 --also-exporter ../other/.venv/bin/txn-exporter

The logging itself costs both processes CPU (the broker's TRACE lines, the exporter's line per
record): bench/sidecar_cost.py measures the cost; this bench, the latency only.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.exporter_process import TSM_LOGGER, VENV_BIN, Exporter
from bench.proc_stats import loadavg, measure
from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC, Load, settle_commits_rate


def run_interval(
    args, broker, load: Load, tids: set[str], interval_ms: int, workdir: Path, binary: Path, name: str, n: int
) -> dict:
    from txn_workshop import append_latency
    from txn_workshop.harness.processes import free_port
    from txn_workshop.harness.workload import set_logger_level

    log = workdir / f"exporter-{interval_ms}-{name}-{n}.log"  # (one per window: the matcher reads it whole)
    exporter = Exporter(
        binary,
        broker.bootstrap_servers,
        free_port(),
        ["--latency-resolution-ms", str(interval_ms), *append_latency.EXPORTER_FLAGS],
        log,
    )
    try:
        exporter.wait_ready()
        time.sleep(args.settle)
        log_start = broker.server_log.stat().st_size
        set_logger_level(broker, TSM_LOGGER, "TRACE")
        window = measure({"broker": broker._proc.pid, "exporter": exporter.proc.pid}, args.window, load)
        set_logger_level(broker, TSM_LOGGER, None)
        time.sleep(3)  # the last records of the window received
    finally:
        exporter.stop()
    text = log.read_text(errors="replace")
    patterns = [
        line.split("topic_tail: ", 1)[1]
        for line in text.splitlines()
        if "topic_tail: busy" in line or "topic_tail: idle" in line
    ]
    window_log = workdir / f"window-{interval_ms}-{name}-{n}.log"  # what the broker logged since the window began
    with broker.server_log.open("rb") as source, window_log.open("wb") as target:
        source.seek(log_start)
        shutil.copyfileobj(source, target)
    succeeded, _ = append_latency.coordinator_lines([window_log], tids)
    matched = append_latency.match(succeeded, append_latency.observed_records(log, tids))
    figures = append_latency.summary(matched)
    return {
        "exporter": name,
        "interval_ms": interval_ms,
        "logged_transitions": len(succeeded),
        **figures,
        "excess_p90_ms": append_latency.percentile([m.excess_ms for m in matched], 0.9),
        "exporter_per_broker": window.cpu["exporter"] / window.cpu["broker"] if window.cpu["broker"] else 0.0,
        "transitions_per_s": len(matched) / window.seconds,
        "patterns": patterns,
        "load_average": loadavg(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", default="4.4.0")
    parser.add_argument("--rate", type=int, default=1000, help="transactions/s asked")
    parser.add_argument("--intervals", type=lambda s: [int(x) for x in s.split(",")], default=[3, 5, 10])
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--warmup", type=float, default=8.0)
    parser.add_argument("--settle", type=float, default=5.0)
    parser.add_argument("--load-processes", type=int, default=2)
    parser.add_argument("--load-threads", type=int, default=8)
    parser.add_argument(
        "--also-exporter",
        type=Path,
        help="another checkout's txn-exporter, run after this one at each interval (same broker and load)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="windows per interval (and exporter), alternating")
    args = parser.parse_args()
    binaries = {"this": VENV_BIN / "txn-exporter"}
    if args.also_exporter:
        binaries["also"] = args.also_exporter

    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker

    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    # One server.log for the whole run (each window is read from its offset at the window's start).
    broker = KafkaBroker(args.kafka, workdir=workdir / "broker", server_log_max_bytes=1 << 40)
    broker.start()
    results = []
    try:
        create_topic(broker.bootstrap_servers, DATA_TOPIC, partitions=DATA_PARTITIONS)
        create_internal_topics(broker.bootstrap_servers)
        load = Load(broker.bootstrap_servers, args.rate, args.load_processes, args.load_threads, "lat")
        tids = {f"lat-{n}-{i}" for n in range(args.load_processes) for i in range(args.load_threads)}
        try:
            time.sleep(args.warmup)
            print(f"{args.rate} transactions/s asked, {settle_commits_rate(load):.0f}/s achieved", flush=True)
            runs = [(i, n, name) for i in args.intervals for n in range(args.rounds) for name in binaries]
            for interval_ms, n, name in runs:
                r = run_interval(args, broker, load, tids, interval_ms, workdir, binaries[name], name, n)
                results.append(r)
                print(
                    f"-- {interval_ms} ms, {name} exporter: {r['transitions']} of {r['logged_transitions']} transitions matched "
                    f"({r['transitions_per_s']:.0f}/s); coordinator p50/p99/max {r['coordinator_ms']} ms; "
                    f"exporter's excess p50/p90/p99/max {r['excess_ms'][0]}/{r['excess_p90_ms']}/"
                    f"{r['excess_ms'][1]}/{r['excess_ms'][2]} ms, {r['received_before_succeeded']} received before "
                    f"`succeeded`; exporter/broker {r['exporter_per_broker']:.1%} (with the logging); "
                    f"pattern {r['patterns'][-1:] or ['idle']}; load average {r['load_average']:.1f}",
                    flush=True,
                )
        finally:
            load.stop()
    except BaseException:
        print(f"logs kept in {workdir}", flush=True)
        raise
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
