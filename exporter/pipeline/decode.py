"""The project's codec in Arrow batches: `__transaction_state` records to transition rows.

No second decoder: segment files go through exporter.codec.record_batch.decode_batches and Kafka
records through exporter.codec.decode_value, exactly as `txn-exporter decode` and the live exporter
do. What is vectorised (pyarrow.compute over whole Arrow columns) is what has a fixed layout and
costs a Python call per record otherwise: the key of a Kafka record (int16 version 0, int16 length,
then the id: a slice of the key column and a cast to string, checked against the length prefix;
keys that fail the check go through the codec's decode_key and its typed errors).

These functions run inside Spark's Python workers (mapInArrow) but import nothing of Spark: they
take and yield pyarrow RecordBatches, and are tested and benchmarked without a JVM.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterable, Iterator
from operator import attrgetter
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from exporter.codec import DecodeError, TransactionLogRecord, decode_key, decode_value
from exporter.codec.record_batch import BatchError, Decoded, RecordError, decode_batches
from exporter.codec.states import TransactionState
from exporter.codec.value import ARRAY, INT8, INT16, INT32, INT64, VALUE_FIELDS, ValueField
from exporter.sources.segment_files import read_segment

# Arrow types of the value's ints, by their struct format: Spark's int for Kafka's int8 to int32.
_INT_TYPES = {INT8: pa.int32(), INT16: pa.int32(), INT32: pa.int32(), INT64: pa.int64()}
# Spark's DDL type of each Arrow type the tables use.
SPARK_TYPES = {
    pa.string(): "string",
    pa.int32(): "int",
    pa.int64(): "bigint",
    pa.bool_(): "boolean",
    pa.list_(pa.string()): "array<string>",
}


def value_columns(table: tuple[ValueField, ...] = VALUE_FIELDS) -> list[tuple[str, str, pa.DataType]]:
    """The transition row's columns of a value, from the codec's table, as (column, the value's
    attribute, Arrow type): the state first (its name), the other fields of every version in order
    (TransactionPartitions as "topic-N" strings), the value's version (as value_version), then the
    tagged fields in order: a tagged field added to the table is a column at the end."""
    columns: list[tuple[str, str, pa.DataType]] = [("state", "state", pa.string())]
    columns.extend(
        (f.name, f.name, pa.list_(pa.string()) if f.wire == ARRAY else _INT_TYPES[f.wire])
        for f in table
        if f.tag is None and f.name not in ("version", "state")
    )
    columns.append(("value_version", "version", pa.int32()))
    columns.extend((f.name, f.name, _INT_TYPES[f.wire]) for f in table if f.tag is not None)
    return columns


_VALUE_COLUMNS = value_columns()
# One row per record. Tombstones have state null; undecodable records (or batches) have `error`.
_TRANSITIONS_FIELDS: list[tuple[str, pa.DataType]] = [
    ("cluster", pa.string()),
    ("partition", pa.int32()),  # the __transaction_state partition: the coordinator's
    ("offset", pa.int64()),  # null for an undecodable batch
    ("timestamp_ms", pa.int64()),
    ("transactional_id", pa.string()),
    *((column, kind) for column, _, kind in _VALUE_COLUMNS),  # partitions: in the order the coordinator wrote them
    ("error", pa.string()),
]
TRANSITIONS_SCHEMA = pa.schema(_TRANSITIONS_FIELDS)
# The same as Spark DDL (mapInArrow's output schema).
TRANSITIONS_DDL = ", ".join(f"`{f.name}` {SPARK_TYPES[f.type]}" for f in TRANSITIONS_SCHEMA)
SEGMENTS_INPUT_DDL = "cluster string, path string, partition int"

# A value's fields in _VALUE_COLUMNS' order, and the columns they go to.
_VALUE_FIELDS = attrgetter(*(attribute for _, attribute, _ in _VALUE_COLUMNS))
_VALUE_COLUMN_NAMES = tuple(column for column, _, _ in _VALUE_COLUMNS)
# The columns of a value's fields that are null in an error row (all but the state's).
_NULL_IN_ERROR_ROWS = ("timestamp_ms", "transactional_id", *(c for c in _VALUE_COLUMN_NAMES if c != "state"))
_RECORD_FIELDS = attrgetter("offset", "timestamp_ms", "transactional_id")
_STATE_NAMES = tuple(s.name for s in TransactionState)
_STATE_DICTIONARY = pa.array(_STATE_NAMES, pa.string())
_BATCH_ROWS = 20_000
_PARTITION_DIR = re.compile(r"__transaction_state-(\d+)/[^/]*$")


def partition_of_path(path: str) -> int:
    match = _PARTITION_DIR.search(path)
    return int(match.group(1)) if match else -1


# Each (topic, partition)'s text, as a one-item list: the partitions of most values.
_PartitionsCache = dict[tuple[str, int], list[str]]


def _partitions_text(partitions: dict[str, list[int]] | None, cache: _PartitionsCache) -> list[str] | None:
    if not partitions:
        return None if partitions is None else []
    if len(partitions) == 1:
        # The usual shape (one topic, one partition): formatted once per distinct partition.
        ((topic, ids),) = partitions.items()
        if len(ids) == 1:
            key = (topic, ids[0])
            text = cache.get(key)
            if text is None:
                if len(cache) > 65536:
                    cache.clear()
                text = cache[key] = [f"{topic}-{ids[0]}"]
            return text
    return [f"{t}-{p}" for t, ids in partitions.items() for p in ids]


def records_to_batch(
    cluster: str,
    partition: int,
    records: list[TransactionLogRecord],
    errors: list[tuple[int | None, str]],
    cache: _PartitionsCache,
) -> pa.RecordBatch:
    """Transition rows of decoded records (and error rows), as one Arrow batch."""
    n = len(records)
    values = [r.value for r in records]
    # By field: a list of Python values (a tuple for a moment), or the state's Arrow array.
    cols: dict[str, Any] = {}
    if records:
        offsets, timestamps, tids = zip(*map(_RECORD_FIELDS, records))
        # Lists, not the tuples zip gives: pa.array converts a tuple ~40x slower (pyarrow 26).
        cols.update(offset=list(offsets), timestamp_ms=list(timestamps), transactional_id=list(tids))
    else:
        cols.update(offset=[], timestamp_ms=[], transactional_id=[])
    if not any(v is None for v in values):  # (`None in values` would call the dataclass __eq__)
        # One C-level attrgetter call per record, then a transpose: cheaper than a comprehension
        # per field.
        by_field = zip(*map(_VALUE_FIELDS, values)) if values else ([],) * len(_VALUE_COLUMN_NAMES)
        cols.update(zip(_VALUE_COLUMN_NAMES, by_field))
        parts = cols.pop("partitions")
        cols = {name: list(col) if type(col) is tuple else col for name, col in cols.items()}
        cols["state"] = _state_names(cols["state"])
        cols["partitions"] = [_partitions_text(p, cache) for p in parts]
    else:  # tombstones among them: null value fields
        cols["state"] = _state_names([None if v is None else v.state for v in values])
        # (Values decoded with their partitions: never PARTITIONS_SKIPPED.)
        cols["partitions"] = [None if v is None else _partitions_text(v.partitions, cache) for v in values]  # type: ignore[arg-type]
        for name, attr, _ in _VALUE_COLUMNS:
            if name not in ("state", "partitions"):
                cols[name] = [None if v is None else getattr(v, attr) for v in values]
    error_col = None
    if errors:
        cols = {name: col if name == "state" else list(col) for name, col in cols.items()}
        for offset, _message in errors:
            cols["offset"].append(offset)
            for name in _NULL_IN_ERROR_ROWS:
                cols[name].append(None)
        error_col = pa.array([None] * n + [m for _, m in errors], pa.string())
    total = n + len(errors)
    arrays: list[pa.Array] = [
        pa.repeat(pa.scalar(cluster, pa.string()), total),
        pa.repeat(pa.scalar(partition, pa.int32()), total),
    ]
    for field in TRANSITIONS_SCHEMA:
        if field.name in ("cluster", "partition"):
            continue
        if field.name == "error":
            arrays.append(error_col if error_col is not None else pa.nulls(total, pa.string()))
        elif field.name == "state":
            col = cols["state"]
            if len(col) < total:  # error rows appended None to the list form
                col = pa.concat_arrays([col, pa.nulls(total - len(col), pa.string())])
            arrays.append(col)
        else:
            arrays.append(pa.array(cols[field.name], field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=TRANSITIONS_SCHEMA)


def _state_names(ids: list[int | None]) -> pa.Array:
    """State names from state ids, through a dictionary (vectorised) rather than a string per row."""
    return pa.DictionaryArray.from_arrays(pa.array(ids, pa.int8()), _STATE_DICTIONARY).cast(pa.string())


def decode_segment(
    cluster: str, partition: int, data: bytes, batch_rows: int = _BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    """Transition batches of one segment file's bytes, through the codec's decode_batches."""
    return _segment_rows(cluster, partition, decode_batches(data), batch_rows)


def _segment_rows(
    cluster: str, partition: int, items: Iterator[Decoded], batch_rows: int = _BATCH_ROWS
) -> Iterator[pa.RecordBatch]:
    records: list[TransactionLogRecord] = []
    errors: list[tuple[int | None, str]] = []
    cache: _PartitionsCache = {}
    append = records.append
    # Millions of short-lived acyclic objects: the cyclic GC would re-scan every batch being built
    # (measured: it doubles the cost). Off for the whole segment; objects die by refcount.
    for item in _no_gc(items):
        if type(item) is TransactionLogRecord:
            append(item)
            if len(records) >= batch_rows:
                yield records_to_batch(cluster, partition, records, errors, cache)
                records, errors = [], []
                append = records.append
        elif type(item) is RecordError:
            errors.append((item.offset, str(item.error)))
        else:
            assert type(item) is BatchError
            errors.append((None, f"batch at byte {item.position}: {item.error}"))
    if records or errors:
        yield records_to_batch(cluster, partition, records, errors, cache)


def _no_gc(items):
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield from items
    finally:
        if enabled:
            gc.enable()


def decode_segment_files(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: rows (cluster, path, partition) of segment files -> transitions.

    The path must be readable where the task runs (a local disk in local mode, a shared mount on a
    cluster). A segment is read in pieces, not whole: a task's memory does not grow with its size."""
    for batch in batches:
        for cluster, path, partition in zip(*(c.to_pylist() for c in batch.columns)):
            yield from _segment_rows(cluster, partition, read_segment(Path(path)))


# (Scalars as pyarrow.compute would make them of b"\x00\x00" and 2.)
_VERSION_0 = pa.scalar(b"\x00\x00", pa.binary())
_TWO = pa.scalar(2, pa.int64())


def _tids(keys: pa.Array) -> tuple[list[str | None], list[int]]:
    """Transactional ids of a column of v0 keys, vectorised; indexes of keys that need the codec."""
    keys = cast(pa.BinaryArray, keys.cast(pa.binary()) if keys.type != pa.binary() else keys)
    lengths = pc.binary_length(keys)
    head = pc.binary_slice(keys, 0, 4)
    # A v0 key whose length prefix matches its size: bytes 0-1 are 0, bytes 2-3 the id's length.
    ids = pc.binary_slice(keys, 4, 4 + 0x7FFF)  # an explicit stop: no stop overflows in pyarrow 26
    ok = pc.and_(
        pc.equal(pc.binary_slice(head, 0, 2), _VERSION_0),
        pc.equal(pc.subtract(lengths, 4), _be16(pc.binary_slice(head, 2, 4))),
    ).fill_null(False)
    try:
        as_text = pc.if_else(ok, ids, pa.scalar(b"", pa.binary())).cast(pa.string())
    except pa.ArrowInvalid:  # invalid UTF-8 somewhere: let the codec report which
        return [None] * len(keys), list(range(len(keys)))
    bad = [i for i, good in enumerate(ok.to_pylist()) if not good]
    return as_text.to_pylist(), bad


def _be16(two_bytes: pa.BinaryArray) -> pa.Array:
    """Big-endian uint16 of 2-byte binaries, through a fixed-size view (pyarrow has no bytes-to-int
    kernel); anything not 2 bytes long reads as 0xFFFF, which no caller accepts."""
    fixed = pc.if_else(
        pc.equal(pc.binary_length(two_bytes), _TWO), two_bytes, pa.scalar(b"\xff\xff", pa.binary())
    ).cast(pa.binary(2))
    raw = np.frombuffer(fixed.buffers()[1], dtype=">u2", count=len(fixed), offset=fixed.offset * 2)
    return pa.array(raw.astype(np.int64))


def decode_kafka_rows(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: Kafka source rows (cluster, partition, offset, timestamp_ms, key, value)
    -> transitions. Values go through the codec's decode_value, keys vectorised (see module doc)."""
    cache: _PartitionsCache = {}
    for batch in batches:
        if batch.num_rows == 0:
            continue
        # (The Kafka source's cluster, partition, offset and timestamp are never null.)
        clusters = cast("list[str]", batch.column("cluster").to_pylist())
        partitions = cast("list[int]", batch.column("partition").to_pylist())
        offsets = cast("list[int]", batch.column("offset").to_pylist())
        timestamps = cast("list[int]", batch.column("timestamp_ms").to_pylist())
        values = batch.column("value").to_pylist()
        tids, bad = _tids(batch.column("key"))
        key_errors: dict[int, str] = {}
        if bad:
            keys = batch.column("key").to_pylist()
            for i in bad:
                key = keys[i]
                try:
                    tids[i] = decode_key(key) if key is not None else None
                    if tids[i] is None:
                        key_errors[i] = str(DecodeError("truncated", "null key"))
                except DecodeError as e:
                    key_errors[i] = str(e)
        # Group runs of (cluster, partition): one output batch per run keeps the constant columns cheap.
        start = 0
        n = len(offsets)
        while start < n:
            cluster, partition = clusters[start], partitions[start]
            end = start + 1
            while end < n and partitions[end] == partition and clusters[end] == cluster:
                end += 1
            records: list[TransactionLogRecord] = []
            errors: list[tuple[int | None, str]] = []
            for i in range(start, end):
                if i in key_errors:
                    errors.append((offsets[i], key_errors[i]))
                    continue
                raw = values[i]
                try:
                    records.append(
                        TransactionLogRecord(
                            offsets[i],
                            timestamps[i],
                            tids[i],  # type: ignore[arg-type]  # because a row without a key error has its id
                            None if raw is None else decode_value(raw),
                        )
                    )
                except DecodeError as e:
                    errors.append((offsets[i], str(e)))
            yield records_to_batch(cluster, partition, records, errors, cache)
            start = end
