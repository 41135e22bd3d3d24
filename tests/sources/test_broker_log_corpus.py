"""Real broker log lines captured from 3.9.2 and 4.4.0 brokers (held markers, failing
__transaction_state appends at INFO and at DEBUG, a final append in the retry queue, partitions moving
away), parsed line by line: each line's events as `<version>.expected.json` lists them, nothing else.

The captures are excerpts of server.log from the fault runs of tests/integration/test_broker_log_faults.py
(most of the thousands of identical marker-retry lines left out); expected.json was checked by hand.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from exporter.broker_log import BrokerLogParser
from exporter.codec.states import TransactionState
from exporter.sources.broker_log import BrokerLogFollower

CORPUS = Path(__file__).parent / "broker_log_corpus"
VERSIONS = ("3.9.2", "4.4.0")


def _expected(version: str) -> dict:
    return json.loads((CORPUS / f"{version}.expected.json").read_text())


def _as_json(event, line: int) -> dict:
    fields = asdict(event)
    fields.pop("seen_ms", None)  # when the line was read, not what it says
    if "target_state" in fields:
        fields["target_state"] = TransactionState(fields["target_state"]).name
    return {"line": line, "event": type(event).__name__, **fields}


@pytest.mark.parametrize("version", VERSIONS)
def test_each_line_parses_as_expected(version):
    lines = (CORPUS / f"{version}.log").read_bytes().split(b"\n")[:-1]
    parser = BrokerLogParser()
    got = [_as_json(event, number) for number, line in enumerate(lines, 1) for event in parser.feed([line])]
    expected = _expected(version)
    assert got == expected["events"]
    assert (parser.lines, parser.malformed, parser.unrecognized) == (
        expected["lines"], expected["malformed"], expected["unrecognized"])


@pytest.mark.parametrize("version", VERSIONS)
def test_the_follower_reads_the_same_events_in_one_go(version):
    follower = BrokerLogFollower(CORPUS / f"{version}.log", from_start=True)
    events = follower.poll()
    follower.close()
    stats = events.pop()
    expected = _expected(version)
    assert [{k: v for k, v in _as_json(e, 0).items() if k != "line"} for e in events] == [
        {k: v for k, v in e.items() if k != "line"} for e in expected["events"]]
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
