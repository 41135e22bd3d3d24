"""A v1 value's tagged fields: the general reader of the top-level ones, by the table
(TransactionLogValue's), and the bytes of the usual shapes, which decode_value's fast path and
PartitionsMemo's guess compare whole.

Tags the table does not name (a newer Kafka's: KAFKA-20357 persists the last producer epoch as a
further tagged field) are kept, as (tag, bytes) in tag order, in the value's `unknown_tagged_fields`,
and the value decodes without them, as the broker's reader does. Tagged fields inside a partitions
entry (no Kafka version defines any) are skipped (skip_tagged_fields).
"""

from __future__ import annotations

import struct
from typing import Any, Final

from exporter.codec.errors import DecodeError
from exporter.codec.value import TAGGED_FIELDS, VALUE_FIELDS, ValueField
from exporter.codec.varint import read_uvarint


class TaggedLayout:
    """What the general reader of the top-level tagged fields needs of a table: the defaults of the
    known ones in table order, and by tag, each one's index there and struct."""

    __slots__ = ("defaults", "known")

    def __init__(self, tagged_fields: tuple[ValueField, ...]) -> None:
        self.defaults = [f.default for f in tagged_fields]
        self.known = {f.tag: (i, struct.Struct(">" + f.wire)) for i, f in enumerate(tagged_fields)}


_TAGGED_LAYOUT = TaggedLayout(TAGGED_FIELDS)
_TAGS = {f.name: f.tag for f in TAGGED_FIELDS if f.tag is not None}
_TAGGED_DEFAULTS = {f.name: f.default for f in TAGGED_FIELDS}

# The fast path of decode_value is written for v1's layout as Kafka 4.x writes it: the fields of
# every version as below, and the first three tagged fields passed by position in this order. A
# change to the table that breaks either fails here, at import, not silently in a decoded field.
if "".join(f.wire for f in VALUE_FIELDS if f.tag is None) != "hqhib[]qq" or [f.name for f in TAGGED_FIELDS[:3]] != [
    "previous_producer_id",
    "next_producer_id",
    "client_transaction_version",
]:
    raise TypeError("TransactionLogValue's fixed fields or first tagged fields changed: see decode_value's fast path")

# The usual top-level tagged fields of a v1 value: tag count 1, the tag, its size.
ONLY_PREVIOUS_PRODUCER_ID = bytes((1, _TAGS["previous_producer_id"], 8))
ONLY_CLIENT_TRANSACTION_VERSION = bytes((1, _TAGS["client_transaction_version"], 2))
# Two tagged fields, PreviousProducerId then ClientTransactionVersion: the head of each (tag count,
# tag, size; tag, size).
PREVIOUS_THEN_CLIENT_VERSION_HEAD = bytes((2, _TAGS["previous_producer_id"], 8))
CLIENT_VERSION_HEAD = bytes((_TAGS["client_transaction_version"], 2))
# What the fast path passes for PreviousProducerId or NextProducerId when it reads the other fields.
PREVIOUS_PRODUCER_ID_DEFAULT: Final[int] = _TAGGED_DEFAULTS["previous_producer_id"]
NEXT_PRODUCER_ID_DEFAULT: Final[int] = _TAGGED_DEFAULTS["next_producer_id"]


def v1_tagged_fields(buf: bytes, pos: int) -> list[Any]:
    """The value's top-level tagged fields at `pos` (at least one): those the table names, in its
    order (their defaults when absent), then the unknown ones as a tuple of (tag, bytes)."""
    layout = _TAGGED_LAYOUT
    fields: list[Any] = layout.defaults.copy()
    known_tags = layout.known
    unknown: list[tuple[int, bytes]] | None = None
    tags, pos = read_uvarint(buf, pos)
    size = len(buf)
    for _ in range(tags):
        tag = buf[pos]
        length = buf[pos + 1]
        if tag < 0x80 and length < 0x80:  # one-byte tag and size: always, for the known tags
            pos += 2
        else:
            tag, pos = read_uvarint(buf, pos)
            length, pos = read_uvarint(buf, pos)
        end = pos + length
        if end > size:
            raise IndexError
        known = known_tags.get(tag)
        if known is not None:
            index, layout_of_tag = known
            if length != layout_of_tag.size:
                raise DecodeError("bad_length", f"tagged field {tag} of {length} bytes")
            fields[index] = layout_of_tag.unpack_from(buf, pos)[0]
        elif unknown is None:
            unknown = [(tag, bytes(buf[pos:end]))]
        else:
            unknown.append((tag, bytes(buf[pos:end])))
        pos = end
    fields.append(() if unknown is None else tuple(unknown))
    return fields


def skip_tagged_fields(buf: bytes, pos: int) -> int:
    """The position after the tagged fields at `pos` (a partitions entry's), each one's bounds checked."""
    tags, pos = read_uvarint(buf, pos)
    for _ in range(tags):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise IndexError
    return pos
