"""The value's fields are declared once (TransactionLogValue's table): every consumer derives its
fields from it, and a tagged field added there is decoded, encoded, shown and stored with no other
edit. KAFKA-20357's field (the last producer epoch, a tagged field after Kafka 4.4) stands as the
example, under the next tag after the codec's highest, as docs/changing.md's walk adds it. Stored: the
pipeline's columns, held to the table in tests/pipeline/test_decode.py (it needs the spark extra)."""

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
    value_decode,
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

NAMES = [f.name for f in VALUE_FIELDS]
# The tag a newer Kafka's field takes: the next after the highest the codec names.
NEXT_TAG = TAGGED_FIELDS[-1].tag + 1


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
    """TransactionLogValue with one more line: a tagged field after the last one (named apart from
    KAFKA-20357's, so that this still adds a field once the codec names that one)."""
    declared = declaration(TransactionLogValue)
    new = dataclasses.field(default=-1, metadata=tagged(NEXT_TAG, INT16))
    declared.insert(-1, ("newer_producer_epoch", int, new))
    return dataclasses.make_dataclass("WithANewerField", declared, slots=True, kw_only=True)


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
    """Which fields, with which tags and types, is Kafka's word: tests/codec/test_kafka_schema.py holds
    the table to the TransactionLogValue schema in the pinned Kafka jars."""
    assert [f.name for f in dataclasses.fields(TransactionLogValue)] == [*NAMES, "unknown_tagged_fields"]
    assert [f.tag for f in TAGGED_FIELDS] == sorted(f.tag for f in TAGGED_FIELDS)


def test_fields_are_passed_by_name_and_by_position_only_through_the_table():
    with pytest.raises(TypeError):
        TransactionLogValue(1, 42, 3, 60000, TransactionState.ONGOING, None, 1010, 1000)  # type: ignore[call-arg]
    by_position = value_from_fields(1, 42, 3, 60000, TransactionState.ONGOING, {"orders": [0, 2]}, 1010, 1000)
    assert by_position == a_value()
    assert value_from_fields(*(getattr(a_value(), name) for name in NAMES), ((9, b"x"),)) == dataclasses.replace(
        a_value(), unknown_tagged_fields=((9, b"x"),)
    )


def test_the_decode_commands_json_takes_its_fields_from_the_table():
    record = TransactionLogRecord(5, 1010, "t", a_value(client_transaction_version=2))
    assert list(json.loads(decode_command.format_record(record))["value"]) == NAMES


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
    assert value_fields(cls) == (*VALUE_FIELDS, ValueField("newer_producer_epoch", INT16, NEXT_TAG, -1))
    value = a_value(cls, previous_producer_id=42, client_transaction_version=2, newer_producer_epoch=5)
    raw = encode_value(value)
    # Encoded after the others, in tag order: 3 tagged fields (tag, size, bytes), the new tag the last.
    assert raw.endswith(bytes((3, 0, 8)) + (42).to_bytes(8, "big") + bytes((2, 2, 0, 2)) + bytes((NEXT_TAG, 2, 0, 5)))
    # The codec as it is reads it as a newer Kafka's field, as the broker does.
    assert decode_value(raw).unknown_tagged_fields == ((NEXT_TAG, b"\x00\x05"),)

    declared_as(cls, monkeypatch)
    # Decoded (the general reader) into the new class by its positional maker.
    assert decode_value(raw, True, positional_maker(cls)) == value
    # Shown last in the decode command's JSON, whether the codec passed it or left it at its default.
    partitions, _, make_value = decode_command._line_makers("")
    line = json.loads(decode_value(raw, partitions, make_value))
    assert list(line) == [*NAMES, "newer_producer_epoch"] and line["newer_producer_epoch"] == 5
    at_default = json.loads(decode_value(encode_value(a_value(cls)), partitions, make_value))
    assert list(at_default) == [*NAMES, "newer_producer_epoch"] and at_default["newer_producer_epoch"] == -1
    assert json.loads(decode_command.format_record(TransactionLogRecord(5, 1010, "t", value)))["value"] == line


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d.insert(-1, ("x", int, dataclasses.field(default=-1, metadata=tagged(2, INT16)))),
            f"tag 2 after tag {NEXT_TAG}",
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


# The tagged fields decode_value's fast path is for, those coordinators write (none,
# PreviousProducerId, ClientTransactionVersion, both), after arrays of every usual shape.
USUAL_PARTITIONS = [None, {}, {"orders": [3]}, {"orders": [0, 2], "b": [1]}]
USUAL_TAGS: list[dict[str, int]] = [
    {},
    {"previous_producer_id": 41},
    {"client_transaction_version": 2},
    {"previous_producer_id": 41, "client_transaction_version": 2},
]


@pytest.mark.parametrize("partitions", USUAL_PARTITIONS)
@pytest.mark.parametrize("tags", USUAL_TAGS)
def test_a_field_written_on_every_record_takes_every_record_off_the_fast_paths(monkeypatch, partitions, tags):
    """The fast path compares a value's whole tagged-field section with the usual ones: a value that
    carries one more tagged field (named in the table or not) goes to the general reader, which reads
    it right. A field that Kafka writes on every record puts every record on that path."""
    general = value_decode.v1_tagged_fields
    calls: list[int] = []
    monkeypatch.setattr(value_decode, "v1_tagged_fields", lambda buf, pos: calls.append(pos) or general(buf, pos))
    usual = dataclasses.replace(a_value(**tags), partitions=partitions)
    assert decode_value(encode_value(usual)) == usual and calls == []  # a fast path
    with_more = dataclasses.replace(usual, unknown_tagged_fields=((NEXT_TAG, b"\x00\x05"),))
    assert decode_value(encode_value(with_more)) == with_more and len(calls) == 1  # the general reader
