"""A row's diagnosis put together (exporter.view.diagnosis.assembly.diagnose): per data partition
its facts, errors and cause, the coordinator's partition, the summary and runbook, over hand-built
cluster snapshots."""

from __future__ import annotations

from alerts.generate import DEFAULT_RUNBOOK_URL
from exporter.contracts.cluster import (
    BROKER,
    DEFAULT,
    TOPIC,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    TopicMetadata,
)
from exporter.contracts.runbooks import APPEND_ERRORS, MARKERS_PENDING
from exporter.view.diagnosis.assembly import diagnose
from exporter.view.diagnosis.commands import LAST_RESORT
from tests.view.diagnosis.builders import (
    AS_OF,
    BOOTSTRAP,
    HELD,
    NOW,
    ORDERS_MIN_ISR_2,
    error,
    row,
    snapshot,
)

# --- data partitions ------------------------------------------------------------------------------


def test_not_enough_replicas_names_the_broker_out_of_the_isr_and_the_setting():
    snap = snapshot(HELD, ORDERS_MIN_ISR_2, live={1, 2}, fenced={3})
    diag = diagnose(row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert p["partition"] == "orders-0"
    assert (p["leader"], p["replicas"], p["isr"], p["out_of_isr"], p["brokers_down"]) == (2, [2, 3], [2], [3], [3])
    assert (p["min_insync_replicas"], p["min_insync_replicas_source"], p["unknown"]) == (2, "topic", None)
    cause = p["errors"][0]["cause"]
    assert "leader 2 refuses the marker" in cause and "ISR [2] of replicas [2, 3]" in cause
    assert "min.insync.replicas=2 (the topic's own setting)" in cause and "broker 3 (fenced" in cause
    assert diag["summary"].startswith("orders-0: NOT_ENOUGH_REPLICAS: leader 2 refuses")
    assert diag["runbook"] == {
        "section": MARKERS_PENDING,
        "url": f"{DEFAULT_RUNBOOK_URL}#kafkatransactionmarkerspendingtoolong",
    }
    commands = [c["command"] for c in diag["commands"]]
    assert (
        commands[0] == "kafka-transactions.sh --bootstrap-server kafka-1:9092 describe --transactional-id orders-tx-1"
    )
    assert "kafka-topics.sh --bootstrap-server kafka-1:9092 --describe --topic orders" in commands
    assert (
        "kafka-configs.sh --bootstrap-server kafka-1:9092 --describe --entity-type topics --entity-name orders --all"
    ) in commands
    (last_resort,) = [c for c in diag["commands"] if c["purpose"] == LAST_RESORT]
    assert last_resort["command"].endswith(
        "--alter --entity-type topics --entity-name orders --add-config min.insync.replicas=1"
    )
    assert "--add-config min.insync.replicas=2" in last_resort["why"]  # the topic's own value, restored
    assert diag["abort"]["allowed"] is False and "PREPARE_COMMIT" in diag["abort"]["why"]


def test_a_broker_setting_is_restored_by_deleting_the_topic_override():
    snap = snapshot(HELD, {"orders": MinInsyncReplicas(2, BROKER)}, live={1, 2})
    diag = diagnose(row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert "min.insync.replicas=2 (the brokers' setting)" in p["errors"][0]["cause"]
    assert "broker 3 (not in the cluster: down)" in p["errors"][0]["cause"]
    (last_resort,) = [c for c in diag["commands"] if c["purpose"] == LAST_RESORT]
    assert "--delete-config min.insync.replicas" in last_resort["why"]


def test_not_enough_replicas_with_the_isr_back_says_the_next_retry_succeeds():
    snap = snapshot({("orders", 0): PartitionMetadata(2, (2, 3), (2, 3))}, ORDERS_MIN_ISR_2)
    diag = diagnose(
        row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")]), snap, NOW, BOOTSTRAP, True
    )
    cause = diag["partitions"][0]["errors"][0]["cause"]
    assert (
        "after writing it" in cause
        and "meets min.insync.replicas=2 (the topic's own setting) now" in cause
        and "next retry should succeed" in cause
    )
    assert diag["partitions"][0]["cause"] is None
    assert not [c for c in diag["commands"] if c["purpose"] == LAST_RESORT]


def test_not_leader_or_follower_names_the_leader_now_and_every_error_seen_is_explained():
    snap = snapshot({("orders", 0): PartitionMetadata(1, (1, 2, 3), (1, 2))}, {"orders": MinInsyncReplicas(3, TOPIC)})
    errors = [error("orders-0", "NOT_LEADER_OR_FOLLOWER", 3, ago_ms=5_000), error("orders-0", "NOT_ENOUGH_REPLICAS")]
    diag = diagnose(row(partitions=["orders-0"], marker_errors=errors), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert [e["error"] for e in p["errors"]] == ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER"]  # newest first
    moved = p["errors"][1]["cause"]
    assert "no longer the partition's leader" in moved and "(now broker 1)" in moved
    assert "kafka-reassign-partitions.sh --bootstrap-server kafka-1:9092 --list" in [
        c["command"] for c in diag["commands"]
    ]
    assert diag["summary"].startswith("orders-0: NOT_ENOUGH_REPLICAS")  # the latest error leads


def test_a_deleted_topic_is_said_so():
    snap = snapshot()
    snap = ClusterSnapshot(
        snap.brokers,
        {**snap.topics, "gone": Fact(TopicMetadata({}, "UNKNOWN_TOPIC_OR_PARTITION"), AS_OF)},
        {**snap.min_insync_replicas, "gone": Fact(None, problem="no min.insync.replicas")},
        {},
    )
    diag = diagnose(
        row(partitions=["gone-0"], marker_errors=[error("gone-0", "UNKNOWN_TOPIC_OR_PARTITION")]),
        snap,
        NOW,
        BOOTSTRAP,
        True,
    )
    (p,) = diag["partitions"]
    assert p["exists"] is False and p["unknown"] is None
    assert "no longer exists" in p["errors"][0]["cause"] and "does not exist" in p["cause"]


def test_no_leader_and_an_unreachable_leader_without_any_marker_error():
    snap = snapshot(
        {("orders", 0): PartitionMetadata(None, (2, 3), (2,)), ("orders", 1): PartitionMetadata(3, (3,), (3,))},
        ORDERS_MIN_ISR_2,
        live={1},
        fenced={2, 3},
    )
    diag = diagnose(row(), snap, NOW, BOOTSTRAP, True)
    by_name = {p["partition"]: p for p in diag["partitions"]}
    assert by_name["orders-0"]["cause"].startswith("no leader: ISR [2] of replicas [2, 3], broker 2 (fenced")
    assert "UnknownDestinationQueueSize" in by_name["orders-0"]["cause"]
    assert by_name["orders-1"]["cause"].startswith("its leader, broker 3 (fenced")
    assert "cannot be reached" in by_name["orders-1"]["cause"]
    assert diag["summary"].startswith("orders-0: no leader") and diag["runbook"]["section"] == MARKERS_PENDING


def test_healthy_partitions_without_errors_say_what_is_left_to_check():
    snap = snapshot(
        {("orders", 0): PartitionMetadata(2, (2, 3), (2, 3)), ("orders", 1): PartitionMetadata(3, (3, 2), (3, 2))},
        ORDERS_MIN_ISR_2,
    )
    with_log = diagnose(row(), snap, NOW, BOOTSTRAP, True)
    assert with_log["partitions"] == [] and "no marker error read" in with_log["summary"]
    without_log = diagnose(row(), snap, NOW, BOOTSTRAP, False)
    assert "--broker-log" in without_log["summary"]


def test_unknown_cluster_state_still_gives_a_diagnosis():
    snap = snapshot(HELD, ORDERS_MIN_ISR_2, unknown="no answer within 0.5 s")
    diag = diagnose(row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert p["leader"] is None and p["isr"] is None and p["min_insync_replicas"] is None
    assert "metadata: no answer within 0.5 s" in p["unknown"]
    assert "Check the partition's ISR against it" in p["errors"][0]["cause"]
    assert diag["coordinator"]["broker"] == 1  # from the row: the exporter's own broker
    assert diag["coordinator"]["unknown"].startswith("metadata: no answer")


# --- the coordinator's partition ------------------------------------------------------------------


def test_append_errors_on_the_coordinators_partition():
    snap = snapshot(
        {("__transaction_state", 0): PartitionMetadata(1, (1, 2), (1,))},
        {"__transaction_state": MinInsyncReplicas(2, TOPIC)},
        live={1},
    )
    appended = [
        {"error": "COORDINATOR_NOT_AVAILABLE", "count": 4, "last_seen_ms": NOW - 200, "target_state": "PREPARE_ABORT"}
    ]
    diag = diagnose(row("ONGOING", late=True, stuck=False, append_errors=appended), snap, NOW, BOOTSTRAP, True)
    c = diag["coordinator"]
    assert (c["broker"], c["partition"], c["isr"], c["out_of_isr"], c["min_insync_replicas"]) == (
        1,
        "__transaction_state-0",
        [1],
        [2],
        2,
    )
    cause = c["append_errors"][0]["cause"]
    assert "transaction.state.log.min.isr" in cause and "broker 2 (not in the cluster: down)" in cause
    assert c["append_errors"][0]["target_state"] == "PREPARE_ABORT"
    assert diag["runbook"]["section"] == APPEND_ERRORS
    assert "cannot append its PREPARE_ABORT" in diag["summary"]
    assert (
        "kafka-topics.sh --bootstrap-server kafka-1:9092 --describe --topic __transaction_state"
        " --under-min-isr-partitions"
    ) in [x["command"] for x in diag["commands"]]


def test_a_prepare_whose_coordinator_cannot_append_points_at_the_state_log():
    snap = snapshot(
        {("__transaction_state", 0): PartitionMetadata(1, (1, 2), (1,)), **HELD},
        {"__transaction_state": MinInsyncReplicas(2, TOPIC), "orders": MinInsyncReplicas(1, DEFAULT)},
    )
    diag = diagnose(row(), snap, NOW, BOOTSTRAP, True)
    assert diag["runbook"]["section"] == APPEND_ERRORS
    assert "final COMPLETE_* record" in diag["summary"]
    assert diag["coordinator"]["cause"].startswith("ISR [1] of replicas [1, 2] is below min.insync.replicas=2")
