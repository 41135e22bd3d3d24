"""exporter.pipeline.decode: the codec in Arrow batches equals the codec record by record, and its
columns come from the codec's value table (no JVM: the spark extra's pyarrow and numpy)."""

import pytest

pytest.importorskip("pyspark")  # the spark extra, which make check's setup leaves out

import pyarrow as pa

from exporter.codec import TransactionLogValue, TransactionState, decode_record, encode_key, encode_value
from exporter.codec.value import TAGGED_FIELDS, VALUE_FIELDS, value_fields
from exporter.pipeline import decode as pipeline_decode
from exporter.pipeline import tables
from exporter.pipeline.decode import TRANSITIONS_SCHEMA, decode_kafka_rows, decode_segment, decode_segment_files
from tests.codec.crafted import fake_headers
from tests.codec.test_value_fields import with_a_new_tagged_field
from txn_workshop.record_batches import encode_batch

pytestmark = pytest.mark.spark

V = TransactionLogValue(
    version=1,
    producer_id=42,
    producer_epoch=3,
    transaction_timeout_ms=60000,
    state=TransactionState.ONGOING,
    partitions={"orders": [0, 2], "b": [1]},
    last_update_timestamp_ms=1010,
    start_timestamp_ms=1000,
    previous_producer_id=41,
    client_transaction_version=2,
)
V0 = TransactionLogValue(
    version=0,
    producer_id=43,
    producer_epoch=1,
    transaction_timeout_ms=1000,
    state=TransactionState.COMPLETE_ABORT,
    partitions={},
    last_update_timestamp_ms=1020,
    start_timestamp_ms=1001,
)
RECORDS = [
    (encode_key("tx-1"), encode_value(V), 1011),
    (encode_key("tx-2"), None, 1012),
    (encode_key("tx-3"), encode_value(V0), 1013),
]


def rows(batches):
    return pa.Table.from_batches(list(batches), schema=TRANSITIONS_SCHEMA).to_pylist()


def test_segment_rows_carry_every_codec_field():
    data = b"".join(encode_batch(7 + i, [r]) for i, r in enumerate(RECORDS))
    got = rows(decode_segment("c1", 5, data))
    assert [r["offset"] for r in got] == [7, 8, 9]
    first = got[0]
    assert first == {
        "cluster": "c1",
        "partition": 5,
        "offset": 7,
        "timestamp_ms": 1011,
        "transactional_id": "tx-1",
        "state": "ONGOING",
        "producer_id": 42,
        "producer_epoch": 3,
        "transaction_timeout_ms": 60000,
        "partitions": ["orders-0", "orders-2", "b-1"],
        "last_update_timestamp_ms": 1010,
        "start_timestamp_ms": 1000,
        "value_version": 1,
        "previous_producer_id": 41,
        "next_producer_id": -1,
        "client_transaction_version": 2,
        "next_producer_epoch": -1,
        # A tagged field added to the codec's table since: a column at its default.
        **{f.name: f.default for f in TAGGED_FIELDS[4:]},
        "error": None,
    }
    assert got[1]["state"] is None and got[1]["producer_id"] is None  # tombstone
    assert got[2]["value_version"] == 0 and got[2]["partitions"] == []


def test_kafka_rows_equal_segment_rows_and_errors_are_rows():
    data = b"".join(encode_batch(7 + i, [r]) for i, r in enumerate(RECORDS))
    bad_key = b"\x00\x01\x00\x02ab"  # key version 1
    batch = pa.RecordBatch.from_pydict(
        {
            "cluster": ["c1"] * 5,
            "partition": [5] * 5,
            "offset": [7, 8, 9, 10, 11],
            "timestamp_ms": [1011, 1012, 1013, 1014, 1015],
            "key": [k for k, _, _ in RECORDS] + [bad_key, encode_key("tx-4")],
            "value": [v for _, v, _ in RECORDS] + [encode_value(V), b"\x00\x09xx"],
        },
        schema=pa.schema(
            [
                ("cluster", pa.string()),
                ("partition", pa.int32()),
                ("offset", pa.int64()),
                ("timestamp_ms", pa.int64()),
                ("key", pa.binary()),
                ("value", pa.binary()),
            ]
        ),
    )
    got = rows(decode_kafka_rows([batch]))
    assert got[:3] == rows(decode_segment("c1", 5, data))
    errors = {r["offset"]: r["error"] for r in got[3:]}
    assert set(errors) == {10, 11} and "unknown_key_version" in errors[10] and "unknown_value_version" in errors[11]
    # The codec itself agrees with the row.
    rec = decode_record(RECORDS[0][0], RECORDS[0][1], 7, 1011)
    assert got[0]["producer_id"] == rec.value.producer_id


def test_corrupt_batch_is_an_error_row_and_decoding_goes_on():
    good = encode_batch(0, [RECORDS[0]])
    bad = bytearray(encode_batch(1, [RECORDS[2]]))
    bad[-1] ^= 0xFF
    got = rows(decode_segment("c", 0, bytes(bad) + encode_batch(2, [RECORDS[0]]) + good))
    assert [r["offset"] for r in got if r["error"] is None] == [2, 0]
    assert next(r["error"] for r in got if r["error"]).startswith("batch at byte 0")


def test_segment_files_are_read_as_their_bytes(tmp_path):
    data = b"".join(encode_batch(7 + i, [r]) for i, r in enumerate(RECORDS))
    path = tmp_path / "__transaction_state-5" / "00000000000000000007.log"
    path.parent.mkdir()
    path.write_bytes(data)
    (tmp_path / "empty.log").write_bytes(b"")
    inputs = pa.RecordBatch.from_pydict(
        {"cluster": ["c1", "c1"], "path": [str(path), str(tmp_path / "empty.log")], "partition": [5, 6]}
    )
    assert rows(decode_segment_files([inputs])) == rows(decode_segment("c1", 5, data))


def test_crafted_segment_costs_linear_work(monkeypatch):
    """The pipeline's segment reader resynchronises through the codec: bytes crafted so that every
    position claims the rest of the file cost CRCs bounded by a constant times the size."""
    from exporter.codec import record_batch

    crc_bytes = [0]
    real = record_batch.crc32c

    def counting(data):
        crc_bytes[0] += len(data)
        return real(data)

    monkeypatch.setattr(record_batch, "crc32c", counting)
    size = 1 << 21
    got = rows(decode_segment("c", 0, encode_batch(0, [RECORDS[0]]) + fake_headers(size)))
    assert got[0]["offset"] == 0 and all(r["error"] for r in got[1:])
    assert crc_bytes[0] <= (record_batch.RESYNC_CRC_FACTOR + 3) * size + record_batch.RESYNC_CRC_SLACK


def test_the_value_columns_are_the_codecs_table():
    """Arrow's and Spark's columns: the value's, from the table, in the order of the rows."""
    columns = pipeline_decode.value_columns()
    assert sorted(attribute for _, attribute, _ in columns) == sorted(f.name for f in VALUE_FIELDS)
    value_names = [f.name for f in TRANSITIONS_SCHEMA][5:-1]
    assert value_names == [column for column, _, _ in columns]
    assert [c for c, _ in tables.COLUMNS["transitions"]][4:-2] == value_names


def test_a_tagged_field_added_to_the_table_is_a_column_at_the_end():
    """tests/codec/test_value_fields.py's new field, of Spark's int for an int16."""
    assert pipeline_decode.value_columns(value_fields(with_a_new_tagged_field())) == [
        *pipeline_decode.value_columns(),
        ("newer_producer_epoch", "newer_producer_epoch", pa.int32()),
    ]
