"""Decode of a 3M-record `__transaction_state` segment: ours against Kafka's DumpLogSegments.

    .venv/bin/python bench/decode_segment.py [--records 3000000] [--runs 3]            # synthetic mix, then uniform
    .venv/bin/python bench/decode_segment.py --source broker [--kafka 4.4.0|3.9.2] [--records 1000000]
    .venv/bin/python bench/decode_segment.py --shapes mix --python /usr/bin/python3.11  # (b) under the image's kind of CPython too

Two kinds of segment, each written once and cached under bench/data/ (gitignored):
- `--source synthetic` (the default): bench/synthetic.py's records (the realistic mix first, then
  the old uniform shape: `--shapes`) written in one file as a coordinator writes them, one record
  per batch, CREATE_TIME, uncompressed, value v1;
- `--source broker`: a real broker from the harness (4.4.0 with TV2 writes value v1, 3.9.2 value
  v0), written by clients of both kinds at once, about half the records each: librdkafka
  transactional producers (a few processes of threads) each looping begin / produce one message /
  commit, and as many Java ones (txn_workshop.harness.java_workload: the broker version's kafka-clients,
  which on 4.4.0 runs transaction version 2, so its records carry ClientTransactionVersion 2 and a
  producer epoch bumped per transaction) doing the same with every 50th transaction aborted (2%).
  The coordinator writes ONGOING, PREPARE_* and COMPLETE_* per transaction (EMPTY once per id); one
  `__transaction_state` partition and a 1 GiB `transaction.state.log.segment.bytes` keep every
  record in one file.

Then, on each file, in one run:
  (a) Kafka's DumpLogSegments --transaction-log-decoder, as kafka-dump-log.sh runs it (a fresh JVM
      with kafka-run-class.sh's default options, stdout to /dev/null; at 3M records its JIT has
      warmed up for most of the run);
  (b) `txn-exporter decode FILE > /dev/null` (a fresh Python process); with --also-tree, another
      exporter package's decode (an older commit's) beside it, the two taking turns run for run;
      with --python, the same under another interpreter too (see python_env);
  (c) in-process bytes -> typed records, `decode_batches` over the file's bytes, pinned to one core;
  (d) the same from the file as `txn-exporter decode` reads it, `read_segment` (pieces of 1 MiB
      read with pread, flat memory), pinned to one core: (d) - (c) is what reading in pieces costs.
Wall time includes process start for (a) and (b); best of --runs for each. CPU time (user + sys,
all threads) and peak RSS from wait4. The target is on CPU time: (a) / (b) >= 2 (1.5 at the least).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import multiprocessing
import os
import platform
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.synthetic import SHAPES, transaction_cycles
from exporter.codec import TransactionLogRecord
from exporter.codec.record_batch import decode_batches
from exporter.pipeline import maven
from exporter.sources.segment_files import read_segment
from txn_workshop.record_batches import encode_batch

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / "data"
TOPIC = "bench-orders"
TOPIC_PARTITIONS = 4
SEGMENT_BYTES = 1 << 30  # the broker's cap is Integer.MAX_VALUE; 1 GiB holds ~7M of these records
# kafka-run-class.sh's defaults when KAFKA_HEAP_OPTS / KAFKA_JVM_PERFORMANCE_OPTS are unset.
KAFKA_RUN_CLASS_OPTS = [
    "-Xmx256M",
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
]
TRANSACTION_VERSIONS = {"4.4.0": 2, "3.9.2": None}  # 4.4.0 TV2: value v1; 3.9.2: value v0
JAVA_ABORT_EVERY = 50  # the Java producers abort 2% of their transactions, as the synthetic mix does


# -- generation ------------------------------------------------------------------------------------


def _producer_thread(bootstrap: str, tid: str, partition: int, transactions: int, errors: list[str]) -> None:
    from confluent_kafka import Producer

    try:
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "linger.ms": 0})
        producer.init_transactions(60)
        for n in range(transactions):
            producer.begin_transaction()
            producer.produce(TOPIC, value=b"%d" % n, partition=partition)
            producer.commit_transaction(60)
    except Exception as e:  # reported by the parent: a short segment must not pass silently
        errors.append(f"{tid}: {e!r}")


def _producer_process(bootstrap: str, worker: int, threads: int, transactions: int) -> None:
    """One process of `threads` producers; confluent-kafka releases the GIL while it waits."""
    errors: list[str] = []
    pool = [
        threading.Thread(
            target=_producer_thread,
            args=(bootstrap, f"bench-{worker}-{t}", (worker * threads + t) % TOPIC_PARTITIONS, transactions, errors),
        )
        for t in range(threads)
    ]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if errors:
        sys.exit(f"{len(errors)} producers failed, first: {errors[0]}")


def generate(version: str, records: int, processes: int, threads: int, target: Path) -> None:
    from txn_workshop.harness.admin import create_topic
    from txn_workshop.harness.broker import KafkaBroker
    from txn_workshop.harness.java_workload import java_transactions

    # As many Java producers as librdkafka ones, as many transactions each: about half the records.
    java_ids = [f"bench-java-{n}" for n in range(processes * threads)]
    producers = processes * threads + len(java_ids)
    # One EMPTY per id, then three records per transaction (ONGOING, PREPARE_*, COMPLETE_*).
    transactions = -(-(records - producers) // (3 * producers))
    workdir = DATA / f"broker-{version}"
    shutil.rmtree(workdir, ignore_errors=True)
    broker = KafkaBroker(
        version,
        TRANSACTION_VERSIONS[version],
        transaction_state_partitions=1,
        broker_properties={"transaction.state.log.segment.bytes": str(SEGMENT_BYTES)},
        workdir=workdir,
    )
    print(
        f"generating: Kafka {version}, {producers} transactional producers (librdkafka: {processes} processes x "
        f"{threads} threads; Java: {len(java_ids)} threads in one JVM) x {transactions} transactions",
        flush=True,
    )
    start = time.perf_counter()
    broker.start()
    try:
        create_topic(broker.bootstrap_servers, TOPIC, partitions=TOPIC_PARTITIONS)
        produce_start = time.perf_counter()
        java_errors: list[BaseException] = []

        def java() -> None:
            try:
                java_transactions(
                    broker, TOPIC, java_ids, transactions=transactions, abort_every=JAVA_ABORT_EVERY, timeout=None
                )
            except BaseException as e:  # re-raised below, once the librdkafka producers are done too
                java_errors.append(e)

        java_thread = threading.Thread(target=java)
        java_thread.start()
        # spawn, not fork: this process already runs librdkafka threads (the harness's AdminClient).
        ctx = multiprocessing.get_context("spawn")
        workers = [
            ctx.Process(target=_producer_process, args=(broker.bootstrap_servers, w, threads, transactions))
            for w in range(processes)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        java_thread.join()
        produce_s = time.perf_counter() - produce_start
        if any(w.exitcode for w in workers):
            raise SystemExit("a librdkafka producer process failed")
        if java_errors:
            raise SystemExit(f"the Java producers failed: {java_errors[0]}")
    finally:
        broker.stop()
    (segment,) = broker.transaction_state_segments()  # one partition, one segment: else the setup is wrong
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(segment, target)
    shutil.rmtree(workdir, ignore_errors=True)
    total_s = time.perf_counter() - start
    n = count_records(target.read_bytes())
    print(
        f"generated {n:,} records ({target.stat().st_size / 2**20:.0f} MiB) in {total_s:.0f} s "
        f"(producing {produce_s:.0f} s: {n / produce_s:,.0f} records/s, "
        f"{transactions * producers / produce_s:,.0f} transactions/s)",
        flush=True,
    )
    print_mix(target.read_bytes())
    if n < records:
        raise SystemExit(f"only {n} records in {segment}: expected {records}")


def print_mix(data: bytes) -> None:
    """Records by client kind (the id's prefix), state and ClientTransactionVersion."""
    mix = Counter(
        (
            "java" if r.transactional_id.startswith("bench-java-") else "librdkafka",
            r.value.state.name,
            r.value.client_transaction_version,
        )
        for r in decode_batches(data)
        if type(r) is TransactionLogRecord and r.value is not None
    )
    for (client, state, ctv), count in sorted(mix.items()):
        print(f"  {client:<10} {state:<16} client_transaction_version {ctv}: {count:>9,}")


def generate_synthetic(shape: str, records: int, target: Path, tids: int | None = None) -> None:
    """bench/synthetic.py's records in one segment file, with consecutive offsets, written through
    a buffer of whole batches; `tids` transactional ids (default: about 30 records per id, at most
    10,000 in the mix and 100,000 uniform)."""
    tids = tids or max(1, min(10_000 if shape == "mix" else 100_000, records // 30))
    # The mix: one EMPTY per id, then three records per transaction; uniform: three per transaction.
    transactions = -(-(records - (tids if shape == "mix" else 0)) // 3)
    print(
        f"generating: {records:,} records of the {shape} shape ({transactions:,} transactions over {tids:,} ids)",
        flush=True,
    )
    start = time.perf_counter()
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    with open(partial, "wb") as f:
        chunk = bytearray()
        for offset, r in enumerate(transaction_cycles(tids, transactions, shape=shape)):
            chunk += encode_batch(offset, [(r.key, r.value, r.timestamp_ms)])
            if len(chunk) >= 1 << 24:
                f.write(chunk)
                chunk.clear()
        f.write(chunk)
    partial.rename(target)
    print(f"generated {target.stat().st_size / 2**20:.0f} MiB in {time.perf_counter() - start:.0f} s", flush=True)


def count_records(data: bytes) -> int:
    n = 0
    for item in decode_batches(data):
        if type(item) is not TransactionLogRecord:
            raise SystemExit(f"the segment does not decode cleanly: {item}")
        n += 1
    return n


# -- measurements ----------------------------------------------------------------------------------


def _timed(cmd: list[str], env: dict[str, str] | None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + sys, all threads), peak RSS in KiB; stdout to /dev/null."""
    with open(os.devnull, "wb") as devnull:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=devnull, stdin=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"exit {proc.returncode}: {shlex.join(cmd)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


class Launcher:
    """Starts the timed processes from a small process of its own, made before this one reads a segment.
    A child's peak RSS (ru_maxrss) starts at its parent's peak at the fork (the kernel copies the
    high-water mark and keeps it across exec): forked from here, after a 500 MiB segment was read, every
    process would show at least that."""

    def __init__(self) -> None:
        self._pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self._pool.submit(os.getpid).result()

    def timed(self, cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
        return self._pool.submit(_timed, cmd, env).result()


def best_of(launcher: Launcher, runs: int, commands: list[tuple[list[str], dict[str, str] | None]]) -> list[tuple]:
    """Per command, (best wall, best CPU, highest peak RSS) of `runs`, the commands taking turns in each
    run (ABAB...), so that a machine slowing down part-way weighs on each alike."""
    results: list[list[tuple[float, float, int]]] = [[] for _ in commands]
    for _ in range(runs):
        for i, (cmd, env) in enumerate(commands):
            results[i].append(launcher.timed(cmd, env))
    return [(min(r)[0], min(r)[1], max(x[2] for x in r)) for r in results]


def decode_run(python: str, tree: Path, segment: Path) -> tuple[list[str], dict[str, str]]:
    """The command and environment of (b): `txn-exporter decode` of `tree`'s exporter package under
    `python`. PYTHONSAFEPATH: `-m` would otherwise put the working directory first on sys.path,
    ahead of PYTHONPATH, and run the checkout's package whatever tree was asked for."""
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
    return [python, "-m", "exporter", "decode", str(segment)], env


def python_env(interpreter: str) -> Path:
    """A venv of `interpreter` holding the sidecar's dependencies as the image installs them
    (requirements/image.txt, every file checked against its hash); the exporter itself is taken from
    the tree measured (PYTHONPATH). Made once per interpreter and lock, in the workshop's cache (out
    of the repository, whose every Python file the architecture test reads).

    Why: the image runs the official python image's CPython, built with profile-guided and link-time
    optimisation, and decode's CPU time depends on that build; an interpreter built without them (a
    pyenv default, as this project's .venv may be) runs the same code about a fifth slower. Debian's
    /usr/bin/python3.11 is built with both."""
    lock = ROOT / "requirements" / "image.txt"
    key = hashlib.sha256(f"{Path(interpreter).resolve()}\n".encode() + lock.read_bytes()).hexdigest()[:12]
    venv = maven.cache_root() / "bench-pythons" / f"{Path(interpreter).name}-{key}"
    if not (venv / "ready").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([interpreter, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "--require-hashes", "-r", str(lock)], check=True)
        (venv / "ready").touch()
    return venv / "bin" / "python"


def in_process(data: bytes, runs: int) -> tuple[float, float]:
    """Best-of-`runs` wall and CPU seconds of bytes -> typed records on the current (pinned) core.
    CPU time is the steadier figure when other processes share the core."""
    best_wall = best_cpu = float("inf")
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        sum(1 for _ in decode_batches(data))
        best_wall = min(best_wall, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best_wall, best_cpu


def from_file(segment: Path, runs: int) -> tuple[float, float]:
    """(c) from the file, read in pieces as `txn-exporter decode` reads it."""
    best_wall = best_cpu = float("inf")
    for _ in range(runs):
        gc.collect()
        start, start_cpu = time.perf_counter(), time.process_time()
        sum(1 for _ in read_segment(segment))
        best_wall = min(best_wall, time.perf_counter() - start)
        best_cpu = min(best_cpu, time.process_time() - start_cpu)
    return best_wall, best_cpu


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", choices=("synthetic", "broker"), default="synthetic")
    parser.add_argument("--shapes", default=",".join(SHAPES), help="synthetic shapes, in report order")
    parser.add_argument("--records", type=int, help="at least this many records (3M synthetic, 1M broker)")
    parser.add_argument(
        "--kafka",
        choices=sorted(TRANSACTION_VERSIONS),
        default="4.4.0",
        help="broker version: writes the broker segment, and picks DumpLogSegments' tools",
    )
    parser.add_argument("--runs", type=int, default=3, help="best of N for each measurement")
    parser.add_argument("--processes", type=int, default=4, help="producer processes (broker generation)")
    parser.add_argument("--threads", type=int, default=12, help="producers per process (broker generation)")
    parser.add_argument("--regenerate", action="store_true", help="write new segments even if cached")
    parser.add_argument("--generate-only", action="store_true", help="write the segments, measure nothing")
    parser.add_argument("--skip-kafka", action="store_true", help="skip DumpLogSegments (a)")
    parser.add_argument(
        "--also-tree",
        action="append",
        default=[],
        type=Path,
        metavar="DIR",
        help="another exporter package (DIR/exporter, e.g. `git archive REV exporter | tar -x -C DIR`): "
        "its decode measured as (b) beside ours, run for run",
    )
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="INTERPRETER",
        help="another Python (e.g. /usr/bin/python3.11, built with PGO and LTO as the image's is): "
        "(b) under it too, in a venv of the image's locked dependencies, run for run",
    )
    args = parser.parse_args()
    launcher = Launcher()
    records = args.records or (3_000_000 if args.source == "synthetic" else 1_000_000)

    # DumpLogSegments reads the base offset from the file name: keep Kafka's name, one dir per variant.
    segments: list[tuple[str, Path]] = []
    if args.source == "broker":
        segment = DATA / f"transaction_state-{args.kafka}-{records}" / "00000000000000000000.log"
        if args.regenerate or not segment.exists():
            generate(args.kafka, records, args.processes, args.threads, segment)
        segments.append((f"written by Kafka {args.kafka} (librdkafka and Java clients)", segment))
    else:
        for shape in args.shapes.split(","):
            segment = DATA / f"transaction_state-synthetic-{shape}-{records}" / "00000000000000000000.log"
            if args.regenerate or not segment.exists():
                generate_synthetic(shape, records, segment)
            segments.append((f"synthetic, {shape} shape (bench/synthetic.py)", segment))
    if args.generate_only:
        return
    cpus = sorted(os.sched_getaffinity(0))
    print(f"machine: {len(cpus)} cores, {cpu_model()}, Python {platform.python_version()}, best of {args.runs}")
    summary = []
    for origin, segment in segments:
        summary.append(measure(args, launcher, origin, segment, cpus))
    print()
    for line in summary:
        print(line)
    print(f"load average after the runs: {os.getloadavg()[0]:.1f} (1 min)")
    print(f"command: .venv/bin/python bench/decode_segment.py {shlex.join(sys.argv[1:])}".rstrip())


def measure(args: argparse.Namespace, launcher: Launcher, origin: str, segment: Path, cpus: list[int]) -> str:
    """The three measurements on one file, printed as a table; returns the file's one-line summary."""
    from txn_workshop.harness.jars import tools_libs, tools_version
    from txn_workshop.harness.versions import kafka_version

    data = segment.read_bytes()
    n = count_records(data)
    mib = len(data) / 2**20
    del data
    print(f"\nsegment: {segment.relative_to(ROOT)}: {n:,} records, {mib:.1f} MiB, {origin}")
    rows = []
    kafka_cpu = None
    if not args.skip_kafka:
        java = [
            "java",
            *KAFKA_RUN_CLASS_OPTS,
            "-cp",
            f"{tools_libs(args.kafka)}/*",
            kafka_version(args.kafka).dump_log_segments_class,
            "--transaction-log-decoder",
            "--files",
            str(segment),
        ]
        ((wall, kafka_cpu, rss),) = best_of(launcher, args.runs, [(java, None)])
        rows.append((f"(a) Kafka {tools_version(args.kafka)} DumpLogSegments, JVM start incl.", wall, kafka_cpu, rss))
    pythons = [(".venv", str(ROOT / ".venv" / "bin" / "python"))]
    pythons += [(interpreter, str(python_env(interpreter))) for interpreter in args.python]
    runs = [(name, python, tree) for name, python in pythons for tree in [ROOT, *args.also_tree]]
    measured = best_of(launcher, args.runs, [decode_run(python, tree, segment) for _, python, tree in runs])
    rows.append(("(b) txn-exporter decode, process start incl.", *measured[0]))
    for (name, python, tree), row in zip(runs[1:], measured[1:]):
        where = "" if tree == ROOT else f", {tree}"
        rows.append((f"(b) the same, {_python_version(python)} {name}{where}", *row))

    data = segment.read_bytes()
    os.sched_setaffinity(0, {cpus[0]})
    try:
        seconds, cpu = in_process(data, args.runs)
    finally:
        os.sched_setaffinity(0, cpus)
    del data
    rows.append(("(c) decode_batches in-process, one core", seconds, cpu, None))
    os.sched_setaffinity(0, {cpus[0]})
    try:
        rows.append(("(d) read_segment, 1 MiB pieces, one core", *from_file(segment, args.runs), None))
    finally:
        os.sched_setaffinity(0, cpus)

    header = ("measurement", "wall s", "CPU s", "records/s", "MiB/s", "peak RSS")
    print("| {:<50} | {:>7} | {:>6} | {:>11} | {:>6} | {:>9} |".format(*header))
    print(f"|{'-' * 52}|{'-' * 9}|{'-' * 8}|{'-' * 13}|{'-' * 8}|{'-' * 11}|")
    for name, wall, cpu_s, rss in rows:
        rss_s = f"{rss / 1024:.0f} MiB" if rss is not None else "-"
        print(f"| {name:<50} | {wall:>7.2f} | {cpu_s:>6.2f} | {n / wall:>11,.0f} | {mib / wall:>6.1f} | {rss_s:>9} |")
    summary = f"{origin}, {n:,} records: "
    if kafka_cpu is not None:
        ours = [(name, row[1]) for (name, _, tree), row in zip(runs, measured) if tree == ROOT]
        summary += "txn-exporter decode vs DumpLogSegments in CPU time (target >= 2x, >= 1.5x at the least): "
        summary += ", ".join(f"{_verdict(kafka_cpu / cpu_s)} with {name}'s Python" for name, cpu_s in ours) + "; "
    return summary + f"in-process, one core: {n / cpu:,.0f} records/s of CPU time"


def _verdict(ratio: float) -> str:
    return f"{ratio:.2f}x, " + ("met" if ratio >= 2 else "at least 1.5x" if ratio >= 1.5 else "NOT met")


def _python_version(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import platform; print(platform.python_version())"], capture_output=True, text=True, check=True
    ).stdout.strip()


if __name__ == "__main__":
    main()
