"""Replay against the broker (issue 14, item 4): on the same 1M-record `__transaction_state`
partition, the exporter's start-to-ready time beside the coordinator's own load time of it.

    .venv/bin/python bench/replay_vs_broker.py [--records 1000000] [--runs 3] [--source synthetic|broker]
    .venv/bin/python bench/replay_vs_broker.py --ids 250000     # the synthetic mix over more ids
    .venv/bin/python bench/replay_vs_broker.py --profile      # where the exporter's replay time goes

The partition: bench/decode_segment.py's cached segment (default: the synthetic realistic mix of
bench/synthetic.py, 10,000 ids of about 100 records each, as an active segment holds them; `--ids`
spreads the same records over more ids, down to the few records per id of a compacted partition,
where the exporter's replay decodes nearly every record; `--source broker`: the one a real 4.4.0
broker wrote for librdkafka and TV2 Java clients),
the only segment of partition 0 of a one-partition `__transaction_state` on a 4.4.0 broker (TV2).

Each run is a takeover of that partition by a broker restarted with its data on disk (a clean
shutdown first, so no log recovery; the page cache is warm for both sides):
  broker:   Kafka's `partition-load-time-max` (Kafka Metrics group
            `kafka.server:type=transaction-coordinator-metrics`), read over JMX with Kafka's own
            JmxTool once the load is over: from the load's scheduling to its end, as the
            coordinator records it (its log line "Finished loading N transaction metadata ... in
            X milliseconds" is printed beside it as a check). The metrics window is set to an hour
            (`metrics.sample.window.ms`) so the max is that of this restart's single load.
  exporter: a `txn-exporter run --all-partitions` process, from its start (Python start-up,
            imports, metadata, replay to the high watermark) to its first `/readyz` 200, with the
            broker idle.
The broker runs on core 1 and the exporter on core 0 (2+ cores). Target: exporter / broker <= 1.

`--profile` replays in this process (the source and the model, as `txn-exporter run` does) under
cProfile and splits the time into fetch (librdkafka's poll/consume), decode and model.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.decode_segment import DATA, generate, generate_synthetic
from bench.exporter_process import VENV_BIN, Exporter
from bench.live_exporter import broker_with_segment
from txn_workshop.harness import jmx
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.processes import free_port

TOPIC = "__transaction_state"
KAFKA = "4.4.0"
LOAD_METRICS = "kafka.server:type=transaction-coordinator-metrics"
_FINISHED = re.compile(r"Finished loading (\d+) transaction metadata from __transaction_state-0 in (\d+) milliseconds")


def segment(source: str, records: int, ids: int | None) -> Path:
    """The cached segment (generated on first use, as bench/decode_segment.py does)."""
    if source == "broker":
        path = DATA / f"transaction_state-{KAFKA}-{records}" / "00000000000000000000.log"
        if not path.exists():
            generate(KAFKA, records, processes=4, threads=16, target=path)
    else:
        suffix = f"-{ids}-ids" if ids else ""
        path = DATA / f"transaction_state-synthetic-mix-{records}{suffix}" / "00000000000000000000.log"
        if not path.exists():
            generate_synthetic("mix", records, path, ids)
    return path


# -- the broker and its JMX ------------------------------------------------------------------------


def load_time_ms(broker: KafkaBroker) -> float:
    """The coordinator's own partition-load-time-max, read over JMX with Kafka's JmxTool."""
    values = jmx.read(broker, LOAD_METRICS, "partition-load-time-max")
    if len(values) != 1:
        raise SystemExit(f"no single {LOAD_METRICS} over JMX: {values}")
    return next(iter(values.values()))


def prepared_broker(workdir: Path, source: Path) -> KafkaBroker:
    """A stopped one-partition broker whose `__transaction_state-0` is `source`, recovered once."""
    broker = broker_with_segment(workdir, source, jmx=True, broker_properties={"metrics.sample.window.ms": "3600000"})
    wait_loaded(broker, 0)
    broker.stop()
    return broker


def _loads(broker: KafkaBroker) -> list[tuple[int, int]]:
    text = broker.server_log.read_text(errors="replace") if broker.server_log.exists() else ""
    return [(int(n), int(ms)) for n, ms in _FINISHED.findall(text)]


def wait_loaded(broker: KafkaBroker, before: int, timeout: float = 600) -> tuple[int, int]:
    """The (transactional ids, ms) of the broker's load after the `before` loads already logged."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        loads = _loads(broker)
        if len(loads) > before:
            return loads[before]
        time.sleep(0.05)
    raise SystemExit(f"the broker did not finish loading {TOPIC}-0 in {timeout:.0f} s (see {broker.server_log})")


def broker_takeover(broker: KafkaBroker) -> tuple[float, int, int]:
    """Restart with the data on disk: (JMX partition-load-time-max, ids loaded, the log's ms)."""
    before = len(_loads(broker))
    broker.start()
    ids, logged_ms = wait_loaded(broker, before)
    return load_time_ms(broker), ids, logged_ms


# -- the exporter ------------------------------------------------------------------------------------


def exporter_ready_seconds(bootstrap: str, workdir: Path) -> float:
    exporter = Exporter(
        VENV_BIN / "txn-exporter", bootstrap, free_port(), ["--all-partitions"], workdir / "exporter.log"
    )
    try:
        return exporter.wait_ready()
    finally:
        exporter.stop()


def profile_replay(bootstrap: str, top: int) -> None:
    """The exporter's replay in this process, under cProfile: fetch, decode, model."""
    from exporter.contracts.events import PartitionReplayed
    from exporter.metrics.recorders import LatencyRecorders
    from exporter.model import CoordinatorModel
    from exporter.sources.topic_tail import TransactionLogTail

    model = CoordinatorModel(LatencyRecorders().sinks())
    tail = TransactionLogTail(bootstrap, all_partitions=True)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    profiler.enable()
    replayed = False
    while not replayed:
        events = tail.poll()  # what txn-exporter run's poll loop does
        model.apply_batch(events)
        replayed = any(isinstance(e, PartitionReplayed) for e in events)
    profiler.disable()
    wall = time.perf_counter() - start
    tail.close()
    stats = pstats.Stats(profiler)
    table = stats.stats  # type: ignore[attr-defined]  # because typeshed leaves out the table pstats keeps
    total = sum(v[2] for v in table.values())  # own time of every function

    def cumulative(pattern: str) -> float:
        return sum(v[3] for (file, _, name), v in table.items() if re.search(pattern, f"{file}:{name}"))

    fetch = cumulative(r"method '(poll|consume)' of 'cimpl")
    decode = cumulative(r"codec/record.py:decode_record$")
    model_s = cumulative(r"model/coordinator.py:apply_batch$")
    print(f"in-process replay to PartitionReplayed: {wall:.2f} s wall, {total:.2f} s profiled")
    for name, seconds in (
        ("fetch (librdkafka poll/consume)", fetch),
        ("decode (decode_record)", decode),
        ("model (apply_batch)", model_s),
        ("rest of the source loop", total - fetch - decode - model_s),
    ):
        print(f"  {name:34} {seconds:6.2f} s  {seconds / total:5.1%}")
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(top)
    print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source", choices=("synthetic", "broker"), default="synthetic")
    parser.add_argument("--ids", type=int, help="transactional ids of the synthetic mix (default 10,000)")
    parser.add_argument("--profile", action="store_true", help="profile the exporter's replay in process instead")
    parser.add_argument("--top", type=int, default=25, help="functions shown by --profile")
    args = parser.parse_args()
    source = segment(args.source, args.records, args.ids)
    pin = (os.cpu_count() or 1) >= 2
    loads, readies = [], []
    with tempfile.TemporaryDirectory(prefix="bench-replay-") as tmp:
        broker = prepared_broker(Path(tmp) / "broker", source)
        try:
            for run in range(1 if args.profile else args.runs):
                broker.stop()
                if pin:  # the broker's JVM inherits the affinity it starts with
                    os.sched_setaffinity(0, {1})
                load_ms, ids, logged_ms = broker_takeover(broker)
                if pin:
                    os.sched_setaffinity(0, {0})
                if args.profile:
                    profile_replay(broker.bootstrap_servers, args.top)
                    return
                ready_s = exporter_ready_seconds(broker.bootstrap_servers, Path(tmp))
                loads.append(load_ms / 1000)
                readies.append(ready_s)
                print(
                    f"run {run + 1}: broker load {load_ms / 1000:6.2f} s (log: {ids:,} ids in {logged_ms / 1000:.2f} s), "
                    f"exporter start-to-ready {ready_s:6.2f} s, ratio {ready_s / (load_ms / 1000):.2f}",
                    flush=True,
                )
        finally:
            broker.stop()
    load, ready = statistics.median(loads), statistics.median(readies)
    print(
        f"records                               {args.records:,} ({args.source}, {source.stat().st_size / 2**20:.0f} MiB, one partition, Kafka {KAFKA})"
    )
    print(f"coordinator load (partition-load-time-max)  {load:6.2f} s  median of {len(loads)} (min {min(loads):.2f})")
    print(
        f"exporter start to /readyz                   {ready:6.2f} s  median of {len(readies)} (min {min(readies):.2f})"
    )
    print(f"ratio exporter / broker                     {ready / load:6.2f}  (target <= 1)")


if __name__ == "__main__":
    main()
