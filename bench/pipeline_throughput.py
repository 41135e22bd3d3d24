"""Decode throughput of the Spark pipeline against the single-process decode of the same data.

    .venv/bin/python -m bench.pipeline_throughput [--records 10000000] [--partitions 50]

Builds (once, cached under /tmp/h7_bench-<records>-<partitions>/) synthetic-but-valid segments with
the codec's encoders: `--partitions` __transaction_state-N directories, commit/abort transactions
(EMPTY, ONGOING x2, PREPARE_*, COMPLETE_*) of 64 ids per partition, value v1, one record per batch
as coordinators write them. Then, in one run:
  single   the codec's decode_batches over every file in this process (one core)
  local[1] / local[2]   Spark: segment files -> transitions (mapInArrow over the codec), noop sink
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
from exporter.codec.record_batch import decode_batches, encode_batch

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
            shapes = [(S.EMPTY, None)] if n < 64 else []
            shapes += [(S.ONGOING, parts), (S.ONGOING, parts),
                       (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT, parts),
                       (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT, {})]
            for state, prt in shapes:
                if offset >= per_partition:
                    break
                ts += 1
                value = TransactionLogValue(1, pid, epoch, 60000, state, prt, ts, T0 + n, client_transaction_version=0)
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
    result = {"records": n, "build_seconds": round(built, 1), "single_records_per_s": round(n / seconds),
              "load_avg": os.getloadavg()[0]}
    for master in ("local[1]", "local[2]"):
        proc = subprocess.run([sys.executable, "-m", "bench.pipeline_throughput", "--spark-run", master,
                               "--root", str(root)], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        run = json.loads(proc.stdout.strip().splitlines()[-1])
        assert run["records"] == n, (run, n)
        result[f"{master}_records_per_s"] = round(n / run["seconds"])
    result["local[2]_per_core_over_single"] = round(result["local[2]_records_per_s"] / 2 / result["single_records_per_s"], 2)
    result["local[2]_over_local[1]"] = round(result["local[2]_records_per_s"] / result["local[1]_records_per_s"], 2)
    result["load_avg_after"] = os.getloadavg()[0]
    print(json.dumps(result))


if __name__ == "__main__":
    main()
