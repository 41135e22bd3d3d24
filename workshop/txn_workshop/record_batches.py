"""Record batches v2 as a broker writes them: test vectors, fixtures and benchmark data for the decoders (the exporter only reads them)."""

from __future__ import annotations

import struct

from crc32c import crc32c

from exporter.codec.record_batch import HEADER_SIZE, LOG_OVERHEAD
from exporter.codec.varint import encode_varint


def encode_batch(base_offset: int, records: list[tuple[bytes, bytes | None, int]]) -> bytes:
    """A CREATE_TIME, uncompressed, non-transactional v2 batch of (key, value, timestamp_ms)."""
    base_ts = records[0][2]
    max_ts = max(ts for _, _, ts in records)
    body = bytearray()
    for delta, (key, value, ts) in enumerate(records):
        record = bytearray(b"\x00")  # attributes
        record += encode_varint(ts - base_ts) + encode_varint(delta)
        record += encode_varint(len(key)) + key
        record += encode_varint(-1) if value is None else encode_varint(len(value)) + value
        record += encode_varint(0)  # no headers
        body += encode_varint(len(record)) + record
    after_crc = struct.pack(">hiqqqhii", 0, len(records) - 1, base_ts, max_ts, -1, -1, -1, len(records)) + body
    batch_length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    return struct.pack(">qi", base_offset, batch_length) + struct.pack(">ibI", 0, 2, crc32c(after_crc)) + after_crc
