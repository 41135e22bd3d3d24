"""The consumer groups of a row's `__consumer_offsets-N` (issue 31, item 2) in the view: which
partitions are looked up, the rows' `consumer_groups` in the JSON, a stuck row's diagnosis naming
the group whose committed offsets wait and its coordinator, and the terminal table and the page
saying the same (wording.offsets_groups). Hand-built lookups; tests/integration/
test_consumer_groups_view.py runs the real source against a real broker."""

from __future__ import annotations

import json

from exporter.contracts.cluster import Fact
from exporter.contracts.groups import OffsetsPartitionGroups, PendingGroup
from exporter.view import page, table
from exporter.view.diagnosis.assembly import attach
from exporter.view.diagnosis.consumer_groups import MAX_OFFSETS_PARTITIONS, offsets_partitions
from exporter.view.query import parse_query
from tests.view.diagnosis.builders import BOOTSTRAP, NOW, row, snapshot

EVIL = "<b>g</b>\x1b[31m"


def doc(*rows: dict) -> dict:
    return {
        "now_ms": NOW,
        "query": {"states": [], "min_age_seconds": 0, "limit": 100},
        "late_padding_seconds": 5,
        "broker_log": True,
        "hanging_scan_ms": None,
        "in_flight_matching": len(rows),
        "transactions": list(rows),
        "hanging_scan": False,
        "hanging_matching": 0,
        "hanging": [],
    }


def full_row(tid: str, state: str, partitions: list[str], **changes: object) -> dict:
    base = row(state, transactional_id=tid, partitions=partitions, **changes)
    base.update(age_seconds=60.0, duration_seconds=61.0, append_errors=[], diagnosis=None)
    return base


GROUPS = {
    7: Fact(OffsetsPartitionGroups((PendingGroup("etl", 2),), 3, 0, (("moving", "NOT_COORDINATOR"),)), NOW - 500),
    9: Fact(None, problem="no answer within 0.5 s"),
    11: Fact(OffsetsPartitionGroups((), 4, 250), NOW - 500),
}


def test_the_offsets_partitions_of_the_rows_shown_are_looked_up_once_each():
    rows = [
        full_row("a", "ONGOING", ["orders-0", "__consumer_offsets-7"]),
        full_row("b", "ONGOING", ["__consumer_offsets-7", "__consumer_offsets-9", "x__consumer_offsets-3"]),
        full_row("c", "ONGOING", ["orders-1"]),
    ]
    assert offsets_partitions(rows) == [7, 9]
    many = [full_row(f"t{n}", "ONGOING", [f"__consumer_offsets-{n}"]) for n in range(80)]
    assert offsets_partitions(many) == list(range(MAX_OFFSETS_PARTITIONS))


def test_each_row_names_the_groups_pending_on_its_offsets_partitions():
    document = doc(
        full_row("a", "ONGOING", ["orders-0", "__consumer_offsets-7", "__consumer_offsets-9"], stuck=None),
        full_row("b", "ONGOING", ["orders-1"], stuck=None),
        full_row("c", "ONGOING", ["__consumer_offsets-11"], stuck=None),
    )
    attach(document, snapshot(), BOOTSTRAP, 1, GROUPS)
    a, b, c = json.loads(json.dumps(document))["transactions"]
    assert a["consumer_groups"] == [
        {
            "partition": "__consumer_offsets-7",
            "pending_groups": [{"group_id": "etl", "coordinator": 2}],
            "groups_checked": 3,
            "groups_not_checked": 0,
            "unknown_groups": {"moving": "NOT_COORDINATOR"},
            "as_of_ms": NOW - 500,
            "unknown": None,
        },
        {
            "partition": "__consumer_offsets-9",
            "pending_groups": None,
            "groups_checked": None,
            "groups_not_checked": None,
            "unknown_groups": {},
            "as_of_ms": None,
            "unknown": "no answer within 0.5 s",
        },
    ]
    assert "consumer_groups" not in b  # no offsets partition: the row as before
    assert c["consumer_groups"][0]["pending_groups"] == [] and c["consumer_groups"][0]["groups_not_checked"] == 250
    assert a["diagnosis"] is None  # normal traffic: named, not diagnosed


def test_a_stuck_rows_diagnosis_says_whose_committed_offsets_wait_and_who_coordinates_them():
    document = doc(full_row("held", "PREPARE_COMMIT", ["orders-0", "__consumer_offsets-7"]))
    attach(document, snapshot(), BOOTSTRAP, 1, GROUPS)
    (held,) = document["transactions"]
    diagnosis = held["diagnosis"]
    assert diagnosis["summary"].endswith(
        "; the committed offsets of consumer group etl (coordinator: broker 2) wait behind it"
    )
    (wait,) = diagnosis["consumer_groups"]
    assert (wait["group_id"], wait["coordinator"], wait["partition"]) == ("etl", 2, "__consumer_offsets-7")
    assert "UNSTABLE_OFFSET_COMMIT" in wait["cause"] and wait["cause"].endswith("broker 2 coordinates the group")
    assert {
        "purpose": "confirm",
        "command": f"kafka-consumer-groups.sh --bootstrap-server {BOOTSTRAP} --describe --group etl",
        "why": "the group's coordinator, members and committed offsets (its pending ones appear once the transaction "
        "completes)",
    } in diagnosis["commands"]
    # Without pending groups (or without the lookup) the diagnosis is as before.
    plain = doc(full_row("held", "PREPARE_COMMIT", ["orders-0", "__consumer_offsets-11"]))
    attach(plain, snapshot(), BOOTSTRAP, 1, GROUPS)
    before = doc(full_row("held", "PREPARE_COMMIT", ["orders-0", "__consumer_offsets-11"]))
    attach(before, snapshot(), BOOTSTRAP, 1)
    assert plain["transactions"][0]["diagnosis"] == before["transactions"][0]["diagnosis"]
    assert "consumer_groups" not in before["transactions"][0]


def test_the_table_and_the_page_say_the_same_and_keep_ids_as_text():
    groups = {7: Fact(OffsetsPartitionGroups((PendingGroup("etl", 2), PendingGroup(EVIL, None)), 2), NOW)}
    document = doc(full_row("held", "PREPARE_COMMIT", ["orders-0", "__consumer_offsets-7"]))
    attach(document, snapshot(), BOOTSTRAP, 1, groups)
    said = "offsets pending for consumer groups etl (coordinator: broker 2), <b>g</b>\\x1b[31m (coordinator: ?)"
    text = table.render(document)
    assert f"  held: __consumer_offsets-7: {said}" in text.splitlines()
    assert "\x1b" not in text
    assert "  __consumer_offsets-7: consumer group etl's committed offsets wait" in text
    html = page.render(document, parse_query(""))
    assert "offsets pending for consumer groups etl (coordinator: broker 2), &lt;b&gt;g&lt;/b&gt;\\x1b[31m" in html
    assert "<b>g</b>" not in html and "\x1b" not in html
    assert "consumer group etl&#x27;s committed offsets wait" in html


def test_unknown_and_none_pending_in_words():
    from exporter.view.wording import offsets_groups

    document = doc(full_row("a", "ONGOING", ["__consumer_offsets-9", "__consumer_offsets-11"], stuck=None))
    attach(document, snapshot(), BOOTSTRAP, 1, GROUPS)
    unknown, none = document["transactions"][0]["consumer_groups"]
    assert offsets_groups(unknown) == "consumer groups unknown (no answer within 0.5 s)"
    assert offsets_groups(none) == "no consumer group's offsets pending (4 groups checked); 250 more groups not checked"
