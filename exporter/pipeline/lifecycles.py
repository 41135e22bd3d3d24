"""exporter.contracts.lifecycle applied in Arrow batches: sorted transitions in, lifecycle rows out.

Runs in Spark's Python workers through mapInArrow after `repartition(cluster, transactional_id)` +
`sortWithinPartitions(cluster, transactional_id, partition, offset)`: the rows of one id arrive
together and in log order, possibly split across Arrow batches (the tracker carries over). No
Spark import: tested without a JVM.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from operator import attrgetter
from typing import Any

import pyarrow as pa

from exporter.contracts.lifecycle import STATE_IDS, STATE_NAMES, TOMBSTONE, Lifecycle, LifecycleTracker, Transition

# The transitions columns the lifecycle logic reads (errors filtered out before).
INPUT_COLUMNS = (
    "cluster",
    "transactional_id",
    "partition",
    "offset",
    "timestamp_ms",
    "state",
    "producer_id",
    "producer_epoch",
    "transaction_timeout_ms",
    "partitions",
    "start_timestamp_ms",
    "client_transaction_version",
)
_LIFECYCLES_FIELDS: list[tuple[str, pa.DataType]] = [
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
LIFECYCLES_SCHEMA = pa.schema(_LIFECYCLES_FIELDS)
_DDL_TYPES = {
    pa.string(): "string",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.bool_(): "boolean",
    pa.list_(pa.string()): "array<string>",
}
LIFECYCLES_DDL = ", ".join(f"`{f.name}` {_DDL_TYPES[f.type]}" for f in LIFECYCLES_SCHEMA)


# Columns read off the Lifecycle under their own name; _rows derives the other five.
_PLAIN = [
    f.name
    for f in LIFECYCLES_SCHEMA
    if f.name not in ("cluster", "partition", "state", "partitions", "partition_count")
]
_read_plain = attrgetter(*_PLAIN)


def _rows(items: list[tuple[str, Lifecycle]]) -> pa.RecordBatch:
    lifecycles = [lc for _, lc in items]
    plain = zip(*map(_read_plain, lifecycles)) if lifecycles else [[] for _ in _PLAIN]
    cols: dict[str, list[Any]] = {name: list(col) for name, col in zip(_PLAIN, plain)}
    cols["cluster"] = [cluster for cluster, _ in items]
    cols["partition"] = [lc.coordinator_partition for lc in lifecycles]
    cols["state"] = [STATE_NAMES[lc.state] for lc in lifecycles]
    cols["partitions"] = [sorted(lc.partitions) for lc in lifecycles]
    cols["partition_count"] = [len(lc.partitions) for lc in lifecycles]
    return pa.RecordBatch.from_arrays(
        [pa.array(cols[f.name], f.type) for f in LIFECYCLES_SCHEMA], schema=LIFECYCLES_SCHEMA
    )


def lifecycles_of_sorted(batches: Iterable[pa.RecordBatch], batch_rows: int = 20_000) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: transitions sorted by (cluster, transactional_id, partition, offset) ->
    one lifecycle row per transaction, open ones (result null) included."""
    out: list[tuple[str, Lifecycle]] = []
    key = None
    tracker: LifecycleTracker | None = None
    cluster = ""  # the tracker's
    for batch in batches:
        cols = [batch.column(name).to_pylist() for name in INPUT_COLUMNS]
        for c, tid, partition, offset, ts, state, pid, epoch, timeout, parts, start, ctv in zip(*cols):
            if (c, tid, partition) != key:
                if tracker is not None and tracker.current is not None:
                    out.append((cluster, tracker.current))
                key, cluster = (c, tid, partition), c
                tracker = LifecycleTracker(tid, partition)
            done = tracker.apply(  # type: ignore[union-attr]  # because the first row starts one (key is None before it)
                Transition(
                    offset, ts, TOMBSTONE if state is None else STATE_IDS[state], pid, epoch, timeout, parts, start, ctv
                )
            )
            if done is not None:
                out.append((c, done))
        if len(out) >= batch_rows:
            yield _rows(out)
            out = []
    if tracker is not None and tracker.current is not None:
        out.append((cluster, tracker.current))
    if out:
        yield _rows(out)
