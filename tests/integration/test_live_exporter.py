"""`txn-exporter run` against real brokers of both versions: exact counts, pending markers held back,
partitions moving away, restarts of the exporter and of the broker."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.integration.exporter_process import ExporterProcess
from tests.integration.held_markers import pending_while_held
from txn_workshop.harness.admin import create_internal_topics, create_topic
from txn_workshop.harness.versions import DEFAULT_KAFKA_VERSION, FULL_SUITE_VERSIONS
from txn_workshop.harness.workload import run_mix, transaction_state_partition

LATENCY = "kafka_transaction_state_log_append_latency_seconds_count"
RECORDS = "kafka_transaction_state_log_records_total"
PENDING = "kafka_transactions_with_pending_markers"
TARGET_STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")


def _by_state(process: ExporterProcess, name: str) -> dict[str, float]:
    return {state: process.value(name, target_state=state) for state in TARGET_STATES}


def test_known_workload_gives_exact_counts_per_target_state(broker, exporter, request):
    prefix = f"counts-{request.node.callspec.id}"
    topic = f"{prefix}-orders"
    create_topic(broker.bootstrap_servers, topic, partitions=3)
    # On a fresh broker __transaction_state does not exist until a first transactional producer
    # asks for its coordinator: create it first (its one EMPTY record is history to the exporter).
    create_internal_topics(broker.bootstrap_servers)
    process = exporter(broker.bootstrap_servers)
    # Precondition: every partition of this single broker followed and live. Readiness does not
    # imply it: a partition still without a leader at the exporter's first complete view is followed
    # once elected, and what its coordinator wrote before is replayed as history.
    process.wait_for(lambda: process.value("txn_exporter_partitions_followed", phase="live") == 50, 60, "all live")
    ids = [f"{prefix}-{i}" for i in range(3)]
    result = run_mix(broker.bootstrap_servers, topic, ids, commits=4, aborts=2, timeouts=1)
    transactions = result.commits + result.aborts + result.timeouts

    def settled() -> bool:
        counts = _by_state(process, RECORDS)
        return (
            counts["COMPLETE_COMMIT"] >= result.commits and counts["COMPLETE_ABORT"] >= result.aborts + result.timeouts
        )

    process.wait_for(settled, 60, "every complete record")
    records, observed = _by_state(process, RECORDS), _by_state(process, LATENCY)
    assert records == observed  # one latency observation per live record, per target state
    assert records["PREPARE_COMMIT"] == records["COMPLETE_COMMIT"] == result.commits
    assert records["PREPARE_ABORT"] == records["COMPLETE_ABORT"] == result.aborts + result.timeouts
    # One producer per id for its commits and aborts, one more per timed-out producer: each inits once.
    assert records["EMPTY"] == len(ids) * (1 + 1)
    # A transaction writes ONGOING at least once (once per AddPartitionsToTxn round).
    assert transactions <= records["ONGOING"] <= 3 * transactions
    assert process.value(PENDING) == 0
    assert process.value("kafka_transaction_marker_completion_seconds_count", result="commit") == result.commits


def test_restart_rebuilds_the_same_gauges_without_replayed_latency(broker, exporter, request):
    prefix = f"restart-{request.node.callspec.id}"
    topic = f"{prefix}-orders"
    create_topic(broker.bootstrap_servers, topic, partitions=2)
    run_mix(broker.bootstrap_servers, topic, [f"{prefix}-{i}" for i in range(2)], commits=2, aborts=1)
    first = exporter(broker.bootstrap_servers)
    gauges = {k: v for k, v in first.samples().items() if k[0] in ("kafka_transactions", PENDING)}
    assert sum(v for (name, _), v in gauges.items() if name == "kafka_transactions") > 0
    first.stop()

    second = exporter(broker.bootstrap_servers)
    assert {k: v for k, v in second.samples().items() if k[0] in ("kafka_transactions", PENDING)} == gauges
    assert set(_by_state(second, LATENCY).values()) == {0}
    assert set(_by_state(second, RECORDS).values()) == {0}


def test_broker_restart_reports_the_source_down_then_recovers(own_broker, exporter, tmp_path):
    broker = own_broker(version=DEFAULT_KAFKA_VERSION)
    create_topic(broker.bootstrap_servers, "orders", partitions=1)
    run_mix(broker.bootstrap_servers, "orders", ["before"], commits=1, aborts=0)
    process = exporter(broker.bootstrap_servers)
    assert process.value("txn_exporter_source_up") == 1
    broker.stop()
    process.wait_for(lambda: process.value("txn_exporter_source_up") == 0, 60, "source down")
    assert process.get("/readyz")[0] == 503
    assert process.get("/healthz")[0] == 200  # alive: it is Kafka that is away
    broker.start()
    process.wait_for(lambda: process.value("txn_exporter_source_up") == 1, 90, "source up again")
    run_mix(broker.bootstrap_servers, "orders", ["after"], commits=1, aborts=0)
    process.wait_for(lambda: process.value(RECORDS, target_state="COMPLETE_COMMIT") == 1, 60, "live records again")


def test_a_new_clusters_first_transactions_are_counted(own_broker, exporter):
    """Started before `__transaction_state` exists, the exporter counts every record of the first
    transactions, as DumpLogSegments lists them: none was written before it looked, so none is history."""
    broker = own_broker(version=DEFAULT_KAFKA_VERSION, transaction_state_partitions=4)
    create_topic(broker.bootstrap_servers, "orders", partitions=1)
    # Ready: nothing to follow yet. Ownership read every 30 s as by default (the other tests: 1 s),
    # so the topic, created by the first transactional producer, is found after its first records.
    process = exporter(broker.bootstrap_servers, "--metadata-refresh-seconds", "30")
    result = run_mix(broker.bootstrap_servers, "orders", ["first-0", "first-1"], commits=2, aborts=1)
    process.wait_for(
        lambda: process.value(RECORDS, target_state="COMPLETE_ABORT") == result.aborts and process.value(PENDING) == 0,
        60,
        "the last transactions completed",
    )
    dumped = Counter(record.state for record in broker.transaction_log_records())
    assert dumped["COMPLETE_COMMIT"] == result.commits and dumped["EMPTY"] == 2
    process.wait_for(lambda: _by_state(process, RECORDS) == {s: dumped[s] for s in TARGET_STATES}, 30, "every record")


@pytest.fixture(scope="module", params=FULL_SUITE_VERSIONS)
def cluster(request, kafka_broker_factory, tmp_path_factory):
    """Two brokers: markers can be held back, and partitions can move from one to the other."""
    root = tmp_path_factory.mktemp(f"cluster-{request.param}")
    with kafka_broker_factory.joined_pair(root, request.param, transaction_state_partitions=8) as pair:
        create_topic(pair[0].bootstrap_servers, "held", partitions=1, replication_factor=2)
        yield pair


def test_pending_markers_while_markers_are_held_back(cluster, exporter):
    first, second = cluster
    process = exporter(first.bootstrap_servers, "--all-partitions")
    assert process.value(PENDING) == 0
    with pending_while_held(process, first, second, "held", "held-tx"):
        pass
    assert process.value(RECORDS, target_state="COMPLETE_COMMIT") == 1
    assert process.value("kafka_transaction_marker_completion_seconds_count", result="commit") == 1


def test_a_partition_moving_away_drops_its_series(cluster, exporter, tmp_path):
    first, _second = cluster
    moving = next(tid for tid in (f"mover-{i}" for i in range(100)) if transaction_state_partition(tid, 8) == 3)
    run_mix(first.bootstrap_servers, "held", [moving], commits=1, aborts=0)
    process = exporter(first.bootstrap_servers, "--broker-id", "1")
    lag_series = ("txn_exporter_partition_consumer_lag_records", (("partition", "3"),))
    process.wait_for(lambda: lag_series in process.samples(), 30, "partition 3 followed")
    assert process.value("kafka_transactions", state="COMPLETE_COMMIT") >= 1
    before = process.value("kafka_transactions", state="COMPLETE_COMMIT")

    plan = tmp_path / "move.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [{"topic": "__transaction_state", "partition": 3, "replicas": [2]}]})
    )
    result = first.run_tool(
        first.kafka.reassign_partitions_class,
        "--bootstrap-server",
        first.bootstrap_servers,
        "--reassignment-json-file",
        str(plan),
        "--execute",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    process.wait_for(lambda: lag_series not in process.samples(), 60, "partition 3 revoked")
    assert not [k for k in process.samples() if ("partition", "3") in k[1]]
    assert process.value("kafka_transactions", state="COMPLETE_COMMIT") == before - 1
    assert process.value("txn_exporter_partitions_followed", phase="live") == 7
