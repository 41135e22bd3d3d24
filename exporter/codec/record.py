"""A `__transaction_state` record: its key (TransactionLogKey v0: int16 version 0, string
TransactionalId, as Kafka 3.6 to 4.x write it) decoded here, its value by decode_value, as a
TransactionLogRecord."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from exporter.codec.errors import DecodeError
from exporter.codec.value import TransactionLogValue
from exporter.codec.value_decode import decode_value

KEY_HEAD = struct.Struct(">hh")
KEY_VERSION = 0
# A v0 key's first four bytes (version 0, id length n), by n.
KEY_V0_HEADS = [KEY_HEAD.pack(KEY_VERSION, n) for n in range(256)]


@dataclass(slots=True)
class TransactionLogRecord:
    offset: int
    timestamp_ms: int
    transactional_id: str
    value: TransactionLogValue | None  # None: a tombstone (the transactional id expired)
    # The value's bytes, as decode_record got them: the model keeps them for in-flight transactions,
    # whose partitions the transactions view decodes when it shows them (see PARTITIONS_SKIPPED).
    raw_value: bytes | None = field(default=None, compare=False, repr=False)


def decode_record(
    key: bytes, value: bytes | None, offset: int, timestamp_ms: int, partitions: bool = True
) -> TransactionLogRecord:
    """Decodes one record's key and value (None for a tombstone). Raises DecodeError."""
    # A v0 key of at most 259 bytes is compared to its expected header instead of being unpacked.
    n = len(key) - 4
    if 0 <= n < 256 and key[:4] == KEY_V0_HEADS[n]:
        try:
            tid = key[4:].decode()
        except UnicodeDecodeError as e:
            raise DecodeError("invalid_utf8", str(e)) from None
    else:
        tid = decode_key(key)
    return TransactionLogRecord(
        offset, timestamp_ms, tid, None if value is None else decode_value(value, partitions), value
    )


def decode_key(buf: bytes) -> str:
    """Returns the transactional id. Raises DecodeError."""
    try:
        version, length = KEY_HEAD.unpack_from(buf, 0)
    except struct.error:
        raise DecodeError("truncated", f"key of {len(buf)} bytes") from None
    if version != KEY_VERSION:
        # The broker skips keys of other versions when it loads the log; so do we, but visibly.
        raise DecodeError("unknown_key_version", f"key version {version}")
    if length < 0:
        raise DecodeError("bad_length", f"transactional id length {length}")
    if 4 + length > len(buf):
        raise DecodeError("truncated", f"transactional id of {length} bytes in a {len(buf)}-byte key")
    return _utf8(buf[4 : 4 + length])


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError("invalid_utf8", str(e)) from None
