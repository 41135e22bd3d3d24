"""The diagnosis rules (exporter.view.diagnosis): a cause for every error name, what each cluster
state says, the runbook sections and the commands, over hand-built cluster snapshots."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from alerts.generate import DEFAULT_RUNBOOK_URL
from exporter.broker_log.errors import ERRORS, UNKNOWN
from exporter.contracts import runbooks
from exporter.contracts.cluster import (
    BROKER,
    DEFAULT,
    TOPIC,
    Brokers,
    ClusterSnapshot,
    Fact,
    MinInsyncReplicas,
    PartitionMetadata,
    ProducerState,
    TopicMetadata,
)
from exporter.view import diagnosis as d

NOW = 1_800_000_000_000
AS_OF = NOW - 1_000
BOOTSTRAP = "kafka-1:9092"
ALL_NAMES = [name for _, name, _ in ERRORS] + [UNKNOWN, "NOT_A_KAFKA_ERROR"]


def snapshot(
    partitions: dict[tuple[str, int], PartitionMetadata] | None = None,
    min_isr: dict[str, MinInsyncReplicas] | None = None,
    live: set[int] = frozenset({1, 2, 3}),
    fenced: set[int] = frozenset(),
    producers: dict[tuple[str, int], tuple[ProducerState, ...]] | None = None,
    unknown: str | None = None,
) -> ClusterSnapshot:
    """A snapshot of the given partitions (plus __transaction_state-0 led by 1, ISR [1], min ISR 1);
    with `unknown`, every metadata and config lookup failed with that problem."""
    found = {("__transaction_state", 0): PartitionMetadata(1, (1,), (1,)), **(partitions or {})}
    topics: dict[str, dict[int, PartitionMetadata]] = {}
    for (topic, index), metadata in found.items():
        topics.setdefault(topic, {})[index] = metadata
    configs = {"__transaction_state": MinInsyncReplicas(1, TOPIC), **(min_isr or {})}
    if unknown:
        return ClusterSnapshot(
            Fact(None, problem=unknown),
            {t: Fact(None, problem=unknown) for t in topics},
            {t: Fact(None, problem=unknown) for t in topics},
            {},
        )
    return ClusterSnapshot(
        Fact(Brokers(frozenset(live), frozenset(fenced)), AS_OF),
        {t: Fact(TopicMetadata(ps), AS_OF) for t, ps in topics.items()},
        {t: Fact(v, AS_OF) for t, v in configs.items()},
        {tp: Fact(v, AS_OF) for tp, v in (producers or {}).items()},
    )


def row(state: str = "PREPARE_COMMIT", **changes: object) -> dict:
    base = {
        "transactional_id": "orders-tx-1",
        "state": state,
        "producer_id": 4001,
        "producer_epoch": 7,
        "state_entered_ms": NOW - 60_000,
        "transaction_start_ms": NOW - 61_000,
        "transaction_timeout_ms": 5_000,
        "late": False if state == "ONGOING" else None,
        "stuck": state != "ONGOING",
        "coordinator_partition": 0,
        "coordinator_broker": 1,
        "partitions": ["orders-0", "orders-1"],
        "marker_errors": [],
    }
    base.update(changes)
    return base


def error(partition: str, name: str, count: int = 100, ago_ms: int = 100) -> dict:
    return {"partition": partition, "error": name, "count": count, "last_seen_ms": NOW - ago_ms}


HELD = {("orders", 0): PartitionMetadata(2, (2, 3), (2,)), ("orders", 1): PartitionMetadata(1, (1, 2), (1, 2))}
ORDERS_MIN_ISR_2 = {"orders": MinInsyncReplicas(2, TOPIC)}


# --- every error name -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ALL_NAMES)
def test_every_error_name_has_a_meaning_and_a_cause_on_both_paths(name):
    known = d._PartitionFacts.of(
        snapshot(HELD, ORDERS_MIN_ISR_2, live={1, 2}, fenced={3}),
        ("orders", 0),
        Fact(Brokers(frozenset({1, 2}), frozenset({3}))),
    )
    unknown = d._PartitionFacts.missing("no answer within 0.5 s")
    assert d.meaning(name)
    for facts in (known, unknown):
        for cause in (d.marker_cause(name, facts), d.append_cause(name, facts)):
            assert cause and "None" not in cause and "{" not in cause, (name, cause)
    if name in d.MEANINGS:
        assert d.MEANINGS[name] in d.marker_cause(name, unknown) or name in (
            *d.MARKER_RETRIABLE,
            *d.MARKER_PERMANENT,
            *d.MARKER_FATAL,
        )
    elif name in {n for _, n, _ in ERRORS}:
        assert re.search(r"Kafka error -?\d+", d.marker_cause(name, unknown))


def test_the_marker_path_errors_all_have_their_own_words():
    """The errors TransactionMarkerRequestCompletionHandler handles are never answered generically."""
    facts = d._PartitionFacts.missing("x")
    for name in (*d.MARKER_RETRIABLE, *d.MARKER_PERMANENT, *d.MARKER_FATAL):
        assert "not one the marker" not in d.marker_cause(name, facts)
        assert name in d.MEANINGS


# --- data partitions ------------------------------------------------------------------------------


def test_not_enough_replicas_names_the_broker_out_of_the_isr_and_the_setting():
    snap = snapshot(HELD, ORDERS_MIN_ISR_2, live={1, 2}, fenced={3})
    diag = d.diagnose(row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert p["partition"] == "orders-0"
    assert (p["leader"], p["replicas"], p["isr"], p["out_of_isr"], p["brokers_down"]) == (2, [2, 3], [2], [3], [3])
    assert (p["min_insync_replicas"], p["min_insync_replicas_source"], p["unknown"]) == (2, "topic", None)
    cause = p["errors"][0]["cause"]
    assert "leader 2 refuses the marker" in cause and "ISR [2] of replicas [2, 3]" in cause
    assert "min.insync.replicas=2 (the topic's own setting)" in cause and "broker 3 (fenced" in cause
    assert diag["summary"].startswith("orders-0: NOT_ENOUGH_REPLICAS: leader 2 refuses")
    assert diag["runbook"] == {
        "section": d.MARKERS_PENDING,
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
    (last_resort,) = [c for c in diag["commands"] if c["purpose"] == d.LAST_RESORT]
    assert last_resort["command"].endswith(
        "--alter --entity-type topics --entity-name orders --add-config min.insync.replicas=1"
    )
    assert "--add-config min.insync.replicas=2" in last_resort["why"]  # the topic's own value, restored
    assert diag["abort"]["allowed"] is False and "PREPARE_COMMIT" in diag["abort"]["why"]


def test_a_broker_setting_is_restored_by_deleting_the_topic_override():
    snap = snapshot(HELD, {"orders": MinInsyncReplicas(2, BROKER)}, live={1, 2})
    diag = d.diagnose(row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert "min.insync.replicas=2 (the brokers' setting)" in p["errors"][0]["cause"]
    assert "broker 3 (not in the cluster: down)" in p["errors"][0]["cause"]
    (last_resort,) = [c for c in diag["commands"] if c["purpose"] == d.LAST_RESORT]
    assert "--delete-config min.insync.replicas" in last_resort["why"]


def test_a_registered_broker_out_of_the_isr_is_called_slow_or_stalled():
    snap = snapshot(HELD, ORDERS_MIN_ISR_2)  # broker 3 still registered, unfenced
    facts = d._PartitionFacts.of(snap, ("orders", 0), snap.brokers)
    assert "broker 3 (in the cluster: slow, stalled" in d.marker_cause("NOT_ENOUGH_REPLICAS", facts)


def test_not_enough_replicas_with_the_isr_back_says_the_next_retry_succeeds():
    snap = snapshot({("orders", 0): PartitionMetadata(2, (2, 3), (2, 3))}, ORDERS_MIN_ISR_2)
    diag = d.diagnose(
        row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS_AFTER_APPEND")]), snap, NOW, BOOTSTRAP, True
    )
    cause = diag["partitions"][0]["errors"][0]["cause"]
    assert (
        "after writing it" in cause
        and "meets min.insync.replicas=2 (the topic's own setting) now" in cause
        and "next retry should succeed" in cause
    )
    assert diag["partitions"][0]["cause"] is None
    assert not [c for c in diag["commands"] if c["purpose"] == d.LAST_RESORT]


def test_not_leader_or_follower_names_the_leader_now_and_every_error_seen_is_explained():
    snap = snapshot({("orders", 0): PartitionMetadata(1, (1, 2, 3), (1, 2))}, {"orders": MinInsyncReplicas(3, TOPIC)})
    errors = [error("orders-0", "NOT_LEADER_OR_FOLLOWER", 3, ago_ms=5_000), error("orders-0", "NOT_ENOUGH_REPLICAS")]
    diag = d.diagnose(row(partitions=["orders-0"], marker_errors=errors), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert [e["error"] for e in p["errors"]] == ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER"]  # newest first
    moved = p["errors"][1]["cause"]
    assert "no longer the partition's leader" in moved and "(now broker 1)" in moved
    assert "kafka-reassign-partitions.sh --bootstrap-server kafka-1:9092 --list" in [
        c["command"] for c in diag["commands"]
    ]
    assert diag["summary"].startswith("orders-0: NOT_ENOUGH_REPLICAS")  # the latest error leads


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
    diag = d.diagnose(row(partitions=["orders-1"], marker_errors=[error("orders-1", name)]), snap, NOW, BOOTSTRAP, True)
    (p,) = diag["partitions"]
    assert words in p["errors"][0]["cause"]
    assert diag["runbook"]["section"] == (d.MARKER_FAILURES if name in d.MARKER_PERMANENT else d.MARKERS_PENDING)
    if name == "KAFKA_STORAGE_ERROR":
        assert "kafka-log-dirs.sh --bootstrap-server kafka-1:9092 --describe --broker-list 3 --topic-list orders" in [
            c["command"] for c in diag["commands"]
        ]


def test_a_deleted_topic_is_said_so():
    snap = snapshot()
    snap = ClusterSnapshot(
        snap.brokers,
        {**snap.topics, "gone": Fact(TopicMetadata({}, "UNKNOWN_TOPIC_OR_PARTITION"), AS_OF)},
        {**snap.min_insync_replicas, "gone": Fact(None, problem="no min.insync.replicas")},
        {},
    )
    diag = d.diagnose(
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
    diag = d.diagnose(row(), snap, NOW, BOOTSTRAP, True)
    by_name = {p["partition"]: p for p in diag["partitions"]}
    assert by_name["orders-0"]["cause"].startswith("no leader: ISR [2] of replicas [2, 3], broker 2 (fenced")
    assert "UnknownDestinationQueueSize" in by_name["orders-0"]["cause"]
    assert by_name["orders-1"]["cause"].startswith("its leader, broker 3 (fenced")
    assert "cannot be reached" in by_name["orders-1"]["cause"]
    assert diag["summary"].startswith("orders-0: no leader") and diag["runbook"]["section"] == d.MARKERS_PENDING


def test_healthy_partitions_without_errors_say_what_is_left_to_check():
    snap = snapshot(
        {("orders", 0): PartitionMetadata(2, (2, 3), (2, 3)), ("orders", 1): PartitionMetadata(3, (3, 2), (3, 2))},
        ORDERS_MIN_ISR_2,
    )
    with_log = d.diagnose(row(), snap, NOW, BOOTSTRAP, True)
    assert with_log["partitions"] == [] and "no marker error read" in with_log["summary"]
    without_log = d.diagnose(row(), snap, NOW, BOOTSTRAP, False)
    assert "--broker-log" in without_log["summary"]


def test_unknown_cluster_state_still_gives_a_diagnosis():
    snap = snapshot(HELD, ORDERS_MIN_ISR_2, unknown="no answer within 0.5 s")
    diag = d.diagnose(row(marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]), snap, NOW, BOOTSTRAP, True)
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
    diag = d.diagnose(row("ONGOING", late=True, stuck=False, append_errors=appended), snap, NOW, BOOTSTRAP, True)
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
    assert diag["runbook"]["section"] == d.APPEND_ERRORS
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
    diag = d.diagnose(row(), snap, NOW, BOOTSTRAP, True)
    assert diag["runbook"]["section"] == d.APPEND_ERRORS
    assert "final COMPLETE_* record" in diag["summary"]
    assert diag["coordinator"]["cause"].startswith("ISR [1] of replicas [1, 2] is below min.insync.replicas=2")


# --- late ONGOING: the producers -----------------------------------------------------------------


def producer(pid: int = 4001, last_ago_ms: int = 30_000, start: int = 17) -> ProducerState:
    return ProducerState(pid, 7, NOW - last_ago_ms, 3, start)


def test_a_late_ongoing_whose_client_stopped():
    snap = snapshot(
        producers={("orders", 0): (producer(9, 1_000), producer()), ("orders", 1): (producer(last_ago_ms=40_000),)}
    )
    diag = d.diagnose(row("ONGOING", late=True, stuck=False), snap, NOW, BOOTSTRAP, True)
    assert diag["runbook"]["section"] == d.LATE
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
        in d.diagnose(row("ONGOING", late=True), alive, NOW, BOOTSTRAP, True)["summary"]
    )
    never = snapshot(producers={("orders", 0): (), ("orders", 1): (producer(9),)})
    assert "no state of producer 4001" in d.diagnose(row("ONGOING", late=True), never, NOW, BOOTSTRAP, True)["summary"]
    base = snapshot()
    unknown = ClusterSnapshot(
        base.brokers, base.topics, base.min_insync_replicas, {("orders", 0): Fact(None, problem="REQUEST_TIMED_OUT")}
    )
    summary = d.diagnose(row("ONGOING", late=True), unknown, NOW, BOOTSTRAP, True)["summary"]
    assert "producer state is unknown (REQUEST_TIMED_OUT)" in summary


# --- what is looked up, commands, runbooks, hanging -------------------------------------------------


def test_wanted_asks_only_for_the_rows_that_need_a_diagnosis():
    rows = [
        row("ONGOING", transactional_id="fine", partitions=["quiet-0"], late=False, stuck=False),
        row(
            "ONGOING", transactional_id="late", partitions=[f"my-topic-{n}" for n in range(15)], late=True, stuck=False
        ),
        row(partitions=["a-b-c-3"], marker_errors=[error("a-b-c-3", "NOT_ENOUGH_REPLICAS")]),
    ]
    topics, producers = d.wanted(rows)
    assert topics == {"__transaction_state", "my-topic", "a-b-c"}
    assert producers == [("my-topic", n) for n in range(d.MAX_PRODUCER_PARTITIONS_PER_ROW)]
    assert d.split_partition("a-b-c-3") == ("a-b-c", 3) and d.split_partition("nodash") is None


def test_commands_quote_what_clients_chose():
    tid = "pay; rm -rf / $(id)"
    diag = d.diagnose(
        row(transactional_id=tid, marker_errors=[error("orders-0", "NOT_ENOUGH_REPLICAS")]),
        snapshot(HELD, ORDERS_MIN_ISR_2),
        NOW,
        BOOTSTRAP,
        True,
    )
    describe = diag["commands"][0]["command"]
    assert shlex.split(describe)[-1] == tid and "'pay; rm -rf / $(id)'" in describe


def test_runbook_sections_exist_and_the_url_is_the_alerts_one():
    assert runbooks.RUNBOOK_URL == DEFAULT_RUNBOOK_URL
    headings = re.findall(
        r"^## (\S+)$", (Path(__file__).parents[2] / "alerts" / "runbooks.md").read_text(), re.MULTILINE
    )
    assert set(runbooks.DIAGNOSED) <= set(headings)


def test_hanging_advice():
    finding = {
        "topic": "orders",
        "partition": 3,
        "producer_id": 9,
        "epoch": 0,
        "start_offset": 1234,
        "abort_command": "kafka-transactions.sh --bootstrap-server kafka-1:9092 abort --topic orders"
        " --partition 3 --start-offset 1234",
    }
    advice = d.hanging_advice(finding, BOOTSTRAP)
    assert advice["runbook"]["section"] == d.HANGING
    assert [c["purpose"] for c in advice["commands"]] == [d.CONFIRM, d.FIX]
    assert advice["commands"][0]["command"] == (
        "kafka-transactions.sh --bootstrap-server kafka-1:9092 describe-producers --topic orders --partition 3"
    )
    assert advice["commands"][1]["command"] == finding["abort_command"]


def test_coordinator_broker_from_the_metadata_else_the_fallback():
    snap = snapshot({("__transaction_state", 1): PartitionMetadata(3, (3,), (3,))})
    assert d.coordinator_broker(snap, 1) == 3
    assert d.coordinator_broker(snap, 7, fallback=2) == 2
    assert d.coordinator_broker(snapshot(unknown="x"), 1) is None


def test_bounded_whatever_is_stuck():
    """The oldest MAX_DIAGNOSED_ROWS rows needing one get a diagnosis; of a wide transaction, the
    first MAX_EXAMINED_PARTITIONS partitions are looked up (errored ones first) and at most
    MAX_SHOWN_PARTITIONS detailed, the rest counted."""
    wide = [f"t{n}-0" for n in range(80)]
    errors = [error(p, "NOT_ENOUGH_REPLICAS", ago_ms=n) for n, p in enumerate(wide[60:])]  # the last 20 refuse
    big = row(partitions=wide, marker_errors=errors)
    topics, _ = d.wanted([big])
    assert topics == {"__transaction_state", *(f"t{n}" for n in range(60, 80)), *(f"t{n}" for n in range(30))}
    known = {(f"t{n}", 0): PartitionMetadata(2, (2, 3), (2,)) for n in range(80)}
    diag = d.diagnose(
        big, snapshot(known, {f"t{n}": MinInsyncReplicas(2, TOPIC) for n in range(80)}), NOW, BOOTSTRAP, True
    )
    assert [p["partition"] for p in diag["partitions"]] == wide[60:70] and diag["partitions_not_shown"] == 40
    assert all(p["cause"] is None for p in diag["partitions"])  # each error's cause says it: not twice
    doc = {"now_ms": NOW, "broker_log": True, "transactions": [row(transactional_id=f"x{n}") for n in range(120)]}
    d.attach(doc, snapshot(), BOOTSTRAP)
    assert sum(r.get("diagnosis") is not None for r in doc["transactions"]) == d.MAX_DIAGNOSED_ROWS
    assert doc["diagnoses_omitted"] == 20 and doc["transactions"][-1].get("diagnosis") is None
