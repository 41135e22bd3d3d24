"""The value's fields are declared once (TransactionLogValue's table): every consumer derives its
fields from it, and a tagged field added there is decoded, encoded, shown and stored with no other
edit. KAFKA-20357's field (the last producer epoch, a tagged field after Kafka 4.4) stands as the
example, under a made-up tag."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from exporter.codec import (
    TransactionLogRecord,
    TransactionLogValue,
    TransactionState,
    decode_value,
    encode_value,
    tagged_fields,
)
from exporter.codec.tagged_fields import TaggedLayout
from exporter.codec.value import (
    INT16,
    TAGGED_FIELDS,
    VALUE_FIELDS,
    ValueField,
    positional_maker,
    tagged,
    value_fields,
    value_from_fields,
)
from exporter.commands import decode as decode_command
from exporter.pipeline import decode as pipeline_decode
from exporter.pipeline import tables

NAMES = [f.name for f in VALUE_FIELDS]


def declaration(cls: type) -> list[tuple[str, Any, Any]]:
    """cls's fields as make_dataclass takes them (new Field objects: a class owns its own)."""
    declared: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        spec: dict[str, Any] = {"metadata": f.metadata}
        if f.default is not dataclasses.MISSING:
            spec["default"] = f.default
        declared.append((f.name, f.type, dataclasses.field(**spec)))
    return declared


def with_a_new_tagged_field() -> type:
    """TransactionLogValue with one more line: a tagged field after the last one."""
    declared = declaration(TransactionLogValue)
    declared.insert(-1, ("last_producer_epoch", int, dataclasses.field(default=-1, metadata=tagged(7, INT16))))
    return dataclasses.make_dataclass("WithLastProducerEpoch", declared, slots=True, kw_only=True)


def a_value(cls: type = TransactionLogValue, **tagged_values: int) -> TransactionLogValue:
    return cls(
        version=1,
        producer_id=42,
        producer_epoch=3,
        transaction_timeout_ms=60000,
        state=TransactionState.ONGOING,
        partitions={"orders": [0, 2]},
        last_update_timestamp_ms=1010,
        start_timestamp_ms=1000,
        **tagged_values,
    )


def test_the_table_is_the_class_declaration():
    assert [f.name for f in dataclasses.fields(TransactionLogValue)] == [*NAMES, "unknown_tagged_fields"]
    assert [(f.name, f.tag, f.default) for f in TAGGED_FIELDS] == [
        ("previous_producer_id", 0, -1),
        ("next_producer_id", 1, -1),
        ("client_transaction_version", 2, 0),
        ("next_producer_epoch", 3, -1),
    ]


def test_fields_are_passed_by_name_and_by_position_only_through_the_table():
    with pytest.raises(TypeError):
        TransactionLogValue(1, 42, 3, 60000, TransactionState.ONGOING, None, 1010, 1000)  # type: ignore[call-arg]
    by_position = value_from_fields(1, 42, 3, 60000, TransactionState.ONGOING, {"orders": [0, 2]}, 1010, 1000)
    assert by_position == a_value()
    assert value_from_fields(*(getattr(a_value(), name) for name in NAMES), ((9, b"x"),)) == dataclasses.replace(
        a_value(), unknown_tagged_fields=((9, b"x"),)
    )


def test_every_consumer_takes_its_fields_from_the_table():
    # The decode command's JSON: the table's names, in order.
    record = TransactionLogRecord(5, 1010, "t", a_value(client_transaction_version=2))
    assert list(json.loads(decode_command.format_record(record))["value"]) == NAMES
    # The pipeline's columns (Arrow and Spark): the value's, from the table, in the order of the rows.
    columns = pipeline_decode.value_columns()
    assert sorted(attribute for _, attribute, _ in columns) == sorted(NAMES)
    value_names = [f.name for f in pipeline_decode.TRANSITIONS_SCHEMA][5:-1]
    assert value_names == [column for column, _, _ in columns]
    assert [c for c, _ in tables.COLUMNS["transitions"]][4:-2] == value_names


def declared_as(cls: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """What importing the codec and the decode command derives from the table, derived from cls's."""
    table = value_fields(cls)
    layout = TaggedLayout(tuple(f for f in table if f.tag is not None))
    monkeypatch.setattr(tagged_fields, "_TAGGED_LAYOUT", layout)
    monkeypatch.setattr(decode_command, "TAGGED_FIELDS", tuple(f for f in table if f.tag is not None))
    monkeypatch.setattr(
        decode_command, "_VALUE_FIELDS", lambda v: (*(getattr(v, f.name) for f in table), v.unknown_tagged_fields)
    )


def test_a_tagged_field_added_to_the_table_is_all_it_takes(monkeypatch):
    cls = with_a_new_tagged_field()
    assert value_fields(cls) == (*VALUE_FIELDS, ValueField("last_producer_epoch", INT16, 7, -1))
    value = a_value(cls, previous_producer_id=42, client_transaction_version=2, last_producer_epoch=5)
    raw = encode_value(value)
    # Encoded after the others, in tag order: 3 tagged fields (tag, size, bytes), tag 7 the last.
    assert raw.endswith(bytes((3, 0, 8)) + (42).to_bytes(8, "big") + bytes((2, 2, 0, 2)) + bytes((7, 2, 0, 5)))
    # The codec as it is reads it as a newer Kafka's field, as the broker does.
    assert decode_value(raw).unknown_tagged_fields == ((7, b"\x00\x05"),)

    declared_as(cls, monkeypatch)
    # Decoded (the general reader) into the new class by its positional maker.
    assert decode_value(raw, True, positional_maker(cls)) == value
    # Shown last in the decode command's JSON, whether the codec passed it or left it at its default.
    partitions, _, make_value = decode_command._line_makers("")
    line = json.loads(decode_value(raw, partitions, make_value))
    assert list(line) == [*NAMES, "last_producer_epoch"] and line["last_producer_epoch"] == 5
    at_default = json.loads(decode_value(encode_value(a_value(cls)), partitions, make_value))
    assert list(at_default) == [*NAMES, "last_producer_epoch"] and at_default["last_producer_epoch"] == -1
    assert json.loads(decode_command.format_record(TransactionLogRecord(5, 1010, "t", value)))["value"] == line
    # A column at the end of the pipeline's value columns, of Spark's int for an int16.
    assert pipeline_decode.value_columns(value_fields(cls)) == [
        *pipeline_decode.value_columns(),
        ("last_producer_epoch", "last_producer_epoch", pipeline_decode.pa.int32()),
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.insert(-1, ("x", int, dataclasses.field(default=-1, metadata=tagged(2, INT16)))),
            "tag 2 after tag 7",
        ),
        (lambda d: d.insert(-1, ("x", int, dataclasses.field(default=-1))), r"no fixed\(\) or tagged\(\)"),
        (lambda d: d.insert(-1, ("x", int, dataclasses.field(metadata=tagged(9, INT16)))), "needs a default"),
    ],
)
def test_a_table_the_codec_cannot_derive_from_is_refused(change, message):
    declared = declaration(with_a_new_tagged_field())
    change(declared)
    cls = dataclasses.make_dataclass("Bad", declared, kw_only=True)
    with pytest.raises(TypeError, match=message):
        value_fields(cls)
