"""Consume-transform-produce, from Kafka's Java client (the broker version's kafka-clients: TV2 on
4.4.0) and from librdkafka: a consumer in a group, the producer sending the consumer's offsets to its
transaction (sendOffsetsToTransaction / send_offsets_to_transaction). A few transactions committed,
then one held open: the transactions view's row of it lists the group's `__consumer_offsets-N`
partition beside the output's; once aborted, the exporter's record counts equal DumpLogSegments'.
The workloads (txn_workshop.harness.app_workloads) hold a transaction open with a known group id.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from confluent_kafka import Producer

from tests.integration.app_checks import settled_records
from txn_workshop.harness.admin import create_internal_topics, create_topic, partition_count
from txn_workshop.harness.app_workloads import consumer_offsets_partition, java_ctp_held, librdkafka_ctp_held
from txn_workshop.harness.versions import FULL_SUITE_VERSIONS, kafka_version

INPUT, OUTPUT = "ctp-in", "ctp-out"
PARTITIONS = 4
COMMITS = 3
RECORDS = "kafka_transaction_state_log_records_total"
DURATION = "kafka_transaction_duration_seconds_count"
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")


def _row(process, tid: str) -> dict | None:
    status, body = process.get("/transactions")
    assert status == 200, body
    return next((r for r in json.loads(body)["transactions"] if r["transactional_id"] == tid), None)


def _open_with(process, tid: str, partition: str) -> bool:
    row = _row(process, tid)
    return row is not None and row["state"] == "ONGOING" and partition in row["partitions"]


@pytest.mark.parametrize("version", FULL_SUITE_VERSIONS)
def test_consume_transform_produce_lists_the_offsets_partition(own_broker, exporter, version, tmp_path):
    broker = own_broker(
        version=version,
        transaction_version=kafka_version(version).newest_transaction_version,
        transaction_state_partitions=PARTITIONS,
    )
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, INPUT, partitions=2)
    create_topic(bootstrap, OUTPUT, partitions=2)
    create_internal_topics(bootstrap)
    offsets_partitions = partition_count(bootstrap, "__consumer_offsets")
    process = exporter(bootstrap, "--all-partitions")
    process.wait_for(
        lambda: process.value("txn_exporter_partitions_followed", phase="live") == PARTITIONS, 120, "all live"
    )
    feeder = Producer({"bootstrap.servers": bootstrap})
    for n in range(100):
        feeder.produce(INPUT, key=str(n).encode(), value=f"in-{n}".encode())
    assert feeder.flush(30) == 0

    java = java_ctp_held(
        version, bootstrap, "ctp-java-group", "ctp-java", INPUT, OUTPUT, tmp_path / "ctp-java.log", COMMITS
    )
    librdkafka = librdkafka_ctp_held(bootstrap, "ctp-librdkafka-group", "ctp-librdkafka", INPUT, OUTPUT, COMMITS)
    tids = []
    for held in (java, librdkafka):
        with held as run:
            assert run.commits == COMMITS and run.open
            tids.append(run.transactional_id)
            group_partition = f"__consumer_offsets-{consumer_offsets_partition(run.group, offsets_partitions)}"
            # The row of the previous, committed transaction lists the group's partition too: wait for
            # the open one (the view follows the log within the latency resolution, not at once).
            process.wait_for(
                lambda tid=run.transactional_id, partition=group_partition: _open_with(process, tid, partition),
                30,
                f"{run.transactional_id} open with {group_partition}",
            )
            row = _row(process, run.transactional_id)
            assert row is not None and row["state"] == "ONGOING"
            assert {p.rsplit("-", 1)[0] for p in row["partitions"]} == {OUTPUT, "__consumer_offsets"}, row
        assert run.aborts == 1 and not run.open

    dumped = settled_records(broker, lambda tid: tid in tids)
    expected = {s: Counter(r.state for r in dumped)[s] for s in STATES}
    process.wait_for(
        lambda: {s: process.value(RECORDS, target_state=s) or 0 for s in STATES} == expected, 30, f"counts {expected}"
    )
    assert expected["PREPARE_COMMIT"] == expected["COMPLETE_COMMIT"] == 2 * COMMITS
    assert expected["PREPARE_ABORT"] == expected["COMPLETE_ABORT"] == 2
    assert {r: process.value(DURATION, result=r) for r in ("commit", "abort")} == {"commit": 2 * COMMITS, "abort": 2}
    assert process.value("kafka_transaction_timeouts_total") == 0
