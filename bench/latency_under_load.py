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

`--clock coordinator`: the clock mode instead (issue 52, item 4), on each log layout in turn, a broker
each: `server.log` as Kafka writes it with the coordinator's package at DEBUG (the harness's logging),
and deploy/broker-logging's dedicated `txn-coordinator.log`. The exporter runs as deployed
(`--broker-log FILE`, INFO) from before the load starts, so every record of the load is live; once the
load stopped and the exporter settled, its /metrics are held to Kafka's own truth: per target state,
the coordinator's `succeeded` line's time minus the record's CreateTime in DumpLogSegments
(txn_workshop/append_latency.py), its p50/p99 by HdrHistogram's rank (the exporter's), against the
exporter's quantile gauges and histogram; records counted against timed by the coordinator's clock
and dumped; the line-record join's unmatched counters. The asked rate is carried when the load's
commits over the window reach 95% of it.

    .venv/bin/python bench/latency_under_load.py --clock coordinator --window 20 --kafka 3.9.2   # 340 transactions/s
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.exporter_process import TSM_LOGGER, VENV_BIN, Exporter, latency_quantiles
from bench.options import names_among
from bench.proc_stats import loadavg, measure
from bench.three_broker_cluster import coordinator_log
from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC, Load, settle_commits_rate
from exporter.codec.states import TransactionState
from txn_workshop.harness.deployment_shape import COORDINATOR_LOG, DEPLOY_LOGGING


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


# The clock mode's goal (issue 52, item 4): at 300 transactions/s or more on one broker, each target
# state's p50 and p99 within 1 ms of the coordinator's own, every record timed by its clock, none evicted.
GOAL_RATE = 300
WITHIN_MS = 1
CARRIED = 0.95  # the load's achieved share of the asked rate for it to count as carried (cluster_report's)
LAYOUTS = ("server.log", COORDINATOR_LOG)


def start_broker(version: str, layout: str, workdir: Path):
    """A broker logging as `layout` says, and the file the exporter reads."""
    from txn_workshop.harness.broker import KafkaBroker
    from txn_workshop.harness.versions import kafka_version

    if layout == "server.log":  # everything in one file, the coordinator's package at DEBUG
        broker = KafkaBroker(version, workdir=workdir, coordinator_log_level="DEBUG", server_log_max_bytes=1 << 40)
        return broker, broker.server_log
    broker = KafkaBroker(version, workdir=workdir, logging_config=DEPLOY_LOGGING / kafka_version(version).log4j_config)
    return broker, coordinator_log(broker)


def samples(metrics_text: str, family: str, suffix: str = "_total") -> list[tuple[dict[str, str], float]]:
    """(labels, value) of a family's samples named family + suffix (a counter's _total, a histogram's
    _bucket)."""
    from prometheus_client.parser import text_string_to_metric_families

    return [
        (s.labels, s.value)
        for f in text_string_to_metric_families(metrics_text)
        if f.name == family
        for s in f.samples
        if s.name == family + suffix
    ]


def settled_metrics(exporter: Exporter, timeout: float = 30.0) -> str:
    """The exporter's /metrics once every record it counted is timed or untimed (none waiting for its
    line, which waits at most the join's 10 s hold) and the count held for 3 s; or at `timeout`."""
    deadline, last, since = time.monotonic() + timeout, None, time.monotonic()
    while True:
        text = exporter.metrics()
        records = sum(v for _, v in samples(text, "kafka_transaction_state_log_records"))
        accounted = sum(v for _, v in samples(text, "txn_exporter_append_latency_transitions"))
        if (records, accounted) != last:
            last, since = (records, accounted), time.monotonic()
        elif records == accounted and time.monotonic() - since >= 3:
            return text
        if time.monotonic() > deadline:
            return text
        time.sleep(0.5)


def hdr_rank(values: list[int], q: float) -> int:
    """The value at quantile q as the exporter's gauges take it (HdrHistogram's getValueAtPercentile:
    the smallest value whose cumulative count reaches round(q * n)); 0 when there is none."""
    ordered = sorted(values)
    return ordered[max(1, int(q * len(ordered) + 0.5)) - 1] if ordered else 0


def cumulative_buckets(values: list[int], bounds: list[float]) -> list[int]:
    """How many of `values` (ms) are at or below each bound (seconds): a histogram's buckets."""
    return [sum(v <= bound * 1000 for v in values) for bound in bounds]


def per_state(metrics_text: str, truth: dict[str, list[int]], dumped: Counter, lines: Counter) -> dict[str, dict]:
    """Per target state: the exporter's counts and quantiles beside the coordinator's own."""
    by_state: dict[str, dict] = {}

    def counter(family: str, label: str, **match: str) -> dict[str, float]:
        return {
            labels[label]: value
            for labels, value in samples(metrics_text, family)
            if all(labels.get(k) == v for k, v in match.items())
        }

    records = counter("kafka_transaction_state_log_records", "target_state")
    clocks = {
        clock: counter("txn_exporter_append_latency_transitions", "target_state", clock=clock)
        for clock in ("coordinator", "fetch", "untimed")
    }
    quantiles = latency_quantiles(metrics_text)
    buckets: dict[str, list[tuple[float, float]]] = {}
    for labels, value in samples(metrics_text, "kafka_transaction_state_log_append_latency_seconds", "_bucket"):
        buckets.setdefault(labels["target_state"], []).append((float(labels["le"]), value))
    for state in sorted(set(records) | set(truth), key=lambda s: TransactionState[s]):
        if not records.get(state) and not truth.get(state):
            continue
        values = truth.get(state, [])
        ours = sorted(buckets.get(state, []))
        by_state[state] = {
            "records": int(records.get(state, 0)),
            **{f"timed_{clock}": int(counts.get(state, 0)) for clock, counts in clocks.items()},
            "dumped": dumped[state],
            "lines": lines[state],
            "exporter_ms": [quantiles.get(state, {}).get(q, float("nan")) for q in ("0.5", "0.99")],
            "coordinator_ms": [hdr_rank(values, q) for q in (0.5, 0.99)],
            "histogram_equal": [v for _, v in ours] == cumulative_buckets(values, [b for b, _ in ours]),
        }
    return by_state


def shortfalls(r: dict) -> list[str]:
    """Why a clock-mode run does not meet the goal (none: met)."""
    short = []
    if not r["carried"]:
        short.append(f"{r['asked']}/s not carried ({r['achieved']:.0f}/s)")
    elif r["asked"] < GOAL_RATE:
        short.append(f"{r['asked']}/s asked, under {GOAL_RATE}/s")
    for state, f in r["states"].items():
        off = [abs(e - c) for e, c in zip(f["exporter_ms"], f["coordinator_ms"])]
        if not all(d <= WITHIN_MS for d in off):  # (NaN, an empty window, fails too)
            short.append(f"{state} p50/p99 {f['exporter_ms']} against {f['coordinator_ms']}")
        if not f["timed_coordinator"] == f["records"] == f["dumped"]:
            short.append(f"{state}: {f['timed_coordinator']} timed of {f['records']} records, {f['dumped']} dumped")
    evicted = {k: v for k, v in r["unmatched"].items() if k.endswith("evicted")}
    if any(evicted.values()):
        short.append(f"evicted {evicted}")
    return short


def run_clock(args, layout: str, workdir: Path) -> dict:
    """One broker logging as `layout`, the exporter reading that file, the load, the comparison."""
    from txn_workshop import append_latency
    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.processes import free_port

    broker, log = start_broker(args.kafka, layout, workdir / layout)
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, DATA_TOPIC, partitions=DATA_PARTITIONS)
        create_internal_topics(broker.bootstrap_servers)
        exporter = Exporter(
            VENV_BIN / "txn-exporter",
            broker.bootstrap_servers,
            free_port(),
            ["--broker-log", str(log)],
            workdir / f"exporter-{layout}.log",
        )
        try:
            exporter.wait_ready()
            load = Load(broker.bootstrap_servers, args.rate, args.load_processes, args.load_threads, "lat")
            try:
                time.sleep(args.warmup)
                window = measure({"broker": broker._proc.pid, "exporter": exporter.proc.pid}, args.window, load)
            finally:
                load.stop()
            metrics_text = settled_metrics(exporter)
        finally:
            exporter.stop()
        tids = {f"lat-{n}-{i}" for n in range(args.load_processes) for i in range(args.load_threads)}
        created = append_latency.dumped_create_times(broker.dump_transaction_log(), tids)
        succeeded, _ = append_latency.coordinator_lines(append_latency.rolled_logs(log), tids)
    finally:
        broker.stop()
    truth: dict[str, list[int]] = {}
    for t, created_ms in created.items():
        if t in succeeded:  # (never, but a dumped record whose line is missing: counted below, not timed)
            truth.setdefault(TransactionState(t[1]).name, []).append(max(0, succeeded[t] - created_ms))
    unmatched = {
        f"{labels['kind']} {labels['reason']}": int(value)
        for labels, value in samples(metrics_text, "txn_exporter_append_clock_unmatched")
    }
    achieved = window.commits / window.seconds
    return {
        "kafka": args.kafka,
        "layout": layout,
        "asked": args.rate,
        "achieved": achieved,
        "carried": achieved >= CARRIED * args.rate,
        "states": per_state(
            metrics_text,
            truth,
            Counter(TransactionState(t[1]).name for t in created),
            Counter(TransactionState(t[1]).name for t in succeeded),
        ),
        "unmatched": unmatched,
        "exporter_cores": window.cpu["exporter"] / window.seconds,
        "exporter_per_broker": window.cpu["exporter"] / window.cpu["broker"] if window.cpu["broker"] else 0.0,
        "load_average": (window.load_before, window.load_after),
    }


def print_clock(r: dict) -> None:
    print(
        f"-- {r['kafka']}, {r['layout']}: {r['asked']}/s asked, {r['achieved']:.0f}/s achieved "
        f"({'carried' if r['carried'] else 'NOT carried'}); load average {r['load_average'][0]:.1f}-"
        f"{r['load_average'][1]:.1f}; exporter {r['exporter_cores']:.3f} cores, {r['exporter_per_broker']:.1%} of its broker",
        flush=True,
    )
    print(
        "   state            dumped  lines  records  timed coordinator/fetch/untimed  p50/p99 exporter  coordinator  histogram equal"
    )
    for state, f in r["states"].items():
        print(
            f"   {state:<16} {f['dumped']:>6} {f['lines']:>6} {f['records']:>8}  "
            f"{f['timed_coordinator']:>17}/{f['timed_fetch']}/{f['timed_untimed']}  "
            f"{'/'.join(f'{v:g}' for v in f['exporter_ms']):>16}  {'/'.join(map(str, f['coordinator_ms'])):>11}  "
            f"{'yes' if f['histogram_equal'] else 'NO'}"
        )
    nonzero = {k: v for k, v in r["unmatched"].items() if v}
    short = shortfalls(r)
    print(
        f"   join unmatched: {nonzero or 'none'}; P4 under load: {'met' if not short else 'NOT met: ' + '; '.join(short)}"
    )
    print(json.dumps(r), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", default="4.4.0")
    parser.add_argument(
        "--clock",
        choices=("fetch", "coordinator"),
        default="fetch",
        help="fetch: the busy fetch's excess per interval; coordinator: the clock mode (--broker-log) per log layout",
    )
    parser.add_argument(
        "--layouts",
        type=names_among(LAYOUTS),
        default=list(LAYOUTS),
        help=f"the clock mode's broker log files, among {', '.join(LAYOUTS)}",
    )
    parser.add_argument("--rate", type=int, help="transactions/s asked (default: 1000; the clock mode 340)")
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
    if args.clock == "coordinator":
        args.rate = args.rate or 340
        clock_main(args)
    else:
        args.rate = args.rate or 1000
        fetch_main(args)


def clock_main(args) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-clock-"))
    try:
        results = [run_clock(args, layout, workdir) for layout in args.layouts]
    except BaseException:
        print(f"logs kept in {workdir}", flush=True)
        raise
    for r in results:
        print_clock(r)
    shutil.rmtree(workdir, ignore_errors=True)


def fetch_main(args) -> None:
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
