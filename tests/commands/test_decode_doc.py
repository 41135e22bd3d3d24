"""docs/commands.md's `txn-exporter decode` section, held to the codec's table of value fields: its
example line is what decode prints for the record it shows, its list of the tagged fields' defaults
is the table's, and its unknown tag is the next one. A tagged field added to the table fails here
until the page names it (docs/changing.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from exporter.codec import TransactionLogRecord, TransactionLogValue, TransactionState
from exporter.codec.value import TAGGED_FIELDS
from exporter.commands.decode import format_record

PAGE = Path(__file__).resolve().parents[2] / "docs" / "commands.md"
DEFAULTS = re.compile(r"at their defaults when the record does not carry them \(((?:`\w+` -?\d+(?:,\s+)?)+)")


def _section() -> str:
    text = PAGE.read_text()
    start = text.index("## `txn-exporter decode`")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else len(text)]


def test_the_example_line_is_what_decode_prints():
    (example,) = re.findall(r"```json\n(.*?)\n```", _section(), re.DOTALL)
    shown = json.loads(example)
    value = dict(shown["value"], state=TransactionState[shown["value"]["state"]])
    record = TransactionLogRecord(
        shown["offset"], shown["timestamp_ms"], shown["transactional_id"], TransactionLogValue(**value)
    )
    assert format_record(record) == example + "\n", (
        f"{PAGE.name}: the decode example lacks a field, or has one too many"
    )


def test_the_tagged_fields_defaults_are_the_codecs():
    match = DEFAULTS.search(" ".join(_section().split()))
    assert match, f"{PAGE.name}: no list of the tagged fields' defaults"
    listed = [(name, int(default)) for name, default in re.findall(r"`(\w+)` (-?\d+)", match.group(1))]
    assert listed == [(f.name, f.default) for f in TAGGED_FIELDS]


def test_the_unknown_tag_shown_is_the_next_one():
    tags = [int(tag) for tag in re.findall(r'"tag": (\d+)', _section())]
    assert tags and set(tags) == {TAGGED_FIELDS[-1].tag + 1}
