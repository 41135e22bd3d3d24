"""What the sidecar costs in its deployment shape (issue 40, item 8): three brokers, an exporter beside each.

A 3-node KRaft cluster on loopback from the harness (the first node broker and controller, two
broker-only nodes joined; JMX on each), logging as deploy/broker-logging sets it up (the coordinator's
lines in txn-coordinator.log, server.log at INFO), `__transaction_state` at production defaults: 50
partitions, replication factor 3, min.insync.replicas 2, created once all three nodes run, so each node
leads about 17 (checked and printed); the offsets topic replicated 3 too, the data topic replicated 3
with min.insync.replicas 2. A paced transactional load (txn_load's Load: librdkafka producers in
processes of their own, begin / one message / commit) at each rate PER BROKER (three times that over
the cluster), its transactional ids chosen so that each coordinator gets a third of them; rate 0 is
the idle cluster.

Each block of windows holds one window of each kind, in the other order than the last block (ABBA),
so a drift within a block cancels over two:
- `without`: the brokers alone, TransactionStateManager at INFO, no exporter (the bill's base);
- `debug`: the same with TransactionStateManager at DEBUG, no exporter: the logger's own bill;
- `clock`: DEBUG, and beside each broker `txn-exporter run --broker-id N --broker-log
  <its txn-coordinator.log>`: the append latency on the coordinator's clock, the tail fetching for
  freshness only; the bill users of that mode pay (the exporter, the broker serving it, the logging);
- `fetch`: INFO, and beside each broker `txn-exporter run --broker-id N`: the fetch-timed mode.
The level is set at run time as an operator would (kafka-configs --entity-type broker-loggers) before
a window; exporters are started, each waited ready, then --settle seconds before their window, and
stopped after it (not running: no connection, no fetch).

Per broker and window: the broker's CPU and its exporter's (the whole process, utime + stime from
/proc; and apart, its librdkafka `rdk:*` threads' and its Python threads'), the records its exporter
read, the bytes its coordinator's log grew by, and the requests the broker served a second by type:
Kafka's own RequestMetrics RequestsPerSec counters (read with JmxTool just before and after each
window). Per broker, rate and kind, over the blocks: the broker alone (the median of its `without`
windows), with (the median of the kind's), its extra (the median of each block's difference), its
exporter's own CPU (median), each over the broker alone, the log's bytes a transaction, and the
requests the exporters send it a second by type. A rate counts as carried only if the transactions a
second achieved are within 5% of those asked in the `without` windows and in the kind's (medians);
a rate whose load alone falls short before its first block is reported as not carried and not
measured. `--runs N` makes N passes over the same rates on the same cluster (fresh load processes for
each rate of each pass); the table gives each pass and all passes pooled.

    .venv/bin/python bench/cluster_cost.py --json cluster-cost.json    # 10, 50, 200 a broker and idle; 8 blocks; 2 runs
    .venv/bin/python bench/cluster_cost.py --rates 10 --pairs 1 --window 5 --idle-window 5 --runs 1   # smoke
    .venv/bin/python bench/cluster_cost.py --rates 200 --kinds fetch --exporter-arg=--latency-resolution-ms=10
    .venv/bin/python bench/cluster_cost.py --rates 50 --kinds fetch --also-exporter ../other/.venv/bin/txn-exporter

`--exporter-arg` (repeated, in the `=` form) is passed to every exporter; `--also-exporter` (another
checkout's txn-exporter) and/or `--also-exporter-arg` add a kind `also` (fetch-timed, at INFO), and
`--floor` bare readers at INFO, each against the same block's window without.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cluster_readers import BareReader, records_read, start_exporters, stop_exporters
from bench.cluster_report import CARRIED, load_prices, print_overview, print_table, print_window, summarize
from bench.exporter_process import VENV_BIN, Exporter, latency_quantiles, records_total
from bench.options import names_among
from bench.proc_stats import jvm_thread_names, loadavg, measure, thread_cores, thread_cpu, thread_group_cores
from bench.three_broker_cluster import (
    NODES,
    balanced_prefix,
    coordinator_log_bytes,
    leadership,
    requests_served,
    set_coordinator_logs,
    start_cluster,
)
from bench.txn_load import Load, settle_commits_rate
from txn_workshop.harness import deployment_shape

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker


# --- windows ----------------------------------------------------------------------------------


def window(
    kind: str,
    brokers: list[KafkaBroker],
    exporters: list[Exporter | BareReader],
    load: Load,
    seconds: float,
    profiles: CellProfiles | None = None,
) -> dict:
    """One measured window: per broker its CPU, its exporter's (if any), the records its exporter read
    and the requests it served, a second; with `profiles`, each broker's JVM sampled by
    async-profiler over the window, and the cores its coordinator's DEBUG lines took."""
    pids: dict[str, int | list[int]] = {f"broker-{b.node_id}": b._proc.pid for b in brokers if b._proc}
    pids.update({f"exporter-{b.node_id}": e.proc.pid for b, e in zip(brokers, exporters)})  # none without
    pids["load"] = load.pids
    # Before every read, after them stopped: the agent's commands are not the window's CPU.
    profiled = profiles.start(kind) if profiles else None
    r0 = requests_served(brokers)
    m0 = [records_read(e) for e in exporters]
    th0 = [thread_cpu(e.proc.pid) for e in exporters]
    jvm0 = jvm_threads(brokers)
    logged0 = [coordinator_log_bytes(b) for b in brokers]
    w = measure(pids, seconds, load)
    logged1 = [coordinator_log_bytes(b) for b in brokers]
    th1 = [thread_cpu(e.proc.pid) for e in exporters]
    jvm1 = jvm_threads(brokers)
    ends = [window_end(e) for e in exporters]
    r1 = requests_served(brokers)
    logger_cores = profiled.stop() if profiled else {}
    per_broker = {}
    for i, broker in enumerate(brokers):
        (t0, c0), (t1, c1) = r0[i], r1[i]
        n = broker.node_id
        per_broker[str(n)] = {
            "cores": w.cpu[f"broker-{n}"] / w.seconds,
            "threads": thread_group_cores(
                jvm0.get(n, {}), jvm1.get(n, {}), thread_names(broker, jvm1.get(n, {})), w.seconds
            ),
            "exporter_cores": w.cpu[f"exporter-{n}"] / w.seconds if exporters else None,
            "exporter_threads": split_threads(th0[i], th1[i], w.seconds) if exporters else None,
            "records_per_s": (ends[i][0] - m0[i]) / w.seconds if exporters else None,
            # a floor's receipt minus timestamp (ms -> records) over the window: does it meet the resolution
            "latency_ms": ends[i][1] if exporters else None,
            "exporter_latency_ms": ends[i][2] if exporters else None,
            "requests_per_s": {k: (c1[k] - c0.get(k, 0.0)) / (t1 - t0) for k in sorted(c1)},
            "coordinator_log_bytes_per_s": (logged1[i] - logged0[i]) / w.seconds,
            "logger_cores": logger_cores.get(n),
        }
    return {
        "kind": kind,
        "seconds": round(w.seconds, 2),
        "load_average": [w.load_before, w.load_after],
        "transactions_per_s": w.commits / w.seconds,
        "load_cores": w.cpu["load"] / w.seconds,
        "brokers": per_broker,
    }


class CellProfiles:
    """async-profiler on every broker's JVM in each window of a cell, the recordings kept in
    `directory` and their summaries summed by kind (for `differences`)."""

    def __init__(self, brokers: list[KafkaBroker], directory: Path) -> None:
        self.pids = {b.node_id: b._proc.pid for b in brokers if b._proc}
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.totals: dict[str, dict[str, Counter[str]]] = {}
        self.recorded = 0

    def start(self, kind: str) -> Recording:
        from bench import broker_profile

        with ThreadPoolExecutor(len(self.pids)) as pool:
            list(pool.map(broker_profile.start, self.pids.values()))
        self.recorded += 1
        return Recording(self, kind, f"{self.recorded:03d}-{kind}", time.monotonic())

    def differences(self, variants: list[dict]) -> dict[str, str]:
        """Per kind, the brokers' samples over its windows against those over the windows without
        (all brokers and blocks summed): where their extra CPU goes."""
        from bench import broker_profile

        texts = {}
        for variant in variants:
            name = variant["name"]
            texts[name] = broker_profile.difference(self.totals[name], self.totals["without"])
            print(f"   the brokers' samples, {name} - without:\n{texts[name]}", flush=True)
        return texts


@dataclass
class Recording:
    cell: CellProfiles
    kind: str
    label: str
    started: float

    def stop(self) -> dict[int, float]:
        """Stops every broker's recording; returns each broker's cores under its coordinator's DEBUG
        log calls, and adds the summaries to the cell's totals for the kind."""
        from bench import broker_profile

        seconds = time.monotonic() - self.started
        paths = {n: self.cell.directory / f"{self.label}-b{n}.collapsed" for n in self.cell.pids}
        with ThreadPoolExecutor(len(paths)) as pool:
            list(pool.map(lambda n: broker_profile.stop(self.cell.pids[n], paths[n]), paths))
        total = self.cell.totals.setdefault(self.kind, {})
        cores = {}
        for n, path in paths.items():
            one = broker_profile.summary(path)
            for what, counts in one.items():
                total.setdefault(what, Counter()).update(counts)
            cores[n] = one["samples"]["logger"] * broker_profile.INTERVAL_MS / 1000 / seconds
        return cores


_JVM_NAMES: dict[int, dict[int, str]] = {}  # broker pid -> its threads' Java names (they do not change)


def thread_names(broker: KafkaBroker, threads: dict[int, tuple[str, float]]) -> dict[int, str]:
    """The broker's threads' Java names, asked of the JVM (jcmd, outside the window) only when a
    thread is new."""
    if not broker._proc:
        return {}
    names = _JVM_NAMES.setdefault(broker._proc.pid, {})
    if not set(threads) <= set(names):
        names.update(jvm_thread_names(broker._proc.pid))
        # Threads Java does not list (the launcher's) keep /proc's name, and are not asked for again.
        names.update({tid: comm for tid, (comm, _) in threads.items() if tid not in names})
    return names


def jvm_threads(brokers: list[KafkaBroker]) -> dict[int, dict[int, tuple[str, float]]]:
    """Each running broker's threads' CPU (thread_cpu), by node id."""
    return {b.node_id: thread_cpu(b._proc.pid) for b in brokers if b._proc}


def split_threads(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], seconds: float
) -> dict[str, float]:
    """A reader's cores over a window by kind of thread: librdkafka's (`rdk:*`: its fetches, in C) and
    Python's (the poll loop, and in an exporter its decode and model; its other threads next to none).
    Summed from thread_cores', each rounded to 0.0001 core."""
    cores = {"python": 0.0, "librdkafka": 0.0}
    for name, thread in thread_cores(before, after, {}, seconds).items():
        cores["librdkafka" if name.startswith("rdk:") else "python"] += thread
    return cores


def window_end(
    reader: Exporter | BareReader,
) -> tuple[float, dict[int, int] | None, dict[str, dict[str, float]] | None]:
    """At a window's end, from one read of the reader: the records it read so far; a floor's receipt
    minus timestamp (ms -> records) since its last read; an exporter's own append-latency quantiles
    by target state (its exact gauges: every record since it started, its window being 300 s), the
    states it saw."""
    if isinstance(reader, BareReader):
        return reader.records(), reader.latency, None
    text = reader.metrics()
    quantiles = latency_quantiles(text)
    seen = {state: q for state, q in quantiles.items() if all(v == v for v in q.values())}  # (NaN: none seen)
    return records_total(text), None, seen


# --- main -------------------------------------------------------------------------------------


class Levels:
    """The coordinators' log level now, changed only when a window wants another."""

    def __init__(self, brokers: list[KafkaBroker]) -> None:
        self.brokers = brokers
        self.level: str | None = None

    def set(self, level: str) -> None:
        if level != self.level:
            set_coordinator_logs(self.brokers, level)
            self.level = level


def run_cell(
    args: argparse.Namespace,
    brokers: list[KafkaBroker],
    load: Load,
    run: int,
    rate: int,
    variants: list[dict],
    levels: Levels,
    logs: Path,
) -> dict:
    # Sampled, a broker's JVM takes 16-29% more CPU (bench/broker_profile.py --overhead): the base of
    # the shares in place is then a window of its own, the brokers alone and not sampled.
    kinds = [v["name"] for v in variants] + ["without"] + (["alone"] if args.profile_broker else [])
    by_name = {v["name"]: v for v in variants} | {"alone": ALONE}
    seconds = args.window if rate else args.idle_window
    windows = []
    profiles = CellProfiles(brokers, logs / "profiles" / f"run{run}-rate{rate}") if args.profile_broker else None
    started = time.monotonic()
    for pair in range(1, args.pairs + 1):
        # Each block in the other order than the last (ABBA), so a drift within a block cancels over two.
        for kind in kinds if pair % 2 else kinds[::-1]:
            variant = by_name.get(kind, WITHOUT)
            levels.set(variant["level"])
            if not variant.get("exporters", True):
                time.sleep(args.gap)  # stopped exporters' connections closed, the level's change in force
                w = window(kind, brokers, [], load, seconds, None if kind == "alone" else profiles)
            else:
                exporters = start_exporters(variant, brokers, logs, args.ready_timeout)
                try:
                    time.sleep(args.settle)
                    w = window(kind, brokers, exporters, load, seconds, profiles)
                finally:
                    stop_exporters(exporters)
            w.update(run=run, pair=pair, level=variant["level"])
            print_window(w)
            windows.append(w)
    cell = {"run": run, "rate": rate, "wall_seconds": round(time.monotonic() - started), "windows": windows}
    print(f"   {args.pairs} blocks in {cell['wall_seconds']} s", flush=True)
    if profiles:
        cell["broker_profile"] = profiles.differences(variants)
    cell["summary"] = {
        v["name"]: summarize(windows, v["name"], rate * len(brokers), args.request_cpu) for v in variants
    }
    return cell


# The base of every block: the brokers alone, their coordinators at INFO.
WITHOUT = {"name": "without", "exporters": False, "level": "INFO"}
# The same, never sampled (with --profile-broker, when the others are): the shares' base.
ALONE = {"name": "alone", "exporters": False, "level": "INFO"}


def run(args: argparse.Namespace, variants: list[dict]) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    results: dict = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "kafka": args.kafka,
        "variants": [{**v, "executable": str(v.get("executable", ""))} for v in variants],
        "runs_are": "passes over the same rates and blocks on one cluster",
        "cells": [],
    }
    started = time.monotonic()
    print(f"Kafka {args.kafka}, 3 nodes in {workdir}; load average {loadavg():.2f}", flush=True)
    brokers = start_cluster(args.kafka, workdir)
    ok = False
    try:
        bootstrap = ",".join(b.bootstrap_servers for b in brokers)
        lead = leadership(bootstrap)
        results["cluster"] = {k: v for k, v in lead.items() if k != "leaders"}
        print(
            f"__transaction_state: {len(lead['leaders'])} partitions, replicas {lead['replicas']}, in sync "
            f"{lead['in_sync']}; led by node {lead['led']}, preferred {lead['preferred']} "
            f"(cluster up in {time.monotonic() - started:.0f} s)",
            flush=True,
        )
        levels = Levels(brokers)
        warm_coordinators(args, bootstrap, lead["leaders"], levels)
        for run_number in range(1, args.runs + 1):
            for rate in args.rates:
                prefix, ids = balanced_prefix(rate, lead["leaders"], args.load_processes, args.load_threads)
                load = Load(bootstrap, rate * len(brokers), args.load_processes, args.load_threads, prefix)
                try:
                    levels.set("INFO")
                    time.sleep(args.warmup if rate else 1)
                    achieved = carried_rate(load, rate * len(brokers))
                    print(
                        f"\n== run {run_number}: {rate} transactions/s a broker asked, {achieved:.0f}/s achieved over "
                        f"the cluster; transactional ids by coordinator {ids if rate else '-'} "
                        f"(load average {loadavg():.2f})",
                        flush=True,
                    )
                    if achieved < CARRIED * rate * len(brokers):
                        print(f"   not carried: the load alone falls short of {rate * len(brokers)}/s", flush=True)
                        results["cells"].append(
                            {"run": run_number, "rate": rate, "carried": False, "achieved": round(achieved, 1)}
                        )
                        continue
                    results["cells"].append(run_cell(args, brokers, load, run_number, rate, variants, levels, workdir))
                finally:
                    load.stop()
        results["request_cpu"] = args.request_cpu
        print_table(results["cells"], [v["name"] for v in variants], args.request_cpu)
        results["overview"] = print_overview(results["cells"], [v["name"] for v in variants], args.request_cpu)
        ok = True
    finally:
        deployment_shape.stop(brokers)
        if args.keep or not ok:
            print(f"brokers' and exporters' logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    results["wall_seconds"] = round(time.monotonic() - started)
    print(f"\nwall time {results['wall_seconds']} s")
    return results


def warm_coordinators(args: argparse.Namespace, bootstrap: str, leaders: dict[int, int], levels: Levels) -> None:
    """WARM_SECONDS of transactions on every coordinator at DEBUG, before the first window:
    - its log then holds `succeeded` lines, as a deployed broker's does once it has coordinated a
      transaction at DEBUG. An exporter started beside a coordinator whose log holds none yet runs the
      fetch clock until one comes (idle, its held fetch: the fetch kind's bill), so on a new
      cluster the clock kind's idle windows billed that mode on the nodes whose coordinator had
      appended nothing;
    - the brokers' JIT compiles the paths the windows run: after 15 s of load, the first block's
      brokers took 0.60-0.66 cores at 10 a broker, the third's 0.14-0.19."""
    prefix, _ = balanced_prefix(1, leaders, args.load_processes, args.load_threads)
    levels.set("DEBUG")
    warm = Load(bootstrap, WARM_RATE * len(NODES), args.load_processes, args.load_threads, prefix)
    try:
        settle_commits_rate(warm, WARM_SECONDS)
    finally:
        warm.stop()


WARM_RATE = 20  # transactions a second a broker
WARM_SECONDS = 90.0


def carried_rate(load: Load, asked: float, tries: int = 4) -> float:
    """The load's rate over 5 s, measured again (up to `tries` times) while it falls short of the asked:
    its producers may still be starting (a fresh cluster's coordinators load their partitions)."""
    best = 0.0
    for _ in range(tries):
        best = max(best, settle_commits_rate(load, 5.0))
        if best >= CARRIED * asked:
            break
    return best


KINDS = ("debug", "clock", "fetch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", default="4.4.0", help="Kafka version of the brokers")
    parser.add_argument(
        "--rates",
        type=lambda s: [int(x) for x in s.split(",")],
        # Idle last: the coordinators' logs then hold `succeeded` lines, as a running cluster's do, and
        # an exporter started beside an idle broker finds them (CoordinatorLogAtDebug).
        default=[10, 50, 200, 0],
        help="transactions/s a broker (3x over the cluster), 0 the idle cluster",
    )
    parser.add_argument(
        "--kinds",
        type=names_among(KINDS),
        default=list(KINDS),
        help=f"the windows beside each `without`, of {', '.join(KINDS)}",
    )
    parser.add_argument("--pairs", type=int, default=8, help="blocks of one window of each kind")
    parser.add_argument("--window", type=float, default=10.0, help="seconds measured in each window")
    parser.add_argument("--idle-window", type=float, default=16.0, help="seconds measured in each idle window")
    parser.add_argument("--runs", type=int, default=2, help="passes over the same windows, on the same cluster")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds after the exporters are ready")
    parser.add_argument("--gap", type=float, default=2.0, help="seconds after the exporters stopped")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds of load before a rate's first window")
    parser.add_argument("--ready-timeout", type=float, default=120.0)
    parser.add_argument("--load-processes", type=int, default=3)
    parser.add_argument("--load-threads", type=int, default=16, help="transactional producers a load process")
    parser.add_argument(
        "--exporter", type=Path, default=VENV_BIN / "txn-exporter", help="the txn-exporter to run (another checkout's)"
    )
    parser.add_argument(
        "--exporter-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="passed to every exporter, repeatable, in the = form: --exporter-arg=--latency-window-seconds=60",
    )
    parser.add_argument("--also-exporter", type=Path, help="a kind `also`: this txn-exporter (another checkout's)")
    parser.add_argument(
        "--also-exporter-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="the kind `also`'s arguments instead of --exporter-arg's (its executable: --also-exporter or ours)",
    )
    parser.add_argument(
        "--floor",
        action="append",
        default=[],
        choices=("bare", "bare-nudged", "bare-nudged-due", "kafka-python", "kafka-python-hold"),
        help="a kind of bare readers (repeatable): `bare`, librdkafka with the exporter's fetch-timed pattern and "
        "nothing else; `bare-nudged`, the same and a ListOffsets to its broker every resolution; "
        "`bare-nudged-due`, the same nudging as the exporter does (while a COMPLETE_* is due); "
        "`kafka-python`, that client with fetch sessions, its fetch held the "
        "resolution; `kafka-python-hold`, the same, its fetch held until the first byte, its polls the resolution apart",
    )
    parser.add_argument(
        "--resolution-ms", type=int, default=None, help="the floors' resolution (default: the exporter's default)"
    )
    parser.add_argument(
        "--profile-broker",
        action="store_true",
        help="every window's brokers sampled by async-profiler (bench/broker_profile.py): the cores under "
        "their coordinators' DEBUG log calls, and per rate where their extra CPU goes",
    )
    parser.add_argument(
        "--request-cpu",
        type=load_prices,  # read once, where the option is: the µs a request by type
        help="bench/request_cpu.py's --json (µs of broker CPU a request, by type): the bill in place too",
    )
    parser.add_argument(
        "--fetch-resolutions",
        default="",
        help="kinds fetch@R (comma-separated ms): the fetch-timed exporter at --latency-resolution-ms=R",
    )
    parser.add_argument("--keep", action="store_true", help="keep the brokers' and exporters' logs")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    standard = {
        "debug": {"name": "debug", "exporters": False, "level": "DEBUG"},
        "clock": {
            "name": "clock",
            "executable": args.exporter,
            "args": args.exporter_arg,
            "broker_log": True,
            "level": "DEBUG",
        },
        "fetch": {"name": "fetch", "executable": args.exporter, "args": args.exporter_arg, "level": "INFO"},
    }
    variants = [standard[kind] for kind in args.kinds]
    variants += [
        {
            "name": f"fetch@{ms}",
            "executable": args.exporter,
            "args": [*args.exporter_arg, f"--latency-resolution-ms={ms}"],
            "level": "INFO",
        }
        for ms in filter(None, args.fetch_resolutions.split(","))
    ]
    if args.also_exporter or args.also_exporter_arg:
        variants.append(
            {
                "name": "also",
                "executable": args.also_exporter or args.exporter,
                "args": args.also_exporter_arg or args.exporter_arg,
                "level": "INFO",
            }
        )
    if args.floor:
        from exporter import defaults

        resolution = args.resolution_ms or defaults.LATENCY_RESOLUTION_MS
        variants += [
            {"name": floor, "args": [], "reader": floor, "resolution_ms": resolution, "level": "INFO"}
            for floor in args.floor
        ]
    # A SIGTERM runs the finally blocks too: no broker, exporter or load process is left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    print("command:", shlex.join([sys.executable, *sys.argv]), flush=True)
    results = run(args, variants)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
