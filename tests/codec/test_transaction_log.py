"""TransactionLogKey/Value against hand-built bytes laid out as in Kafka's message JSON."""

import pickle
import struct

import pytest

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
from exporter.codec.value import TAGGED_FIELDS

# A tag above the highest the codec names: where a newer Kafka's tagged field goes.
NEXT_TAG = TAGGED_FIELDS[-1].tag + 1


def v0_bytes(partitions=((b"foo", (0, 1)),), state=1) -> bytes:
    out = struct.pack(">hqhib", 0, 1000, 3, 60000, state)
    if partitions is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(partitions))
        for topic, ids in partitions:
            out += struct.pack(">h", len(topic)) + topic + struct.pack(f">i{len(ids)}i", len(ids), *ids)
    return out + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000)


def v1_bytes(tags: bytes = b"\x00", partition_tags: bytes = b"\x00") -> bytes:
    out = struct.pack(">hqhib", 1, 1000, 3, 60000, 2)
    out += bytes([2])  # one partitions entry (n + 1)
    out += bytes([4]) + b"foo" + bytes([3]) + struct.pack(">ii", 0, 7) + partition_tags
    return out + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000) + tags


def test_key():
    assert decode_key(struct.pack(">hh", 0, 5) + b"txn-1") == "txn-1"
    assert decode_key(encode_key("ü-id")) == "ü-id"


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"\x00", "truncated"),
        (struct.pack(">hh", 1, 1) + b"x", "unknown_key_version"),
        (struct.pack(">hh", 0, -1), "bad_length"),
        (struct.pack(">hh", 0, 9) + b"short", "truncated"),
        (struct.pack(">hh", 0, 2) + b"\xff\xfe", "invalid_utf8"),
    ],
)
def test_bad_keys(raw, reason):
    with pytest.raises(DecodeError) as e:
        decode_key(raw)
    assert e.value.reason == reason
    # decode_record reads usual keys inline, unusual ones through decode_key: the same errors.
    with pytest.raises(DecodeError) as e:
        decode_record(raw, None, 0, 0)
    assert e.value.reason == reason


def test_value_v0():
    v = decode_value(v0_bytes())
    assert v == TransactionLogValue(
        version=0,
        producer_id=1000,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"foo": [0, 1]},
        last_update_timestamp_ms=1_700_000_000_123,
        start_timestamp_ms=1_700_000_000_000,
    )
    assert (v.previous_producer_id, v.next_producer_id, v.client_transaction_version, v.next_producer_epoch) == (
        -1,
        -1,
        0,
        -1,
    )


def test_value_v0_null_and_empty_partitions():
    assert decode_value(v0_bytes(partitions=None)).partitions is None
    assert decode_value(v0_bytes(partitions=())).partitions == {}


@pytest.mark.parametrize("state", list(TransactionState))
def test_every_state_id(state):
    assert decode_value(v0_bytes(state=int(state))).state is state


def test_value_v1_without_tags():
    v = decode_value(v1_bytes())
    assert (v.version, v.state, v.partitions) == (1, TransactionState.PREPARE_COMMIT, {"foo": [0, 7]})
    assert (v.previous_producer_id, v.next_producer_id, v.client_transaction_version, v.next_producer_epoch) == (
        -1,
        -1,
        0,
        -1,
    )


def test_value_v1_all_tags_and_unknown_tags_kept_with_their_bytes():
    tags = (
        bytes([6])
        + bytes([0, 8])
        + struct.pack(">q", 41)
        + bytes([1, 8])
        + struct.pack(">q", 42)
        + bytes([2, 2])
        + struct.pack(">h", 2)
        + bytes([3, 2])
        + struct.pack(">h", 5)
        + bytes([9, 3])
        + b"abc"  # unknown: skipped by size
        + bytes([0x80, 0x01, 1])
        + b"z"  # unknown tag 128 (two-byte varint)
    )
    v = decode_value(v1_bytes(tags=tags, partition_tags=bytes([1, 4, 2]) + b"xy"))
    assert (v.previous_producer_id, v.next_producer_id, v.client_transaction_version, v.next_producer_epoch) == (
        41,
        42,
        2,
        5,
    )
    assert v.partitions == {"foo": [0, 7]}
    assert v.unknown_tagged_fields == ((9, b"abc"), (128, b"z"))


# The next Kafka's values, as trunk writes them (TransactionLogValue.json): NextProducerEpoch is tag 3
# (int16, KAFKA-15370 / KIP-939); KAFKA-20357 persists the last producer epoch as a further tagged
# field, an int16 after the highest tag the codec names (NEXT_TAG), which this codec does not name.
_TRUNK = TransactionLogValue(
    version=1,
    producer_id=1000,
    producer_epoch=0,
    transaction_timeout_ms=60000,
    state=TransactionState.ONGOING,
    partitions={"orders": [3]},
    last_update_timestamp_ms=1_700_000_000_123,
    start_timestamp_ms=1_700_000_000_000,
    previous_producer_id=999,
    next_producer_id=1000,
    client_transaction_version=2,
    next_producer_epoch=0,
)


@pytest.mark.parametrize("partitions", [True, False])
def test_trunks_next_producer_epoch_is_named_and_kafka_20357s_epoch_kept_as_unknown(partitions):
    raw = encode_value(_TRUNK)
    assert raw.endswith(
        bytes([4, 0, 8])
        + struct.pack(">q", 999)
        + bytes([1, 8])
        + struct.pack(">q", 1000)
        + bytes([2, 2, 0, 2, 3, 2, 0, 0])
    )
    v = decode_value(raw, partitions)
    assert (v.next_producer_epoch, v.unknown_tagged_fields) == (0, ())
    last_epoch = bytes([NEXT_TAG, 2]) + struct.pack(">h", 32766)
    raw = raw[:-29] + bytes([5]) + raw[-28:] + last_epoch  # the tag count (4 -> 5), the new tag after the others
    v = decode_value(raw, partitions)
    assert (v.previous_producer_id, v.next_producer_id, v.client_transaction_version, v.next_producer_epoch) == (
        999,
        1000,
        2,
        0,
    )
    assert v.unknown_tagged_fields == ((NEXT_TAG, struct.pack(">h", 32766)),)
    if partitions:
        assert encode_value(v) == raw  # written back in tag order, as Kafka writes them


@pytest.mark.parametrize("version", [2, 3, 0x7FFF, -1])
def test_a_value_version_above_1_is_a_decode_error_of_its_own(version):
    for raw in (struct.pack(">h", version) + encode_value(_TRUNK)[2:], struct.pack(">h", version)):
        with pytest.raises(DecodeError) as e:
            decode_value(raw)
        assert (e.value.reason, e.value.detail) == ("unknown_value_version", f"value version {version}")


def test_value_v1_null_partitions():
    raw = struct.pack(">hqhib", 1, 1, 0, 100, 4) + b"\x00" + struct.pack(">qq", 5, 4) + b"\x00"
    assert decode_value(raw).partitions is None


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"\x00", "truncated"),
        (struct.pack(">h", 2) + bytes(40), "unknown_value_version"),
        (struct.pack(">h", -1), "unknown_value_version"),
        (v0_bytes(state=8), "unknown_state"),
        (v0_bytes(state=-1), "unknown_state"),
        (v0_bytes()[:-1], "truncated"),
        (v0_bytes()[:20], "truncated"),
        (v0_bytes(partitions=((b"\xff", (1,)),)), "invalid_utf8"),
        (v0_bytes()[:17] + struct.pack(">i", -2) + bytes(16), "bad_length"),
        (v0_bytes()[:17] + struct.pack(">i", 2**31 - 1) + bytes(16), "truncated"),
        (v1_bytes(tags=bytes([1, 0, 4]) + bytes(4)), "bad_length"),  # tag 0 must be 8 bytes
        (v1_bytes(tags=bytes([1, 9, 50])), "truncated"),
        (v1_bytes()[:-1], "truncated"),
        (v1_bytes()[:17] + b"\xff\xff\xff\xff\xff\xff", "bad_length"),
    ],
)
def test_bad_values(raw, reason):
    with pytest.raises(DecodeError) as e:
        decode_value(raw)
    assert e.value.reason == reason


def test_trailing_bytes_are_ignored_like_the_broker_does():
    assert decode_value(v0_bytes() + b"junk").producer_id == 1000


def test_encode_writes_only_non_default_tags_in_order():
    value = decode_value(v1_bytes())
    value.next_producer_epoch = 9
    value.previous_producer_id = 4
    raw = encode_value(value)
    assert raw.endswith(bytes([2, 0, 8]) + struct.pack(">q", 4) + bytes([3, 2]) + struct.pack(">h", 9))
    assert decode_value(raw) == value


def test_decode_record_tombstone():
    record = decode_record(encode_key("t"), None, offset=5, timestamp_ms=9)
    assert (record.offset, record.timestamp_ms, record.transactional_id, record.value) == (5, 9, "t", None)


@pytest.mark.parametrize(
    "raw",
    [
        v0_bytes(),
        v0_bytes(partitions=None),
        v0_bytes(partitions=((b"foo", (0,)),)),
        v0_bytes(partitions=((b"a", (0, 1, 2)), (b"bb", ()))),
        v1_bytes(),
        v1_bytes(partition_tags=b"\x01\x05\x01z"),
        struct.pack(">hqhibb", 1, 1000, 3, 60000, 2, 0) + struct.pack(">qq", 5, 4) + b"\x00",  # null
        struct.pack(">hqhibb", 1, 1000, 3, 60000, 2, 1) + struct.pack(">qq", 5, 4) + b"\x00",  # empty
    ],
)
def test_skipping_partitions_keeps_every_other_field(raw):
    skipped = decode_value(raw, partitions=False)
    assert skipped.partitions is PARTITIONS_SKIPPED
    full = decode_value(raw)
    full.partitions = PARTITIONS_SKIPPED
    assert skipped == full


def test_skipped_partitions_stay_the_one_marker_and_are_never_encoded():
    """A pickled value (Spark ships them between processes) keeps the marker that `is` compares
    to; encoding a value without its partitions is refused by name, not by a stray len()."""
    skipped = decode_value(v1_bytes(), partitions=False)
    assert pickle.loads(pickle.dumps(skipped)).partitions is PARTITIONS_SKIPPED
    assert repr(PARTITIONS_SKIPPED) == str(PARTITIONS_SKIPPED) == "PARTITIONS_SKIPPED"
    with pytest.raises(TypeError, match="PARTITIONS_SKIPPED"):
        encode_value(skipped)


@pytest.mark.parametrize(
    "raw, reason",
    [
        (v1_bytes()[:25], "truncated"),
        (v1_bytes().replace(bytes([4]) + b"foo", bytes([0]) + b"foo", 1), "bad_length"),
        (v0_bytes()[:30], "truncated"),
        (v0_bytes(partitions=((b"foo", (0,)), (b"x", ()))).replace(b"\x00\x01x", b"\xff\xffx"), "bad_length"),
    ],
)
def test_skipping_partitions_still_checks_their_lengths(raw, reason):
    with pytest.raises(DecodeError) as e:
        decode_value(raw, partitions=False)
    assert e.value.reason == reason


@pytest.mark.parametrize("topics", [None, {}, {"orders": [3]}, {"o" * 126: [2**31 - 1]}, {"a": [1], "b": [2]}])
@pytest.mark.parametrize(
    "tags",
    [
        {},
        {"previous_producer_id": 41},
        {"client_transaction_version": 2},
        {"previous_producer_id": 41, "next_producer_id": 7},
        {"previous_producer_id": 41, "client_transaction_version": 2},
        {"previous_producer_id": 41, "client_transaction_version": 2, "next_producer_epoch": 4},
    ],
)
def test_the_usual_v1_shapes_read_like_any_other(topics, tags):
    """The usual shapes (no partitions or one topic with one partition; the fast path's tagged fields:
    none, PreviousProducerId only or ClientTransactionVersion only) against every neighbour shape,
    whole, cut short and with trailing bytes (ignored, as the broker does)."""
    value = TransactionLogValue(
        version=1,
        producer_id=1000,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.COMPLETE_COMMIT,
        partitions=topics,
        last_update_timestamp_ms=1_700_000_000_123,
        start_timestamp_ms=1_700_000_000_000,
        **tags,
    )
    raw = encode_value(value)
    assert decode_value(raw) == value
    assert decode_value(raw + b"\x00\x05") == value
    for cut in (1, 8):
        with pytest.raises(DecodeError) as e:
            decode_value(raw[:-cut])
        assert e.value.reason == "truncated"
