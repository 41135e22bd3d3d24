"""decode_value: a `__transaction_state` value's bytes to its fields (v0 and v1), as a
TransactionLogValue or whatever `make=` builds.

Decoding is on the exporter's hot path, so it works on offsets into the buffer with precompiled
structs instead of a generic reader object; truncation surfaces as IndexError/struct.error and is
turned into one typed error at the boundary. A value version above 1 is a DecodeError of its own
reason (unknown_value_version): Kafka changes the layout only with a version.

The coordinator model never reads TransactionPartitions, the one costly field (topic strings and id
lists: ~2 us of ~3 for a value naming 2 topics x 3 partitions). `partitions=False` walks the array
with every length and bound checked but builds nothing, and the value's `partitions` is
PARTITIONS_SKIPPED. What that walk cannot see is invalid UTF-8 inside a topic name.

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
# version, producer id, epoch, timeout, status: the same 17 bytes in v0 and v1 ...
_VALUE_HEAD_V0 = struct.Struct(">hqhibi")  # ... plus the v0 partitions array length
_TIMESTAMPS = struct.Struct(">qq")
_VERSION_0, _VERSION_1 = (_I16.pack(v) for v in VALUE_VERSIONS)

_M = TypeVar("_M")  # what a PartitionsMemo converts an array to
_V = TypeVar("_V")  # what `make=` builds a value into

_STATES = {int(state): state for state in TransactionState}
# By the TransactionStatus byte read unsigned (an int8 below 0 reads as 128 to 255): None if unknown.
_STATES_BY_BYTE = tuple(_STATES.get(b) for b in range(256))
# v1 fast paths, from the start of the value (version and TransactionStatus skipped, checked apart):
# producer id, epoch, timeout, (empty partitions array), both timestamps.
_V1_NO_PARTITIONS = struct.Struct(">2xqhi2xqq")
# producer id, epoch, timeout and both timestamps around a partitions array ending at a given
# position: one struct per position, made on first use and kept for the usual sizes.
_V1_AROUND_PARTITIONS: dict[int, struct.Struct] = {}
_V1_AROUND_CACHED_BELOW = 4096


def _v1_around_partitions(end: int) -> struct.Struct:
    around = struct.Struct(f">2xqhi{end - 16}xqq")
    if end < _V1_AROUND_CACHED_BELOW:
        _V1_AROUND_PARTITIONS[end] = around
    return around


# producer id, epoch, timeout, one topic's name (of n bytes, the index) and its one partition id,
# both timestamps; the one-byte lengths and tag count in between are checked apart.
_V1_ONE_TOPIC = [struct.Struct(f">2xqhi3x{n}sxixqq") for n in range(127)]
# The same two, then the 3 bytes of the tagged-field header (checked apart) and PreviousProducerId.
_V1_NO_PARTITIONS_PREVIOUS_ID = struct.Struct(">2xqhi2xqq3xq")
_V1_ONE_TOPIC_PREVIOUS_ID = [struct.Struct(f">2xqhi3x{n}sxixqq3xq") for n in range(127)]
# v0: topic name, partition ids count, one partition id, both timestamps: by topic-name length.
_V0_ONE_TOPIC = [struct.Struct(f">{n}siiqq") for n in range(256)]
# PreviousProducerId then ClientTransactionVersion, both read at once from the head of the first
# (PREVIOUS_THEN_CLIENT_VERSION_HEAD). The structs the fast paths call are made here, not imported:
# Python 3.11 compiles `imported_name.method(...)` as an attribute load and a call, a bound method
# made per call, where a name of the module's own gets a method call.
_PREVIOUS_THEN_CLIENT_VERSION = struct.Struct(">3xq2xh")


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
    module doc; for PartitionsMemo, its doc. Raises DecodeError.

    Value v1, which every 4.x coordinator writes, is decoded inline: a call less per record."""
    version = buf[:2]  # compared as bytes: cheaper than unpacking on every record
    try:
        if version == _VERSION_1:
            state = _STATES_BY_BYTE[buf[16]]  # TransactionStatus, checked before anything else is read
            if state is None:
                raise DecodeError("unknown_state", f"transaction state id {struct.unpack_from('>b', buf, 16)[0]}")
            # Two fast paths for the shapes brokers write, one struct each; else the general reader.
            count = buf[17]
            n = buf[18] - 1
            # Both also read PreviousProducerId when it is the only tagged field (pre-TV2 clients:
            # librdkafka, Java before 4.0) and ends the value.
            if count < 2:  # an empty partitions array (Complete* records) or a null one (Empty records)
                if len(buf) == 45 and buf[34:37] == ONLY_PREVIOUS_PRODUCER_ID:
                    producer_id, epoch, timeout_ms, last_update, start, previous_id = (
                        _V1_NO_PARTITIONS_PREVIOUS_ID.unpack_from(buf, 0)
                    )
                    return make(
                        1,
                        producer_id,
                        epoch,
                        timeout_ms,
                        state,
                        ({} if count else None) if partitions else PARTITIONS_SKIPPED,
                        last_update,
                        start,
                        previous_id,
                    )
                producer_id, epoch, timeout_ms, last_update, start = _V1_NO_PARTITIONS.unpack_from(buf, 0)
                # (A PartitionsField, or what a PartitionsMemo made of the array.)
                topics: object = ({} if count else None) if partitions else PARTITIONS_SKIPPED
                pos = 34
            elif count == 2 and 0 < n < 0x7F and len(buf) >= 42 + n and buf[19 + n] == 2 and buf[24 + n] == 0:
                # One topic with one partition and no tagged fields in its entry: Ongoing and Prepare*.
                if len(buf) == 52 + n and buf[41 + n : 44 + n] == ONLY_PREVIOUS_PRODUCER_ID:
                    producer_id, epoch, timeout_ms, topic, first, last_update, start, previous_id = (
                        _V1_ONE_TOPIC_PREVIOUS_ID[n].unpack_from(buf, 0)
                    )
                    return make(
                        1,
                        producer_id,
                        epoch,
                        timeout_ms,
                        state,
                        {topic.decode(): [first]} if partitions else PARTITIONS_SKIPPED,
                        last_update,
                        start,
                        previous_id,
                    )
                producer_id, epoch, timeout_ms, topic, first, last_update, start = _V1_ONE_TOPIC[n].unpack_from(buf, 0)
                topics = {topic.decode(): [first]} if partitions else PARTITIONS_SKIPPED
                pos = 41 + n
            else:
                if not partitions:
                    topics, pos = PARTITIONS_SKIPPED, v1_partitions_end(buf)
                elif partitions is True:
                    topics, pos = v1_partitions(buf)
                else:
                    topics, pos = memo_v1_partitions(buf, partitions)
                around = _V1_AROUND_PARTITIONS.get(pos) or _v1_around_partitions(pos)
                producer_id, epoch, timeout_ms, last_update, start = around.unpack_from(buf, 0)
                pos += 16
            # Top-level tagged fields: the usual cases first.
            tags = buf[pos : pos + 3]
            if tags[0] == 0:
                return make(1, producer_id, epoch, timeout_ms, state, topics, last_update, start)
            if tags == ONLY_PREVIOUS_PRODUCER_ID:  # a 4.x coordinator, a client before TV2
                previous_id = _I64.unpack_from(buf, pos + 3)[0]
                return make(1, producer_id, epoch, timeout_ms, state, topics, last_update, start, previous_id)
            if tags == PREVIOUS_THEN_CLIENT_VERSION_HEAD and buf[pos + 11 : pos + 13] == CLIENT_VERSION_HEAD:
                # A 4.3+ coordinator, a TV2 client: PreviousProducerId and ClientTransactionVersion.
                previous_id, client_version = _PREVIOUS_THEN_CLIENT_VERSION.unpack_from(buf, pos)
                return make(
                    1,
                    producer_id,
                    epoch,
                    timeout_ms,
                    state,
                    topics,
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
                    topics,
                    last_update,
                    start,
                    PREVIOUS_PRODUCER_ID_DEFAULT,
                    NEXT_PRODUCER_ID_DEFAULT,
                    client_version,
                )
            # (The general path: every tagged field the table names, then the unknown ones, passed.)
            return make(
                1, producer_id, epoch, timeout_ms, state, topics, last_update, start, *v1_tagged_fields(buf, pos)
            )
        if version == _VERSION_0:
            return _decode_value_v0(buf, partitions, make)
    except (IndexError, struct.error):
        raise DecodeError("truncated", f"value v{version[1]} of {len(buf)} bytes") from None
    except UnicodeDecodeError as e:
        raise DecodeError("invalid_utf8", f"topic name: {e}") from None
    if len(buf) < 2:
        raise DecodeError("truncated", f"value of {len(buf)} bytes")
    raise DecodeError("unknown_value_version", f"value version {_I16.unpack_from(buf, 0)[0]}")


def _decode_value_v0(buf: bytes, build_partitions: bool | PartitionsMemo[Any], make: ValueMaker[Any, _V]) -> _V:
    # (PartitionsMemo gets dicts here: v0 values are from brokers before 4.0, and rare.)
    _, producer_id, epoch, timeout_ms, status, count = _VALUE_HEAD_V0.unpack_from(buf, 0)
    state = _STATES.get(status)
    if state is None:
        raise DecodeError("unknown_state", f"transaction state id {status}")
    pos = 21
    if count == 1:
        # The common shape (one topic): one struct per topic-name length reads the rest at once.
        n = _I16.unpack_from(buf, 21)[0]
        if 0 <= n < 256 and len(buf) >= 47 + n:
            topic, ids, first, last_update, start = _V0_ONE_TOPIC[n].unpack_from(buf, 23)
            if ids == 1:
                return make(
                    0,
                    producer_id,
                    epoch,
                    timeout_ms,
                    state,
                    {topic.decode(): [first]} if build_partitions else PARTITIONS_SKIPPED,
                    last_update,
                    start,
                )
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
            n = _I16.unpack_from(buf, pos)[0]
            if n < 0:
                raise DecodeError("bad_length", f"topic name length {n}")
            pos += 2
            end = pos + n
            if end > size:
                raise IndexError
            topic = buf[pos:end].decode()
            n = _I32.unpack_from(buf, end)[0]
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
