"""The codec's table of the value's fields (TransactionLogValue, exporter/codec/value.py) against
Kafka's own: the TransactionLogValue schema (common/message/TransactionLogValue.json) in the pinned
Kafka versions' jars (kafka_2.13 up to 3.8, kafka-transaction-coordinator since 3.9). The newest
pinned version's fields are exactly the table's (names, wire types, tags, defaults); every pinned
version's are among them. A table that names, types or tags a field otherwise than Kafka, or leaves
out one that Kafka's newest pinned version has, fails here (docs/changing.md says what to change)."""

from __future__ import annotations

import json
import re
import zipfile
from typing import Any

import pytest

from exporter.codec.value import ARRAY, INT8, INT16, INT32, INT64, VALUE_FIELDS, VALUE_VERSIONS
from txn_workshop.harness import jars
from txn_workshop.harness.versions import KAFKA_VERSIONS

pytestmark = pytest.mark.tools  # the Kafka jars

SCHEMA = "common/message/TransactionLogValue.json"
# Kafka's names of the fields of every version, as the codec names them. A tagged field's name is
# Kafka's in snake case (LastProducerEpoch: last_producer_epoch).
FIXED_NAMES = {
    "ProducerId": "producer_id",
    "ProducerEpoch": "producer_epoch",
    "TransactionTimeoutMs": "transaction_timeout_ms",
    "TransactionStatus": "state",
    "TransactionPartitions": "partitions",
    "TransactionLastUpdateTimestampMs": "last_update_timestamp_ms",
    "TransactionStartTimestampMs": "start_timestamp_ms",
}
WIRES = {"int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64, "[]PartitionsSchema": ARRAY}
Row = tuple[str, str, int | None, Any]  # name, wire, tag (None: a field of every version), default


def kafka_schema(version: str) -> dict[str, Any]:
    """TransactionLogValue.json from the jars of a pinned Kafka version (its // comments dropped)."""
    libs = jars.kafka_libs(version)
    for jar in sorted(libs.glob("*.jar")):
        with zipfile.ZipFile(jar) as z:
            if SCHEMA in z.namelist():
                return json.loads(re.sub(r"(?m)^\s*//.*$", "", z.read(SCHEMA).decode()))
    raise AssertionError(f"no {SCHEMA} in any jar of Kafka {version} ({libs})")


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def kafka_rows(schema: dict[str, Any]) -> list[Row]:
    """The schema as the codec's table is laid out: the value's version first (the record's prefix,
    not a field of the schema), the fields of every version in the schema's order, then the tagged
    ones in tag order (as they are written, whatever their place in the schema)."""
    fixed: list[Row] = [("version", INT16, None, None)]
    tagged: list[Row] = []
    for f in schema["fields"]:
        wire = WIRES.get(f["type"], f["type"])
        if "tag" in f:
            assert f["taggedVersions"] == "1+", f
            tagged.append((snake(f["name"]), wire, f["tag"], int(f.get("default", 0))))
        else:
            assert f["versions"] == "0+", f
            fixed.append((FIXED_NAMES.get(f["name"], f["name"]), wire, None, None))
    return fixed + sorted(tagged, key=lambda row: row[2] or 0)


def codec_rows() -> list[Row]:
    return [(f.name, f.wire, f.tag, f.default) for f in VALUE_FIELDS]


def test_the_table_is_the_newest_pinned_kafkas_schema() -> None:
    newest = KAFKA_VERSIONS[0]
    schema = kafka_schema(newest)
    assert codec_rows() == kafka_rows(schema), f"TransactionLogValue against Kafka {newest}'s: docs/changing.md"
    assert schema["validVersions"] == f"{VALUE_VERSIONS[0]}-{VALUE_VERSIONS[-1]}"
    assert schema["flexibleVersions"] == "1+"
    # The partitions array's entries, which the codec reads by hand (partitions.py): no tagged field.
    (partitions,) = [f for f in schema["fields"] if f["name"] == "TransactionPartitions"]
    assert partitions.get("nullableVersions") == "0+"
    assert [(f["name"], f["type"], "tag" in f) for f in partitions["fields"]] == [
        ("Topic", "string", False),
        ("PartitionIds", "[]int32", False),
    ]


@pytest.mark.parametrize("version", KAFKA_VERSIONS)
def test_every_pinned_kafkas_fields_are_in_the_table(version: str) -> None:
    """Older versions have fewer tagged fields (none before value v1), never another one."""
    rows = kafka_rows(kafka_schema(version))
    assert [row for row in rows if row not in codec_rows()] == []
