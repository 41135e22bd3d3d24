"""The endpoint's diagnosis wiring (TransactionsEndpoint with a cluster lookup): what it asks the
cluster for, which rows get a diagnosis, the coordinator of every row, the page's refresh and its
hanging section's time. The lookup is a stand-in here; tests/integration/test_diagnosis.py runs the
real one against real brokers."""

from __future__ import annotations

import json
import re
import time

from exporter.contracts.cluster import (
    TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    TopicMetadata,
)
from exporter.contracts.events import HangingScanCompleted, MarkerWriteRetried, PartitionAssigned, PartitionReplayed
from exporter.contracts.hanging_rules import HANGING, Finding, OpenTransaction
from exporter.metrics import LatencyRecorders
from exporter.model import CoordinatorModel
from exporter.view import page
from exporter.view.endpoint import TransactionsEndpoint
from tests.model.builders import S, log_event

NOW = int(time.time() * 1000)
EVIL = "<script>alert(1)</script>; rm -rf /"


class Lookup:
    """Records what it was asked; answers `orders` (partition 0: leader 2, ISR [2] of [2, 3], min ISR
    2; partition 1 healthy) and __transaction_state (partition 0 led by broker 1)."""

    def __init__(self) -> None:
        self.asked: list[tuple[set[str], list[tuple[str, int]]]] = []

    def __call__(self, topics: set[str], producers: list[tuple[str, int]]) -> ClusterSnapshot:
        self.asked.append((topics, producers))
        metadata = {
            "orders": TopicMetadata({0: PartitionMetadata(2, (2, 3), (2,)), 1: PartitionMetadata(1, (1, 2), (1, 2))}),
            "__transaction_state": TopicMetadata({0: PartitionMetadata(1, (1,), (1,))}),
        }
        return ClusterSnapshot(
            Fact(Brokers(frozenset({1, 2}), frozenset({3})), NOW),
            {t: Fact(metadata.get(t, TopicMetadata({}, "UNKNOWN_TOPIC_OR_PARTITION")), NOW) for t in topics},
            {t: Fact(MinInsyncReplicas(2, TOPIC), NOW) for t in topics},
            {},
        )


def model_with(*events: object) -> CoordinatorModel:
    model = CoordinatorModel(LatencyRecorders().sinks())
    model.apply(PartitionAssigned(0))
    model.apply(PartitionReplayed(0))
    for event in events:
        model.apply(event)  # type: ignore[arg-type]
    return model


def held_model(tid: str = "held", age_ms: int = 70_000) -> CoordinatorModel:
    """`fresh` ONGOING; `tid` in PREPARE_COMMIT for `age_ms` (60 s timeout) over orders-0 and orders-1,
    orders-0 refusing its markers."""
    model = model_with(
        log_event("fresh", S.ONGOING, timestamp_ms=NOW - 1_000),
        log_event(tid, S.ONGOING, offset=1, timestamp_ms=NOW - age_ms - 500),
        log_event(tid, S.PREPARE_COMMIT, offset=2, timestamp_ms=NOW - age_ms),
    )
    model.apply(MarkerWriteRetried("NOT_ENOUGH_REPLICAS", tid, "orders-0", NOW - 100))
    return model


def call(endpoint: TransactionsEndpoint, query: str = "", accept: str = "") -> tuple[dict[str, str], str]:
    status, headers, body = endpoint(query, accept)
    assert status == 200, body
    return headers, body.decode()


def endpoint(model: CoordinatorModel, lookup: Lookup | None, **kwargs: object) -> TransactionsEndpoint:
    return TransactionsEndpoint(
        model,
        5,
        "kafka:9092",
        broker_log=True,
        clock=lambda: NOW / 1000,
        cluster_state=lookup,
        **kwargs,  # type: ignore[arg-type]
    )


def test_the_stuck_row_is_diagnosed_and_every_row_names_its_coordinator():
    lookup = Lookup()
    _, body = call(endpoint(held_model(), lookup))
    doc = json.loads(body)
    held, fresh = doc["transactions"]
    # Asked once: the coordinators' topic and the data topics of the rows needing a diagnosis only.
    assert lookup.asked == [({"__transaction_state", "orders"}, [])]
    assert (held["coordinator_broker"], fresh["coordinator_broker"]) == (1, 1)
    assert held["stuck"] is True and held["late"] is None and fresh["diagnosis"] is None
    assert held["age_seconds"] == 70.0 and held["duration_seconds"] == 70.05
    diagnosis = held["diagnosis"]
    (partition,) = diagnosis["partitions"]
    assert (partition["leader"], partition["isr"], partition["out_of_isr"], partition["min_insync_replicas"]) == (
        2,
        [2],
        [3],
        2,
    )
    assert "broker 3 (fenced" in partition["errors"][0]["cause"]
    assert diagnosis["runbook"]["section"] == "KafkaTransactionMarkersPendingTooLong"


def test_nothing_in_flight_asks_the_cluster_nothing_and_no_lookup_leaves_the_cluster_unknown():
    lookup = Lookup()
    call(endpoint(model_with(), lookup))
    assert lookup.asked == []
    _, body = call(endpoint(held_model(), None, coordinator=lambda: 7))
    held = json.loads(body)["transactions"][0]
    assert held["coordinator_broker"] == 7  # the exporter's own broker, when the metadata says nothing
    assert held["diagnosis"]["partitions"][0]["unknown"].startswith("metadata: not looked up")


def test_the_page_refreshes_faster_while_something_is_stuck_and_shows_the_diagnosis():
    headers, stuck = call(endpoint(held_model(), Lookup()), "format=html")
    assert f'<meta http-equiv="refresh" content="{page.STUCK_REFRESH_SECONDS}">' in stuck
    assert "every 2 s while something is stuck (else 10 s)" in stuck
    assert 'class="late">stuck</td>' in stuck and 'data-label="Diagnosis"' in stuck
    assert "ISR [2] of replicas [2, 3] is below min.insync.replicas=2" in stuck
    assert (
        'href="https://github.com/kafka-txn-exporter/kafka-txn-exporter/blob/main/alerts/runbooks.md#kafkatransactionmarkerspendingtoolong"'
        in stuck
    )
    assert "<script" not in stuck and "script-src" not in headers["Content-Security-Policy"]
    _, quiet = call(
        endpoint(model_with(log_event("fresh", S.ONGOING, timestamp_ms=NOW - 1_000)), Lookup()), "format=html"
    )
    assert f'<meta http-equiv="refresh" content="{page.REFRESH_SECONDS}">' in quiet
    assert 'data-label="Diagnosis"' not in quiet and '<span class="none">-</span></td>' in quiet


def test_untrusted_ids_in_a_diagnosis_stay_text_and_commands_quote_them():
    _, body = call(endpoint(held_model(EVIL), Lookup()))
    (command,) = [
        c["command"]
        for c in json.loads(body)["transactions"][0]["diagnosis"]["commands"]
        if "describe --transactional-id" in c["command"]
    ]
    assert command.endswith("describe --transactional-id '<script>alert(1)</script>; rm -rf /'")
    _, html = call(endpoint(held_model(EVIL), Lookup()), "format=html")
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_the_hanging_section_says_when_the_last_scan_ran():
    ghost = OpenTransaction("ghost", 0, 9, 0, -1, 12, NOW - 600_000)
    scan = HangingScanCompleted(
        1,
        1,
        1,
        findings=(Finding(ghost, 600_000, HANGING, None, None, "no coordinator lists the producer id"),),
        completed_ms=NOW - 4_200,
    )
    _, html = call(endpoint(model_with(scan), Lookup()), "format=html")
    assert re.search(r"Last scan at \d\d:\d\d:\d\d\.\d{3} UTC, 4\.2 s ago", html)
    _, body = call(endpoint(model_with(scan), Lookup()))
    (row,) = json.loads(body)["hanging"]
    assert row["runbook"]["section"] == "KafkaHangingTransactions" and row["coordinator_broker"] is None
    assert [c["purpose"] for c in row["commands"]] == ["confirm", "fix"]
    empty = HangingScanCompleted(1, 0, 0, completed_ms=NOW - 1_000)
    _, html = call(endpoint(model_with(empty), Lookup()), "format=html")
    assert re.search(r"None in the last scan \(at \d\d:\d\d:\d\d\.\d{3} UTC, 1\.0 s ago; 0 match\)", html)


def test_a_merged_view_carries_each_rows_diagnosis_across_its_broker_column():
    merged = endpoint(held_model(), Lookup(), broker_id=lambda: 1)
    _, body = call(merged, "scope=cluster")
    doc = json.loads(body)
    held = doc["transactions"][0]
    assert held["exporter"]["broker_id"] == 1 and held["diagnosis"]["runbook"]["section"]
    _, html = call(merged, "scope=cluster&format=html")
    columns = len(page._COLUMNS) + 1  # the merged table's broker column first
    assert f'<tr class="diagnosis"><td colspan="{columns}" data-label="Diagnosis">' in html
    assert html.count("<th>") == columns
