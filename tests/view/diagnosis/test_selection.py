"""Which rows get a diagnosis and what is looked up for them (exporter.view.diagnosis.selection),
within its bounds whatever is stuck."""

from __future__ import annotations

from exporter.contracts.cluster import TOPIC, MinInsyncReplicas, PartitionMetadata
from exporter.view.diagnosis.assembly import attach, diagnose
from exporter.view.diagnosis.selection import (
    MAX_DIAGNOSED_ROWS,
    MAX_PRODUCER_PARTITIONS_PER_ROW,
    coordinator_broker,
    split_partition,
    wanted,
)
from tests.view.diagnosis.builders import BOOTSTRAP, NOW, error, row, snapshot


def test_wanted_asks_only_for_the_rows_that_need_a_diagnosis():
    rows = [
        row("ONGOING", transactional_id="fine", partitions=["quiet-0"], late=False, stuck=False),
        row(
            "ONGOING", transactional_id="late", partitions=[f"my-topic-{n}" for n in range(15)], late=True, stuck=False
        ),
        row(partitions=["a-b-c-3"], marker_errors=[error("a-b-c-3", "NOT_ENOUGH_REPLICAS")]),
    ]
    topics, producers = wanted(rows)
    assert topics == {"__transaction_state", "my-topic", "a-b-c"}
    assert producers == [("my-topic", n) for n in range(MAX_PRODUCER_PARTITIONS_PER_ROW)]
    assert split_partition("a-b-c-3") == ("a-b-c", 3) and split_partition("nodash") is None


def test_coordinator_broker_from_the_metadata_else_the_fallback():
    snap = snapshot({("__transaction_state", 1): PartitionMetadata(3, (3,), (3,))})
    assert coordinator_broker(snap, 1) == 3
    assert coordinator_broker(snap, 7, fallback=2) == 2
    assert coordinator_broker(snapshot(unknown="x"), 1) is None


def test_bounded_whatever_is_stuck():
    """The oldest MAX_DIAGNOSED_ROWS rows needing one get a diagnosis; of a wide transaction, the
    first MAX_EXAMINED_PARTITIONS partitions are looked up (errored ones first) and at most
    MAX_SHOWN_PARTITIONS detailed, the rest counted."""
    wide = [f"t{n}-0" for n in range(80)]
    errors = [error(p, "NOT_ENOUGH_REPLICAS", ago_ms=n) for n, p in enumerate(wide[60:])]  # the last 20 refuse
    big = row(partitions=wide, marker_errors=errors)
    topics, _ = wanted([big])
    assert topics == {"__transaction_state", *(f"t{n}" for n in range(60, 80)), *(f"t{n}" for n in range(30))}
    known = {(f"t{n}", 0): PartitionMetadata(2, (2, 3), (2,)) for n in range(80)}
    diag = diagnose(
        big, snapshot(known, {f"t{n}": MinInsyncReplicas(2, TOPIC) for n in range(80)}), NOW, BOOTSTRAP, True
    )
    assert [p["partition"] for p in diag["partitions"]] == wide[60:70] and diag["partitions_not_shown"] == 40
    assert all(p["cause"] is None for p in diag["partitions"])  # each error's cause says it: not twice
    doc = {"now_ms": NOW, "broker_log": True, "transactions": [row(transactional_id=f"x{n}") for n in range(120)]}
    attach(doc, snapshot(), BOOTSTRAP)
    assert sum(r.get("diagnosis") is not None for r in doc["transactions"]) == MAX_DIAGNOSED_ROWS
    assert doc["diagnoses_omitted"] == 20 and doc["transactions"][-1].get("diagnosis") is None
