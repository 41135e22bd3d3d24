"""The known Kafka bugs in a row's diagnosis (exporter.view.diagnosis.known_bugs, through
assembly.attach): named with the workaround and the link where the facts match on the broker's
version; the ordinary cause first; unknown versions and a missing broker log said, not guessed."""

from __future__ import annotations

from typing import Any

from exporter.contracts.bug_facts import BugContext, CoordinatorLog
from exporter.contracts.cluster import PartitionMetadata
from exporter.contracts.kafka_versions import ANY_PATCH, API_VERSIONS, between, from_log
from exporter.contracts.known_bugs import KNOWN_BUGS
from exporter.contracts.runbooks import KNOWN_BUG, MARKERS_PENDING
from exporter.view import page, table
from exporter.view.diagnosis.assembly import attach
from exporter.view.diagnosis.known_bugs import counts
from exporter.view.query import Query
from tests.view.diagnosis.builders import BOOTSTRAP, HELD, NOW, ORDERS_MIN_ISR_2, error, row, snapshot

HEALTHY = {("orders", 0): PartitionMetadata(1, (1, 2), (1, 2)), ("orders", 1): PartitionMetadata(1, (1, 2), (1, 2))}


def document(rows: list[dict], hanging: list[dict] | None = None, broker_log: bool = True) -> Any:
    return {
        "now_ms": NOW,
        "query": {"states": [], "min_age_seconds": 0, "limit": 100},
        "late_padding_seconds": 0.0,
        "broker_log": broker_log,
        "hanging_scan_ms": None,
        "in_flight_matching": len(rows),
        "transactions": rows,
        "hanging_scan": hanging is not None,
        "hanging_matching": len(hanging or []),
        "hanging": hanging or [],
    }


def reloaded(version: str = "3.7.1", **log: int | None) -> BugContext:
    """Broker 1 (the coordinator, whose log is read) on `version`; its partition 0 loaded a minute after
    the row entered PREPARE (the builders' rows enter their state a minute before NOW)."""
    return BugContext(
        versions={1: from_log(version)},
        coordinator_logs={0: CoordinatorLog(**{"last_load_ms": NOW - 30_000, **log})},
        log_broker=1,
    )


def diagnosed(context: BugContext, snap: Any = None, **changes: Any) -> dict:
    doc = document([row(**changes)])
    attach(doc, snap or snapshot(HEALTHY), BOOTSTRAP, 1, None, context)
    return doc["transactions"][0]["diagnosis"]


def test_a_stuck_prepare_after_a_reload_on_3_7_1_names_kafka_16352_as_its_summary() -> None:
    diagnosis = diagnosed(reloaded())
    (match,) = diagnosis["known_bugs"]["matches"]
    assert diagnosis["summary"] == match["line"]
    assert match["line"].startswith("Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0): held in PREPARE_COMMIT since")
    assert match["link"] == "https://issues.apache.org/jira/browse/KAFKA-16352"
    assert "__transaction_state-0" in match["workaround"] and "broker 1" in match["workaround"]
    assert (match["certain"], match["version"], match["version_source"]) == (True, "3.7.1", "log")
    assert diagnosis["runbook"]["section"] == KNOWN_BUG
    assert diagnosis["known_bugs"]["versions"] == {"coordinator": "3.7.1"}


def test_never_on_a_version_with_the_fix() -> None:
    diagnosis = diagnosed(reloaded("3.8.0"))
    assert diagnosis["known_bugs"]["matches"] == [] and diagnosis["known_bugs"]["not_checked"] == []
    assert not diagnosis["summary"].startswith("Matches") and diagnosis["runbook"]["section"] == MARKERS_PENDING


def test_the_ordinary_cause_comes_first_and_no_bug_is_claimed() -> None:
    diagnosis = diagnosed(reloaded(), snapshot(HELD, ORDERS_MIN_ISR_2))
    bugs = diagnosis["known_bugs"]
    assert bugs["matches"] == [] and bugs["ordinary_cause"].startswith("orders-0: ISR [2] of replicas [2, 3]")
    assert diagnosis["summary"].startswith("orders-0: ISR [2] of replicas [2, 3] is below min.insync.replicas=2")


def test_an_unknown_version_claims_nothing_and_the_row_says_the_version_is_unknown() -> None:
    diagnosis = diagnosed(reloaded("7.7.1-ccs"))
    bugs = diagnosis["known_bugs"]
    assert bugs["matches"] == [] and bugs["versions"] == {"coordinator": "7.7.1-ccs"}
    assert {n["why"] for n in bugs["not_checked"]} == {
        "the coordinator's Kafka version is unknown (7.7.1-ccs, from its log)"
    }


def test_a_version_not_learned_claims_nothing() -> None:
    diagnosis = diagnosed(BugContext(coordinator_logs={}, log_broker=1))
    bugs = diagnosis["known_bugs"]
    assert bugs["matches"] == [] and bugs["versions"] == {"coordinator": None}
    assert {n["why"] for n in bugs["not_checked"]} == {"the coordinator's Kafka version is not known"}


def test_without_the_broker_log_the_view_says_which_bugs_could_not_be_checked() -> None:
    diagnosis = diagnosed(BugContext(versions={1: from_log("3.7.1")}))
    not_checked = diagnosis["known_bugs"]["not_checked"]
    assert {n["jira"] for n in not_checked} == {"KAFKA-16352", "KAFKA-17941", "KAFKA-15468"}
    assert {n["why"] for n in not_checked} == {
        "needs the coordinator's log: the exporter does not read the coordinator's log (--broker-log)"
    }


def test_a_coordinator_whose_log_is_not_read_is_not_checked_with_why() -> None:
    context = BugContext(versions={2: from_log("3.7.1")}, coordinator_logs={}, log_broker=1)
    led_by_2 = snapshot({**HEALTHY, ("__transaction_state", 5): PartitionMetadata(2, (2,), (2,))})
    diagnosis = diagnosed(context, led_by_2, coordinator_partition=5)
    assert {n["why"] for n in diagnosis["known_bugs"]["not_checked"]} == {
        "needs the coordinator's log: the coordinator is broker 2, whose log this exporter does not read"
    }


def test_a_late_tv2_transaction_at_the_top_epoch_matches_from_the_records_alone() -> None:
    context = BugContext(versions={1: between((4, 2, 0), (4, 2, ANY_PATCH), API_VERSIONS)})
    diagnosis = diagnosed(context, state="ONGOING", late=True, stuck=None, producer_epoch=32767, transaction_version=2)
    (match,) = diagnosis["known_bugs"]["matches"]
    assert match["line"].startswith("Matches KAFKA-20090 (Kafka 4.2.x; fixed in 4.3.0): ONGOING past its timeout")
    assert match["version_source"] == API_VERSIONS


def test_a_patch_unknown_is_named_possible_with_the_fixed_patch() -> None:
    context = BugContext(
        versions={1: between((3, 9, 0), (3, 9, ANY_PATCH), API_VERSIONS)},
        coordinator_logs={0: CoordinatorLog(loading_since_ms=NOW - 600_000)},
        log_broker=1,
    )
    diagnosis = diagnosed(context, state="ONGOING", late=True, stuck=None)
    (match,) = diagnosis["known_bugs"]["matches"]
    assert not match["certain"] and match["fixed_in"] == ["3.9.2"]
    assert diagnosis["summary"].startswith("Possibly KAFKA-17941 (Kafka 3.9.x, patch unknown; fixed in 3.9.2)")


def hanging_row(**changes: Any) -> dict:
    return {
        "topic": "orders",
        "partition": 0,
        "producer_id": 9,
        "epoch": 3,
        "start_offset": 17,
        "transactional_id": None,
        "coordinator": None,
        "age_seconds": 3600.0,
        "verdict": "hanging",
        "reason": "no coordinator lists producer 9",
        "last_timestamp_ms": NOW - 3_600_000,
        "coordinator_epoch": 1,
        "abort_command": "kafka-transactions.sh --bootstrap-server kafka-1:9092 abort --topic orders --partition 0 --start-offset 17",
        "coordinator_broker": None,
        "runbook": {"section": "KafkaHangingTransactions", "url": "u"},
        "commands": [],
        **changes,
    }


def test_a_hanging_row_is_held_against_its_partition_leaders_version() -> None:
    doc = document([], [hanging_row()])
    attach(doc, snapshot(HEALTHY), BOOTSTRAP, 1, None, BugContext(versions={1: from_log("3.5.2")}))
    (match,) = doc["hanging"][0]["known_bugs"]["matches"]
    assert match["jira"] == "KAFKA-12671" and match["version"] == "3.5.2"
    doc = document([], [hanging_row()])
    attach(doc, snapshot(HEALTHY), BOOTSTRAP, 1, None, BugContext(versions={1: from_log("3.6.2")}))
    assert doc["hanging"][0]["known_bugs"]["matches"] == []
    doc = document([], [hanging_row(partition=7)])  # its leader unknown
    attach(doc, snapshot(HEALTHY), BOOTSTRAP, 1, None, BugContext(versions={1: from_log("3.5.2")}))
    assert doc["hanging"][0]["known_bugs"]["not_checked"] == [
        {"jira": "KAFKA-12671", "why": "the partition leader's Kafka version is not known"}
    ]


def test_the_page_and_the_table_show_the_match_its_link_and_what_was_not_checked() -> None:
    shown = {"age_seconds": 60.0, "duration_seconds": 61.0, "append_errors": [], "diagnosis": None}
    doc = document([row(**shown), row(transactional_id="other", coordinator_partition=3, **shown)])
    attach(doc, snapshot(HEALTHY), BOOTSTRAP, 1, None, reloaded())
    html = page.render(doc, Query())
    assert '<a href="https://issues.apache.org/jira/browse/KAFKA-16352">KAFKA-16352</a>' in html
    assert "Matches KAFKA-16352 (Kafka 3.7.1; fixed in 3.8.0)" in html
    assert "Kafka versions the known bugs are held against: broker 1: 3.7.1 (its log)." in html
    text = table.render(doc)
    assert "known bug: KAFKA-16352 matches, on Kafka 3.7.1 (from its log)" in text
    assert "https://issues.apache.org/jira/browse/KAFKA-16352" in text


def test_a_row_diagnosed_for_its_errors_alone_is_not_held_against_the_bugs() -> None:
    diagnosis = diagnosed(reloaded(), stuck=False, marker_errors=[error("orders-1", "REQUEST_TIMED_OUT")])
    assert "known_bugs" not in diagnosis


def test_the_rows_naming_each_bug_are_counted_every_bug_of_the_table_listed() -> None:
    doc = document([row(), row(transactional_id="young", stuck=False)], [hanging_row()])
    attach(doc, snapshot(HEALTHY), BOOTSTRAP, 1, None, reloaded("3.5.2"))
    found = counts(doc)
    assert found["KAFKA-16352"] == 1 and found["KAFKA-12671"] == 1  # 3.5.2: the hanging row's too
    assert set(found) == {bug.jira for bug in KNOWN_BUGS} and sum(found.values()) == 2
