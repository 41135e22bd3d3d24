"""Record batches (magic v2) of a `__transaction_state` log, decoded to transaction-log records.

The layout (Kafka's DefaultRecordBatch and DefaultRecord) is in the comments of _HEADER and
_decode_record.

A batch that fails its checks (length, magic, CRC, compression) is reported with its byte position
and skipped. Unless its CRC verified, its length cannot be trusted either, so decoding resumes at the
next position holding a batch whose CRC verifies: one bad batch never costs the rest of the file.

That search stays linear in the input whatever its bytes. A candidate position must first pass the
header checks every real batch passes (magic 2, a length within the input, known attribute bits,
a record count its length can hold) before its CRC is taken, and the bytes of CRCs that fail are
capped per input (RESYNC_CRC_FACTOR x its size, plus RESYNC_CRC_SLACK): bytes crafted so that every
position looks like a batch spanning the rest of the input would otherwise cost a CRC of the rest
at every position. Past the cap the rest of the input is reported as one error and skipped.

An input too large to hold (a segment file) is decoded in pieces (`decode_pieces`): each piece is a
`Window` on the input, decoded by `decode_batches` up to the first batch it does not hold whole,
which the next piece starts with. What the pieces decode is what the whole input decodes, errors and
resynchronisation included (a property test holds them to it, pieces of any size): a batch or a
resynchronisation candidate longer than a piece has its CRC taken through the reader, in pieces, and
is read whole only once that CRC verifies (a real batch), so a corrupt length costs no memory.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, final, overload

from crc32c import crc32c

from exporter.codec.errors import DecodeError
from exporter.codec.partitions import PartitionsMemo
from exporter.codec.record import KEY_V0_HEADS, TransactionLogRecord, decode_key
from exporter.codec.value import Partitions, PartitionsField, ValueMaker, value_from_fields
from exporter.codec.value_decode import decode_value
from exporter.codec.varint import encode_varint, read_varint

# A record batch's header (magic v2), then its records.
_HEADER = struct.Struct(
    ">q"  # baseOffset => int64: the first record's offset
    "i"  # batchLength => int32: the bytes after this field
    "i"  # partitionLeaderEpoch => int32
    "b"  # magic => int8: 2
    "I"  # crc => uint32: CRC32C of the bytes from attributes to the batch's end
    "h"  # attributes => int16: compression (bits 0-2), LOG_APPEND_TIME (3), control batch (5)
    "i"  # lastOffsetDelta => int32
    "q"  # baseTimestamp => int64
    "q"  # maxTimestamp => int64: the records' timestamp under LOG_APPEND_TIME
    "q"  # producerId => int64
    "h"  # producerEpoch => int16
    "i"  # baseSequence => int32
    "i"  # recordCount => int32
)
LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE = 61
_CRC_START = 21  # first byte covered by the CRC: attributes
_MAGIC_POSITION = 16

_COMPRESSION_MASK = 0x07
_LOG_APPEND_TIME = 0x08
_CONTROL = 0x20


@final  # (so that `type(item) is BatchError` tells it from a RecordError, for the type checker too)
@dataclass(slots=True)
class BatchError:
    """A batch that could not be decoded; `position` is its byte offset in the input."""

    position: int
    error: DecodeError


@final
@dataclass(slots=True)
class RecordError:
    """A record (at log offset `offset`) inside a valid batch that could not be decoded."""

    offset: int
    error: DecodeError


Decoded = TransactionLogRecord | RecordError | BatchError

_M = TypeVar("_M")  # what a PartitionsMemo converts an array to
_V = TypeVar("_V")  # what make_value builds
_R = TypeVar("_R")  # what make_record builds
# make_record: builds a record from (offset, timestamp_ms, transactional_id, value or None).
RecordMaker = Callable[[int, int, str, _V | None], _R]


@dataclass(slots=True)
class Window:
    """Where a buffer lies in an input too large to hold (see decode_pieces), and where decoding goes
    on: decode_batches sets `resume` (an input position), `resyncing` (looking for a batch that
    verifies, from `resume` on) and `need` (bytes the next buffer must hold from `resume`; 0: a
    piece's worth) when it stops before the buffer's end."""

    base: int  # input position of the buffer's first byte
    total: int  # the input's size
    capacity: int  # the most bytes a piece holds: a longer batch's CRC is taken by crc_of first
    crc_of: Callable[[int, int], int]  # CRC32C of input[start:stop], read in pieces
    budget: list[int]  # CRC bytes resynchronisation may still spend, for the whole input
    resume: int = 0
    resyncing: bool = False
    need: int = 0


@overload
def decode_batches(
    buf: bytes, partitions: bool = True, *, window: Window | None = None
) -> Generator[Decoded, None, None]: ...
@overload
def decode_batches(
    buf: bytes,
    partitions: bool,
    make_record: RecordMaker[_V, _R],
    make_value: ValueMaker[PartitionsField, _V],
    window: Window | None = None,
) -> Generator[_R | RecordError | BatchError, None, None]: ...
@overload
def decode_batches(
    buf: bytes,
    partitions: PartitionsMemo[_M],
    make_record: RecordMaker[_V, _R],
    make_value: ValueMaker[Partitions | _M | None, _V],
    window: Window | None = None,
) -> Generator[_R | RecordError | BatchError, None, None]: ...
def decode_batches(
    buf: bytes,
    partitions: bool | PartitionsMemo[Any] = True,
    make_record: RecordMaker[Any, object] = TransactionLogRecord,
    make_value: ValueMaker[Any, object] = value_from_fields,
    window: Window | None = None,
) -> Generator[object, None, None]:
    """Yields every record of every batch in `buf`, in order, with errors in their place.
    `partitions` and `make_value` are decode_value's `partitions` and `make`; `make_record` builds
    each record from (offset, timestamp_ms, transactional_id, value) in place of TransactionLogRecord.
    With `window`, `buf` is a piece of a larger input (see Window; positions in errors are the
    input's) and decoding stops before a batch the piece does not hold whole."""
    end = len(buf)
    if window is None:
        window = Window(0, end, end, _no_reader, [RESYNC_CRC_FACTOR * end + RESYNC_CRC_SLACK])
    base = window.base
    input_end = window.total - base  # where the input ends, from the buffer's start (end: its last piece)
    budget = window.budget
    pos = window.resume - base
    window.need = 0
    if window.resyncing:  # the previous piece ended inside a resynchronisation: it goes on here
        window.resyncing = False
        pos = yield from _resync(buf, pos, window)
        if window.resyncing:
            return
    while pos < end:
        if end - pos < HEADER_SIZE:
            if input_end > end:  # the header is in the next piece
                break
            yield BatchError(base + pos, DecodeError("truncated", f"{end - pos} bytes left, less than a batch header"))
            return
        (
            base_offset,
            batch_length,
            _leader_epoch,
            magic,
            crc,
            attributes,
            _last_offset_delta,
            base_ts,
            max_ts,
            _producer_id,
            _producer_epoch,
            _base_sequence,
            count,
        ) = _HEADER.unpack_from(buf, pos)
        size = LOG_OVERHEAD + batch_length
        if batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + size > end:
            if batch_length >= HEADER_SIZE - LOG_OVERHEAD and pos + size <= input_end:
                # Whole in the input, not in this piece: the next piece starts with it. One longer
                # than a piece is read whole only if its CRC verifies (its length may be garbage).
                if size <= window.capacity:
                    break
                if magic == 2 and window.crc_of(base + pos + _CRC_START, base + pos + size) == crc:
                    window.need = size
                    break
                reason = "crc_mismatch" if magic == 2 else "unsupported_batch"
                yield BatchError(base + pos, DecodeError(reason, f"magic {magic}, batch at offset {base_offset}"))
                if magic == 2:
                    budget[0] -= size - _CRC_START
            else:
                reason = "truncated" if batch_length >= HEADER_SIZE - LOG_OVERHEAD else "bad_length"
                yield BatchError(
                    base + pos, DecodeError(reason, f"batch length {batch_length} at offset {base_offset}")
                )
            pos = yield from _resync(buf, pos + 1, window)
            if window.resyncing:
                return
            continue
        next_pos = pos + size
        if magic != 2 or _crc(buf, pos + _CRC_START, next_pos) != crc:
            reason = "crc_mismatch" if magic == 2 else "unsupported_batch"
            yield BatchError(base + pos, DecodeError(reason, f"magic {magic}, batch at offset {base_offset}"))
            if magic == 2:  # a failed CRC: the budget pays for it (it may overdraw it, once)
                budget[0] -= size - _CRC_START
            # Its length is as unverified as the rest of it: look for the next batch that verifies.
            pos = yield from _resync(buf, pos + 1, window)
            if window.resyncing:
                return
            continue
        if attributes & _COMPRESSION_MASK:
            # The coordinator always writes uncompressed batches to this topic.
            yield BatchError(
                base + pos,
                DecodeError(
                    "unsupported_batch", f"compression {attributes & _COMPRESSION_MASK} at offset {base_offset}"
                ),
            )
        elif not attributes & _CONTROL:  # control batches carry no transaction-log records
            log_append_ts = max_ts if attributes & _LOG_APPEND_TIME else None
            p = pos + HEADER_SIZE
            if count == 1:  # every batch a coordinator writes to this topic: see _decode_single_record
                item = _decode_single_record(
                    buf,
                    p,
                    next_pos,
                    base_offset,
                    base_ts if log_append_ts is None else log_append_ts,
                    partitions,
                    make_record,
                    make_value,
                )
                yield (
                    item
                    if item is not None
                    else _decode_record(
                        buf, p, next_pos, base_offset, 0, base_ts, log_append_ts, partitions, make_record, make_value
                    )[0]
                )
                pos = next_pos
                continue
            for index in range(count):
                item, p = _decode_record(
                    buf, p, next_pos, base_offset, index, base_ts, log_append_ts, partitions, make_record, make_value
                )
                yield item
                if p < 0:
                    break  # the record's own length was bad: the rest of the batch cannot be located
        pos = next_pos
    window.resume = base + pos


class PieceReader(Protocol):
    """An input read in pieces (a segment file): opened by `with`, `size` bytes long then."""

    size: int

    def __enter__(self) -> PieceReader: ...

    def __exit__(self, *exc: object) -> None: ...

    def read(self, position: int, n: int) -> bytes:
        """Exactly `n` bytes from `position` (an input that shrank meanwhile: the reader raises)."""
        ...


PIECE_SIZE = 1 << 20


@overload
def decode_pieces(
    reader: PieceReader, partitions: bool = True, *, piece_size: int = PIECE_SIZE
) -> Generator[Decoded, None, None]: ...
@overload
def decode_pieces(
    reader: PieceReader,
    partitions: bool,
    make_record: RecordMaker[_V, _R],
    make_value: ValueMaker[PartitionsField, _V],
    piece_size: int = PIECE_SIZE,
) -> Generator[_R | RecordError | BatchError, None, None]: ...
@overload
def decode_pieces(
    reader: PieceReader,
    partitions: PartitionsMemo[_M],
    make_record: RecordMaker[_V, _R],
    make_value: ValueMaker[Partitions | _M | None, _V],
    piece_size: int = PIECE_SIZE,
) -> Generator[_R | RecordError | BatchError, None, None]: ...
def decode_pieces(
    reader: PieceReader,
    partitions: bool | PartitionsMemo[Any] = True,
    make_record: RecordMaker[Any, object] = TransactionLogRecord,
    make_value: ValueMaker[Any, object] = value_from_fields,
    piece_size: int = PIECE_SIZE,
) -> Generator[object, None, None]:
    """decode_batches over the input of `reader`, read `piece_size` bytes at a time (more only for a
    batch that long whose CRC verified): what decode_batches gives for the whole input, in flat
    memory. The reader is opened at the first item and closed at the end."""
    if piece_size < 2 * HEADER_SIZE:
        raise ValueError(f"piece size {piece_size} under {2 * HEADER_SIZE} bytes")
    with reader:
        total = reader.size
        window = Window(
            0, total, piece_size, _crc_reader(reader, piece_size), [RESYNC_CRC_FACTOR * total + RESYNC_CRC_SLACK]
        )
        buf = reader.read(0, min(piece_size, total))
        while True:
            yield from decode_batches(buf, partitions, make_record, make_value, window)
            held = window.base + len(buf)
            if held >= total or window.resume >= total:
                return
            # The next piece: what this one did not decode, then as much again from the input.
            keep = buf[window.resume - window.base :]
            window.base = window.resume
            want = min(total, window.base + max(piece_size, window.need)) - held
            buf = keep + reader.read(held, want) if want > 0 else keep


def _crc_reader(reader: PieceReader, piece_size: int) -> Callable[[int, int], int]:
    def crc_of(start: int, stop: int) -> int:
        value = 0
        for position in range(start, stop, piece_size):
            value = crc32c(reader.read(position, min(piece_size, stop - position)), value)
        return value

    return crc_of


def _no_reader(start: int, stop: int) -> int:
    raise AssertionError("a whole input has nothing past its end")


def _decode_single_record(
    buf: bytes,
    p: int,
    end: int,
    offset: int,
    timestamp_ms: int,
    partitions: bool | PartitionsMemo[Any] = True,
    make_record: RecordMaker[Any, object] = TransactionLogRecord,
    make_value: ValueMaker[Any, object] = value_from_fields,
) -> object | None:
    """The one record of a batch, when it has the shape a coordinator writes; else None, and
    _decode_record reads it (and finds what is wrong with it, if anything).

    That shape: attributes, timestamp delta and offset delta all 0, a v0 key under 64 bytes, a value
    of at least one byte, no headers.
    The record then fills the batch exactly, so both of its length varints are implied by where the
    batch ends: each is compared, with the zero bytes after it, as one slice against a table instead
    of being decoded byte by byte.

    Kept: decode takes 16% more CPU time without it, below 2x DumpLogSegments'
    (docs/benchmarks.md#decode-txn-exporter-decode-against-dumplogsegments)."""
    size = end - p
    head = _RECORD_HEADS[size] if size < _IMPLIED else None
    if head is None:
        return None
    q = p + len(head)
    if buf[p:q] != head:
        return None
    # The key's length byte and its v0 header (version 0, the id's length) as one slice.
    k = buf[q]
    key_head = _KEY_HEADS[k]
    if key_head is None or buf[q : q + 5] != key_head:
        return None
    key_end = q + 1 + (k >> 1)
    size = end - key_end
    value_head = _VALUE_HEADS[size] if 0 < size < _IMPLIED else None
    if value_head is None or buf[end - 1]:
        return None  # a null or empty value, or headers
    value_start = key_end + len(value_head)
    if buf[key_end:value_start] != value_head:
        return None
    try:
        tid = buf[q + 5 : key_end].decode()
    except UnicodeDecodeError:
        return None
    try:
        return make_record(offset, timestamp_ms, tid, decode_value(buf[value_start : end - 1], partitions, make_value))
    except DecodeError as e:
        return RecordError(offset, e)


def _decode_record(
    buf: bytes,
    p: int,
    end: int,
    base_offset: int,
    index: int,
    base_ts: int,
    log_append_ts: int | None,
    partitions: bool | PartitionsMemo[Any] = True,
    make_record: RecordMaker[Any, object] = TransactionLogRecord,
    make_value: ValueMaker[Any, object] = value_from_fields,
) -> tuple[object, int]:
    """One record at `p`; returns it (or its error) and where the next one starts (-1: unknown).

    A record (magic v2):
        length => varint: the bytes after this field
        attributes => int8: unused
        timestampDelta => varlong: from the batch's baseTimestamp
        offsetDelta => varint: from the batch's baseOffset
        keyLength => varint
        key => bytes: TransactionLogKey (record.py)
        valueLength => varint: -1 for a null value (a tombstone)
        value => bytes: TransactionLogValue (value_decode.py)
        headerCount => varint, then the headers: none on this topic, not read"""
    offset = base_offset + index
    try:
        length, p = read_varint(buf, p)
        record_end = p + length
        if length < 0 or record_end > end:
            return RecordError(offset, DecodeError("bad_length", f"record length {length}")), -1
        ts_delta, p = read_varint(buf, p + 1)  # (after attributes)
        offset_delta, p = read_varint(buf, p)
        offset = base_offset + offset_delta
        key_length, p = read_varint(buf, p)
        key_start = p
        p += key_length
        value_length, p = read_varint(buf, p)
        if key_length < 0 or (p + value_length if value_length > 0 else p) > record_end:
            return RecordError(offset, DecodeError("bad_length", f"key or value overruns a {length}-byte record")), -1
    except IndexError:
        return RecordError(offset, DecodeError("truncated", "record runs past its batch")), -1
    except DecodeError as e:
        return RecordError(offset, e), -1
    try:
        # A v0 key whose id fills the rest of it (as coordinators write them) is read here, its invalid
        # UTF-8 reported as the transactional id's; any other key goes to decode_key.
        n = key_length - 4
        if 0 <= n < 256 and buf[key_start : key_start + 4] == KEY_V0_HEADS[n]:
            tid = buf[key_start + 4 : key_start + key_length].decode()
        else:
            tid = decode_key(buf[key_start : key_start + key_length])
        return make_record(
            offset,
            base_ts + ts_delta if log_append_ts is None else log_append_ts,
            tid,
            None if value_length < 0 else decode_value(buf[p : p + value_length], partitions, make_value),
        ), record_end
    except UnicodeDecodeError as e:
        return RecordError(offset, DecodeError("invalid_utf8", f"transactional id: {e}")), record_end
    except DecodeError as e:
        return RecordError(offset, e), record_end
    except IndexError:
        return RecordError(offset, DecodeError("truncated", f"key of {key_length} bytes")), record_end


def _resync(buf: bytes, pos: int, window: Window) -> Generator[BatchError, None, int]:
    """Where decoding resumes, the next batch that verifies from `pos` on (after a bad batch at
    `pos - 1`); yields one more error if the CRC budget ran out first (then the rest of the input is
    skipped). When this piece ends before that is known, sets window.resyncing (and resume)."""
    resume, gave_up_at = _next_valid_batch(buf, pos, window)
    if gave_up_at is None:
        return resume
    base = window.base
    yield BatchError(
        base + gave_up_at,
        DecodeError(
            "crc_mismatch",
            f"resynchronisation gave up after {RESYNC_CRC_FACTOR}x the input's size in failed CRCs: "
            f"the last {window.total - base - gave_up_at} bytes are skipped",
        ),
    )
    return resume


def _next_valid_batch(buf: bytes, pos: int, window: Window) -> tuple[int, int | None]:
    """The next position from `pos` holding a whole batch with a valid CRC, else the input's end
    (from the buffer's start); and the position where the CRC budget (window.budget, spent here) ran
    out, if it did. If the piece ends first, window.resyncing is set and resume is where to go on."""
    end = len(buf)
    input_end = window.total - window.base
    budget = window.budget
    while True:
        magic_at = buf.find(b"\x02", pos + _MAGIC_POSITION)
        if magic_at < 0 or magic_at + HEADER_SIZE - _MAGIC_POSITION > end:
            if input_end > end:  # candidates from here on need the next piece
                window.resyncing = True
                window.resume = window.base + (
                    magic_at - _MAGIC_POSITION if magic_at >= 0 else max(pos, end - _MAGIC_POSITION)
                )
                return end, None
            return input_end, None
        candidate = magic_at - _MAGIC_POSITION
        batch_length, crc, attributes, last_offset_delta, count = _CANDIDATE.unpack_from(buf, candidate)
        candidate_end = candidate + LOG_OVERHEAD + batch_length
        # Checks every batch Kafka writes passes, in order of cost: most garbage fails the first.
        if (
            batch_length >= HEADER_SIZE - LOG_OVERHEAD
            and candidate_end <= input_end
            and not attributes & _UNKNOWN_ATTRIBUTES
            and attributes & _COMPRESSION_MASK <= _MAX_COMPRESSION
            and last_offset_delta >= 0
            and count >= 0
            # Uncompressed records take 7 bytes at least (7 one-byte varints and the attributes).
            and (
                attributes & _COMPRESSION_MASK
                or count * _MIN_RECORD_SIZE <= batch_length - (HEADER_SIZE - LOG_OVERHEAD)
            )
        ):
            span = candidate_end - candidate - _CRC_START
            if span > budget[0]:
                return input_end, candidate
            if candidate_end <= end:
                verified = _crc(buf, candidate + _CRC_START, candidate_end) == crc
            elif candidate_end - candidate <= window.capacity:  # whole in the next piece
                window.resyncing = True
                window.resume = window.base + candidate
                return end, None
            else:  # longer than a piece: its CRC through the reader
                verified = window.crc_of(window.base + candidate + _CRC_START, window.base + candidate_end) == crc
            if verified:
                return candidate, None
            budget[0] -= span
        pos = candidate + 1


def _crc(buf: bytes, start: int, stop: int) -> int:
    """CRC32C of buf[start:stop]; a span that is not small is read through a view, not copied."""
    if stop - start < _COPIED_BELOW:
        return crc32c(buf[start:stop])
    with memoryview(buf) as view, view[start:stop] as span:
        return crc32c(span)


_COPIED_BELOW = 1 << 16
# Resynchronisation's cap on the bytes of CRCs that fail, per input: RESYNC_CRC_FACTOR x its size,
# plus RESYNC_CRC_SLACK so that a small file is never cut short by a few false candidates.
RESYNC_CRC_FACTOR = 4
RESYNC_CRC_SLACK = 1 << 20
# What resynchronisation checks of a candidate batch; the other fields of _HEADER are skipped (x).
_CANDIDATE = struct.Struct(
    ">8x"  # baseOffset
    "i"  # batchLength
    "5x"  # partitionLeaderEpoch, magic (found by its byte)
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "30x"  # baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence
    "i"  # recordCount
)
_UNKNOWN_ATTRIBUTES = ~0x7F  # bits 7 to 15 are unused in magic v2
_MAX_COMPRESSION = 4  # zstd
_MIN_RECORD_SIZE = 7


# For a record that fills its batch (_decode_single_record), by the bytes from a position to the
# batch's end: what the record must start with there. _RECORD_HEADS: its length varint, then
# attributes, timestamp delta and offset delta, all 0. _VALUE_HEADS (from the end of the key): the
# value's length varint (values of 0 bytes left out: `00 00` and a null value's `01 00` are both 2).
_IMPLIED = 8192


def _implied_heads(overhead: int, suffix: bytes) -> list[bytes | None]:
    heads: list[bytes | None] = [None] * _IMPLIED
    for length in range(1, _IMPLIED):
        varint = encode_varint(length)
        if len(varint) + length + overhead < _IMPLIED:
            heads[len(varint) + length + overhead] = varint + suffix
    return heads


_RECORD_HEADS = _implied_heads(0, b"\x00\x00\x00")
_VALUE_HEADS = _implied_heads(1, b"")  # the one byte after the value: its header count, 0
# By the key's length byte (a one-byte zigzag varint: even, below 0x80): that byte and the v0 key
# header for a key of that length; None when no v0 key of at least 4 bytes has it.
_KEY_HEADS = [
    bytes([k]) + KEY_V0_HEADS[(k >> 1) - 4] if k < 0x80 and not k & 1 and k >> 1 >= 4 else None for k in range(256)
]
