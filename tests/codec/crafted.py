"""Crafted segments: bytes made to cost a decoder the most, for tests that bound its work."""

import struct

from exporter.codec import encode_key
from exporter.codec.record_batch import HEADER_SIZE, LOG_OVERHEAD
from txn_workshop.record_batches import encode_batch


def fake_headers(size: int) -> bytes:
    """`size` bytes of batch headers back to back, each passing every check but its CRC and
    declaring a batch that runs to the end of the input: each candidate a resynchronisation
    looks at claims the rest of the file."""
    out = bytearray()
    while len(out) + HEADER_SIZE <= size:
        length = size - len(out) - LOG_OVERHEAD
        # baseOffset, batchLength, leader epoch, magic 2, a wrong CRC, attributes 0, lastOffsetDelta 0,
        # timestamps, producer id/epoch, base sequence, record count 0.
        out += struct.pack(">qiibIhiqqqhii", 0, length, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 0)
    return bytes(out + bytes(size - len(out)))


def good_then_bad(size: int) -> bytes:
    """A valid one-record batch, then a header claiming the rest of the input, again and again:
    every bad header is met by the main loop right after a batch that decoded."""
    good = encode_batch(0, [(encode_key("a"), None, 5)])
    out = bytearray()
    while len(out) + len(good) + HEADER_SIZE <= size:
        out += good
        out += struct.pack(">qiibIhiqqqhii", 0, size - len(out) - LOG_OVERHEAD, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 0)
    return bytes(out + bytes(size - len(out)))
