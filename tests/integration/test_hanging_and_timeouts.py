"""KIP-588 timeouts, KIP-664 late and hanging transactions, on real two-broker clusters of 4.4.0 and
3.9.2, compared with what Kafka's own kafka-transactions.sh (TransactionsCommand) reports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from txn_workshop.harness.admin import create_internal_topics, create_topic
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS
from txn_workshop.harness.workload import held_commit, run_mix, timed_out_producer, unregistered_transaction

DURATION = "kafka_transaction_duration_seconds_count"


@pytest.fixture(scope="module", params=FULL_SUITE_VERSIONS)
def cluster(request, kafka_broker_factory, tmp_path_factory):
    """Two brokers (markers can be held back). The coordinator sweeps timed-out transactions every
    6 s instead of the harness's 0.5 s, so a timed-out transaction stays ONGOING, late, for a while."""
    root = tmp_path_factory.mktemp(f"hanging-{request.param}")
    sweep = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "6000"}
    with kafka_broker_factory.joined_pair(
        root, request.param, transaction_state_partitions=4, broker_properties=sweep
    ) as (first, second):
        create_topic(first.bootstrap_servers, "held", partitions=1, replication_factor=2)
        create_topic(first.bootstrap_servers, "plain", partitions=2, replication_factor=2)
        yield first, second


def test_timed_out_producer_counts_a_timeout_and_client_aborts_do_not(cluster, exporter):
    first, _ = cluster
    bootstrap = first.bootstrap_servers
    process = exporter(
        bootstrap, "--all-partitions", "--hanging-scan-interval-seconds", "0", "--late-transaction-padding-seconds", "1"
    )
    run_mix(bootstrap, "plain", ["client-aborts"], commits=2, aborts=2)
    process.wait_for(lambda: process.value(DURATION, result="abort") == 2, 30, "two client aborts")
    assert process.value(DURATION, result="commit") == 2
    assert process.value("kafka_transaction_timeouts_total") == 0
    assert process.value("kafka_transactions_late") == 0

    timed_out_producer(bootstrap, "times-out", "plain", transaction_timeout_ms=2000, wait=False)
    # ONGOING past 2 s + 1 s of padding until the coordinator's sweep (every 6 s, at a phase the test
    # does not know) aborts it: late from 3 s after its start until the abort.
    seen_late = []

    def aborted() -> bool:
        seen_late.append(process.value("kafka_transactions_late") == 1)
        return process.value("kafka_transaction_timeouts_total") == 1

    process.wait_for(aborted, 30, "the timeout abort")
    assert process.value("kafka_transactions_late") == 0
    assert process.value(DURATION, result="timeout") == 1
    open_seconds = process.value("kafka_transaction_duration_seconds_sum", result="timeout")
    assert open_seconds > 2.0
    if open_seconds > 2.0 + 1.0 + 1.0:  # late for over a second before the abort: the polls saw it
        assert any(seen_late), f"open {open_seconds} s, never seen late"
    assert process.value(DURATION, result="abort") == 2  # unchanged
    assert process.value("kafka_transaction_producer_id_rotations_total") == 0


def _hanging_json(bootstrap: str, *args: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "exporter", "hanging", "--bootstrap-servers", bootstrap, "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_late_transaction_matches_kafkas_find_hanging(cluster, exporter):
    first, second = cluster
    bootstrap = first.bootstrap_servers
    # transaction.max.timeout.ms is 15 min on the brokers; the exporter is told 0 s so that a
    # transaction held for 2 s (the padding) is already late.
    late_args = ("--max-transaction-timeout-seconds", "0", "--padding-seconds", "2")
    process = exporter(
        bootstrap,
        "--broker-id",
        str(first.node_id),
        "--hanging-scan-interval-seconds",
        "1",
        "--hanging-max-transaction-timeout-seconds",
        "0",
        "--late-transaction-padding-seconds",
        "2",
    )
    process.wait_for(lambda: process.value("kafka_partitions_with_late_transactions") == 0, 30, "a first scan")
    with held_commit(bootstrap, second, "held", "held-late"):
        process.wait_for(lambda: process.value("kafka_partitions_with_late_transactions") == 1, 60, "a late partition")
        assert process.value("kafka_hanging_transactions") == 0

        ours = _hanging_json(bootstrap, "--broker-id", str(first.node_id), *late_args)
        _, producers = first.transactions_table("describe-producers", "--topic", "held", "--partition", "0")
        _, kafka_hanging = first.transactions_table(
            "find-hanging", "--broker-id", str(first.node_id), "--max-transaction-timeout", "0"
        )
    process.wait_for(lambda: process.value("kafka_partitions_with_late_transactions") == 0, 60, "markers written")

    # One late transaction: PREPARE_COMMIT at its coordinator, which still holds the partition.
    (row,) = ours
    assert (row["topic"], row["partition"], row["transactional_id"], row["verdict"]) == ("held", 0, "held-late", "late")
    assert row["coordinator"] == first.node_id and row["age_seconds"] > 2
    # Kafka's describe-producers sees the same open transaction: producer id, epoch, start offset.
    open_rows = [r for r in producers if r[-1] != "None"]
    assert [(int(r[0]), int(r[1]), int(r[-1])) for r in open_rows] == [
        (row["producer_id"], row["epoch"], row["start_offset"])
    ]
    # find-hanging (no padding, age > 0 min) says what we say: late, but not hanging.
    assert kafka_hanging == []
    assert not [r for r in ours if r["verdict"] == "hanging"]


@pytest.mark.parametrize("version", FULL_SUITE_VERSIONS)
def test_hanging_transaction_matches_kafkas_find_hanging(own_broker, exporter, version):
    """A real hanging transaction: records written in a transaction whose coordinator never heard of
    the partition (no AddPartitionsToTxn; the broker's KIP-890 check is off so it accepts them)."""
    broker = own_broker(version=version, broker_properties={"transaction.partition.verification.enable": "false"})
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "unregistered", partitions=1)
    create_internal_topics(bootstrap)
    process = exporter(
        bootstrap,
        "--broker-id",
        str(broker.node_id),
        "--hanging-scan-interval-seconds",
        "1",
        "--hanging-max-transaction-timeout-seconds",
        "0",
        "--late-transaction-padding-seconds",
        "2",
    )
    process.wait_for(lambda: process.value("kafka_hanging_transactions") == 0, 30, "a first scan")

    unregistered_transaction(bootstrap, "ghost", "unregistered")
    process.wait_for(lambda: process.value("kafka_hanging_transactions") == 1, 60, "a hanging transaction")
    assert process.value("kafka_partitions_with_late_transactions") == 1

    (row,) = _hanging_json(
        bootstrap,
        "--broker-id",
        str(broker.node_id),
        "--max-transaction-timeout-seconds",
        "0",
        "--padding-seconds",
        "2",
    )
    assert (row["topic"], row["partition"], row["transactional_id"], row["verdict"]) == (
        "unregistered",
        0,
        "ghost",
        "hanging",
    )
    # Kafka's find-hanging reports the same one: topic, partition, producer id, epoch, start offset.
    _, kafka_hanging = broker.transactions_table(
        "find-hanging", "--broker-id", str(broker.node_id), "--max-transaction-timeout", "0"
    )
    assert [(r[0], int(r[1]), int(r[2]), int(r[3])) for r in kafka_hanging] == [
        ("unregistered", 0, row["producer_id"], row["epoch"])
    ]
    # The exporter's transactions view lists it too, with the same abort command.
    status, body = process.get("/transactions?state=HANGING")
    assert status == 200, body
    (listed,) = json.loads(body)["hanging"]
    assert (listed["transactional_id"], listed["producer_id"], listed["start_offset"]) == (
        "ghost",
        row["producer_id"],
        row["start_offset"],
    )
    assert listed["abort_command"] == (
        f"kafka-transactions.sh --bootstrap-server {bootstrap} abort --topic unregistered"
        f" --partition 0 --start-offset {row['start_offset']}"
    )
