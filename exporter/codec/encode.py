"""Encoding, the inverse of decoding: a key's and a value's bytes, used to build test vectors and
benchmark data."""

from __future__ import annotations

import struct

from exporter.codec.record import KEY_HEAD, KEY_VERSION
from exporter.codec.value import (
    ARRAY,
    PARTITIONS_SKIPPED,
    VALUE_FIELDS,
    VALUE_VERSIONS,
    TransactionLogValue,
    ValueField,
    value_fields,
)
from exporter.codec.varint import encode_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
# Bound once: Python 3.11 compiles `imported_name.method(...)` as an attribute load and a call, a
# bound method made per call.
_pack_key_head = KEY_HEAD.pack


def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode("utf-8")
    return _pack_key_head(KEY_VERSION, len(raw)) + raw


def encode_value(value: TransactionLogValue) -> bytes:
    """The value's bytes, by the table of its class (TransactionLogValue's, or one declared alike)."""
    if value.version not in VALUE_VERSIONS:
        raise ValueError(f"cannot encode value version {value.version}")
    flexible = value.version == 1
    table = _tables.get(type(value)) or _tables.setdefault(type(value), value_fields(type(value)))
    out = bytearray()
    for f in table:
        if f.tag is not None:
            continue
        if f.wire != ARRAY:
            out += struct.pack(">" + f.wire, getattr(value, f.name))
            continue
        partitions = getattr(value, f.name)
        if partitions is PARTITIONS_SKIPPED:  # (len() below raised this TypeError, less plainly)
            raise TypeError("cannot encode a value decoded without its partitions (PARTITIONS_SKIPPED)")
        if flexible:
            out += encode_uvarint(0 if partitions is None else len(partitions) + 1)
        else:
            out += _I32.pack(-1 if partitions is None else len(partitions))
        for topic, ids in (partitions or {}).items():
            raw = topic.encode("utf-8")
            if flexible:
                out += encode_uvarint(len(raw) + 1) + raw + encode_uvarint(len(ids) + 1)
            else:
                out += _I16.pack(len(raw)) + raw + _I32.pack(len(ids))
            out += struct.pack(f">{len(ids)}i", *ids)
            if flexible:
                out += b"\x00"  # no tagged fields in the partitions entry
    if flexible:
        # Written only when not default, in ascending tag order, as Kafka does.
        written = [
            (f.tag, struct.pack(">" + f.wire, getattr(value, f.name)))
            for f in table
            if f.tag is not None and getattr(value, f.name) != f.default
        ]
        written = sorted(written + list(value.unknown_tagged_fields), key=lambda t: t[0])
        out += encode_uvarint(len(written))
        for tag, raw in written:
            out += encode_uvarint(tag) + encode_uvarint(len(raw)) + raw
    return bytes(out)


# The table of each value class encode_value met (TransactionLogValue's, or a test's).
_tables: dict[type, tuple[ValueField, ...]] = {TransactionLogValue: VALUE_FIELDS}
