"""Rolling upgrades of a real two-broker KRaft cluster, 3.9 -> 4.4 (across 4.0, where the coordinator's
log lines and `TxnTransitMetadata` change format), and 4.1 -> 4.2, with transactions running
throughout and one `txn-exporter run --broker-id N --broker-log` beside each broker, following its
ownership. The marker errors of each mixed-version window are printed by Kafka error name.

How the harness's cluster upgrades: node 1 is broker and the only controller (its metadata log in
its own log dirs), node 2 a broker; both keep their log dirs, cluster id and ports across restarts,
and a restart onto the next version only swaps the jars (and log4j 1 for log4j2 at 4.0). Each
step is one version: node 2 restarted onto it, then node 1, then metadata.version finalized with
Kafka's FeatureCommand, as Kafka's upgrade notes order it (the cluster runs the old
metadata.version until every node runs the new code). `__transaction_state` has its partitions led
half by each broker, replicated on both, so every restart moves coordinators away and back
(controlled shutdown, then a preferred leader election).

Truth at the end is Kafka's DumpLogSegments of every `__transaction_state` partition.

4.1 -> 4.2 (KAFKA-20322's window) also runs Kafka's own Java client beside librdkafka: the 4.1.2
kafka-clients, a TV2 client (KIP-890 part 2: its records carry ClientTransactionVersion 2), riding
out the restarts (txn_workshop.harness.java_workload.java_transactions_running); and the marker errors
are held to what the data brokers returned, read over JMX with Kafka's own JmxTool
(RequestMetrics ErrorsPerSec{request=WriteTxnMarkers}, as tests/integration/broker_truth.py
does). A broker's meters die with it, so each broker's are read just before its stop, after `orders`
(the data topic) was led away from it (a reordered replica list and a preferred election, what the
controlled shutdown would do a moment later): from then on it returns no marker error that its
meters could miss. Transactions of both clients complete in the window itself: node 2 on 4.2
coordinating half the ids and sending their markers to node 1 on 4.1, which leads `orders`.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from contextlib import ExitStack
from typing import NamedTuple

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaPythonPartition

from tests.integration.exporter_process import ExporterProcess
from tests.integration.test_decode_matches_kafka import _kafkas
from txn_workshop import failover
from txn_workshop.harness import jmx
from txn_workshop.harness.admin import TRANSACTION_STATE_TOPIC, create_topic
from txn_workshop.harness.broker import KafkaBroker
from txn_workshop.harness.java_workload import java_transactions_running
from txn_workshop.harness.workload import RunningCounts, transaction_state_partition, transactions_running


class Upgrade(NamedTuple):
    start: str
    # The newest patch of each minor on the way, with the metadata.version that step finalizes.
    steps: tuple[tuple[str, str], ...]
    # The Java TV2 client beside librdkafka, and the marker errors held to the brokers' JMX.
    java: bool = False


# 4.1 -> 4.2 is KAFKA-20322's window: a 4.2.0 coordinator sent WriteTxnMarkers v2, which 4.1 brokers
# do not know, without asking the broker's versions (its marker channel was built with
# discoverBrokerVersions false). 4.2.1 fixed it (javap of TransactionMarkerChannelManager$: the
# NetworkClient's discoverBrokerVersions is false in 4.1.2, true in 4.2.1 and 4.2.2); 4.2.2 is pinned.
UPGRADES = {
    # Straight from the newest 3.x to the newest 4.x, as Kafka's upgrade notes allow (any 3.3.x on):
    # across the 4.0 change of the log lines and TxnTransitMetadata, in one step of the suite's time.
    "3.9-4.4": Upgrade("3.9.2", (("4.4.0", "4.4-IV0"),)),
    "4.1-4.2": Upgrade("4.1.2", (("4.2.2", "4.2-IV1"),), java=True),
}
PARTITIONS = 4
DATA_PARTITIONS = 2
# What KAFKA-20322 looks like (4.2.0 beside 4.1.2, by hand): the 4.1 broker closes the marker channel's
# connection at each WriteTxnMarkers v2 (`ERROR Closing socket ...` with this exception), the coordinator
# logs `Cancelled in-flight WRITE_TXN_MARKERS request ... disconnected` and resends. No partition-level
# error: neither the broker's ErrorsPerSec nor the exporter's marker counters see it.
REFUSED_MARKERS = "Received request for api with key 27 (WriteTxnMarkers) and unsupported version"
STATES = ("EMPTY", "ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT", "COMPLETE_COMMIT", "COMPLETE_ABORT")
LAG = "txn_exporter_partition_consumer_lag_records"


@pytest.fixture(params=list(UPGRADES))
def cluster(request, kafka_broker_factory, tmp_path_factory):
    upgrade = UPGRADES[request.param]
    root = tmp_path_factory.mktemp(f"rolling-upgrade-{request.param}")
    # Leaders move only when the test moves them (shutdown, election), never by the controller's timer.
    fixed = {"auto.leader.rebalance.enable": "false"}
    with kafka_broker_factory.joined_pair(
        root, upgrade.start, transaction_state_partitions=PARTITIONS, broker_properties=fixed, jmx=upgrade.java
    ) as pair:
        first, _ = pair
        create_topic(first.bootstrap_servers, "orders", partitions=DATA_PARTITIONS, replication_factor=2)
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
        yield pair, upgrade


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


def _sum_by_label(exporters, name: str, label: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for _, process in exporters:
        for (n, labels), value in process.samples().items():
            if n == name:
                total[dict(labels)[label]] += int(value)
    return total


def _lead_orders(brokers: dict[int, KafkaBroker], leader: int, follower: int) -> None:
    """Every `orders` partition led by ``leader``: its replica list reordered (no data moves), then a
    preferred leader election. Any WriteTxnMarkers in flight to the old leader is answered by then."""
    bootstrap = ",".join(b.bootstrap_servers for b in brokers.values())
    kafka_python = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        accepted = kafka_python.alter_partition_reassignments(
            {KafkaPythonPartition("orders", p): [leader, follower] for p in range(DATA_PARTITIONS)}, timeout_ms=30000
        )
        assert all(error is None for error in accepted.values()), accepted
    finally:
        kafka_python.close()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 120
    while True:
        partitions = admin.list_topics("orders", timeout=30).topics["orders"].partitions
        if all(m.leader == leader and m.replicas == [leader, follower] for m in partitions.values()):
            break
        assert time.monotonic() < deadline, f"orders not led by {leader}: {partitions}"
        try:
            admin.elect_leaders(
                ElectionType.PREFERRED, [TopicPartition("orders", p) for p in range(DATA_PARTITIONS)]
            ).result(30)
        except Exception:
            pass  # not needed yet (the reordering not applied) or no more (already led)
        time.sleep(0.5)
    time.sleep(2)  # the coordinators' metadata follow: none sends markers to the old leader any more


def _marker_errors_returned(broker: KafkaBroker) -> Counter[str]:
    """The WriteTxnMarkers errors ``broker`` returned since it started, by Kafka error name (JMX)."""
    return Counter({e: n for e, n in jmx.request_errors(broker, "WriteTxnMarkers").items() if e != "NONE" and n})


def _commits_grow(clients: list[tuple[RunningCounts, int]], what: str) -> None:
    """Each client commits at least once per id more than it had."""
    wanted = [(counts, counts.commits + ids) for counts, ids in clients]
    deadline = time.monotonic() + 120
    while any(counts.commits < n for counts, n in wanted):
        assert time.monotonic() < deadline, f"no commits {what}: {[counts for counts, _ in clients]}"
        time.sleep(0.2)


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


def test_rolling_upgrade_keeps_every_count_exact(cluster, exporter, capsys, tmp_path):
    (first, second), upgrade = cluster
    steps = upgrade.steps
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
    start = failover.high_watermarks(first.bootstrap_servers, PARTITIONS)
    ids = _ids_per_partition(2)  # every coordinator has transactions in flight
    java_ids = _ids_per_partition(1, "rolling-java") if upgrade.java else []
    marker_errors: dict[str, Counter[str]] = {}
    returned: dict[str, Counter[str]] = {}  # by broker incarnation: the data brokers' own counts (JMX)
    bootstrap = f"{first.bootstrap_servers},{second.bootstrap_servers}"
    with ExitStack() as running:
        clients = running.enter_context(transactions_running(bootstrap, "orders", ids))
        java = (
            running.enter_context(
                java_transactions_running(upgrade.start, bootstrap, "orders", java_ids, tmp_path / "java-workload.log")
            )
            if java_ids
            else None
        )
        both = [(clients, len(ids)), *([(java, len(java_ids))] if java else [])]
        for version, metadata_version in steps:
            for node, other in ((2, 1), (1, 2)):
                if upgrade.java:
                    _lead_orders(brokers, other, node)
                    returned[f"{node}@{brokers[node].version}"] = _marker_errors_returned(brokers[node])
                # Away: controlled shutdown moves the node's partitions to the other broker.
                brokers[node].stop()
                _wait_all_led_by(brokers[other], dict(exporters)[other])
                # Back: the node on the next version, then a preferred leader election.
                brokers[node].version = version
                brokers[node].start()
                _wait_settled(first, *exporters)
                if node == 2:  # the mixed-version window: node 2 on the next version, node 1 not yet
                    _commits_grow(both, f"with node 2 on {version} and node 1 on {brokers[1].version}")
            _finalize(first, metadata_version)
            marker_errors[version] = _marker_errors(exporters)
        _commits_grow(both, "on the upgraded cluster")
    assert clients.commits > 0 and clients.aborts > 0
    assert java is None or (java.commits > 0 and java.aborts > 0), java
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

    # Counters are exact too: each record counted once, by the exporter whose broker led its partition
    # in the batch's leader epoch (docs/metrics.md, "Counted once, by epoch"): the new leader's
    # exporter counts its epoch's records in the takeover's replay, the old one drains its epoch to
    # the end. The partitions of the other broker stay where they are, followed by the same exporter.
    live = Counter(r["value"]["state"] for (p, offset), r in dumped.items() if offset >= start[p] and r["value"])
    exporters[0][1].wait_for(
        lambda: (
            _sum_by_label(exporters, "kafka_transaction_state_log_records_total", "target_state")
            == {s: live[s] for s in STATES}
        ),
        60,
        f"records by target state {dict(live)}",
    )
    counted = _sum_by_label(exporters, "kafka_transaction_state_log_records_total", "target_state")

    for _, process in exporters:
        assert process.value("txn_exporter_broker_log_skipped_lines_total", reason="unrecognized") == 0
    assert "UNKNOWN" not in marker_errors[steps[-1][0]]

    if java_ids:
        # The Java client ran TV2 throughout: every transaction's records carry ClientTransactionVersion 2.
        versions = Counter(
            r["value"]["client_transaction_version"]
            for r in dumped.values()
            if r["transactional_id"] in java_ids and r["value"] and r["value"]["state"] != "EMPTY"
        )
        assert set(versions) == {2}, versions
    # No broker refused a coordinator's WriteTxnMarkers version (each asks the other's versions first).
    refused = {node: _log_lines(broker, REFUSED_MARKERS) for node, broker in brokers.items()}
    assert refused == {1: 0, 2: 0}, refused
    cancelled = {node: _log_lines(broker, "Cancelled in-flight WRITE_TXN_MARKERS") for node, broker in brokers.items()}
    if upgrade.java:
        # Every marker error a data broker returned, the exporter beside the coordinator that sent the
        # markers counted (its log's line for each partition), by the same error name.
        for node, broker in brokers.items():
            returned[f"{node}@{broker.version}"] = _marker_errors_returned(broker)
        total = sum(returned.values(), Counter())
        exporters[0][1].wait_for(lambda: _marker_errors(exporters) == total, 60, f"marker errors {dict(total)}")
    with capsys.disabled():
        print(
            f"\nrolling upgrade: clients {clients}; Java clients {java}; marker errors the exporters counted "
            f"after each step {marker_errors}; the data brokers returned {returned}; WriteTxnMarkers cancelled "
            f"on a disconnect, by coordinator: {cancelled}; "
            f"records {dict(live)}, counted {dict(counted)}"
        )


def _log_lines(broker: KafkaBroker, text: str) -> int:
    """Lines of ``broker``'s server.log (and its rolled-over files) that contain ``text``."""
    return sum(
        line.count(text) > 0
        for path in broker.logs_dir.glob("server.log*")
        for line in path.read_text(errors="replace").splitlines()
    )


def _marker_errors(exporters) -> Counter[str]:
    return +(
        _sum_by_label(exporters, "kafka_transaction_marker_retries_total", "error")
        + _sum_by_label(exporters, "kafka_transaction_marker_failures_total", "error")
    )


def _ids_per_partition(per_partition: int, prefix: str = "rolling") -> list[str]:
    ids: list[str] = []
    for p in range(PARTITIONS):
        candidates = (f"{prefix}-{i}" for i in range(1000))
        ids += [t for t in candidates if transaction_state_partition(t, PARTITIONS) == p][:per_partition]
    return ids
