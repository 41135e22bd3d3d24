import pytest

from exporter.codec import TransactionLogValue, TransactionState, encode_key, encode_value
from exporter.codec.record_batch import BatchError, RecordError, decode_batches
from tests.codec.crafted import fake_headers, good_then_bad
from txn_workshop.record_batches import encode_batch

VALUE = TransactionLogValue(
    version=0,
    producer_id=7,
    producer_epoch=0,
    transaction_timeout_ms=1000,
    state=TransactionState.ONGOING,
    partitions={"t": [0]},
    last_update_timestamp_ms=1005,
    start_timestamp_ms=1000,
)


def batch(offset, tid="a", value=VALUE, ts=1000):
    return encode_batch(offset, [(encode_key(tid), None if value is None else encode_value(value), ts)])


def test_records_with_offsets_and_timestamps():
    items = list(decode_batches(batch(0, ts=10) + batch(1, "b", None, ts=20)))
    assert [(r.offset, r.timestamp_ms, r.transactional_id) for r in items] == [(0, 10, "a"), (1, 20, "b")]
    assert items[0].value == VALUE and items[1].value is None


def test_several_records_in_one_batch():
    raw = encode_batch(10, [(encode_key("x"), None, 5), (encode_key("y"), None, 7)])
    assert [(r.offset, r.timestamp_ms, r.transactional_id) for r in decode_batches(raw)] == [(10, 5, "x"), (11, 7, "y")]


def test_crc_mismatch_is_reported_and_skipped():
    bad = bytearray(batch(1))
    bad[-1] ^= 0xFF
    items = list(decode_batches(batch(0) + bytes(bad) + batch(2)))
    assert isinstance(items[1], BatchError) and items[1].error.reason == "crc_mismatch"
    assert items[1].position == len(batch(0))
    assert [i.offset for i in (items[0], items[2])] == [0, 2]


def test_truncated_tail_after_a_crash():
    whole = batch(0) + batch(1)
    items = list(decode_batches(whole + batch(2)[:30]))
    assert [type(i).__name__ for i in items] == ["TransactionLogRecord", "TransactionLogRecord", "BatchError"]
    assert items[2].position == len(whole) and items[2].error.reason == "truncated"


def test_garbage_length_resyncs_on_the_next_valid_batch():
    bad = bytearray(batch(1))
    bad[8:12] = (2**30).to_bytes(4, "big")
    items = list(decode_batches(batch(0) + bytes(bad) + batch(2)))
    assert isinstance(items[1], BatchError)
    assert [i.offset for i in items if not isinstance(i, BatchError)] == [0, 2]


@pytest.mark.parametrize("attr, reason", [(1, "unsupported_batch")])
def test_compressed_batches_are_refused(attr, reason):
    raw = bytearray(batch(0))
    raw[21:23] = attr.to_bytes(2, "big")
    from crc32c import crc32c

    raw[17:21] = crc32c(bytes(raw[21:])).to_bytes(4, "big")
    (item,) = decode_batches(bytes(raw))
    assert isinstance(item, BatchError) and item.error.reason == reason


def test_bad_record_key_is_a_record_error_and_the_next_record_decodes():
    raw = encode_batch(0, [(b"\x00\x05zz", None, 1), (encode_key("ok"), None, 2)])
    items = list(decode_batches(raw))
    assert isinstance(items[0], RecordError) and items[0].offset == 0
    assert items[1].transactional_id == "ok"


class _CountingCrc:
    """Stands in for the codec's crc32c and counts the bytes it is given: the work, deterministically."""

    def __init__(self):
        from exporter.codec import record_batch

        self.real = record_batch.crc32c
        self.bytes = 0

    def __call__(self, data):
        self.bytes += len(data)
        return self.real(data)


@pytest.mark.parametrize("craft", [fake_headers, good_then_bad])
def test_resynchronisation_work_is_linear_in_the_input_whatever_its_bytes(craft, monkeypatch):
    """Bytes crafted so that every candidate claims the rest of the file used to cost a CRC of the
    rest at every candidate: quadratic (~9 GB of CRC for 1 MiB). Now the CRC'd bytes are bounded
    by a constant times the input's size, at every size."""
    from exporter.codec import record_batch

    for size in (1 << 18, 1 << 20, 1 << 22):
        counting = _CountingCrc()
        monkeypatch.setattr(record_batch, "crc32c", counting)
        items = list(decode_batches(craft(size)))
        assert isinstance(items[-1], BatchError)
        bound = (record_batch.RESYNC_CRC_FACTOR + 3) * size + record_batch.RESYNC_CRC_SLACK
        assert counting.bytes <= bound, (size, counting.bytes)


def test_past_the_crc_budget_the_rest_is_one_error_and_what_came_before_is_kept():
    data = batch(0) + batch(1) + fake_headers(1 << 22)
    items = list(decode_batches(data))
    assert [i.offset for i in items[:2]] == [0, 1]
    assert [type(i) for i in items[2:]] == [BatchError, BatchError]
    assert items[2].position == len(batch(0)) * 2
    assert "resynchronisation gave up" in str(items[3].error) and items[3].error.reason == "crc_mismatch"


def test_a_corrupt_batch_among_many_still_resyncs_on_the_next_one():
    """The header checks before a candidate's CRC let real batches through: a damaged region
    costs only itself."""
    batches = [batch(i, f"t{i}") for i in range(200)]
    damaged = bytearray(b"".join(batches))
    start = sum(map(len, batches[:50]))
    damaged[start + 3 : start + 400] = bytes(range(256)) + bytes(141)  # garbage over several batches
    offsets = [i.offset for i in decode_batches(bytes(damaged)) if not isinstance(i, BatchError)]
    lost = set(range(200)) - set(offsets)
    assert lost and max(lost) < 60 and offsets[-1] == 199


class Pieces:
    """An input in memory read as decode_pieces reads a file, counting what it reads at once."""

    def __init__(self, data: bytes) -> None:
        self.data, self.size, self.largest_read, self.bytes_read = data, len(data), 0, 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def read(self, position, n):
        assert position >= 0 and position + n <= self.size, (position, n)
        self.largest_read = max(self.largest_read, n)
        self.bytes_read += n
        return self.data[position : position + n]


def _outcomes(items):
    return [
        (type(i).__name__, i.position, i.error.reason, str(i.error)) if isinstance(i, BatchError) else i for i in items
    ]


# A real batch longer than the pieces below: read whole once its CRC verified.
LONG = batch(
    1,
    value=TransactionLogValue(
        version=1,
        producer_id=7,
        producer_epoch=0,
        transaction_timeout_ms=1000,
        state=VALUE.state,
        partitions={"t" * 200: list(range(2000))},
        last_update_timestamp_ms=5,
        start_timestamp_ms=4,
    ),
)


@pytest.mark.parametrize("piece_size", [122, 200, 1000, 4096, 1 << 16])
@pytest.mark.parametrize(
    "name, data",
    [
        ("batches", b"".join(batch(i, f"t{i}") for i in range(300))),
        ("a truncated tail", b"".join(batch(i) for i in range(40)) + batch(40)[:30]),
        ("a corrupt batch", batch(0) + bytes(b ^ 0xFF if n == 70 else b for n, b in enumerate(batch(1))) + batch(2)),
        ("garbage", bytes(range(256)) * 40 + batch(7) + bytes(37) + batch(8)),
        ("headers claiming the rest", fake_headers(1 << 16)),
        ("good then bad", good_then_bad(1 << 16)),
        ("past the CRC budget", batch(0) + batch(1) + fake_headers(1 << 21)),
        ("a batch longer than a piece", batch(0) + LONG + batch(2)),
        ("empty", b""),
        ("less than a header", batch(0)[:60]),
    ],
)
def test_an_input_read_in_pieces_decodes_as_it_does_whole(name, data, piece_size):
    """Pieces of any size give what the whole input gives: records, errors with the input's
    positions, resynchronisation across pieces, the CRC budget, the truncated tail."""
    from exporter.codec.record_batch import decode_pieces

    reader = Pieces(data)
    assert _outcomes(decode_pieces(reader, piece_size=piece_size)) == _outcomes(decode_batches(data)), name
    # The most read at once: a piece, or a batch longer than a piece that proved real (its CRC).
    assert reader.largest_read <= max(piece_size, len(LONG) if LONG in data else 0)


def test_a_length_claiming_most_of_a_large_input_costs_no_memory():
    """A corrupt length that claims far more than a piece is checked by its CRC through the reader,
    in pieces: nothing longer than a piece is ever held."""
    from exporter.codec.record_batch import decode_pieces

    data = fake_headers(8 << 20)
    reader = Pieces(data)
    assert _outcomes(decode_pieces(reader, piece_size=1 << 16)) == _outcomes(decode_batches(data))
    assert reader.largest_read <= 1 << 16


@pytest.mark.parametrize("piece_size", [122, 1000])
def test_property_pieces_match_the_whole_on_random_damage(piece_size):
    import random

    from exporter.codec.record_batch import decode_pieces

    rng = random.Random(piece_size)
    clean = bytearray(b"".join(batch(i, f"t{i}") for i in range(150)))
    for _ in range(40):
        data = bytearray(clean)
        for _ in range(rng.randint(1, 6)):
            at = rng.randrange(len(data))
            kind = rng.randrange(3)
            if kind == 0:
                data[at] ^= 1 << rng.randrange(8)
            elif kind == 1:
                del data[at : at + rng.randint(1, 300)]
            else:
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 300)))
        data = bytes(data)
        assert _outcomes(decode_pieces(Pieces(data), piece_size=piece_size)) == _outcomes(decode_batches(data))
