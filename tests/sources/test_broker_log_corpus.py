"""Real broker log lines captured from a broker of every pinned version (held markers, failing
__transaction_state appends at INFO and at DEBUG, a final append in the retry queue, markers for a
deleted topic, partitions moving away), parsed line by line: each line's events as
`<version>.expected.json` lists them, nothing else.

The captures are excerpts of server.log written by `python -m tests.sources.make_broker_log_corpus
VERSION` (its docstring says how); expected.json was checked by hand, and is held here to plain
counts of the lines each kind of event comes from, and to the version table's log formats.

The ZooKeeper-mode rows (tests/tested_on.py: the newest and oldest 3.x) have captures of their own,
`<version>-zookeeper.*`, from the same scenario on a ZooKeeper-mode cluster: the coordinator's lines
are the same code's in both modes, but what leads to them (elections and resignations through
LeaderAndIsr/StopReplica from a ZooKeeper-elected controller instead of KRaft metadata) is not.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from exporter.broker_log import BrokerLogParser
from exporter.contracts.kafka_versions import WHOLLY, coverage, from_log
from exporter.contracts.known_bugs import KNOWN_BUGS
from exporter.sources.broker_log_tail import BrokerLogFollower
from tests import tested_on
from tests.model.test_late_timeouts_rotations import new_model
from tests.sources.make_broker_log_corpus import as_json, corpus_name
from txn_workshop.harness.versions import kafka_version

CORPUS = Path(__file__).parent / "broker_log_corpus"
CHECK = "broker-log corpus"
pytestmark = [
    pytest.mark.tested_on(CHECK),
    pytest.mark.parametrize(("version", "mode"), tested_on.runs(CHECK)),
]


def _corpus(version: str, mode: str, suffix: str) -> Path:
    return CORPUS / f"{corpus_name(version, mode)}{suffix}"


def _expected(version: str, mode: str) -> dict:
    return json.loads(_corpus(version, mode, ".expected.json").read_text())


def test_each_line_parses_as_expected(version, mode):
    lines = _corpus(version, mode, ".log").read_bytes().split(b"\n")[:-1]
    parser = BrokerLogParser()
    got = [as_json(event, number) for number, line in enumerate(lines, 1) for event in parser.feed([line])]
    expected = _expected(version, mode)
    assert got == expected["events"]
    assert (parser.lines, parser.malformed, parser.unrecognized) == (
        expected["lines"],
        expected["malformed"],
        expected["unrecognized"],
    )


def test_the_follower_reads_the_same_events_in_one_go(version, mode):
    follower = BrokerLogFollower(_corpus(version, mode, ".log"), from_start=True)
    events = follower.poll()
    follower.close()
    stats = events.pop()
    expected = _expected(version, mode)
    assert [{k: v for k, v in as_json(e, 0).items() if k != "line"} for e in events] == [
        {k: v for k, v in e.items() if k != "line"} for e in expected["events"]
    ]
    assert stats.lines == expected["lines"]


def test_the_corpus_covers_every_kind_of_line(version, mode):
    kinds = {(e["event"], e.get("error"), e.get("elected")) for e in _expected(version, mode)["events"]}
    assert kinds >= {
        ("MarkerWriteRetried", "NOT_ENOUGH_REPLICAS", None),
        ("TransactionLogAppendFailed", "COORDINATOR_NOT_AVAILABLE", None),  # INFO only
        ("TransactionLogAppendFailed", "NOT_ENOUGH_REPLICAS", None),  # DEBUG + INFO, counted once
        ("CompleteAppendRetried", None, None),
        ("CoordinatorChanged", None, True),
        ("CoordinatorChanged", None, False),
        ("CoordinatorLoadStarted", None, None),
        ("CoordinatorLoadFinished", None, None),
        ("CoordinatorStarting", None, None),
    }


def _lines(version: str, mode: str) -> list[str]:
    return _corpus(version, mode, ".log").read_text().splitlines()


def test_events_agree_with_plain_counts_of_their_lines(version, mode):
    """The expected events, counted per kind, against the lines that carry them found by plain
    substrings: a line the parser missed or read twice changes a count."""
    lines = _lines(version, mode)
    events = _expected(version, mode)["events"]

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
    assert events_of("CoordinatorLoadStarted") == lines_with("Loading transaction metadata from __transaction_state-")
    assert events_of("CoordinatorLoadFinished") == lines_with(
        "Finished loading ",
        " transaction metadata from __transaction_state-",
        " milliseconds was spent in the scheduler.",
    )
    assert events_of("CoordinatorStarting") == lines_with("[TransactionCoordinator id=", "] Starting up. (") == 1
    # Every successful append's `succeeded` line (DEBUG) is one transition, its time placed in UTC (the
    # captures were written in UTC: the line's own time).
    assert events_of("TransitionAppended") == lines_with(" DEBUG ", "'s transaction state to ", " succeeded (") > 0
    debug = lines_with("DEBUG ", "'s new metadata ", " failed due to ")
    assert debug > 0 and events_of("TransactionLogAppendFailed", error="NOT_ENOUGH_REPLICAS") == debug


def test_the_log_formats_are_those_of_the_version_table(version, mode):
    """What workshop/txn_workshop/harness/versions.py says a version's lines look like, as its broker wrote them."""
    row = kafka_version(version)
    text = "\n".join(_lines(version, mode))
    states = set(re.findall(r"txnState=(\w+)", text))
    assert states and all((s.isupper() if row.log_state_names == "enum" else not s.isupper()) for s in states), states
    assert f"PendingCompleteTxn{row.pending_complete_txn_bracket}transactionalId=" in text


def test_reloads_without_a_leadership_change_where_kafka_15468_lives(version, mode):
    """KAFKA-15468 as the coordinators of the corpus wrote it: loads of a partition at the epoch of its
    previous load, no resignation between, on the KRaft brokers of the versions the known-bug table
    gives it (3.6.2 and 3.7.2 loaded two partitions again at epoch 0, seconds after their first loads),
    never on one with the fix, nor in ZooKeeper mode (a broker ignores a LeaderAndIsr at the leader
    epoch it has, unless a KRaft controller sent it: ReplicaManager.becomeLeaderOrFollower)."""
    (bug,) = [b for b in KNOWN_BUGS if b.jira == "KAFKA-15468"]
    model, _ = new_model()
    model.apply_batch(BrokerLogParser().feed(_corpus(version, mode, ".log").read_bytes().split(b"\n")[:-1]))
    loads = model.snapshot(0, 0, lambda: None)[0].coordinator_loads
    storm = mode == "kraft" and coverage(from_log(version), bug.intervals) == WHOLLY
    assert (loads.reloads_without_leader_change > 0) == storm
    assert loads.loading == 0 and loads.duration_buckets[-1] >= 4  # every load finished
