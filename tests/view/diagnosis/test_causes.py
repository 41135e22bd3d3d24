"""The causes (exporter.view.diagnosis.causes, over partition_facts and meanings): a meaning and a
cause for every error name on both paths, each marker error in an operator's words, and what a late
ONGOING transaction's producer state says of its client."""

from __future__ import annotations

import re

import pytest

from exporter.broker_log.errors import ERRORS, UNKNOWN
from exporter.contracts.cluster import Brokers, ClusterSnapshot, Fact, PartitionMetadata
from exporter.contracts.runbooks import LATE, MARKER_FAILURES, MARKERS_PENDING
from exporter.view.diagnosis.assembly import diagnose
from exporter.view.diagnosis.causes import (
    MARKER_FATAL,
    MARKER_PERMANENT,
    MARKER_RETRIABLE,
    append_cause,
    marker_cause,
)
from exporter.view.diagnosis.meanings import MEANINGS, meaning
from exporter.view.diagnosis.partition_facts import SnapshotFacts
from tests.view.diagnosis.builders import (
    AS_OF,
    BOOTSTRAP,
    HELD,
    NOW,
    ORDERS_MIN_ISR_2,
    error,
    producer,
    row,
    snapshot,
)

ALL_NAMES = [name for _, name, _ in ERRORS] + [UNKNOWN, "NOT_A_KAFKA_ERROR"]


# --- every error name -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_error_name_has_a_meaning_and_a_cause_on_both_paths(name):
    known = SnapshotFacts.of(
        snapshot(HELD, ORDERS_MIN_ISR_2, live={1, 2}, fenced={3}),
        ("orders", 0),
        Fact(Brokers(frozenset({1, 2}), frozenset({3}))),
    )
    unknown = SnapshotFacts.missing("no answer within 0.5 s")
    assert meaning(name)
    for facts in (known, unknown):
        for cause in (marker_cause(name, facts), append_cause(name, facts)):
            assert cause and "None" not in cause and "{" not in cause, (name, cause)
    if name in MEANINGS:
        assert MEANINGS[name] in marker_cause(name, unknown) or name in (
            *MARKER_RETRIABLE,
            *MARKER_PERMANENT,
            *MARKER_FATAL,
        )
    elif name in {n for _, n, _ in ERRORS}:
        assert re.search(r"Kafka error -?\d+", marker_cause(name, unknown))


def test_the_marker_path_errors_all_have_their_own_words():
    """The errors TransactionMarkerRequestCompletionHandler handles are never answered generically."""
    facts = SnapshotFacts.missing("x")
    for name in (*MARKER_RETRIABLE, *MARKER_PERMANENT, *MARKER_FATAL):
        assert "not one the marker" not in marker_cause(name, facts)
        assert name in MEANINGS


def test_a_registered_broker_out_of_the_isr_is_called_slow_or_stalled():
    snap = snapshot(HELD, ORDERS_MIN_ISR_2)  # broker 3 still registered, unfenced
    facts = SnapshotFacts.of(snap, ("orders", 0), snap.brokers)
    assert "broker 3 (in the cluster: slow, stalled" in marker_cause("NOT_ENOUGH_REPLICAS", facts)


@pytest.mark.parametrize(
    "name, words",
    [
        ("UNKNOWN_TOPIC_OR_PARTITION", "does not host the partition"),
        ("KAFKA_STORAGE_ERROR", "log directory holding the partition is offline"),
        ("REQUEST_TIMED_OUT", "did not acknowledge it in time"),
        ("INVALID_PRODUCER_EPOCH", "newer epoch of this producer"),
        ("TRANSACTION_COORDINATOR_FENCED", "newer coordinator epoch"),
        ("UNSUPPORTED_FOR_MESSAGE_FORMAT", "cannot take transaction markers"),
        ("MESSAGE_TOO_LARGE", "treats this answer to a marker as a bug"),
    ],
)
def test_each_marker_error_in_an_operators_words(name, words):
    snap = snapshot({("orders", 1): PartitionMetadata(3, (3, 2), (3, 2))}, ORDERS_MIN_ISR_2)
    diag = diagnose(row(partitions=["orders-1"], marker_errors=[error("orders-1", name)]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert words in p["errors"][0]["cause"]
    assert diag["runbook"]["section"] == (MARKER_FAILURES if name in MARKER_PERMANENT else MARKERS_PENDING)
    if name == "KAFKA_STORAGE_ERROR":
        assert "kafka-log-dirs.sh --bootstrap-server kafka-1:9092 --describe --broker-list 3 --topic-list orders" in [
            c["command"] for c in diag["commands"]
        ]


# --- late ONGOING: the producers -----------------------------------------------------------------


def test_a_late_ongoing_whose_client_stopped():
    snap = snapshot(
        producers={("orders", 0): (producer(9, 1_000), producer()), ("orders", 1): (producer(last_ago_ms=40_000),)}
    )
    diag = diagnose(row("ONGOING", late=True, stuck=False), snap, NOW, BOOTSTRAP, True)
    assert diag["runbook"]["section"] == LATE
    assert (
        "the client stopped: its last write to these partitions was 30.0 s ago, longer than its own 5 s timeout"
        in diag["summary"]
    )
    p0 = diag["partitions"][0]
    assert p0["producer"] == {
        "found": True,
        "producer_epoch": 7,
        "last_timestamp_ms": NOW - 30_000,
        "last_write_seconds_ago": 30.0,
        "coordinator_epoch": 3,
        "transaction_start_offset": 17,
        "as_of_ms": AS_OF,
    }
    assert "kafka-transactions.sh --bootstrap-server kafka-1:9092 describe-producers --topic orders --partition 0" in [
        c["command"] for c in diag["commands"]
    ]


def test_a_late_ongoing_whose_client_is_alive_or_never_wrote():
    alive = snapshot(producers={("orders", 0): (producer(last_ago_ms=1_000),), ("orders", 1): ()})
    assert (
        "the client is alive: it wrote 1.0 s ago"
        in diagnose(row("ONGOING", late=True), alive, NOW, BOOTSTRAP, True)["summary"]
    )
    never = snapshot(producers={("orders", 0): (), ("orders", 1): (producer(9),)})
    assert "no state of producer 4001" in diagnose(row("ONGOING", late=True), never, NOW, BOOTSTRAP, True)["summary"]
    base = snapshot()
    unknown = ClusterSnapshot(
        base.brokers, base.topics, base.min_insync_replicas, {("orders", 0): Fact(None, problem="REQUEST_TIMED_OUT")}
    )
    summary = diagnose(row("ONGOING", late=True), unknown, NOW, BOOTSTRAP, True)["summary"]
    assert "producer state is unknown (REQUEST_TIMED_OUT)" in summary
