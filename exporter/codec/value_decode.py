"""decode_value: a `__transaction_state` value's bytes to its fields (v0 and v1), as a
TransactionLogValue or whatever `make=` builds.

Layout (Kafka's TransactionLogValue.json; v0 is the classic encoding, v1 the flexible one):

    Version                           int16   0 or 1 (Kafka changes the layout only with a version)
    ProducerId                        int64
    ProducerEpoch                     int16
    TransactionTimeoutMs              int32
    TransactionStatus                 int8    a TransactionState
    TransactionPartitions             nullable array of {Topic string, PartitionIds [int32]}:
                                      v0: int32 count (-1: null), int16-length strings, int32 counts;
                                      v1: compact (unsigned varint of length + 1, 0: null), each
                                      entry ending with its tagged fields (see partitions.py)
    TransactionLastUpdateTimestampMs  int64
    TransactionStartTimestampMs       int64
    tagged fields (v1 only)           unsigned varint count, then tag, size and bytes of each
                                      (see tagged_fields.py)

Truncation surfaces as IndexError/struct.error and is turned into one typed error at the boundary.
A value version above 1 is a DecodeError of its own reason (unknown_value_version).

One fast path: the top-level tagged fields of the shapes coordinators write (none,
PreviousProducerId, ClientTransactionVersion, both) are compared whole and read in place (see
_decode_value_v1); any other goes to the general reader, v1_tagged_fields.

The coordinator model never reads TransactionPartitions, the one costly field (topic strings and id
lists). `partitions=False` walks the array with every length and bound checked but builds nothing,
and the value's `partitions` is PARTITIONS_SKIPPED. What that walk cannot see is invalid UTF-8
inside a topic name.

`make=` builds the value from its fields by position (in the table's order: see ValueMaker) in
place of value_from_fields, which makes a TransactionLogValue, as json's hooks do: `txn-exporter
decode` formats JSON straight from the parsed fields, with no object in between; with
`partitions=PartitionsMemo(...)`, it formats each distinct partitions array once instead of once
per record.
"""

from __future__ import annotations

import struct
from typing import Any, TypeVar, overload

from exporter.codec.errors import DecodeError
from exporter.codec.partitions import (
    PartitionsMemo,
    int32_array,
    memo_v1_partitions,
    v0_partitions_end,
    v1_partitions,
    v1_partitions_end,
)
from exporter.codec.states import TransactionState
from exporter.codec.tagged_fields import (
    CLIENT_VERSION_HEAD,
    NEXT_PRODUCER_ID_DEFAULT,
    ONLY_CLIENT_TRANSACTION_VERSION,
    ONLY_PREVIOUS_PRODUCER_ID,
    PREVIOUS_PRODUCER_ID_DEFAULT,
    PREVIOUS_THEN_CLIENT_VERSION_HEAD,
    v1_tagged_fields,
)
from exporter.codec.value import (
    PARTITIONS_SKIPPED,
    VALUE_VERSIONS,
    Partitions,
    PartitionsField,
    TransactionLogValue,
    ValueMaker,
    value_from_fields,
)

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
# The fields after the version and before TransactionPartitions, the same in v0 and v1.
_HEAD = struct.Struct(
    ">q"  # ProducerId
    "h"  # ProducerEpoch
    "i"  # TransactionTimeoutMs
    "b"  # TransactionStatus
)
_HEAD_END = 17  # where TransactionPartitions starts
# The fields after TransactionPartitions, the same in v0 and v1.
_TIMESTAMPS = struct.Struct(
    ">q"  # TransactionLastUpdateTimestampMs
    "q"  # TransactionStartTimestampMs
)
_VERSION_0, _VERSION_1 = (_I16.pack(v) for v in VALUE_VERSIONS)
# PreviousProducerId then ClientTransactionVersion, read at once from the tagged fields' start
# (PREVIOUS_THEN_CLIENT_VERSION_HEAD): the tag count, tag and size of each skipped.
_PREVIOUS_THEN_CLIENT_VERSION = struct.Struct(">3xq2xh")

_M = TypeVar("_M")  # what a PartitionsMemo converts an array to
_V = TypeVar("_V")  # what `make=` builds a value into

_STATES = {int(state): state for state in TransactionState}


@overload
def decode_value(buf: bytes, partitions: bool = True) -> TransactionLogValue: ...
@overload
def decode_value(buf: bytes, partitions: bool, make: ValueMaker[PartitionsField, _V]) -> _V: ...
@overload
def decode_value(buf: bytes, partitions: PartitionsMemo[_M], make: ValueMaker[Partitions | _M | None, _V]) -> _V: ...
def decode_value(
    buf: bytes, partitions: bool | PartitionsMemo[Any] = True, make: ValueMaker[Any, object] = value_from_fields
) -> object:
    """Decodes a non-null value; with partitions=False, see PARTITIONS_SKIPPED; for `make`, the
    module doc; for PartitionsMemo, its doc. Raises DecodeError."""
    version = buf[:2]
    try:
        if version == _VERSION_1:
            return _decode_value_v1(buf, partitions, make)
        if version == _VERSION_0:
            return _decode_value_v0(buf, partitions, make)
    except (IndexError, struct.error):
        raise DecodeError("truncated", f"value v{version[1]} of {len(buf)} bytes") from None
    except UnicodeDecodeError as e:
        raise DecodeError("invalid_utf8", f"topic name: {e}") from None
    if len(buf) < 2:
        raise DecodeError("truncated", f"value of {len(buf)} bytes")
    raise DecodeError("unknown_value_version", f"value version {_I16.unpack_from(buf, 0)[0]}")


def _state(status: int) -> TransactionState:
    state = _STATES.get(status)
    if state is None:
        raise DecodeError("unknown_state", f"transaction state id {status}")
    return state


def _decode_value_v1(buf: bytes, build_partitions: bool | PartitionsMemo[Any], make: ValueMaker[Any, _V]) -> _V:
    producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(buf, 2)
    state = _state(status)
    partitions: object  # (a PartitionsField, or what a PartitionsMemo made of the array)
    if not build_partitions:
        partitions, pos = PARTITIONS_SKIPPED, v1_partitions_end(buf)
    elif build_partitions is True:
        partitions, pos = v1_partitions(buf)
    else:
        partitions, pos = memo_v1_partitions(buf, build_partitions)
    last_update, start = _TIMESTAMPS.unpack_from(buf, pos)
    pos += _TIMESTAMPS.size
    # The fast path: the tagged fields' usual shapes, compared whole (count, tags, sizes) and read
    # in place. Kept: the live path takes 12.4% more instructions without it
    # (docs/benchmarks.md#throughput-decode--model--metrics).
    tags = buf[pos : pos + 3]
    if tags[0] == 0:  # none
        return make(1, producer_id, epoch, timeout_ms, state, partitions, last_update, start)
    if tags == ONLY_PREVIOUS_PRODUCER_ID:  # a 4.x coordinator, a client before TV2
        previous_id = _I64.unpack_from(buf, pos + 3)[0]
        return make(1, producer_id, epoch, timeout_ms, state, partitions, last_update, start, previous_id)
    if tags == PREVIOUS_THEN_CLIENT_VERSION_HEAD and buf[pos + 11 : pos + 13] == CLIENT_VERSION_HEAD:
        # A 4.3+ coordinator, a TV2 client: PreviousProducerId and ClientTransactionVersion.
        previous_id, client_version = _PREVIOUS_THEN_CLIENT_VERSION.unpack_from(buf, pos)
        return make(
            1,
            producer_id,
            epoch,
            timeout_ms,
            state,
            partitions,
            last_update,
            start,
            previous_id,
            NEXT_PRODUCER_ID_DEFAULT,
            client_version,
        )
    if tags == ONLY_CLIENT_TRANSACTION_VERSION:  # a 4.0-4.2 coordinator, a TV2 client
        client_version = _I16.unpack_from(buf, pos + 3)[0]
        return make(
            1,
            producer_id,
            epoch,
            timeout_ms,
            state,
            partitions,
            last_update,
            start,
            PREVIOUS_PRODUCER_ID_DEFAULT,
            NEXT_PRODUCER_ID_DEFAULT,
            client_version,
        )
    # Any other: every tagged field the table names, then the unknown ones.
    tagged = v1_tagged_fields(buf, pos)
    return make(1, producer_id, epoch, timeout_ms, state, partitions, last_update, start, *tagged)


def _decode_value_v0(buf: bytes, build_partitions: bool | PartitionsMemo[Any], make: ValueMaker[Any, _V]) -> _V:
    # (PartitionsMemo gets dicts here: v0 values are from brokers before 4.0.)
    producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(buf, 2)
    count = _I32.unpack_from(buf, _HEAD_END)[0]
    state = _state(status)
    pos = _HEAD_END + 4
    partitions: PartitionsField
    if count == -1:
        partitions = None if build_partitions else PARTITIONS_SKIPPED
    elif count < 0:
        raise DecodeError("bad_length", f"partitions array length {count}")
    elif not build_partitions:
        pos = v0_partitions_end(buf, count)
        partitions = PARTITIONS_SKIPPED
    else:
        size = len(buf)
        # Each entry takes at least 6 bytes: refuse absurd counts before looping on them.
        if count * 6 > size - pos:
            raise IndexError
        partitions = {}
        for _ in range(count):
            n = _I16.unpack_from(buf, pos)[0]  # Topic: int16 length, UTF-8 bytes
            if n < 0:
                raise DecodeError("bad_length", f"topic name length {n}")
            pos += 2
            end = pos + n
            if end > size:
                raise IndexError
            topic = buf[pos:end].decode()
            n = _I32.unpack_from(buf, end)[0]  # PartitionIds: int32 count, int32 each
            pos = end + 4
            if n < 0:
                raise DecodeError("bad_length", f"partition ids array length {n}")
            end = pos + 4 * n
            if end > size:
                raise IndexError
            partitions[topic] = list(int32_array(n).unpack_from(buf, pos))
            pos = end
    last_update, start = _TIMESTAMPS.unpack_from(buf, pos)
    return make(0, producer_id, epoch, timeout_ms, state, partitions, last_update, start)
