"""Structured Streaming from live clusters: the batch pipeline's tables, kept up to date.

Lifecycles need every record of a transaction, which may span micro-batches; non-time windows are
not allowed in streaming, so each micro-batch runs in foreachBatch with a state table of its own:
  state = the transitions of every transaction still open after the last committed micro-batch.
Micro-batch N: lifecycles of (state + N's transitions) with the same code as the batch pipeline;
completed ones are appended to lifecycles/, open ones become the next state (their transitions)
and the `open` snapshot. Transitions are appended to transitions/.

Idempotent by batch id (Spark replays a micro-batch whose commit it did not record):
  OUT/stream/commit.json           {"batch_id": N} of the last micro-batch fully applied
  OUT/stream/state/<N>/            the state after N; OUT/stream/open/<N>/ its open lifecycles
  OUT/stream/staging/<N>/          N's outputs, written first, then moved file by file into the
                                    tables after a manifest of the destinations is written
A replayed N <= commit is skipped; a replayed N > commit first deletes what its manifest lists (an
interrupted move), then runs again. OUT must be a path this process can write (local or mounted).
At the end (available-now) the derived tables are rebuilt: pending_history, candidates,
transactional_ids, with the open transactions included.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from exporter.pipeline import tables
from exporter.pipeline.tables import KafkaInput

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class StreamState:
    def __init__(self, out: str) -> None:
        self.out = Path(out)
        self.root = self.out / "stream"

    def committed(self) -> int:
        try:
            return json.loads((self.root / "commit.json").read_text())["batch_id"]
        except FileNotFoundError:
            return -1

    def commit(self, batch_id: int) -> None:
        tmp = self.root / "commit.json.tmp"
        tmp.write_text(json.dumps({"batch_id": batch_id}) + "\n")
        os.replace(tmp, self.root / "commit.json")  # atomic
        for kind in ("state", "open"):
            for old in (self.root / kind).glob("*"):
                if old.name != str(batch_id):
                    shutil.rmtree(old, ignore_errors=True)
        shutil.rmtree(self.root / "staging" / str(batch_id), ignore_errors=True)

    def state_dir(self, batch_id: int) -> Path:
        return self.root / "state" / str(batch_id)

    def open_dir(self, batch_id: int) -> Path:
        return self.root / "open" / str(batch_id)

    def staging(self, batch_id: int) -> Path:
        return self.root / "staging" / str(batch_id)

    def undo(self, batch_id: int) -> None:
        """Remove whatever an interrupted earlier run of `batch_id` left."""
        staging = self.staging(batch_id)
        manifest = staging / "_manifest.json"
        if manifest.exists():
            for dest in json.loads(manifest.read_text()):
                Path(dest).unlink(missing_ok=True)
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(self.state_dir(batch_id), ignore_errors=True)
        shutil.rmtree(self.open_dir(batch_id), ignore_errors=True)

    def publish(self, batch_id: int, names: Sequence[str]) -> None:
        """Move staged data files into the tables, manifest first."""
        staging = self.staging(batch_id)
        moves = [
            (src, self.out / name / src.relative_to(staging / name))
            for name in names
            for src in (staging / name).rglob("*.parquet")
        ]
        (staging / "_manifest.json").write_text(json.dumps([str(d) for _, d in moves]))
        for src, dest in moves:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dest)


def process_batch(spark, store: StreamState, batch_df, batch_id: int) -> None:
    from pyspark.sql import functions as F

    if batch_id <= store.committed():
        return  # applied already (a replay after a crash before Spark recorded it)
    store.undo(batch_id)
    previous = store.committed()
    staging = store.staging(batch_id)
    new = batch_df.persist()
    try:
        tables.write(new, str(staging), "transitions")
        state_path = store.state_dir(previous)
        ok = new.where(F.col("error").isNull())
        combined = ok.unionByName(spark.read.parquet(str(state_path))) if previous >= 0 and state_path.exists() else ok
        combined = combined.persist()
        lc = tables.lifecycles(combined).persist()
        tables.write(lc.where(F.col("result").isNotNull()), str(staging), "lifecycles")
        open_lc = lc.where(F.col("result").isNull())
        open_lc.write.mode("overwrite").parquet(str(store.open_dir(batch_id)))
        keys = open_lc.select("cluster", "transactional_id", "partition", F.col("first_offset"))
        state = (
            combined.join(keys, ["cluster", "transactional_id", "partition"])
            .where(F.col("offset") >= F.col("first_offset"))
            .drop("first_offset")
        )
        state.write.mode("overwrite").parquet(str(store.state_dir(batch_id)))
        marks = tables.as_of(new)
        marks_path = store.root / "as_of.json"
        known = json.loads(marks_path.read_text()) if marks_path.exists() else {}
        for row in marks.collect():
            known[row["cluster"]] = max(known.get(row["cluster"], 0), row["as_of_ms"])
        store.publish(batch_id, ("transitions", "lifecycles"))
        marks_path.with_suffix(".tmp").write_text(json.dumps(known))
        os.replace(marks_path.with_suffix(".tmp"), marks_path)
        store.commit(batch_id)
        lc.unpersist()
        combined.unpersist()
    finally:
        new.unpersist()


def finish(spark, out: str, resolution_s: int, late_markers_ms: int, step=lambda name: None) -> None:
    """as_of and the derived tables, from what the stream has written so far: every table, empty
    when the stream has read nothing (yet) or completed no transaction."""
    store = StreamState(out)
    batch = store.committed()
    marks_path = store.root / "as_of.json"
    known = json.loads(marks_path.read_text()) if batch >= 0 and marks_path.exists() else {}
    marks = spark.createDataFrame(sorted(known.items()), "cluster string, as_of_ms bigint")
    tables.write(marks, out, "as_of")
    for name in ("transitions", "lifecycles"):  # publish makes them only for rows
        Path(out, name).mkdir(parents=True, exist_ok=True)
    open_dir = store.open_dir(batch)
    open_lc = spark.read.parquet(str(open_dir)) if batch >= 0 and open_dir.exists() else None
    tables.derive(spark, out, resolution_s, late_markers_ms, step, open_lifecycles=open_lc)


def run_stream(
    spark,
    kafka: Sequence[KafkaInput],
    out: str,
    checkpoint: str,
    trigger: str = "available-now",
    interval: str = "30 seconds",
    max_offsets_per_trigger: int | None = None,
    resolution_s: int = tables.DEFAULT_RESOLUTION_S,
    late_markers_ms: int = tables.DEFAULT_LATE_MARKERS_MS,
    step=lambda name: None,
    await_seconds: float | None = None,
) -> None:
    """Runs the stream. available-now: until everything there is processed, then derives the tables.
    continuous: every `interval` until stopped (Ctrl-C), then derives them."""
    Path(out, "stream").mkdir(parents=True, exist_ok=True)
    store = StreamState(out)
    parts = [
        tables.decode_kafka(tables.kafka_raw(spark, k, streaming=True, max_offsets_per_trigger=max_offsets_per_trigger))
        for k in kafka
    ]
    decoded = parts[0]
    for part in parts[1:]:
        decoded = decoded.unionByName(part)

    def each_batch(df: DataFrame, batch_id: int) -> None:
        step(f"micro-batch {batch_id}")
        process_batch(spark, store, df, batch_id)

    writer = decoded.writeStream.option("checkpointLocation", checkpoint).foreachBatch(each_batch)
    writer = (
        writer.trigger(availableNow=True) if trigger == "available-now" else writer.trigger(processingTime=interval)
    )
    query = writer.start()
    try:
        query.awaitTermination(await_seconds) if await_seconds else query.awaitTermination()
    except KeyboardInterrupt:
        pass
    finally:
        if query.isActive:
            query.stop()
    if query.exception() is not None:
        raise query.exception()
    step("derived tables")
    finish(spark, out, resolution_s, late_markers_ms, step)
