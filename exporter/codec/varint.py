"""Kafka's varints: zigzag varints (and varlongs: Python ints do not overflow), as record batches v2 hold
them, and the unsigned ones of the flexible message versions (tagged fields, compact arrays)."""

from exporter.codec.errors import DecodeError

# A one-byte varint's value, by that byte.
ZIGZAG = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (also varlong: Python ints do not overflow)."""
    b = buf[pos]
    if b < 0x80:
        return ZIGZAG[b], pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + 1
        shift += 7
        if shift > 63:
            raise DecodeError("bad_length", "varint longer than 10 bytes")


def encode_varint(n: int) -> bytes:
    """A zigzag varint (the inverse of read_varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint (a compact length or a tag: 5 bytes at most)."""
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result = b & 0x7F
    shift = 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise DecodeError("bad_length", "unsigned varint longer than 5 bytes")


def encode_uvarint(n: int) -> bytes:
    """An unsigned varint (the inverse of read_uvarint)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
