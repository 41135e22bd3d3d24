"""The pipeline's tables, as Spark DataFrames, and where they are written.

Output layout under OUT (Parquet; the column lists are a contract):
  transitions/          one row per record (exporter.pipeline.decode.TRANSITIONS_SCHEMA + timestamp),
                        partitioned by cluster and date (UTC, of the record timestamp)
  lifecycles/           one row per transaction (exporter.pipeline.lifecycles.LIFECYCLES_SCHEMA +
                        begin), partitioned by cluster and date (of begin)
  pending_history/      per cluster and time bucket (a minute by default): pending (transactions with
                        pending markers at the bucket's start, exactly as the live exporter's
                        kafka_transactions_with_pending_markers would read then), pending_max (the
                        most at any millisecond within it), prepares and completes within it;
                        partitioned by cluster and date
  candidates/           late or hanging transactions, one row each with its `reasons`; by cluster, date
  transactional_ids/    per cluster and transactional id: transactions, commits, aborts, timeouts,
                        fenced, open, duration p50/p99/max, markers p99, producer ids; by cluster
  as_of/                per cluster, the newest record timestamp read (where open transactions stop)

Each table's columns and types are `schema(name)` (its partition columns last): every table is
written in that shape and read with it, so a table with no rows (a healthy cluster's candidates, a
cluster that prepared nothing) is a directory without data files that reads as empty; other readers
of OUT should pass the same schema. A build replaces what it read: the tables per record or
transaction (transitions, lifecycles, as_of) for the clusters and dates it read, the derived tables
(pending_history, candidates, transactional_ids: from every lifecycle in OUT) whole.

A transaction has pending markers from its PREPARE_* record's timestamp (inclusive) to its
COMPLETE_* record's (exclusive), or to the end of the data if there is none.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from exporter.pipeline.decode import (
    SEGMENTS_INPUT_DDL,
    SPARK_TYPES,
    TRANSITIONS_DDL,
    TRANSITIONS_SCHEMA,
    decode_kafka_rows,
    decode_segment_files,
)
from exporter.pipeline.lifecycles import INPUT_COLUMNS, LIFECYCLES_DDL, LIFECYCLES_SCHEMA, lifecycles_of_sorted

TOPIC = "__transaction_state"
DEFAULT_RESOLUTION_S = 60
DEFAULT_LATE_MARKERS_MS = 60_000


def _arrow_columns(arrow_schema: pa.Schema) -> list[tuple[str, str]]:
    return [(f.name, SPARK_TYPES[f.type]) for f in arrow_schema if f.name != "cluster"]


# Each table's data columns, in the order written; its partition columns follow (PARTITIONS).
COLUMNS: dict[str, list[tuple[str, str]]] = {
    "transitions": [*_arrow_columns(TRANSITIONS_SCHEMA), ("timestamp", "timestamp")],
    "lifecycles": [*_arrow_columns(LIFECYCLES_SCHEMA), ("begin", "timestamp")],
    "pending_history": [
        ("time_ms", "bigint"),
        ("pending", "int"),
        ("pending_max", "int"),
        ("prepares", "int"),
        ("completes", "int"),
        ("time", "timestamp"),
    ],
    "candidates": [
        ("transactional_id", "string"),
        ("partition", "int"),
        ("producer_id", "bigint"),
        ("producer_epoch", "int"),
        ("kind", "string"),
        ("reasons", "array<string>"),
        ("state", "string"),
        ("result", "string"),
        ("abort_cause", "string"),
        ("begin_ms", "bigint"),
        ("prepare_ms", "bigint"),
        ("complete_ms", "bigint"),
        ("age_ms", "bigint"),
        ("transaction_timeout_ms", "int"),
        ("markers_ms", "bigint"),
        ("partitions", "array<string>"),
        ("as_of_ms", "bigint"),
        ("begin", "timestamp"),
    ],
    "transactional_ids": [
        ("transactional_id", "string"),
        ("transactions", "int"),
        ("commits", "int"),
        ("aborts", "int"),
        ("timeouts", "int"),
        ("fenced", "int"),
        ("open", "int"),
        ("p50_duration_ms", "double"),
        ("p99_duration_ms", "double"),
        ("max_duration_ms", "bigint"),
        ("p99_markers_ms", "double"),
        ("producer_ids", "int"),
        ("first_begin_ms", "bigint"),
        ("last_complete_ms", "bigint"),
    ],
    "as_of": [("as_of_ms", "bigint")],
}
PARTITIONS: dict[str, tuple[str, ...]] = dict.fromkeys(COLUMNS, ("cluster", "date")) | {
    "transactional_ids": ("cluster",),
    "as_of": ("cluster",),
}
_PARTITION_TYPES = {"cluster": "string", "date": "date"}


def schema(name: str) -> str:
    """The table's schema as Spark DDL: its data columns, then its partition columns."""
    columns = COLUMNS[name] + [(c, _PARTITION_TYPES[c]) for c in PARTITIONS[name]]
    return ", ".join(f"`{column}` {kind}" for column, kind in columns)


@dataclass(frozen=True)
class KafkaInput:
    cluster: str
    bootstrap_servers: str
    options: tuple[tuple[str, str], ...] = ()  # extra kafka.* source options (security...)


@dataclass(frozen=True)
class SegmentInput:
    cluster: str
    files: tuple[tuple[str, int], ...]  # (path, partition)


# -- inputs --------------------------------------------------------------------------------------


def kafka_raw(
    spark,
    source: KafkaInput,
    streaming: bool = False,
    starting_offsets: str = "earliest",
    ending_offsets: str = "latest",
    max_offsets_per_trigger: int | None = None,
):
    """Spark's Kafka source on __transaction_state, as (cluster, partition, offset, timestamp_ms, key, value)."""
    reader = spark.readStream if streaming else spark.read
    reader = (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", source.bootstrap_servers)
        .option("subscribe", TOPIC)
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", "false")  # compaction removes offsets: gaps are not data loss
    )
    if not streaming:
        reader = reader.option("endingOffsets", ending_offsets)
    elif max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    for key, value in source.options:
        reader = reader.option(key, value)
    from pyspark.sql import functions as F

    return reader.load().select(
        F.lit(source.cluster).alias("cluster"),
        "partition",
        "offset",
        F.unix_millis("timestamp").alias("timestamp_ms"),
        "key",
        "value",
    )


def decode_kafka(raw):
    """Transitions of Kafka source rows (the codec in Arrow batches)."""
    return _with_time(raw.mapInArrow(decode_kafka_rows, TRANSITIONS_DDL))


def decode_segments(spark, inputs: Sequence[SegmentInput]):
    """Transitions of segment files. A segment decodes sequentially, so files are the unit of work:
    packed by size into about four tasks per core (one per file when files are big), so a broker's
    fifty mostly small partitions do not pay fifty task start-ups."""
    files = [(s.cluster, path, partition, _size(path)) for s in inputs for path, partition in s.files]
    slots = max(
        1,
        min(
            len(files),
            4 * spark.sparkContext.defaultParallelism,
            max(2 * spark.sparkContext.defaultParallelism, sum(f[3] for f in files) // (64 << 20)),
        ),
    )
    bins: list[list[tuple[str, str, int]]] = [[] for _ in range(slots)]
    loads = [0] * slots
    for cluster, path, partition, size in sorted(files, key=lambda f: -f[3]):
        i = loads.index(min(loads))
        bins[i].append((cluster, path, partition))
        loads[i] += size
    bins = [b for b in bins if b]
    rows = spark.sparkContext.parallelize(bins, len(bins)).flatMap(lambda b: b)
    return _with_time(rows.toDF(SEGMENTS_INPUT_DDL).mapInArrow(decode_segment_files, TRANSITIONS_DDL))


def _size(path: str) -> int:
    import os

    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _with_time(transitions):
    from pyspark.sql import functions as F

    ts = F.timestamp_millis("timestamp_ms")
    return transitions.withColumn("timestamp", ts).withColumn("date", F.to_date(ts))


# -- lifecycles ----------------------------------------------------------------------------------


def lifecycles(transitions, partitions: int | None = None):
    """One row per transaction, by exporter.contracts.lifecycle, per transactional id (repartition + sort +
    mapInArrow: one Python call per Arrow batch, not per id)."""
    from pyspark.sql import functions as F

    rows = transitions.where(F.col("error").isNull() & F.col("transactional_id").isNotNull()).select(*INPUT_COLUMNS)
    keyed = (
        rows.repartition(partitions, "cluster", "transactional_id")
        if partitions
        else rows.repartition("cluster", "transactional_id")
    )
    out = keyed.sortWithinPartitions("cluster", "transactional_id", "partition", "offset").mapInArrow(
        lifecycles_of_sorted, LIFECYCLES_DDL
    )
    begin = F.timestamp_millis("begin_ms")
    return out.withColumn("begin", begin).withColumn("date", F.to_date(begin))


def as_of(transitions):
    """Per cluster, the newest record timestamp: open transactions are open until then."""
    from pyspark.sql import functions as F

    return transitions.groupBy("cluster").agg(F.max("timestamp_ms").alias("as_of_ms"))


# -- pending history -----------------------------------------------------------------------------

PENDING_DDL = "cluster string, time_ms bigint, pending int, pending_max int, prepares int, completes int"
_PENDING_FIELDS: list[tuple[str, pa.DataType]] = [("cluster", pa.string()), ("time_ms", pa.int64())]
_PENDING_SCHEMA = pa.schema(
    _PENDING_FIELDS + [(name, pa.int32()) for name in ("pending", "pending_max", "prepares", "completes")]
)


def _sweep(resolution_ms: int):
    def sweep(table: pa.Table) -> pa.Table:
        """One cluster's net changes per millisecond -> its per-bucket series (exact)."""
        table = table.sort_by("ts")
        cluster = table.column("cluster")[0].as_py()
        ts = table.column("ts").to_numpy()
        net = table.column("net").to_numpy()
        prepares = table.column("prepares").to_numpy()
        completes = table.column("completes").to_numpy()
        # Boundary rows (net 0) carry the end of the data; a cluster without any prepare has no series.
        if prepares.sum() == 0:
            return _PENDING_SCHEMA.empty_table()
        running = np.cumsum(net)  # pending right after each millisecond's changes
        first = (ts[prepares > 0].min() // resolution_ms) * resolution_ms
        last = (ts.max() // resolution_ms) * resolution_ms
        buckets = np.arange(first, last + resolution_ms, resolution_ms, dtype=np.int64)
        # Pending at a bucket's start: the running count after the last change at or before it.
        at = np.searchsorted(ts, buckets, side="right") - 1
        pending = np.where(at >= 0, running[np.maximum(at, 0)], 0)
        # Max within [start, start + resolution): the start value or any change inside.
        idx = np.clip((ts - first) // resolution_ms, 0, len(buckets) - 1)
        inside = ts >= first
        pending_max = pending.copy()
        np.maximum.at(pending_max, idx[inside], running[inside])
        bucket_prepares = np.zeros(len(buckets), dtype=np.int64)
        bucket_completes = np.zeros(len(buckets), dtype=np.int64)
        np.add.at(bucket_prepares, idx[inside], prepares[inside])
        np.add.at(bucket_completes, idx[inside], completes[inside])
        return pa.table(
            [[cluster] * len(buckets), buckets, pending, pending_max, bucket_prepares, bucket_completes],
            schema=_PENDING_SCHEMA,
        )

    return sweep


def pending_history(lifecycles_df, as_of_df, resolution_s: int = DEFAULT_RESOLUTION_S):
    """The exact pending-markers count per time bucket, from prepare/complete intervals. Per cluster,
    the changes are summed per millisecond in Spark, then swept in one Arrow call per cluster (a
    few bytes per transaction: 10M transactions are ~100 MB in one task)."""
    from pyspark.sql import functions as F

    prepared = lifecycles_df.where(F.col("prepare_ms").isNotNull())
    changes = (
        prepared.select(
            "cluster",
            F.col("prepare_ms").alias("ts"),
            F.lit(1).alias("net"),
            F.lit(1).alias("prepares"),
            F.lit(0).alias("completes"),
        )
        .unionByName(
            prepared.where(F.col("complete_ms").isNotNull()).select(
                "cluster",
                F.col("complete_ms").alias("ts"),
                F.lit(-1).alias("net"),
                F.lit(0).alias("prepares"),
                F.lit(1).alias("completes"),
            )
        )
        .unionByName(
            as_of_df.select(
                "cluster",
                F.col("as_of_ms").alias("ts"),
                F.lit(0).alias("net"),
                F.lit(0).alias("prepares"),
                F.lit(0).alias("completes"),
            )
        )
        .groupBy("cluster", "ts")
        .agg(
            F.sum("net").cast("long").alias("net"),
            F.sum("prepares").cast("long").alias("prepares"),
            F.sum("completes").cast("long").alias("completes"),
        )
    )
    out = changes.groupBy("cluster").applyInArrow(_sweep(resolution_s * 1000), PENDING_DDL)
    time = F.timestamp_millis("time_ms")
    return out.withColumn("time", time).withColumn("date", F.to_date(time))


# -- forensics -----------------------------------------------------------------------------------


def candidates(lifecycles_df, as_of_df, late_markers_ms: int = DEFAULT_LATE_MARKERS_MS):
    """Late transactions (completed past their timeout, or markers slower than `late_markers_ms`) and
    hanging ones (open past their timeout, or markers pending longer than `late_markers_ms` at the
    end of the data). `age_ms`: begin to complete, or to the end of the data when open."""
    from pyspark.sql import functions as F

    lc = lifecycles_df.join(as_of_df, "cluster")
    open_ = F.col("result").isNull()
    age = F.when(open_, F.col("as_of_ms") - F.col("begin_ms")).otherwise(F.col("duration_ms"))
    markers_age = F.when(open_, F.col("as_of_ms") - F.col("prepare_ms")).otherwise(F.col("markers_ms"))
    reasons = F.array_compact(
        F.array(
            F.when(~open_ & (F.col("duration_ms") > F.col("transaction_timeout_ms")), F.lit("over_timeout")),
            F.when(~open_ & (F.col("markers_ms") > late_markers_ms), F.lit("slow_markers")),
            F.when(
                open_ & (F.col("state") == "ONGOING") & (age > F.col("transaction_timeout_ms")),
                F.lit("open_past_timeout"),
            ),
            F.when(open_ & F.col("prepare_ms").isNotNull() & (markers_age > late_markers_ms), F.lit("markers_pending")),
        )
    )
    return (
        lc.withColumn("age_ms", age)
        .withColumn("reasons", reasons)
        .where(F.size("reasons") > 0)
        .withColumn("kind", F.when(open_, F.lit("hanging")).otherwise(F.lit("late")))
        .select("cluster", *(name for name, _ in COLUMNS["candidates"]), "date")
    )


def transactional_id_summary(lifecycles_df):
    from pyspark.sql import functions as F

    def count_if(cond):
        return F.sum(F.when(cond, 1).otherwise(0)).cast("int")

    return lifecycles_df.groupBy("cluster", "transactional_id").agg(
        F.count("*").cast("int").alias("transactions"),
        count_if(F.col("result") == "commit").alias("commits"),
        count_if(F.col("result") == "abort").alias("aborts"),
        count_if(F.col("timed_out")).alias("timeouts"),
        count_if(F.col("abort_cause") == "fenced").alias("fenced"),
        count_if(F.col("result").isNull()).alias("open"),
        F.percentile("duration_ms", 0.5).alias("p50_duration_ms"),
        F.percentile("duration_ms", 0.99).alias("p99_duration_ms"),
        F.max("duration_ms").alias("max_duration_ms"),
        F.percentile("markers_ms", 0.99).alias("p99_markers_ms"),
        F.countDistinct("producer_id").cast("int").alias("producer_ids"),
        F.min("begin_ms").alias("first_begin_ms"),
        F.max("complete_ms").alias("last_complete_ms"),
    )


# -- writing -------------------------------------------------------------------------------------


def write(df, out: str, name: str, whole: bool = False) -> None:
    """Writes table `name` of OUT in its schema. Replaces the partitions `df` has rows in, or, when
    `whole`, the whole table (then no rows leave none: nothing of an earlier write stays)."""
    from pyspark.sql import functions as F

    shaped = df.select(*(F.col(c).cast(t) for c, t in COLUMNS[name]), *PARTITIONS[name])
    (
        shaped.write.mode("overwrite")
        .option("partitionOverwriteMode", "static" if whole else "dynamic")
        .partitionBy(*PARTITIONS[name])
        .parquet(f"{out}/{name}")
    )


def read_table(spark, out: str, name: str):
    """Table `name` of OUT, read with its schema: empty (not an error) when it has no rows."""
    return spark.read.schema(schema(name)).parquet(f"{out}/{name}")


def derive(
    spark,
    out: str,
    resolution_s: int = DEFAULT_RESOLUTION_S,
    late_markers_ms: int = DEFAULT_LATE_MARKERS_MS,
    step=lambda name: None,
    open_lifecycles=None,
) -> None:
    """pending_history, candidates and transactional_ids from OUT's lifecycles and as_of (plus the
    open transactions a stream keeps apart, if given), each written whole."""
    lc = read_table(spark, out, "lifecycles")
    if open_lifecycles is not None:
        lc = lc.unionByName(open_lifecycles)
    marks = read_table(spark, out, "as_of")
    step("pending_history")
    write(pending_history(lc, marks, resolution_s), out, "pending_history", whole=True)
    step("candidates")
    write(candidates(lc, marks, late_markers_ms), out, "candidates", whole=True)
    step("transactional_ids")
    write(transactional_id_summary(lc), out, "transactional_ids", whole=True)


def build(
    spark,
    kafka: Iterable[KafkaInput],
    segments: Sequence[SegmentInput],
    out: str,
    resolution_s: int = DEFAULT_RESOLUTION_S,
    late_markers_ms: int = DEFAULT_LATE_MARKERS_MS,
    step=lambda name: None,
) -> None:
    """The batch pipeline: decode every input once into transitions/, then the rest from there.
    Overwrites the clusters it reads (dynamic partition overwrite), leaves others in OUT alone; the
    derived tables are rebuilt whole from every cluster's lifecycles."""
    parts = [decode_kafka(kafka_raw(spark, k)) for k in kafka]
    if segments:
        parts.append(decode_segments(spark, segments))
    transitions = parts[0]
    for part in parts[1:]:
        transitions = transitions.unionByName(part)
    step("transitions")
    write(transitions, out, "transitions")
    clusters = [k.cluster for k in kafka] + [s.cluster for s in segments]
    stored = read_table(spark, out, "transitions").where(_in_clusters(clusters))
    step("lifecycles")
    write(lifecycles(stored), out, "lifecycles")
    write(as_of(stored), out, "as_of")
    derive(spark, out, resolution_s, late_markers_ms, step)


def _in_clusters(clusters: Sequence[str]):
    from pyspark.sql import functions as F

    return F.col("cluster").isin(list(clusters))
