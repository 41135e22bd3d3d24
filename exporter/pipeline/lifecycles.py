"""exporter.lifecycle applied in Arrow batches: sorted transitions in, lifecycle rows out.

Runs in Spark's Python workers through mapInArrow after `repartition(cluster, transactional_id)` +
`sortWithinPartitions(cluster, transactional_id, partition, offset)`: the rows of one id arrive
together and in log order, possibly split across Arrow batches (the tracker carries over). No
Spark import: tested without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

from exporter.lifecycle import STATE_IDS, STATE_NAMES, TOMBSTONE, Lifecycle, LifecycleTracker, Transition

# The transitions columns the lifecycle logic reads (errors filtered out before).
INPUT_COLUMNS = (
    "cluster", "transactional_id", "partition", "offset", "timestamp_ms", "state", "producer_id", "producer_epoch",
    "transaction_timeout_ms", "partitions", "start_timestamp_ms", "client_transaction_version",
)
LIFECYCLES_SCHEMA = pa.schema(
    [
        ("cluster", pa.string()),
        ("transactional_id", pa.string()),
        ("partition", pa.int32()),  # coordinator partition
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int32()),
        ("transaction_timeout_ms", pa.int32()),
        ("client_transaction_version", pa.int32()),
        ("begin_ms", pa.int64()),
        ("prepare_ms", pa.int64()),
        ("complete_ms", pa.int64()),
        ("result", pa.string()),  # commit, abort; null while open
        ("abort_cause", pa.string()),  # client, timeout, fenced; null unless aborted
        ("timed_out", pa.bool_()),
        ("state", pa.string()),  # the last state written
        ("partitions", pa.list_(pa.string())),  # "topic-N", sorted
        ("partition_count", pa.int32()),
        ("duration_ms", pa.int64()),  # begin -> complete
        ("ongoing_ms", pa.int64()),  # begin -> prepare
        ("markers_ms", pa.int64()),  # prepare -> complete
        ("first_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("records", pa.int32()),
    ]
)
_DDL_TYPES = {
    pa.string(): "string", pa.int32(): "int", pa.int64(): "bigint", pa.bool_(): "boolean",
    pa.list_(pa.string()): "array<string>",
}
LIFECYCLES_DDL = ", ".join(f"`{f.name}` {_DDL_TYPES[f.type]}" for f in LIFECYCLES_SCHEMA)


def _rows(items: list[tuple[str, Lifecycle]]) -> pa.RecordBatch:
    cols: dict[str, list] = {f.name: [] for f in LIFECYCLES_SCHEMA}
    for cluster, lc in items:
        cols["cluster"].append(cluster)
        cols["transactional_id"].append(lc.transactional_id)
        cols["partition"].append(lc.coordinator_partition)
        cols["producer_id"].append(lc.producer_id)
        cols["producer_epoch"].append(lc.producer_epoch)
        cols["transaction_timeout_ms"].append(lc.transaction_timeout_ms)
        cols["client_transaction_version"].append(lc.client_transaction_version)
        cols["begin_ms"].append(lc.begin_ms)
        cols["prepare_ms"].append(lc.prepare_ms)
        cols["complete_ms"].append(lc.complete_ms)
        cols["result"].append(lc.result)
        cols["abort_cause"].append(lc.abort_cause)
        cols["timed_out"].append(lc.timed_out)
        cols["state"].append(STATE_NAMES[lc.state])
        cols["partitions"].append(sorted(lc.partitions))
        cols["partition_count"].append(len(lc.partitions))
        cols["duration_ms"].append(lc.duration_ms)
        cols["ongoing_ms"].append(lc.ongoing_ms)
        cols["markers_ms"].append(lc.markers_ms)
        cols["first_offset"].append(lc.first_offset)
        cols["last_offset"].append(lc.last_offset)
        cols["records"].append(lc.records)
    return pa.RecordBatch.from_arrays(
        [pa.array(cols[f.name], f.type) for f in LIFECYCLES_SCHEMA], schema=LIFECYCLES_SCHEMA
    )


def lifecycles_of_sorted(batches: Iterable[pa.RecordBatch], batch_rows: int = 20_000) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: transitions sorted by (cluster, transactional_id, partition, offset) ->
    one lifecycle row per transaction, open ones (result null) included."""
    out: list[tuple[str, Lifecycle]] = []
    key = None
    tracker: LifecycleTracker | None = None
    cluster = None
    for batch in batches:
        cols = [batch.column(name).to_pylist() for name in INPUT_COLUMNS]
        for (c, tid, partition, offset, ts, state, pid, epoch, timeout, parts, start, ctv) in zip(*cols):
            if (c, tid, partition) != key:
                if tracker is not None and tracker.current is not None:
                    out.append((cluster, tracker.current))
                key, cluster = (c, tid, partition), c
                tracker = LifecycleTracker(tid, partition)
            done = tracker.apply(Transition(
                offset, ts, TOMBSTONE if state is None else STATE_IDS[state], pid, epoch, timeout, parts, start, ctv
            ))
            if done is not None:
                out.append((c, done))
        if len(out) >= batch_rows:
            yield _rows(out)
            out = []
    if tracker is not None and tracker.current is not None:
        out.append((cluster, tracker.current))
    if out:
        yield _rows(out)
