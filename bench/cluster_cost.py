"""What the sidecar costs in its deployment shape (issue 29, item 1): three brokers, an exporter beside each.

A 3-node KRaft cluster on loopback from the harness (the first node broker and controller, two
broker-only nodes joined; JMX on each), `__transaction_state` at production defaults: 50 partitions,
replication factor 3, min.insync.replicas 2, created once all three nodes run, so each node leads
about 17 (checked and printed); the offsets topic replicated 3 too, the data topic replicated 3 with
min.insync.replicas 2. A paced transactional load (sidecar_cost's Load: librdkafka producers in
processes of their own, begin / one message / commit) at each rate PER BROKER (three times that over
the cluster), its transactional ids chosen so that each coordinator gets a third of them; rate 0 is
the idle cluster. Beside each broker its own `txn-exporter run --bootstrap-servers <that broker>
--broker-id N`, on its own metrics port (with `--broker-log <its server.log>` and the brokers'
TransactionStateManager at DEBUG in the broker-log mode).

Windows alternate in pairs, ABBA (a pair with then without, the next without then with): "with", the
three exporters started, each waited ready, then --settle seconds before the window; "without", the
three stopped (not running: no connection, no fetch). Per broker and window: the broker's CPU and its
exporter's (the whole process, utime + stime from /proc; and apart, its librdkafka `rdk:*` threads'
and its Python threads', from /proc/PID/task), the records its exporter read, and the
requests the broker served a second by type: Kafka's own RequestMetrics RequestsPerSec counters
(`kafka.network:type=RequestMetrics,name=RequestsPerSec,request=X,version=V`, Count, summed over the
versions; read with JmxTool just before and after each window; a Fetch is counted as Fetch and again
as FetchConsumer or FetchFollower). Per broker, rate and mode, over the pairs: the broker alone (the
median of its windows without), with (the median of its windows with), its extra (the median of each
pair's difference), its exporter's own CPU (median), each over the broker alone, and the requests the
exporters send it a second by type (the median of each pair's difference of the rates: the load is the
same in both windows). `--runs N` makes N passes over the same rates, modes and pairs on the same
cluster (fresh load processes for each rate of each pass); the table gives each pass and all passes
pooled. The load average is printed with every window.

    .venv/bin/python bench/cluster_cost.py      # rates 10, 50, 200 a broker and idle; both modes; 8 pairs of 30 s; 2 runs
    .venv/bin/python bench/cluster_cost.py --rates 10 --modes plain --pairs 1 --window 5 --runs 1   # smoke
    .venv/bin/python bench/cluster_cost.py --rates 0 --modes plain --pairs 1 --window 5 --runs 1    # idle smoke
    .venv/bin/python bench/cluster_cost.py --rates 200 --exporter-arg=--latency-resolution-ms=10
    .venv/bin/python bench/cluster_cost.py --rates 200 --also-exporter ../other/.venv/bin/txn-exporter
    .venv/bin/python bench/cluster_cost.py --rates 200 --also-exporter-arg=--latency-resolution-ms=10 --json out.json

`--exporter-arg` (repeated, in the `=` form) is passed to every exporter; `--also-exporter` (another
checkout's txn-exporter) and/or `--also-exporter-arg` add a variant: its windows join each pair's
(with, also, without; the next pair without, also, with), each variant against the same pair's window
without.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sidecar_cost import (
    DATA_PARTITIONS,
    DATA_TOPIC,
    TOPIC,
    TSM_LOGGER,
    VENV_BIN,
    Bare,
    Exporter,
    Load,
    fetch_pattern,
    histogram_quantiles,
    latency_quantiles,
    loadavg,
    measure,
    records_total,
    settle_commits_rate,
    thread_cores,
    thread_cpu,
)

if TYPE_CHECKING:
    from txn_workshop.harness.broker import KafkaBroker

NODES = (1, 2, 3)
# kafka-python-hold's fetch, held until the first byte or this long: as long as the exporter's idle
# fetch is held, so that both make 10 fetches a second when nothing is appended.
HOLD_WAIT_MS = 100
# Production defaults for the internal topics (and the offsets topic valid on three nodes).
CLUSTER_PROPERTIES = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "offsets.topic.replication.factor": "3",
}
REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"
# The request types printed first, in this order; any other whose median difference is not zero follows.
SHOWN = (
    "FetchConsumer",
    "Fetch",
    "FetchFollower",
    "Metadata",
    "ListOffsets",
    "OffsetForLeaderEpoch",
    "DescribeConfigs",
    "DescribeProducers",
    "ListTransactions",
    "DescribeTransactions",
    "ApiVersions",
    "FindCoordinator",
    "DescribeCluster",
    "Produce",
)


# --- the cluster ------------------------------------------------------------------------------


def start_cluster(version: str, root: Path) -> list[KafkaBroker]:
    from txn_workshop.harness.admin import alter_topic_config, create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker

    first = KafkaBroker(version, workdir=root / "1", broker_properties=CLUSTER_PROPERTIES, jmx=True)
    brokers = (
        [first]
        + [
            KafkaBroker(
                version,
                workdir=root / str(n),
                join=first,
                node_id=n,
                broker_properties=CLUSTER_PROPERTIES,
                jmx=True,
                internal_topics_on_join=False,  # created below, once all three run: replication factor 3
            )
            for n in NODES[1:]
        ]
    )
    try:
        for broker in brokers:
            broker.start()
        bootstrap = ",".join(b.bootstrap_servers for b in brokers)
        create_internal_topics(bootstrap)
        create_topic(bootstrap, DATA_TOPIC, partitions=DATA_PARTITIONS, replication_factor=3)
        alter_topic_config(bootstrap, DATA_TOPIC, {"min.insync.replicas": "2"})
    except BaseException:
        stop_cluster(brokers)
        raise
    return brokers


def stop_cluster(brokers: list[KafkaBroker]) -> None:
    for broker in reversed(brokers):  # the joined brokers first: they need the controller to stop
        broker.stop()


def leadership(bootstrap: str, timeout: float = 60) -> dict:
    """`__transaction_state`'s leader of each partition, once every partition has its 3 replicas in
    sync; the partitions each node leads and is the preferred leader of (first replica)."""
    from confluent_kafka.admin import AdminClient

    from txn_workshop.harness.admin import CLIENT_LOG

    admin = AdminClient({"bootstrap.servers": bootstrap}, **CLIENT_LOG)
    deadline = time.monotonic() + timeout
    while True:
        partitions = admin.list_topics(TOPIC, timeout=30).topics[TOPIC].partitions
        if all(len(p.isrs) == 3 and p.leader in NODES for p in partitions.values()) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return {
        "leaders": {p: meta.leader for p, meta in sorted(partitions.items())},
        "led": dict(sorted(Counter(meta.leader for meta in partitions.values()).items())),
        "preferred": dict(sorted(Counter(meta.replicas[0] for meta in partitions.values()).items())),
        "replicas": sorted({len(meta.replicas) for meta in partitions.values()}),
        "in_sync": sorted({len(meta.isrs) for meta in partitions.values()}),
    }


def balanced_prefix(rate: int, leaders: dict[int, int], processes: int, threads: int) -> tuple[str, dict[int, int]]:
    """A prefix for Load's transactional ids (it names them `{prefix}-{process}-{thread}`) that spreads
    them over the coordinators as evenly as can be, so each broker gets its share of the load; with the
    number of ids on each."""
    from txn_workshop.harness.workload import transaction_state_partition

    ids = processes * threads
    best: tuple[int, str, Counter[int]] | None = None
    for k in range(5000):
        prefix = f"c{rate}x{k}"
        counts = Counter(
            leaders[transaction_state_partition(f"{prefix}-{p}-{t}", len(leaders))]
            for p in range(processes)
            for t in range(threads)
        )
        spread = max(counts[n] for n in NODES) - min(counts[n] for n in NODES)
        if best is None or spread < best[0]:
            best = (spread, prefix, counts)
        if spread <= (ids % len(NODES) != 0):
            break
    assert best is not None
    return best[1], {n: best[2][n] for n in NODES}


def requests_served(brokers: list[KafkaBroker]) -> list[tuple[float, dict[str, float]]]:
    """Each broker's (time, request type -> requests served since its start, all versions), read at
    once with JmxTool."""
    from txn_workshop.harness import jmx

    def one(broker: KafkaBroker) -> tuple[float, dict[str, float]]:
        values = jmx.read(broker, REQUESTS)
        read_at = time.time()  # JmxTool reads at its end, after its JVM started
        counts: dict[str, float] = {}
        for name, count in values.items():
            request = jmx._property(name, "request")
            counts[request] = counts.get(request, 0.0) + count
        return read_at, counts

    with ThreadPoolExecutor(len(brokers)) as pool:
        return list(pool.map(one, brokers))


def set_coordinator_logs(brokers: list[KafkaBroker], level: str | None) -> None:
    """TransactionStateManager at `level` on every broker (None: as configured, INFO)."""
    from txn_workshop.harness.workload import set_logger_level

    for broker in brokers:
        set_logger_level(broker, TSM_LOGGER, level)


# --- the exporters ----------------------------------------------------------------------------


class BareReader:
    """A bare reader beside one broker, of the partitions it leads, as an Exporter is driven here: a
    process, ready once started, its records read (and their receipt minus timestamp, to check that it
    meets the resolution). The floor candidates, each at the resolution:
    - `bare`: the exporter's own fetch pattern, in librdkafka, and nothing else;
    - `bare-nudged`: the same, and a ListOffsets request to the broker every resolution (what bounds
      the idle fetch's delay in a replicated cluster: docs/benchmarks.md, "The idle fetch's tail");
    - `bare-nudged-due`: the same, nudging as the exporter does (idle, while a transaction's COMPLETE_*
      is due: from its PREPARE_*, read from the value's status byte, for at most NUDGE_FOR_MS);
    - `kafka-python`: bench/bare_kafka_python.py, with fetch sessions, its fetch held the resolution
      (the busy pattern's fetches, with KIP-227 sessions);
    - `kafka-python-hold`: the same client, sessions, its fetch held until the first byte and its
      polls the resolution apart (at most one fetch per resolution, several records in one)."""

    def __init__(self, kind: str, broker: KafkaBroker, resolution_ms: int) -> None:
        self.latency: dict[int, int] = {}
        if kind in ("bare", "bare-nudged", "bare-nudged-due"):
            args = argparse.Namespace(kafka_config=[], before=False, latency_resolution_ms=resolution_ms)
            self._bare: Bare | None = Bare(
                broker.bootstrap_servers,
                fetch_pattern(args),
                broker.node_id,
                nudge_ms=resolution_ms if kind == "bare-nudged" else None,
                nudge_prepared_ms=resolution_ms if kind == "bare-nudged-due" else None,
            )
            self.proc = self._bare.proc
        else:
            self._bare = None
            script = Path(__file__).with_name("bare_kafka_python.py")
            pattern = (
                ["--wait-ms", str(HOLD_WAIT_MS), "--hold-ms", str(resolution_ms)]
                if kind == "kafka-python-hold"
                else ["--wait-ms", str(resolution_ms)]
            )
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(script),
                    "--bootstrap",
                    broker.bootstrap_servers,
                    "--broker-id",
                    str(broker.node_id),
                    *pattern,
                ],
                stdout=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "READY"

    def wait_ready(self, timeout: float) -> None:
        pass  # ready once it printed READY

    def records(self) -> float:
        """Records read so far; `latency` is then each receipt minus timestamp (ms) since the last call."""
        if self._bare is not None:
            snapshot = self._bare.snapshot()
        else:
            assert self.proc.stdout is not None
            self.proc.send_signal(signal.SIGUSR1)
            snapshot = json.loads(self.proc.stdout.readline())
        self.latency = {int(ms): n for ms, n in snapshot["latency"].items()}
        return float(snapshot["records"])

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        terminate(self.proc, 20)


def records_read(reader: Exporter | BareReader) -> float:
    return reader.records() if isinstance(reader, BareReader) else records_total(reader.metrics())


def start_exporters(
    variant: dict, brokers: list[KafkaBroker], broker_log: bool, logs: Path, timeout: float
) -> list[Exporter | BareReader]:
    """One exporter (or bare reader) beside each broker, started at once, each waited ready."""
    from txn_workshop.harness.processes import free_port

    exporters: list[Exporter | BareReader] = []
    try:
        if variant.get("reader"):
            exporters += [BareReader(variant["reader"], broker, variant["resolution_ms"]) for broker in brokers]
            return exporters
        for broker in brokers:
            flags = ["--broker-id", str(broker.node_id), *variant["args"]]
            if broker_log:
                flags += ["--broker-log", str(broker.server_log)]
            log = logs / f"exporter-{variant['name']}-{broker.node_id}.log"
            exporters.append(Exporter(variant["executable"], broker.bootstrap_servers, free_port(), flags, log))
        for exporter in exporters:
            exporter.wait_ready(timeout)
    except BaseException:
        stop_exporters(exporters)
        raise
    return exporters


def stop_exporters(exporters: list[Exporter | BareReader]) -> None:
    for exporter in exporters:  # all asked at once, then each waited for
        if exporter.proc.poll() is None:
            exporter.proc.terminate()
    for exporter in exporters:
        exporter.stop()


# --- windows ----------------------------------------------------------------------------------


def window(
    kind: str, brokers: list[KafkaBroker], exporters: list[Exporter | BareReader], load: Load, seconds: float
) -> dict:
    """One measured window: per broker its CPU, its exporter's (if any), the records its exporter read
    and the requests it served, a second."""
    pids: dict[str, int | list[int]] = {f"broker-{b.node_id}": b._proc.pid for b in brokers if b._proc}
    pids.update({f"exporter-{b.node_id}": e.proc.pid for b, e in zip(brokers, exporters)})  # none without
    pids["load"] = load.pids
    r0 = requests_served(brokers)
    m0 = [records_read(e) for e in exporters]
    th0 = [thread_cpu(e.proc.pid) for e in exporters]
    w = measure(pids, seconds, load)
    th1 = [thread_cpu(e.proc.pid) for e in exporters]
    ends = [window_end(e) for e in exporters]
    r1 = requests_served(brokers)
    per_broker = {}
    for i, broker in enumerate(brokers):
        (t0, c0), (t1, c1) = r0[i], r1[i]
        n = broker.node_id
        per_broker[str(n)] = {
            "cores": w.cpu[f"broker-{n}"] / w.seconds,
            "exporter_cores": w.cpu[f"exporter-{n}"] / w.seconds if exporters else None,
            "exporter_threads": split_threads(th0[i], th1[i], w.seconds) if exporters else None,
            "records_per_s": (ends[i][0] - m0[i]) / w.seconds if exporters else None,
            # a floor's receipt minus timestamp (ms -> records) over the window: does it meet the resolution
            "latency_ms": ends[i][1] if exporters else None,
            "exporter_latency_ms": ends[i][2] if exporters else None,
            "requests_per_s": {k: (c1[k] - c0.get(k, 0.0)) / (t1 - t0) for k in sorted(c1)},
        }
    return {
        "kind": kind,
        "seconds": round(w.seconds, 2),
        "load_average": [w.load_before, w.load_after],
        "transactions_per_s": w.commits / w.seconds,
        "load_cores": w.cpu["load"] / w.seconds,
        "brokers": per_broker,
    }


def split_threads(
    before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], seconds: float
) -> dict[str, float]:
    """A reader's cores over a window by kind of thread: librdkafka's (`rdk:*`: its fetches, in C) and
    Python's (the poll loop, and in an exporter its decode and model; its other threads next to none).
    Summed from thread_cores', each rounded to 0.0001 core: below /proc's tick over a window."""
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


def print_window(w: dict) -> None:
    b = w["brokers"]
    exporters = (
        " exporters " + " ".join(f"{b[n]['exporter_cores']:.4f}" for n in b) + ";"
        if w["kind"] != "without"
        else " no exporters;"
    )
    print(
        f"  run {w['run']} pair {w['pair']} {w['kind']:>7}: brokers "
        + " ".join(f"{b[n]['cores']:.3f}" for n in b)
        + f" cores;{exporters} {w['transactions_per_s']:.0f} txn/s over {w['seconds']:.1f} s; "
        f"FetchConsumer/s " + " ".join(f"{b[n]['requests_per_s'].get('FetchConsumer', 0):.0f}" for n in b) + "; "
        f"load average {w['load_average'][0]:.2f}-{w['load_average'][1]:.2f}",
        flush=True,
    )


def summarize(windows: list[dict], variant: str) -> dict[str, dict]:
    """Per broker, over the pairs (run, pair) that have both a `variant` window and one without."""
    by_pair: dict[tuple[int, int], dict[str, dict]] = {}
    for w in windows:
        by_pair.setdefault((w["run"], w["pair"]), {})[w["kind"]] = w
    pairs = [p for p in by_pair.values() if variant in p and "without" in p]
    out = {}
    for n in pairs[0][variant]["brokers"] if pairs else []:
        on = [p[variant]["brokers"][n] for p in pairs]
        off = [p["without"]["brokers"][n] for p in pairs]
        alone = statistics.median(b["cores"] for b in off)
        with_ = statistics.median(b["cores"] for b in on)
        extra = statistics.median(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True))
        exporter = statistics.median(b["exporter_cores"] for b in on)
        threads = {
            kind: round(statistics.median(b["exporter_threads"][kind] for b in on), 4)
            for kind in ("python", "librdkafka")
            if all(b.get("exporter_threads") for b in on)
        }
        kinds = sorted({k for b in on + off for k in b["requests_per_s"]})
        requests = {
            k: statistics.median(
                a["requests_per_s"].get(k, 0.0) - b["requests_per_s"].get(k, 0.0) for a, b in zip(on, off, strict=True)
            )
            for k in kinds
        }
        out[n] = {
            "pairs": len(pairs),
            "broker_alone_cores": round(alone, 4),
            "broker_with_cores": round(with_, 4),
            "broker_extra_cores": round(extra, 4),
            "broker_extra_of_medians_cores": round(with_ - alone, 4),
            "broker_extra_range": [
                round(min(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True)), 4),
                round(max(a["cores"] - b["cores"] for a, b in zip(on, off, strict=True)), 4),
            ],
            "exporter_cores": round(exporter, 4),
            "exporter_pct": round(100 * exporter / alone, 2) if alone else None,
            "exporter_threads_cores": threads,
            "broker_extra_pct": round(100 * extra / alone, 2) if alone else None,
            "total_pct": round(100 * (exporter + extra) / alone, 2) if alone else None,
            "records_per_s": round(statistics.median(b["records_per_s"] for b in on), 1),
            "latency_ms": pooled_quantiles([b.get("latency_ms") for b in on]),
            "exporter_latency_ms": median_quantiles([b.get("exporter_latency_ms") for b in on]),
            "exporters_requests_per_s": {k: round(v, 2) for k, v in requests.items()},
        }
    return out


def pooled_quantiles(histograms: list[dict[int, int] | None]) -> dict[str, int] | None:
    """p50, p99 and max of the windows' receipt minus timestamp together (None for exporters)."""
    pooled: Counter[int] = Counter()
    for histogram in histograms:
        pooled.update(histogram or {})
    if not pooled:
        return None
    q = histogram_quantiles(pooled, (0.5, 0.99, 1.0))
    return {"p50": q[0.5], "p99": q[0.99], "max": q[1.0]}


def median_quantiles(windows: list[dict[str, dict[str, float]] | None]) -> dict[str, dict[str, float]] | None:
    """An exporter's quantiles by target state: the median over its windows of each."""
    by_state: dict[str, dict[str, list[float]]] = {}
    for quantiles in windows:
        for state, q in (quantiles or {}).items():
            for k, v in q.items():
                by_state.setdefault(state, {}).setdefault(k, []).append(v)
    if not by_state:
        return None
    return {state: {k: round(statistics.median(v), 1) for k, v in q.items()} for state, q in by_state.items()}


def shown_requests(requests: dict[str, float]) -> str:
    named = [k for k in SHOWN if k in requests]
    others = [k for k in sorted(requests) if k not in SHOWN and abs(requests[k]) >= 0.05]
    return ", ".join(f"{k} {requests[k]:+.1f}" for k in named + others)


def print_table(cells: list[dict], variants: list[str]) -> None:
    """Per rate, mode, run (and all runs pooled), variant and broker."""
    rows = []
    groups: dict[tuple[int, str], list[dict]] = {}
    for cell in cells:
        groups.setdefault((cell["rate"], cell["mode"]), []).append(cell)
    for (rate, mode), group in groups.items():
        runs = [(str(c["run"]), c["windows"]) for c in group]
        if len(runs) > 1:
            runs.append(("all", [w for c in group for w in c["windows"]]))
        for run, windows in runs:
            for variant in variants:
                for n, s in summarize(windows, variant).items():
                    rows.append((rate, mode, run, variant, n, s))
    print(
        "\nrate/broker  mode        run  variant  broker  alone   with    extra   exporter  exp%   extra%  total%  "
        "records/s  pairs"
    )
    for rate, mode, run, variant, n, s in rows:
        pct = [
            f"{s[k]:6.1f}" if s[k] is not None else "     -" for k in ("exporter_pct", "broker_extra_pct", "total_pct")
        ]
        print(
            f"{rate:>11}  {mode:<10}  {run:>3}  {variant:<7}  {n:>6}  {s['broker_alone_cores']:.3f}  "
            f"{s['broker_with_cores']:.3f}  {s['broker_extra_cores']:+.3f}  {s['exporter_cores']:.4f}    "
            f"{pct[0]}  {pct[1]}  {pct[2]}  {s['records_per_s']:9.1f}  {s['pairs']:5}"
        )
    print("\nrequests the exporters send each broker a second, by type (with minus without, median of the pairs):")
    for rate, mode, run, variant, n, s in rows:
        print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {shown_requests(s['exporters_requests_per_s'])}")
    print("\nthe exporters' cores by kind of thread (the median of their windows): Python's, librdkafka's")
    for rate, mode, run, variant, n, s in rows:
        if s["exporter_threads_cores"]:
            t = s["exporter_threads_cores"]
            print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {t['python']:.4f} {t['librdkafka']:.4f}")
    floors = [row for row in rows if row[5]["latency_ms"]]
    if floors:
        print("\nthe floors' receipt minus record timestamp, ms (all their windows):")
        for rate, mode, run, variant, n, s in floors:
            print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {s['latency_ms']}")
    exporters = [row for row in rows if row[5]["exporter_latency_ms"]]
    if exporters:
        print(
            "\nthe exporters' append-latency bound by target state, ms (the median over their windows of each quantile):"
        )
        for rate, mode, run, variant, n, s in exporters:
            shown = {
                state: {k: q[k] for k in ("0.5", "0.9", "0.99") if k in q}
                for state, q in s["exporter_latency_ms"].items()
            }
            print(f"  {rate}/broker {mode} run {run} {variant} broker {n}: {shown}")


def profile_brokers(args: argparse.Namespace, brokers: list[KafkaBroker], mode: str, variant: dict, logs: Path) -> str:
    """One more pair, each broker's JVM recorded by JFR (bench/broker_jfr.py) for --window seconds
    with the exporters and without: where the brokers' extra CPU goes, summed over the three."""
    from collections import Counter

    from bench import broker_jfr

    def recorded(label: str) -> dict[str, Counter[str]]:
        pids = {b.node_id: b._proc.pid for b in brokers if b._proc}
        for pid in pids.values():
            broker_jfr.start(pid, label)
        time.sleep(args.window)
        total: dict[str, Counter[str]] = {}
        for node, pid in pids.items():
            one = broker_jfr.summary(broker_jfr.stop(pid, label, logs / f"broker-{node}-{label}.jfr"))
            for what, counts in one.items():
                total.setdefault(what, Counter()).update(counts)
        return total

    exporters = start_exporters(variant, brokers, mode == "broker-log", logs, args.ready_timeout)
    try:
        time.sleep(args.settle)
        with_ = recorded("with")
    finally:
        stop_exporters(exporters)
    time.sleep(args.gap)
    text = broker_jfr.difference(with_, recorded("without"))
    print("   the brokers' JFR samples, with and without the exporters:\n" + text, flush=True)
    return text


# --- main -------------------------------------------------------------------------------------


def run_cell(
    args: argparse.Namespace,
    brokers: list[KafkaBroker],
    load: Load,
    run: int,
    rate: int,
    mode: str,
    variants: list[dict],
    logs: Path,
) -> dict:
    kinds = [v["name"] for v in variants] + ["without"]
    by_name = {v["name"]: v for v in variants}
    windows = []
    started = time.monotonic()
    for pair in range(1, args.pairs + 1):
        # Each pair in the other order than the last (ABBA), so a drift within a pair cancels over two.
        for kind in kinds if pair % 2 else kinds[::-1]:
            if kind == "without":
                time.sleep(args.gap)  # the stopped exporters' connections closed
                w = window(kind, brokers, [], load, args.window)
            else:
                exporters = start_exporters(by_name[kind], brokers, mode == "broker-log", logs, args.ready_timeout)
                try:
                    time.sleep(args.settle)
                    w = window(kind, brokers, exporters, load, args.window)
                finally:
                    stop_exporters(exporters)
            w.update(run=run, pair=pair)
            print_window(w)
            windows.append(w)
    cell = {
        "run": run,
        "rate": rate,
        "mode": mode,
        "wall_seconds": round(time.monotonic() - started),
        "windows": windows,
    }
    print(f"   {args.pairs} pairs in {cell['wall_seconds']} s", flush=True)
    if args.profile_broker:
        cell["broker_profile"] = profile_brokers(args, brokers, mode, variants[0], logs)
    cell["summary"] = {v["name"]: summarize(windows, v["name"]) for v in variants}
    return cell


def run(args: argparse.Namespace, variants: list[dict]) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    results: dict = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "kafka": args.kafka,
        "variants": [{**v, "executable": str(v["executable"])} for v in variants],
        "runs_are": "passes over the same rates, modes and pairs on one cluster",
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
        level: str | None = None
        for run_number in range(1, args.runs + 1):
            for rate in args.rates:
                prefix, ids = balanced_prefix(rate, lead["leaders"], args.load_processes, args.load_threads)
                load = Load(bootstrap, rate * len(brokers), args.load_processes, args.load_threads, prefix)
                try:
                    time.sleep(args.warmup if rate else 1)
                    achieved = settle_commits_rate(load)
                    print(
                        f"\n== run {run_number}: {rate} transactions/s a broker asked, {achieved:.0f}/s achieved over "
                        f"the cluster; transactional ids by coordinator {ids if rate else '-'} "
                        f"(load average {loadavg():.2f})",
                        flush=True,
                    )
                    for mode in args.modes:
                        wanted = "DEBUG" if mode == "broker-log" else None
                        if wanted != level:
                            set_coordinator_logs(brokers, wanted)
                            level = wanted
                            time.sleep(2)
                        print(f"-- {mode}", flush=True)
                        results["cells"].append(
                            run_cell(args, brokers, load, run_number, rate, mode, variants, workdir)
                        )
                finally:
                    load.stop()
        print_table(results["cells"], [v["name"] for v in variants])
        ok = True
    finally:
        stop_cluster(brokers)
        if args.keep or not ok:
            print(f"brokers' and exporters' logs kept in {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    results["wall_seconds"] = round(time.monotonic() - started)
    print(f"\nwall time {results['wall_seconds']} s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kafka", default="4.4.0", help="Kafka version of the brokers")
    parser.add_argument(
        "--rates",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[0, 10, 50, 200],
        help="transactions/s a broker (3x over the cluster), 0 the idle cluster",
    )
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["plain", "broker-log"])
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured in each window")
    parser.add_argument("--runs", type=int, default=2, help="passes over the same windows, on the same cluster")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds after the exporters are ready")
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
    parser.add_argument("--also-exporter", type=Path, help="a second variant: this txn-exporter (another checkout's)")
    parser.add_argument(
        "--also-exporter-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="the second variant's arguments instead of --exporter-arg's (its executable: --also-exporter or ours)",
    )
    parser.add_argument(
        "--floor",
        action="append",
        default=[],
        choices=("bare", "bare-nudged", "bare-nudged-due", "kafka-python", "kafka-python-hold"),
        help="a variant of bare readers instead of exporters (repeatable): `bare`, librdkafka with the exporter's "
        "fetch pattern and nothing else; `bare-nudged`, the same and a ListOffsets to its broker every resolution; "
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
        help="after each cell's pairs, one more with the brokers recorded by JFR: where their extra CPU goes",
    )
    parser.add_argument("--keep", action="store_true", help="keep the brokers' and exporters' logs")
    parser.add_argument("--json", type=Path, help="write the results here too")
    args = parser.parse_args()
    variants = [{"name": "with", "executable": args.exporter, "args": args.exporter_arg}]
    if args.also_exporter or args.also_exporter_arg:
        variants.append(
            {
                "name": "also",
                "executable": args.also_exporter or args.exporter,
                "args": args.also_exporter_arg or args.exporter_arg,
            }
        )
    if args.floor:
        from exporter import defaults

        resolution = args.resolution_ms or defaults.LATENCY_RESOLUTION_MS
        variants += [
            {"name": floor, "executable": args.exporter, "args": [], "reader": floor, "resolution_ms": resolution}
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
