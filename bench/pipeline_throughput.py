"""Decode throughput of the Spark pipeline against the single-process decode of the same data.

    .venv/bin/python -m bench.pipeline_throughput [--records 10000000] [--partitions 50]

Builds (once, cached under /tmp/h7_bench-<records>-<partitions>/) synthetic-but-valid segments with
the codec's encoders: `--partitions` __transaction_state-N directories, commit/abort transactions
(EMPTY, ONGOING x2, PREPARE_*, COMPLETE_*) of 64 ids per partition, value v1, one record per batch
as coordinators write them. Then, in one run:
  single            the codec's decode_batches over every file in this process (one core)
  single pipeline   the Spark job's own Python function (bytes -> transition Arrow batches) in
                    this process, without Spark: the same work as a Spark task, on one core
  local[1] / local[2]   Spark: segment files -> transitions (mapInArrow over the codec), noop sink,
                    each confined to as many CPUs as task slots; local[1] also unconfined
Each Spark master runs in its own process (the master is fixed per JVM); session start-up and a
warm-up job are excluded, as the single-process loop excludes interpreter start-up.
Prints one JSON object with records/s and the ratios the goals are about.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value
from exporter.codec.record_batch import decode_batches
from txn_workshop.record_batches import encode_batch

S = TransactionState
T0 = 1_795_000_000_000


def build(root: Path, records: int, partitions: int) -> list[Path]:
    marker = root / ".complete"
    files = [root / f"__transaction_state-{p}" / "00000000000000000000.log" for p in range(partitions)]
    if marker.exists():
        return files
    per_partition = records // partitions
    for p, path in enumerate(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        out = bytearray()
        offset = 0
        ts = T0
        tids = [f"bench-{p}-{i}" for i in range(64)]
        keys = [encode_key(t) for t in tids]
        n = 0
        while offset < per_partition:
            i = n % 64
            pid, epoch = p * 64 + i, 0
            commit = n % 5 != 0
            parts = {"orders": [n % 12], "payments": [n % 3]} if n % 4 == 0 else {"orders": [n % 12]}
            shapes: list[tuple[S, dict[str, list[int]] | None]] = [(S.EMPTY, None)] if n < 64 else []
            shapes += [
                (S.ONGOING, parts),
                (S.ONGOING, parts),
                (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, parts),
                (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, {}),
            ]
            for state, prt in shapes:
                if offset >= per_partition:
                    break
                ts += 1
                value = TransactionLogValue(
                    version=1,
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_timeout_ms=60000,
                    state=state,
                    partitions=prt,
                    last_update_timestamp_ms=ts,
                    start_timestamp_ms=T0 + n,
                    client_transaction_version=0,
                )
                out += encode_batch(offset, [(keys[i], encode_value(value), ts)])
                offset += 1
            n += 1
        path.write_bytes(bytes(out))
    marker.write_text("")
    return files


def single(files: list[Path]) -> tuple[int, float]:
    n = 0
    t = time.perf_counter()
    for f in files:
        for _ in decode_batches(f.read_bytes()):
            n += 1
    return n, time.perf_counter() - t


def single_pipeline(files: list[Path]) -> tuple[int, float]:
    """The Spark job's own Python function (segment bytes -> transition Arrow batches), in this
    process without Spark: the same work, on one core."""
    from exporter.pipeline.decode import decode_segment, partition_of_path

    n = 0
    t = time.perf_counter()
    for f in files:
        for batch in decode_segment("bench", partition_of_path(str(f)), f.read_bytes()):
            n += batch.num_rows
    return n, time.perf_counter() - t


def spark_run(master: str, root: Path) -> dict:
    from exporter.pipeline import tables
    from exporter.pipeline.session import spark_session
    from exporter.pipeline.sources import segment_input

    cores = int(master[6:-1]) if master.startswith("local[") and master[6:-1].isdigit() else os.cpu_count()
    spark = spark_session(master, kafka=False, shuffle_partitions=cores, progress=False)
    src = segment_input("bench", str(root))
    warm = tables.SegmentInput("bench", src.files[:1])
    tables.decode_segments(spark, [warm]).write.format("noop").mode("overwrite").save()
    t = time.perf_counter()
    df = tables.decode_segments(spark, [src])
    df.write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - t
    count = tables.decode_segments(spark, [src]).count()
    spark.stop()
    return {"master": master, "records": count, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--spark-run", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.spark_run:
        print(json.dumps(spark_run(args.spark_run, Path(args.root))))
        return
    root = Path(f"/tmp/h7_bench-{args.records}-{args.partitions}")
    t = time.perf_counter()
    files = build(root, args.records, args.partitions)
    built = time.perf_counter() - t
    n, seconds = single(files)
    rows, pipeline_seconds = single_pipeline(files)
    assert rows == n, (rows, n)
    result = {
        "records": n,
        "build_seconds": round(built, 1),
        "single_records_per_s": round(n / seconds),
        "single_pipeline_records_per_s": round(n / pipeline_seconds),
        "load_avg": os.getloadavg()[0],
    }
    cpus = sorted(os.sched_getaffinity(0))
    # "local[1]" is one task slot but not one core: its JVM (reading the Python workers' Arrow
    # batches, ~1 us per record) runs on another. So each master also runs confined to as many
    # CPUs as task slots (JVM and Python workers inherit the affinity): the N-core figures.
    for master, pinned in (("local[1]", False), ("local[1]", True), ("local[2]", True)):
        slots = int(master[6:-1])
        proc = subprocess.run(
            [sys.executable, "-m", "bench.pipeline_throughput", "--spark-run", master, "--root", str(root)],
            capture_output=True,
            text=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, set(cpus[:slots]))) if pinned else None,  # noqa: B023 (run now)
        )
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        assert run["records"] == n, (run, n)
        result[f"{master}{'_on_' + str(slots) + '_cpu' if pinned else '_unpinned'}_records_per_s"] = round(
            n / run["seconds"]
        )
    two, one = result["local[2]_on_2_cpu_records_per_s"], result["local[1]_on_1_cpu_records_per_s"]
    result["2_cpu_per_core_over_single_pipeline"] = round(two / 2 / result["single_pipeline_records_per_s"], 2)
    result["2_cpu_per_core_over_single"] = round(two / 2 / result["single_records_per_s"], 2)
    result["2_cpu_over_1_cpu"] = round(two / one, 2)
    result["2_cpu_over_local[1]_unpinned"] = round(two / result["local[1]_unpinned_records_per_s"], 2)
    result["load_avg_after"] = os.getloadavg()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
