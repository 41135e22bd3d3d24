"""A value's TransactionPartitions array, the one costly field: the v1 array read into a dict,
either array walked with every length and bound checked but nothing built (partitions=False), or
the v1 array converted once per distinct array (PartitionsMemo).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Generic, TypeVar

from exporter.codec.errors import DecodeError
from exporter.codec.tagged_fields import (
    ONLY_CLIENT_TRANSACTION_VERSION,
    ONLY_PREVIOUS_PRODUCER_ID,
    PREVIOUS_THEN_CLIENT_VERSION_HEAD,
    skip_tagged_fields,
)
from exporter.codec.value import Partitions
from exporter.codec.varint import read_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# Partition-id arrays are short: one precompiled struct per length saves a format parse per entry.
_INT32_ARRAYS = [struct.Struct(f">{n}i") for n in range(64)]


def int32_array(n: int) -> struct.Struct:
    """A struct of n big-endian int32s (a partition-id array)."""
    return _INT32_ARRAYS[n] if n < 64 else struct.Struct(f">{n}i")


_M = TypeVar("_M")  # what a PartitionsMemo converts an array to


class PartitionsMemo(Generic[_M]):
    """A `partitions=` mode for a caller that makes something of each distinct partitions array
    rather than of each record's (txn-exporter decode: its JSON text). A v1 array reaches `make` as
    `convert(its dict)`, made once per distinct array while it stays in `known` (by the array's
    bytes; cleared when it holds `limit`). v0 arrays come as dicts.

    A known array is not walked again: where it would end is guessed from the shape of the tagged
    fields after it, and confirmed by finding the bytes up to there in `known`, which is enough: the
    bytes of a whole valid array end where the array does."""

    __slots__ = ("convert", "known", "limit")

    def __init__(self, convert: Callable[[Partitions | None], _M], limit: int) -> None:
        self.convert = convert
        self.known: dict[bytes, _M] = {}
        self.limit = limit


def v0_partitions_end(buf: bytes, count: int) -> int:
    """Where the v0 partitions array of `count` entries ends, every length and bound checked."""
    size = len(buf)
    pos = 21
    if count * 6 > size - pos:
        raise IndexError
    for _ in range(count):
        n = _I16.unpack_from(buf, pos)[0]
        if n < 0:
            raise DecodeError("bad_length", f"topic name length {n}")
        pos += 2 + n
        n = _I32.unpack_from(buf, pos)[0]
        if n < 0:
            raise DecodeError("bad_length", f"partition ids array length {n}")
        pos += 4 + 4 * n
        if pos > size:
            raise IndexError
    return pos


def memo_v1_partitions(buf: bytes, memo: PartitionsMemo[_M]) -> tuple[_M, int]:
    """For PartitionsMemo: what the v1 array is converted to, and where it ends."""
    size = len(buf)
    # Where the array ends if the value ends with one of the tagged-field shapes decode_value knows
    # (timestamps, then the tags); a wrong guess finds nothing in `known`.
    if buf[size - 11 : size - 8] == ONLY_PREVIOUS_PRODUCER_ID:
        pos = size - 27
    elif buf[size - 15 : size - 12] == PREVIOUS_THEN_CLIENT_VERSION_HEAD:
        pos = size - 31
    elif buf[size - 5 : size - 2] == ONLY_CLIENT_TRANSACTION_VERSION:
        pos = size - 21
    else:
        pos = size - 17  # no tagged fields
    known = memo.known
    if pos > 17:
        found = known.get(buf[17:pos], known)  # (`known` itself: never a value in it)
        if found is not known:
            return found, pos  # type: ignore[return-value]  # because not `known`, so one of its values
    topics, pos = v1_partitions(buf)
    if len(known) >= memo.limit:
        known.clear()
    found = known[buf[17:pos]] = memo.convert(topics)
    return found, pos


def v1_partitions(buf: bytes) -> tuple[Partitions | None, int]:
    """The v1 partitions array in general; returns it and the position after it."""
    size = len(buf)
    count = buf[17]
    if count < 0x80:  # lengths below 127 (one-byte varints) are the rule: read them inline
        pos = 18
    else:
        count, pos = read_uvarint(buf, 17)
    if count == 0:
        return None, pos
    count -= 1
    # Each entry takes at least 3 bytes (topic length, ids length, tag count).
    if count * 3 > size - pos:
        raise IndexError
    partitions: Partitions = {}
    for _ in range(count):
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:
            raise DecodeError("bad_length", "null topic name")
        end = pos + n - 1
        if end > size:
            raise IndexError
        topic = buf[pos:end].decode()
        n = buf[end]
        if n < 0x80:
            pos = end + 1
        else:
            n, pos = read_uvarint(buf, end)
        if n == 0:
            raise DecodeError("bad_length", "null partition ids array")
        end = pos + 4 * (n - 1)
        if end > size:
            raise IndexError
        partitions[topic] = list((_INT32_ARRAYS[n - 1] if n <= 64 else int32_array(n - 1)).unpack_from(buf, pos))
        # The usual case: no tagged fields in the entry.
        pos = end + 1 if buf[end] == 0 else skip_tagged_fields(buf, end)
    return partitions, pos


def v1_partitions_end(buf: bytes) -> int:
    """Where the v1 partitions array ends, every length and bound checked as v1_partitions does."""
    size = len(buf)
    count = buf[17]
    if count < 0x80:
        pos = 18
    else:
        count, pos = read_uvarint(buf, 17)
    if count == 0:
        return pos
    count -= 1
    if count * 3 > size - pos:
        raise IndexError
    for _ in range(count):
        n = buf[pos]  # lengths below 127 (one-byte varints) are the rule: read them inline
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:
            raise DecodeError("bad_length", "null topic name")
        pos += n - 1
        n = buf[pos]
        if n < 0x80:
            pos += 1
        else:
            n, pos = read_uvarint(buf, pos)
        if n == 0:
            raise DecodeError("bad_length", "null partition ids array")
        pos += 4 * (n - 1)
        if pos >= size:
            raise IndexError
        if buf[pos] == 0:
            pos += 1
        else:
            pos = skip_tagged_fields(buf, pos)
    return pos
