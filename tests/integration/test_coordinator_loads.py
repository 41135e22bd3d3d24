"""The coordinator's loads of `__transaction_state` partitions as the exporter reads them from its log,
held to the coordinator's own JMX (`partition-load-time-max/avg` of transaction-coordinator-metrics,
read with Kafka's JmxTool) on a real coordinator takeover.

Two brokers of the newest version, `__transaction_state` on both (broker 1 leading every partition),
transactions on it, then every partition's leadership moved to broker 2 (its replicas reordered and
the preferred leaders elected): broker 2 loads each one. The exporter beside broker 2 reads its log
from the start, so it sees every load the broker's JMX counted since it started; the broker keeps its
load-time samples for an hour (metrics.sample.window.ms), so its max and avg cover them all.
"""

from __future__ import annotations

import time

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.exporter_process import ExporterProcess
from txn_workshop.harness import jmx
from txn_workshop.harness.admin import TRANSACTION_STATE_TOPIC, create_internal_topics, create_topic
from txn_workshop.harness.versions import DEFAULT_KAFKA_VERSION
from txn_workshop.harness.workload import commit_transactions, reassign_partitions

PARTITIONS = 6
LOAD_TIME = "kafka.server:type=transaction-coordinator-metrics"
DURATION = "kafka_transaction_state_log_load_duration_seconds"
FINISHED = "]: Finished loading "


def _lead_all(first, leader: int, replicas: list[int], plan) -> None:
    """Every `__transaction_state` partition onto `replicas`, led by `leader` (their first)."""
    reassign_partitions(first, {(TRANSACTION_STATE_TOPIC, p): replicas for p in range(PARTITIONS)}, plan)
    admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
    partitions = [TopicPartition(TRANSACTION_STATE_TOPIC, p) for p in range(PARTITIONS)]
    deadline = time.monotonic() + 120
    while True:
        found = admin.list_topics(TRANSACTION_STATE_TOPIC, timeout=30).topics[TRANSACTION_STATE_TOPIC].partitions
        if all(found[p].replicas == replicas and sorted(found[p].isrs) == sorted(replicas) for p in range(PARTITIONS)):
            if all(found[p].leader == leader for p in range(PARTITIONS)):
                return
            admin.elect_leaders(ElectionType.PREFERRED, partitions).result(30)
        assert time.monotonic() < deadline, f"__transaction_state not led by {leader} on {replicas}"
        time.sleep(0.5)


def _finished_lines(broker) -> int:
    return sum(FINISHED in line and "(kafka.coordinator.transaction." in line for line in broker.server_log.open())


def test_a_takeovers_loads_match_the_coordinators_own_load_time(kafka_broker_factory, tmp_path):
    props = {
        "transaction.state.log.num.partitions": str(PARTITIONS),  # the joining broker's too
        "metrics.sample.window.ms": str(3_600_000),
    }
    with kafka_broker_factory.joined_pair(tmp_path, DEFAULT_KAFKA_VERSION, jmx=True, broker_properties=props) as pair:
        first, second = pair
        exporter = ExporterProcess(
            first.bootstrap_servers,
            "--broker-id",
            "2",
            "--broker-log",
            str(second.server_log),
            "--broker-log-from-start",
            log=tmp_path / "exporter.log",
        )
        try:
            create_topic(first.bootstrap_servers, "orders", partitions=2, replication_factor=2)
            create_internal_topics(first.bootstrap_servers)
            _lead_all(first, 1, [1, 2], tmp_path / "to-1.json")
            for n in range(2 * PARTITIONS):  # records in the partitions to load
                commit_transactions(first.bootstrap_servers, f"loaded-{n}", "orders", 2)
            before = _finished_lines(second)

            _lead_all(first, 2, [2, 1], tmp_path / "to-2.json")  # the takeover
            # Each partition taken over is loaded once, and the exporter has read every load's line.
            exporter.wait_for(lambda: _finished_lines(second) >= before + PARTITIONS, 60, "the takeover's loads")
            exporter.wait_for(
                lambda: exporter.value(DURATION + "_count") == _finished_lines(second), 60, "every load read"
            )
            samples = exporter.samples()
            (max_ms,) = jmx.read(second, LOAD_TIME, "partition-load-time-max").values()
            (avg_ms,) = jmx.read(second, LOAD_TIME, "partition-load-time-avg").values()
        finally:
            exporter.stop()

    count = samples[(DURATION + "_count", ())]
    # The same loads, each as the broker recorded it (whole ms): the same mean.
    # (The sum is whole ms in seconds: compared in ms, as integers, not through float division.)
    assert round(samples[(DURATION + "_sum", ())] * 1000) == round(avg_ms * count)
    # The longest lies in the first bucket that holds every load (buckets only bound it).
    buckets = sorted(
        (float(labels[0][1]), value) for (name, labels), value in samples.items() if name == DURATION + "_bucket"
    )
    below, bound = next((buckets[i - 1][0] if i else 0.0, b) for i, (b, n) in enumerate(buckets) if n == count)
    assert below < max_ms / 1000 <= bound, (max_ms, buckets)
    # A leadership change on a fixed version: no load without one, and none left running.
    assert samples[("kafka_transaction_state_log_loads_without_leader_change_total", ())] == 0
    assert samples[("kafka_transaction_state_log_partitions_loading", ())] == 0
