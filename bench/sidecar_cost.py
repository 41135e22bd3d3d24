"""What the exporter costs beside a real broker (issue 22), measured side by side in one run.

A real broker from the harness (one node, 50 `__transaction_state` partitions, JMX on), a steady
transactional workload at set rates (librdkafka producers in processes of their own, paced: begin /
one message / commit, so about 3 `__transaction_state` records per transaction), and beside it, at
once:
- the real exporter process, `txn-exporter run` as a user runs it (with `--broker-log server.log`
  and TransactionStateManager at DEBUG in the "broker log" mode);
- a bare confluent-kafka consumer process (`bare` below): every `__transaction_state` partition,
  the exporter's own fetch settings and loop, counting records and nothing else: the floor no
  Python consumer of the same fetch pattern can beat.

Per rate and mode, over the same window: CPU time of broker, exporter and bare consumer (each
process's CPU clock: every thread, the dead ones included), the exporter's per-thread CPU
(/proc/PID/task/*/schedstat: librdkafka's `rdk:*` threads apart from Python's), RSS, the fetch requests
the broker served (its RequestMetrics RequestsPerSec{request=Fetch} over JMX with Kafka's JmxTool;
the bare consumer's own count from librdkafka's statistics, the exporter's is the rest), the broker's
CPU with the load alone (no reader) for the cost of serving them, and the append-latency bound's
distribution (the exporter's exact quantile gauges; the bare consumer's receipt minus record
timestamp, ms).

    .venv/bin/python bench/sidecar_cost.py                       # rates 200, 1000, 2000; both modes
    .venv/bin/python bench/sidecar_cost.py --rates 1000 --modes plain --window 40
    .venv/bin/python bench/sidecar_cost.py --kafka-config fetch.wait.max.ms=5 --kafka-config fetch.min.bytes=1048576
    .venv/bin/python bench/sidecar_cost.py --profile 20          # py-spy record --native of the exporter, per rate
    .venv/bin/python bench/sidecar_cost.py --rates 1000,1500 --profile-broker --request-cpu request-cpu.json   # in place
    .venv/bin/python bench/sidecar_cost.py --also-interval 5     # and an exporter at 5 ms, in the same window
    .venv/bin/python bench/sidecar_cost.py --also-exporter ../other/.venv/bin/txn-exporter   # two versions, one window
    .venv/bin/python bench/sidecar_cost.py --logging-config deploy/broker-logging/log4j2.properties

The machine is shared: the load average is printed with every window; ratios measured side by side
in one window hold up under some load, absolute CPU figures less so.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bare_consumer import Bare, bare_main, fetch_pattern, histogram_quantiles
from bench.cluster_report import load_prices
from bench.exporter_process import TSM_LOGGER, VENV_BIN, Exporter, latency_quantiles, records_total
from bench.proc_stats import loadavg, measure, python_thread_names, rss_mib, thread_cores, thread_cpu
from bench.txn_load import DATA_PARTITIONS, DATA_TOPIC, Load, add_load_arguments, load_main, settle_commits_rate

# --- the broker -------------------------------------------------------------------------------


def fetch_requests(broker) -> tuple[float, float]:
    """(time, Fetch requests served since start) from the broker's RequestMetrics, all versions."""
    from txn_workshop.harness import jmx

    values = jmx.read(broker, "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch,version=*")
    return time.time(), sum(values.values())


DEPLOY_LOG = "txn-coordinator.log"


def coordinator_log(args, broker) -> Path:
    """The file the broker writes the coordinator's lines to: deploy/broker-logging's own file when
    --logging-config names it, else server.log."""
    if args.logging_config is not None and DEPLOY_LOG in args.logging_config.read_text():
        return broker.server_log.with_name(DEPLOY_LOG)
    return broker.server_log


def profiled(args, broker, path: Path, window):
    """`window()`'s result and, with --profile-broker, the broker's cores under the coordinator's DEBUG
    log calls meanwhile (async-profiler, bench/broker_profile.py), else None."""
    if not args.profile_broker:
        return window(), None
    from bench import broker_profile

    broker_profile.start(broker._proc.pid)
    started = time.monotonic()
    result = window()
    seconds = time.monotonic() - started
    summary = broker_profile.summary(broker_profile.stop(broker._proc.pid, path.with_suffix(".collapsed")))
    return result, summary["samples"]["logger"] * broker_profile.INTERVAL_MS / 1000 / seconds


# --- main -------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> dict:
    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker
    from txn_workshop.harness.processes import free_port
    from txn_workshop.harness.workload import set_logger_level

    pattern = fetch_pattern(args)
    results: dict = {"exporter": str(args.exporter), "pattern": pattern, "runs": []}
    workdir = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    broker = KafkaBroker(args.kafka, jmx=True, workdir=workdir / "broker", logging_config=args.logging_config)
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, DATA_TOPIC, partitions=DATA_PARTITIONS)
        create_internal_topics(broker.bootstrap_servers)  # so even the idle exporter has its 50 partitions
        for rate in args.rates:
            load = Load(broker.bootstrap_servers, rate, args.load_processes, args.load_threads, f"r{rate}")
            try:
                time.sleep(args.warmup)
                achieved = settle_commits_rate(load)
                print(
                    f"\n== {rate} transactions/s asked, {achieved:.0f}/s achieved (load average {loadavg():.2f})",
                    flush=True,
                )
                for mode in args.modes:
                    results["runs"].append(
                        run_mode(args, broker, load, rate, mode, pattern, workdir, set_logger_level, free_port)
                    )
            finally:
                load.stop()
    finally:
        broker.stop()
        if args.profile:
            print(f"profiles and logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return results


def run_mode(args, broker, load, rate, mode, pattern, workdir, set_logger_level, free_port):
    broker_log = mode == "broker-log"
    level = "DEBUG" if broker_log else None
    if getattr(broker, "_bench_tsm_level", None) != level:
        set_logger_level(broker, TSM_LOGGER, level or "INFO")
        broker._bench_tsm_level = level
        time.sleep(2)
    # The quantile gauges over the measured window only, not the start (records appended during the
    # replay are live, and wait for it).
    extra = [f"--kafka-config={k}={v}" for k, v in pattern["kafka_config"].items()]
    extra += ["--latency-window-seconds", str(args.window)]
    if not args.before:
        extra += ["--latency-resolution-ms", str(args.latency_resolution_ms)]
    if broker_log:
        extra += ["--broker-log", str(coordinator_log(args, broker))]
    exporter = Exporter(
        args.exporter, broker.bootstrap_servers, free_port(), extra, workdir / f"exporter-{rate}-{mode}.log"
    )
    # A second exporter in the same window, at another --latency-resolution-ms or from another checkout: the
    # two compared under the same load, which the machine's drift between windows otherwise blurs.
    also = None
    if args.also_interval or args.also_exporter:
        also = Exporter(
            args.also_exporter or args.exporter,
            broker.bootstrap_servers,
            free_port(),
            # (the last --latency-resolution-ms counts)
            [*extra, "--latency-resolution-ms", str(args.also_interval)] if args.also_interval else extra,
            workdir / f"exporter-{rate}-{mode}-also.log",
        )
    bare = Bare(broker.bootstrap_servers, pattern)
    try:
        if also is not None:
            also.wait_ready()
        ready_s = exporter.wait_ready()
        rss_ready = rss_mib(exporter.proc.pid)
        time.sleep(args.settle)
        pids = {"broker": broker._proc.pid, "exporter": exporter.proc.pid, "bare": bare.proc.pid, "load": load.pids}
        if also is not None:
            pids["also"] = also.proc.pid
        f0 = fetch_requests(broker)
        b0 = bare.snapshot()
        th0 = thread_cpu(exporter.proc.pid)
        also_th0 = thread_cpu(also.proc.pid) if also is not None else {}
        m0 = records_total(exporter.metrics())
        window, logger_cores = profiled(
            args, broker, workdir / f"broker-{rate}-{mode}", lambda: measure(pids, args.window, load)
        )
        m1 = records_total(exporter.metrics())
        th1 = thread_cpu(exporter.proc.pid)
        also_th1 = thread_cpu(also.proc.pid) if also is not None else {}
        names = python_thread_names(exporter.proc.pid)
        also_names = python_thread_names(also.proc.pid) if also is not None else {}
        b1 = bare.snapshot()
        f1 = fetch_requests(broker)
        profile = None
        if args.profile:
            profile = workdir / f"profile-{rate}-{mode}.json"
            spy = subprocess.run(
                [
                    str(VENV_BIN / "py-spy"),
                    "record",
                    "--native",
                    "--threads",
                    "-r",
                    "200",
                    "-d",
                    str(round(args.profile)),
                    "-f",
                    "speedscope",
                    "-o",
                    str(profile),
                    "-p",
                    str(exporter.proc.pid),
                ],
                capture_output=True,
                text=True,
            )
            if not profile.exists():
                print(f"py-spy failed: {spy.stdout[-2000:]} {spy.stderr[-2000:]}")
                profile = None
        quantiles = latency_quantiles(exporter.metrics())
        also_quantiles = latency_quantiles(also.metrics()) if also is not None else None
        rss = rss_mib(exporter.proc.pid)
        bare_rss = rss_mib(bare.proc.pid)
    finally:
        exporter.stop()
        bare.stop()
        if also is not None:
            also.stop()
    # The broker with the load alone, after the readers stopped (before them, its JIT was still
    # warming up): what serving the readers' fetches costs it is the difference.
    time.sleep(2)
    alone = measure({"broker": broker._proc.pid, "load": load.pids}, args.alone_window, load)
    # Sampled, the broker takes 16-29% more CPU (bench/broker_profile.py --overhead): its log calls
    # alone are read in a window of their own, the broker's CPU alone in the one above, not sampled.
    alone_logger_cores = None
    if args.profile_broker:
        _, alone_logger_cores = profiled(
            args,
            broker,
            workdir / f"broker-{rate}-{mode}-alone",
            lambda: measure({"broker": broker._proc.pid, "load": load.pids}, args.alone_window, load),
        )
    fetch_total = (f1[1] - f0[1]) / (f1[0] - f0[0])
    bare_fetches = (b1["fetches"] - b0["fetches"]) / max(1e-9, b1["stats_t"] - b0["stats_t"])
    bare_records = b1["records"] - b0["records"]
    seconds = window.seconds
    cpu = window.cpu
    txn_rate = window.commits / seconds
    records = m1 - m0
    result = {
        "rate_asked": rate,
        "mode": mode,
        "seconds": round(seconds, 1),
        "load_average": [window.load_before, window.load_after],
        "transactions_per_s": round(txn_rate),
        "records_per_s": round(records / seconds),
        "bare_records_per_s": round(bare_records / seconds),
        "cpu_cores": {k: round(v / seconds, 4) for k, v in cpu.items()},
        "broker_alone_cores": round(alone.cpu["broker"] / alone.seconds, 4),
        "broker_alone_transactions_per_s": round(alone.commits / alone.seconds),
        "exporter_over_broker": round(cpu["exporter"] / cpu["broker"], 4),
        "bare_over_broker": round(cpu["bare"] / cpu["broker"], 4),
        "exporter_us_per_record": round(cpu["exporter"] / max(records, 1) * 1e6, 1),
        "bare_us_per_record": round(cpu["bare"] / max(bare_records, 1) * 1e6, 1),
        "fetches_per_s": {
            "all": round(fetch_total),
            "bare": round(bare_fetches),
            "exporter" if also is None else "both exporters": round(fetch_total - bare_fetches),
        },
        "bare_polls_per_s": round((b1["polls"] - b0["polls"]) / seconds),
        "bare_busy_share": round((b1["busy_seconds"] - b0["busy_seconds"]) / seconds, 2),
        "exporter_pattern_lines": [
            line.split(": ", 1)[-1].strip()
            for line in (workdir / f"exporter-{rate}-{mode}.log").read_text().splitlines()
            if "topic_tail: busy" in line or "topic_tail: idle" in line
        ][-3:],
        "exporter_threads_cores": thread_cores(th0, th1, names, seconds),
        "exporter_rss_mib": {"ready": round(rss_ready[0], 1), "end": round(rss[0], 1), "peak": round(rss[1], 1)},
        "bare_rss_mib": round(bare_rss[0], 1),
        "ready_seconds": round(ready_s, 2),
        "exporter_latency_ms": quantiles,
        "bare_latency_ms": {
            str(q): v for q, v in histogram_quantiles({int(k): v for k, v in b1["latency"].items()}).items()
        },
        "profile": str(profile) if profile else None,
    }
    if logger_cores is not None and alone_logger_cores is not None:
        # In place (issue 52): the exporter's process, the broker's CPU under the coordinator's DEBUG log
        # calls and, with --request-cpu, serving the exporter's fetches (the Fetch requests beyond the
        # bare reader's, halved when two exporters ran: theirs are alike), over the broker alone less its
        # log calls (at INFO).
        broker_at_info = result["broker_alone_cores"] - alone_logger_cores
        exporter_fetches = (fetch_total - bare_fetches) / (1 if also is None else 2)
        serving = exporter_fetches * args.request_cpu["FetchConsumer"] / 1e6 if args.request_cpu else 0.0
        in_place = result["cpu_cores"]["exporter"] + logger_cores + serving
        result["in_place"] = {
            "serving_cores": round(serving, 4) if args.request_cpu else None,
            "logger_cores": round(logger_cores, 4),
            "alone_logger_cores": round(alone_logger_cores, 4),
            "broker_alone_at_info_cores": round(broker_at_info, 4),
            "cores": round(in_place, 4),
            "over_broker_alone": round(in_place / broker_at_info, 4),
            "exporter_over_broker_alone": round(result["cpu_cores"]["exporter"] / broker_at_info, 4),
        }
    if also_quantiles is not None:
        result["also"] = {
            "exporter": str(args.also_exporter or args.exporter),
            "interval_ms": args.also_interval or pattern["interval_ms"],
            "threads_cores": thread_cores(also_th0, also_th1, also_names, seconds),
            "cores": round(cpu["also"] / seconds, 4),
            "over_broker": round(cpu["also"] / cpu["broker"], 4),
            "latency_ms": also_quantiles,
        }
    # Broker CPU serving the readers' fetches: with them minus without, at the same load.
    alone_rate = alone.commits / alone.seconds
    broker_extra = cpu["broker"] / seconds - result["broker_alone_cores"] * (txn_rate / alone_rate if alone_rate else 1)
    result["broker_cores_for_readers"] = round(broker_extra, 4)
    result["broker_us_per_fetch"] = round(broker_extra / max(1, fetch_total) * 1e6, 1)
    print_result(result)
    return result


def print_result(r: dict) -> None:
    cores = r["cpu_cores"]
    lat = r["exporter_latency_ms"]
    pc = lat.get("PREPARE_COMMIT", {})
    print(
        f"-- {r['mode']}: {r['transactions_per_s']} txn/s, {r['records_per_s']} records/s over {r['seconds']} s, "
        f"load average {r['load_average'][0]:.2f}-{r['load_average'][1]:.2f}"
    )
    print(
        f"   CPU cores: broker {cores['broker']:.3f} (alone {r['broker_alone_cores']:.3f} at "
        f"{r['broker_alone_transactions_per_s']} txn/s), exporter {cores['exporter']:.4f}, bare {cores['bare']:.4f}, "
        f"load {cores['load']:.3f}"
    )
    print(
        f"   exporter/broker {r['exporter_over_broker']:.1%} ({r['exporter_us_per_record']} us/record), "
        f"bare/broker {r['bare_over_broker']:.1%} ({r['bare_us_per_record']} us/record)"
    )
    print(
        f"   fetches/s: {r['fetches_per_s']}; bare polls/s {r['bare_polls_per_s']}; broker CPU for the readers "
        f"{r['broker_cores_for_readers']:.3f} cores (~{r['broker_us_per_fetch']} us per fetch)"
    )
    print(f"   exporter threads (cores): {r['exporter_threads_cores']}")
    print(
        f"   fetch pattern: exporter {r['exporter_pattern_lines']}; bare busy {r['bare_busy_share']:.0%} of the window"
    )
    print(f"   RSS MiB: exporter {r['exporter_rss_mib']}, bare {r['bare_rss_mib']}; ready in {r['ready_seconds']} s")
    print(
        f"   latency ms: exporter PREPARE_COMMIT {pc}; all states p99 max "
        f"{max((q.get('0.99', 0) for q in lat.values() if q.get('0.99', 0) == q.get('0.99', 0)), default=0):.1f}; bare {r['bare_latency_ms']}"
    )
    if r.get("in_place"):
        i = r["in_place"]
        print(
            f"   in place: exporter {cores['exporter']:.4f} + the broker under its DEBUG log calls "
            f"{i['logger_cores']:.4f} + serving its fetches {i['serving_cores'] if i['serving_cores'] is not None else 'unpriced'}"
            f" = {i['cores']:.4f} cores, {i['over_broker_alone']:.1%} of the broker alone at "
            f"INFO ({i['broker_alone_at_info_cores']:.3f}: alone {r['broker_alone_cores']:.3f} less its log calls "
            f"{i['alone_logger_cores']:.4f}); the exporter alone {i['exporter_over_broker_alone']:.1%}"
        )
    if r.get("also"):
        a = r["also"]
        print(
            f"   beside it, {a['exporter']} at {a['interval_ms']} ms: {a['cores']:.4f} cores, "
            f"{a['over_broker']:.1%} of the broker; PREPARE_COMMIT {a['latency_ms'].get('PREPARE_COMMIT', {})}"
        )
        print(f"   its threads (cores): {a['threads_cores']}")
    if r["profile"]:
        print(f"   profile: {r['profile']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    add_load_arguments(sub.add_parser("load"))
    p = sub.add_parser("bare")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--settings", required=True)
    p.add_argument("--busy")
    p.add_argument("--interval", type=float)
    p.add_argument("--broker-id", type=int)
    p.add_argument("--nudge-ms", type=float, help="a ListOffsets request to the broker every this many ms")
    p.add_argument(
        "--nudge-prepared-ms",
        type=float,
        help="the exporter's nudges: while idle and a transaction's COMPLETE_* is due (its PREPARE_* read, for at "
        "most fetch_pattern.nudge_for_ms), a ListOffsets request to the broker every this many ms",
    )
    parser.add_argument("--kafka", default="4.4.0", help="Kafka version of the broker")
    parser.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[200, 1000, 2000])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["plain", "broker-log"])
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured, side by side")
    parser.add_argument("--alone-window", type=float, default=10.0, help="seconds of the load without readers")
    # The broker's JIT warms up under the first rate's load for longer than 8 s: after 8 s, the first
    # window read the broker 0.22-0.28 cores above the broker alone just after it (a later mode's window,
    # 0.02-0.04), and so the exporter's share of it low.
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds of each rate's load before its windows")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the exporter is ready")
    parser.add_argument("--load-processes", type=int, default=2)
    parser.add_argument("--load-threads", type=int, default=8)
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        help="KEY=VALUE for both the exporter (--kafka-config) and the bare consumer",
    )
    parser.add_argument(
        "--latency-resolution-ms",
        type=int,
        default=None,
        help="the exporter's --latency-resolution-ms (default: its own)",
    )
    parser.add_argument(
        "--also-interval", type=int, help="a second exporter in the same window, at this --latency-resolution-ms"
    )
    parser.add_argument(
        "--also-exporter",
        type=Path,
        help="a second exporter in the same window: this txn-exporter (another checkout's), side by side",
    )
    parser.add_argument(
        "--exporter", type=Path, default=VENV_BIN / "txn-exporter", help="the txn-exporter to run (another checkout's)"
    )
    parser.add_argument(
        "--before",
        action="store_true",
        help="the bare consumer reads as the exporter did before issue 22 (with --exporter of that version)",
    )
    parser.add_argument("--profile", type=float, default=0, help="seconds of py-spy record --native after each window")
    parser.add_argument(
        "--profile-broker",
        action="store_true",
        help="sample the broker with async-profiler in every window: the bill in place (the exporter, and the "
        "broker under the coordinator's DEBUG log calls, over the broker alone at INFO)",
    )
    parser.add_argument(
        "--request-cpu",
        type=load_prices,  # read once, where the option is
        help="bench/request_cpu.py's --json: with --profile-broker, the exporter's fetches priced in the bill in place",
    )
    parser.add_argument(
        "--logging-config",
        type=Path,
        help="the broker's log4j configuration (e.g. deploy/broker-logging/'s) instead of the harness's own",
    )
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    if args.command is None and args.latency_resolution_ms is None:
        from exporter import defaults

        args.latency_resolution_ms = defaults.LATENCY_RESOLUTION_MS
    if args.command == "load":
        load_main(args)
    elif args.command == "bare":
        bare_main(args)
    else:
        results = run(args)
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
