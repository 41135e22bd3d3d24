"""Real broker log lines captured from a broker of every pinned version (held markers, failing
__transaction_state appends at INFO and at DEBUG, a final append in the retry queue, markers for a
deleted topic, partitions moving away), parsed line by line: each line's events as
`<version>.expected.json` lists them, nothing else.

The captures are excerpts of server.log written by `python -m tests.sources.make_broker_log_corpus
VERSION` (its docstring says how); expected.json was checked by hand, and is held here to plain
counts of the lines each kind of event comes from, and to the version table's log formats.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from exporter.broker_log import BrokerLogParser
from exporter.sources.broker_log_tail import BrokerLogFollower
from tests.sources.make_broker_log_corpus import as_json
from txn_workshop.harness.versions import KAFKA_VERSIONS, kafka_version

CORPUS = Path(__file__).parent / "broker_log_corpus"
VERSIONS = KAFKA_VERSIONS
pytestmark = pytest.mark.tested_on("broker-log corpus")


def _expected(version: str) -> dict:
    return json.loads((CORPUS / f"{version}.expected.json").read_text())


@pytest.mark.parametrize("version", VERSIONS)
def test_each_line_parses_as_expected(version):
    lines = (CORPUS / f"{version}.log").read_bytes().split(b"\n")[:-1]
    parser = BrokerLogParser()
    got = [as_json(event, number) for number, line in enumerate(lines, 1) for event in parser.feed([line])]
    expected = _expected(version)
    assert got == expected["events"]
    assert (parser.lines, parser.malformed, parser.unrecognized) == (
        expected["lines"],
        expected["malformed"],
        expected["unrecognized"],
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_the_follower_reads_the_same_events_in_one_go(version):
    follower = BrokerLogFollower(CORPUS / f"{version}.log", from_start=True)
    events = follower.poll()
    follower.close()
    stats = events.pop()
    expected = _expected(version)
    assert [{k: v for k, v in as_json(e, 0).items() if k != "line"} for e in events] == [
        {k: v for k, v in e.items() if k != "line"} for e in expected["events"]
    ]
    assert stats.lines == expected["lines"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_corpus_covers_every_kind_of_line(version):
    kinds = {(e["event"], e.get("error"), e.get("elected")) for e in _expected(version)["events"]}
    assert kinds >= {
        ("MarkerWriteRetried", "NOT_ENOUGH_REPLICAS", None),
        ("TransactionLogAppendFailed", "COORDINATOR_NOT_AVAILABLE", None),  # INFO only
        ("TransactionLogAppendFailed", "NOT_ENOUGH_REPLICAS", None),  # DEBUG + INFO, counted once
        ("CompleteAppendRetried", None, None),
        ("CoordinatorChanged", None, True),
        ("CoordinatorChanged", None, False),
    }


def _lines(version: str) -> list[str]:
    return (CORPUS / f"{version}.log").read_text().splitlines()


@pytest.mark.parametrize("version", VERSIONS)
def test_events_agree_with_plain_counts_of_their_lines(version):
    """The expected events, counted per kind, against the lines that carry them found by plain
    substrings: a line the parser missed or read twice changes a count."""
    lines = _lines(version)
    events = _expected(version)["events"]

    def lines_with(*texts: str) -> int:
        return sum(all(t in line for t in texts) for line in lines if line.startswith("["))

    def events_of(kind: str, **fields) -> int:
        return sum(e["event"] == kind and all(e.get(k) == v for k, v in fields.items()) for e in events)

    assert events_of("MarkerWriteRetried") == lines_with(
        "'s transaction marker for partition ", "has failed with error ", ", retrying"
    )
    assert events_of("MarkerWriteFailed") == (
        lines_with("'s transaction marker for partition ", "has permanently failed with error ")
        + lines_with("'s transaction marker from partition ", "This partition will be removed")
    )
    # One event per failed append: its INFO line (a DEBUG line before it gives the raw error).
    assert events_of("TransactionLogAppendFailed") == lines_with(
        " append transaction log for ", " transition failed due to "
    )
    assert events_of("CompleteAppendRetried") == lines_with("Not available to append PendingCompleteTxn")
    assert events_of("CoordinatorChanged", elected=True) == lines_with("Elected as the txn coordinator for partition ")
    assert events_of("CoordinatorChanged", elected=False) == lines_with(
        "Resigned as the txn coordinator for partition "
    )
    debug = lines_with("DEBUG ", "'s new metadata ", " failed due to ")
    assert debug > 0 and events_of("TransactionLogAppendFailed", error="NOT_ENOUGH_REPLICAS") == debug


@pytest.mark.parametrize("version", VERSIONS)
def test_the_log_formats_are_those_of_the_version_table(version):
    """What workshop/txn_workshop/harness/versions.py says a version's lines look like, as its broker wrote them."""
    row = kafka_version(version)
    text = "\n".join(_lines(version))
    states = set(re.findall(r"txnState=(\w+)", text))
    assert states and all((s.isupper() if row.log_state_names == "enum" else not s.isupper()) for s in states), states
    assert f"PendingCompleteTxn{row.pending_complete_txn_bracket}transactionalId=" in text
