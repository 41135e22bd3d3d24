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

Per rate and mode, over the same window: CPU time of broker, exporter and bare consumer (utime +
stime from /proc/PID/stat: every thread, the dead ones included), the exporter's per-thread CPU
(/proc/PID/task/*/stat: librdkafka's `rdk:*` threads apart from Python's), RSS, the fetch requests
the broker served (its RequestMetrics RequestsPerSec{request=Fetch} over JMX with Kafka's JmxTool;
the bare consumer's own count from librdkafka's statistics, the exporter's is the rest), the broker's
CPU with the load alone (no reader) for the cost of serving them, and the append-latency bound's
distribution (the exporter's exact quantile gauges; the bare consumer's receipt minus record
timestamp, ms).

    .venv/bin/python bench/sidecar_cost.py                       # rates 200, 1000, 2000; both modes
    .venv/bin/python bench/sidecar_cost.py --rates 1000 --modes plain --window 40
    .venv/bin/python bench/sidecar_cost.py --kafka-config fetch.wait.max.ms=5 --kafka-config fetch.min.bytes=1048576
    .venv/bin/python bench/sidecar_cost.py --profile 20          # py-spy record --native of the exporter, per rate
    .venv/bin/python bench/sidecar_cost.py --also-interval 5     # and an exporter at 5 ms, in the same window
    .venv/bin/python bench/sidecar_cost.py --also-exporter ../other/.venv/bin/txn-exporter   # two versions, one window

The machine is shared: the load average is printed with every window; ratios measured side by side
in one window hold up under some load, absolute CPU figures less so.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

TOPIC = "__transaction_state"
DATA_TOPIC = "load"
DATA_PARTITIONS = 8
TSM_LOGGER = "kafka.coordinator.transaction.TransactionStateManager"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024
# Where a `__transaction_state` value's TransactionStatus byte is, in both versions: after its int16
# version, int64 ProducerId, int16 ProducerEpoch and int32 TransactionTimeoutMs (exporter/codec/value.py).
_STATE_AT = struct.calcsize(">hqhi")
VENV_BIN = Path(sys.executable).parent


# --- /proc ------------------------------------------------------------------------------------


def _stat_fields(path: str) -> tuple[str, list[str]]:
    with open(path) as f:
        text = f.read()
    # comm is in parentheses and may hold spaces: split around the last ")".
    comm = text[text.index("(") + 1 : text.rindex(")")]
    return comm, text[text.rindex(")") + 2 :].split()


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (every thread, exited ones included)."""
    _, fields = _stat_fields(f"/proc/{pid}/stat")
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def thread_cpu(pid: int) -> dict[int, tuple[str, float]]:
    """tid -> (comm, utime + stime s) of every live thread."""
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            comm, fields = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        except OSError:
            continue
        threads[int(tid)] = (comm, (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)
    return threads


def thread_cores(
    before: dict[int, tuple[str, float]],
    after: dict[int, tuple[str, float]],
    python_names: dict[int, str],
    seconds: float,
) -> dict[str, float]:
    """Each thread's cores between two thread_cpu() readings, busiest first: librdkafka's by name,
    Python's by their Python name (python_thread_names, read while it ran), else by thread id."""
    cores: dict[str, float] = {}
    for tid, (comm, cpu) in after.items():
        name = comm if comm.startswith("rdk:") else f"python:{python_names.get(tid, tid)}"
        cores[name] = cores.get(name, 0) + (cpu - before.get(tid, (comm, 0.0))[1]) / seconds
    return {name: round(c, 4) for name, c in sorted(cores.items(), key=lambda kv: -kv[1])}


def python_thread_names(pid: int) -> dict[int, str]:
    """Thread id -> its Python thread's name ("sources", "metrics-http", ...), as `py-spy dump` reads
    them from the running process; empty if it cannot."""
    try:
        dump = subprocess.run(
            [str(VENV_BIN / "py-spy"), "dump", "-p", str(pid)], capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    return {int(m[1]): m[2] for m in re.finditer(r'^Thread (\d+) \(\w+\): "([^"]*)"', dump, re.MULTILINE)}


def rss_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, kib = line.split()[:2]
                values[key] = int(kib) / 1024
    return values["VmRSS:"], values["VmHWM:"]


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# --- the workload -----------------------------------------------------------------------------


def load_main(args: argparse.Namespace) -> None:
    """A load process: `threads` transactional producers, each paced to rate/threads transactions
    per second (begin / one message / commit); prints the cumulative commits every second."""
    from confluent_kafka import Producer

    per_thread_interval = args.threads / args.rate
    commits = [0] * args.threads
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def run(index: int) -> None:
        tid = f"{args.prefix}-{index}"
        producer = Producer({"bootstrap.servers": args.bootstrap, "transactional.id": tid, "linger.ms": 0})
        producer.init_transactions(60)
        payload = b"x" * 100
        partition = index % DATA_PARTITIONS
        due = time.monotonic()
        while not stop.is_set():
            producer.begin_transaction()
            producer.produce(DATA_TOPIC, payload, partition=partition)
            producer.commit_transaction(60)
            commits[index] += 1
            due += per_thread_interval
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif delay < -1.0:
                due = time.monotonic()  # behind by more than a second: the machine's limit, not a debt

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(args.threads)]
    for thread in threads:
        thread.start()
    print("READY", flush=True)
    while not stop.wait(1.0):
        print(json.dumps({"t": time.time(), "commits": sum(commits)}), flush=True)
    for thread in threads:
        thread.join(10)


class Load:
    """The workload's processes; `committed()` is the sum of their last reports (time, commits)."""

    def __init__(self, bootstrap: str, rate: int, processes: int, threads: int, prefix: str) -> None:
        self._last: list[tuple[float, int]] = [(0.0, 0)] * processes
        self._procs = []
        for n in range(processes if rate > 0 else 0):  # rate 0: the idle exporter
            proc = subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "load",
                    "--bootstrap",
                    bootstrap,
                    "--rate",
                    str(rate / processes),
                    "--threads",
                    str(threads),
                    "--prefix",
                    f"{prefix}-{n}",
                ],
                stdout=subprocess.PIPE,
                text=True,
                stdin=subprocess.DEVNULL,
            )
            self._procs.append(proc)
            threading.Thread(target=self._read, args=(n, proc), daemon=True).start()

    def _read(self, n: int, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if line.startswith("{"):
                report = json.loads(line)
                self._last[n] = (report["t"], report["commits"])

    def committed(self) -> int:
        return sum(c for _, c in self._last)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


# --- the bare consumer ------------------------------------------------------------------------


def bare_main(args: argparse.Namespace) -> None:
    """Every `__transaction_state` partition from its end, read as the exporter reads it and nothing
    more: the first record, then what is queued, the clock read after; with `--busy`, its fetch pattern
    too (an idle consumer, a busy one fetching every interval under load, the partitions moved between
    them at their next offsets, by the exporter's own rule). Counts records and their receipt -
    timestamp (ms); on SIGUSR1 prints a JSON snapshot. With `--nudge-ms N`, a third client asks the
    broker for a followed partition's high watermark every N ms meanwhile (a ListOffsets request):
    a broker completes a held fetch only when it next handles a request (docs/benchmarks.md, "The
    idle fetch's tail"), so this is what bounds the idle fetch's delay by N."""
    from confluent_kafka import OFFSET_END, Consumer, TopicPartition

    from exporter import defaults
    from exporter.codec.states import PREPARE_STATES
    from exporter.sources.topic_tail.fetch_pattern import IDLE_BELOW, NUDGE_FOR_MS

    fetches = {"idle": 0, "busy": 0}
    stats = {"t": 0.0}

    def consumer(name: str, settings: dict) -> Consumer:
        def on_stats(text: str) -> None:
            doc = json.loads(text)
            stats["t"] = time.time()
            fetches[name] = sum(b["req"].get("Fetch", 0) for b in doc["brokers"].values())

        return Consumer(
            {
                **settings,
                "bootstrap.servers": args.bootstrap,
                "group.id": "bench-bare",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_uncommitted",
                "statistics.interval.ms": 1000,
                "stats_cb": on_stats,
            }
        )

    idle = consumer("idle", json.loads(args.settings))
    busy = consumer("busy", json.loads(args.busy)) if args.busy else None
    active = idle
    metadata = idle.list_topics(TOPIC, timeout=10).topics[TOPIC].partitions
    # (--broker-id: the partitions one broker leads, as the exporter beside it follows them)
    partitions = sorted(p for p, m in metadata.items() if args.broker_id is None or m.leader == args.broker_id)
    next_offset = dict.fromkeys(partitions, OFFSET_END)
    idle.assign([TopicPartition(TOPIC, p, OFFSET_END) for p in partitions])
    # --nudge-prepared-ms: the transactions whose COMPLETE_* is due -> (partition, until when, ms)
    prepared: dict[bytes, tuple[int, int]] = {}
    prepared_lock = threading.Lock()
    if args.nudge_ms or args.nudge_prepared_ms:
        nudger = consumer("nudge", {})

        def nudge_always() -> None:
            while True:
                nudger.get_watermark_offsets(TopicPartition(TOPIC, partitions[0]), timeout=1)
                time.sleep(args.nudge_ms / 1000)

        def nudge_when_due() -> None:
            while True:
                now_ms = int(time.time() * 1000)
                with prepared_lock:
                    for key, (_, until_ms) in list(prepared.items()):
                        if until_ms <= now_ms:
                            del prepared[key]
                    due = next(iter(prepared.values()), None)
                if due is not None and active is idle:
                    nudger.get_watermark_offsets(TopicPartition(TOPIC, due[0]), timeout=1)
                time.sleep(args.nudge_prepared_ms / 1000)

        threading.Thread(target=nudge_always if args.nudge_ms else nudge_when_due, daemon=True).start()
    interval = args.interval or defaults.LATENCY_RESOLUTION_MS
    busy_from = 1000 / interval
    idle_below = IDLE_BELOW * busy_from
    snapshot = threading.Event()
    stop = threading.Event()
    signal.signal(signal.SIGUSR1, lambda *_: snapshot.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    records = polls = busy_seconds = switches = 0
    second_polls = second_records = 0
    next_second = time.monotonic() + 1
    latency: dict[int, int] = {}
    print("READY", flush=True)
    while not stop.is_set():
        first = active.poll(0.2)
        if first is not None:
            messages = [first, *active.consume(999, 0)]
            received_ms = int(time.time() * 1000)
            polls += 1
            second_polls += 1
            for message in messages:
                if message.error() is None:
                    records += 1
                    second_records += 1
                    next_offset[message.partition()] = message.offset() + 1
                    ms = received_ms - message.timestamp()[1]
                    latency[ms] = latency.get(ms, 0) + 1
                    if args.nudge_prepared_ms and active is idle:
                        value = message.value()
                        if value is not None and len(value) > _STATE_AT and value[_STATE_AT] in PREPARE_STATES:
                            with prepared_lock:
                                prepared[message.key()] = (message.partition(), received_ms + NUDGE_FOR_MS)
                        elif prepared:
                            with prepared_lock:
                                prepared.pop(message.key(), None)
        now = time.monotonic()
        if busy is not None and now >= next_second:
            seconds = now - next_second + 1
            poll_rate, record_rate = second_polls / seconds, second_records / seconds
            second_polls = second_records = 0
            next_second = now + 1
            other = busy if active is idle else idle
            other.poll(0)
            if active is idle and poll_rate >= busy_from:
                target = busy
            elif active is busy and record_rate < idle_below:
                target = idle
            else:
                target = None
            if target is not None:
                active.unassign()
                target.assign([TopicPartition(TOPIC, p, o) for p, o in next_offset.items()])
                active = target
                switches += 1
            busy_seconds += active is busy
        if snapshot.is_set():
            snapshot.clear()
            print(
                json.dumps(
                    {
                        "t": time.time(),
                        "records": records,
                        "polls": polls,
                        "stats_t": stats["t"],
                        "fetches": fetches["idle"] + fetches["busy"],
                        "busy_seconds": busy_seconds,
                        "switches": switches,
                        "latency": latency,
                    }
                ),
                flush=True,
            )
            latency = {}
    idle.close()
    if busy is not None:
        busy.close()


class Bare:
    def __init__(
        self,
        bootstrap: str,
        pattern: dict,
        broker_id: int | None = None,
        nudge_ms: float | None = None,
        nudge_prepared_ms: float | None = None,
    ) -> None:
        busy = (
            ["--busy", json.dumps(pattern["busy"]), "--interval", str(pattern["interval_ms"])]
            if pattern["busy"]
            else []
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "bare",
                "--bootstrap",
                bootstrap,
                "--settings",
                json.dumps(pattern["idle"]),
                *busy,
                *(["--broker-id", str(broker_id)] if broker_id is not None else []),
                *(["--nudge-ms", str(nudge_ms)] if nudge_ms else []),
                *(["--nudge-prepared-ms", str(nudge_prepared_ms)] if nudge_prepared_ms else []),
            ],
            stdout=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        assert self.proc.stdout.readline().strip() == "READY"

    def snapshot(self) -> dict:
        self.proc.send_signal(signal.SIGUSR1)
        return json.loads(self.proc.stdout.readline())

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        terminate(self.proc, 20)


# --- the exporter -----------------------------------------------------------------------------


class Exporter:
    def __init__(self, executable: Path, bootstrap: str, port: int, extra: list[str], log: Path) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen(
            [
                str(executable),
                "run",
                "--bootstrap-servers",
                bootstrap,
                "--listen",
                f"127.0.0.1:{port}",
                *extra,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log.open("ab"),
            stdin=subprocess.DEVNULL,
            # Not this checkout's directory: another checkout's exporter started as `python -m exporter`
            # from here would import this checkout's package (the working directory comes first on
            # sys.path), and a side-by-side run would compare this checkout with itself.
            cwd=log.parent,
        )
        self.started = time.monotonic()

    def wait_ready(self, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"exporter exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.05)
        raise TimeoutError("exporter not ready")

    def metrics(self) -> str:
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as r:
            return r.read().decode()

    def stop(self) -> None:
        from txn_workshop.harness.processes import terminate

        terminate(self.proc, 20)


def latency_quantiles(metrics_text: str) -> dict[str, dict[str, float]]:
    """target_state -> quantile -> ms, from the exact quantile gauges."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "kafka_transaction_state_log_append_latency_quantile_seconds":
            for s in family.samples:
                out.setdefault(s.labels["target_state"], {})[s.labels["quantile"]] = s.value * 1000
    return out


def records_total(metrics_text: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    return sum(
        s.value
        for f in text_string_to_metric_families(metrics_text)
        if f.name == "kafka_transaction_state_log_records"
        for s in f.samples
        if s.name.endswith("_total")
    )


def histogram_quantiles(histogram: dict[int, int], qs=(0.5, 0.99, 0.999, 1.0)) -> dict[float, int]:
    total = sum(histogram.values())
    out, seen = {}, 0
    pending = list(qs)
    for value in sorted(histogram):
        seen += histogram[value]
        while pending and seen >= pending[0] * total:
            out[pending.pop(0)] = value
    return out


# --- the broker -------------------------------------------------------------------------------


def fetch_requests(broker) -> tuple[float, float]:
    """(time, Fetch requests served since start) from the broker's RequestMetrics, all versions."""
    from txn_workshop.harness import jmx

    values = jmx.read(broker, "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Fetch,version=*")
    return time.time(), sum(values.values())


@dataclass
class Window:
    seconds: float
    load_before: float
    load_after: float
    cpu: dict[str, float]  # name -> CPU seconds in the window
    commits: int
    extra: dict = field(default_factory=dict)


def measure(pids: dict[str, int | list[int]], seconds: float, load: Load) -> Window:
    def snap() -> dict[str, float]:
        return {
            name: sum(cpu_seconds(p) for p in (pid if isinstance(pid, list) else [pid])) for name, pid in pids.items()
        }

    la = loadavg()
    c0, t0, n0 = snap(), time.monotonic(), load.committed()
    time.sleep(seconds)
    c1, t1, n1 = snap(), time.monotonic(), load.committed()
    return Window(t1 - t0, la, loadavg(), {k: c1[k] - c0[k] for k in c0}, n1 - n0)


def settle_commits_rate(load: Load, seconds: float = 3.0) -> float:
    n0, t0 = load.committed(), time.monotonic()
    time.sleep(seconds)
    return (load.committed() - n0) / (time.monotonic() - t0)


# --- main -------------------------------------------------------------------------------------


# The fetch settings and loop of the exporter before issue 22: one consumer, a fetch answered at the
# first byte (held 100 ms at most), the receipt clock read at the first record of a poll.
BEFORE = {"fetch.wait.max.ms": 100, "fetch.min.bytes": 1, "fetch.queue.backoff.ms": 10}


def fetch_pattern(args: argparse.Namespace) -> dict:
    """The bare consumer's settings: the exporter's own (idle and busy), or those before issue 22."""
    from exporter.sources.topic_tail.fetch_pattern import BUSY_MIN_BYTES, DEFAULT_SETTINGS, IDLE_SETTINGS

    kafka_config = dict(kv.split("=", 1) for kv in args.kafka_config)
    if args.before:
        return {"idle": {**BEFORE, **kafka_config}, "busy": None, "interval_ms": None, "kafka_config": kafka_config}
    common = {**DEFAULT_SETTINGS, **kafka_config}
    return {
        "idle": {**common, **IDLE_SETTINGS},
        "busy": {
            **common,
            "fetch.min.bytes": BUSY_MIN_BYTES,
            "fetch.wait.max.ms": args.latency_resolution_ms,
        },
        "interval_ms": args.latency_resolution_ms,
        "kafka_config": kafka_config,
    }


def run(args: argparse.Namespace) -> dict:
    from txn_workshop.harness.admin import create_internal_topics, create_topic
    from txn_workshop.harness.broker import KafkaBroker
    from txn_workshop.harness.processes import free_port
    from txn_workshop.harness.workload import set_logger_level

    pattern = fetch_pattern(args)
    results: dict = {"exporter": str(args.exporter), "pattern": pattern, "runs": []}
    workdir = Path(tempfile.mkdtemp(prefix="bench-cost-"))
    broker = KafkaBroker(args.kafka, jmx=True, workdir=workdir / "broker")
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
        extra += ["--broker-log", str(broker.server_log)]
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
        window = measure(pids, args.window, load)
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
    if r.get("also"):
        a = r["also"]
        print(
            f"   beside it, {a['exporter']} at {a['interval_ms']} ms: {a['cores']:.4f} cores, "
            f"{a['over_broker']:.1%} of the broker; PREPARE_COMMIT {a['latency_ms'].get('PREPARE_COMMIT', {})}"
        )
        print(f"   its threads (cores): {a['threads_cores']}")
    if r["profile"]:
        print(f"   profile: {r['profile']}")


def add_load_arguments(command: argparse.ArgumentParser) -> None:
    """The arguments of a load process's command line (Load's, and sidecar_memory's churn)."""
    command.add_argument("--bootstrap", required=True)
    command.add_argument("--rate", type=float, required=True)
    command.add_argument("--threads", type=int, required=True)
    command.add_argument("--prefix", required=True)


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
        "most NUDGE_FOR_MS), a ListOffsets request to the broker every this many ms",
    )
    parser.add_argument("--kafka", default="4.4.0", help="Kafka version of the broker")
    parser.add_argument("--rates", type=lambda s: [int(x) for x in s.split(",")], default=[200, 1000, 2000])
    parser.add_argument("--modes", type=lambda s: s.split(","), default=["plain", "broker-log"])
    parser.add_argument("--window", type=float, default=30.0, help="seconds measured, side by side")
    parser.add_argument("--alone-window", type=float, default=10.0, help="seconds of the load without readers")
    parser.add_argument("--warmup", type=float, default=8.0)
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
