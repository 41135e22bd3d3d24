"""Rolling upgrades of a real two-broker KRaft cluster, 3.9 -> 4.0 (the coordinator's log lines and
`TxnTransitMetadata` change format) -> 4.3 -> 4.4, and 4.1 -> 4.2, with transactions running
throughout and one `txn-exporter run --broker-id N --broker-log` beside each broker, following its
ownership. The marker errors of each mixed-version window are printed by Kafka error name.

How the harness's cluster upgrades: node 1 is broker and the only controller (its metadata log in
its own log dirs), node 2 a broker; both keep their log dirs, cluster id and ports across restarts,
and a restart onto the next version only swaps the jars (and log4j 1 for log4j2 at 4.0). Each
minor is a step: node 2 restarted onto it, then node 1, then metadata.version finalized with
Kafka's FeatureCommand, as Kafka's upgrade notes order it (the cluster runs the old
metadata.version until every node runs the new code). `__transaction_state` has its partitions led
half by each broker, replicated on both, so every restart moves coordinators away and back
(controlled shutdown, then a preferred leader election).

Truth at the end is Kafka's DumpLogSegments of every `__transaction_state` partition.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration.exporter_process import ExporterProcess
from tests.integration.test_decode_matches_kafka import _kafkas
from txn_workshop.harness.admin import TRANSACTION_STATE_TOPIC, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.workload import transaction_state_partition, transactions_running

# Where each upgrade starts, then the newest patch of each minor on the way with the metadata.version
# that step finalizes. 4.1 -> 4.2 is KAFKA-20322's window (a 4.2 coordinator's WriteTxnMarkers v2
# refused by 4.1 brokers).
UPGRADES = {
    "3.9-4.0-4.3-4.4": ("3.9.2", (("4.0.2", "4.0-IV3"), ("4.3.1", "4.3-IV0"), ("4.4.0", "4.4-IV0"))),
    "4.1-4.2": ("4.1.2", (("4.2.2", "4.2-IV1"),)),
}
PARTITIONS = 4
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")
LAG = "txn_exporter_partition_consumer_lag_records"


@pytest.fixture(params=list(UPGRADES))
def cluster(request, kafka_broker_factory, tmp_path_factory):
    start, steps = UPGRADES[request.param]
    root = tmp_path_factory.mktemp(f"rolling-upgrade-{request.param}")
    # Leaders move only when the test moves them (shutdown, election), never by the controller's timer.
    fixed = {"auto.leader.rebalance.enable": "false"}
    with kafka_broker_factory.joined_pair(
        root, start, transaction_state_partitions=PARTITIONS, broker_properties=fixed
    ) as pair:
        first, _ = pair
        create_topic(first.bootstrap_servers, "orders", partitions=2, replication_factor=2)
        plan = root / "plan.json"
        plan.write_text(
            json.dumps(
                {
                    "version": 1,
                    "partitions": [
                        {"topic": TRANSACTION_STATE_TOPIC, "partition": p, "replicas": _preferred(p)}
                        for p in range(PARTITIONS)
                    ],
                }
            )
        )
        result = first.run_tool(
            "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
            "--bootstrap-server",
            first.bootstrap_servers,
            "--reassignment-json-file",
            str(plan),
            "--execute",
        )
        assert result.returncode == 0, result.stdout + result.stderr
        _wait_settled(first)
        yield pair, steps


def _preferred(partition: int) -> list[int]:
    return [1, 2] if partition % 2 == 0 else [2, 1]


def _leaders(broker: KafkaBroker) -> dict[int, tuple[int, list[int]]]:
    topic = (
        AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        .list_topics(TRANSACTION_STATE_TOPIC, timeout=30)
        .topics[TRANSACTION_STATE_TOPIC]
    )
    return {p: (m.leader, sorted(m.isrs)) for p, m in topic.partitions.items()}


def _wait_settled(first: KafkaBroker, *exporters: tuple[int, ExporterProcess]) -> None:
    """Both brokers in every ISR, each `__transaction_state` partition led by its preferred broker,
    and each exporter following exactly the partitions its broker leads, live, source up."""
    admin = AdminClient({"bootstrap.servers": first.bootstrap_servers})
    wanted = {p: (_preferred(p)[0], [1, 2]) for p in range(PARTITIONS)}
    deadline = time.monotonic() + 180
    while _leaders(first) != wanted:
        assert time.monotonic() < deadline, f"not settled: {_leaders(first)}"
        if all(isr == [1, 2] for _, isr in _leaders(first).values()):
            try:
                admin.elect_leaders(
                    ElectionType.PREFERRED, [TopicPartition(TRANSACTION_STATE_TOPIC, p) for p in range(PARTITIONS)]
                ).result(30)
            except Exception:
                pass
        time.sleep(1)
    for node, process in exporters:
        _wait_following(process, node, {p for p in range(PARTITIONS) if _preferred(p)[0] == node})


def _wait_following(process: ExporterProcess, node: int, partitions: set[int]) -> None:
    led = {str(p) for p in partitions}
    process.wait_for(
        lambda: (
            _followed(process) == led
            and process.value("txn_exporter_source_up") == 1
            and process.value("txn_exporter_partitions_followed", phase="live") == len(led)
        ),
        120,
        f"exporter {node} following {sorted(led)}",
    )


def _wait_all_led_by(broker: KafkaBroker, process: ExporterProcess) -> None:
    """Every `__transaction_state` partition led by ``broker`` (the other one is down), and its
    exporter following them all, live."""
    deadline = time.monotonic() + 120
    while any(leader != broker.node_id for leader, _ in _leaders(broker).values()):
        assert time.monotonic() < deadline, f"leaders did not move to {broker.node_id}: {_leaders(broker)}"
        time.sleep(0.5)
    _wait_following(process, broker.node_id, set(range(PARTITIONS)))


def _followed(process: ExporterProcess) -> set[str]:
    return {dict(labels)["partition"] for (name, labels) in process.samples() if name == LAG}


def _lags(process: ExporterProcess) -> dict[int, int]:
    return {int(dict(labels)["partition"]): int(v) for (name, labels), v in process.samples().items() if name == LAG}


def _high_watermarks(broker: KafkaBroker) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "rolling"})
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(TRANSACTION_STATE_TOPIC, p), timeout=30)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def _sum_by_label(exporters, name: str, label: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for _, process in exporters:
        for (n, labels), value in process.samples().items():
            if n == name:
                total[dict(labels)[label]] += int(value)
    return total


def _finalize(first: KafkaBroker, metadata_version: str) -> None:
    result = first.run_tool(
        "org.apache.kafka.tools.FeatureCommand",
        "--bootstrap-server",
        first.bootstrap_servers,
        "upgrade",
        "--metadata",
        metadata_version,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_rolling_upgrade_keeps_every_count_exact(cluster, exporter, capsys):
    (first, second), steps = cluster
    brokers = {1: first, 2: second}
    exporters = [
        (
            node,
            exporter(
                broker.bootstrap_servers,
                "--broker-id",
                str(node),
                "--broker-log",
                str(broker.server_log),
                "--hanging-scan-interval-seconds",
                "0",
            ),
        )
        for node, broker in brokers.items()
    ]
    _wait_settled(first, *exporters)
    start = _high_watermarks(first)
    ids = _ids_per_partition(2)  # every coordinator has transactions in flight
    in_windows = 0  # records written to the partitions on the move, while they moved: see below
    marker_errors: dict[str, Counter[str]] = {}
    bootstrap = f"{first.bootstrap_servers},{second.bootstrap_servers}"
    with transactions_running(bootstrap, "orders", ids) as clients:
        for version, metadata_version in steps:
            for node, other in ((2, 1), (1, 2)):
                moving = [p for p in range(PARTITIONS) if _preferred(p)[0] == node]
                # Away: controlled shutdown moves the node's partitions to the other broker.
                lags, before = _lags(dict(exporters)[node]), _high_watermarks(brokers[other])
                brokers[node].stop()
                _wait_all_led_by(brokers[other], dict(exporters)[other])
                after = _high_watermarks(brokers[other])
                in_windows += sum(after[p] - before[p] + lags.get(p, 0) for p in moving)
                # Back: the node on the next version, then a preferred leader election.
                brokers[node].version = version
                brokers[node].start()
                lags, before = _lags(dict(exporters)[other]), _high_watermarks(brokers[other])
                _wait_settled(first, *exporters)
                after = _high_watermarks(first)
                in_windows += sum(after[p] - before[p] + lags.get(p, 0) for p in moving)
            _finalize(first, metadata_version)
            marker_errors[version] = _sum_by_label(
                exporters, "kafka_transaction_marker_retries_total", "error"
            ) + _sum_by_label(exporters, "kafka_transaction_marker_failures_total", "error")
        time.sleep(2)  # transactions on the upgraded cluster
    assert clients.commits > 0 and clients.aborts > 0
    for _, process in exporters:
        process.wait_for(lambda p=process: p.value("kafka_transactions_with_pending_markers") == 0, 60, "settled")

    # Each partition as its leader has it (the follower's copy may trail by a fetch).
    dumped = {
        (p, offset): record
        for node, broker in brokers.items()
        for (p, offset), record in _kafkas(broker).items()
        if _preferred(p)[0] == node
    }
    last: dict[str, str | None] = {}
    for _, record in sorted(dumped.items()):
        last[record["transactional_id"]] = record["value"] and record["value"]["state"]
    # Gauges are exact: each id counted once, by the exporter of its partition's leader, in the
    # state of its last record (a partition that moved away and back left nothing stale behind).
    expected_ids = Counter(state for state in last.values() if state)  # expired ids are not counted
    exporters[0][1].wait_for(
        lambda: _sum_by_label(exporters, "kafka_transactions", "state") == {s: expected_ids[s] for s in STATES},
        60,
        "transactions by state",
    )

    # Counters count live records only. A partition an exporter takes over is first replayed to its
    # high watermark without counting (README: "Replay, then live"), so the records its new leader
    # wrote after the old exporter dropped it and before the new one took it over are counted by
    # neither: at most the records written to the partitions that moved, in each move (from just
    # before the broker's shutdown until the other broker's exporter followed them live; from just
    # before its restart until the election moved them back and its exporter followed them live),
    # plus those the old exporter had not read yet when the move began (its lag then, as it reports
    # it: Kafka cannot see a consumer's position without a group). The partitions of the other
    # broker stay where they are, followed by the same exporter. None may be counted twice.
    live = Counter(r["value"]["state"] for (p, offset), r in dumped.items() if offset >= start[p] and r["value"])
    counted = _sum_by_label(exporters, "kafka_transaction_state_log_records_total", "target_state")
    assert all(counted[s] <= live[s] for s in STATES), (counted, live)
    assert sum(live.values()) - in_windows <= sum(counted.values()) <= sum(live.values()), (counted, live, in_windows)

    for _, process in exporters:
        assert process.value("txn_exporter_broker_log_skipped_lines_total", reason="unrecognized") == 0
    assert "UNKNOWN" not in marker_errors[steps[-1][0]]
    with capsys.disabled():
        print(
            f"\nrolling upgrade: clients {clients}; marker errors after each step {marker_errors}; "
            f"records {dict(live)}, counted {dict(counted)}, written in restart windows {in_windows}"
        )


def _ids_per_partition(per_partition: int) -> list[str]:
    ids: list[str] = []
    for p in range(PARTITIONS):
        ids += [t for t in (f"rolling-{i}" for i in range(1000)) if transaction_state_partition(t, PARTITIONS) == p][
            :per_partition
        ]
    return ids
