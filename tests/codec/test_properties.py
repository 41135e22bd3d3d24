"""Property tests: round trips, and no input of any shape escapes as anything but DecodeError."""

import dataclasses
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.codec import (
    PARTITIONS_SKIPPED,
    DecodeError,
    TransactionLogValue,
    TransactionState,
    decode_key,
    decode_record,
    decode_value,
    encode_key,
    encode_value,
)
from exporter.codec.partitions import PartitionsMemo
from exporter.codec.record_batch import (
    HEADER_SIZE,
    BatchError,
    RecordError,
    _decode_record,
    _decode_single_record,
    decode_batches,
)
from exporter.codec.value import INT8, INT16, INT32, INT64, TAGGED_FIELDS, value_from_fields
from txn_workshop.record_batches import encode_batch

int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
names = st.text(min_size=0, max_size=40)
partitions = st.none() | st.dictionaries(names, st.lists(st.integers(0, 2**31 - 1), max_size=8), max_size=5)
# Each of the codec's tagged fields drawn by its wire type (the table's: a field added there is drawn too).
INTS = {INT8: st.integers(-(2**7), 2**7 - 1), INT16: int16, INT32: int32, INT64: int64}


# Tagged fields of a newer Kafka (above the highest tag the codec names: KAFKA-20357's last producer
# epoch, and later ones), in tag order as Kafka writes them.
unknown_tags = st.dictionaries(st.integers(TAGGED_FIELDS[-1].tag + 1, 2**20), st.binary(max_size=12), max_size=3).map(
    lambda tags: tuple(sorted(tags.items()))
)


@st.composite
def values(draw):
    version = draw(st.sampled_from([0, 1]))
    tagged = version == 1
    return TransactionLogValue(
        version=version,
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        transaction_timeout_ms=draw(int32),
        state=draw(st.sampled_from(list(TransactionState))),
        partitions=draw(partitions),
        last_update_timestamp_ms=draw(int64),
        start_timestamp_ms=draw(int64),
        **{f.name: draw(INTS[f.wire]) if tagged else f.default for f in TAGGED_FIELDS},
        unknown_tagged_fields=draw(unknown_tags) if tagged else (),
    )


@settings(deadline=None)
@given(values())
def test_value_round_trip(value):
    assert decode_value(encode_value(value)) == value


@given(names)
def test_key_round_trip(tid):
    assert decode_key(encode_key(tid)) == tid


def _mutations(raw: bytes):
    return st.one_of(
        st.integers(0, len(raw)).map(lambda n: raw[:n]),
        st.tuples(st.integers(0, max(len(raw) - 1, 0)), st.integers(0, 255)).map(
            lambda m: raw[: m[0]] + bytes([m[1]]) + raw[m[0] + 1 :]
        ),
        st.binary(max_size=64).map(lambda junk: raw + junk),
    )


@settings(max_examples=500, deadline=None)
@given(st.data())
def test_mutated_values_give_a_value_or_a_typed_error(data):
    raw = data.draw(_mutations(encode_value(data.draw(values()))))
    try:
        assert isinstance(decode_value(raw), TransactionLogValue)
    except DecodeError as e:
        assert e.reason in DecodeError.REASONS


def _outcome(decode):
    try:
        return decode()
    except DecodeError as e:
        return e.reason


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_skipping_partitions_changes_nothing_else(data):
    """partitions=False (the live source's decode) gives the full decode's value with partitions
    skipped, and the same error for every broken input, except one it cannot see: invalid UTF-8
    inside a topic name."""
    raw = data.draw(_mutations(encode_value(data.draw(values()))) | st.binary(max_size=120))
    full = _outcome(lambda: decode_value(raw))
    skipped = _outcome(lambda: decode_value(raw, partitions=False))
    if isinstance(full, TransactionLogValue):
        assert skipped == dataclasses.replace(full, partitions=PARTITIONS_SKIPPED)
    elif full != "invalid_utf8":
        assert skipped == full


@st.composite
def tagged_as_written(draw):
    """Values v1 whose tagged fields are each absent (default) or not, as coordinators write them:
    the tagged-field shapes PartitionsMemo guesses from, and others."""
    value = draw(values())
    value.version = 1
    for name, default in (*((f.name, f.default) for f in TAGGED_FIELDS), ("unknown_tagged_fields", ())):
        if draw(st.booleans()):
            setattr(value, name, default)
    return value


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_make_and_a_partitions_memo_change_nothing_else(data):
    """make= gets the fields TransactionLogValue would; PartitionsMemo gives what its convert makes
    of the array, the same the second time (found in the memo, not walked again), and every error
    the full decode gives, invalid UTF-8 in a topic name included."""
    raws = [
        data.draw(_mutations(encode_value(data.draw(tagged_as_written()))) | st.binary(max_size=120)) for _ in range(3)
    ]
    memo = PartitionsMemo(lambda p: ("text of", p), limit=2)  # small: cleared on the way

    def make(*fields):
        return "made", value_from_fields(*fields)

    for raw in raws + raws:
        full = _outcome(lambda: decode_value(raw))  # noqa: B023 (called at once)
        memoized = _outcome(lambda: decode_value(raw, memo, make))  # noqa: B023
        if not isinstance(full, TransactionLogValue):
            assert memoized == full
            continue
        made, value = memoized
        assert made == "made"
        if type(value.partitions) is tuple:
            assert value.partitions == ("text of", full.partitions)
            value.partitions = full.partitions
        assert value == full


@settings(deadline=None)
@given(names, values())
def test_decode_record_reads_keys_like_decode_key(tid, value):
    record = decode_record(encode_key(tid), encode_value(value), 7, 1000)
    assert (record.offset, record.timestamp_ms, record.transactional_id, record.value) == (7, 1000, tid, value)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_never_crash(raw):
    for decode in (decode_key, decode_value):
        try:
            decode(raw)
        except DecodeError:
            pass
    items = list(decode_batches(raw))
    assert all(isinstance(i, (BatchError, RecordError)) or i.offset >= 0 for i in items)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_batches_lose_nothing_else(data):
    """A corrupt batch in the middle costs that batch only: the batches around it still decode."""
    value = data.draw(values())
    batches = [encode_batch(i, [(encode_key(f"t{i}"), encode_value(value), 1000 + i)]) for i in range(3)]
    middle = data.draw(_mutations(batches[1]))
    items = list(decode_batches(batches[0] + middle + batches[2]))
    offsets = [i.offset for i in items if not isinstance(i, (BatchError, RecordError))]
    assert offsets[0] == 0
    # When the middle batch is reported bad, the batch after it survives. (A mutation can also leave
    # a batch whose CRC still verifies by borrowing the next batch's first byte: then those bytes
    # really are a valid batch and the decoder cannot know better.)
    if any(isinstance(i, BatchError) and i.position == len(batches[0]) for i in items):
        assert offsets[-1] == 2


def _same(a, b) -> bool:
    if isinstance(a, RecordError) and isinstance(b, RecordError):
        return (a.offset, a.error.reason) == (b.offset, b.error.reason)
    return a == b


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_the_single_record_fast_path_agrees_with_the_general_reader(data):
    """Where _decode_single_record takes a record (it may also decline: None), it reads exactly what
    _decode_record reads, on whole and on damaged records alike (the CRC is bypassed here)."""
    value = data.draw(st.none() | values().map(encode_value) | st.binary(max_size=40))
    tid = data.draw(names | st.text(min_size=0, max_size=70))
    batch = encode_batch(9, [(encode_key(tid), value, 1000)])
    record = data.draw(_mutations(batch[HEADER_SIZE:]) | st.just(batch[HEADER_SIZE:]))
    fast = _decode_single_record(record, 0, len(record), 9, 1000)
    if fast is not None:
        assert _same(fast, _decode_record(record, 0, len(record), 9, 0, 1000, None)[0])
    if record == batch[HEADER_SIZE:] and value and len(encode_key(tid)) < 64:
        assert fast is not None  # the shape a coordinator writes always takes the fast path


class _Reader:
    """Reads a value field by field, as Kafka's generated TransactionLogValue reader does: the
    slowest and plainest reading of the layout, to hold decode_value against."""

    def __init__(self, buf: bytes):
        self.buf, self.pos = buf, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise DecodeError("truncated", "reference reader")
        self.pos += n
        return self.buf[self.pos - n : self.pos]

    def int(self, fmt: str) -> int:
        raw = self.take(struct.calcsize(fmt))
        return struct.unpack(fmt, raw)[0]

    def uvarint(self) -> int:
        result = 0
        for shift in range(0, 35, 7):
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result
        raise DecodeError("bad_length", "reference reader: varint")


def _reference_value(buf: bytes) -> TransactionLogValue:
    try:
        return _reference_fields(_Reader(buf))
    except UnicodeDecodeError:
        raise DecodeError("invalid_utf8", "reference reader") from None


def _reference_fields(r: _Reader) -> TransactionLogValue:
    version = r.int(">h")
    if version not in (0, 1):
        raise DecodeError("unknown_value_version", "reference reader")
    producer_id, epoch, timeout_ms, status = r.int(">q"), r.int(">h"), r.int(">i"), r.int(">b")
    if status not in set(TransactionState):
        raise DecodeError("unknown_state", "reference reader")
    partitions = {}
    if version == 0:
        count = r.int(">i")
        if count == -1:
            partitions = None
        elif count < 0:
            raise DecodeError("bad_length", "reference reader: array length")
        for _ in range(count):
            name = r.take(r.int(">h")).decode()
            ids = r.int(">i")
            if ids < 0:
                raise DecodeError("bad_length", "reference reader: ids length")
            partitions[name] = [r.int(">i") for _ in range(ids)]
    else:
        count = r.uvarint()
        partitions = None if count == 0 else {}
        for _ in range(count - 1):
            n = r.uvarint()
            if n == 0:
                raise DecodeError("bad_length", "reference reader: null topic")
            name = r.take(n - 1).decode()
            n = r.uvarint()
            if n == 0:
                raise DecodeError("bad_length", "reference reader: null ids")
            partitions[name] = [r.int(">i") for _ in range(n - 1)]
            for _ in range(r.uvarint()):
                r.uvarint()
                r.take(r.uvarint())
    last_update, start = r.int(">q"), r.int(">q")
    # The tagged fields Kafka's schema names (the codec's table, held to the schema in
    # tests/codec/test_kafka_schema.py): each one's default when absent.
    fields = {f.name: f.default for f in TAGGED_FIELDS}
    known = {f.tag: (f.name, ">" + f.wire) for f in TAGGED_FIELDS}
    unknown = []
    if version == 1:
        for _ in range(r.uvarint()):
            tag = r.uvarint()
            raw = r.take(r.uvarint())
            if tag in known:
                name, fmt = known[tag]
                if len(raw) != struct.calcsize(fmt):
                    raise DecodeError("bad_length", "reference reader: tag size")
                fields[name] = struct.unpack(fmt, raw)[0]
            else:
                unknown.append((tag, raw))
    return TransactionLogValue(
        version=version,
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_timeout_ms=timeout_ms,
        state=TransactionState(status),
        partitions=partitions,
        last_update_timestamp_ms=last_update,
        start_timestamp_ms=start,
        **fields,
        unknown_tagged_fields=tuple(unknown),
    )


@st.composite
def usual_values(draw):
    """The shapes coordinators write: EMPTY's null partitions, empty arrays, 1 to 3 topics of 1 to 3
    partitions, and the tagged fields of pre-TV2 and TV2 clients (decode_value's fast path)."""
    partitions = draw(
        st.none()
        | st.dictionaries(
            st.text(min_size=1, max_size=30), st.lists(st.integers(0, 2**31 - 1), min_size=1, max_size=3), max_size=3
        )
    )
    tags = draw(
        st.sampled_from(
            [
                {},
                {"previous_producer_id": 0},
                {"client_transaction_version": 2},
                {"previous_producer_id": 0, "client_transaction_version": 2},
            ]
        )
    )
    tags = {k: draw(int64) if k == "previous_producer_id" else v for k, v in tags.items()}
    return TransactionLogValue(
        version=1,
        producer_id=draw(int64),
        producer_epoch=draw(int16),
        transaction_timeout_ms=draw(int32),
        state=draw(st.sampled_from(list(TransactionState))),
        partitions=partitions,
        last_update_timestamp_ms=draw(int64),
        start_timestamp_ms=draw(int64),
        **tags,
    )


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_decode_value_reads_what_a_plain_field_by_field_reader_reads(data):
    """decode_value (its fast path for the usual tagged fields, the general readers otherwise) gives
    what reading the layout field by field gives, on whole, damaged and random values: the same
    value, or an error for both."""
    raw = data.draw(
        usual_values().map(encode_value)
        | values().map(encode_value)
        | (usual_values() | values()).flatmap(lambda v: _mutations(encode_value(v)))
        | st.binary(max_size=80)
    )
    expected = _outcome(lambda: _reference_value(raw))
    got = _outcome(lambda: decode_value(raw))
    if isinstance(expected, TransactionLogValue):
        assert got == expected
    else:
        assert not isinstance(got, TransactionLogValue), (raw, got)
